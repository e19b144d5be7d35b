#include "table.h"

#include <chrono>
#include <ctime>

#include "jsonpath.h"

namespace star::apiserver {

using nlohmann::json;

namespace {

std::string HumanDuration(long long seconds) {
  auto s = [](long long v) { return std::to_string(v); };
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return s(seconds) + "s";
  const long long minutes = seconds / 60;
  if (minutes < 10) return seconds % 60 == 0 ? s(minutes) + "m" : s(minutes) + "m" + s(seconds % 60) + "s";
  if (minutes < 180) return s(minutes) + "m";
  const long long hours = minutes / 60;
  if (hours < 8) return minutes % 60 == 0 ? s(hours) + "h" : s(hours) + "h" + s(minutes % 60) + "m";
  if (hours < 48) return s(hours) + "h";
  if (hours < 24 * 8) return hours % 24 == 0 ? s(hours / 24) + "d" : s(hours / 24) + "d" + s(hours % 24) + "h";
  if (hours < 24 * 365 * 2) return s(hours / 24) + "d";
  const long long years = hours / 24 / 365;
  if (hours < 24 * 365 * 8) {
    const long long days = (hours / 24) % 365;
    return days == 0 ? s(years) + "y" : s(years) + "y" + s(days) + "d";
  }
  return s(years) + "y";
}

json ComputedCell(const std::string& which, const json& obj) {
  if (which == "#ready") {
    const json containers = obj.contains("spec") ? obj["spec"].value("containers", json::array()) : json::array();
    const json statuses = obj.contains("status") ? obj["status"].value("containerStatuses", json::array()) : json::array();
    int ready = 0;
    for (const auto& st : statuses) {
      if (st.is_object() && st.value("ready", false)) ++ready;
    }
    return std::to_string(ready) + "/" + std::to_string(containers.size());
  }
  if (which == "#restarts") {
    long long restarts = 0;
    const json statuses = obj.contains("status") ? obj["status"].value("containerStatuses", json::array()) : json::array();
    for (const auto& st : statuses) {
      if (st.is_object()) restarts += st.value("restartCount", 0LL);
    }
    return restarts;
  }
  if (which == "#data") {
    size_t n = 0;
    for (const char* field : {"data", "binaryData"}) {
      if (obj.contains(field) && obj[field].is_object()) n += obj[field].size();
    }
    return n;
  }
  if (which == "#object") {
    const json involved = obj.value("involvedObject", json::object());
    std::string kind = involved.value("kind", "");
    for (auto& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return kind + "/" + involved.value("name", "");
  }
  return nullptr;
}

json Cell(const PrinterColumn& column, const json& obj) {
  if (!column.json_path.empty() && column.json_path[0] == '#') return ComputedCell(column.json_path, obj);
  auto results = EvalJsonPath(obj, column.json_path);
  if (!results.ok() || results->empty()) return nullptr;
  const json& first = results->front();
  if (column.type == "date") {
    return first.is_string() ? json(HumanAge(first.get<std::string>())) : json(nullptr);
  }
  if (column.type == "integer" && first.is_number()) return first.get<long long>();
  if (column.type == "number" && first.is_number()) return first;
  if (column.type == "boolean" && first.is_boolean()) return first;
  std::string text;
  for (const auto& v : *results) {
    if (!text.empty()) text += ",";
    text += v.is_string() ? v.get<std::string>() : v.dump();
  }
  return text;
}

}  // namespace

std::string HumanAge(const std::string& rfc3339) {
  std::tm tm{};
  const char* end = strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return "<unknown>";
  const std::time_t then = timegm(&tm);
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  return HumanDuration(static_cast<long long>(now - then));
}

json ToTable(const ResourceType& type, const std::string& version, const std::vector<json>& objects,
             const std::string& resource_version, const TableOptions& options) {
  const VersionSpec* v = type.Version(version);
  std::vector<PrinterColumn> columns = v != nullptr ? v->columns : std::vector<PrinterColumn>{};
  if (columns.empty()) {
    PrinterColumn age;
    age.name = "Age";
    age.type = "date";
    age.json_path = ".metadata.creationTimestamp";
    columns.push_back(age);
  }
  json definitions = json::array();
  definitions.push_back({{"name", "Name"},
                         {"type", "string"},
                         {"format", "name"},
                         {"description", "Name must be unique within a namespace."},
                         {"priority", 0}});
  for (const auto& c : columns) {
    definitions.push_back({{"name", c.name},
                           {"type", c.type == "date" ? "string" : c.type},
                           {"format", c.type == "date" ? "date" : c.format},
                           {"description", c.description},
                           {"priority", c.priority}});
  }
  json rows = json::array();
  for (const auto& obj : objects) {
    json cells = json::array();
    cells.push_back(obj.contains("metadata") ? obj["metadata"].value("name", "") : "");
    for (const auto& c : columns) cells.push_back(Cell(c, obj));
    json row = {{"cells", cells}};
    if (options.include_object == "Object") {
      row["object"] = obj;
    } else if (options.include_object != "None") {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", options.api_version},
                       {"metadata", obj.value("metadata", json::object())}};
    }
    rows.push_back(std::move(row));
  }
  json table = {{"kind", "Table"},
                {"apiVersion", options.api_version},
                {"metadata", {{"resourceVersion", resource_version}}},
                {"rows", rows}};
  if (options.column_definitions) table["columnDefinitions"] = definitions;
  return table;
}

}  // namespace star::apiserver
