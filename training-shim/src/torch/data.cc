#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
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

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// A gzip (or plain) file open for reading, closed when it goes out of scope.
class GzFile {
 public:
  // NotFound if the file cannot be opened.
  static StatusOr<GzFile> Open(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
    return GzFile(path, f);
  }

  // Reads up to `n` bytes into `dst`; fewer only where the file ends. Returns the count.
  StatusOr<int64_t> Read(uint8_t* dst, int64_t n) {
    int64_t got = 0;
    while (got < n) {
      const auto want = static_cast<unsigned>(std::min<int64_t>(n - got, int64_t{1} << 30));
      const int r = gzread(f_.get(), dst + got, want);
      if (r < 0) {
        int code = 0;
        return Status::InvalidArgument(path_ + ": read error: " + gzerror(f_.get(), &code));
      }
      if (r == 0) break;
      got += r;
    }
    return got;
  }

  // The count of bytes left to the end of the file; stops counting once past `cap`.
  StatusOr<int64_t> Remaining(int64_t cap) {
    std::vector<uint8_t> chunk(1 << 16);
    int64_t left = 0;
    while (left <= cap) {
      STAR_ASSIGN_OR_RETURN(int64_t r, Read(chunk.data(), static_cast<int64_t>(chunk.size())));
      if (r == 0) break;
      left += r;
    }
    return left;
  }

 private:
  struct Close {
    void operator()(gzFile f) const { gzclose(f); }
  };
  GzFile(std::string path, gzFile f) : path_(std::move(path)), f_(f) {}
  std::string path_;
  std::unique_ptr<gzFile_s, Close> f_;
};

// An IDX file's dimensions and its payload of bytes, flat.
struct IdxBytes {
  std::vector<int64_t> dims;
  at::Tensor payload;  // uint8, the product of dims long
};

// Reads the IDX header: checks the magic and the dimensions, and returns them.
StatusOr<std::vector<int64_t>> ReadHeader(const std::string& path, GzFile& file, uint32_t magic,
                                          size_t ndims) {
  std::vector<uint8_t> header(4 + 4 * ndims);
  STAR_ASSIGN_OR_RETURN(int64_t got, file.Read(header.data(), static_cast<int64_t>(header.size())));
  if (got < static_cast<int64_t>(header.size())) {
    return Status::InvalidArgument(path + ": truncated header (" + std::to_string(got) + " bytes)");
  }
  if (uint32_t m = BigEndian32(header.data()); m != magic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ": bad magic 0x%08x, expected 0x%08x", m, magic);
    return Status::InvalidArgument(path + buf);
  }
  std::vector<int64_t> dims;
  int64_t total = 1;
  for (size_t i = 0; i < ndims; ++i) {
    int64_t d = BigEndian32(header.data() + 4 + 4 * i);
    if (d <= 0 || d > kMaxBytes) {
      return Status::InvalidArgument(path + ": bad dimension " + std::to_string(i) + ": " +
                                     std::to_string(d));
    }
    dims.push_back(d);
    total *= d;
    if (total > kMaxBytes) return Status::InvalidArgument(path + ": dimensions too large");
  }
  return dims;
}

// Reads the header, then the payload straight into its tensor, which must have exactly
// the declared size. No other copy is made: the training images' 47 MB are the only fresh
// memory the file needs (fresh memory is slow to fault in on some hosts).
StatusOr<IdxBytes> ReadIdx(const std::string& path, uint32_t magic, size_t ndims) {
  STAR_ASSIGN_OR_RETURN(GzFile file, GzFile::Open(path));
  IdxBytes idx;
  STAR_ASSIGN_OR_RETURN(idx.dims, ReadHeader(path, file, magic, ndims));
  int64_t total = 1;
  for (int64_t d : idx.dims) total *= d;
  try {
    idx.payload = at::empty({total}, at::kByte);
  } catch (const c10::Error& e) {
    return Status::Internal(path + ": " + e.what_without_backtrace());
  }
  STAR_ASSIGN_OR_RETURN(int64_t got, file.Read(idx.payload.data_ptr<uint8_t>(), total));
  if (got == total) {
    STAR_ASSIGN_OR_RETURN(int64_t extra, file.Remaining(kMaxBytes));
    got += extra;
  }
  if (got != total) {
    return Status::InvalidArgument(path + ": payload has " + std::to_string(got) +
                                   " bytes, header declares " + std::to_string(total));
  }
  return idx;
}

}  // namespace

StatusOr<torch::Tensor> ReadIdxImages(const std::string& path) {
  STAR_ASSIGN_OR_RETURN(IdxBytes idx, ReadIdx(path, kImagesMagic, 3));
  return idx.payload.view({idx.dims[0], 1, idx.dims[1], idx.dims[2]});
}

StatusOr<torch::Tensor> ReadIdxLabels(const std::string& path) {
  STAR_ASSIGN_OR_RETURN(IdxBytes idx, ReadIdx(path, kLabelsMagic, 1));
  const uint8_t* first = idx.payload.data_ptr<uint8_t>();
  const uint8_t* last = first + idx.dims[0];
  const uint8_t* bad = std::find_if(first, last, [](uint8_t v) { return v > 9; });
  if (bad != last) {
    return Status::InvalidArgument(path + ": label " + std::to_string(*bad) + " at index " +
                                   std::to_string(bad - first) + " is outside [0, 9]");
  }
  try {
    return idx.payload.to(at::kLong);
  } catch (const c10::Error& e) {
    return Status::Internal(path + ": " + e.what_without_backtrace());
  }
}

torch::Tensor ModelInput(const torch::Tensor& images) {
  if (images.scalar_type() != at::kByte) return images;
  return images.to(at::kFloat).div_(255.0).sub_(kFashionMean).div_(kFashionStd);
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
    return Batch{ModelInput(data_->images.index_select(0, idx)),
                 data_->labels.index_select(0, idx)};
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("batch iterator: ") + e.what_without_backtrace());
  }
}

}  // namespace star::shim
