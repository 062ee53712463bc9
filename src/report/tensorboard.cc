#include "report/tensorboard.h"

#include <array>
#include <cstring>

namespace libra::report {
namespace {

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82f63b78u : 0);
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

// Protobuf wire format: a field's key is (number << 3) | wire type.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

void Varint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void Key(int field, int wire_type, std::string* out) {
  Varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type), out);
}

void LittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void Bytes(int field, std::string_view bytes, std::string* out) {
  Key(field, kLengthDelimited, out);
  Varint(bytes.size(), out);
  out->append(bytes);
}

void Double(int field, double value, std::string* out) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  Key(field, kFixed64, out);
  LittleEndian(bits, 8, out);
}

void Float(int field, float value, std::string* out) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  Key(field, kFixed32, out);
  LittleEndian(bits, 4, out);
}

/// The fields every Event starts with.
std::string EventHead(double wall_time, int64_t step) {
  std::string event;
  Double(1, wall_time, &event);
  if (step != 0) {  // proto3: a zero is not written
    Key(2, kVarint, &event);
    Varint(static_cast<uint64_t>(step), &event);
  }
  return event;
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : data) crc = kCrcTable[(crc ^ c) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t MaskedCrc32c(std::string_view data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string TfRecord(std::string_view data) {
  std::string length;
  LittleEndian(data.size(), 8, &length);
  std::string out = length;
  LittleEndian(MaskedCrc32c(length), 4, &out);
  out.append(data);
  LittleEndian(MaskedCrc32c(data), 4, &out);
  return out;
}

std::string FileVersionEvent(double wall_time) {
  std::string event = EventHead(wall_time, 0);
  Bytes(3, "brain.Event:2", &event);
  return event;
}

std::string ScalarsEvent(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    Bytes(1, tag, &v);
    Float(2, value, &v);
    Bytes(1, v, &summary);
  }
  std::string event = EventHead(wall_time, step);
  Bytes(5, summary, &event);
  return event;
}

std::string EventFile(double start_wall_time, const std::vector<ScalarStep>& steps) {
  std::string out = TfRecord(FileVersionEvent(start_wall_time));
  for (const ScalarStep& s : steps) out += TfRecord(ScalarsEvent(s.wall_time, s.step, s.values));
  return out;
}

}  // namespace libra::report
