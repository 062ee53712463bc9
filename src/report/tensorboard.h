// TensorBoard event files, written without TensorFlow: the record framing and the Event /
// Summary messages are public (TensorFlow's record_writer and event.proto / summary.proto), so
// libra encodes them itself.
//
// A file is a sequence of records, each
//   uint64 length (little-endian) | uint32 masked CRC-32C of the length bytes |
//   data | uint32 masked CRC-32C of the data
// where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is an Event:
//   message Event   { double wall_time = 1; int64 step = 2;
//                     oneof what { string file_version = 3; Summary summary = 5; } }
//   message Summary { repeated Value value = 1; }
//   message Value   { string tag = 1; float simple_value = 2; }
// The first event of a file carries file_version "brain.Event:2"; TensorBoard shows every
// simple_value as a scalar series named by its tag.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace libra::report {

/// CRC-32C (Castagnoli polynomial, reflected 0x82f63b78) of `data`.
uint32_t Crc32c(std::string_view data);

/// TensorFlow's masked CRC-32C of `data`.
uint32_t MaskedCrc32c(std::string_view data);

/// `data` framed as one record.
std::string TfRecord(std::string_view data);

/// The encoded Event that opens a file.
std::string FileVersionEvent(double wall_time);

/// The encoded Event of one step's scalars, as (tag, value) pairs.
std::string ScalarsEvent(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, float>>& values);

/// One step's scalars for an event file.
struct ScalarStep {
  double wall_time = 0;
  int64_t step = 0;
  std::vector<std::pair<std::string, float>> values;
};

/// A whole event file: the file_version event at `start_wall_time`, then one event per step.
std::string EventFile(double start_wall_time, const std::vector<ScalarStep>& steps);

}  // namespace libra::report
