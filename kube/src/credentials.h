// What a Client authenticates with, kept current: a static token or certificate, a token
// file read again when it changes, an exec plugin's credential cached until it expires.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "exec_plugin.h"
#include "star/core/status.h"
#include "star/kube/client_options.h"

namespace star::kube {

struct Credentials {
  std::string token;            // "" = no Authorization header
  std::string client_cert_pem;  // "" = no client certificate
  std::string client_key_pem;
  bool operator==(const Credentials&) const = default;
};

class CredentialSource {
 public:
  using Clock = std::chrono::system_clock;
  // Reads the static parts now: InvalidArgument naming the option whose file cannot be
  // read or is empty, or a certificate without its key.
  static StatusOr<std::unique_ptr<CredentialSource>> Create(const ClientOptions& options);

  // The credentials to send now. Thread-safe; a plugin run or a file read happens under a
  // lock, so concurrent callers wait for one refresh.
  StatusOr<Credentials> Get();
  // The server refused `used` (401): the next Get reads the token file again and re-runs
  // the exec plugin. False when nothing could change (static credentials).
  bool Refresh(const Credentials& used);

  // The token and certificate given in the options (before files and plugins).
  const Credentials& static_credentials() const { return static_; }

  // For tests: the clock that exec credentials' expiry is compared with.
  void set_clock(std::function<Clock::time_point()> now) { now_ = std::move(now); }
  int plugin_runs() const { return plugin_runs_; }

 private:
  explicit CredentialSource(const ClientOptions& options) : options_(options) {}
  Status ReadTokenFileIfChanged();
  Status RunPluginIfExpired();

  ClientOptions options_;
  Credentials static_;
  std::function<Clock::time_point()> now_ = [] { return Clock::now(); };
  std::mutex mu_;
  // The token file as last read: its identity (inode, size, mtime) and contents.
  std::string file_stamp_;
  std::string file_token_;
  bool force_reread_ = false;
  std::optional<ExecCredential> exec_;
  int plugin_runs_ = 0;
};

}  // namespace star::kube
