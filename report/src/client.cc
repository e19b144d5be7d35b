// The cpprestsdk adapter of a worker's end: every cpprest exception is turned into a
// Status here, and every pplx task is observed (an unobserved failed task terminates).
#include "star/report/client.h"

// cpprest otherwise defines a macro U(), which breaks any template parameter named U.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>

#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "star/report/tls.h"
#include "tls_context.h"
#include "wire.h"

namespace star::report {
namespace {

namespace http = web::http;
using nlohmann::json;
using wire::ErrorMessage;

StatusOr<std::optional<api::Decision>> DecodeResponse(const std::string& body) {
  if (body.empty()) return std::optional<api::Decision>();
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("response: not a JSON object");
  }
  auto it = j.find("decision");
  if (it == j.end() || it->is_null()) return std::optional<api::Decision>();
  STAR_ASSIGN_OR_RETURN(api::Decision d, api::DecisionFromJson(*it, "decision"));
  return std::optional<api::Decision>(std::move(d));
}

// The CA an https server's certificate is checked against: its PEM text ("" = the
// system's CAs) and words for errors.
struct TrustedCa {
  std::string pem;
  std::string description;
};

// Reads and checks options' CA. InvalidArgument naming ca_file (and the file) or ca_data.
StatusOr<TrustedCa> LoadCa(const ReportClientOptions& o, bool https) {
  if (o.ca_file.empty() && o.ca_data.empty()) return TrustedCa{"", "the system's CAs"};
  const std::string option = o.ca_file.empty() ? "ca_data" : "ca_file " + o.ca_file;
  if (!https) {
    return Status::InvalidArgument(option + ": a CA is only for an https base_url, got \"" + o.base_url + "\"");
  }
  std::string pem = o.ca_data;
  if (!o.ca_file.empty()) {
    StatusOr<std::string> read = ReadPemFile(o.ca_file);
    if (!read.ok()) return Status::InvalidArgument("ca_file: " + read.status().message());
    pem = std::move(read).value();
  }
  if (Status s = CheckCaBundle(pem); !s.ok()) return Status::InvalidArgument(option + ": " + s.message());
  std::string description = "the CA " + FirstCertificateSubject(pem) + " of " + option;
  return TrustedCa{std::move(pem), std::move(description)};
}

Status FromHttpException(const http::http_exception& e, const std::string& url, const TrustedCa& ca) {
  if (e.error_code() == std::errc::timed_out) {
    return Status::DeadlineExceeded("report to " + url + ": no answer in time: " + e.what());
  }
  if (tls::IsCertificateVerifyFailure(e.error_code().value())) {
    return Status::FailedPrecondition("report to " + url + ": TLS: the server's certificate does not verify against " +
                                      ca.description + " (is it signed by that CA, and does it name the host " +
                                      web::uri(url).host() + "?)");
  }
  return Status::Unavailable("report to " + url + ": " + e.what());
}

}  // namespace

// ---------------------------------------------------------------- ReportClient

struct ReportClient::Impl {
  ReportClientOptions options;
  TrustedCa ca;
  http::client::http_client client;

  Impl(ReportClientOptions o, TrustedCa trusted, const http::client::http_client_config& config)
      : options(std::move(o)), ca(std::move(trusted)), client(web::uri(options.base_url), config) {}
};

ReportClient::ReportClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReportClient::~ReportClient() = default;

StatusOr<std::unique_ptr<ReportClient>> ReportClient::Create(ReportClientOptions options) {
  if (options.timeout.count() <= 0) {
    return Status::InvalidArgument("timeout: must be > 0 ms, got " +
                                   std::to_string(options.timeout.count()));
  }
  if (!web::uri::validate(options.base_url)) {
    return Status::InvalidArgument("base_url: not a URL: \"" + options.base_url + "\"");
  }
  web::uri uri(options.base_url);
  if ((uri.scheme() != "http" && uri.scheme() != "https") || uri.host().empty()) {
    return Status::InvalidArgument("base_url: must be http(s)://host[:port], got \"" +
                                   options.base_url + "\"");
  }
  STAR_ASSIGN_OR_RETURN(TrustedCa ca, LoadCa(options, uri.scheme() == "https"));
  http::client::http_client_config config;
  config.set_timeout(options.timeout);
  config.set_ssl_context_callback([pem = ca.pem](boost::asio::ssl::context& ctx) {
    tls::RequireTls12(ctx);
    if (!pem.empty()) (void)tls::TrustOnly(ctx, pem);  // checked by LoadCa: cannot fail
  });
  try {
    return std::unique_ptr<ReportClient>(
        new ReportClient(std::make_unique<Impl>(std::move(options), std::move(ca), config)));
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("base_url: ") + e.what());
  }
}

StatusOr<std::optional<api::Decision>> ReportClient::Send(const api::WorkerReport& report) {
  if (report.job.empty()) return Status::InvalidArgument("job: must not be empty");
  const std::string path = "/v1/jobs/" + web::uri::encode_data_string(report.job) + "/reports";
  const std::string url = impl_->options.base_url + path;

  http::http_request request(http::methods::POST);
  request.set_request_uri(path);
  if (!impl_->options.token.empty()) {
    request.headers().add(http::header_names::authorization, "Bearer " + impl_->options.token);
  }
  request.set_body(api::ToJson(report).dump(), "application/json");

  http::status_code code = 0;
  std::string body;
  try {
    http::http_response response = impl_->client.request(request).get();
    code = response.status_code();
    body = response.extract_utf8string(/*ignore_content_type=*/true).get();
  } catch (const http::http_exception& e) {
    return FromHttpException(e, url, impl_->ca);
  } catch (const std::exception& e) {
    return Status::Unavailable("report to " + url + ": " + e.what());
  }

  switch (code) {
    case http::status_codes::OK:
      return DecodeResponse(body);
    case http::status_codes::BadRequest:
      return Status::InvalidArgument(ErrorMessage(body));
    case http::status_codes::Unauthorized:
      return Status::FailedPrecondition("report rejected: 401 unauthorized");
    case http::status_codes::Forbidden:
      return Status::FailedPrecondition("report rejected: 403 forbidden");
    default:
      break;
  }
  std::string what = "report to " + url + ": HTTP " + std::to_string(code) + ": " +
                     ErrorMessage(body);
  if (code >= 500) return Status::Unavailable(std::move(what));
  return Status::Internal(std::move(what));
}

}  // namespace star::report
