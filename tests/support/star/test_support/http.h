// Requests over plain HTTP for the end-to-end tests (probe, metrics and Prometheus
// endpoints, star-faultproxy's control API), through cpprestsdk.
#pragma once

#include <chrono>
#include <exception>
#include <string>

#include <cpprest/http_client.h>

namespace star::test_support {

struct HttpReply {
  int status = -1;  // -1: no answer
  std::string body;
  std::string content_type;
};

// `method` base + path_and_query (already encoded) with a JSON `body` ("" = none), within 10 s.
inline HttpReply Request(const web::http::method& method, const std::string& base, const std::string& path_and_query,
                         const std::string& body = "") {
  HttpReply out;
  try {
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::seconds(10));
    web::http::client::http_client client(base, config);
    web::http::http_response r =
        body.empty() ? client.request(method, path_and_query).get()
                     : client.request(method, path_and_query, body, "application/json").get();
    out.status = r.status_code();
    out.content_type = r.headers().content_type();
    out.body = r.extract_string(true).get();
  } catch (const std::exception& e) {
    out.body = e.what();
  }
  return out;
}

// GET base + path_and_query (already encoded), within 10 s.
inline HttpReply Get(const std::string& base, const std::string& path_and_query) {
  return Request(web::http::methods::GET, base, path_and_query);
}

}  // namespace star::test_support
