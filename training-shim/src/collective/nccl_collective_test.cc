// NcclCollective: what can run without a GPU runs here; the rest skips without a device.
#include "star/shim/nccl_collective.h"

#include <gtest/gtest.h>

#ifdef STAR_WITH_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#endif

#include <thread>

#include "star/shim/local_collective.h"
#include "star/shim/staged_collective.h"

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

int DeviceCount() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) return 0;
  return devices;
}

TEST(NcclCollectiveTest, AllReduceOnTheDevice) {
  const int devices = DeviceCount();
  if (devices == 0) GTEST_SKIP() << "no CUDA device: NCCL backend compiled but not exercised";
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

// What the nccl backend of a worker runs: host buffers in, all-reduces and broadcasts on
// the device through the CUDA staging, messages on the host communicator.
TEST(NcclCollectiveTest, StagedCollectiveRunsOnTheDevice) {
  const int n = DeviceCount();
  if (n == 0) GTEST_SKIP() << "no CUDA device: NCCL backend compiled but not exercised";
  constexpr size_t kCount = (1 << 20) + 3;  // a few MB, not a multiple of anything
  auto store = NewInMemoryStore();
  auto hosts = NewLocalGroup(n, milliseconds(20000));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](const Status& s) { errors[static_cast<size_t>(r)] = s.ToString(); };
      cudaSetDevice(r);
      NcclOptions options;
      options.timeout = milliseconds(20000);
      auto device = ConnectNccl(store, r, n, options);
      if (!device.ok()) return fail(device.status());
      auto staging = NewCudaStaging();
      if (!staging.ok()) return fail(staging.status());
      auto c = NewStagedCollective(std::move(hosts[static_cast<size_t>(r)]), std::move(*device),
                                   std::move(*staging));
      if (!c.ok()) return fail(c.status());
      std::vector<float> data(kCount, static_cast<float>(r + 1));
      data.back() = static_cast<float>(r);
      if (Status s = (*c)->AllReduceSum(data.data(), data.size()); !s.ok()) return fail(s);
      std::vector<float> from_root(kCount / 2, r == n - 1 ? 7.5f : 0.0f);
      if (Status s = (*c)->Broadcast(from_root.data(), from_root.size(), n - 1); !s.ok()) return fail(s);
      if (Status s = (*c)->Barrier(); !s.ok()) return fail(s);
      const float sum = static_cast<float>(n * (n + 1) / 2);
      const float last = static_cast<float>(n * (n - 1) / 2);
      if (data.front() != sum || data[kCount / 2] != sum || data.back() != last ||
          from_root.front() != 7.5f || from_root.back() != 7.5f) {
        errors[static_cast<size_t>(r)] = "wrong result";
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

#else

TEST(NcclCollectiveTest, UnimplementedWithoutCuda) {
  auto store = NewInMemoryStore();
  EXPECT_EQ(ConnectNccl(store, 0, 1, {}).status().code(), StatusCode::kUnimplemented);
}

#endif

}  // namespace
}  // namespace star::shim
