#include "star/shim/staged_collective.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace star::shim {
namespace {

class HostStaging final : public DeviceStaging {
 public:
  StatusOr<float*> Reserve(size_t count) override {
    if (buffer_.size() < count) buffer_.resize(count);
    return buffer_.data();
  }
  Status ToDevice(float* device, const float* host, size_t count) override {
    std::memcpy(device, host, count * sizeof(float));
    return Status::Ok();
  }
  Status ToHost(float* host, const float* device, size_t count) override {
    std::memcpy(host, device, count * sizeof(float));
    return Status::Ok();
  }

 private:
  std::vector<float> buffer_;
};

class StagedCollective final : public Collective {
 public:
  StagedCollective(std::unique_ptr<Collective> host, std::unique_ptr<Collective> device,
                   std::shared_ptr<DeviceStaging> staging)
      : host_(std::move(host)), device_(std::move(device)), staging_(std::move(staging)) {}

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  Status AllReduceSum(float* data, size_t count) override {
    return OnDevice(data, count, [&](float* d) { return device_->AllReduceSum(d, count); });
  }
  Status Broadcast(float* data, size_t count, int root) override {
    return OnDevice(data, count, [&](float* d) { return device_->Broadcast(d, count, root); });
  }
  Status Send(const float* data, size_t count, int peer, uint32_t tag) override {
    return host_->Send(data, count, peer, tag);
  }
  Status Recv(float* data, size_t count, int peer, uint32_t tag) override {
    return host_->Recv(data, count, peer, tag);
  }
  StatusOr<int> RecvFromAny(float* data, size_t count, const std::vector<int>& peers,
                            uint32_t tag) override {
    return host_->RecvFromAny(data, count, peers, tag);
  }
  Status Barrier() override { return host_->Barrier(); }

  StatusOr<std::unique_ptr<Collective>> Split(const std::vector<int>& members,
                                              const std::string& name) override {
    STAR_ASSIGN_OR_RETURN(auto host, host_->Split(members, name));
    STAR_ASSIGN_OR_RETURN(auto device, device_->Split(members, name));
    return NewStagedCollective(std::move(host), std::move(device), staging_);
  }

 private:
  // Copies `data` to the device, runs `op` on the device copy and copies the result back.
  template <typename Op>
  Status OnDevice(float* data, size_t count, Op&& op) {
    if (count == 0) return op(nullptr);
    STAR_ASSIGN_OR_RETURN(float* d, staging_->Reserve(count));
    STAR_RETURN_IF_ERROR(staging_->ToDevice(d, data, count));
    STAR_RETURN_IF_ERROR(op(d));
    return staging_->ToHost(data, d, count);
  }

  std::unique_ptr<Collective> host_;
  std::unique_ptr<Collective> device_;
  std::shared_ptr<DeviceStaging> staging_;
};

}  // namespace

std::unique_ptr<DeviceStaging> NewHostStaging() { return std::make_unique<HostStaging>(); }

StatusOr<std::unique_ptr<Collective>> NewStagedCollective(std::unique_ptr<Collective> host,
                                                          std::unique_ptr<Collective> device,
                                                          std::shared_ptr<DeviceStaging> staging) {
  if (!host || !device || !staging) {
    return Status::InvalidArgument("staged collective: host, device and staging are required");
  }
  if (host->rank() != device->rank() || host->size() != device->size()) {
    return Status::InvalidArgument(
        "staged collective: the host communicator is rank " + std::to_string(host->rank()) + " of " +
        std::to_string(host->size()) + ", the device one rank " + std::to_string(device->rank()) +
        " of " + std::to_string(device->size()));
  }
  return std::unique_ptr<Collective>(
      new StagedCollective(std::move(host), std::move(device), std::move(staging)));
}

}  // namespace star::shim
