#include "cluster/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra::cluster {
namespace {

using ::testing::HasSubstr;

TEST(ProtocolTest, RanksFollowTheEnginesGpus) {
  // The trainer is rank 0; each engine starts after the GPUs of the engines before it.
  const auto ranks = LayOutWeightUpdateRanks({2, 1, 4});
  ASSERT_OK(ranks);
  EXPECT_EQ(*ranks, (WeightUpdateRanks{8, {1, 3, 4}}));
  const auto one = LayOutWeightUpdateRanks({1});
  ASSERT_OK(one);
  EXPECT_EQ(*one, (WeightUpdateRanks{2, {1}}));
  EXPECT_FALSE(LayOutWeightUpdateRanks({}).ok());
  const auto bad = LayOutWeightUpdateRanks({1, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("engine 1 of the weight update group has 0 GPUs"));
}

TEST(ProtocolTest, ErrorMessagesAreFoundInEveryShape) {
  // The message of vLLM, SGLang, FastAPI and libra-trainer error bodies, else the body itself.
  struct Case {
    std::string body;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"error":{"message":"too long","code":400}})", "too long"},
      {R"({"error":"bad batch"})", "bad batch"},
      {R"({"object":"error","message":"no model"})", "no model"},
      {R"({"detail":"Not Found"})", "Not Found"},
      {"Internal Server Error", "Internal Server Error"},
      {"  \n", "(empty body)"},
      {std::string(300, 'x'), std::string(200, 'x') + "..."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    EXPECT_EQ(ErrorMessageOf(c.body), c.message);
  }
}

TEST(ProtocolTest, ReaderNamesTheMemberAndItsType) {
  // Typed reads say which member is missing or mistyped, under the reader's `where`.
  const ReplyReader reader("trainer POST http://t/train_step");
  const auto parsed = ParseJson(R"({"a":{"b":"x","n":1.5},"ids":[1,2,-3],"lp":[0.0005,0.5]})");
  ASSERT_OK(parsed);
  const JsonValue& reply = *parsed;
  const JsonValue& a = *reply.Find("a");
  EXPECT_EQ(reader.Int(a, "a", "b").status().message(),
            "trainer POST http://t/train_step: a.b is a string, not an integer");
  EXPECT_EQ(reader.String(a, "a", "c").status().message(),
            "trainer POST http://t/train_step: a.c is missing");
  const auto number = reader.Number(a, "a", "n");
  ASSERT_OK(number);
  EXPECT_EQ(*number, 1.5);
  EXPECT_THAT(reader.TokenIds(*reply.Find("ids"), "ids").status().message(),
              HasSubstr("ids[2] is -3, outside [0, 2147483647]"));
  const auto tiny = reader.Logprob(reply.Find("lp")->as_array()[0], "lp[0]");
  ASSERT_OK(tiny);
  EXPECT_EQ(*tiny, 0.0);
  EXPECT_THAT(reader.Logprob(reply.Find("lp")->as_array()[1], "lp[1]").status().message(),
              HasSubstr("lp[1] is 0.5, not a log-probability"));
}

}  // namespace
}  // namespace libra::cluster
