// Strong ids: small typed wrappers around int64_t, allocated per run (never per process), so two
// kinds of id cannot be mixed up and two runs in one process do not disturb each other.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace libra {

template <typename Tag>
struct StrongId {
  int64_t value = -1;

  constexpr StrongId() = default;
  constexpr explicit StrongId(int64_t v) : value(v) {}
  constexpr bool valid() const { return value >= 0; }
  auto operator<=>(const StrongId&) const = default;
  std::string ToString() const { return std::to_string(value); }
};

using TrajectoryId = StrongId<struct TrajectoryIdTag>;
using PromptId = StrongId<struct PromptIdTag>;
using InstanceId = StrongId<struct InstanceIdTag>;

}  // namespace libra

template <typename Tag>
struct std::hash<libra::StrongId<Tag>> {
  size_t operator()(const libra::StrongId<Tag>& id) const noexcept {
    return std::hash<int64_t>()(id.value);
  }
};
