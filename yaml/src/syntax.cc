// libyaml's event parser over the whole stream; nothing is built, so the check takes
// memory proportional to the nesting only.
#include "star/yaml/syntax.h"

#include <yaml.h>

namespace star::yaml {
namespace {

// "L:C" (from 1) of byte `offset` of `text`.
std::string Position(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

// The parser's error as "<what>:L:C: problem": the reader (encoding) reports a byte
// offset, the scanner and parser a mark.
Status Failure(const yaml_parser_t& parser, std::string_view text, const std::string& what) {
  const std::string problem = parser.problem != nullptr ? parser.problem : "malformed";
  if (parser.error == YAML_READER_ERROR) {
    return Status::InvalidArgument(what + ":" + Position(text, parser.problem_offset) + ": not valid UTF-8 (" +
                                   problem + ")");
  }
  return Status::InvalidArgument(what + ":" + std::to_string(parser.problem_mark.line + 1) + ":" +
                                 std::to_string(parser.problem_mark.column + 1) + ": " + problem);
}

}  // namespace

Status CheckSyntax(std::string_view text, const std::string& what, int max_depth) {
  yaml_parser_t parser;
  if (yaml_parser_initialize(&parser) == 0) return Status::Internal(what + ": libyaml: cannot start a parser");
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  Status result;
  int depth = 0;
  for (bool done = false; !done;) {
    yaml_event_t event;
    if (yaml_parser_parse(&parser, &event) == 0) {
      result = Failure(parser, text, what);
      break;
    }
    done = event.type == YAML_STREAM_END_EVENT;
    if (event.type == YAML_SEQUENCE_START_EVENT || event.type == YAML_MAPPING_START_EVENT) ++depth;
    if (event.type == YAML_SEQUENCE_END_EVENT || event.type == YAML_MAPPING_END_EVENT) --depth;
    if (depth > max_depth) {
      result = Status::InvalidArgument(what + ":" + std::to_string(event.start_mark.line + 1) + ":" +
                                       std::to_string(event.start_mark.column + 1) + ": nested deeper than " +
                                       std::to_string(max_depth) + " levels");
      done = true;
    }
    yaml_event_delete(&event);
  }
  yaml_parser_delete(&parser);
  return result;
}

}  // namespace star::yaml
