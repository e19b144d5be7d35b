#include "local/plot.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace star::local {
namespace {

namespace fs = std::filesystem;

class PlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "star-plot-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string ReadAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

nlohmann::json Report() {
  nlohmann::json r = {{"job", "fmnist"}, {"policy", "auto"}, {"target_accuracy", 0.85},
                      {"tta_seconds", 12.5}, {"wall_seconds", 15.0}, {"workers", 2}};
  r["accuracy_curve"] = {{2.0, 0.5}, {6.0, 0.8}, {12.5, 0.86}};
  r["timeline"] = {{{"t", 0.0}, {"event", "start"}, {"worker", -1}, {"detail", ""}},
                   {{"t", 5.0}, {"event", "inject"}, {"worker", 1}, {"detail", "worker=1,neighbor=3"}},
                   {{"t", 7.0}, {"event", "straggler"}, {"worker", 1}, {"detail", "cause=compute"}},
                   {{"t", 7.0}, {"event", "amp_on"}, {"worker", 1}, {"detail", ""}}};
  r["samples"] = nlohmann::json::array();
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

bool IsPng(const std::string& bytes) {
  return bytes.size() > 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

TEST_F(PlotTest, ScriptPlotsEveryWorkerTheEventsTheTargetAndTheTta) {
  const std::string g = PlotScript(Report(), "/data", "/out.png");
  EXPECT_NE(g.find("worker-0.dat"), std::string::npos);
  EXPECT_NE(g.find("worker-1.dat"), std::string::npos);
  EXPECT_NE(g.find("accuracy.dat"), std::string::npos);
  EXPECT_NE(g.find("\"straggler w1\""), std::string::npos);
  EXPECT_NE(g.find("\"inject w1\""), std::string::npos);
  EXPECT_NE(g.find("TTA 12.5"), std::string::npos);
  EXPECT_NE(g.find("0.85 with lines"), std::string::npos);
  EXPECT_NE(g.find("set output \"/out.png\""), std::string::npos);
}

TEST_F(PlotTest, WritesAPngForARunAndForAnEmptyReport) {
  if (::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  const fs::path png = dir_ / "run.png";
  ASSERT_TRUE(WritePlot(Report(), png.string()).ok());
  EXPECT_TRUE(IsPng(ReadAll(png)));
  const fs::path empty = dir_ / "empty.png";
  nlohmann::json r = {{"job", "j"}, {"policy", "ssgd"}, {"target_accuracy", 0.9},
                      {"tta_seconds", nullptr}, {"samples", nlohmann::json::array()},
                      {"accuracy_curve", nlohmann::json::array()},
                      {"timeline", nlohmann::json::array()}};
  Status s = WritePlot(r, empty.string());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(IsPng(ReadAll(empty)));
}

TEST_F(PlotTest, WithoutGnuplotTheErrorSaysWhatToInstall) {
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv("PATH", dir_.c_str(), 1);  // an empty directory
  Status s = WritePlot(Report(), (dir_ / "x.png").string());
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("gnuplot not found (install gnuplot-nox)"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "x.png"));
}

}  // namespace
}  // namespace star::local
