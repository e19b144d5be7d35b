#include "star/agent/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "star/agent/pod_cgroup.h"
#include "star/agent/quantity.h"

namespace star::agent {
namespace {

using nlohmann::json;

Status Bad(const std::string& field, const std::string& what) {
  return Status::InvalidArgument(field + ": " + what);
}

StatusOr<int64_t> GetInt(const json& obj, const std::string& key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) return Bad(path + "." + key, "required field is missing");
  if (!it->is_number_integer()) return Bad(path + "." + key, "must be an integer");
  return it->get<int64_t>();
}

StatusOr<std::string> GetString(const json& obj, const std::string& key,
                                const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) return Bad(path + "." + key, "required field is missing");
  if (!it->is_string()) return Bad(path + "." + key, "must be a string");
  return it->get<std::string>();
}

Status CheckCgroupPath(const std::string& p, const std::string& field) {
  if (p.empty() || p.front() == '/' || p.find('\0') != std::string::npos ||
      p.find('\n') != std::string::npos) {
    return Bad(field, "not a relative cgroup path");
  }
  std::stringstream ss(p);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty() || part == "." || part == "..") return Bad(field, "not a relative cgroup path");
  }
  return Status::Ok();
}

// Limits as the kernel can hold them: quota -1 (unlimited) or 1..kMaxQuotaUs, period
// 1000..1000000, weight 1..10000, rates >= 0.
Status CheckCpuOriginal(const CpuLimits& l, const std::string& p) {
  if (l.quota_us != -1 && (l.quota_us < 1 || l.quota_us > kMaxQuotaUs)) {
    return Bad(p + ".quotaUs", "must be -1 or in [1, " + std::to_string(kMaxQuotaUs) + "]");
  }
  if (l.period_us < 1000 || l.period_us > 1000000) return Bad(p + ".periodUs", "must be in [1000, 1000000]");
  if (l.weight < 1 || l.weight > 10000) return Bad(p + ".weight", "must be in [1, 10000]");
  return Status::Ok();
}

StatusOr<JournalEntry> ParseEntry(const json& j, const std::string& path) {
  if (!j.is_object()) return Bad(path, "must be an object");
  JournalEntry e;
  for (const auto& [key, value] : j.items()) {
    if (key != "cpu" && key != "net") return Bad(path + "." + key, "unknown field");
  }
  if (auto it = j.find("cpu"); it != j.end()) {
    const std::string p = path + ".cpu";
    if (!it->is_object()) return Bad(p, "must be an object");
    CpuOriginal c;
    STAR_ASSIGN_OR_RETURN(c.cgroup, GetString(*it, "cgroup", p));
    STAR_RETURN_IF_ERROR(CheckCgroupPath(c.cgroup, p + ".cgroup"));
    STAR_ASSIGN_OR_RETURN(c.limits.quota_us, GetInt(*it, "quotaUs", p));
    STAR_ASSIGN_OR_RETURN(c.limits.period_us, GetInt(*it, "periodUs", p));
    STAR_ASSIGN_OR_RETURN(c.limits.weight, GetInt(*it, "weight", p));
    STAR_RETURN_IF_ERROR(CheckCpuOriginal(c.limits, p));
    e.cpu = c;
  }
  if (auto it = j.find("net"); it != j.end()) {
    const std::string p = path + ".net";
    if (!it->is_object()) return Bad(p, "must be an object");
    NetOriginal n;
    STAR_ASSIGN_OR_RETURN(n.interface, GetString(*it, "interface", p));
    STAR_RETURN_IF_ERROR(CheckInterfaceName(n.interface, p + ".interface"));
    STAR_ASSIGN_OR_RETURN(n.limits.egress_bits_per_second, GetInt(*it, "egressBitsPerSecond", p));
    STAR_ASSIGN_OR_RETURN(n.limits.ingress_bits_per_second,
                          GetInt(*it, "ingressBitsPerSecond", p));
    if (n.limits.egress_bits_per_second < 0) return Bad(p + ".egressBitsPerSecond", "must be >= 0");
    if (n.limits.ingress_bits_per_second < 0) return Bad(p + ".ingressBitsPerSecond", "must be >= 0");
    STAR_ASSIGN_OR_RETURN(int64_t prio, GetInt(*it, "priority", p));
    if (prio < 0 || prio > 7) return Bad(p + ".priority", "must be in [0, 7]");
    n.limits.priority = static_cast<int>(prio);
    e.net = n;
  }
  return e;
}

