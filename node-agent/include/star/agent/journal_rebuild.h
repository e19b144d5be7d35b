// What to restore once the journal is lost (corrupt, and moved aside): the originals the
// node still shows.
//
// The kubelet derives a pod cgroup's CPU limits from its containers' and writes each
// container's own cgroup too; the agent only ever writes pod cgroups. So for every pod
// cgroup under the pods hierarchy (the three QoS levels of the driver, below the kubelet's
// cgroup root), the pod's own limits are rebuilt from the cgroups directly below it (its
// containers and its sandbox):
//   quota  = the sum of the children's quotas, each converted to the pod's period, when
//            every child has one; else -1 (unlimited: each container's own quota still
//            bounds it, as the kubelet leaves a pod with a container without a limit);
//   weight = the sum of the children's weights, within 1..10000;
//   period = the pod's.
// Network shaping cannot be rebuilt this way (which interface is a pod's comes from its
// allocation): see ReconcilerOptions::unshaped_net_originals.
#pragma once

#include <string_view>

#include "star/agent/journal.h"
#include "star/agent/node_os.h"
#include "star/agent/pod_cgroup.h"
#include "star/core/status.h"

namespace star::agent {

// The rebuilt originals of every pod cgroup that differs from them (a pod showing its own
// limits, or without children, has nothing to restore and is left out), keyed by the uid
// in the cgroup's name. A missing QoS level or a pod that disappears meanwhile is skipped;
// other NodeOs errors are returned.
// `root` is the kubelet's --cgroup-root ("" = the hierarchy root).
[[nodiscard]] StatusOr<JournalEntries> RebuildOriginals(NodeOs& os, CgroupDriver driver,
                                                        std::string_view root);

}  // namespace star::agent
