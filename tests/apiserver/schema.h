// Structural-schema handling of a CustomResourceDefinition's openAPIV3Schema, as the
// Kubernetes API server applies it to custom resources on create, update and patch:
// pruning of unknown fields, defaulting, and validation with the server's messages.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace star::apiserver {

// One validation failure, shaped like the API server's field.Error.
struct SchemaError {
  // The field path: "spec.workers.replicas"; array items as "spec.stragglers[2].node".
  std::string field;
  // The StatusCause reason: "FieldValueRequired", "FieldValueInvalid",
  // "FieldValueNotSupported" (enum), "FieldValueTypeInvalid", "FieldValueTooLong"
  // (maxLength), "FieldValueTooMany" (maxItems, maxProperties).
  std::string type;
  // The error without the field, as the server writes it (the StatusCause message):
  // "Invalid value: 0: spec.workers.replicas in body should be greater than or equal to 1",
  // "Required value", "Unsupported value: \"Foo\": supported values: \"SSGD\", \"ASGD\"".
  // The server's full text is field + ": " + message.
  std::string message;
};

// Applies `open_api_v3_schema` to `object`, a whole resource (apiVersion, kind, metadata,
// spec, status), in place and in the server's order:
//   1. pruning: fields the schema does not declare are removed, unless an enclosing schema
//      has x-kubernetes-preserve-unknown-fields: true (or additionalProperties); null values
//      of fields that are not nullable are removed too;
//   2. defaulting: a missing field whose schema has a default gets a copy of it, and
//      defaults inside defaulted values are applied as well;
//   3. validation: type, required, enum, minimum/maximum (exclusiveMinimum/Maximum),
//      multipleOf, minLength/maxLength/pattern, minItems/maxItems, minProperties/
//      maxProperties, nullable, x-kubernetes-int-or-string, allOf/anyOf/oneOf/not.
// apiVersion and kind are left alone; metadata is neither pruned nor defaulted, and of it
// only metadata.name is validated (against the schema's metadata.properties.name, if any).
// CEL rules (x-kubernetes-validations) and formats are not evaluated.
// Returns every error found, in field order; empty means valid.
std::vector<SchemaError> DefaultPruneValidate(const nlohmann::json& open_api_v3_schema,
                                              nlohmann::json& object);

// The errors as the API server joins them after `<Kind> "<name>" is invalid: `:
// "spec.x: Required value" for one, "[spec.x: Required value, spec.y: ...]" for several.
std::string FormatSchemaErrors(const std::vector<SchemaError>& errors);

}  // namespace star::apiserver
