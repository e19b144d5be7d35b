#include "server.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/shim/parameter_server.h"
#include "star/shim/torch_model.h"
#include "star/shim/world.h"

namespace star::fmnist {
namespace {

using namespace star::shim;

int Fail(const Status& s) {
  std::cerr << "star-fmnist: " << s << "\n";
  return 1;
}

}  // namespace

// A parameter server: serves until the workers finish, then prints its stats.
int RunServer(const Flags& flags) {
  FashionCnn model;
  std::vector<float> params(ParameterCount(*model));
  if (Status s = ParametersToFlat(*model, params); !s.ok()) return Fail(s);
  auto world = ConnectWorld(WorkerConfigOf(flags));
  if (!world.ok()) return Fail(world.status());
  // world->store_server, if this rank hosts the store, lives until the servers stop.
  auto server = ParameterServer::Create(std::move(world->collective), flags.servers,
                                        TensorSizes(*model), params, SgdOptionsOf(flags),
                                        PsOptions{std::chrono::milliseconds(flags.timeout_ms)});
  if (!server.ok()) return Fail(server.status());
  std::printf("star-fmnist: parameter server %d of %d\n", flags.rank, flags.servers);
  std::fflush(stdout);
  if (Status s = (*server)->Run(); !s.ok()) return Fail(s);
  const ServerStats& st = (*server)->stats();
  nlohmann::json out = {{"role", "server"},
                        {"updates", st.updates},
                        {"gradients_applied", st.gradients_applied},
                        {"late_gradients", st.late_gradients}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace star::fmnist
