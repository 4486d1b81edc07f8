// hpu-train plot: two runs' metrics drawn by gnuplot into an SVG (one panel
// per metric, one line per run, legends naming the runs) and a PNG of the
// expected size; a metric no run logged and a folder without runs are
// refused by name.
#include <gmock/gmock.h>

#include <regex>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;

class PlotTest : public TrainRunTest {
 protected:
  void SetUp() override {
    for (const char* seed : {"1", "2"})
      fitBoring({"--trainer.max_epochs=2", "--trainer.log_every_n_steps=8", std::string("--seed_everything=") + seed});
  }
};

std::uint32_t bigEndian(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

TEST_F(PlotTest, DrawsEveryRunOfAFolderToSvg) {
  const RunResult r = run({"plot", "lightning_logs", "--metrics", "train_loss,val_loss", "-o", "curves.svg"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "wrote curves.svg (train_loss, val_loss)\n");
  const std::string svg = read("curves.svg");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  // Two panels titled by their metric, each with both runs in its legend.
  for (const std::string text : {">train_loss</text>", ">val_loss</text>"}) EXPECT_THAT(svg, HasSubstr(text));
  const auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = svg.find(needle); at != std::string::npos; at = svg.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(">version_0</text>"), 2u);
  EXPECT_EQ(count(">version_1</text>"), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir() / "curves.svg"));
  EXPECT_EQ(fileNames(dir()).size(), 1u) << "no temporaries left: " << ::testing::PrintToString(fileNames(dir()));
}

TEST_F(PlotTest, DrawsOneRunToPngWithAPanelPerMetric) {
  const RunResult r = run({"plot", "lightning_logs/version_1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "wrote metrics.png (train_loss, val_loss)\n");
  const std::string png = read("metrics.png");
  ASSERT_GE(png.size(), 24u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bigEndian(png, 16), 800u);      // IHDR width
  EXPECT_EQ(bigEndian(png, 20), 2 * 360u);  // two panels
}

TEST_F(PlotTest, AnUnloggedMetricOrAFolderWithoutRunsIsRefused) {
  RunResult r = run({"plot", "lightning_logs", "--metrics", "val_los"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("plot: no run logged 'val_los'; did you mean 'val_loss'?; logged: epoch, train_loss, val_loss"));
  r = run({"plot", "nowhere"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("plot: nowhere has no metrics.csv"));
}

}  // namespace
}  // namespace hpu::cli::testing
