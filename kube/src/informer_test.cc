// KeyOf: the informer's cache keys.
#include "star/kube/informer.h"

#include <gtest/gtest.h>

namespace star::kube {
namespace {

using nlohmann::json;

TEST(KeyOfTest, NamespacedAndClusterScoped) {
  EXPECT_EQ(KeyOf({{"metadata", {{"namespace", "a"}, {"name", "b"}}}}), "a/b");
  EXPECT_EQ(KeyOf({{"metadata", {{"name", "node-1"}}}}), "node-1");
  EXPECT_EQ(KeyOf(json::object()), "");
}

}  // namespace
}  // namespace star::kube
