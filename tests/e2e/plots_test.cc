// Every plot of the quickstart's and the paper recipe's comparisons, rendered to PNG by librsvg
// (rsvg-convert) and checked on the pixels: nothing outside the canvas, every text inside it, no
// two texts overlapping. The paper recipe runs eight of its systems (small multiples, long labels,
// an elastic pool's lends and reclaims, a colocated system).
#include <filesystem>

#include "support/svg_layout.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

/// Runs `compare` of a recipe into its own database, writes the plots and checks each.
void CheckPlotsOf(const std::vector<std::string>& compare, const ScopedTempDir& dir,
                  const std::string& name, size_t expected_plots) {
  const std::string db = dir.File(name + ".db");
  std::vector<std::string> args = {"compare", "-q", "--db", db};
  args.insert(args.end(), compare.begin(), compare.end());
  const CommandResult run = RunLibra(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string plots = dir.File(name + "-plots");
  const CommandResult report = RunLibra({"report", "--db", db, "--plots", plots});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(plots)) {
    SCOPED_TRACE(name + "/" + entry.path().filename().string());
    const std::string scratch = dir.File("scratch");
    std::filesystem::create_directories(scratch);
    EXPECT_EQ(SvgLayoutProblems(ReadFile(entry.path().string()), scratch), "");
    ++checked;
  }
  EXPECT_EQ(checked, expected_plots);
}

TEST(PlotsTest, QuickstartPlotsRenderCleanly) {
  ScopedTempDir dir;
  // Two seeds (the evaluation's band and the time to target's range): 6 shared plots and 2 per
  // run.
  CheckPlotsOf({"--repeat", "2", SourcePath("recipes/quickstart.toml")}, dir, "quickstart",
               6 + 2 * 4 * 2);
}

TEST(PlotsTest, PaperRecipePlotsRenderCleanly) {
  ScopedTempDir dir;
  // As written: the plots, not the peers' tuning, are under test.
  CheckPlotsOf({"--as-written", "--systems",
                "libra,verl-sync,disagg-16-32,verl-dynamic,areal-async,sortedrl,heddle,"
                "libra-no-ehp",
                SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml")},
               dir, "paper", 6 + 2 * 8);
}

TEST(PlotsTest, TheCheckFindsTextOutsideTheCanvasAndOverlaps) {
  // The check itself: a label running off the canvas and two labels on top of each other.
  ScopedTempDir dir;
  const std::string svg =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" height=\"100\" viewBox=\"0 0 200 "
      "100\" font-family=\"Helvetica\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"200\" height=\"100\" fill=\"#ffffff\"/>\n"
      "<text x=\"150\" y=\"20\" text-anchor=\"start\">least-conn-buckets (run 4)</text>\n"
      "<text x=\"20\" y=\"60\" text-anchor=\"start\">first</text>\n"
      "<text x=\"30\" y=\"62\" text-anchor=\"start\">second</text>\n"
      "</svg>\n";
  const std::string problems = SvgLayoutProblems(svg, dir.path().string());
  EXPECT_NE(problems.find("ink outside the 200x100 canvas"), std::string::npos) << problems;
  EXPECT_NE(problems.find("text \"least-conn-buckets (run 4)\" leaves the canvas"),
            std::string::npos)
      << problems;
  EXPECT_NE(problems.find("texts \"first\" and \"second\" overlap"), std::string::npos) << problems;
}

}  // namespace
}  // namespace libra::test
