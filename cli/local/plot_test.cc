#include "local/plot.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace star::local {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Sets an environment variable for one scope and restores it afterwards (also when an
// assertion returns early).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Each test gets a temporary directory, removed when it ends (also on failure); the plot's
// own temporary directories are created inside it (TMPDIR), so leftovers can be checked.
class PlotTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "star-plot-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
    fs::create_directory(dir_ / "tmp");
    tmpdir_.emplace("TMPDIR", (dir_ / "tmp").string());
  }
  void TearDown() override {
    tmpdir_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string ReadAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool TmpIsEmpty() const { return fs::is_empty(dir_ / "tmp"); }

  fs::path dir_;
  std::optional<ScopedEnv> tmpdir_;
};

// Two workers for 10 s; worker 1 slows down at 5 s; the target is reached at 12.5 s.
json Report() {
  json r = {{"job", "fmnist"}, {"policy", "auto"},   {"target_accuracy", 0.85},
            {"tta_seconds", 12.5}, {"wall_seconds", 15.0}, {"workers", 2}};
  r["accuracy_curve"] = {{2.0, 0.5}, {6.0, 0.8}, {12.5, 0.86}};
  r["timeline"] = {
      {{"t", 0.0}, {"event", "start"}, {"worker", -1}, {"detail", ""}},
      {{"t", 5.0}, {"event", "inject"}, {"worker", 1}, {"detail", "worker=1,neighbor=3"}},
      {{"t", 7.0}, {"event", "straggler"}, {"worker", 1}, {"detail", "cause=compute"}},
      {{"t", 7.0}, {"event", "amp_on"}, {"worker", 1}, {"detail", ""}},
      {{"t", 8.0}, {"event", "mode"}, {"worker", -1}, {"detail", "fixed_k k=1 [[0,1]]"}},
      {{"t", 12.5}, {"event", "target_reached"}, {"worker", -1}, {"detail", ""}},
      {{"t", 15.0}, {"event", "stop"}, {"worker", -1}, {"detail", "target reached"}}};
  r["samples"] = json::array();
  for (int i = 0; i < 20; ++i) {
    for (int w = 0; w < 2; ++w) {
      r["samples"].push_back({{"t", 0.5 * i}, {"worker", w}, {"iteration", 2 * i},
                              {"compute_seconds", 0.05 * (w == 1 && i > 10 ? 3 : 1)},
                              {"communication_seconds", 0.01}, {"wait_seconds", 0.0},
                              {"batch", 64}, {"amp", false}});
    }
  }
  return r;
}

