// End to end: `libra calibrate` on runs the simulator recorded (and on imported probes).
#include "cli/cli_fixture.h"
#include "common/strings.h"

namespace libra::test {
namespace {

class CmdCalibrateTest : public CliFixture {};

TEST_F(CmdCalibrateTest, SimulatorRunsCalibrateTheirOwnModel) {
  // A simulated run records turn, train-step and sync times; calibrating the recipe that made
  // them reproduces them closely before the fit already (the simulator is the cost model), and
  // the table says per term and per factor what the fit did.
  CopyRecipe("quickstart.toml");
  ASSERT_EQ(Libra({"run", "-q", "quickstart.toml"}).exit_code, 0);
  const CommandResult r = Libra({"calibrate", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ExpectGolden("cli/calibrate_quickstart.txt",
               "libra run quickstart.toml; libra calibrate quickstart.toml", r.out);
}

TEST_F(CmdCalibrateTest, WrittenCalibrationIsIncludedByARecipe) {
  // --write: the file a recipe includes; calibrating the including recipe starts where the
  // first fit ended: its "before" predictions are the first fit's "after" ones.
  CopyRecipe("quickstart.toml");
  ASSERT_EQ(Libra({"run", "-q", "--steps", "4", "quickstart.toml"}).exit_code, 0);
  const CommandResult r = Libra({"calibrate", "--write", "calibration.toml", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote calibration.toml: pull it into a recipe with include = "
                       "[\"calibration.toml\"]"),
            std::string::npos)
      << r.out;
  const std::string toml = ReadFile(dir_.File("calibration.toml"));
  EXPECT_EQ(toml.rfind("# libra calibration for A800-80G, written by libra ", 0), 0u) << toml;
  EXPECT_NE(toml.find("\n[cost_model]\n"), std::string::npos) << toml;
  EXPECT_EQ(toml.find("[cluster.gpu_spec]"), std::string::npos) << toml;

  WriteFile(dir_.File("calibrated.toml"),
            "include = [\"calibration.toml\"]\n" + ReadFile(dir_.File("quickstart.toml")));
  const CommandResult valid = Libra({"validate", "calibrated.toml"});
  EXPECT_EQ(valid.exit_code, 0) << valid.err;
  const CommandResult again = Libra({"calibrate", "calibrated.toml"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto after_column = [](const std::string& out) {
    // The rollout row of the term table: its "predicted after s" and "predicted before s".
    const size_t row = out.find("\nrollout ");
    return row == std::string::npos ? std::string()
                                    : out.substr(row, out.find('\n', row + 1) - row + 1);
  };
  const std::string first = after_column(r.out);
  const std::string second = after_column(again.out);
  ASSERT_FALSE(first.empty()) << r.out;
  ASSERT_FALSE(second.empty()) << again.out;
  // first: n, measured, before, error, after ...; second's before is first's after.
  const std::vector<std::string> a = StrSplit(first.substr(1, first.find('\n', 1) - 1), ' ');
  std::vector<std::string> x, y;
  for (const std::string& s : a) {
    if (!s.empty()) x.push_back(s);
  }
  for (const std::string& s : StrSplit(second.substr(1, second.find('\n', 1) - 1), ' ')) {
    if (!s.empty()) y.push_back(s);
  }
  ASSERT_EQ(x.size(), 7u) << first;
  ASSERT_EQ(y.size(), 7u) << second;
  EXPECT_EQ(y[3], x[5]);
}

TEST_F(CmdCalibrateTest, ProbesAloneCalibrateTheGpu) {
  // --probes with imported H100 probes and an H100 recipe: the GPU numbers change; the A800 run
  // in the database is left out, with a note.
  CopyRecipe("quickstart.toml");
  WriteFile(dir_.File("example.json"),
            ReadFile(SourcePath("tests/testdata/probes/example-h100x8.json")));
  ASSERT_EQ(Libra({"run", "-q", "--steps", "2", "quickstart.toml"}).exit_code, 0);
  ASSERT_EQ(Libra({"probe", "-q", "--import", "example.json"}).exit_code, 0);
  const CommandResult r =
      Libra({"calibrate", "--probes", "--set", "cluster.gpu=H100-80G", "quickstart.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectGolden("cli/calibrate_probes.txt",
               "libra probe --import example-h100x8.json; libra calibrate --probes --set "
               "cluster.gpu=H100-80G quickstart.toml (an A800 run in the database)",
               r.out);
}

TEST_F(CmdCalibrateTest, NothingToCalibrateFromIsAnError) {
  // No database, a database without runs or probes, --probes without probes, another cost
  // model: each says what is missing.
  CopyRecipe("quickstart.toml");
  const CommandResult no_db = Libra({"calibrate", "--db", "none.db", "quickstart.toml"});
  EXPECT_NE(no_db.exit_code, 0);
  EXPECT_NE(no_db.err.find("none.db"), std::string::npos) << no_db.err;

  ASSERT_EQ(Libra({"probe", "-q", "--import",
                   SourcePath("tests/testdata/probes/example-h100x8.json"), "--db", "p.db"})
                .exit_code,
            0);
  const CommandResult empty = Libra({"calibrate", "--db", "p.db", "quickstart.toml"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_EQ(empty.err,
            "libra: error: nothing to calibrate from: no finished run on A800-80G in p.db has "
            "measurements (record runs, or name them with --runs), and --probes was not given\n");

  ASSERT_EQ(Libra({"run", "-q", "--steps", "2", "quickstart.toml"}).exit_code, 0);
  const CommandResult no_probes = Libra({"calibrate", "--probes", "quickstart.toml"});
  EXPECT_EQ(no_probes.exit_code, 2);
  EXPECT_EQ(no_probes.err,
            "libra: error: --probes: results/libra.db holds no probes; `libra probe` (or `libra "
            "probe --import FILE`) records them\n");

  const CommandResult other =
      Libra({"calibrate", "--set", "cost_model.name=libra-ref", "quickstart.toml"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_EQ(other.err,
            "libra: error: calibration fits the factors of the roofline cost model; the recipe's "
            "cost_model.name is 'libra-ref'\n");
}

}  // namespace
}  // namespace libra::test
