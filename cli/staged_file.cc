#include "staged_file.h"

#include <cstdio>

namespace star::cli {
namespace {

std::string PartialOf(const std::string& path) { return path + ".partial"; }

}  // namespace

StagedFile::~StagedFile() {
  if (!stream_.is_open() && !written_) return;
  stream_.close();
  std::remove(PartialOf(path_).c_str());
}

Status StagedFile::Open(const std::string& flag, const std::string& path) {
  if (path.empty()) return Status::Ok();
  flag_ = flag;
  path_ = path;
  stream_.open(PartialOf(path));
  if (!stream_) return Status::NotFound(flag + ": cannot write \"" + path + "\"");
  return Status::Ok();
}

Status StagedFile::Close() {
  if (!stream_.is_open()) return Status::Ok();
  stream_.close();
  if (!stream_) {
    std::remove(PartialOf(path_).c_str());
    return Status::Unavailable(flag_ + ": writing \"" + path_ + "\" failed");
  }
  written_ = true;
  return Status::Ok();
}

Status StagedFile::Commit() {
  if (Status s = Close(); !s.ok()) return s;
  if (!written_) return Status::Ok();
  written_ = false;
  const std::string partial = PartialOf(path_);
  if (std::rename(partial.c_str(), path_.c_str()) != 0) {
    std::remove(partial.c_str());
    return Status::Unavailable(flag_ + ": cannot replace \"" + path_ + "\"");
  }
  return Status::Ok();
}

}  // namespace star::cli
