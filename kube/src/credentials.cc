// Token files are stat'ed on every request (cheap) and read when their identity changes:
// the kubelet swaps a projected token's symlink, which changes the inode.
#include "credentials.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace star::kube {
namespace {

// How long before its expiry an exec credential is renewed.
constexpr std::chrono::seconds kExpiryMargin{10};

StatusOr<std::string> ReadWhole(const std::string& path, const std::string& option) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return Status::InvalidArgument("kube client: " + option + " " + path + ": cannot be read");
  if (text.str().empty()) return Status::InvalidArgument("kube client: " + option + " " + path + ": empty");
  return text.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The file's (inode, size, mtime) as text; "" when it cannot be stat'ed.
std::string Stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_ino) + "/" + std::to_string(st.st_size) + "/" + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec);
}

// `file` when set, else `data`; both "" = none.
StatusOr<std::string> FileOrData(const std::string& file, const std::string& data, const std::string& option) {
  if (!file.empty()) return ReadWhole(file, option);
  return data;
}

}  // namespace

StatusOr<std::unique_ptr<CredentialSource>> CredentialSource::Create(const ClientOptions& options) {
  std::unique_ptr<CredentialSource> source(new CredentialSource(options));
  Credentials& c = source->static_;
  c.token = options.token;
  STAR_ASSIGN_OR_RETURN(c.client_cert_pem,
                        FileOrData(options.client_cert_file, options.client_cert_data, "client_cert_file"));
  STAR_ASSIGN_OR_RETURN(c.client_key_pem,
                        FileOrData(options.client_key_file, options.client_key_data, "client_key_file"));
  if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
    return Status::InvalidArgument(std::string("kube client: ") +
                                   (c.client_cert_pem.empty() ? "client_cert_file: missing (client_key_file needs it)"
                                                              : "client_key_file: missing (client_cert_file needs it)"));
  }
  if (!options.token_file.empty()) STAR_RETURN_IF_ERROR(source->ReadTokenFileIfChanged());
  return source;
}

Status CredentialSource::ReadTokenFileIfChanged() {
  const std::string stamp = Stamp(options_.token_file);
  if (!force_reread_ && !stamp.empty() && stamp == file_stamp_) return Status::Ok();
  StatusOr<std::string> text = ReadWhole(options_.token_file, "token_file");
  if (!text.ok() || Trim(*text).empty()) {
    // A rotation in progress: keep the token read before, if there is one.
    if (!file_token_.empty()) return Status::Ok();
    return text.ok() ? Status::InvalidArgument("kube client: token_file " + options_.token_file + ": empty")
                     : text.status();
  }
  file_token_ = Trim(*text);
  file_stamp_ = stamp;
  force_reread_ = false;
  return Status::Ok();
}

Status CredentialSource::RunPluginIfExpired() {
  if (exec_ && (!exec_->expires || now_() + kExpiryMargin < *exec_->expires)) return Status::Ok();
  ++plugin_runs_;
  StatusOr<ExecCredential> fresh = RunExecPlugin(*options_.exec, options_.server, options_.ca_data);
  if (!fresh.ok()) return fresh.status();
  exec_ = *fresh;
  return Status::Ok();
}

StatusOr<Credentials> CredentialSource::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  Credentials c = static_;
  if (!options_.token_file.empty()) {
    STAR_RETURN_IF_ERROR(ReadTokenFileIfChanged());
    c.token = file_token_;
  }
  if (options_.exec) {
    STAR_RETURN_IF_ERROR(RunPluginIfExpired());
    if (!exec_->token.empty()) c.token = exec_->token;
    if (!exec_->client_cert_pem.empty()) {
      c.client_cert_pem = exec_->client_cert_pem;
      c.client_key_pem = exec_->client_key_pem;
    }
  }
  return c;
}

bool CredentialSource::Refresh(const Credentials& used) {
  std::lock_guard<std::mutex> lock(mu_);
  bool changing = false;
  if (!options_.token_file.empty()) {
    force_reread_ = true;
    changing = true;
  }
  if (options_.exec && exec_ && (exec_->token == used.token || exec_->client_cert_pem == used.client_cert_pem)) {
    exec_.reset();  // the plugin runs again on the next Get
    changing = true;
  }
  return changing;
}

}  // namespace star::kube
