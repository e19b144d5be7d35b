// Request bodies in Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf),
// which kubectl's typed clients send (`kubectl create namespace|configmap|secret|service`),
// read into the JSON form the rest of the emulator handles. Answers stay JSON.
//
// The encoding: the 4-byte prefix "k8s\0", then a runtime.Unknown message {1: typeMeta
// {1: apiVersion, 2: kind}, 2: raw (the object's own message), 3: contentEncoding,
// 4: contentType}. Field numbers follow k8s.io/api's generated.proto.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "star/core/status.h"

namespace star::apiserver {

// The media type of the encoding.
inline constexpr char kProtobufMediaType[] = "application/vnd.kubernetes.protobuf";

enum class WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// One field of a message on the wire.
struct WireField {
  int number = 0;
  WireType type = WireType::kVarint;
  std::uint64_t varint = 0;  // kVarint; the raw bits for kFixed64 and kFixed32
  std::string_view bytes;    // kLengthDelimited: views the reader's data
};

// Reads the fields of one protobuf message, in wire order, from bytes it does not own
// (they must outlive the reader and the fields it returns).
class WireReader {
 public:
  // Reads `data` in place: it must outlive the reader.
  explicit WireReader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }
  size_t position() const { return pos_; }

  // The next field. InvalidArgument (saying what, at which byte offset) for a truncated
  // tag or value, a varint over 10 bytes, field number 0, or a wire type other than
  // 0, 1, 2 and 5 (groups are not read). After an error the reader is at its end.
  StatusOr<WireField> Next();

 private:
  StatusOr<std::uint64_t> Varint(const char* what);
  std::string_view data_;
  size_t pos_ = 0;
};

// The JSON object a protobuf request body holds: apiVersion and kind from its typeMeta,
// the object's fields under their JSON names, as the Go types' JSON encoding writes them
// (bytes in base64, times in RFC 3339, quantities as strings, int-or-string as either;
// zero-valued optional scalars left out, empty structs kept). Unknown fields are skipped.
//
// Kinds read: v1 Namespace, ConfigMap, Secret, Service, Pod (metadata, most of the spec,
// status phase/conditions/IPs), Event; coordination.k8s.io/v1 Lease; DeleteOptions (any
// apiVersion). Errors: InvalidArgument for a malformed body, naming the field path and
// the problem ("ConfigMap data: truncated ..."); Unimplemented for a well-formed body
// of another kind, naming it.
StatusOr<nlohmann::json> DecodeKubernetesProtobuf(std::string_view body);

// "v1/ConfigMap", "coordination.k8s.io/v1/Lease", ... and "DeleteOptions": what
// DecodeKubernetesProtobuf reads.
std::vector<std::string> ProtobufKinds();

}  // namespace star::apiserver
