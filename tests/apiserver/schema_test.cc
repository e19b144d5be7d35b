// DefaultPruneValidate: the API server's pruning, defaulting and validation of custom
// resources, with its messages.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schema.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

json TrainingJobLikeSchema() {
  return json::parse(R"({
    "type": "object",
    "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
      "spec": {
        "type": "object",
        "required": ["workers"],
        "properties": {
          "architecture": {"type": "string", "enum": ["AllReduce", "ParameterServer"], "default": "AllReduce"},
          "workers": {
            "type": "object",
            "required": ["replicas"],
            "properties": {
              "replicas": {"type": "integer", "minimum": 1, "maximum": 64},
              "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
          },
          "synchronization": {
            "type": "object",
            "default": {},
            "properties": {
              "policy": {"type": "string", "default": "Auto"},
              "minK": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}
            }
          },
          "mitigation": {
            "type": "object",
            "properties": {"threshold": {"type": "number", "maximum": 1, "exclusiveMaximum": true}}
          },
          "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
          "nodes": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "minLength": 1}},
          "quota": {"x-kubernetes-int-or-string": true},
          "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
          "note": {"type": "string", "nullable": true},
          "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
      },
      "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
    }
  })");
}

json Job(json spec) {
  return {{"apiVersion", "star.dev/v1alpha1"}, {"kind", "TrainingJob"}, {"metadata", {{"name", "x"}}}, {"spec", spec}};
}

TEST(DefaultPruneValidateTest, AValidObjectHasNoErrors) {
  json job = Job({{"workers", {{"replicas", 4}}}});
  EXPECT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
}

TEST(DefaultPruneValidateTest, DefaultsAreAppliedAlsoInsideDefaultedObjects) {
  json job = Job({{"workers", {{"replicas", 4}}}});
  ASSERT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
  EXPECT_EQ(job["spec"]["architecture"], "AllReduce");
  EXPECT_EQ(job["spec"]["synchronization"]["policy"], "Auto") << "default inside the defaulted {}";
  EXPECT_FALSE(job["spec"].contains("mitigation")) << "no default, stays absent";
}

TEST(DefaultPruneValidateTest, ASetFieldKeepsItsValueOverTheDefault) {
  json job = Job({{"workers", {{"replicas", 4}}}, {"architecture", "ParameterServer"}});
  ASSERT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
  EXPECT_EQ(job["spec"]["architecture"], "ParameterServer");
}

TEST(DefaultPruneValidateTest, UnknownFieldsArePrunedUnlessPreserved) {
  json job = Job({{"workers", {{"replicas", 4}, {"replicaz", 5}, {"template", {{"spec", {{"containers", json::array()}}}}}}},
                  {"extra", {{"anything", {{"goes", 1}}}}},
                  {"bogus", true}});
  job["metadata"]["annotations"] = {{"a", "b"}};
  job["unknownTop"] = 1;
  ASSERT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
  EXPECT_FALSE(job["spec"]["workers"].contains("replicaz"));
  EXPECT_FALSE(job["spec"].contains("bogus"));
  EXPECT_FALSE(job.contains("unknownTop"));
  EXPECT_EQ(job["spec"]["workers"]["template"]["spec"]["containers"], json::array()) << "preserve-unknown-fields";
  EXPECT_EQ(job["spec"]["extra"]["anything"]["goes"], 1);
  EXPECT_EQ(job["metadata"]["annotations"]["a"], "b") << "metadata is not pruned";
  EXPECT_EQ(job["apiVersion"], "star.dev/v1alpha1");
}

TEST(DefaultPruneValidateTest, NullsArePrunedAndDefaultedUnlessNullable) {
  json job = Job({{"workers", {{"replicas", 4}}}, {"architecture", nullptr}, {"note", nullptr}});
  ASSERT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
  EXPECT_EQ(job["spec"]["architecture"], "AllReduce");
  EXPECT_TRUE(job["spec"].contains("note"));
  EXPECT_TRUE(job["spec"]["note"].is_null());
}

TEST(DefaultPruneValidateTest, MinimumViolationReadsLikeTheApiServer) {
  json job = Job({{"workers", {{"replicas", 0}}}});
  const auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.workers.replicas");
  EXPECT_EQ(errors[0].type, "FieldValueInvalid");
  EXPECT_EQ(errors[0].message,
            "Invalid value: 0: spec.workers.replicas in body should be greater than or equal to 1");
  EXPECT_EQ(FormatSchemaErrors(errors),
            "spec.workers.replicas: Invalid value: 0: spec.workers.replicas in body should be greater than or "
            "equal to 1");
}

TEST(DefaultPruneValidateTest, MissingRequiredFieldsAreNamed) {
  json job = Job(json::object());
  auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.workers");
  EXPECT_EQ(errors[0].type, "FieldValueRequired");
  EXPECT_EQ(errors[0].message, "Required value");

  job = Job({{"workers", json::object()}});
  errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.workers.replicas");
}

