// The API emulator's protobuf request bodies (apiserver::DecodeKubernetesProtobuf) on any
// bytes, and the raw wire reader on the same bytes. An accepted body is a JSON object
// the emulator can store and serve, so it must serialize.
#include "fuzz_support.h"
#include "protobuf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace star;
  const std::string_view body = fuzz::AsText(data, size);

  apiserver::WireReader reader(body);
  while (!reader.done()) {
    const size_t before = reader.position();
    StatusOr<apiserver::WireField> field = reader.Next();
    if (!field.ok()) {
      fuzz::Check(reader.done(), "after an error the reader is at its end");
      break;
    }
    fuzz::Check(reader.position() > before && reader.position() <= body.size(),
                "each field moves the reader forward, within the data");
  }

  StatusOr<nlohmann::json> object = apiserver::DecodeKubernetesProtobuf(body);
  if (!object.ok()) return 0;
  fuzz::Check(object->is_object(), "a decoded body is a JSON object", object->dump());
  std::string text;
  try {
    text = object->dump();
  } catch (const nlohmann::json::exception& e) {
    fuzz::Check(false, "a decoded body serializes", e.what());
  }
  return 0;
}
