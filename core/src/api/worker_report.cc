#include "star/core/api/worker_report.h"

#include "star/core/api/json_reader.h"

namespace star::api {

using nlohmann::json;

json ToJson(const PipelineReading& p) {
  json links = json::array();
  for (const PipelineLinkReading& l : p.links) {
    json link = {{"peer", l.peer}, {"seconds", l.seconds}, {"bytes", l.bytes}, {"wait_seconds", l.wait_seconds}};
    if (l.latency_seconds > 0) link["latency_seconds"] = l.latency_seconds;
    links.push_back(std::move(link));
  }
  return {{"stage", p.stage},
          {"forward_seconds", p.forward_seconds},
          {"backward_seconds", p.backward_seconds},
          {"links", std::move(links)}};
}

json ToJson(const WorkerReport& r) {
  json j = {
      {"job", r.job},
      {"worker", r.worker},
      {"iteration", r.iteration},
      {"iterations", r.iterations},
      {"time_seconds", r.time_seconds},
      {"compute_seconds", r.compute_seconds},
      {"communication_seconds", r.communication_seconds},
      {"wait_seconds", r.wait_seconds},
      {"local_batch", r.local_batch},
      {"amp", r.amp},
  };
  if (r.local_grad_sq_norm) j["local_grad_sq_norm"] = *r.local_grad_sq_norm;
  if (r.global_grad_sq_norm) j["global_grad_sq_norm"] = *r.global_grad_sq_norm;
  if (r.loss) j["loss"] = *r.loss;
  if (r.lookahead) j["lookahead"] = *r.lookahead;
  if (r.link) {
    j["link_peer"] = r.link->peer;
    j["link_seconds"] = r.link->seconds;
    j["link_bytes"] = r.link->bytes;
  }
  if (r.pipeline) j["pipeline"] = ToJson(*r.pipeline);
  if (r.accuracy) {
    j["accuracy"] = *r.accuracy;
    j["accuracy_time_seconds"] = r.accuracy_time_seconds.value_or(r.time_seconds);
  }
  return j;
}

namespace {

// link_peer, link_seconds and link_bytes: all three or none.
void ReadLink(ObjectReader& rd, WorkerReport& r) {
  const int given = rd.Has("link_peer") + rd.Has("link_seconds") + rd.Has("link_bytes");
  if (given == 0) return;
  if (given < 3) {
    for (const char* key : {"link_peer", "link_seconds", "link_bytes"}) {
      if (!rd.Has(key)) rd.Fail(key, "required with the other link_ fields");
    }
    return;
  }
  LinkReading l;
  rd.Int("link_peer", &l.peer)
      .AtLeast("link_peer", l.peer, 0)
      .Number("link_seconds", &l.seconds)
      .AtLeast("link_seconds", l.seconds, 0)
      .Int("link_bytes", &l.bytes)
      .AtLeast("link_bytes", static_cast<double>(l.bytes), 1);
  if (rd.ok() && l.peer == r.worker) rd.Fail("link_peer", "must not be the worker itself");
  if (rd.ok()) r.link = l;
}

// One of "pipeline"."links": {"peer", "seconds", "bytes", "wait_seconds" (optional),
// "latency_seconds" (optional)}; the peer is another worker than `worker`.
StatusOr<PipelineLinkReading> PipelineLinkFromJson(const json& j, const std::string& path, int worker) {
  PipelineLinkReading l;
  ObjectReader rd(j, path);
  rd.Int("peer", &l.peer)
      .AtLeast("peer", l.peer, 0)
      .Number("seconds", &l.seconds)
      .AtLeast("seconds", l.seconds, 0)
      .Int("bytes", &l.bytes)
      .AtLeast("bytes", static_cast<double>(l.bytes), 1)
      .Number("wait_seconds", &l.wait_seconds, Need::kOptional)
      .AtLeast("wait_seconds", l.wait_seconds, 0)
      .Number("latency_seconds", &l.latency_seconds, Need::kOptional)
      .AtLeast("latency_seconds", l.latency_seconds, 0)
      .RejectUnknown({"peer", "seconds", "bytes", "wait_seconds", "latency_seconds"});
  if (rd.ok() && l.peer == worker) rd.Fail("peer", "must not be the worker itself");
  if (!rd.ok()) return rd.status();
  return l;
}

// "pipeline": {"stage", "forward_seconds", "backward_seconds", "links" (optional, <= 2)}.
void ReadPipeline(ObjectReader& outer, WorkerReport& r) {
  const json* pj = outer.Get("pipeline");
  if (pj == nullptr || !outer.ok()) return;
  ObjectReader rd(*pj, outer.FieldPath("pipeline"));
  PipelineReading p;
  rd.Int("stage", &p.stage)
      .AtLeast("stage", p.stage, 0)
      .Number("forward_seconds", &p.forward_seconds)
      .AtLeast("forward_seconds", p.forward_seconds, 0)
      .Number("backward_seconds", &p.backward_seconds)
      .AtLeast("backward_seconds", p.backward_seconds, 0)
      .MaxItems("links", 2);
  ReadArray(rd, "links", &p.links, [&r](const json& e, const std::string& at) {
    return PipelineLinkFromJson(e, at, r.worker);
  });
  rd.RejectUnknown({"stage", "forward_seconds", "backward_seconds", "links"});
  outer.Merge(rd.status());
  if (rd.ok()) r.pipeline = std::move(p);
}

}  // namespace

StatusOr<WorkerReport> WorkerReportFromJson(const json& j, const std::string& path) {
  WorkerReport r;
  ObjectReader rd(j, path);
  rd.String("job", &r.job, Need::kOptional)
      .Int("worker", &r.worker)
      .AtLeast("worker", r.worker, 0)
      .Int("iteration", &r.iteration)
      .AtLeast("iteration", static_cast<double>(r.iteration), 0)
      .Int("iterations", &r.iterations, Need::kOptional)
      .AtLeast("iterations", r.iterations, 1)
      .Number("time_seconds", &r.time_seconds, Need::kOptional)
      .AtLeast("time_seconds", r.time_seconds, 0)
      .Number("compute_seconds", &r.compute_seconds)
      .AtLeast("compute_seconds", r.compute_seconds, 0)
      .Number("communication_seconds", &r.communication_seconds)
      .AtLeast("communication_seconds", r.communication_seconds, 0)
      .Number("wait_seconds", &r.wait_seconds, Need::kOptional)
      .AtLeast("wait_seconds", r.wait_seconds, 0)
      .Int("local_batch", &r.local_batch)
      .AtLeast("local_batch", r.local_batch, 1)
      .Bool("amp", &r.amp, Need::kOptional);
  for (auto [key, field] : {std::pair{"local_grad_sq_norm", &r.local_grad_sq_norm},
                            std::pair{"global_grad_sq_norm", &r.global_grad_sq_norm},
                            std::pair{"loss", &r.loss}}) {
    if (!rd.Has(key)) continue;
    double v = 0;
    rd.Number(key, &v);
    if (key != std::string_view("loss")) rd.AtLeast(key, v, 0);
    if (rd.ok()) *field = v;
  }
  if (rd.Has("lookahead")) {
    int ahead = 0;
    rd.Int("lookahead", &ahead).AtLeast("lookahead", ahead, 0).AtMost("lookahead", ahead, kMaxLookahead);
    if (rd.ok()) r.lookahead = ahead;
  }
  ReadLink(rd, r);
  ReadPipeline(rd, r);
  if (rd.ok() && rd.Has("accuracy")) {
    double a = 0;
    double at = r.time_seconds;
    rd.Number("accuracy", &a)
        .AtLeast("accuracy", a, 0)
        .AtMost("accuracy", a, 1)
        .Number("accuracy_time_seconds", &at, Need::kOptional)
        .AtLeast("accuracy_time_seconds", at, 0);
    if (rd.ok()) {
      r.accuracy = a;
      r.accuracy_time_seconds = at;
    }
  } else if (rd.Has("accuracy_time_seconds")) {
    rd.Fail("accuracy_time_seconds", "only allowed with accuracy");
  }
  rd.RejectUnknown({"job", "worker", "iteration", "iterations", "time_seconds", "compute_seconds",
                    "communication_seconds", "wait_seconds", "local_batch", "amp",
                    "local_grad_sq_norm", "global_grad_sq_norm", "loss", "accuracy",
                    "accuracy_time_seconds", "lookahead", "link_peer", "link_seconds", "link_bytes",
                    "pipeline"});
  if (!rd.ok()) return rd.status();
  return r;
}

}  // namespace star::api
