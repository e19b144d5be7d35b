#include "jsonpath.h"

#include <cctype>

namespace star::apiserver {
namespace {

using nlohmann::json;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Unquote(std::string_view s) {
  s = Trim(s);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    return std::string(s.substr(1, s.size() - 2));
  }
  return std::string(s);
}

// Reads a dotted path of plain names (used inside filters: @.a.b).
const json* Walk(const json& node, std::string_view dotted) {
  const json* cur = &node;
  while (!dotted.empty()) {
    if (dotted.front() == '.') dotted.remove_prefix(1);
    const size_t dot = dotted.find('.');
    const std::string key(dotted.substr(0, dot));
    if (!cur->is_object() || !cur->contains(key)) return nullptr;
    cur = &(*cur)[key];
    dotted = dot == std::string_view::npos ? std::string_view() : dotted.substr(dot);
  }
  return cur;
}

// Applies one bracket expression (without the brackets) to every node.
StatusOr<std::vector<const json*>> Bracket(const std::vector<const json*>& nodes, std::string_view expr) {
  std::vector<const json*> out;
  expr = Trim(expr);
  if (expr == "*") {
    for (const json* n : nodes) {
      if (n->is_array() || n->is_object()) {
        for (const auto& item : *n) out.push_back(&item);
      }
    }
    return out;
  }
  if (!expr.empty() && (expr.front() == '\'' || expr.front() == '"')) {
    const std::string key = Unquote(expr);
    for (const json* n : nodes) {
      if (n->is_object() && n->contains(key)) out.push_back(&(*n)[key]);
    }
    return out;
  }
  if (expr.size() >= 3 && expr.substr(0, 2) == "?(" && expr.back() == ')') {
    std::string_view cond = Trim(expr.substr(2, expr.size() - 3));
    bool equals = true;
    size_t op = cond.find("==");
    if (op == std::string_view::npos) {
      op = cond.find("!=");
      equals = false;
    }
    if (op == std::string_view::npos || cond.substr(0, 1) != "@") {
      return Status::InvalidArgument("unsupported filter \"" + std::string(expr) + "\"");
    }
    const std::string_view lhs = Trim(cond.substr(1, op - 1));
    const std::string rhs_text = Unquote(cond.substr(op + 2));
    const bool rhs_quoted = Trim(cond.substr(op + 2)).front() == '\'' || Trim(cond.substr(op + 2)).front() == '"';
    for (const json* n : nodes) {
      if (!n->is_array()) continue;
      for (const auto& item : *n) {
        const json* v = Walk(item, lhs);
        bool match = false;
        if (v != nullptr) {
          match = v->is_string() ? (rhs_quoted && v->get<std::string>() == rhs_text) : v->dump() == rhs_text;
        }
        if (match == equals) out.push_back(&item);
      }
    }
    return out;
  }
  try {
    size_t used = 0;
    const long index = std::stol(std::string(expr), &used);
    if (used != expr.size()) throw std::invalid_argument("trailing text");
    for (const json* n : nodes) {
      if (!n->is_array()) continue;
      const long size = static_cast<long>(n->size());
      const long i = index < 0 ? size + index : index;
      if (i >= 0 && i < size) out.push_back(&(*n)[static_cast<size_t>(i)]);
    }
    return out;
  } catch (const std::exception&) {
    return Status::InvalidArgument("unsupported index \"" + std::string(expr) + "\"");
  }
}

}  // namespace

StatusOr<std::vector<json>> EvalJsonPath(const json& root, std::string_view path) {
  path = Trim(path);
  if (path.size() >= 2 && path.front() == '{' && path.back() == '}') path = Trim(path.substr(1, path.size() - 2));
  if (!path.empty() && path.front() == '$') path.remove_prefix(1);
  std::vector<const json*> nodes{&root};
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
      size_t end = i;
      while (end < path.size() && path[end] != '.' && path[end] != '[') ++end;
      const std::string key(path.substr(i, end - i));
      i = end;
      if (key.empty()) continue;
      if (key == "*") {
        STAR_ASSIGN_OR_RETURN(nodes, Bracket(nodes, "*"));
        continue;
      }
      std::vector<const json*> next;
      for (const json* n : nodes) {
        if (n->is_object() && n->contains(key)) next.push_back(&(*n)[key]);
      }
      nodes = std::move(next);
    } else if (path[i] == '[') {
      // The matching ']' (filters may hold brackets inside quotes).
      size_t end = i + 1;
      char quote = 0;
      int depth = 0;
      for (; end < path.size(); ++end) {
        const char c = path[end];
        if (quote != 0) {
          if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == '[') {
          ++depth;
        } else if (c == ']') {
          if (depth == 0) break;
          --depth;
        }
      }
      if (end >= path.size()) return Status::InvalidArgument("unclosed '[' in \"" + std::string(path) + "\"");
      STAR_ASSIGN_OR_RETURN(nodes, Bracket(nodes, path.substr(i + 1, end - i - 1)));
      i = end + 1;
    } else {
      // A path may start without a dot ("status.phase").
      size_t end = i;
      while (end < path.size() && path[end] != '.' && path[end] != '[') ++end;
      const std::string key(path.substr(i, end - i));
      i = end;
      std::vector<const json*> next;
      for (const json* n : nodes) {
        if (n->is_object() && n->contains(key)) next.push_back(&(*n)[key]);
      }
      nodes = std::move(next);
    }
  }
  std::vector<json> out;
  out.reserve(nodes.size());
  for (const json* n : nodes) out.push_back(*n);
  return out;
}

}  // namespace star::apiserver