// Writes `data` to `path` atomically: temp file in the same directory, fsync, rename,
// fsync of the directory. errno-based failures become Unavailable.
Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  auto fail = [&](const std::string& what) {
    return Status::Unavailable("journal " + path + ": " + what + ": " + std::strerror(errno));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail("open " + tmp);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = fail("write " + tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status s = fail("fsync " + tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = fail("rename");
    ::unlink(tmp.c_str());
    return s;
  }
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: the rename is already visible
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace

std::string SerializeJournal(const JournalEntries& entries) {
  json pods = json::object();
  for (const auto& [uid, e] : entries) {
    json je = json::object();
    if (e.cpu) {
      je["cpu"] = {{"cgroup", e.cpu->cgroup},
                   {"quotaUs", e.cpu->limits.quota_us},
                   {"periodUs", e.cpu->limits.period_us},
                   {"weight", e.cpu->limits.weight}};
    }
    if (e.net) {
      je["net"] = {{"interface", e.net->interface},
                   {"egressBitsPerSecond", e.net->limits.egress_bits_per_second},
                   {"ingressBitsPerSecond", e.net->limits.ingress_bits_per_second},
                   {"priority", e.net->limits.priority}};
    }
    pods[uid] = std::move(je);
  }
  return json{{"version", 1}, {"pods", std::move(pods)}}.dump(2) + "\n";
}

StatusOr<JournalEntries> ParseJournal(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("not valid JSON");
  if (!j.is_object()) return Bad("(root)", "must be an object");
  auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() != 1) {
    return Bad("version", "must be 1");
  }
  auto pods = j.find("pods");
  if (pods == j.end() || !pods->is_object()) return Bad("pods", "must be an object");
  JournalEntries out;
  for (const auto& [uid, value] : pods->items()) {
    const std::string p = "pods." + uid;
    STAR_RETURN_IF_ERROR(CheckPodUid(uid, "pods key"));
    STAR_ASSIGN_OR_RETURN(out[uid], ParseEntry(value, p));
  }
  return out;
}

StatusOr<std::string> MoveJournalAside(const std::string& path,
                                       std::chrono::system_clock::time_point now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const std::string base = path + ".corrupt-" + stamp;
  std::string target = base;
  for (int i = 1; i < 100 && ::access(target.c_str(), F_OK) == 0; ++i) {
    target = base + "." + std::to_string(i);
  }
  if (::rename(path.c_str(), target.c_str()) != 0) {
    return Status::Unavailable("journal " + path + ": cannot move it to " + target + ": " +
                               std::strerror(errno));
  }
  return target;
}

StatusOr<Journal> Journal::Open(std::string path, bool* corrupt) {
  if (corrupt != nullptr) *corrupt = false;
  if (path.empty()) return Status::InvalidArgument("journal: path is empty");
  Journal journal(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return journal;  // empty
    return Status::FailedPrecondition("journal " + path + ": cannot read: " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = ParseJournal(ss.str());
  if (!parsed.ok()) {
    if (corrupt != nullptr) *corrupt = true;
    return Status::FailedPrecondition("journal " + path + ": corrupt (" +
                                      parsed.status().message() + ")");
  }
  journal.entries_ = std::move(parsed).value();
  return journal;
}

Journal Journal::InMemory() { return Journal(""); }

const JournalEntry* Journal::Find(const std::string& uid) const {
  auto it = entries_.find(uid);
  return it == entries_.end() ? nullptr : &it->second;
}

Status Journal::Commit(const std::map<std::string, std::optional<JournalEntry>>& changes) {
  if (changes.empty()) return Status::Ok();
  JournalEntries next = entries_;
  for (const auto& [uid, e] : changes) {
    if (e) {
      next[uid] = *e;
    } else {
      next.erase(uid);
    }
  }
  if (!path_.empty()) STAR_RETURN_IF_ERROR(WriteFileAtomically(path_, SerializeJournal(next)));
  entries_ = std::move(next);
  ++writes_;
  return Status::Ok();
}

}  // namespace star::agent
