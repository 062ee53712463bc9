#include "common/json.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra {

// Lets GoogleTest print values in failure messages.
void PrintTo(const JsonValue& value, std::ostream* os) { *os << ToJson(value); }

namespace {

TEST(JsonTest, ParsesValidDocuments) {
  // Every kind of value parses to the expected value and type, with any whitespace around it.
  struct Case {
    std::string name;
    std::string text;
    JsonValue expected;
  };
  const std::vector<Case> cases = {
      {"null", "null", JsonValue()},
      {"true", "true", JsonValue(true)},
      {"false", "false", JsonValue(false)},
      {"zero", "0", JsonValue(0)},
      {"negative zero is the integer 0", "-0", JsonValue(0)},
      {"integer", "42", JsonValue(42)},
      {"negative integer", "-7", JsonValue(-7)},
      {"fraction", "1.5", JsonValue(1.5)},
      {"integral fraction stays a double", "2.0", JsonValue(2.0)},
      {"exponent is a double", "1e3", JsonValue(1000.0)},
      {"upper exponent with sign", "1E+2", JsonValue(100.0)},
      {"negative exponent", "-2.5e-3", JsonValue(-0.0025)},
      {"underflow rounds to zero", "1e-400", JsonValue(0.0)},
      {"empty string", R"("")", JsonValue("")},
      {"escaped quote", R"("a\"b")", JsonValue("a\"b")},
      {"short escapes", R"("\/\\\b\f\n\r\t")", JsonValue("/\\\b\f\n\r\t")},
      {"raw UTF-8", "\"h\xC3\xA9llo \xF0\x9F\x98\x80\"",
       JsonValue("h\xC3\xA9llo \xF0\x9F\x98\x80")},
      {"empty array", "[]", JsonValue::MakeArray()},
      {"empty object", "{}", JsonValue::MakeObject()},
      {"array with whitespace", " [ 1 , \"x\" , null ] ",
       JsonValue::MakeArray({JsonValue(1), JsonValue("x"), JsonValue()})},
      {"object keeps member order", R"({"b":1,"a":[true]})",
       JsonValue::MakeObject({{"b", 1}, {"a", JsonValue::MakeArray({true})}})},
      {"nested", R"({"x":{"y":{"z":[[],{}]}}})",
       JsonValue::MakeObject(
           {{"x", JsonValue::MakeObject(
                      {{"y", JsonValue::MakeObject(
                                 {{"z", JsonValue::MakeArray({JsonValue::MakeArray(),
                                                              JsonValue::MakeObject()})}})}})}})},
      {"all whitespace kinds", "\t\r\n 7 \n", JsonValue(7)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<JsonValue> parsed = ParseJson(c.text);
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, c.expected);
    EXPECT_EQ(parsed->type(), c.expected.type());
  }
}

TEST(JsonTest, KeepsIntegersThatFitAndOtherNumbersAsDoubles) {
  // Integer text that fits an int64 stays exact; beyond that range it becomes a double.
  struct Case {
    std::string name;
    std::string text;
    bool is_int;
    int64_t as_int;
    double as_double;
  };
  const std::vector<Case> cases = {
      {"max int64", "9223372036854775807", true, std::numeric_limits<int64_t>::max(),
       9223372036854775807.0},
      {"min int64", "-9223372036854775808", true, std::numeric_limits<int64_t>::min(),
       -9223372036854775808.0},
      {"just above int64", "9223372036854775808", false, 0, 9223372036854775808.0},
      {"far above int64", "123456789012345678901234567890", false, 0, 1.2345678901234568e29},
      {"2^53 + 1 is exact as an integer", "9007199254740993", true, 9007199254740993,
       9007199254740992.0},
      {"fraction", "0.25", false, 0, 0.25},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<JsonValue> parsed = ParseJson(c.text);
    ASSERT_OK(parsed);
    EXPECT_TRUE(parsed->is_number());
    EXPECT_EQ(parsed->is_int(), c.is_int);
    EXPECT_EQ(parsed->is_double(), !c.is_int);
    if (c.is_int) {
      EXPECT_EQ(parsed->as_int(), c.as_int);
    }
    EXPECT_EQ(parsed->as_double(), c.as_double);
  }
}

