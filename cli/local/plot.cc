#include "local/plot.h"

#include "local/format.h"

#include <chrono>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "local/netns_util.h"


namespace star::local {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kGnuplotTimeoutMs = 60'000;
constexpr size_t kMaxStderrChars = 4000;

// ---- reading the report (never throws) ----

std::optional<double> NumberAt(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int> IntAt(const json& obj, const char* key) {
  const std::optional<double> v = NumberAt(obj, key);
  if (!v || *v != std::floor(*v) || std::fabs(*v) > 1e9) return std::nullopt;
  return static_cast<int>(*v);
}

std::string StringAt(const json& obj, const char* key, const std::string& fallback) {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return fallback;
  return it->get<std::string>();
}

const json& ArrayAt(const json& obj, const char* key) {
  static const json kEmpty = json::array();
  if (!obj.is_object()) return kEmpty;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return kEmpty;
  return *it;
}

struct Event {
  double t = 0;
  std::string label;
  std::string color;
};

// What the picture shows, taken out of the report once.
struct PlotData {
  std::string job;
  std::string policy;
  std::optional<double> target;
  std::optional<double> tta;
  std::map<int, std::vector<std::pair<double, double>>> iteration;  // worker -> (t, seconds)
  std::vector<std::pair<double, double>> accuracy;                 // (t, accuracy)
  std::vector<Event> events;
  double x_max = 1;
};

// Colour per event; nullopt = not drawn (start/stop frame the run; TTA has its own line).
std::optional<std::string> EventColor(const std::string& event) {
  if (event == "start" || event == "stop" || event == "target_reached") return std::nullopt;
  if (event == "straggler") return "red";
  if (event == "recovered") return "dark-green";
  if (event == "mode") return "blue";
  if (event == "amp_on" || event == "amp_off") return "orange";
  if (event == "batches") return "purple";
  if (event == "inject" || event == "lift") return "black";
  if (event.rfind("reallocate", 0) == 0) return "brown";
  return "gray40";
}

PlotData Extract(const json& report) {
  PlotData d;
  d.job = StringAt(report, "job", "job");
  d.policy = StringAt(report, "policy", "?");
  d.target = NumberAt(report, "target_accuracy");
  d.tta = NumberAt(report, "tta_seconds");
  double x_max = NumberAt(report, "wall_seconds").value_or(0);
  const auto see = [&x_max](double t) { x_max = std::max(x_max, t); };

  for (const json& s : ArrayAt(report, "samples")) {
    const std::optional<double> t = NumberAt(s, "t");
    const std::optional<int> w = IntAt(s, "worker");
    const std::optional<double> compute = NumberAt(s, "compute_seconds");
    if (!t || !w || !compute) continue;
    d.iteration[*w].emplace_back(*t, *compute + NumberAt(s, "communication_seconds").value_or(0));
    see(*t);
  }
  for (const json& p : ArrayAt(report, "accuracy_curve")) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number()) continue;
    const double t = p[0].get<double>(), a = p[1].get<double>();
    if (!std::isfinite(t) || !std::isfinite(a)) continue;
    d.accuracy.emplace_back(t, a);
    see(t);
  }
  for (const json& e : ArrayAt(report, "timeline")) {
    const std::optional<double> t = NumberAt(e, "t");
    const std::string event = StringAt(e, "event", "");
    const std::optional<std::string> color = EventColor(event);
    if (!t || event.empty() || !color) continue;
    const int worker = IntAt(e, "worker").value_or(-1);
    std::string label = event;
    if (worker >= 0) {
      label += " w" + std::to_string(worker);
    } else if (event == "mode") {
      const std::string detail = StringAt(e, "detail", "");
      label += " " + detail.substr(0, detail.find(' '));  // "mode fixed_k"
    }
    d.events.push_back({*t, std::move(label), *color});
    see(*t);
  }
  if (d.tta) see(*d.tta);
  d.x_max = x_max > 0 ? x_max : 1;
  return d;
}

// ---- the script ----

// A single-quoted gnuplot string: no escapes are interpreted, '' is a quote.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
      if (c == '\'') out += '\'';
    }
  }
  return out + "'";
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string WorkerFile(const std::string& dir, int worker) {
  return dir + "/worker-" + std::to_string(worker) + ".dat";
}

std::string AccuracyFile(const std::string& dir) { return dir + "/accuracy.dat"; }

