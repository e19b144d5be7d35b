// CheckSyntax accepts YAML (the kubeconfigs and manifests we read) and refuses, with a
// position, the malformed text on which yaml-cpp 0.7 never returns.
#include "star/yaml/syntax.h"

#include <gtest/gtest.h>

namespace star::yaml {
namespace {

TEST(CheckSyntaxTest, AcceptsDocumentsFlowAndBlockCollections) {
  EXPECT_TRUE(CheckSyntax("", "empty").ok());
  EXPECT_TRUE(CheckSyntax("a: 1\nb: [x, y]\nc: {d: e}\n---\n- f\n- 'g, h'\n", "two documents").ok());
  EXPECT_TRUE(CheckSyntax("apiVersion: v1\nclusters:\n- name: k\n  cluster: {server: 'https://k:6443'}\n", "k").ok());
  EXPECT_TRUE(CheckSyntax("text: |\n  a, b\n  , c\n", "a literal block keeps its commas").ok());
}

TEST(CheckSyntaxTest, RefusesACommaOutsideFlowCollectionsWithItsPosition) {
  // Each of these makes yaml-cpp 0.7's LoadAll allocate without end.
  for (const char* text : {"[a], n", "{a: 1}, n", ", a", "key: v\n, a\n"}) {
    const Status s = CheckSyntax(text, "job.yaml");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(s.message().rfind("job.yaml:", 0), 0u) << s;
  }
}

TEST(CheckSyntaxTest, RefusesUnclosedCollectionsAtTheirPosition) {
  const Status s = CheckSyntax("a: [1, 2\nb: 3\n", "f");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "f:2:2: did not find expected ',' or ']'") << s;
}

TEST(CheckSyntaxTest, StopsAtTheDepthLimit) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const Status s = CheckSyntax(deep, "d", 1000);
  EXPECT_EQ(s.message(), "d:1:1001: nested deeper than 1000 levels") << s;
  EXPECT_TRUE(CheckSyntax(std::string(50, '[') + std::string(50, ']'), "d", 50).ok());
}

TEST(CheckSyntaxTest, NamesTheByteThatIsNotUtf8) {
  const Status s = CheckSyntax("a: b\nke\xff: 1\n", "k.yaml");
  EXPECT_EQ(s.message(), "k.yaml:2:3: not valid UTF-8 (invalid leading UTF-8 octet)") << s;
}

}  // namespace
}  // namespace star::yaml
