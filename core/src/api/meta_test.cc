#include "star/core/api/meta.h"

#include <string>

#include <gtest/gtest.h>

namespace star::api {
namespace {

using nlohmann::json;

TEST(Dns1123, LabelRules) {
  EXPECT_TRUE(IsDns1123Label("a"));
  EXPECT_TRUE(IsDns1123Label("fmnist-0"));
  EXPECT_TRUE(IsDns1123Label("0abc"));
  EXPECT_TRUE(IsDns1123Label(std::string(63, 'x')));
  EXPECT_FALSE(IsDns1123Label(std::string(64, 'x')));
  EXPECT_FALSE(IsDns1123Label(""));
  EXPECT_FALSE(IsDns1123Label("-a"));
  EXPECT_FALSE(IsDns1123Label("a-"));
  EXPECT_FALSE(IsDns1123Label("A"));
  EXPECT_FALSE(IsDns1123Label("a.b"));
  EXPECT_FALSE(IsDns1123Label("a_b"));
}

TEST(Dns1123, SubdomainRules) {
  EXPECT_TRUE(IsDns1123Subdomain("node-a"));
  EXPECT_TRUE(IsDns1123Subdomain("node-a.cluster.local"));
  EXPECT_FALSE(IsDns1123Subdomain("node-a."));
  EXPECT_FALSE(IsDns1123Subdomain(".node"));
  EXPECT_FALSE(IsDns1123Subdomain("a..b"));
  EXPECT_FALSE(IsDns1123Subdomain(""));
  std::string long_name;
  while (long_name.size() < 254) long_name += "abcdefg.";
  long_name.resize(254);
  long_name.back() = 'a';
  EXPECT_FALSE(IsDns1123Subdomain(long_name));
}

TEST(Rfc3339, AcceptsValidAndRejectsMalformed) {
  EXPECT_TRUE(IsRfc3339("2024-05-01T12:00:00Z"));
  EXPECT_TRUE(IsRfc3339("2024-05-01t12:00:00z"));
  EXPECT_TRUE(IsRfc3339("2024-05-01T12:00:00.123456Z"));
  EXPECT_TRUE(IsRfc3339("2024-05-01T12:00:00+02:00"));
  EXPECT_TRUE(IsRfc3339("2024-05-01T23:59:60-07:30"));
  EXPECT_FALSE(IsRfc3339("2024-05-01"));
  EXPECT_FALSE(IsRfc3339("2024-05-01 12:00:00Z"));
  EXPECT_FALSE(IsRfc3339("2024-05-01T12:00:00"));
  EXPECT_FALSE(IsRfc3339("2024-00-01T12:00:00Z"));
  EXPECT_FALSE(IsRfc3339("2024-05-01T24:00:00Z"));
  EXPECT_FALSE(IsRfc3339("2024-05-01T12:00:00.Z"));
  EXPECT_FALSE(IsRfc3339("2024-05-01T12:00:00Zjunk"));
  EXPECT_FALSE(IsRfc3339("2024-05-01T12:00:00+0200"));
}

TEST(ObjectMeta, RoundTripsWithAllFieldsSet) {
  ObjectMeta m{"job", "ns", "uid", 4, "17", {{"k", "v"}}, {{"a", "b"}}};
  auto back = ObjectMetaFromJson(ToJson(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, m);
}

TEST(ObjectMeta, ClusterScopedOmitsNamespaceAndAllowsDottedNames) {
  ObjectMeta m;
  m.name = "node-1.example.com";
  const json j = ToJson(m, /*namespaced=*/false);
  EXPECT_EQ(j, json({{"name", "node-1.example.com"}}));
  auto back = ObjectMetaFromJson(j, /*namespaced=*/false);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, m.name);
  EXPECT_FALSE(ObjectMetaFromJson(j, /*namespaced=*/true).ok());
}

TEST(ObjectMeta, AnnotationNotStringNamesTheKey) {
  auto m = ObjectMetaFromJson(json::parse(R"({"name": "a", "annotations": {"x/y": true}})"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "metadata.annotations.x/y: must be a string, got boolean");
}

TEST(CheckTypeMeta, AbsentFieldsPassWrongOnesFail) {
  EXPECT_TRUE(CheckTypeMeta(json::object(), "TrainingJob").ok());
  EXPECT_TRUE(CheckTypeMeta(json{{"apiVersion", "star.dev/v1alpha1"}, {"kind", "TrainingJob"}},
                            "TrainingJob")
                  .ok());
  EXPECT_EQ(CheckTypeMeta(json{{"apiVersion", 1}}, "TrainingJob").message(),
            "apiVersion: must be a string, got integer");
}

TEST(Condition, RoundTripsAndOmitsEmptyTransitionTime) {
  Condition c{"Ready", "True", "Running", "all good", "2024-05-01T12:00:00Z", 3};
  auto back = ConditionFromJson(ToJson(c), "c");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  Condition d{"Ready", "Unknown", "", "", "", 0};
  EXPECT_FALSE(ToJson(d).contains("lastTransitionTime"));
  auto dback = ConditionFromJson(ToJson(d), "c");
  ASSERT_TRUE(dback.ok()) << dback.status();
  EXPECT_EQ(*dback, d);
}

TEST(Condition, RejectsEmptyTypeAndUnknownFields) {
  EXPECT_EQ(
      ConditionFromJson(json{{"type", ""}, {"status", "True"}}, "conditions[0]").status().message(),
      "conditions[0].type: must not be empty");
  EXPECT_EQ(ConditionFromJson(json{{"type", "A"}, {"status", "True"}, {"severity", "x"}}, "c")
                .status()
                .message(),
            "c.severity: unknown field");
}

}  // namespace
}  // namespace star::api
