#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "star/shim/torch_data.h"

namespace star::shim {
namespace {

const ImageDataset& TestSet() {
  static const ImageDataset data = [] {
    auto d = LoadFashionMnist(kFashionMnistDefaultDir, FashionMnistSplit::kTest);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : ImageDataset{};
  }();
  return data;
}

// A temporary directory removed at scope exit.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/star-fmnist-test-XXXXXX";
    char* p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p == nullptr ? "" : p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return file;
  }

 private:
  std::string path_;
};

TEST(FashionMnistLoader, TrainAndTestHaveTheirDocumentedSizes) {
  auto train = LoadFashionMnist(kFashionMnistDefaultDir, FashionMnistSplit::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(train->images.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(train->images.scalar_type(), at::kByte);  // pixels as stored
  EXPECT_EQ(train->labels.scalar_type(), at::kLong);
  at::Tensor input = ModelInput(train->images);
  EXPECT_EQ(input.scalar_type(), at::kFloat);
  EXPECT_NEAR(input.mean().item<double>(), 0.0, 0.01);  // normalised with the train stats
  EXPECT_NEAR(input.std().item<double>(), 1.0, 0.01);

  const ImageDataset& test = TestSet();
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.labels.min().item<int64_t>(), 0);
  EXPECT_EQ(test.labels.max().item<int64_t>(), 9);
  // Fashion-MNIST's test set is balanced: 1000 of each class.
  at::Tensor counts = at::bincount(test.labels);
  EXPECT_EQ(counts.min().item<int64_t>(), 1000);
  EXPECT_EQ(counts.max().item<int64_t>(), 1000);
}

TEST(FashionMnistLoader, MissingFileIsNotFoundNamingTheFile) {
  TempDir dir;
  auto d = LoadFashionMnist(dir.path(), FashionMnistSplit::kTest);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find(dir.path() + "/t10k-images-idx3-ubyte.gz"), std::string::npos)
      << d.status();
}

TEST(FashionMnistLoader, BadMagicIsRejectedNamingTheFile) {
  TempDir dir;
  std::string file = dir.Write("labels", {0, 0, 8, 3, 0, 0, 0, 1, 5});
  auto labels = ReadIdxLabels(file);
  ASSERT_FALSE(labels.ok());
  EXPECT_EQ(labels.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(labels.status().message().find(file), std::string::npos);
  EXPECT_NE(labels.status().message().find("magic"), std::string::npos) << labels.status();
}

TEST(FashionMnistLoader, TruncatedPayloadIsRejected) {
  TempDir dir;
  // Declares 2x2x2 images (8 bytes) but holds 3.
  std::string file = dir.Write("images", {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3});
  auto images = ReadIdxImages(file);
  ASSERT_FALSE(images.ok());
  EXPECT_EQ(images.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(images.status().message().find("header declares 8"), std::string::npos)
      << images.status();
}

TEST(FashionMnistLoader, PayloadLongerThanDeclaredIsRejected) {
  TempDir dir;
  // Declares 1x2x2 images (4 bytes) but holds 6.
  std::string file = dir.Write("images", {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6});
  auto images = ReadIdxImages(file);
  ASSERT_FALSE(images.ok());
  EXPECT_EQ(images.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(images.status().message().find("payload has 6 bytes, header declares 4"),
            std::string::npos)
      << images.status();
}

TEST(FashionMnistLoader, TruncatedHeaderIsRejected) {
  TempDir dir;
  std::string file = dir.Write("images", {0, 0, 8, 3, 0, 0, 0, 1, 0, 0});
  auto images = ReadIdxImages(file);
  ASSERT_FALSE(images.ok());
  EXPECT_NE(images.status().message().find("truncated header (10 bytes)"), std::string::npos)
      << images.status();
}

TEST(FashionMnistLoader, ImagesKeepTheirPixelsUntilBatched) {
  TempDir dir;
  // One 1x2 image of pixels 0 and 255.
  std::string file = dir.Write("images", {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 255});
  auto images = ReadIdxImages(file);
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->sizes(), (std::vector<int64_t>{1, 1, 1, 2}));
  EXPECT_EQ((*images)[0][0][0][1].item<int64_t>(), 255);
  at::Tensor input = ModelInput(*images);
  EXPECT_NEAR(input[0][0][0][0].item<double>(), -0.2860 / 0.3530, 1e-6);
  EXPECT_NEAR(input[0][0][0][1].item<double>(), (1 - 0.2860) / 0.3530, 1e-6);
  EXPECT_TRUE(ModelInput(input).equal(input));  // float input is already normalised
}

TEST(FashionMnistLoader, LabelOutsideTenClassesIsRejected) {
  TempDir dir;
  std::string file = dir.Write("labels", {0, 0, 8, 1, 0, 0, 0, 2, 3, 12});
  auto labels = ReadIdxLabels(file);
  ASSERT_FALSE(labels.ok());
  EXPECT_NE(labels.status().message().find("label 12 at index 1"), std::string::npos)
      << labels.status();
}

TEST(FashionMnistLoader, ImageLabelCountMismatchIsRejected) {
  TempDir dir;
  // 1 image of 28x28, 2 labels.
  std::vector<uint8_t> images = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28};
  images.resize(images.size() + 28 * 28, 7);
  dir.Write("t10k-images-idx3-ubyte.gz", images);  // plain files read transparently
  dir.Write("t10k-labels-idx1-ubyte.gz", {0, 0, 8, 1, 0, 0, 0, 2, 1, 2});
  auto d = LoadFashionMnist(dir.path(), FashionMnistSplit::kTest);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("has 1 images but"), std::string::npos) << d.status();
}

