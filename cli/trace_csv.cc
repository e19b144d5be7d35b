#include "trace_csv.h"

#include <array>
#include <charconv>
#include <cmath>
#include <string_view>
#include <unordered_map>

namespace star::cli {
namespace {

constexpr std::array<std::string_view, 4> kColumns = {"iteration", "worker", "compute_seconds",
                                                      "communication_seconds"};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitCommas(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    out.push_back(Trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(*out);
}

}  // namespace

StatusOr<std::vector<detect::Sample>> ParseTraceCsv(std::istream& in, const std::string& source) {
  std::vector<detect::Sample> samples;
  std::array<size_t, 4> col = {0, 1, 2, 3};
  size_t min_fields = 4;
  bool first = true;
  std::unordered_map<int, int64_t> last_iteration;
  std::string line;
  size_t lineno = 0;
  auto error = [&](std::string_view what) {
    return Status::InvalidArgument(source + ":" + std::to_string(lineno) + ": " + std::string(what));
  };

  while (std::getline(in, line)) {
    ++lineno;
    std::string_view l = Trim(line);
    if (l.empty() || l.front() == '#') continue;
    auto fields = SplitCommas(l);
    if (first) {
      first = false;
      double probe = 0;
      if (!ParseDouble(fields[0], &probe)) {  // a header
        for (size_t c = 0; c < kColumns.size(); ++c) {
          size_t found = fields.size();
          for (size_t f = 0; f < fields.size(); ++f) {
            if (fields[f] == kColumns[c]) found = f;
          }
          if (found == fields.size()) {
            return error("header: missing column \"" + std::string(kColumns[c]) +
                         "\" (expected iteration,worker,compute_seconds,communication_seconds)");
          }
          col[c] = found;
          min_fields = std::max(min_fields, found + 1);
        }
        continue;
      }
    }
    if (fields.size() < min_fields) {
      return error("expected " + std::to_string(min_fields) + " columns, got " +
                   std::to_string(fields.size()));
    }
    detect::Sample s{};
    int64_t worker = 0;
    if (!ParseInt(fields[col[0]], &s.iteration) || s.iteration < 0) {
      return error("iteration: must be a non-negative integer, got \"" + std::string(fields[col[0]]) + "\"");
    }
    if (!ParseInt(fields[col[1]], &worker) || worker < 0 || worker > 1'000'000) {
      return error("worker: must be an integer in [0, 1000000], got \"" + std::string(fields[col[1]]) + "\"");
    }
    s.worker = static_cast<int>(worker);
    if (!ParseDouble(fields[col[2]], &s.compute_seconds) || s.compute_seconds < 0) {
      return error("compute_seconds: must be a non-negative number, got \"" +
                   std::string(fields[col[2]]) + "\"");
    }
    if (!ParseDouble(fields[col[3]], &s.communication_seconds) || s.communication_seconds < 0) {
      return error("communication_seconds: must be a non-negative number, got \"" +
                   std::string(fields[col[3]]) + "\"");
    }
    auto [it, inserted] = last_iteration.try_emplace(s.worker, s.iteration);
    if (!inserted) {
      if (s.iteration < it->second) {
        return error("iteration: went backwards for worker " + std::to_string(s.worker) + " (" +
                     std::to_string(s.iteration) + " after " + std::to_string(it->second) + ")");
      }
      it->second = s.iteration;
    }
    samples.push_back(s);
  }
  if (in.bad()) return Status::Unavailable(source + ": read error");
  if (samples.empty()) return Status::InvalidArgument(source + ": no trace rows");
  return samples;
}

}  // namespace star::cli
