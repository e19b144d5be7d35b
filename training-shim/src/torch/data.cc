#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include "star/shim/torch_data.h"

namespace star::shim {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
constexpr double kFashionMean = 0.2860;
constexpr double kFashionStd = 0.3530;
constexpr int64_t kMaxBytes = int64_t{1} << 30;  // a sanity cap far above Fashion-MNIST

// Reads the whole (gzip or plain) file. NotFound if it cannot be opened.
StatusOr<std::vector<uint8_t>> ReadAll(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      return Status::InvalidArgument(path + ": read error: " + msg);
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
    if (static_cast<int64_t>(bytes.size()) > kMaxBytes) {
      gzclose(f);
      return Status::InvalidArgument(path + ": larger than 1 GiB, not an IDX file");
    }
  }
  gzclose(f);
  return bytes;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Parses the IDX header: checks the magic and that the payload has exactly the declared
// size. Returns the dimensions; `payload` is set to the first data byte.
StatusOr<std::vector<int64_t>> ParseHeader(const std::string& path,
                                           const std::vector<uint8_t>& bytes, uint32_t magic,
                                           size_t ndims, const uint8_t** payload) {
  size_t header = 4 + 4 * ndims;
  if (bytes.size() < header) {
    return Status::InvalidArgument(path + ": truncated header (" + std::to_string(bytes.size()) +
                                   " bytes)");
  }
  uint32_t got = BigEndian32(bytes.data());
  if (got != magic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ": bad magic 0x%08x, expected 0x%08x", got, magic);
    return Status::InvalidArgument(path + buf);
  }
  std::vector<int64_t> dims;
  int64_t total = 1;
  for (size_t i = 0; i < ndims; ++i) {
    int64_t d = BigEndian32(bytes.data() + 4 + 4 * i);
    if (d <= 0 || d > kMaxBytes) {
      return Status::InvalidArgument(path + ": bad dimension " + std::to_string(i) + ": " +
                                     std::to_string(d));
    }
    dims.push_back(d);
    total *= d;
    if (total > kMaxBytes) return Status::InvalidArgument(path + ": dimensions too large");
  }
  if (static_cast<int64_t>(bytes.size() - header) != total) {
    return Status::InvalidArgument(path + ": payload has " + std::to_string(bytes.size() - header) +
                                   " bytes, header declares " + std::to_string(total));
  }
  *payload = bytes.data() + header;
  return dims;
}

}  // namespace

StatusOr<torch::Tensor> ReadIdxImages(const std::string& path) {
  STAR_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadAll(path));
  const uint8_t* payload = nullptr;
  STAR_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        ParseHeader(path, bytes, kImagesMagic, 3, &payload));
  try {
    at::Tensor raw = at::from_blob(const_cast<uint8_t*>(payload), {dims[0], 1, dims[1], dims[2]},
                                   at::kByte);
    return raw.to(at::kFloat).div_(255.0).sub_(kFashionMean).div_(kFashionStd);
  } catch (const c10::Error& e) {
    return Status::Internal(path + ": " + e.what_without_backtrace());
  }
}

StatusOr<torch::Tensor> ReadIdxLabels(const std::string& path) {
  STAR_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadAll(path));
  const uint8_t* payload = nullptr;
  STAR_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        ParseHeader(path, bytes, kLabelsMagic, 1, &payload));
  const uint8_t* bad = std::find_if(payload, payload + dims[0], [](uint8_t v) { return v > 9; });
  if (bad != payload + dims[0]) {
    return Status::InvalidArgument(path + ": label " + std::to_string(*bad) + " at index " +
                                   std::to_string(bad - payload) + " is outside [0, 9]");
  }
  try {
    return at::from_blob(const_cast<uint8_t*>(payload), {dims[0]}, at::kByte).to(at::kLong);
  } catch (const c10::Error& e) {
    return Status::Internal(path + ": " + e.what_without_backtrace());
  }
}

StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir, FashionMnistSplit split) {
  std::string prefix = dir + (split == FashionMnistSplit::kTrain ? "/train" : "/t10k");
  std::string images_path = prefix + "-images-idx3-ubyte.gz";
  std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  ImageDataset data;
  STAR_ASSIGN_OR_RETURN(data.images, ReadIdxImages(images_path));
  STAR_ASSIGN_OR_RETURN(data.labels, ReadIdxLabels(labels_path));
  if (data.images.size(0) != data.labels.size(0)) {
    return Status::InvalidArgument(images_path + " has " + std::to_string(data.images.size(0)) +
                                   " images but " + labels_path + " has " +
                                   std::to_string(data.labels.size(0)) + " labels");
  }
  if (data.images.size(2) != 28 || data.images.size(3) != 28) {
    return Status::InvalidArgument(images_path + ": images are " +
                                   std::to_string(data.images.size(2)) + "x" +
                                   std::to_string(data.images.size(3)) + ", expected 28x28");
  }
  return data;
}

StatusOr<ShardRange> ShardOf(int64_t num_samples, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    return Status::InvalidArgument("shard: rank " + std::to_string(rank) + " not in [0, " +
                                   std::to_string(world) + ")");
  }
  if (num_samples < world) {
    return Status::InvalidArgument("shard: " + std::to_string(num_samples) +
                                   " samples cannot be split over " + std::to_string(world) +
                                   " workers");
  }
  int64_t base = num_samples / world;
  int64_t extra = num_samples % world;
  ShardRange r;
  r.begin = rank * base + std::min<int64_t>(rank, extra);
  r.end = r.begin + base + (rank < extra ? 1 : 0);
  return r;
}

StatusOr<BatchIterator> BatchIterator::Create(const ImageDataset* data, ShardRange shard,
                                              uint64_t seed) {
  if (data == nullptr || shard.begin < 0 || shard.size() < 1 || shard.end > data->size()) {
    return Status::InvalidArgument("batch iterator: shard [" + std::to_string(shard.begin) + ", " +
                                   std::to_string(shard.end) + ") is empty or outside the " +
                                   std::to_string(data == nullptr ? 0 : data->size()) +
                                   " samples");
  }
  try {
    return BatchIterator(data, shard, seed);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("batch iterator: ") + e.what_without_backtrace());
  }
}

BatchIterator::BatchIterator(const ImageDataset* data, ShardRange shard, uint64_t seed)
    : data_(data), shard_(shard), seed_(seed) {
  Reshuffle();
}

void BatchIterator::Reshuffle() {
  // A private generator: the order depends only on (seed, epoch), not on global RNG use.
  at::Generator gen = at::detail::createCPUGenerator(seed_ * 1000003ULL + epoch_);
  order_ = at::randperm(shard_.size(), gen, at::kLong).add_(shard_.begin);
  pos_ = 0;
}

StatusOr<Batch> BatchIterator::Next(int64_t batch_size) {
  if (batch_size < 1) {
    return Status::InvalidArgument("batch size must be >= 1, got " + std::to_string(batch_size));
  }
  try {
    std::vector<at::Tensor> parts;
    int64_t need = batch_size;
    while (need > 0) {
      if (pos_ == shard_.size()) {
        ++epoch_;
        Reshuffle();
      }
      int64_t take = std::min(need, shard_.size() - pos_);
      parts.push_back(order_.narrow(0, pos_, take));
      pos_ += take;
      need -= take;
    }
    at::Tensor idx = parts.size() == 1 ? parts[0] : at::cat(parts);
    samples_seen_ += batch_size;
    return Batch{data_->images.index_select(0, idx), data_->labels.index_select(0, idx)};
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("batch iterator: ") + e.what_without_backtrace());
  }
}

}  // namespace star::shim