TEST(Sharding, ShardsAreDisjointAndCoverEverySample) {
  for (int world : {1, 2, 3, 7, 16}) {
    for (int64_t n : {int64_t{16}, int64_t{100}, int64_t{60000}, int64_t{60001}}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        auto s = ShardOf(n, r, world);
        ASSERT_TRUE(s.ok()) << s.status();
        EXPECT_EQ(s->begin, next) << "world " << world << " rank " << r;
        EXPECT_GE(s->size(), n / world);
        EXPECT_LE(s->size(), n / world + 1);
        next = s->end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(Sharding, BadRankOrWorldIsRejected) {
  EXPECT_FALSE(ShardOf(100, 2, 2).ok());
  EXPECT_FALSE(ShardOf(100, -1, 2).ok());
  EXPECT_FALSE(ShardOf(100, 0, 0).ok());
  EXPECT_FALSE(ShardOf(3, 0, 4).ok());
}

TEST(BatchIterator, EpochVisitsEveryShardSampleOnceWithVariableBatches) {
  const ImageDataset& data = TestSet();
  auto shard = ShardOf(data.size(), 1, 3);
  ASSERT_TRUE(shard.ok());
  auto it = BatchIterator::Create(&data, *shard, 42);
  ASSERT_TRUE(it.ok()) << it.status();
  const int64_t sizes[] = {1, 64, 100, 7, 256};
  int64_t total = 0;
  for (int i = 0; total < shard->size(); ++i) {
    int64_t b = std::min(sizes[i % 5], shard->size() - total);
    auto batch = it->Next(b);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_EQ(batch->size(), b);
    EXPECT_EQ(batch->images.sizes(), (std::vector<int64_t>{b, 1, 28, 28}));
    EXPECT_EQ(batch->images.scalar_type(), at::kFloat);
    total += b;
  }
  EXPECT_EQ(it->epoch(), 0);
  EXPECT_EQ(it->samples_seen(), shard->size());
  // The next batch starts epoch 1 and still has the requested size.
  auto next = it->Next(10);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->size(), 10);
  EXPECT_EQ(it->epoch(), 1);
}

TEST(BatchIterator, OneEpochIsAPermutationOfTheShardAndSeedsDiffer) {
  // A synthetic dataset whose single pixel value is the sample index.
  ImageDataset data;
  const int64_t n = 50;
  data.images = at::arange(n, at::kFloat).reshape({n, 1, 1, 1});
  data.labels = at::zeros({n}, at::kLong);
  ShardRange shard{10, 40};
  auto collect = [&](uint64_t seed, int64_t batch_size, int64_t samples) {
    auto it = BatchIterator::Create(&data, shard, seed);
    EXPECT_TRUE(it.ok());
    std::vector<int64_t> out;
    while (static_cast<int64_t>(out.size()) < samples) {
      auto b = it->Next(batch_size);
      EXPECT_TRUE(b.ok());
      at::Tensor v = b->images.flatten().to(at::kLong);
      for (int64_t i = 0; i < v.size(0); ++i) out.push_back(v[i].item<int64_t>());
    }
    return out;
  };
  std::vector<int64_t> a = collect(1, 7, 63);  // crosses two epoch boundaries
  std::set<int64_t> first(a.begin(), a.begin() + 30);
  EXPECT_EQ(first.size(), 30u);
  EXPECT_EQ(*first.begin(), 10);
  EXPECT_EQ(*first.rbegin(), 39);
  std::set<int64_t> second(a.begin() + 30, a.begin() + 60);
  EXPECT_EQ(second, first);
  EXPECT_NE(std::vector<int64_t>(a.begin(), a.begin() + 30),
            std::vector<int64_t>(a.begin() + 30, a.begin() + 60));  // reshuffled per epoch
  EXPECT_EQ(collect(1, 7, 63), a);                                  // deterministic
  EXPECT_NE(collect(2, 7, 63), a);                                  // seed matters
}

TEST(BatchIterator, InvalidArgumentsAreRejected) {
  const ImageDataset& data = TestSet();
  EXPECT_FALSE(BatchIterator::Create(&data, ShardRange{0, 0}, 1).ok());
  EXPECT_FALSE(BatchIterator::Create(&data, ShardRange{0, data.size() + 1}, 1).ok());
  auto it = BatchIterator::Create(&data, ShardRange{0, 10}, 1);
  ASSERT_TRUE(it.ok());
  EXPECT_FALSE(it->Next(0).ok());
  auto big = it->Next(25);  // larger than the shard: wraps over epochs
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->size(), 25);
  EXPECT_EQ(it->epoch(), 2);
}

}  // namespace
}  // namespace star::shim
