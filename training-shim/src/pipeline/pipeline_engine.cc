#include "star/shim/pipeline_engine.h"

#include <chrono>
#include <string>
#include <utility>

#include "link_channel.h"
#include "star/core/pipeline/schedule.h"

namespace star::shim {

struct PipelineEngine::Neighbour {
  int peer = -1;  // rank in the world communicator
  std::unique_ptr<Outbox> out;
  std::unique_ptr<Inbox> in;
};

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

Status Invalid(const std::string& field, const std::string& reason) {
  return Status::InvalidArgument("pipeline: " + field + ": " + reason);
}

Status CheckShape(const PipelineShape& s, const StageFunctions& f, int rank, int size) {
  if (s.stages < 1 || s.stages > 64) return Invalid("stages", "must be in [1, 64], got " + std::to_string(s.stages));
  if (s.stage < 0 || s.stage >= s.stages) {
    return Invalid("stage", "must be in [0, " + std::to_string(s.stages) + "), got " + std::to_string(s.stage));
  }
  if (s.micro_batches < s.stages || s.micro_batches > 1024) {
    return Invalid("micro_batches", "must be in [stages (" + std::to_string(s.stages) + "), 1024], got " +
                                        std::to_string(s.micro_batches));
  }
  if (rank % s.stages != s.stage) {
    return Invalid("stage", "rank " + std::to_string(rank) + " holds stage " + std::to_string(rank % s.stages) +
                                " of " + std::to_string(s.stages) + ", not " + std::to_string(s.stage));
  }
  if (rank - s.stage + s.stages > size) {
    return Invalid("stages", "the replica of rank " + std::to_string(rank) + " needs ranks up to " +
                                 std::to_string(rank - s.stage + s.stages - 1) + ", the communicator has " +
                                 std::to_string(size));
  }
  if (s.stage > 0 && s.input_floats == 0) return Invalid("input_floats", "must be > 0 on a stage after the first");
  if (s.stage < s.stages - 1 && s.output_floats == 0) {
    return Invalid("output_floats", "must be > 0 on a stage before the last");
  }
  for (auto [field, d] : {std::pair{"prev_delay_seconds", s.prev_delay_seconds},
                          std::pair{"next_delay_seconds", s.next_delay_seconds}}) {
    if (!(d >= 0 && d <= 10)) return Invalid(field, "must be in [0, 10], got " + std::to_string(d));
  }
  if (!f.forward || !f.backward) return Invalid("functions", "forward and backward are required");
  return Status::Ok();
}

// The link between world ranks `low` and `low + 1`: two communicators, activations
// (low -> high) and gradients (high -> low). Both ends split them in that order.
StatusOr<std::pair<std::unique_ptr<Collective>, std::unique_ptr<Collective>>> SplitLink(Collective& world,
                                                                                        int low) {
  const std::vector<int> members{low, low + 1};
  STAR_ASSIGN_OR_RETURN(auto act, world.Split(members, "pipeline-act-" + std::to_string(low)));
  STAR_ASSIGN_OR_RETURN(auto grad, world.Split(members, "pipeline-grad-" + std::to_string(low)));
  return std::make_pair(std::move(act), std::move(grad));
}

}  // namespace

PipelineEngine::PipelineEngine(const PipelineShape& shape, StageFunctions functions)
    : shape_(shape), fns_(std::move(functions)) {}

PipelineEngine::~PipelineEngine() = default;

StatusOr<std::unique_ptr<PipelineEngine>> PipelineEngine::Connect(Collective& world, const PipelineShape& shape,
                                                                  StageFunctions functions) {
  STAR_RETURN_IF_ERROR(CheckShape(shape, functions, world.rank(), world.size()));
  std::unique_ptr<PipelineEngine> e(new PipelineEngine(shape, std::move(functions)));
  const int rank = world.rank();
  if (shape.stage > 0) {  // this stage is the link's high end: activations in, gradients out
    STAR_ASSIGN_OR_RETURN(auto link, SplitLink(world, rank - 1));
    e->prev_ = std::make_unique<Neighbour>();
    e->prev_->peer = rank - 1;
    e->prev_->in = std::make_unique<Inbox>(std::move(link.first), 0, shape.input_floats);
    e->prev_->out = std::make_unique<Outbox>(std::move(link.second), 0, shape.prev_delay_seconds);
  }
  if (shape.stage < shape.stages - 1) {  // the low end: activations out, gradients in
    STAR_ASSIGN_OR_RETURN(auto link, SplitLink(world, rank));
    e->next_ = std::make_unique<Neighbour>();
    e->next_->peer = rank + 1;
    e->next_->out = std::make_unique<Outbox>(std::move(link.first), 1, shape.next_delay_seconds);
    e->next_->in = std::make_unique<Inbox>(std::move(link.second), 1, shape.output_floats);
  }
  return e;
}

