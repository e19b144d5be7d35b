#include "star/shim/world.h"

#include <string>

#include "star/shim/gloo_collective.h"
#include "star/shim/local_collective.h"
#include "star/shim/nccl_collective.h"
#include "star/shim/staged_collective.h"
#include "star/shim/store.h"

namespace star::shim {
namespace {

// Serves the store at store_url's HOST:PORT, behind the job's token when there is one.
StatusOr<std::unique_ptr<StoreServer>> HostStore(const std::string& url, const std::string& token) {
  const auto scheme = url.find("://");
  const auto colon = url.rfind(':');
  if (scheme == std::string::npos || colon == std::string::npos || colon < scheme + 3) {
    return Status::InvalidArgument("store_url: must be http://HOST:PORT to host it, got \"" + url +
                                   "\"");
  }
  int port = 0;
  try {
    port = std::stoi(url.substr(colon + 1));
  } catch (const std::exception&) {
    return Status::InvalidArgument("store_url: bad port in \"" + url + "\"");
  }
  StoreServerOptions options;
  options.token = token;
  return StoreServer::Start(url.substr(scheme + 3, colon - scheme - 3), port, options);
}

// The NCCL communicator of the job's ranks (on the current CUDA device) joined to the
// Gloo one: bulk collectives on the device, messages over Gloo.
StatusOr<std::unique_ptr<Collective>> StageThroughNccl(const WorkerConfig& config,
                                                       std::shared_ptr<Store> store,
                                                       std::unique_ptr<Collective> gloo) {
  StatusOr<std::unique_ptr<DeviceStaging>> staging = NewCudaStaging();
  if (!staging.ok()) return Status::InvalidArgument("backend: nccl: " + staging.status().message());
  NcclOptions nccl;
  nccl.prefix = config.job + "/nccl";
  nccl.timeout = config.timeout;
  STAR_ASSIGN_OR_RETURN(auto device, ConnectNccl(std::move(store), config.rank, config.ranks(), nccl));
  return NewStagedCollective(std::move(gloo), std::move(device), std::move(*staging));
}

}  // namespace

StatusOr<World> ConnectWorld(const WorkerConfig& config) {
  STAR_RETURN_IF_ERROR(Validate(config));
  World world;
  if (config.world_size == 1 && config.parameter_servers == 0 && config.store_url.empty()) {
    world.collective = std::move(NewLocalGroup(1, config.timeout)[0]);
    return world;
  }
  if (config.store_url.empty()) {
    return Status::InvalidArgument("store_url: required when world_size > 1 or parameter_servers > 0");
  }
  if (config.host_store) {
    STAR_ASSIGN_OR_RETURN(world.store_server, HostStore(config.store_url, config.token));
  }
  STAR_ASSIGN_OR_RETURN(auto store, ConnectStore(config.store_url, StoreOptions{config.timeout, config.token}));
  GlooOptions gloo;
  gloo.hostname = config.listen_host;
  gloo.prefix = config.job;
  gloo.timeout = config.timeout;
  STAR_ASSIGN_OR_RETURN(world.collective,
                        ConnectGloo(store, config.rank, config.ranks(), gloo));
  if (config.backend == "nccl") {
    STAR_ASSIGN_OR_RETURN(world.collective,
                          StageThroughNccl(config, std::move(store), std::move(world.collective)));
  }
  return world;
}

}  // namespace star::shim
