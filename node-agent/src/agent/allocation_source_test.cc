#include "star/agent/allocation_source.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/temp_dir_for_test.h"

namespace star::agent {
namespace {

namespace fs = std::filesystem;

using testing_support::TempDir;

// Replaces the file atomically (as kubectl/ConfigMap updates do): a new inode each time.
void WriteFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

constexpr char kUid[] = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";

std::string Doc(const std::string& node, int64_t millicores, const std::string& annotations = "") {
  return R"({"apiVersion":"star.dev/v1alpha1","kind":"NodeAllocation","metadata":{"name":")" +
         node + R"(")" + (annotations.empty() ? "" : ",\"annotations\":" + annotations) +
         R"(},"spec":{"pods":[{"namespace":"ns","name":"p","uid":")" + kUid +
         R"(","cpu":{"quotaMillicores":)" + std::to_string(millicores) + "}}]}}";
}

TEST(AllocationSourceTest, DecodesAllocationAndInterfaceAnnotations) {
  auto d = DesiredStateFromText(
      Doc("node-1", 500, std::string(R"({"ifname.star.dev/)") + kUid + R"(":"veth9","other":"x"})"),
      "node-1");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->allocation.spec.pods.size(), 1u);
  EXPECT_EQ(d->allocation.spec.pods[0].cpu.quota_millicores, 500);
  EXPECT_EQ(d->interfaces, (InterfaceMap{{kUid, "veth9"}}));
}

TEST(AllocationSourceTest, ReadsTheYamlKubectlPrints) {
  const std::string yaml = std::string("apiVersion: star.dev/v1alpha1\nkind: NodeAllocation\n") +
                           "metadata:\n  name: node-1\n  annotations:\n    ifname.star.dev/" + kUid +
                           ": veth9\nspec:\n  pods:\n  - namespace: ns\n    name: p\n    uid: " + kUid +
                           "\n    cpu:\n      quotaMillicores: 500\n";
  auto d = DesiredStateFromText(yaml, "node-1");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->allocation.spec.pods.size(), 1u);
  EXPECT_EQ(d->allocation.spec.pods[0].cpu.quota_millicores, 500);
  EXPECT_EQ(d->interfaces, (InterfaceMap{{kUid, "veth9"}}));
}

TEST(AllocationSourceTest, RejectsMalformedAndHostileInputNamingTheField) {
  struct Case {
    std::string text;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"{", "allocation:"},
      {"a: 1\n---\nb: 2\n", "want one document"},
      {"[1]", "object"},
      {Doc("node-2", 500), "node-2"},
      {Doc("node-1", -5), "quotaMillicores"},
      {R"({"metadata":{"name":"node-1"},"spec":{"pods":[{"namespace":"ns","name":"p",)"
       R"("uid":"u1","cpu":{"quotaMillicores":1,"bogus":2}}]}})",
       "bogus"},
      {Doc("node-1", 5, R"({"ifname.star.dev/../../x":"veth0"})"), "annotations"},
      {Doc("node-1", 5, std::string(R"({"ifname.star.dev/)") + kUid + R"(":"a/b"})"),
       "annotations"},
      {Doc("node-1", 5, std::string(R"({"ifname.star.dev/)") + kUid + R"(":"veth0\nx"})"),
       "annotations"},
  };
  for (const auto& c : cases) {
    auto d = DesiredStateFromText(c.text, "node-1");
    ASSERT_FALSE(d.ok()) << c.text;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << d.status();
    EXPECT_NE(d.status().message().find(c.mentions), std::string::npos)
        << d.status() << " should mention " << c.mentions;
  }
}

TEST(AllocationSourceTest, PollDetectsChangesAndKeepsLastGoodOnError) {
  TempDir dir;
  const std::string path = dir.path() + "/alloc.json";
  FileSource src(path, "node-1");
  auto missing = src.Poll();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(src.desired().has_value());

  WriteFile(path, Doc("node-1", 500));
  auto first = src.Poll();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  auto unchanged = src.Poll();
  ASSERT_TRUE(unchanged.ok());
  EXPECT_FALSE(*unchanged);

  WriteFile(path, Doc("node-1", 500));  // rewritten, same content
  auto same = src.Poll();
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(*same);

  WriteFile(path, "{\"metadata\": garbage");
  auto bad = src.Poll();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status();
  EXPECT_FALSE(src.Poll().ok()) << "the error is repeated until the file changes";
  ASSERT_TRUE(src.desired().has_value());
  EXPECT_EQ(src.desired()->allocation.spec.pods[0].cpu.quota_millicores, 500);

  WriteFile(path, Doc("node-1", 700));
  auto changed = src.Poll();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(src.desired()->allocation.spec.pods[0].cpu.quota_millicores, 700);
}

}  // namespace
}  // namespace star::agent
