// Shared by the Kubernetes-source tests of star-agent.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace star::agent::testing {

// A NodeAllocation for `node` with one pod (ns/worker-0, `uid`) at `quota_millicores`.
inline nlohmann::json OneWorkerAllocation(const std::string& node, const std::string& uid,
                                          int64_t quota_millicores) {
  return {{"apiVersion", "star.dev/v1alpha1"},
          {"kind", "NodeAllocation"},
          {"metadata", {{"name", node}}},
          {"spec",
           {{"pods",
             {{{"namespace", "ns"},
               {"name", "worker-0"},
               {"uid", uid},
               {"cpu", {{"quotaMillicores", quota_millicores}, {"weight", 100}}}}}}}}};
}

}  // namespace star::agent::testing
