#include "selector.h"

#include <algorithm>
#include <cctype>

namespace star::apiserver {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool ValidLabelToken(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == '/';
  });
}

bool ValidLabelValue(std::string_view s) { return s.empty() || ValidLabelToken(s); }

// Splits on commas that are not inside parentheses.
StatusOr<std::vector<std::string_view>> SplitTopLevel(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')') {
      if (--depth < 0) return Status::InvalidArgument("unbalanced ')' in \"" + std::string(text) + "\"");
    }
    if (text[i] == ',' && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return Status::InvalidArgument("unbalanced '(' in \"" + std::string(text) + "\"");
  parts.push_back(text.substr(start));
  return parts;
}

StatusOr<LabelSelector::Requirement> ParseRequirement(std::string_view raw) {
  using Op = LabelSelector::Op;
  const std::string_view part = Trim(raw);
  const std::string text(part);
  auto invalid = [&](const std::string& why) {
    return Status::InvalidArgument("unable to parse requirement \"" + text + "\": " + why);
  };
  LabelSelector::Requirement r;
  if (part.empty()) return invalid("empty requirement");
  if (part.front() == '!') {
    r.key = std::string(Trim(part.substr(1)));
    r.op = Op::kDoesNotExist;
    if (!ValidLabelToken(r.key)) return invalid("invalid label key");
    return r;
  }
  // Set-based: key in (...) / key notin (...).
  const size_t paren = part.find('(');
  if (paren != std::string_view::npos) {
    if (part.back() != ')') return invalid("expected ')' at the end");
    const std::string_view head = Trim(part.substr(0, paren));
    const size_t space = head.find_last_of(" \t");
    if (space == std::string_view::npos) return invalid("expected 'in' or 'notin'");
    const std::string_view op = head.substr(space + 1);
    r.key = std::string(Trim(head.substr(0, space)));
    if (op == "in") {
      r.op = Op::kIn;
    } else if (op == "notin") {
      r.op = Op::kNotIn;
    } else {
      return invalid("expected 'in' or 'notin', found '" + std::string(op) + "'");
    }
    if (!ValidLabelToken(r.key)) return invalid("invalid label key");
    const std::string_view inner = part.substr(paren + 1, part.size() - paren - 2);
    if (Trim(inner).empty()) return invalid("for 'in' and 'notin', the set must be non-empty");
    size_t start = 0;
    while (true) {
      size_t comma = inner.find(',', start);
      const bool last = comma == std::string_view::npos;
      if (last) comma = inner.size();
      const std::string_view value = Trim(inner.substr(start, comma - start));
      if (!ValidLabelValue(value)) return invalid("invalid label value \"" + std::string(value) + "\"");
      r.values.emplace_back(value);
      if (last) break;
      start = comma + 1;
    }
    if (r.values.empty()) return invalid("for 'in' and 'notin', the set must be non-empty");
    return r;
  }
  // Equality-based.
  size_t pos = part.find("!=");
  size_t op_len = 2;
  if (pos != std::string_view::npos) {
    r.op = Op::kNotEquals;
  } else if ((pos = part.find("==")) != std::string_view::npos) {
    r.op = Op::kEquals;
  } else if ((pos = part.find('=')) != std::string_view::npos) {
    r.op = Op::kEquals;
    op_len = 1;
  } else if (part.find_first_of("<>") != std::string_view::npos) {
    return invalid("'<' and '>' are not supported by this emulator");
  } else {
    r.key = std::string(part);
    r.op = Op::kExists;
    if (!ValidLabelToken(r.key)) return invalid("invalid label key");
    return r;
  }
  r.key = std::string(Trim(part.substr(0, pos)));
  const std::string_view value = Trim(part.substr(pos + op_len));
  if (!ValidLabelToken(r.key)) return invalid("invalid label key");
  if (!ValidLabelValue(value)) return invalid("invalid label value \"" + std::string(value) + "\"");
  r.values.emplace_back(value);
  return r;
}

}  // namespace

StatusOr<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector selector;
  if (Trim(text).empty()) return selector;
  STAR_ASSIGN_OR_RETURN(auto parts, SplitTopLevel(text));
  for (const auto part : parts) {
    STAR_ASSIGN_OR_RETURN(auto r, ParseRequirement(part));
    selector.requirements_.push_back(std::move(r));
  }
  return selector;
}

bool LabelSelector::Matches(const nlohmann::json& labels) const {
  for (const auto& r : requirements_) {
    const bool has = labels.is_object() && labels.contains(r.key);
    const std::string value =
        has && labels[r.key].is_string() ? labels[r.key].get<std::string>() : std::string();
    const bool in_values = has && std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    bool ok = false;
    switch (r.op) {
      case Op::kEquals:
      case Op::kIn:
        ok = in_values;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        ok = !in_values;
        break;
      case Op::kExists:
        ok = has;
        break;
      case Op::kDoesNotExist:
        ok = !has;
        break;
    }
    if (!ok) return false;
  }
  return true;
}

bool LabelSelector::MatchesObject(const nlohmann::json& object) const {
  if (requirements_.empty()) return true;
  static const nlohmann::json kNone;
  if (!object.is_object() || !object.contains("metadata")) return Matches(kNone);
  const auto& meta = object["metadata"];
  return Matches(meta.is_object() && meta.contains("labels") ? meta["labels"] : kNone);
}

StatusOr<FieldSelector> FieldSelector::Parse(std::string_view text) {
  FieldSelector selector;
  if (Trim(text).empty()) return selector;
  // Split on unescaped commas, then on the first unescaped operator.
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      parts.back() += text.substr(i, 2);
      ++i;
    } else if (text[i] == ',') {
      parts.emplace_back();
    } else {
      parts.back() += text[i];
    }
  }
  for (const auto& part : parts) {
    Requirement r;
    std::string lhs, rhs;
    bool found = false;
    for (size_t i = 0; i < part.size(); ++i) {
      if (part[i] == '\\') {
        ++i;
        continue;
      }
      if (part.compare(i, 2, "!=") == 0) {
        r.equals = false;
        lhs = part.substr(0, i);
        rhs = part.substr(i + 2);
      } else if (part.compare(i, 2, "==") == 0) {
        lhs = part.substr(0, i);
        rhs = part.substr(i + 2);
      } else if (part[i] == '=') {
        lhs = part.substr(0, i);
        rhs = part.substr(i + 1);
      } else {
        continue;
      }
      found = true;
      break;
    }
    if (!found) {
      return Status::InvalidArgument("invalid selector: '" + std::string(text) +
                                     "'; can't understand '" + part + "'");
    }
    std::string value;
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs[i] == '\\' && i + 1 < rhs.size()) ++i;
      value += rhs[i];
    }
    r.path = std::string(Trim(lhs));
    r.value = value;
    selector.requirements_.push_back(std::move(r));
  }
  return selector;
}

std::string FieldValue(const nlohmann::json& object, std::string_view path) {
  const nlohmann::json* node = &object;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string_view::npos) dot = path.size();
    const std::string key(path.substr(start, dot - start));
    if (!node->is_object() || !node->contains(key)) return "";
    node = &(*node)[key];
    start = dot + 1;
  }
  if (node->is_string()) return node->get<std::string>();
  if (node->is_null()) return "";
  return node->dump();
}

bool FieldSelector::Matches(const nlohmann::json& object) const {
  for (const auto& r : requirements_) {
    if ((FieldValue(object, r.path) == r.value) != r.equals) return false;
  }
  return true;
}

}  // namespace star::apiserver