std::string Script(const PlotData& d, const std::string& data_dir, const std::string& png) {
  std::ostringstream g;
  const std::string xrange = "set xrange [0:" + Num(d.x_max) + "]\n";
  g << "set encoding utf8\n"
    << "set terminal pngcairo noenhanced size 1200,900 font 'sans,10'\n"
    << "set output " << Quote(png) << "\n"
    << "set multiplot layout 2,1 title " << Quote(d.job + " \u2014 policy " + d.policy) << "\n"
    << "set grid\nset key outside right top\nset xlabel 'seconds since job start'\n"
    // Fixed margins keep the panels' time axes aligned whatever the legends' widths.
    << "set lmargin at screen 0.08\nset rmargin at screen 0.86\n"
    << xrange;

  // Panel 1: iteration times and the events.
  g << "set title 'per-worker iteration time (compute + communication)'\n"
    << "set ylabel 'iteration time (s)'\n";
  int tag = 0;
  for (const Event& e : d.events) {
    ++tag;
    g << "set arrow " << tag << " from " << Num(e.t) << ", graph 0 to " << Num(e.t)
      << ", graph 1 nohead dt 2 lc rgb " << Quote(e.color) << "\n"
      << "set label " << tag << " " << Quote(e.label) << " at " << Num(e.t) << ", graph "
      << Num(0.95 - 0.07 * ((tag - 1) % 8)) << " offset 0.3,0 font ',8' tc rgb "
      << Quote(e.color) << "\n";
  }
  if (d.iteration.empty()) {
    g << "set yrange [0:1]\nplot NaN title 'no samples'\n";
  } else {
    g << "set yrange [0:*]\nplot ";
    bool first = true;
    for (const auto& [worker, points] : d.iteration) {
      g << (first ? "" : ", ") << Quote(WorkerFile(data_dir, worker))
        << " using 1:2 with lines lw 1.5 title " << Quote("worker " + std::to_string(worker));
      first = false;
    }
    g << "\n";
  }
  g << "unset arrow\nunset label\n";

  // Panel 2: accuracy, target and time to accuracy.
  g << "set title 'test accuracy'\nset ylabel 'accuracy'\nset yrange [0:1]\n";
  if (d.tta) {
    g << "set arrow 1 from " << Num(*d.tta) << ", graph 0 to " << Num(*d.tta)
      << ", graph 1 nohead lw 1.5 lc rgb 'red'\n"
      << "set label 1 " << Quote("TTA " + Fixed(*d.tta, 1) + " s") << " at " << Num(*d.tta)
      << ", graph 0.1 offset 0.5,0 tc rgb 'red'\n";
  }
  std::vector<std::string> plots;
  if (!d.accuracy.empty()) {
    plots.push_back(Quote(AccuracyFile(data_dir)) +
                    " using 1:2 with linespoints pt 7 ps 0.5 title 'accuracy'");
  }
  if (d.target) {
    plots.push_back(Num(*d.target) + " with lines dt 3 lw 1.5 lc rgb 'gray30' title " +
                    Quote("target " + Num(*d.target)));
  }
  if (plots.empty()) plots.push_back("NaN title 'no evaluations'");
  g << "plot ";
  for (size_t i = 0; i < plots.size(); ++i) g << (i > 0 ? ", " : "") << plots[i];
  g << "\nunset multiplot\nset output\n";
  return g.str();
}

// ---- running gnuplot ----

Status WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::Internal("--plot: cannot write " + path.string());
  return Status::Ok();
}

// Removes a directory tree when it goes out of scope.
class TempDir {
 public:
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  Status Create() {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string tmpl = (base / "star-plot-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return Status::Internal("--plot: cannot create a temporary directory in " + base.string() +
                              ": " + std::strerror(errno));
    }
    path_ = tmpl;
    return Status::Ok();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

std::string PlotScript(const json& report, const std::string& data_dir, const std::string& png_path) {
  return Script(Extract(report), data_dir, png_path);
}

Status WritePlot(const json& report, const std::string& png_path) {
  const auto found = FindProgram("gnuplot", Fallback::kNone);
  if (!found.ok()) return Status::FailedPrecondition("--plot: gnuplot not found (install gnuplot-nox)");
  const std::string& gnuplot = *found;

  TempDir dir;
  STAR_RETURN_IF_ERROR(dir.Create());
  const std::string data_dir = dir.path().string();
  const PlotData d = Extract(report);
  for (const auto& [worker, points] : d.iteration) {
    std::string text;
    for (const auto& [t, v] : points) text += Num(t) + " " + Num(v) + "\n";
    STAR_RETURN_IF_ERROR(WriteFile(WorkerFile(data_dir, worker), text));
  }
  std::string acc;
  for (const auto& [t, a] : d.accuracy) acc += Num(t) + " " + Num(a) + "\n";
  STAR_RETURN_IF_ERROR(WriteFile(AccuracyFile(data_dir), acc));
  const std::string script = (dir.path() / "plot.gp").string();
  STAR_RETURN_IF_ERROR(WriteFile(script, Script(d, data_dir, png_path)));

  // gnuplot's own path (found on PATH above), so RunCommand runs exactly that program.
  StatusOr<CommandResult> run =
      RunCommand({gnuplot, script}, std::chrono::milliseconds(kGnuplotTimeoutMs));
  if (!run.ok()) {
    if (run.status().code() == StatusCode::kDeadlineExceeded) {
      return Status::DeadlineExceeded("--plot: gnuplot did not finish within " +
                                      std::to_string(kGnuplotTimeoutMs / 1000) + " s (killed)");
    }
    return Status::Internal("--plot: cannot start " + gnuplot + ": " + run.status().message());
  }
  if (run->exit_code == 0) return Status::Ok();
  std::string err = run->err;
  if (err.size() > kMaxStderrChars) err = "..." + err.substr(err.size() - kMaxStderrChars);
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  const std::string how = run->exit_code > 128 ? "signal " + std::to_string(run->exit_code - 128)
                                               : "exit status " + std::to_string(run->exit_code);
  return Status::Internal("--plot: gnuplot failed (" + how + "): " + err);
}

}  // namespace star::local