Status PipelineEngine::RunIteration(int warmup) {
  STAR_RETURN_IF_ERROR(broken_);
  const int m = shape_.micro_batches;
  if (warmup < 1 || warmup > m) {
    return Invalid("warmup", "must be in [1, micro_batches (" + std::to_string(m) + ")], got " +
                                 std::to_string(warmup));
  }
  for (Neighbour* n : {prev_.get(), next_.get()}) {
    if (n) n->in->Expect(m);
  }
  const uint64_t base = iteration_ * static_cast<uint64_t>(m);
  Status s;
  for (const pipeline::StageOp& op : pipeline::StageOps(warmup, m)) {
    s = Step(op, base + static_cast<uint64_t>(op.micro_batch));
    if (!s.ok()) break;
  }
  for (Neighbour* n : {prev_.get(), next_.get()}) {
    if (s.ok() && n) s = n->out->Flush();
  }
  ++iteration_;
  if (!s.ok()) broken_ = s;
  return s;
}

// A forward takes the previous stage's activation and sends its own to the next stage;
// a backward takes the next stage's gradient and sends its own to the previous one. The
// first and last stages read and send nothing on their open side.
Status PipelineEngine::Step(const pipeline::StageOp& op, uint64_t tag) {
  Neighbour* from = op.forward ? prev_.get() : next_.get();
  Neighbour* to = op.forward ? next_.get() : prev_.get();
  std::vector<float> in, out;
  if (from) {
    STAR_ASSIGN_OR_RETURN(in, from->in->Take(tag));
  }
  const double start = Now();
  STAR_RETURN_IF_ERROR((op.forward ? fns_.forward : fns_.backward)(op.micro_batch, in, out));
  (op.forward ? compute_.forward_seconds : compute_.backward_seconds) += Now() - start;
  ++(op.forward ? compute_.forwards : compute_.backwards);
  if (!to) return Status::Ok();
  const size_t want = op.forward ? shape_.output_floats : shape_.input_floats;
  if (out.size() != want) {
    return Status::Internal(std::string("pipeline: the ") + (op.forward ? "forward" : "backward") +
                            " of micro-batch " + std::to_string(op.micro_batch) + " gave " +
                            std::to_string(out.size()) + " floats, " +
                            (op.forward ? "output_floats" : "input_floats") + " is " + std::to_string(want));
  }
  return to->out->Post(std::move(out), tag);
}

api::PipelineReading ReadingOf(int stage, const PipelineComputeTimes& c, const std::vector<PipelineLink>& links) {
  api::PipelineReading r;
  r.stage = stage;
  r.forward_seconds = c.forwards > 0 ? c.forward_seconds / c.forwards : 0;
  r.backward_seconds = c.backwards > 0 ? c.backward_seconds / c.backwards : 0;
  for (const PipelineLink& l : links) {
    const int sent = std::max(l.messages_sent, 1);
    r.links.push_back({l.peer, l.send_seconds / sent, std::max<int64_t>(1, l.bytes_sent / sent), l.wait_seconds,
                       l.latency_seconds / sent});
  }
  return r;
}

std::vector<PipelineLink> PipelineEngine::TakeLinks() {
  std::vector<PipelineLink> links;
  for (Neighbour* n : {prev_.get(), next_.get()}) {
    if (!n) continue;
    const ChannelCounters sent = n->out->TakeCounters(), received = n->in->TakeCounters();
    links.push_back({n->peer, sent.bytes, sent.messages, sent.seconds, received.bytes, received.messages,
                     received.seconds, sent.latency_seconds});
  }
  return links;
}

PipelineComputeTimes PipelineEngine::TakeComputeTimes() { return std::exchange(compute_, {}); }

}  // namespace star::shim
