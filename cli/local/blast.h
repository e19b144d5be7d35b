// `star blast`: the co-located sender of a `--inject worker=W,bwneighbor=RATE` and its
// sink (started by `star local`, one in the worker's network namespace, one in the run's
// peer namespace). The sender streams as fast as TCP lets it; the uplink's shaping
// (Host::SetUplinkShare) holds it to its share, as a co-located job's bulk transfer is.
#pragma once

#include <string>

namespace star::local {

// Accepts connections on 0.0.0.0:`port` and discards what arrives, for at most `seconds`.
// Exit status 0, or 1 (with the reason on stderr) when it cannot listen.
int RunBlastSink(int port, double seconds);

// Connects to `address` ("A.B.C.D:PORT"; retried for up to 10 s while nothing listens
// there yet) and sends until `seconds` have passed or the sink goes away. Exit status 0,
// or 1 with the reason on stderr (a bad address, no sink within 10 s).
int RunBlastSender(const std::string& address, double seconds);

}  // namespace star::local
