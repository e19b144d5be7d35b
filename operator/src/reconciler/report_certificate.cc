#include "star/operator/reconciler/report_certificate.h"

#include <openssl/evp.h>

#include <algorithm>
#include <optional>

namespace star::op {
namespace {

using nlohmann::json;

kube::ResourceRef Secrets() { return {"", "v1", "secrets", true, "Secret"}; }

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// The decoded data[key] of `secret`, nullopt when absent or not base64.
std::optional<std::string> Data(const json& secret, const std::string& key) {
  const json* v = secret.contains("data") && secret["data"].is_object() && secret["data"].contains(key)
                      ? &secret["data"][key]
                      : nullptr;
  if (v == nullptr || !v->is_string()) return std::nullopt;
  const std::string in = v->get<std::string>();
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  const size_t pad = (in.back() == '=') + (in[in.size() - 2] == '=');
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

bool ManagedByUs(const json& secret) {
  const json labels = secret.value("metadata", json::object()).value("labels", json::object());
  return labels.value(kManagedByLabel, "") == "star-operator";
}

// The certificate the Secret holds, when it fits `o`.
std::optional<report::ServingCertificate> Usable(const json& secret, const ReportCertificateOptions& o) {
  report::ServingCertificate c{Data(secret, "ca.crt").value_or(""), Data(secret, "tls.crt").value_or(""),
                               Data(secret, "tls.key").value_or("")};
  if (!report::CheckServingCertificate(c, o.hosts, o.renew_before).ok()) return std::nullopt;
  return c;
}

}  // namespace

std::vector<std::string> ReportCertificateHosts(const std::string& url, const std::string& listen_host,
                                                const std::vector<std::string>& extra) {
  std::vector<std::string> hosts;
  auto add = [&hosts](const std::string& h) {
    if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  };
  if (!url.empty()) {
    const auto scheme = url.find("://");
    std::string rest = scheme == std::string::npos ? url : url.substr(scheme + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    rest = rest.substr(rest.find('@') == std::string::npos ? 0 : rest.find('@') + 1);
    if (!rest.empty() && rest.front() == '[') {
      add(rest.substr(1, rest.find(']') == std::string::npos ? std::string::npos : rest.find(']') - 1));
    } else {
      add(rest.substr(0, rest.find(':')));
    }
  } else if (listen_host != "0.0.0.0" && listen_host != "::") {
    add(listen_host);
  }
  for (const std::string& h : extra) add(h);
  return hosts;
}

json ReportCertificateSecret(const ReportCertificateOptions& o, const report::ServingCertificate& c) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"type", "kubernetes.io/tls"},
          {"metadata",
           {{"name", o.name},
            {"namespace", o.ns},
            {"labels", {{kManagedByLabel, "star-operator"}, {"app.kubernetes.io/component", "report-certificate"}}}}},
          {"data", {{"ca.crt", Base64(c.ca_pem)}, {"tls.crt", Base64(c.cert_pem)}, {"tls.key", Base64(c.key_pem)}}}};
}

StatusOr<report::ServingCertificate> EnsureReportCertificate(kube::Client* client, const ReportCertificateOptions& o) {
  if (o.ns.empty()) return Status::InvalidArgument("--report-tls-secret: no namespace to keep it in");
  if (o.name.empty()) return Status::InvalidArgument("--report-tls-secret: empty name");
  if (o.hosts.empty()) {
    return Status::InvalidArgument("--report-tls-host: no host for the certificate to name (give --report-url or "
                                   "--report-tls-host)");
  }
  const std::string what = "--report-tls-secret " + o.ns + "/" + o.name;
  for (int attempt = 0; attempt < 5; ++attempt) {
    StatusOr<json> secret = client->Get(Secrets(), o.ns, o.name);
    if (!secret.ok() && secret.status().code() != StatusCode::kNotFound) {
      return Status(secret.status().code(), what + ": " + secret.status().message());
    }
    if (secret.ok() && !ManagedByUs(*secret)) {
      return Status::FailedPrecondition(what + ": a Secret of that name exists without the label " +
                                        std::string(kManagedByLabel) + "=star-operator; it is left alone");
    }
    if (secret.ok()) {
      if (auto kept = Usable(*secret, o)) return *kept;
    }
    STAR_ASSIGN_OR_RETURN(report::ServingCertificate fresh, report::IssueServingCertificate(o.hosts, o.validity));
    json desired = ReportCertificateSecret(o, fresh);
    if (secret.ok()) desired["metadata"]["resourceVersion"] = (*secret)["metadata"].value("resourceVersion", "");
    StatusOr<json> written =
        secret.ok() ? client->Update(Secrets(), o.ns, desired) : client->Create(Secrets(), o.ns, desired);
    if (written.ok()) return fresh;
    const StatusCode code = written.status().code();
    if (code != StatusCode::kAborted && code != StatusCode::kAlreadyExists) {
      return Status(code, what + ": " + written.status().message());
    }
  }
  return Status::Aborted(what + ": written by another replica on each of 5 attempts");
}

}  // namespace star::op
