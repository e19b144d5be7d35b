#include "star/yaml/to_json.h"
#include "star/agent/allocation_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

namespace star::agent {

StatusOr<DesiredState> DesiredStateFromJson(const nlohmann::json& j, const std::string& node) {
  DesiredState d;
  STAR_ASSIGN_OR_RETURN(d.allocation, api::NodeAllocationFromJson(j));
  if (d.allocation.name != node) {
    return Status::InvalidArgument("metadata.name: this allocation is for node \"" +
                                   d.allocation.name + "\", this agent runs on \"" + node + "\"");
  }
  const auto meta = j.find("metadata");
  const auto ann = meta->find("annotations");
  if (ann != meta->end() && ann->is_object()) {
    for (const auto& [key, value] : ann->items()) {
      if (key.rfind(kInterfaceAnnotationPrefix, 0) != 0) continue;
      const std::string field = "metadata.annotations[\"" + key + "\"]";
      const std::string uid = key.substr(kInterfaceAnnotationPrefix.size());
      STAR_RETURN_IF_ERROR(CheckPodUid(uid, field));
      if (!value.is_string()) return Status::InvalidArgument(field + ": must be a string");
      STAR_RETURN_IF_ERROR(CheckInterfaceName(value.get<std::string>(), field));
      d.interfaces[uid] = value.get<std::string>();
    }
  }
  return d;
}

StatusOr<DesiredState> DesiredStateFromText(const std::string& text, const std::string& node) {
  // JSON, or YAML as `kubectl get nodeallocation NODE -o yaml` prints it.
  STAR_ASSIGN_OR_RETURN(std::vector<nlohmann::json> docs, yaml::ToJson(text, "allocation"));
  if (docs.size() != 1) {
    return Status::InvalidArgument("allocation: want one document (a NodeAllocation), found " +
                                   std::to_string(docs.size()));
  }
  if (!docs[0].is_object()) return Status::InvalidArgument("must be a JSON or YAML object (a NodeAllocation)");
  return DesiredStateFromJson(docs[0], node);
}

FileSource::FileSource(std::string path, std::string node)
    : path_(std::move(path)), node_(std::move(node)) {}

StatusOr<bool> FileSource::Poll() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    const int err = errno;
    seen_ = false;  // re-check fully once it is back
    return Status::NotFound(path_ + ": " + std::strerror(err));
  }
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                           st.st_mtim.tv_nsec;
  if (seen_ && st.st_size == seen_size_ && mtime_ns == seen_mtime_ns_ &&
      static_cast<int64_t>(st.st_ino) == seen_ino_) {
    if (!seen_status_.ok()) return seen_status_;
    return false;
  }
  seen_ = true;
  seen_size_ = st.st_size;
  seen_mtime_ns_ = mtime_ns;
  seen_ino_ = static_cast<int64_t>(st.st_ino);

  auto result = [&]() -> StatusOr<bool> {
    if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path_ + ": not a regular file");
    if (st.st_size > kMaxBytes) {
      return Status::InvalidArgument(path_ + ": larger than " + std::to_string(kMaxBytes) +
                                     " bytes");
    }
    std::ifstream in(path_, std::ios::binary);
    if (!in) return Status::Unavailable(path_ + ": cannot open: " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const size_t hash = std::hash<std::string>{}(text);
    if (desired_ && hash == good_hash_) return false;
    auto d = DesiredStateFromText(text, node_);
    if (!d.ok()) return d.status().WithPrefix(path_);
    good_hash_ = hash;
    const bool changed = !desired_ || !(*desired_ == *d);
    desired_ = std::move(d).value();
    return changed;
  }();
  seen_status_ = result.status();
  return result;
}

}  // namespace star::agent
