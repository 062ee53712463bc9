#include "common/enum_names.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

namespace libra {
namespace {

enum class Color { kRed, kGreen, kBlue };
constexpr std::array<EnumName<Color>, 3> EnumTable(Color) {
  return {{{Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "light-blue"}}};
}

TEST(EnumNamesTest, EveryValuePrintsAndParsesBack) {
  for (const Color c : {Color::kRed, Color::kGreen, Color::kBlue}) {
    const Result<Color> parsed = EnumNames<Color>::Parse(EnumNames<Color>::Name(c));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(NameOf(Color::kBlue), "light-blue");
  EXPECT_EQ(EnumNames<Color>::All(), (std::vector<std::string>{"red", "green", "light-blue"}));
}

TEST(EnumNamesTest, AnUnknownNameListsTheKnownOnesWithAHint) {
  // Names match exactly (case included); a near miss gets a "did you mean", a far one does not.
  struct Case {
    std::string name;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"gren", "must be one of red, green, light-blue (got 'gren'); did you mean 'green'?"},
      {"Red", "must be one of red, green, light-blue (got 'Red'); did you mean 'red'?"},
      {"ultraviolet", "must be one of red, green, light-blue (got 'ultraviolet')"},
      {"", "must be one of red, green, light-blue (got '')"},
      {"re\nd", "must be one of red, green, light-blue (got 're\\nd'); did you mean 'red'?"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(EnumNames<Color>::Find(c.name), std::nullopt);
    const Result<Color> parsed = EnumNames<Color>::Parse(c.name);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

}  // namespace
}  // namespace libra
