// Helpers shared by the fuzz harnesses: the input as text, split in parts. A harness is a
// libFuzzer entry point (LLVMFuzzerTestOneInput); built with -DLIBRA_FUZZ=ON (clang) it is a
// fuzzer, otherwise replay_main.cc runs it over its corpus (a CTest). docs/benchmarks.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace libra::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

/// `text` cut at every `separator` (a separator at the end gives an empty last part).
inline std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

/// Aborts (a crash libFuzzer reports) when `ok` is false: for invariants the harness checks.
inline void Expect(bool ok, const char* what) {
  if (!ok) __builtin_trap();
  (void)what;
}

}  // namespace libra::fuzz
