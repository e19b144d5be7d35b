#include "snapshot.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace star::fmnist {
namespace {

constexpr char kSnapshotMagic[8] = {'S', 'T', 'A', 'R', 'S', 'N', 'P', '1'};

}  // namespace

Status WriteSnapshot(const std::string& dir, int64_t iteration, double time_seconds,
                     std::span<const float> params) {
  char name[64];
  std::snprintf(name, sizeof(name), "snap-%012lld.bin", static_cast<long long>(iteration));
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const auto count = static_cast<int64_t>(params.size());
    out.write(kSnapshotMagic, sizeof(kSnapshotMagic));
    out.write(reinterpret_cast<const char*>(&iteration), sizeof(iteration));
    out.write(reinterpret_cast<const char*>(&time_seconds), sizeof(time_seconds));
    out.write(reinterpret_cast<const char*>(&count), sizeof(count));
    out.write(reinterpret_cast<const char*>(params.data()),
              static_cast<std::streamsize>(params.size_bytes()));
    if (!out) return Status::Unavailable("--snapshot-dir: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Unavailable("--snapshot-dir: cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

StatusOr<Snapshot> ReadSnapshot(const std::string& path, size_t expected) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  Snapshot snap;
  int64_t count = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&snap.iteration), sizeof(snap.iteration));
  in.read(reinterpret_cast<char*>(&snap.time_seconds), sizeof(snap.time_seconds));
  in.read(reinterpret_cast<char*>(&count), sizeof(count));
  if (!in || std::memcmp(magic, kSnapshotMagic, sizeof(magic)) != 0 ||
      count != static_cast<int64_t>(expected)) {
    return Status::InvalidArgument(path + ": not a snapshot of this model");
  }
  snap.params.resize(expected);
  in.read(reinterpret_cast<char*>(snap.params.data()),
          static_cast<std::streamsize>(expected * sizeof(float)));
  if (!in) return Status::InvalidArgument(path + ": truncated snapshot");
  return snap;
}

}  // namespace star::fmnist
