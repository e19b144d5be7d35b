#include "star/agent/host_counters.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "os/limits_check.h"

namespace star::agent {
namespace {

StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

StatusOr<uint64_t> ReadCounter(const std::string& path) {
  auto text = ReadSmallFile(path);
  if (!text.ok()) return text.status();
  std::istringstream in(*text);
  uint64_t v = 0;
  if (!(in >> v)) return Status::InvalidArgument(path + ": not a counter: \"" + *text + "\"");
  return v;
}

// The fields of a "cpu" or "cpuN" line: user nice system idle iowait irq softirq steal.
// guest and guest_nice are already counted in user and nice.
Status AddCpuLine(const std::string& line, HostCounters* c) {
  std::istringstream in(line);
  std::string name;
  in >> name;
  std::vector<uint64_t> f;
  for (uint64_t v = 0; f.size() < 8 && in >> v;) f.push_back(v);
  if (f.size() < 4) return Status::InvalidArgument("/proc/stat: short cpu line \"" + line + "\"");
  f.resize(8, 0);
  const uint64_t idle = f[3] + f[4];
  const uint64_t busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  if (name == "cpu") {
    c->cpu_busy_ticks = busy;
    c->cpu_total_ticks = busy + idle;
  } else {
    ++c->cpus;
  }
  return Status::Ok();
}

Status ReadCpu(const HostPaths& paths, HostCounters* c) {
  const std::string path = paths.proc + "/stat";
  auto text = ReadSmallFile(path);
  if (!text.ok()) return text.status();
  std::istringstream in(*text);
  bool total = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu", 0) != 0) continue;
    if (Status s = AddCpuLine(line, c); !s.ok()) return s;
    total = total || line.rfind("cpu ", 0) == 0;
  }
  if (!total || c->cpus == 0) return Status::InvalidArgument(path + ": no cpu lines");
  return Status::Ok();
}

}  // namespace

StatusOr<HostCounters> ReadHostCounters(const HostPaths& paths, const std::string& interface) {
  HostCounters c;
  c.at = std::chrono::steady_clock::now();
  if (Status s = ReadCpu(paths, &c); !s.ok()) return s;
  if (interface.empty()) return c;
  if (Status s = internal::CheckIfname(interface); !s.ok()) return s;
  const std::string dir = paths.sys + "/class/net/" + interface + "/statistics/";
  auto tx = ReadCounter(dir + "tx_bytes");
  if (!tx.ok()) return tx.status();
  auto rx = ReadCounter(dir + "rx_bytes");
  if (!rx.ok()) return rx.status();
  c.tx_bytes = *tx;
  c.rx_bytes = *rx;
  return c;
}

std::optional<std::string> DefaultRouteInterface(const HostPaths& paths) {
  auto text = ReadSmallFile(paths.proc + "/net/route");
  if (!text.ok()) return std::nullopt;
  std::istringstream in(*text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string iface, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(fields >> iface >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask)) {
      continue;
    }
    if (destination == "00000000" && mask == "00000000") return iface;
  }
  return std::nullopt;
}

std::optional<double> LinkSpeedBitsPerSecond(const HostPaths& paths, const std::string& interface) {
  if (!internal::CheckIfname(interface).ok()) return std::nullopt;
  auto text = ReadSmallFile(paths.sys + "/class/net/" + interface + "/speed");
  if (!text.ok()) return std::nullopt;
  std::istringstream in(*text);
  long long mbit = 0;
  if (!(in >> mbit) || mbit <= 0) return std::nullopt;
  return static_cast<double>(mbit) * 1e6;
}

}  // namespace star::agent
