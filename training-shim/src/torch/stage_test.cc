// TorchStage: a Sequential split into pipeline stages (threads over LocalCollective)
// gives the unsplit model's gradients and loss, under plain and deeper warm-ups.
#include "star/shim/torch_stage.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../engine/engine_test_support.h"
#include "star/core/pipeline/schedule.h"

namespace star::shim {
namespace {

constexpr int kBatch = 12, kMicro = 4, kIn = 6, kOut = 4;

struct Problem {
  torch::Tensor x, labels;
  std::vector<torch::nn::AnyModule> layers;
  Problem() {
    torch::manual_seed(7);
    x = torch::randn({kBatch, kIn});
    labels = torch::randint(kOut, {kBatch}, torch::kLong);
    layers = {torch::nn::AnyModule(torch::nn::Linear(kIn, 16)), torch::nn::AnyModule(torch::nn::ReLU()),
              torch::nn::AnyModule(torch::nn::Linear(16, 12)), torch::nn::AnyModule(torch::nn::Tanh()),
              torch::nn::AnyModule(torch::nn::Linear(12, kOut))};
  }
  // Layers [from, to) as one Sequential sharing their parameters with the others.
  torch::nn::Sequential Slice(size_t from, size_t to) const {
    torch::nn::Sequential s;
    for (size_t i = from; i < to; ++i) s->push_back(layers[i]);
    return s;
  }
  std::vector<torch::Tensor> Grads(const torch::nn::Sequential& s) const {
    std::vector<torch::Tensor> g;
    for (const auto& p : s->parameters()) g.push_back(p.grad().clone());
    return g;
  }
};

// The pipeline's gradients of every parameter (stage order), with warm-up depths
// `warmup` over stages cut at `cuts` (layer indices); *loss gets the last stage's loss.
std::vector<torch::Tensor> PipelineGrads(const Problem& p, const std::vector<size_t>& cuts,
                                         const std::vector<int>& warmup, const std::vector<int64_t>& widths,
                                         double* loss) {
  const int stages = static_cast<int>(cuts.size()) + 1;
  std::vector<torch::nn::Sequential> slices;
  for (int s = 0; s < stages; ++s) {
    slices.push_back(p.Slice(s == 0 ? 0 : cuts[static_cast<size_t>(s - 1)],
                             s == stages - 1 ? p.layers.size() : cuts[static_cast<size_t>(s)]));
    slices.back()->zero_grad();
  }
  const int64_t micro_batch = kBatch / kMicro;
  auto statuses = testing_support::RunRanks(stages, std::chrono::milliseconds(10000), [&](int r, auto c) -> Status {
    PipelineShape shape{stages, r, kMicro};
    if (r > 0) shape.input_floats = static_cast<size_t>(micro_batch * widths[static_cast<size_t>(r - 1)]);
    if (r < stages - 1) shape.output_floats = static_cast<size_t>(micro_batch * widths[static_cast<size_t>(r)]);
    TorchStage stage(
        slices[static_cast<size_t>(r)], shape, {micro_batch, r > 0 ? widths[static_cast<size_t>(r - 1)] : 0},
        [&](int m) -> StatusOr<torch::Tensor> { return p.x.narrow(0, m * micro_batch, micro_batch); },
        [&](int m, const torch::Tensor& y) -> StatusOr<torch::Tensor> {
          return torch::nn::functional::cross_entropy(y, p.labels.narrow(0, m * micro_batch, micro_batch));
        });
    STAR_ASSIGN_OR_RETURN(auto engine, PipelineEngine::Connect(*c, shape, stage.Functions()));
    STAR_RETURN_IF_ERROR(engine->RunIteration(warmup[static_cast<size_t>(r)]));
    if (r == stages - 1) *loss = stage.TakeLoss();
    return Status::Ok();
  });
  testing_support::ExpectAllOk(statuses);
  std::vector<torch::Tensor> grads;
  for (const auto& s : slices) {
    for (auto& g : p.Grads(s)) grads.push_back(g);
  }
  return grads;
}

void ExpectSameAsUnsplit(const std::vector<size_t>& cuts, const std::vector<int>& warmup,
                         const std::vector<int64_t>& widths) {
  Problem p;
  torch::nn::Sequential whole = p.Slice(0, p.layers.size());
  whole->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(whole->forward(p.x), p.labels);
  loss.backward();
  const std::vector<torch::Tensor> want = p.Grads(whole);
  double got_loss = 0;
  const std::vector<torch::Tensor> got = PipelineGrads(p, cuts, warmup, widths, &got_loss);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-5, 1e-6)) << "parameter " << i;
  }
  EXPECT_NEAR(got_loss, loss.item<double>(), 1e-5);
}

TEST(TorchStage, TwoStagesGiveTheUnsplitModelsGradients) {
  ExpectSameAsUnsplit({2}, pipeline::OneFOneB(2, kMicro), {16});
}

TEST(TorchStage, ThreeStagesWithADeeperWarmupGiveTheSameGradients) {
  ExpectSameAsUnsplit({2, 4}, {4, 3, 1}, {16, 12});
}

TEST(TorchStage, AWrongActivationSizeIsAnErrorNotACrash) {
  Problem p;
  PipelineShape shape{2, 1, kMicro, 3 * 16, 0};
  TorchStage stage(p.Slice(2, p.layers.size()), shape, {3, 16}, nullptr,
                   [](int, const torch::Tensor& y) -> StatusOr<torch::Tensor> { return y.sum(); });
  StageFunctions f = stage.Functions();
  std::vector<float> short_input(5), out;
  EXPECT_EQ(f.forward(0, short_input, out).code(), StatusCode::kInternal);
  EXPECT_EQ(f.backward(1, {}, out).code(), StatusCode::kInternal) << "a backward before its forward";
}

}  // namespace
}  // namespace star::shim
