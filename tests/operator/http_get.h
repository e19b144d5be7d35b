// A GET over plain HTTP for the end-to-end tests (probe, metrics and Prometheus endpoints).
#pragma once

#include <chrono>
#include <exception>
#include <string>

#include <cpprest/http_client.h>

namespace star::op::e2e {

struct HttpReply {
  int status = -1;  // -1: no answer
  std::string body;
  std::string content_type;
};

// GET base + path_and_query (already encoded), within 10 s.
inline HttpReply Get(const std::string& base, const std::string& path_and_query) {
  HttpReply out;
  try {
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::seconds(10));
    web::http::client::http_client client(base, config);
    web::http::http_response r = client.request(web::http::methods::GET, path_and_query).get();
    out.status = r.status_code();
    out.content_type = r.headers().content_type();
    out.body = r.extract_string(true).get();
  } catch (const std::exception& e) {
    out.body = e.what();
  }
  return out;
}

}  // namespace star::op::e2e