TEST(DefaultPruneValidateTest, WrongTypeAndEnum) {
  json job = Job({{"workers", {{"replicas", "four"}}}, {"architecture", "Ring"}});
  const auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "spec.architecture");
  EXPECT_EQ(errors[0].type, "FieldValueNotSupported");
  EXPECT_EQ(errors[0].message, "Unsupported value: \"Ring\": supported values: \"AllReduce\", \"ParameterServer\"");
  EXPECT_EQ(errors[1].field, "spec.workers.replicas");
  EXPECT_EQ(errors[1].type, "FieldValueTypeInvalid");
  EXPECT_EQ(errors[1].message,
            "Invalid value: \"string\": spec.workers.replicas in body must be of type integer: \"string\"");
  EXPECT_EQ(FormatSchemaErrors(errors).front(), '[') << "several errors are bracketed";
}

TEST(DefaultPruneValidateTest, IntegralNumbersAreIntegersButFractionsAreNot) {
  json job = Job({{"workers", {{"replicas", 3.0}}}});
  EXPECT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
  job = Job({{"workers", {{"replicas", 2.5}}}});
  const auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message, "Invalid value: \"number\": spec.workers.replicas in body must be of type integer: \"number\"");
}

TEST(DefaultPruneValidateTest, ExclusiveBounds) {
  json job = Job({{"workers", {{"replicas", 1}}}, {"synchronization", {{"minK", 0}}}, {"mitigation", {{"threshold", 1}}}});
  const auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].message, "Invalid value: 1: spec.mitigation.threshold in body should be less than 1");
  EXPECT_EQ(errors[1].message, "Invalid value: 0: spec.synchronization.minK in body should be greater than 0");
  job = Job({{"workers", {{"replicas", 1}}}, {"synchronization", {{"minK", 1}}}, {"mitigation", {{"threshold", 0.5}}}});
  EXPECT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
}

TEST(DefaultPruneValidateTest, StringLengthAndPattern) {
  json job = Job({{"workers", {{"replicas", 1}}}, {"name", "abcdef"}});
  auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].type, "FieldValueTooLong");
  EXPECT_EQ(errors[0].message, "Too long: may not be longer than 5");

  job = Job({{"workers", {{"replicas", 1}}}, {"name", "A"}});
  errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].message, "Invalid value: \"A\": spec.name in body should be at least 2 chars long");
  EXPECT_EQ(errors[1].message, "Invalid value: \"A\": spec.name in body should match '^[a-z]+$'");
}

TEST(DefaultPruneValidateTest, ArraysCountAndNameTheirItems) {
  json job = Job({{"workers", {{"replicas", 1}}}, {"nodes", {"a", "b", "c"}}});
  auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].type, "FieldValueTooMany");
  EXPECT_EQ(errors[0].message, "Too many: 3: must have at most 2 items");

  job = Job({{"workers", {{"replicas", 1}}}, {"nodes", {"a", ""}}});
  errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.nodes[1]");

  job = Job({{"workers", {{"replicas", 1}}}, {"nodes", json::array()}});
  errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message, "Invalid value: 0: spec.nodes in body should have at least 1 items");
}

TEST(DefaultPruneValidateTest, IntOrStringAndAdditionalProperties) {
  json job = Job({{"workers", {{"replicas", 1}}}, {"quota", "50%"}, {"labels", {{"a", "ok"}}}});
  EXPECT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
  job = Job({{"workers", {{"replicas", 1}}}, {"quota", 3}});
  EXPECT_TRUE(DefaultPruneValidate(TrainingJobLikeSchema(), job).empty());
  job = Job({{"workers", {{"replicas", 1}}}, {"quota", true}, {"labels", {{"a", "long"}}}});
  const auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "spec.labels.a");
  EXPECT_EQ(errors[1].field, "spec.quota");
  EXPECT_EQ(errors[1].type, "FieldValueTypeInvalid");
}

TEST(DefaultPruneValidateTest, OnlyTheNameOfMetadataIsValidated) {
  json job = Job({{"workers", {{"replicas", 1}}}});
  job["metadata"]["name"] = "much-too-long-a-name";
  const auto errors = DefaultPruneValidate(TrainingJobLikeSchema(), job);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "metadata.name");
}

TEST(DefaultPruneValidateTest, CombinatorsAndASchemaOfNull) {
  const json schema = json::parse(R"({"type":"object","properties":{"spec":{"type":"object","properties":{
      "n": {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]},
      "m": {"type": "integer", "oneOf": [{"minimum": 1}, {"minimum": 5}]},
      "k": {"type": "integer", "not": {"minimum": 3}}}}}})");
  json ok = {{"spec", {{"n", 11}, {"m", 2}, {"k", 2}}}};
  EXPECT_TRUE(DefaultPruneValidate(schema, ok).empty());
  json bad = {{"spec", {{"n", 5}, {"m", 6}, {"k", 4}}}};
  EXPECT_EQ(DefaultPruneValidate(schema, bad).size(), 3u);
  json anything = {{"spec", {{"whatever", 1}}}};
  EXPECT_TRUE(DefaultPruneValidate(nullptr, anything).empty());
  EXPECT_EQ(anything["spec"]["whatever"], 1) << "no schema: nothing pruned";
}

}  // namespace
}  // namespace star::apiserver
