#include "star/agent/node_event.h"

#include <gtest/gtest.h>

namespace star::agent {
namespace {

TEST(NodeEventTest, IsAboutTheNodeInTheDefaultNamespace) {
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  const nlohmann::json ev =
      NodeEventObject("node-1", NodeEvent{"Warning", "CorruptJournal", "moved aside"}, now);
  EXPECT_EQ(ev["metadata"]["namespace"], "default");
  EXPECT_EQ(ev["metadata"]["name"].get<std::string>().rfind("node-1.star-agent.", 0), 0u);
  EXPECT_EQ(ev["involvedObject"],
            (nlohmann::json{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "node-1"}, {"uid", "node-1"}}));
  EXPECT_EQ(ev["reason"], "CorruptJournal");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["message"], "moved aside");
  EXPECT_EQ(ev["firstTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(ev["source"]["component"], "star-agent");
}

}  // namespace
}  // namespace star::agent