json EmptyReport() {
  return {{"job", "j"}, {"policy", "ssgd"}, {"target_accuracy", 0.9}, {"tta_seconds", nullptr},
          {"samples", json::array()}, {"accuracy_curve", json::array()},
          {"timeline", json::array()}, {"workers", 2}};
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool IsPng(const std::string& bytes) {
  return bytes.size() > 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

bool HaveGnuplot() { return ::system("command -v gnuplot >/dev/null 2>&1") == 0; }

TEST_F(PlotTest, ScriptPlotsEveryWorkerTheEventsTheTargetAndTheTta) {
  const std::string g = PlotScript(Report(), "/data", "/out/run.png");
  EXPECT_TRUE(Contains(g, "set terminal pngcairo")) << g;
  EXPECT_TRUE(Contains(g, "set output '/out/run.png'")) << g;
  EXPECT_TRUE(Contains(g, "title 'fmnist \u2014 policy auto'")) << g;
  EXPECT_TRUE(Contains(g, "set xrange [0:15]")) << g;  // wall_seconds: both panels
  EXPECT_TRUE(Contains(g, "'/data/worker-0.dat' using 1:2 with lines lw 1.5 title 'worker 0'")) << g;
  EXPECT_TRUE(Contains(g, "'/data/worker-1.dat' using 1:2 with lines lw 1.5 title 'worker 1'")) << g;
  EXPECT_TRUE(Contains(g, "'/data/accuracy.dat' using 1:2")) << g;
  EXPECT_TRUE(Contains(g, "set label 1 'inject w1' at 5, graph")) << g;
  EXPECT_TRUE(Contains(g, "set label 2 'straggler w1' at 7, graph")) << g;
  EXPECT_TRUE(Contains(g, "set label 3 'amp_on w1' at 7, graph")) << g;
  EXPECT_TRUE(Contains(g, "set label 4 'mode fixed_k' at 8, graph")) << g;
  EXPECT_TRUE(Contains(g, "set arrow 4 from 8, graph 0 to 8, graph 1 nohead")) << g;
  EXPECT_FALSE(Contains(g, "'start")) << g;   // the run's frame is not an event line
  EXPECT_FALSE(Contains(g, "target_reached")) << g;
  EXPECT_TRUE(Contains(g, "0.85 with lines")) << g;
  EXPECT_TRUE(Contains(g, "set arrow 1 from 12.5, graph 0 to 12.5, graph 1 nohead")) << g;
  EXPECT_TRUE(Contains(g, "'TTA 12.5 s'")) << g;
}

TEST_F(PlotTest, ScriptQuotesNamesAndSurvivesMalformedEntries) {
  json r = Report();
  r["job"] = "it's";
  r["samples"].push_back("not an object");
  r["samples"].push_back({{"t", "late"}, {"worker", 7}, {"compute_seconds", 1}});
  r["timeline"].push_back({{"t", 1}, {"event", 3}});
  r["accuracy_curve"].push_back({1});
  r["tta_seconds"] = nullptr;
  const std::string g = PlotScript(r, "/d'ir", "/o.png");
  EXPECT_TRUE(Contains(g, "'it''s \u2014 policy auto'")) << g;
  EXPECT_TRUE(Contains(g, "'/d''ir/worker-1.dat'")) << g;
  EXPECT_FALSE(Contains(g, "worker-7")) << g;  // its sample has no numeric time
  EXPECT_FALSE(Contains(g, "TTA")) << g;
  EXPECT_NO_THROW(PlotScript(json("not a report"), "/d", "/o.png"));
  EXPECT_NO_THROW(PlotScript(json::array(), "/d", "/o.png"));
}

TEST_F(PlotTest, EmptyReportStillPlotsBothPanels) {
  const std::string g = PlotScript(EmptyReport(), "/data", "/o.png");
  EXPECT_TRUE(Contains(g, "set xrange [0:1]")) << g;
  EXPECT_TRUE(Contains(g, "plot NaN title 'no samples'")) << g;
  EXPECT_FALSE(Contains(g, "accuracy.dat")) << g;
  EXPECT_TRUE(Contains(g, "0.9 with lines")) << g;
}

TEST_F(PlotTest, WritesAPngForARunAndForAnEmptyReport) {
  if (!HaveGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const fs::path png = dir_ / "run.png";
  Status s = WritePlot(Report(), png.string());
  ASSERT_TRUE(s.ok()) << s;
  const std::string bytes = ReadAll(png);
  EXPECT_TRUE(IsPng(bytes)) << bytes.size() << " bytes";
  EXPECT_TRUE(TmpIsEmpty());  // the data files and the script are gone

  const fs::path empty = dir_ / "empty.png";
  s = WritePlot(EmptyReport(), empty.string());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(IsPng(ReadAll(empty)));
  s = WritePlot(json::object(), (dir_ / "nothing.png").string());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(IsPng(ReadAll(dir_ / "nothing.png")));
  EXPECT_TRUE(TmpIsEmpty());
}

TEST_F(PlotTest, GnuplotFailureIsInternalWithItsStderr) {
  if (!HaveGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const std::string png = (dir_ / "no-such-dir" / "run.png").string();
  Status s = WritePlot(Report(), png);
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s;
  EXPECT_TRUE(Contains(s.message(), "--plot: gnuplot failed (exit status 1): ")) << s;
  EXPECT_TRUE(Contains(s.message(), "cannot open file; output not changed")) << s;
  EXPECT_TRUE(TmpIsEmpty());
}

TEST_F(PlotTest, WithoutGnuplotTheErrorSaysWhatToInstall) {
  fs::create_directory(dir_ / "empty-bin");
  Status s;
  {
    ScopedEnv path("PATH", (dir_ / "empty-bin").string());
    s = WritePlot(Report(), (dir_ / "x.png").string());
  }
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), "--plot: gnuplot not found (install gnuplot-nox)");
  EXPECT_FALSE(fs::exists(dir_ / "x.png"));
  EXPECT_TRUE(TmpIsEmpty());
}

}  // namespace
}  // namespace star::local
