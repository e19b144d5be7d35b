// The real cluster's kubeconfig (scripts/cluster.sh writes it: a CA file and the admin's
// client certificate) gives a client that works.
#include <gtest/gtest.h>

#include "star/kube/client.h"
#include "test_env.h"

namespace star::kube {
namespace {

using testing::ClusterTest;

class KubeconfigClusterTest : public ClusterTest {};

TEST_F(KubeconfigClusterTest, TheClustersKubeconfigGivesAWorkingClient) {
  auto options = OptionsFromKubeconfig(kubeconfig_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->server.rfind("https://127.0.0.1:", 0), 0u) << options->server;
  EXPECT_FALSE(options->ca_file.empty() && options->ca_data.empty()) << "the cluster's CA";
  EXPECT_FALSE(options->client_cert_file.empty() && options->client_cert_data.empty()) << "the admin's certificate";
  EXPECT_EQ(options->default_namespace, "default");
  options->default_namespace = ns_;
  auto client = Client::Create(*options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Create(Pods(), "", Pod("p")).ok());
  auto list = (*client)->List(Pods(), ns_);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ((*list)["items"].size(), 1u);
}

}  // namespace
}  // namespace star::kube