TEST(JsonTest, RejectsInvalidDocumentsWithLineAndColumn) {
  // Anything outside RFC 8259 is an invalid-argument error saying where (1-based line and byte
  // column) and what.
  struct Case {
    std::string name;
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"empty", "", "line 1, column 1: expected a value (got end of input)"},
      {"only whitespace", "   ", "line 1, column 4: expected a value (got end of input)"},
      {"trailing comma in array", "[1,]", "line 1, column 4: trailing comma before ']'"},
      {"trailing comma in object", R"({"a":1,})", "line 1, column 8: trailing comma before '}'"},
      {"missing comma", "[1 2]", "line 1, column 4: expected ',' or ']' (got '2')"},
      {"missing colon", R"({"a" 1})", "line 1, column 6: expected ':' after the key (got '1')"},
      {"unquoted key", "{a:1}", "line 1, column 2: expected a string key (got 'a')"},
      {"missing comma in object", R"({"a":1 "b":2})",
       "line 1, column 8: expected ',' or '}' (got '\"')"},
      {"comment", "// note\n1", "line 1, column 1: expected a value (got '/')"},
      {"block comment", "[1 /* x */]", "line 1, column 4: expected ',' or ']' (got '/')"},
      {"NaN", "NaN", "line 1, column 1: expected a value (got 'NaN')"},
      {"Infinity", "[Infinity]", "line 1, column 2: expected a value (got 'Infinity')"},
      {"negative infinity", "-Infinity", "line 1, column 1: invalid number '-Infinity'"},
      {"leading zero", "01", "line 1, column 1: invalid number '01'"},
      {"no digits after point", "1.", "line 1, column 1: invalid number '1.'"},
      {"no leading digit", ".5", "line 1, column 1: expected a value (got '.')"},
      {"plus sign", "+1", "line 1, column 1: expected a value (got '+')"},
      {"empty exponent", "[1e]", "line 1, column 2: invalid number '1e'"},
      {"lone minus", "-", "line 1, column 1: invalid number '-'"},
      {"hex number", "0x10", "line 1, column 1: invalid number '0x10'"},
      {"overflowing double", "[1e400]", "line 1, column 2: number '1e400' is out of range"},
      {"misspelt literal", "tru", "line 1, column 1: expected a value (got 'tru')"},
      {"literal run on", "truefalse", "line 1, column 1: expected a value (got 'truefalse')"},
      {"capitalised literal", "True", "line 1, column 1: expected a value (got 'True')"},
      {"single quotes", "'a'", "line 1, column 1: expected a value (got ''')"},
      {"unterminated string", "[\"abc", "line 1, column 2: unterminated string"},
      {"backslash at end", "\"ab\\", "line 1, column 1: unterminated string"},
      {"raw newline in string", "\"a\nb\"",
       "line 1, column 3: control character U+000A in a string (it must be escaped)"},
      {"raw tab in string", "\"a\tb\"",
       "line 1, column 3: control character U+0009 in a string (it must be escaped)"},
      {"unknown escape", R"("a\qb")", "line 1, column 3: invalid escape '\\q'"},
      {"escaped control byte", "\"\\\x01\"",
       "line 1, column 2: invalid escape ('\\' followed by byte 0x01)"},
      {"short unicode escape", R"("\u12")",
       "line 1, column 2: invalid \\u escape (expected 4 hex digits)"},
      {"non-hex unicode escape", R"("\u12G4")",
       "line 1, column 2: invalid \\u escape (expected 4 hex digits)"},
      {"lone high surrogate", R"("\uD800")", "line 1, column 2: unpaired surrogate \\uD800"},
      {"lone low surrogate", R"("x\udc00")", "line 1, column 3: unpaired surrogate \\uDC00"},
      {"high surrogate then letter", R"("\uD83Dx")",
       "line 1, column 2: unpaired surrogate \\uD83D"},
      {"high surrogate then non-surrogate", R"("\uD83D\u0041")",
       "line 1, column 2: unpaired surrogate \\uD83D"},
      {"invalid UTF-8 byte", "\"a\xFF\"", "line 1, column 3: invalid UTF-8 in a string"},
      {"stray continuation byte", "\"\x80\"", "line 1, column 2: invalid UTF-8 in a string"},
      {"overlong encoding", "\"\xC0\xAF\"", "line 1, column 2: invalid UTF-8 in a string"},
      {"encoded surrogate", "\"\xED\xA0\x80\"", "line 1, column 2: invalid UTF-8 in a string"},
      {"above U+10FFFF", "\"\xF4\x90\x80\x80\"", "line 1, column 2: invalid UTF-8 in a string"},
      {"truncated sequence", "\"\xE2\x82\"", "line 1, column 2: invalid UTF-8 in a string"},
      {"second value", "1 2", "line 1, column 3: expected end of input after the value (got '2')"},
      {"extra bracket", "{}}", "line 1, column 3: expected end of input after the value (got '}')"},
      {"duplicate key", R"({"a":1,"a":2})", "line 1, column 8: duplicate key \"a\""},
      {"duplicate key by escape", R"({"a":1,"\u0061":2})", "line 1, column 8: duplicate key \"a\""},
      {"byte order mark", "\xEF\xBB\xBF{}", "line 1, column 1: expected a value (got byte 0xEF)"},
      {"control byte outside strings", "[1,\x01]",
       "line 1, column 4: expected a value (got byte 0x01)"},
      {"unclosed array", "[", "line 1, column 2: expected a value (got end of input)"},
      {"unclosed array after value", "[1",
       "line 1, column 3: expected ',' or ']' (got end of input)"},
      {"unclosed object", "{", "line 1, column 2: expected a string key (got end of input)"},
      {"error on a later line", "[\n  1,\n  ]", "line 3, column 3: trailing comma before ']'"},
      {"CRLF lines", "{\r\n\"a\": x}", "line 2, column 6: expected a value (got 'x')"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<JsonValue> parsed = ParseJson(c.text);
    ASSERT_FALSE(parsed.ok()) << "parsed as " << ToJson(*parsed);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

TEST(JsonTest, DecodesUnicodeEscapesToUtf8) {
  // \uXXXX escapes become UTF-8, surrogate pairs become one 4-byte character, and \u0000 is kept.
  struct Case {
    std::string name;
    std::string text;
    std::string decoded;
  };
  const std::vector<Case> cases = {
      {"ASCII", R"("\u0041")", "A"},
      {"two bytes", R"("\u00e9")", "\xC3\xA9"},
      {"upper-case hex", R"("\u00E9")", "\xC3\xA9"},
      {"three bytes", R"("\u20AC")", "\xE2\x82\xAC"},
      {"last BMP character", R"("\uFFFF")", "\xEF\xBF\xBF"},
      {"surrogate pair", R"("\uD83D\uDE00")", "\xF0\x9F\x98\x80"},
      {"highest code point", R"("\uDBFF\uDFFF")", "\xF4\x8F\xBF\xBF"},
      {"NUL", R"("a\u0000b")", std::string("a\0b", 3)},
      {"mixed with text", R"("x\u00e9y\n")", "x\xC3\xA9y\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<JsonValue> parsed = ParseJson(c.text);
    ASSERT_OK(parsed);
    ASSERT_TRUE(parsed->is_string());
    EXPECT_EQ(parsed->as_string(), c.decoded);
  }
}

TEST(JsonTest, WritesCompactDeterministicText) {
  // ToJson writes no whitespace, members in insertion order, integers as integers and doubles
  // with a point or an exponent.
  const JsonValue value =
      JsonValue::MakeObject()
          .Set("prompt", 12)
          .Set("reward", 1.0)
          .Set("latency_s", 0.02)
          .Set("ok", true)
          .Set("none", nullptr)
          .Set("turns", JsonValue::MakeArray().Append("a").Append(JsonValue::MakeObject()))
          .Set("big", 1e300)
          .Set("neg", -0.0);
  EXPECT_EQ(ToJson(value), R"({"prompt":12,"reward":1.0,"latency_s":0.02,"ok":true,"none":null,)"
                           R"("turns":["a",{}],"big":1e+300,"neg":-0.0})");
  EXPECT_EQ(value.ToString(), ToJson(value));
}

TEST(JsonTest, WritesNumbersThatReadBackExactly) {
  // Every double is written in a form that parses back to the same bits and stays a double;
  // integers stay integers.
  const std::vector<double> doubles = {0.0,
                                       -0.0,
                                       1.0,
                                       -1.0,
                                       0.1,
                                       1.0 / 3.0,
                                       2.0 / 3.0,
                                       1e300,
                                       -1e-300,
                                       5e-324,
                                       1e21,
                                       1e22,
                                       123456789.0,
                                       9007199254740993.0,
                                       0.30000000000000004,
                                       std::numeric_limits<double>::max(),
                                       std::numeric_limits<double>::min(),
                                       1e-7,
                                       100.0};
  for (double d : doubles) {
    SCOPED_TRACE(ToJson(JsonValue(d)));
    const Result<JsonValue> parsed = ParseJson(ToJson(JsonValue(d)));
    ASSERT_OK(parsed);
    ASSERT_TRUE(parsed->is_double());
    EXPECT_EQ(std::bit_cast<uint64_t>(parsed->as_double()), std::bit_cast<uint64_t>(d));
  }
  const std::vector<int64_t> ints = {0, 1, -1, std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
  for (int64_t i : ints) {
    SCOPED_TRACE(i);
    const Result<JsonValue> parsed = ParseJson(ToJson(JsonValue(i)));
    ASSERT_OK(parsed);
    ASSERT_TRUE(parsed->is_int());
    EXPECT_EQ(parsed->as_int(), i);
  }
  EXPECT_EQ(ToJson(JsonValue(0.1)), "0.1");
  EXPECT_EQ(ToJson(JsonValue(100.0)), "100.0");
  EXPECT_EQ(ToJson(JsonValue(std::numeric_limits<double>::quiet_NaN())), "null");
  EXPECT_EQ(ToJson(JsonValue(-std::numeric_limits<double>::infinity())), "null");
}

TEST(JsonTest, RoundTripsDocuments) {
  // Parsing what ToJson wrote gives back an equal value, and writing that gives the same text.
  const std::vector<std::string> texts = {
      R"({"prompt":12,"sample":0,"reward":1.0,"turns":[{"end":"stop","n":95}]})",
      R"([null,true,false,-3,2.5e-08,"",[],{}])",
      R"({"z":{"y":{"x":[1,[2,[3]]]}},"a":"\u0001\"\\\n"})",
      "\"h\xC3\xA9llo \xF0\x9F\x98\x80\"",
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const Result<JsonValue> first = ParseJson(text);
    ASSERT_OK(first);
    const std::string written = ToJson(*first);
    const Result<JsonValue> second = ParseJson(written);
    ASSERT_OK(second);
    EXPECT_EQ(*second, *first);
    EXPECT_EQ(ToJson(*second), written);
  }
}

TEST(JsonTest, EscapesStringsOnWrite) {
  // Quotes, backslashes and control characters are escaped; UTF-8 is kept as is; bytes that are
  // not UTF-8 become U+FFFD so that the output always parses.
  struct Case {
    std::string name;
    std::string text;
    std::string json;
  };
  const std::vector<Case> cases = {
      {"plain", "abc", R"("abc")"},
      {"quote and backslash", "a\"b\\c", R"("a\"b\\c")"},
      {"short escapes", "\b\f\n\r\t", R"("\b\f\n\r\t")"},
      {"other control characters", std::string("\x01\x1F\0", 3), R"("\u0001\u001f\u0000")"},
      {"slash is not escaped", "a/b", R"("a/b")"},
      {"UTF-8 kept", "\xC3\xA9\xF0\x9F\x98\x80", "\"\xC3\xA9\xF0\x9F\x98\x80\""},
      {"invalid byte replaced", "a\xFFz", "\"a\xEF\xBF\xBDz\""},
      {"truncated sequence replaced", "\xE2\x82", "\"\xEF\xBF\xBD\xEF\xBF\xBD\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ToJson(JsonValue(c.text)), c.json);
    EXPECT_EQ(JsonQuote(c.text), c.json);
    EXPECT_OK(ParseJson(c.json));
  }
}

TEST(JsonTest, LimitsNestingDepth) {
  // kJsonMaxDepth nested arrays or objects parse; one more is an error at the deepest opener.
  const std::string deepest_arrays =
      std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']');
  EXPECT_OK(ParseJson(deepest_arrays));
  const std::string too_deep =
      std::string(kJsonMaxDepth + 1, '[') + std::string(kJsonMaxDepth + 1, ']');
  const Result<JsonValue> parsed = ParseJson(too_deep);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "line 1, column 257: nesting deeper than 256 levels");

  std::string objects;
  for (int i = 0; i <= kJsonMaxDepth; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kJsonMaxDepth + 1, '}');
  const Result<JsonValue> deep_objects = ParseJson(objects);
  ASSERT_FALSE(deep_objects.ok());
  EXPECT_EQ(deep_objects.status().message(), "line 1, column 1281: nesting deeper than 256 levels");
  // A very deep document fails cleanly rather than exhausting the stack.
  EXPECT_FALSE(ParseJson(std::string(100000, '[')).ok());
}

TEST(JsonTest, FindAndTypeNamesServeValidation) {
  // Find returns a member or null (also on non-objects); type_name reads well in messages.
  const Result<JsonValue> parsed = ParseJson(R"({"a":1,"b":"x","c":[1]})");
  ASSERT_OK(parsed);
  ASSERT_NE(parsed->Find("a"), nullptr);
  EXPECT_EQ(*parsed->Find("a"), JsonValue(1));
  EXPECT_EQ(parsed->Find("missing"), nullptr);
  EXPECT_EQ(parsed->Find("b")->Find("a"), nullptr);

  struct Case {
    JsonValue value;
    std::string name;
  };
  const std::vector<Case> cases = {
      {JsonValue(), "null"},
      {JsonValue(true), "a boolean"},
      {JsonValue(3), "an integer"},
      {JsonValue(3.5), "a number"},
      {JsonValue("s"), "a string"},
      {JsonValue::MakeArray(), "an array"},
      {JsonValue::MakeObject(), "an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.value.type_name(), c.name);
  }
}

TEST(JsonTest, SetReplacesInPlaceAndAppendsNewKeys) {
  // Set keeps a key's position when it replaces the value, and appends a new key at the end.
  JsonValue object = JsonValue::MakeObject({{"a", 1}, {"b", 2}});
  object.Set("a", "one").Set("c", 3);
  EXPECT_EQ(ToJson(object), R"({"a":"one","b":2,"c":3})");
  JsonValue array = JsonValue::MakeArray();
  array.Append(1).Append(JsonValue::MakeArray({2}));
  EXPECT_EQ(ToJson(array), "[1,[2]]");
}

TEST(JsonTest, EqualityIsStructuralAndExact) {
  // Integers and doubles of one value differ, and so do objects whose members are reordered.
  EXPECT_NE(JsonValue(1), JsonValue(1.0));
  EXPECT_EQ(JsonValue(1.0), JsonValue(1.0));
  EXPECT_NE(JsonValue::MakeObject({{"a", 1}, {"b", 2}}),
            JsonValue::MakeObject({{"b", 2}, {"a", 1}}));
  EXPECT_EQ(JsonValue::MakeArray({1, "x"}), JsonValue::MakeArray({1, "x"}));
  EXPECT_EQ(JsonValue(std::string("x")), JsonValue("x"));
  EXPECT_EQ(JsonValue(int64_t{5}).as_double(), 5.0);
}

}  // namespace
}  // namespace libra
