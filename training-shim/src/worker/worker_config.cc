#include "star/shim/worker_config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>
#include <tuple>

#include "star/report/tls.h"

namespace star::shim {
namespace {

Status NotParsed(const std::string& name, const char* what, const std::string& value) {
  return Status::InvalidArgument(name + ": not " + what + ": \"" + value + "\"");
}

template <typename T>
Status ParseNumber(const std::string& name, const std::string& value, const char* what, T* out) {
  T parsed{};
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || ec != std::errc() || ptr != end) return NotParsed(name, what, value);
  *out = parsed;
  return Status::Ok();
}

Status ParseBool(const std::string& name, const std::string& value, bool* out) {
  if (value == "1" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "false" || value.empty()) {
    *out = false;
  } else {
    return NotParsed(name, "a boolean (1, 0, true, false)", value);
  }
  return Status::Ok();
}

// Reads the optional variables; each present one replaces the field.
Status ReadOptional(const EnvLookup& env, WorkerConfig& c) {
  if (auto v = env("STAR_PARAMETER_SERVERS")) {
    STAR_RETURN_IF_ERROR(ParseNumber("STAR_PARAMETER_SERVERS", *v, "an integer", &c.parameter_servers));
  }
  if (auto v = env("STAR_JOB")) c.job = *v;
  if (auto v = env("STAR_STORE_URL")) c.store_url = *v;
  if (auto v = env("STAR_HOST_STORE")) STAR_RETURN_IF_ERROR(ParseBool("STAR_HOST_STORE", *v, &c.host_store));
  if (auto v = env("STAR_LISTEN_HOST")) c.listen_host = *v;
  if (auto v = env("STAR_CONTROLLER_URL")) c.controller_url = *v;
  if (auto v = env("STAR_JOB_TOKEN")) c.token = *v;
  if (auto v = env("STAR_REPORT_CA")) STAR_RETURN_IF_ERROR(SetReportCa(*v, &c));
  if (auto v = env("STAR_REPORT_EVERY")) {
    STAR_RETURN_IF_ERROR(ParseNumber("STAR_REPORT_EVERY", *v, "an integer", &c.report_every));
  }
  if (auto v = env("STAR_REPORT_SECONDS")) {
    STAR_RETURN_IF_ERROR(ParseNumber("STAR_REPORT_SECONDS", *v, "a number", &c.report_seconds));
  }
  if (auto v = env("STAR_METRICS_ADDRESS")) c.metrics_address = *v;
  if (auto v = env("STAR_NODE_NAME")) c.node = *v;
  if (auto v = env("STAR_BACKEND")) c.backend = *v;
  if (auto v = env("STAR_TIMEOUT_MS")) {
    int64_t ms = 0;
    STAR_RETURN_IF_ERROR(ParseNumber("STAR_TIMEOUT_MS", *v, "an integer", &ms));
    c.timeout = std::chrono::milliseconds(ms);
  }
  if (auto v = env("STAR_CLOCK_ORIGIN")) {
    double origin = 0;
    STAR_RETURN_IF_ERROR(ParseNumber("STAR_CLOCK_ORIGIN", *v, "a number", &origin));
    c.clock_origin = origin >= 0 ? std::optional<double>(origin) : std::nullopt;
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const WorkerConfig& c) {
  auto bad = [](const std::string& field, const std::string& rule, int64_t got) {
    return Status::InvalidArgument(field + ": must be " + rule + ", got " + std::to_string(got));
  };
  if (c.job.empty()) return Status::InvalidArgument("job: must not be empty");
  if (c.world_size < 1) return bad("world_size", ">= 1", c.world_size);
  if (c.parameter_servers < 0) return bad("parameter_servers", ">= 0", c.parameter_servers);
  if (c.rank < 0 || c.rank >= c.ranks()) {
    return bad("rank", ">= 0 and < parameter_servers + world_size (" + std::to_string(c.ranks()) + ")",
               c.rank);
  }
  if (c.report_every < 1) return bad("report_every", ">= 1", c.report_every);
  if (!(c.report_seconds >= 0) || !std::isfinite(c.report_seconds)) {
    return Status::InvalidArgument("report_seconds: must be a finite number >= 0, got " +
                                   std::to_string(c.report_seconds));
  }
  if (c.timeout.count() <= 0) return bad("timeout", "> 0 ms", c.timeout.count());
  if (c.backend != "gloo" && c.backend != "nccl") {
    return Status::InvalidArgument("backend: must be gloo or nccl, got \"" + c.backend + "\"");
  }
  return Status::Ok();
}

Status SetReportCa(const std::string& value, WorkerConfig* c) {
  if (value.empty()) return Status::Ok();
  if (report::LooksLikePem(value)) {
    if (Status s = report::CheckCaBundle(value); !s.ok()) {
      return Status::InvalidArgument("STAR_REPORT_CA: " + s.message());
    }
    c->report_ca_data = value;
    return Status::Ok();
  }
  StatusOr<std::string> pem = report::ReadPemFile(value);
  if (!pem.ok()) {
    return Status::InvalidArgument("STAR_REPORT_CA: neither PEM text (\"-----BEGIN ...\") nor a file: " +
                                   pem.status().message());
  }
  if (Status s = report::CheckCaBundle(*pem); !s.ok()) {
    return Status::InvalidArgument("STAR_REPORT_CA: file \"" + value + "\": " + s.message());
  }
  c->report_ca_file = value;
  return Status::Ok();
}

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
  };
}

StatusOr<WorkerConfig> WorkerConfigFromEnvironment(const EnvLookup& env, WorkerConfig base) {
  WorkerConfig c = std::move(base);
  bool rank_from_torchrun = false;
  for (auto [name, fallback, field] : {std::tuple{"STAR_RANK", "RANK", &c.rank},
                                       std::tuple{"STAR_WORLD_SIZE", "WORLD_SIZE", &c.world_size}}) {
    std::string read = name;
    auto v = env(name);
    if (!v && (v = env(fallback))) {
      read = fallback;
      if (field == &c.rank) rank_from_torchrun = true;
    }
    if (!v) return Status::InvalidArgument(std::string(name) + " (or torchrun's " + fallback + "): not set");
    STAR_RETURN_IF_ERROR(ParseNumber(read, *v, "an integer", field));
  }
  STAR_RETURN_IF_ERROR(ReadOptional(env, c));
  // The processes a launcher starts in one pod share its STAR_HOST_STORE: rank 0's serves.
  if (rank_from_torchrun && c.rank != 0) c.host_store = false;
  if (Status s = Validate(c); !s.ok()) return s;
  return c;
}

}  // namespace star::shim
