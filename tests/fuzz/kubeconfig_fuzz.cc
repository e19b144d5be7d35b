// star::kube::OptionsFromKubeconfig on any bytes, written to a file in a per-process
// temporary directory ($TMPDIR, else /dev/shm, else /tmp; removed at exit). Both the
// current context and a context named "fuzz" are read. Options it returns name a server
// (kube/client.h: server is required).
//
// Its findings, fixed in kube/src/kubeconfig.cc and kept in the seed corpus: a *-data field
// with a byte >= 0x80 crashed yaml-cpp 0.7's DecodeBase64; a ',' outside flow collections
// made yaml-cpp never return (star::yaml::CheckSyntax now refuses such text first).
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_support.h"
#include "star/kube/client.h"

namespace {

// The directory the input is written to, created on first use and removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = tmp != nullptr && *tmp != '\0' ? tmp
                       : std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                                   : "/tmp";
    std::string templ = base + "/star-fuzz-kubeconfig-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      std::perror(templ.c_str());
      std::abort();
    }
    dir_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

std::string WriteInput(const uint8_t* data, size_t size) {
  static ScratchDir scratch;  // destroyed (and removed) when libFuzzer exits
  const std::string path = scratch.dir() + "/config";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  star::fuzz::Check(f != nullptr, "the kubeconfig file can be written", path);
  const bool written = std::fwrite(data, 1, size, f) == size;
  star::fuzz::Check(std::fclose(f) == 0 && written, "the kubeconfig file can be written", path);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  const std::string path = WriteInput(data, size);
  for (const char* context : {"", "fuzz"}) {
    StatusOr<kube::ClientOptions> options = kube::OptionsFromKubeconfig(path, context);
    if (!options.ok()) continue;
    fuzz::Check(!options->server.empty(), "accepted options name a server");
  }
  return 0;
}
