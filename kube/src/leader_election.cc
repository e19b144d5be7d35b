// LeaderElector on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// a lease held by someone else counts as expired once this process has seen it unchanged
// for its leaseDurationSeconds (the local monotonic clock; no trust in other clocks).
#include "star/kube/leader_election.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <thread>

namespace star::kube {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// metav1.MicroTime: "2025-01-31T12:00:00.123456Z".
std::string MicroTimeNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long>(micros));
  return buf;
}

std::string Str(const json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t Int(const json& object, const char* field, int64_t fallback) {
  auto it = object.find(field);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

struct LeaderElector::Impl {
  enum class Outcome { kHeld, kHeldByOther, kError };

  Impl(Client* c, LeaderElectionOptions o, std::function<void()> started, std::function<void()> stopped)
      : client(c), options(WithIdentity(std::move(o))), on_started(std::move(started)), on_stopped(std::move(stopped)) {
    // Its own connection: no retries inside the client and a short request timeout, so
    // that a renewal (a Get and an Update) started a renew_period after the last one ends
    // by the renew deadline (the elector retries every retry_period).
    ClientOptions own = c->options();
    own.max_retries = 0;
    const auto slack = std::chrono::duration_cast<milliseconds>(RenewDeadline() - options.renew_period);
    own.request_timeout = std::min(own.request_timeout, std::max(slack / 2, milliseconds(100)));
    if (auto made = Client::Create(own); made.ok()) {
      own_client = std::move(*made);
      client = own_client.get();
    }
  }

  // An empty identity would mark the lease free: use hostname_pid instead.
  static LeaderElectionOptions WithIdentity(LeaderElectionOptions o) {
    if (o.identity.empty()) {
      char host[256] = {};
      if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
      o.identity = std::string(host[0] != '\0' ? host : "star-operator") + "_" + std::to_string(getpid());
    }
    return o;
  }

  Client* client;
  std::unique_ptr<Client> own_client;
  const LeaderElectionOptions options;
  std::function<void()> on_started, on_stopped;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread thread;
  std::atomic<bool> leading{false};

  // Touched by the elector's thread only (and by Stop after joining it).
  std::string observed_rv;  // the lease's resourceVersion when last read
  Clock::time_point observed_at;
  Clock::time_point last_renewed;

  milliseconds RenewDeadline() const {
    // Give up leading well before others may take the lease (client-go: 10 s of 15 s).
    return std::chrono::duration_cast<milliseconds>(options.lease_duration) * 2 / 3;
  }

  json Spec(const json& previous_spec, bool transition) const {
    json spec = previous_spec.is_object() ? previous_spec : json::object();
    const std::string now = MicroTimeNow();
    spec["holderIdentity"] = options.identity;
    spec["leaseDurationSeconds"] = static_cast<int64_t>(options.lease_duration.count());
    spec["renewTime"] = now;
    if (transition) {
      spec["acquireTime"] = now;
      spec["leaseTransitions"] = Int(spec, "leaseTransitions", -1) + 1;
    }
    return spec;
  }

  void Observe(const json& lease) {
    const std::string rv = lease.is_object() && lease.contains("metadata") ? Str(lease["metadata"], "resourceVersion") : "";
    if (rv != observed_rv) {
      observed_rv = rv;
      observed_at = Clock::now();
    }
  }

  Outcome TryAcquireOrRenew() {
    StatusOr<json> current = client->Get(Leases(), options.ns, options.name);
    if (current.status().code() == StatusCode::kNotFound) {
      json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                    {"kind", "Lease"},
                    {"metadata", {{"name", options.name}, {"namespace", options.ns}}},
                    {"spec", Spec(json::object(), true)}};
      StatusOr<json> created = client->Create(Leases(), options.ns, lease);
      if (!created.ok()) return Outcome::kError;  // AlreadyExists: someone was quicker
      Observe(*created);
      return Outcome::kHeld;
    }
    if (!current.ok()) return Outcome::kError;
    json lease = std::move(*current);
    Observe(lease);
    const json spec = lease.value("spec", json::object());
    const std::string holder = Str(spec, "holderIdentity");
    const auto duration = std::chrono::seconds(Int(spec, "leaseDurationSeconds", options.lease_duration.count()));
    if (!holder.empty() && holder != options.identity && Clock::now() < observed_at + duration) {
      return Outcome::kHeldByOther;
    }
    lease["spec"] = Spec(spec, holder != options.identity);
    StatusOr<json> updated = client->Update(Leases(), options.ns, lease);  // Aborted if it changed meanwhile
    if (!updated.ok()) return Outcome::kError;
    Observe(*updated);
    return Outcome::kHeld;
  }

  // Hands the lease back: holder "" (others take it at once), if it is still ours.
  void Release() {
    StatusOr<json> current = client->Get(Leases(), options.ns, options.name);
    if (!current.ok()) return;
    json lease = std::move(*current);
    json spec = lease.value("spec", json::object());
    if (Str(spec, "holderIdentity") != options.identity) return;
    spec["holderIdentity"] = "";
    spec["leaseDurationSeconds"] = 1;
    spec["renewTime"] = MicroTimeNow();
    lease["spec"] = spec;
    (void)client->Update(Leases(), options.ns, lease);  // best effort: else the lease expires
  }

  // Waits `d` unless stopping; false when stopping.
  bool Wait(milliseconds d) {
    std::unique_lock<std::mutex> lock(mu);
    return !cv.wait_for(lock, d, [this] { return stopping; });
  }

  void SetLeading(bool now_leading) {
    if (leading.exchange(now_leading) == now_leading) return;
    if (now_leading && on_started) on_started();
    if (!now_leading && on_stopped) on_stopped();
  }

  void Run() {
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) return;
      }
      if (leading && Clock::now() - last_renewed >= RenewDeadline()) {
        SetLeading(false);  // could not renew in time: stop before anyone may take over
      }
      const Outcome outcome = TryAcquireOrRenew();
      if (outcome == Outcome::kHeld) {
        last_renewed = Clock::now();
        SetLeading(true);
      } else if (leading && (outcome == Outcome::kHeldByOther || Clock::now() - last_renewed >= RenewDeadline())) {
        SetLeading(false);  // lost the lease, or could not renew it in time
      }
      milliseconds next = outcome == Outcome::kHeld ? std::chrono::duration_cast<milliseconds>(options.renew_period)
                                                    : options.retry_period;
      if (leading) {  // wake up at the renew deadline at the latest
        const auto left = std::chrono::duration_cast<milliseconds>(last_renewed + RenewDeadline() - Clock::now());
        next = std::min(next, left);
      }
      if (!Wait(std::max(next, milliseconds(1)))) return;
    }
  }
};

LeaderElector::LeaderElector(Client* client, LeaderElectionOptions options, std::function<void()> on_started_leading,
                             std::function<void()> on_stopped_leading)
    : impl_(std::make_unique<Impl>(client, std::move(options), std::move(on_started_leading),
                                   std::move(on_stopped_leading))) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->thread.joinable() || impl_->stopping) return;
  Impl* impl = impl_.get();
  impl_->thread = std::thread([impl] { impl->Run(); });
}

void LeaderElector::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping && !impl_->thread.joinable()) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  if (impl_->leading) {
    impl_->SetLeading(false);
    impl_->Release();
  }
}

bool LeaderElector::leading() const { return impl_->leading; }

}  // namespace star::kube
