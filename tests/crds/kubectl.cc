#include "kubectl.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace star::crds {

namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string KubectlPath() {
  const char* k = std::getenv("STAR_KUBECTL");
  return k != nullptr && *k != '\0' ? k : "kubectl";
}

bool HaveCluster() {
  const char* kc = std::getenv("KUBECONFIG");
  return kc != nullptr && *kc != '\0' && ::access(kc, R_OK) == 0;
}

std::string UniqueName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

KubectlResult Kubectl(const std::vector<std::string>& args,
                      const std::optional<std::string>& input) {
  KubectlResult r;
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / UniqueName("star-kubectl");
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    r.err = "cannot create " + dir.string() + ": " + ec.message();
    return r;
  }
  const std::string in = input ? (dir / "in").string() : "/dev/null";
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  if (input) std::ofstream(in, std::ios::binary) << *input;

  std::vector<std::string> argv_s = {KubectlPath()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = "cannot run " + argv_s[0] + ": " + std::to_string(rc);
  } else {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(out);
    r.err = ReadFile(err);
  }
  std::filesystem::remove_all(dir, ec);
  return r;
}

std::vector<KubectlResult> KubectlAll(const std::vector<KubectlCall>& calls, size_t parallel) {
  std::vector<KubectlResult> results(calls.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t t = 0; t < std::max<size_t>(parallel, 1); ++t) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < calls.size();) {
        results[i] = Kubectl(calls[i].args, calls[i].input);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return results;
}

TestNamespace::TestNamespace(const std::string& prefix) : name_(UniqueName(prefix)) {
  created_ = Kubectl({"create", "namespace", name_});
}

TestNamespace::~TestNamespace() {
  if (ok()) Kubectl({"delete", "namespace", name_, "--wait=false", "--ignore-not-found"});
}

}  // namespace star::crds
