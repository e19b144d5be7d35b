#include "local/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

extern char** environ;

namespace star::local {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Double-quoted gnuplot string.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') continue;
    out += c;
  }
  return out + "\"";
}

std::set<int> WorkersIn(const json& report) {
  std::set<int> w;
  if (report.contains("samples")) {
    for (const auto& s : report["samples"]) w.insert(s.value("worker", 0));
  }
  return w;
}

double Num(const json& j, const char* key, double fallback = 0) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

}  // namespace

std::string PlotScript(const json& report, const std::string& data_dir, const std::string& png) {
  std::ostringstream g;
  const std::string job = report.value("job", std::string("job"));
  const std::string policy = report.value("policy", std::string("?"));
  g << "set terminal pngcairo size 1200,900 font 'sans,10'\n"
    << "set output " << Quote(png) << "\n"
    << "set multiplot layout 2,1 title " << Quote(job + " - policy " + policy) << "\n"
    << "set grid\nset key outside right top noenhanced\nset xlabel 'seconds since start'\n";
  // Both panels share the time axis: the whole run.
  const double wall = Num(report, "wall_seconds", 0);
  const std::string xrange = wall > 0 ? "set xrange [0:" + std::to_string(wall) + "]\n" : "";
  g << xrange;
  // Events as vertical lines with labels (panel 1).
  int arrow = 1;
  if (report.contains("timeline")) {
    int row = 0;
    for (const auto& e : report["timeline"]) {
      const std::string ev = e.value("event", std::string());
      if (ev == "start" || ev == "stop") continue;
      const double t = Num(e, "t");
      const int w = e.value("worker", -1);
      const std::string label = ev + (w >= 0 ? " w" + std::to_string(w) : "");
      const char* color = ev == "straggler" ? "red" : ev == "recovered" ? "dark-green"
                          : ev == "mode" ? "blue" : ev.rfind("amp", 0) == 0 ? "orange"
                          : ev == "inject" || ev == "lift" ? "black" : "purple";
      g << "set arrow " << arrow++ << " from " << t << ", graph 0 to " << t
        << ", graph 1 nohead dt 2 lc rgb '" << color << "'\n";
      g << "set label " << arrow << " " << Quote(label) << " at " << t << ", graph "
        << (0.95 - 0.07 * (row++ % 8)) << " noenhanced font ',8' tc rgb '" << color << "'\n";
    }
  }
  g << "set ylabel 'iteration time (s)'\nset title 'per-worker iteration time (compute + communication)'\n";
  const auto workers = WorkersIn(report);
  if (workers.empty()) {
    g << (xrange.empty() ? "set xrange [0:1]\n" : "") << "set yrange [0:1]\nplot NaN title 'no samples'\n";
  } else {
    g << "plot ";
    bool first = true;
    for (int w : workers) {
      g << (first ? "" : ", ") << Quote(data_dir + "/worker-" + std::to_string(w) + ".dat")
        << " using 1:2 with lines lw 1.5 title 'worker " << w << "'";
      first = false;
    }
    g << "\n";
  }
  g << "unset arrow\nunset label\nunset yrange\n" << xrange;
  g << "set ylabel 'test accuracy'\nset title 'accuracy (evaluated on snapshots of worker 0)'\n";
  const double target = Num(report, "target_accuracy", 0);
  if (report.contains("tta_seconds") && report["tta_seconds"].is_number()) {
    const double tta = report["tta_seconds"].get<double>();
    g << "set arrow 1 from " << tta << ", graph 0 to " << tta
      << ", graph 1 nohead lc rgb 'red' lw 1.5\n"
      << "set label 2 " << Quote("TTA " + std::to_string(tta).substr(0, 6) + " s") << " at "
      << tta << ", graph 0.1 offset 1,0 noenhanced tc rgb 'red'\n";
  }
  const bool has_acc = report.contains("accuracy_curve") && !report["accuracy_curve"].empty();
  if (has_acc) {
    g << "plot " << Quote(data_dir + "/accuracy.dat")
      << " using 1:2 with linespoints pt 7 ps 0.5 title 'accuracy', " << target
      << " with lines dt 3 lc rgb 'gray' title 'target'\n";
  } else {
    g << (xrange.empty() ? "set xrange [0:1]\n" : "") << "set yrange [0:1]\nplot " << target
      << " with lines dt 3 lc rgb 'gray' title 'target (no evaluations)'\n";
  }
  g << "unset multiplot\n";
  return g.str();
}

Status WritePlot(const json& report, const std::string& png_path) {
  std::string tmpl = (fs::temp_directory_path() / "star-plot-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::Unavailable("--plot: cannot create a temporary directory");
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{dir};

  std::map<int, std::ofstream> files;
  if (report.contains("samples")) {
    for (const auto& s : report["samples"]) {
      const int w = s.value("worker", 0);
      auto it = files.find(w);
      if (it == files.end()) {
        it = files.emplace(w, std::ofstream(dir / ("worker-" + std::to_string(w) + ".dat"))).first;
      }
      it->second << Num(s, "t") << ' '
                 << Num(s, "compute_seconds") + Num(s, "communication_seconds") << '\n';
    }
  }
  files.clear();
  {
    std::ofstream acc(dir / "accuracy.dat");
    if (report.contains("accuracy_curve")) {
      for (const auto& p : report["accuracy_curve"]) {
        if (p.is_array() && p.size() == 2) acc << p[0].get<double>() << ' ' << p[1].get<double>() << '\n';
      }
    }
  }
  std::error_code ec;
  const fs::path png = fs::absolute(png_path, ec);
  const fs::path script = dir / "plot.gp";
  std::ofstream(script) << PlotScript(report, dir.string(), png.string());

  const std::string err_path = (dir / "stderr").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string script_s = script.string();
  char arg0[] = "gnuplot";
  char* argv[] = {arg0, script_s.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "gnuplot", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == ENOENT) return Status::FailedPrecondition("--plot: gnuplot not found (install gnuplot-nox)");
  if (rc != 0) return Status::Internal("--plot: cannot start gnuplot: " + std::string(std::strerror(rc)));
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(err_path);
    std::stringstream s;
    s << in.rdbuf();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      return Status::FailedPrecondition("--plot: gnuplot not found (install gnuplot-nox)");
    }
    return Status::Internal("--plot: gnuplot failed: " + s.str());
  }
  return Status::Ok();
}

}  // namespace star::local
