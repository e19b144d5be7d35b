// ToJson: the YAML 1.2 core schema's scalars, documents in order, and the errors (with
// positions) for duplicate keys, alias bombs, text that is not UTF-8 and malformed text.
#include "star/yaml/to_json.h"

#include <gtest/gtest.h>

#include <utility>

namespace star::yaml {
namespace {

using nlohmann::json;

TEST(ToJsonTest, QuotedScalarsStayStringsPlainOnesAreTyped) {
  auto docs = ToJson(
      "a: 1\nb: '1'\nc: 1.5\nd: true\ne: ~\nf: 500m\ng: \"true\"\nh: null\ni: -7\nj: 1e3\n"
      "k: .5\nl: yes\nm: 0x1F\nn: 99999999999999999999\no: !!str 12\np: |\n  12\nq:\nr: False\n"
      "s: inf\nt: [1, two, 3.0]\nu: 1.2.3\n",
      "x.yaml");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 1u);
  const json& d = docs->front();
  EXPECT_EQ(d["a"], json(1));
  EXPECT_TRUE(d["a"].is_number_integer());
  EXPECT_EQ(d["b"], json("1"));
  EXPECT_EQ(d["c"], json(1.5));
  EXPECT_EQ(d["d"], json(true));
  EXPECT_TRUE(d["e"].is_null());
  EXPECT_EQ(d["f"], json("500m"));
  EXPECT_EQ(d["g"], json("true"));
  EXPECT_TRUE(d["h"].is_null());
  EXPECT_EQ(d["i"], json(-7));
  EXPECT_EQ(d["j"], json(1000.0));
  EXPECT_TRUE(d["j"].is_number_float());
  EXPECT_EQ(d["k"], json(0.5));
  EXPECT_EQ(d["l"], json("yes"));  // YAML 1.2: not a bool
  EXPECT_EQ(d["m"], json("0x1F"));
  EXPECT_TRUE(d["n"].is_number_float());  // beyond int64
  EXPECT_EQ(d["o"], json("12"));
  EXPECT_EQ(d["p"], json("12\n"));
  EXPECT_TRUE(d["q"].is_null());
  EXPECT_EQ(d["r"], json(false));
  EXPECT_EQ(d["s"], json("inf"));
  EXPECT_EQ(d["t"], json::parse(R"([1, "two", 3.0])"));
  EXPECT_EQ(d["u"], json("1.2.3"));
}

TEST(ToJsonTest, EveryDocumentInOrder) {
  auto docs = ToJson("a: 1\n---\n---\n- x\n", "x.yaml");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 3u);
  EXPECT_EQ((*docs)[0], json::parse(R"({"a": 1})"));
  EXPECT_TRUE((*docs)[1].is_null());
  EXPECT_EQ((*docs)[2], json::parse(R"(["x"])"));
}

TEST(ToJsonTest, RejectsDuplicateKeysAndAliasBombsWithTheirPosition) {
  auto dup = ToJson("spec:\n  workers: 1\n  workers: 2\n", "d.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(), "d.yaml:3:3: duplicate key \"workers\"");
  auto key = ToJson("? [a, b]\n: 1\n", "k.yaml");
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().message(), "k.yaml:1:3: mapping keys must be scalars");
  // 10 levels of 10 aliases each: 10^10 values once expanded.
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 10; ++i) {
    const std::string p = "*l" + std::to_string(i - 1);
    bomb += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + p;
    for (int k = 1; k < 10; ++k) bomb += ", " + p;
    bomb += "]\n";
  }
  auto big = ToJson(bomb, "b.yaml");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("more than 1000000 values"), std::string::npos)
      << big.status();
}

// Regression (found by tests/fuzz/manifest_fuzz): a byte that is not UTF-8 in a key or a
// scalar went into the JSON, and the first dump() of the job (its report, an error
// message) threw nlohmann's type_error 316 and terminated `star local`.
// Regression (found by tests/fuzz/manifest_fuzz): yaml-cpp 0.7 never returned on a ','
// outside flow collections, allocating until memory ran out.
TEST(ToJsonTest, RefusesACommaOutsideFlowCollectionsInsteadOfHanging) {
  for (const char* text : {"[a], n", "spec: {a: 1}, n\n", "kind: TrainingJob\n, a\n"}) {
    auto parsed = ToJson(text, "h.yaml");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().message().rfind("h.yaml:", 0), 0u) << parsed.status();
  }
}

// Regression (found by tests/fuzz/manifest_fuzz): valid YAML on which yaml-cpp 0.7's
// LoadAll never returned: a tagged or anchored root scalar, then a line starting with ','
// or '?' (libyaml reads one plain scalar across the lines).
TEST(ToJsonTest, ReadsATaggedRootScalarFollowedByACommaLine) {
  const std::pair<const char*, json> cases[] = {
      {"!t a\n,b\n", json("a ,b")},
      {"&x a\n? b\n", json("a ? b")},
      {"!!str 7\n,8\n", json("7 ,8")},
      {"!!77778   a)777\n,770batchAdap7\n-7701", json("a)777 ,770batchAdap7 -7701")}};
  for (const auto& [text, want] : cases) {
    auto docs = ToJson(text, "t.yaml");
    ASSERT_TRUE(docs.ok()) << text << ": " << docs.status();
    ASSERT_EQ(docs->size(), 1u) << text;
    EXPECT_EQ(docs->front(), want) << text;
  }
}

TEST(ToJsonTest, AliasesCopyTheirNodeAndMayBeKeys) {
  auto docs = ToJson("base: &b {cpu: 1, tags: [x]}\ncopy: *b\n&k name: v\nother: {*k : w}\n", "a.yaml");
  ASSERT_TRUE(docs.ok()) << docs.status();
  const json& d = docs->front();
  EXPECT_EQ(d["copy"], json::parse(R"({"cpu": 1, "tags": ["x"]})"));
  EXPECT_EQ(d["other"], json::parse(R"({"name": "w"})"));
  auto unknown = ToJson("a: *nope\n", "u.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "u.yaml:1:4: unknown anchor \"nope\"");
  auto map_key = ToJson("a: &m {x: 1}\nb: {*m : 2}\n", "m.yaml");
  ASSERT_FALSE(map_key.ok());
  EXPECT_EQ(map_key.status().message(), "m.yaml:2:5: mapping keys must be scalars");
}

TEST(ToJsonTest, RejectsTextThatIsNotUtf8WithItsPosition) {
  auto value = ToJson("spec:\n  template: {spe\xe3: 1}\n", "v.yaml");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().message(), "v.yaml:2:18: not valid UTF-8 (invalid trailing UTF-8 octet)");
  auto key = ToJson("a: b\nke\xff: 1\n", "k.yaml");
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().message(), "k.yaml:2:3: not valid UTF-8 (invalid leading UTF-8 octet)");
  // Overlong forms, surrogates and code points above U+10FFFF are not UTF-8 either.
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    EXPECT_FALSE(ToJson(std::string("x: \"") + bad + "\"\n", "u.yaml").ok()) << bad;
  }
  // Escapes in double-quoted scalars become UTF-8: accepted, and dump() works.
  auto ok = ToJson("x: \"caf\\xe9 \\u20ac \\U0001F600\"\ny: \xc3\xa9\n", "ok.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].dump(), "{\"x\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\",\"y\":\"\xc3\xa9\"}");
}

}  // namespace
}  // namespace star::yaml
