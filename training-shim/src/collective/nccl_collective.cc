// NcclCollective: Collective over NCCL on the current CUDA device. Compiled to nothing
// useful unless STAR_WITH_CUDA is defined. NCCL and CUDA result codes become Status here.
#include "star/shim/nccl_collective.h"

#include <algorithm>

#ifdef STAR_WITH_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include <thread>
#endif

namespace star::shim {

#ifdef STAR_WITH_CUDA
namespace {

using Clock = std::chrono::steady_clock;

Status CudaError(const std::string& what, cudaError_t e) {
  return Status::Unavailable("cuda: " + what + ": " + cudaGetErrorString(e));
}

// NCCL's words for `r` during `what`, with the likely cause of an invalid usage at init.
std::string Describe(const std::string& what, ncclResult_t r) {
  std::string text = "nccl: " + what + ": " + ncclGetErrorString(r);
  if (r == ncclInvalidUsage && what.starts_with("init")) {
    text += "; NCCL takes one GPU per rank: is another rank of this job on the same GPU?";
  }
  return text;
}

// Waits for a non-blocking communicator's pending work (init or an enqueued op on
// `stream`, if any) until `deadline`; aborts the communicator on timeout or error.
Status WaitComm(ncclComm_t comm, cudaStream_t stream, Clock::time_point deadline,
                const std::string& what) {
  while (true) {
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    if (r != ncclSuccess) async = r;
    if (async != ncclSuccess && async != ncclInProgress) {
      std::string msg = Describe(what, async);
      ncclCommAbort(comm);
      return Status::Unavailable(msg);
    }
    bool done = async == ncclSuccess;
    if (done && stream != nullptr) {
      cudaError_t q = cudaStreamQuery(stream);
      if (q != cudaSuccess && q != cudaErrorNotReady) {
        ncclCommAbort(comm);
        return CudaError(what, q);
      }
      done = q == cudaSuccess;
    }
    if (done) return Status::Ok();
    if (Clock::now() >= deadline) {
      ncclCommAbort(comm);
      return Status::DeadlineExceeded("nccl: " + what + " timed out; communicator aborted");
    }
    std::this_thread::yield();
  }
}

StatusOr<ncclComm_t> InitComm(Store& store, const std::string& prefix, int rank, int size,
                              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  STAR_ASSIGN_OR_RETURN(int64_t arrivals, store.Add(prefix + "/arrivals", 1));
  NcclOptions options;
  options.prefix = prefix + "/" + std::to_string((arrivals - 1) / size);
  options.timeout = timeout;
  STAR_ASSIGN_OR_RETURN(Bytes id_bytes, ExchangeNcclUniqueId(store, rank, options));
  ncclUniqueId id;
  std::copy(id_bytes.begin(), id_bytes.end(), reinterpret_cast<uint8_t*>(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    return Status::Unavailable(Describe("init rank " + std::to_string(rank), r));
  }
  STAR_RETURN_IF_ERROR(WaitComm(comm, nullptr, deadline, "init rank " + std::to_string(rank)));
  return comm;
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(std::shared_ptr<Store> store, ncclComm_t comm, cudaStream_t stream, int rank,
                 int size, std::string prefix, NcclOptions options)
      : store_(std::move(store)), comm_(comm), stream_(stream), rank_(rank), size_(size),
        prefix_(std::move(prefix)), options_(std::move(options)) {}
  ~NcclCollective() override {
    if (!broken_.ok()) {
      // Already aborted.
    } else {
      ncclCommDestroy(comm_);
    }
    cudaStreamDestroy(stream_);
    if (scratch_ != nullptr) cudaFree(scratch_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduceSum(float* data, size_t count) override {
    return Run("AllReduceSum", [&] {
      return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_);
    });
  }
  Status Broadcast(float* data, size_t count, int root) override {
    return Run("Broadcast", [&] {
      return ncclBroadcast(data, data, count, ncclFloat32, root, comm_, stream_);
    });
  }
  // NCCL has no tags: messages between two ranks are matched in order; `tag` is ignored.
  Status Send(const float* data, size_t count, int peer, uint32_t) override {
    return Run("Send", [&] { return ncclSend(data, count, ncclFloat32, peer, comm_, stream_); });
  }
  Status Recv(float* data, size_t count, int peer, uint32_t) override {
    return Run("Recv", [&] { return ncclRecv(data, count, ncclFloat32, peer, comm_, stream_); });
  }
  StatusOr<int> RecvFromAny(float*, size_t, const std::vector<int>&, uint32_t) override {
    return Status::Unimplemented("nccl: RecvFromAny (NCCL cannot receive from any source)");
  }
  Status Barrier() override {
    if (scratch_ == nullptr) {
      cudaError_t e = cudaMalloc(&scratch_, sizeof(float));
      if (e != cudaSuccess) return CudaError("Barrier scratch", e);
    }
    return AllReduceSum(static_cast<float*>(scratch_), 1);
  }

  // Only the members call Split, so the child communicator is made from a fresh unique id
  // exchanged through the store (ncclCommSplit would need every parent rank to call it).
  StatusOr<std::unique_ptr<Collective>> Split(const std::vector<int>& members,
                                              const std::string& name) override {
    STAR_RETURN_IF_ERROR(broken_);
    auto self = std::find(members.begin(), members.end(), rank_);
    if (self == members.end() || !std::is_sorted(members.begin(), members.end())) {
      return Status::InvalidArgument("nccl: Split \"" + name +
                                     "\": members must be ascending ranks including this one");
    }
    std::string prefix = prefix_ + "/split/" + name + "/";
    for (int m : members) prefix += std::to_string(m) + ",";
    const int new_rank = static_cast<int>(self - members.begin());
    const int new_size = static_cast<int>(members.size());
    STAR_ASSIGN_OR_RETURN(ncclComm_t comm,
                          InitComm(*store_, prefix, new_rank, new_size, options_.timeout));
    cudaStream_t stream = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      ncclCommDestroy(comm);
      return CudaError("stream", e);
    }
    return std::unique_ptr<Collective>(
        new NcclCollective(store_, comm, stream, new_rank, new_size, prefix, options_));
  }

 private:
  template <typename F>
  Status Run(const char* op, F&& enqueue) {
    STAR_RETURN_IF_ERROR(broken_);
    const auto deadline = Clock::now() + options_.timeout;
    ncclResult_t r = enqueue();
    Status s;
    if (r != ncclSuccess && r != ncclInProgress) {
      ncclCommAbort(comm_);
      s = Status::Unavailable(std::string("nccl: ") + op + ": " + ncclGetErrorString(r));
    } else {
      s = WaitComm(comm_, stream_, deadline, op);
    }
    if (!s.ok()) broken_ = Status::Aborted("nccl: communicator aborted after: " + s.ToString());
    return s;
  }

  std::shared_ptr<Store> store_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  const int rank_;
  const int size_;
  const std::string prefix_;
  const NcclOptions options_;
  void* scratch_ = nullptr;
  Status broken_;
};

class CudaStaging final : public DeviceStaging {
 public:
  ~CudaStaging() override {
    if (buffer_ != nullptr) cudaFree(buffer_);
  }
  StatusOr<float*> Reserve(size_t count) override {
    if (count <= capacity_) return buffer_;
    if (buffer_ != nullptr) cudaFree(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&buffer_), count * sizeof(float));
    if (e != cudaSuccess) return CudaError("staging buffer of " + std::to_string(count) + " floats", e);
    capacity_ = count;
    return buffer_;
  }
  Status ToDevice(float* device, const float* host, size_t count) override {
    cudaError_t e = cudaMemcpy(device, host, count * sizeof(float), cudaMemcpyHostToDevice);
    return e == cudaSuccess ? Status::Ok() : CudaError("copy to the device", e);
  }
  Status ToHost(float* host, const float* device, size_t count) override {
    cudaError_t e = cudaMemcpy(host, device, count * sizeof(float), cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? Status::Ok() : CudaError("copy to the host", e);
  }

 private:
  float* buffer_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<DeviceStaging>> NewCudaStaging() {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) return Status::Unavailable("cuda: no CUDA device");
  return std::unique_ptr<DeviceStaging>(new CudaStaging());
}

StatusOr<Bytes> ExchangeNcclUniqueId(Store& store, int rank, const NcclOptions& options) {
  const std::string key = options.prefix + "/unique_id";
  if (rank == 0) {
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      return Status::Unavailable(std::string("nccl: ncclGetUniqueId: ") + ncclGetErrorString(r));
    }
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    Bytes bytes(p, p + sizeof(id));
    STAR_RETURN_IF_ERROR(store.Set(key, bytes));
    return bytes;
  }
  STAR_ASSIGN_OR_RETURN(Bytes bytes, store.Get(key, options.timeout));
  if (bytes.size() != sizeof(ncclUniqueId)) {
    return Status::InvalidArgument("nccl: store key \"" + key + "\" holds " +
                                   std::to_string(bytes.size()) + " bytes, not an ncclUniqueId");
  }
  return bytes;
}

StatusOr<std::unique_ptr<Collective>> ConnectNccl(std::shared_ptr<Store> store, int rank, int size,
                                                  const NcclOptions& options) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    return Status::Unavailable("nccl: no CUDA device");
  }
  STAR_ASSIGN_OR_RETURN(ncclComm_t comm,
                        InitComm(*store, options.prefix, rank, size, options.timeout));
  cudaStream_t stream = nullptr;
  e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    ncclCommDestroy(comm);
    return CudaError("stream", e);
  }
  return std::unique_ptr<Collective>(
      new NcclCollective(std::move(store), comm, stream, rank, size, options.prefix, options));
}

#else  // !STAR_WITH_CUDA

StatusOr<std::unique_ptr<DeviceStaging>> NewCudaStaging() {
  return Status::Unimplemented("cuda: built without STAR_WITH_CUDA");
}

StatusOr<Bytes> ExchangeNcclUniqueId(Store&, int, const NcclOptions&) {
  return Status::Unimplemented("nccl: built without STAR_WITH_CUDA");
}

StatusOr<std::unique_ptr<Collective>> ConnectNccl(std::shared_ptr<Store>, int, int,
                                                  const NcclOptions&) {
  return Status::Unimplemented("nccl: built without STAR_WITH_CUDA");
}

#endif  // STAR_WITH_CUDA

}  // namespace star::shim
