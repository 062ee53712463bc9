#include "recipe/options.h"

#include <gtest/gtest.h>

#include "support/test_util.h"

namespace libra::recipe {
namespace {

OptionValue Int(int64_t v, std::string where) {
  OptionValue o;
  o.kind = OptionValue::Kind::kInt;
  o.int_value = v;
  o.where = std::move(where);
  return o;
}

OptionValue Str(std::string v, std::string where) {
  OptionValue o;
  o.kind = OptionValue::Kind::kString;
  o.string_value = std::move(v);
  o.where = std::move(where);
  return o;
}

OptionTable Table(std::vector<OptionEntry> entries) {
  OptionTable t;
  t.entries = std::move(entries);
  t.where = "r.toml:5:1";
  t.path = "system.router_options";
  return t;
}

TEST(OptionReaderTest, ReadsValuesAndDefaults) {
  // Present keys are read, absent keys take the default, integers serve as doubles.
  OptionValue list;
  list.kind = OptionValue::Kind::kArray;
  list.array = {Int(1, "a"), Int(2, "b")};
  const OptionTable table = Table({{"cap", Int(4, "r.toml:6:7")},
                                   {"mode", Str("fast", "r.toml:7:8")},
                                   {"ratio", Int(2, "r.toml:8:9")},
                                   {"tps", list}});
  OptionReader reader(table);
  EXPECT_EQ(reader.Int("cap", 0, 0, 10), 4);
  EXPECT_EQ(reader.String("mode", "slow", {"slow", "fast"}), "fast");
  EXPECT_DOUBLE_EQ(reader.Double("ratio", 0.5), 2.0);
  EXPECT_EQ(reader.IntList("tps", {}), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(reader.Bool("flag", true));
  EXPECT_EQ(reader.Int("absent", 9), 9);
  EXPECT_OK(reader.Finish());
}

TEST(OptionReaderTest, DoubleListTakesIntegersAndChecksTheRange) {
  // Numbers of either kind; an element out of range or a string is an error at the key.
  OptionValue half;
  half.kind = OptionValue::Kind::kDouble;
  half.double_value = 0.5;
  OptionValue good;
  good.kind = OptionValue::Kind::kArray;
  good.array = {Int(1, "a"), half};
  OptionValue bad = good;
  bad.where = "r.toml:7:1";
  bad.array.push_back(Int(-1, "c"));
  OptionValue text = good;
  text.where = "r.toml:8:1";
  text.array.push_back(Str("x", "d"));
  const OptionTable table = Table({{"good", good}, {"bad", bad}, {"text", text}});
  OptionReader reader(table);  // it keeps a reference to the table
  EXPECT_EQ(reader.DoubleList("good", {}), (std::vector<double>{1, 0.5}));
  EXPECT_EQ(reader.DoubleList("bad", {7}, 0), (std::vector<double>{7}));
  EXPECT_EQ(reader.DoubleList("absent", {3}), (std::vector<double>{3}));
  reader.DoubleList("text", {});
  const Status s = reader.Finish();
  EXPECT_EQ(s.message(),
            "r.toml:7:1: system.router_options.bad: every element must be in [0, inf] (got -1)\n"
            "r.toml:8:1: system.router_options.text: expected an array of numbers, got an array");
}

TEST(OptionReaderTest, CollectsEveryProblemWithLocations) {
  // A wrong type, an out-of-range value, a bad choice and an unknown key: four lines.
  const OptionTable table = Table({{"cap", Str("x", "r.toml:6:7")},
                                   {"limit", Int(99, "r.toml:7:9")},
                                   {"mode", Str("warp", "r.toml:8:8")},
                                   {"modd", Int(1, "r.toml:9:8")}});
  OptionReader reader(table);
  reader.Int("cap", 0);
  reader.Int("limit", 0, 0, 10);
  reader.String("mode", "slow", {"slow", "fast"});
  const Status s = reader.Finish();
  EXPECT_EQ(s.code(), StatusCode::kInvalidRecipe);
  EXPECT_EQ(s.message(),
            "r.toml:6:7: system.router_options.cap: expected an integer, got a string\n"
            "r.toml:7:9: system.router_options.limit: must be in [0, 10] (got 99)\n"
            "r.toml:8:8: system.router_options.mode: must be one of slow, fast (got 'warp')\n"
            "r.toml:9:8: system.router_options.modd: unknown option; did you mean 'mode'? "
            "(known: cap, limit, mode)");
}

TEST(OptionReaderTest, PolicyWithoutOptionsSaysSo) {
  // Any key given to a policy that reads none is reported as such.
  const OptionTable table = Table({{"x", Int(1, "r.toml:6:1")}});
  OptionReader reader(table);
  EXPECT_EQ(reader.Finish().message(),
            "r.toml:6:1: system.router_options.x: unknown option (this policy takes no options)");
}

TEST(OptionReaderTest, CallerErrorsUseTheTableWhenTheKeyIsAbsent) {
  // Error() on an absent key points at the table.
  const OptionTable table = Table({});
  OptionReader reader(table);
  reader.Error("tp", "must be set");
  EXPECT_EQ(reader.Finish().message(), "r.toml:5:1: system.router_options.tp: must be set");
}

}  // namespace
}  // namespace libra::recipe
