// The client's options, checked before any request.
#include "star/kube/client.h"

#include <gtest/gtest.h>

namespace star::kube {
namespace {

TEST(ClientOptionsTest, CreateRejectsBadOptions) {
  ClientOptions o;
  EXPECT_EQ(Client::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.server = "ftp://example.com";
  EXPECT_EQ(Client::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.server = "https://127.0.0.1:6443";
  o.ca_data = "not a certificate";
  const Status bad_ca = Client::Create(o).status();
  EXPECT_EQ(bad_ca.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_ca.message().find("ca_data"), std::string::npos) << bad_ca;
  o.ca_data.clear();
  o.ca_file = "/nonexistent/ca.crt";
  EXPECT_EQ(Client::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.ca_file.clear();
  EXPECT_TRUE(Client::Create(o).ok()) << "https with the system roots";
}

}  // namespace
}  // namespace star::kube
