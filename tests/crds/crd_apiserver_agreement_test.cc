// The C++ codecs and the API-server emulator's schema handling
// (tests/apiserver/schema.h: pruning, defaulting, validation) agree on every document
// crd_model.h generates from the CRDs: valid for both or invalid for both, and the
// defaults the emulator fills in are the ones the C++ decoder applies.
//
// Where they deliberately differ the expectation says so: an unknown field is pruned by
// the server (valid) but rejected by C++; a cross-field (CEL) violation is structurally
// valid (the emulator does not evaluate CEL) but rejected by C++. The emulator does not
// check formats (date-time), list-map key uniqueness or the types of apiVersion, kind and
// metadata, so invalid cases of those kinds are not asked of it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crd_fixtures.h"
#include "crd_model.h"
#include "schema.h"

namespace star::crds {
namespace {

using nlohmann::json;

// Invalid cases the emulator is documented not to catch: formats, list-map keys, and the
// type of apiVersion, kind and metadata, which the real server decodes before any schema
// applies.
bool EmulatorDoesNotCheck(const Case& c) {
  if (c.expect != Expect::kInvalid) return false;
  for (const char* prefix :
       {"date-time ", "duplicate key ", "type apiVersion ", "type kind ", "type metadata "}) {
    if (c.name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::string Describe(const std::vector<apiserver::SchemaError>& errors) {
  return errors.empty() ? "(no errors)" : apiserver::FormatSchemaErrors(errors);
}

class CrdApiserverAgreementTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kind_ = GetParam() == "TrainingJob" ? TrainingJobKind() : NodeAllocationKind();
    StatusOr<json> crd = LoadCrd(kind_.model.crd_file);
    ASSERT_TRUE(crd.ok()) << crd.status();
    schema_ = OpenApiSchema(*crd);
    ASSERT_TRUE(schema_.is_object());
  }

  // Asks the emulator and the C++ codec about one case.
  void Check(const Case& c) {
    SCOPED_TRACE(c.name + " [" + std::string(ExpectName(c.expect)) + "]");
    json served = c.doc;
    const std::vector<apiserver::SchemaError> found =
        apiserver::DefaultPruneValidate(schema_, served);
    const StatusOr<json> cpp = kind_.round_trip(c.doc);
    switch (c.expect) {
      case Expect::kValid: {
        ASSERT_TRUE(found.empty()) << Describe(found) << "\n" << c.doc.dump();
        ASSERT_TRUE(cpp.ok()) << cpp.status();
        // The server's defaults are the C++ decoder's: decoding the defaulted object
        // gives what decoding the original gave.
        const StatusOr<json> cpp_served = kind_.round_trip(served);
        ASSERT_TRUE(cpp_served.ok()) << cpp_served.status() << "\n" << served.dump();
        EXPECT_EQ(*cpp_served, *cpp);
        if (c.written == Case::Written::kValue) {
          const json* at = c.field.empty() ? &served : Find(served, c.field);
          ASSERT_NE(at, nullptr) << ToString(c.field) << " missing after defaulting";
          EXPECT_EQ(*at, c.written_value) << ToString(c.field);
        }
        return;
      }
      case Expect::kInvalid: {
        EXPECT_FALSE(cpp.ok()) << "C++ accepted:\n" << c.doc.dump();
        ASSERT_FALSE(found.empty()) << "the emulator accepted:\n" << c.doc.dump();
        bool names_field = false;
        for (const apiserver::SchemaError& e : found) names_field |= e.field == ToString(c.field);
        EXPECT_TRUE(names_field) << "no error names " << ToString(c.field) << ": "
                                 << Describe(found);
        return;
      }
      case Expect::kPruned: {
        EXPECT_TRUE(found.empty()) << Describe(found);
        EXPECT_EQ(Find(served, c.field), nullptr) << ToString(c.field) << " was not pruned";
        EXPECT_FALSE(cpp.ok()) << "C++ accepted an unknown field";
        return;
      }
      case Expect::kCrossField: {
        EXPECT_TRUE(found.empty()) << "not a pure cross-field violation: " << Describe(found);
        EXPECT_FALSE(cpp.ok()) << "C++ accepted:\n" << c.doc.dump();
        return;
      }
    }
  }

  Kind kind_;
  json schema_;
};

TEST_P(CrdApiserverAgreementTest, EmulatorAndCppAgreeOnEveryGeneratedDocument) {
  std::vector<std::string> errors;
  const std::vector<Case> cases = GenerateCases(schema_, kind_.model, &errors);
  for (const std::string& e : errors) ADD_FAILURE() << e;
  int asked = 0;
  for (const Case& c : cases) {
    if (EmulatorDoesNotCheck(c)) continue;
    ++asked;
    Check(c);
  }
  EXPECT_GT(asked, 100);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CrdApiserverAgreementTest,
                         ::testing::Values("TrainingJob", "NodeAllocation"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace star::crds
