// NcclCollective: what can run without a GPU runs here; the rest skips without a device.
#include "star/shim/nccl_collective.h"

#include <gtest/gtest.h>

#ifdef STAR_WITH_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#endif

#include <thread>

namespace star::shim {
namespace {

using std::chrono::milliseconds;

#ifdef STAR_WITH_CUDA

TEST(NcclCollectiveTest, UniqueIdRoundTripsThroughTheStore) {
  auto store = NewInMemoryStore();
  NcclOptions options;
  options.timeout = milliseconds(5000);
  StatusOr<Bytes> fetched = Status::Internal("not run");
  std::thread other([&] { fetched = ExchangeNcclUniqueId(*store, 1, options); });
  auto published = ExchangeNcclUniqueId(*store, 0, options);
  other.join();
  ASSERT_TRUE(published.ok()) << published.status();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(published->size(), sizeof(ncclUniqueId));
  EXPECT_EQ(*published, *fetched);
}

TEST(NcclCollectiveTest, AllReduceOnTheDevice) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device: NCCL backend compiled but not exercised";
  }
  // One rank per device, ranks as threads.
  const int n = devices;
  auto store = NewInMemoryStore();
  std::vector<float> results(static_cast<size_t>(n), -1.0f);
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      NcclOptions options;
      options.timeout = milliseconds(20000);
      auto c = ConnectNccl(store, r, n, options);
      if (!c.ok()) {
        errors[static_cast<size_t>(r)] = c.status().ToString();
        return;
      }
      float* d = nullptr;
      cudaMalloc(&d, sizeof(float));
      float v = static_cast<float>(r + 1);
      cudaMemcpy(d, &v, sizeof(float), cudaMemcpyHostToDevice);
      Status s = (*c)->AllReduceSum(d, 1);
      if (s.ok()) s = (*c)->Barrier();
      cudaMemcpy(&v, d, sizeof(float), cudaMemcpyDeviceToHost);
      cudaFree(d);
      if (!s.ok()) errors[static_cast<size_t>(r)] = s.ToString();
      results[static_cast<size_t>(r)] = v;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "");
    EXPECT_EQ(results[static_cast<size_t>(r)], static_cast<float>(n * (n + 1) / 2));
  }
}

#else

TEST(NcclCollectiveTest, UnimplementedWithoutCuda) {
  auto store = NewInMemoryStore();
  EXPECT_EQ(ConnectNccl(store, 0, 1, {}).status().code(), StatusCode::kUnimplemented);
}

#endif

}  // namespace
}  // namespace star::shim
