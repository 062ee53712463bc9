#include "report/tensorboard.h"

#include <gtest/gtest.h>

#include <string>

namespace libra::report {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

TEST(TensorboardTest, Crc32cMatchesTheStandardCheckValues) {
  // The CRC-32C check value, and the RFC 3720 (iSCSI) test vectors.
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  EXPECT_EQ(Crc32c(""), 0u);
  // TensorFlow's mask: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(MaskedCrc32c("123456789"), 0xc78ab0e5u);
}

TEST(TensorboardTest, ScalarEventBytesWorkedOutByHand) {
  // Event{wall_time: 1.5, step: 2, summary: {value: [{tag: "a", simple_value: 0.5}]}}.
  const std::string expected = Bytes({
      0x09, 0,    0,   0, 0,    0, 0, 0xf8, 0x3f,  // field 1, fixed64: 1.5 = 0x3ff8000000000000
      0x10, 0x02,                                  // field 2, varint: 2
      0x2a, 0x0a,                                  // field 5 (summary), 10 bytes:
      0x0a, 0x08,                                  //   field 1 (value), 8 bytes:
      0x0a, 0x01, 'a',                             //     field 1 (tag): "a"
      0x15, 0,    0,   0, 0x3f,                    //     field 2, fixed32: 0.5f = 0x3f000000
  });
  EXPECT_EQ(ScalarsEvent(1.5, 2, {{"a", 0.5f}}), expected);
}

TEST(TensorboardTest, FileVersionEventBytesWorkedOutByHand) {
  // Event{wall_time: 2.0, file_version: "brain.Event:2"}; a step of 0 is not written.
  std::string expected = Bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x1a, 13});
  expected += "brain.Event:2";
  EXPECT_EQ(FileVersionEvent(2.0), expected);
}

TEST(TensorboardTest, LongStepsAndTagsUseMultiByteVarints) {
  // step 300 = 0xac 0x02; a 130-byte tag has the length 0x82 0x01.
  const std::string event = ScalarsEvent(0, 300, {{std::string(130, 't'), 1.0f}});
  EXPECT_EQ(event.substr(9, 3), Bytes({0x10, 0xac, 0x02}));
  // Value = 0x0a 0x82 0x01 <130 bytes> 0x15 <4 bytes>: 3 + 130 + 5 = 138 bytes.
  EXPECT_EQ(event.substr(12, 3), Bytes({0x2a, 0x8d, 0x01}));  // summary: 3 + 138 = 141 bytes
  EXPECT_EQ(event.substr(15, 3), Bytes({0x0a, 0x8a, 0x01}));  // value: 138 bytes
  EXPECT_EQ(event.substr(18, 3), Bytes({0x0a, 0x82, 0x01}));  // tag: 130 bytes
}

TEST(TensorboardTest, RecordFraming) {
  // length (8 bytes LE), masked CRC of those 8 bytes, the data, masked CRC of the data.
  const std::string data = "hello";
  const std::string record = TfRecord(data);
  ASSERT_EQ(record.size(), 8u + 4 + data.size() + 4);
  const std::string length = Bytes({5, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(record.substr(0, 8), length);
  auto le32 = [](uint32_t v) {
    return Bytes({static_cast<int>(v & 0xff), static_cast<int>((v >> 8) & 0xff),
                  static_cast<int>((v >> 16) & 0xff), static_cast<int>(v >> 24)});
  };
  EXPECT_EQ(record.substr(8, 4), le32(MaskedCrc32c(length)));
  EXPECT_EQ(record.substr(12, 5), data);
  EXPECT_EQ(record.substr(17, 4), le32(MaskedCrc32c(data)));
}

TEST(TensorboardTest, EventFileStartsWithTheFileVersion) {
  const std::string file = EventFile(10, {{11, 1, {{"x", 2.0f}}}, {12, 2, {{"x", 3.0f}}}});
  EXPECT_EQ(file.substr(0, TfRecord(FileVersionEvent(10)).size()), TfRecord(FileVersionEvent(10)));
  EXPECT_EQ(file, TfRecord(FileVersionEvent(10)) + TfRecord(ScalarsEvent(11, 1, {{"x", 2.0f}})) +
                      TfRecord(ScalarsEvent(12, 2, {{"x", 3.0f}})));
}

}  // namespace
}  // namespace libra::report
