#include "common/strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace libra {
namespace {

TEST(StringsTest, StrFormatFormatsAnyLength) {
  // StrFormat is printf into a string, including empty results and results longer than any
  // small buffer.
  EXPECT_EQ(StrFormat("%d-%s-%.2f", 3, "x", 1.5), "3-x-1.50");
  EXPECT_EQ(StrFormat("%s", ""), "");
  const std::string long_text(1000, 'a');
  EXPECT_EQ(StrFormat("<%s>", long_text.c_str()), "<" + long_text + ">");
}

TEST(StringsTest, StrJoin) {
  // Items are joined with the separator between them, none at the ends.
  struct Case {
    std::string name;
    std::vector<std::string> items;
    std::string separator;
    std::string joined;
  };
  const std::vector<Case> cases = {
      {"none", {}, ", ", ""},
      {"one", {"a"}, ", ", "a"},
      {"three", {"a", "b", "c"}, ", ", "a, b, c"},
      {"empty items", {"", ""}, "+", "+"},
      {"empty separator", {"a", "b"}, "", "ab"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(StrJoin(c.items, c.separator), c.joined);
  }
}

TEST(StringsTest, StrSplitKeepsEmptyFields) {
  // Splitting on every separator keeps empty fields, so StrJoin undoes StrSplit.
  struct Case {
    std::string name;
    std::string text;
    std::vector<std::string> fields;
  };
  const std::vector<Case> cases = {
      {"empty text", "", {""}},
      {"no separator", "abc", {"abc"}},
      {"two fields", "a,b", {"a", "b"}},
      {"leading and trailing", ",a,", {"", "a", ""}},
      {"adjacent", "a,,b", {"a", "", "b"}},
      {"only separator", ",", {"", ""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(StrSplit(c.text, ','), c.fields);
    EXPECT_EQ(StrJoin(StrSplit(c.text, ','), ","), c.text);
  }
}

TEST(StringsTest, StartsWithAndEndsWith) {
  // Prefix and suffix tests, including the empty string and affixes longer than the text.
  EXPECT_TRUE(StartsWith("least-conn", "least"));
  EXPECT_TRUE(StartsWith("abc", ""));
  EXPECT_TRUE(StartsWith("abc", "abc"));
  EXPECT_FALSE(StartsWith("abc", "abcd"));
  EXPECT_FALSE(StartsWith("abc", "b"));
  EXPECT_TRUE(EndsWith("recipe.toml", ".toml"));
  EXPECT_TRUE(EndsWith("abc", ""));
  EXPECT_FALSE(EndsWith("abc", "xabc"));
  EXPECT_FALSE(EndsWith("abc", "b"));
}

TEST(StringsTest, NotOneOfListsTheNamesAndHintsAtACloseOne) {
  EXPECT_EQ(NotOneOf("strem", {"ordered", "stream"}),
            "must be one of ordered, stream (got 'strem'); did you mean 'stream'?");
  EXPECT_EQ(NotOneOf("fifo", {"ordered", "stream"}), "must be one of ordered, stream (got 'fifo')");
  EXPECT_EQ(NotOneOf("a\x1b", {"stream"}), "must be one of stream (got 'a\\x1b')");
}

TEST(StringsTest, ClosestMatchSuggestsOnlyCloseWords) {
  // The nearest candidate by edit distance is suggested when it is close enough (at most
  // max(2, len/3) edits); otherwise nothing.
  const std::vector<std::string> routers = {"least-conn", "round-robin", "cmlfq"};
  struct Case {
    std::string name;
    std::string word;
    std::string match;
  };
  const std::vector<Case> cases = {
      {"exact", "least-conn", "least-conn"},
      {"one typo", "least-con", "least-conn"},
      {"two edits", "roundrobin_", "round-robin"},
      {"transposition in short word", "cmflq", "cmlfq"},
      {"far away", "random", ""},
      {"empty word", "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ClosestMatch(c.word, routers), c.match);
  }
  EXPECT_EQ(ClosestMatch("x", {}), "");
  // The nearer of two candidates wins, whatever their order.
  EXPECT_EQ(ClosestMatch("max_activ", {"max_batch", "max_active"}), "max_active");
  EXPECT_EQ(ClosestMatch("max_activ", {"max_active", "max_batch"}), "max_active");
}

}  // namespace
}  // namespace libra
