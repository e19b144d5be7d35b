#include "star/core/batch/planner.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "batch/planner_internal.h"
#include "star/core/api/json_reader.h"

namespace star::batch {

using nlohmann::json;

namespace {

std::string Num(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string Index(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

// ---- the solver -------------------------------------------------------------------

// Everything is phrased in "extra units": worker i's u-th extra sample (u >= 1) is
// batch index M + u and finishes at cost(M + u). A plan hands out E = G - nM units.
class Solver {
 public:
  explicit Solver(const PlanInput& in)
      : w_(in.workers), m_(in.min_batch),
        extra_(in.global_batch - in.min_batch * static_cast<int64_t>(in.workers.size())) {
    for (size_t i = 0; i < w_.size(); ++i) {
      double inv = w_[i].alpha > 0 ? 1 / w_[i].alpha : 0;
      inv_alpha_.push_back(inv);
      base_over_alpha_.push_back(Cost(i, m_) * inv);
    }
  }

  BatchPlan Solve(internal::Search search) const {
    BatchPlan plan;
    const size_t n = w_.size();
    plan.batches.assign(n, m_);
    if (extra_ > 0) {
      double tg = 0;
      if (search == internal::Search::kBisection || !SelectByCandidates(&tg)) tg = Bisect();
      Assign(tg, &plan.batches);
    }
    for (size_t i = 0; i < n; ++i) {
      plan.makespan_seconds = std::max(plan.makespan_seconds, Cost(i, plan.batches[i]));
    }
    return plan;
  }

 private:
  double Cost(size_t i, int64_t b) const {
    return w_[i].alpha * static_cast<double>(b) + w_[i].beta;
  }
  bool UnitFits(size_t i, int64_t u, double t) const { return Cost(i, m_ + u) <= t; }

  // Largest u in [0, E] with u == 0 or cost(M + u) <= t: exact in double arithmetic
  // (the closed-form estimate is corrected by galloping, usually zero steps).
  int64_t Units(size_t i, double t) const {
    const WorkerModel& w = w_[i];
    if (w.alpha == 0) return w.beta <= t ? extra_ : 0;
    double est = std::floor((t - w.beta) / w.alpha) - static_cast<double>(m_);
    int64_t u = 0;
    if (est >= static_cast<double>(extra_)) {
      u = extra_;
    } else if (est > 0) {
      u = static_cast<int64_t>(est);
    }
    if (u > 0 && !UnitFits(i, u, t)) {
      // Gallop down to a fitting unit (0 always "fits").
      int64_t bad = u, step = 1;
      int64_t good = std::max<int64_t>(0, u - step);
      while (good > 0 && !UnitFits(i, good, t)) {
        bad = good;
        step *= 2;
        good = std::max<int64_t>(0, good - step);
      }
      return Refine(i, good, bad, t);
    }
    if (u < extra_ && UnitFits(i, u + 1, t)) {
      int64_t good = u + 1, step = 1;
      int64_t bad = std::min(extra_ + 1, good + step);
      while (bad <= extra_ && UnitFits(i, bad, t)) {
        good = bad;
        step *= 2;
        bad = std::min(extra_ + 1, good + step);
      }
      return Refine(i, good, bad, t);
    }
    return u;
  }

  // Binary search between a fitting `good` and a non-fitting `bad` (> E counts as bad).
  int64_t Refine(size_t i, int64_t good, int64_t bad, double t) const {
    while (bad - good > 1) {
      int64_t mid = good + (bad - good) / 2;
      if (mid <= extra_ && UnitFits(i, mid, t)) {
        good = mid;
      } else {
        bad = mid;
      }
    }
    return good;
  }

  // min(E, number of units finishing by t over all workers).
  int64_t Count(double t) const {
    int64_t total = 0;
    for (size_t i = 0; i < w_.size() && total < extra_; ++i) total += Units(i, t);
    return std::min(total, extra_);
  }

  // Continuous relaxation: the t at which g(t) = sum_i max(0, (t - cost_i(M)) / alpha_i)
  // reaches y, where alpha = 0 workers absorb everything from their beta on. g is
  // convex and piecewise linear, so Newton's method from the right (start: every
  // worker active) decreases monotonically onto the root, usually in 1-3 steps.
  // Returns NaN if it has not settled after a bounded number of steps.
  double Relaxed(double y) const {
    double limit = std::numeric_limits<double>::infinity();
    for (const WorkerModel& w : w_) {
      if (w.alpha == 0) limit = std::min(limit, w.beta);
    }
    double t = std::numeric_limits<double>::infinity();
    for (int step = 0; step < 64; ++step) {
      double inv = 0, offset = 0;  // sum 1/alpha and sum c/alpha over active workers
      for (size_t i = 0; i < w_.size(); ++i) {
        if (w_[i].alpha > 0 && Cost(i, m_) < t) {
          inv += inv_alpha_[i];
          offset += base_over_alpha_[i];
        }
      }
      if (inv == 0) return limit;
      double next = (y + offset) / inv;
      if (!(next < t)) return std::min(t, limit);
      t = next;
      if (t <= limit) continue;
      return limit;
    }
    return std::numeric_limits<double>::quiet_NaN();
  }

  // Finds T_g (the finishing time of the E-th cheapest unit) by bracketing it with the
  // relaxation and selecting among the O(n) unit costs inside the bracket. Returns
  // false when the bracket is unusable (degenerate floating point): caller bisects.
  bool SelectByCandidates(double* tg) const {
    const size_t n = w_.size();
    double e = static_cast<double>(extra_);
    // The floors lose < 1 unit per worker, so n + 1 more units in the relaxation
    // guarantee E units at hi.
    double lo = Relaxed(e);
    double hi = Relaxed(e + static_cast<double>(n) + 1);
    if (!std::isfinite(lo) || !std::isfinite(hi)) return false;
    lo = std::nextafter(lo, -std::numeric_limits<double>::infinity());
    std::vector<int64_t> ulo(n), uhi(n);
    int64_t count_lo = 0, count_hi = 0;
    for (size_t i = 0; i < n; ++i) {
      ulo[i] = Units(i, lo);
      uhi[i] = Units(i, hi);
      count_lo += ulo[i];
      count_hi = std::min(extra_, count_hi + uhi[i]);
      if (count_lo >= extra_) return false;
    }
    if (count_hi < extra_) return false;
    // The k-th smallest unit cost inside (lo, hi] is T_g. An alpha = 0 worker's units
    // all cost beta: at most k of them can matter.
    const int64_t k = extra_ - count_lo;
    const size_t max_entries = 4 * n + 64;
    std::vector<double> cand;
    cand.reserve(2 * n + 2);
    for (size_t i = 0; i < n; ++i) {
      int64_t units = std::min(uhi[i] - ulo[i], k);
      if (units <= 0) continue;
      if (cand.size() + static_cast<size_t>(units) > max_entries) return false;
      for (int64_t u = ulo[i] + 1; u <= ulo[i] + units; ++u) cand.push_back(Cost(i, m_ + u));
    }
    if (cand.size() < static_cast<size_t>(k)) return false;
    auto kth = cand.begin() + (k - 1);
    std::nth_element(cand.begin(), kth, cand.end());
    *tg = *kth;
    return true;
  }

  // Bisection over the bit patterns of non-negative doubles (ordered like the values):
  // at most 64 evaluations of Count, exact.
  double Bisect() const {
    if (Count(0.0) >= extra_) return 0.0;
    double hi = 0;
    for (size_t i = 0; i < w_.size(); ++i) hi = std::max(hi, Cost(i, m_ + extra_));
    auto lo_bits = std::bit_cast<uint64_t>(0.0);
    auto hi_bits = std::bit_cast<uint64_t>(hi);
    while (hi_bits - lo_bits > 1) {
      uint64_t mid = lo_bits + (hi_bits - lo_bits) / 2;
      if (Count(std::bit_cast<double>(mid)) >= extra_) {
        hi_bits = mid;
      } else {
        lo_bits = mid;
      }
    }
    return std::bit_cast<double>(hi_bits);
  }

  // Hands out every unit finishing before tg, then the remaining units finishing at
  // exactly tg in order of (batch index, worker index).
  void Assign(double tg, std::vector<int64_t>* batches) const {
    const size_t n = w_.size();
    double below = std::nextafter(tg, -std::numeric_limits<double>::infinity());
    std::vector<int64_t> s(n), e(n);
    std::vector<size_t> tied;  // workers with units finishing at exactly tg
    int64_t rest = extra_;
    int64_t lo = m_ + extra_, hi = m_;
    for (size_t i = 0; i < n; ++i) {
      s[i] = Units(i, below);
      e[i] = Units(i, tg) - s[i];
      rest -= s[i];
      if (e[i] > 0) {
        tied.push_back(i);
        lo = std::min(lo, m_ + s[i]);
        hi = std::max(hi, m_ + s[i] + e[i]);
      }
    }
    // Tied units of worker i have batch indices M+s_i+1 .. M+s_i+e_i. Find the
    // smallest index B such that the tied units with index <= B number >= rest.
    auto tied_upto = [&](int64_t b) {
      int64_t total = 0;
      for (size_t i : tied) total += std::clamp<int64_t>(b - (m_ + s[i]), 0, e[i]);
      return total;
    };
    // Invariant: tied_upto(lo) = 0 < rest <= tied_upto(hi).
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      if (tied_upto(mid) >= rest) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      int64_t take = std::clamp<int64_t>(lo - (m_ + s[i]), 0, e[i]);
      (*batches)[i] = m_ + s[i] + take;
      rest -= take;
    }
    for (size_t i = 0; i < n && rest > 0; ++i) {
      if (m_ + s[i] < hi && hi <= m_ + s[i] + e[i]) {
        (*batches)[i] += 1;
        --rest;
      }
    }
  }

  const std::vector<WorkerModel>& w_;
  const int64_t m_;
  const int64_t extra_;
  std::vector<double> inv_alpha_;        // 1 / alpha_i, 0 where alpha_i = 0
  std::vector<double> base_over_alpha_;  // cost_i(M) / alpha_i, 0 where alpha_i = 0
};

}  // namespace

Status Validate(const PlanInput& in) {
  if (in.workers.empty()) return Status::InvalidArgument("workers: must not be empty");
  for (size_t i = 0; i < in.workers.size(); ++i) {
    const WorkerModel& w = in.workers[i];
    for (auto [name, v] : {std::pair{"alpha", w.alpha}, std::pair{"beta", w.beta}}) {
      if (std::isfinite(v) && v >= 0) continue;
      std::string field = Index("workers", i) + "." + name;
      if (!std::isfinite(v)) return Status::InvalidArgument(field + ": must be a finite number");
      return Status::InvalidArgument(field + ": must be >= 0, got " + Num(v));
    }
  }
  if (in.min_batch < 1) {
    return Status::InvalidArgument("min_batch: must be >= 1, got " + std::to_string(in.min_batch));
  }
  if (in.global_batch > kMaxGlobalBatch) {
    return Status::InvalidArgument("global_batch: must be <= " + std::to_string(kMaxGlobalBatch) +
                                   ", got " + std::to_string(in.global_batch));
  }
  auto n = static_cast<int64_t>(in.workers.size());
  if (in.min_batch > kMaxGlobalBatch / n || in.global_batch < in.min_batch * n) {
    std::string need = in.min_batch > kMaxGlobalBatch / n
                           ? std::string("more than ") + std::to_string(kMaxGlobalBatch)
                           : std::to_string(in.min_batch * n);
    return Status::InvalidArgument("global_batch: must be >= min_batch * workers (= " + need +
                                   "), got " + std::to_string(in.global_batch));
  }
  return Status();
}

StatusOr<PlanInput> PlanInputFromJson(const json& j) {
  PlanInput in;
  api::ObjectReader rd(j, "");
  rd.RejectUnknown({"global_batch", "min_batch", "workers"})
      .Int("global_batch", &in.global_batch)
      .Int("min_batch", &in.min_batch, api::Need::kOptional);
  if (rd.ok() && !rd.Has("workers")) rd.Fail("workers", "required field is missing");
  if (!rd.ok()) return rd.status();
  const json& workers = *rd.Get("workers");
  if (!workers.is_array()) {
    return Status::InvalidArgument("workers: must be an array, got " + api::JsonTypeName(workers));
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    WorkerModel w;
    api::ObjectReader wr(workers[i], api::IndexPath("workers", i));
    wr.RejectUnknown({"alpha", "beta"}).Number("alpha", &w.alpha).Number("beta", &w.beta);
    if (!wr.ok()) return wr.status();
    in.workers.push_back(w);
  }
  STAR_RETURN_IF_ERROR(Validate(in));
  return in;
}

json ToJson(const BatchPlan& plan) {
  return json{{"batches", plan.batches}, {"makespan_seconds", plan.makespan_seconds}};
}

namespace internal {

StatusOr<BatchPlan> PlanBatchesWith(const PlanInput& in, Search search) {
  STAR_RETURN_IF_ERROR(Validate(in));
  return Solver(in).Solve(search);
}

}  // namespace internal

StatusOr<BatchPlan> PlanBatches(const PlanInput& in) {
  return internal::PlanBatchesWith(in, internal::Search::kAuto);
}

StatusOr<WorkerModel> FitLinear(const std::vector<std::pair<double, double>>& samples) {
  const std::string path = "batch_and_seconds";
  if (samples.size() < 2) {
    return Status::InvalidArgument(path + ": need >= 2 samples, got " +
                                   std::to_string(samples.size()));
  }
  double sb = 0, st = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto [b, t] = samples[i];
    if (!std::isfinite(b) || b <= 0) {
      return Status::InvalidArgument(Index(path, i) + ".batch: must be a finite number > 0, got " +
                                     Num(b));
    }
    if (!std::isfinite(t) || t < 0) {
      return Status::InvalidArgument(Index(path, i) +
                                     ".seconds: must be a finite number >= 0, got " + Num(t));
    }
    sb += b;
    st += t;
  }
  const double n = static_cast<double>(samples.size());
  const double mb = sb / n, mt = st / n;
  double sxx = 0, sxy = 0, sbb = 0, sbt = 0;
  bool distinct = false;
  for (auto [b, t] : samples) {
    sxx += (b - mb) * (b - mb);
    sxy += (b - mb) * (t - mt);
    sbb += b * b;
    sbt += b * t;
    distinct = distinct || b != samples[0].first;
  }
  if (!distinct || sxx <= 0) {
    return Status::InvalidArgument(path + ": need samples at >= 2 distinct batch sizes, got 1");
  }
  WorkerModel m;
  m.alpha = sxy / sxx;
  m.beta = mt - m.alpha * mb;
  if (m.alpha < 0) {
    m.alpha = 0;
    m.beta = mt;
  } else if (m.beta < 0) {
    m.beta = 0;
    m.alpha = sbt / sbb;
  }
  return m;
}

std::vector<double> GradientWeights(const std::vector<int64_t>& batches) {
  double total = 0;
  for (int64_t b : batches) total += static_cast<double>(b);
  std::vector<double> w(batches.size(), 0.0);
  if (total == 0) return w;
  for (size_t i = 0; i < batches.size(); ++i) w[i] = static_cast<double>(batches[i]) / total;
  return w;
}

}  // namespace star::batch
