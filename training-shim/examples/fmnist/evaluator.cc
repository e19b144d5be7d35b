#include "evaluator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "snapshot.h"
#include "star/shim/torch_amp.h"
#include "star/shim/torch_data.h"
#include "star/shim/torch_model.h"
#include "star/shim/torch_train.h"

namespace star::fmnist {

using namespace star::shim;

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

// The evaluator role: evaluates every snapshot in --evaluate's directory in iteration
// order, printing one JSON line each and deleting it. Ends (0) once the file "done"
// exists there and no snapshot is left; fails (1) when no snapshot arrives for
// --timeout-ms.
int RunEvaluator(const Flags& flags) {
  auto fail = [](const Status& s) {
    std::cerr << "star-fmnist: evaluator: " << s << "\n";
    return 1;
  };
  torch::set_num_threads(flags.threads);
  auto test = LoadFashionMnist(flags.data_dir, FashionMnistSplit::kTest);
  if (!test.ok()) return fail(test.status());
  auto amp = AmpSwitch::Create(AmpOptions{}, CpuHasNativeBf16());
  if (!amp.ok()) return fail(amp.status());
  FashionCnn model;
  const auto n = static_cast<size_t>(ParameterCount(*model));
  const std::filesystem::path dir(flags.evaluate_dir);
  auto idle_since = Clock::now();
  while (true) {
    std::vector<std::filesystem::path> snaps;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("snap-") && name.ends_with(".bin")) snaps.push_back(e.path());
    }
    if (ec) return fail(Status::Unavailable("--evaluate " + dir.string() + ": " + ec.message()));
    if (snaps.empty()) {
      if (std::filesystem::exists(dir / "done")) return 0;
      if (Seconds(idle_since) * 1000 > static_cast<double>(flags.timeout_ms)) {
        return fail(Status::DeadlineExceeded("no snapshot within --timeout-ms"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    std::sort(snaps.begin(), snaps.end());
    auto snap = ReadSnapshot(snaps.front().string(), n);
    if (!snap.ok()) return fail(snap.status());
    if (Status s = FlatToParameters(snap->params, *model); !s.ok()) return fail(s);
    StatusOr<double> acc = 0.0;
    {
      AmpSwitch::Scope scope(*amp);
      acc = Evaluate(model, *test, flags.eval_samples > 0 ? flags.eval_samples : -1);
    }
    if (!acc.ok()) return fail(acc.status());
    nlohmann::json line = {{"iteration", snap->iteration},
                           {"time_seconds", snap->time_seconds},
                           {"accuracy", *acc}};
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
    std::filesystem::remove(snaps.front(), ec);
    idle_since = Clock::now();
  }
}

}  // namespace star::fmnist
