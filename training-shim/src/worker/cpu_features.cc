#include "star/shim/cpu_features.h"

#include <fstream>
#include <string>

namespace star::shim {

bool CpuHasNativeBf16() {
  static const bool has = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("flags", 0) == 0) {
        return line.find(" avx512_bf16") != std::string::npos ||
               line.find(" amx_bf16") != std::string::npos;
      }
    }
    return false;
  }();
  return has;
}

}  // namespace star::shim
