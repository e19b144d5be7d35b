// Fashion-MNIST for the LibTorch trainer: IDX file loading, per-worker sharding, and a
// seeded batch iterator whose batch size may change every iteration.
//
// Errors are Status values naming the file; nothing here throws.
#pragma once

#include <cstdint>
#include <string>

#include <torch/types.h>

#include "star/core/status.h"

namespace star::shim {

// Where the Debian package dataset-fashion-mnist installs the files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

enum class FashionMnistSplit { kTrain, kTest };

// A labelled image set held in memory.
struct ImageDataset {
  // (N, 1, 28, 28): uint8 pixels as stored (47 MB for the training set, where float32
  // would take 188 MB), or float32 already normalised. ModelInput() makes a batch of
  // either the model's input.
  torch::Tensor images;
  torch::Tensor labels;  // (N) int64 in [0, 9]
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Reads an IDX3 image file (gzip or plain; magic 0x00000803) as (N, 1, rows, cols) uint8
// pixels. Errors: NotFound when the file cannot be opened, InvalidArgument for a bad
// magic number, bad dimensions or a payload shorter or longer than the header declares;
// the message names the file.
[[nodiscard]] StatusOr<torch::Tensor> ReadIdxImages(const std::string& path);

// Reads an IDX1 label file (magic 0x00000801) as (N) int64. Same errors as above, plus
// InvalidArgument for a label outside [0, 9].
[[nodiscard]] StatusOr<torch::Tensor> ReadIdxLabels(const std::string& path);

// The model's input from stored images: uint8 pixels become float32 normalised with the
// training set's mean and std, (x/255 - 0.2860) / 0.3530; float32 images are returned as
// they are. Throws c10::Error as ATen does (callers catch it).
torch::Tensor ModelInput(const torch::Tensor& images);

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from `dir` and checks that the
// image and label counts agree.
[[nodiscard]] StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir,
                                                      FashionMnistSplit split);

// Sample range [begin, end) of one worker.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Worker `rank` of `world` gets a contiguous, disjoint slice of [0, num_samples); the
// slices cover everything and their sizes differ by at most one. InvalidArgument unless
// 0 <= rank < world and world <= num_samples.
[[nodiscard]] StatusOr<ShardRange> ShardOf(int64_t num_samples, int rank, int world);

// One mini-batch (views into nothing: owns its tensors).
struct Batch {
  torch::Tensor images;  // (B, 1, 28, 28) float32
  torch::Tensor labels;  // (B) int64
  int64_t size() const { return labels.size(0); }
};

// Draws batches from one shard. Each epoch visits every sample of the shard exactly once
// in an order shuffled by (seed, epoch); a batch that reaches the end of an epoch is
// completed from the next epoch, so every batch has exactly the requested size (the
// global batch stays what the Decision asked for). Not thread-safe; the dataset must
// outlive the iterator.
class BatchIterator {
 public:
  // InvalidArgument if the shard is empty or lies outside the dataset.
  [[nodiscard]] static StatusOr<BatchIterator> Create(const ImageDataset* data, ShardRange shard,
                                                      uint64_t seed);

  // The next `batch_size` samples; batch_size may differ from call to call.
  // InvalidArgument if batch_size < 1.
  [[nodiscard]] StatusOr<Batch> Next(int64_t batch_size);

  // Epochs begun so far minus one: 0 during the first pass over the shard.
  int64_t epoch() const { return epoch_; }
  // Samples handed out so far, over all epochs.
  int64_t samples_seen() const { return samples_seen_; }

 private:
  BatchIterator(const ImageDataset* data, ShardRange shard, uint64_t seed);
  void Reshuffle();

  const ImageDataset* data_;
  ShardRange shard_;
  uint64_t seed_;
  torch::Tensor order_;  // int64 dataset indices of the current epoch, shuffled
  int64_t pos_ = 0;
  int64_t epoch_ = 0;
  int64_t samples_seen_ = 0;
};

}  // namespace star::shim
