// EnumNames<E>: an enum's one table of names, for writing a value out and parsing it back with a
// "did you mean" hint. An enum opts in with a constexpr `EnumTable` overload beside it, found by
// argument-dependent lookup:
//
//   enum class Batching { kOrdered, kStream };
//   constexpr std::array<EnumName<Batching>, 2> EnumTable(Batching) {
//     return {{{Batching::kOrdered, "ordered"}, {Batching::kStream, "stream"}}};
//   }
//
//   EnumNames<Batching>::Name(Batching::kStream)  // "stream"
//   EnumNames<Batching>::Parse("strem")           // error: must be one of ordered, stream
//                                                 // (got 'strem'); did you mean 'stream'?
//
// Settings are parsed once, where they enter (the recipe, an option table, a database row); past
// that point they are compared as enums, never as strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "common/status.h"
#include "common/strings.h"

namespace libra {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E>
struct EnumNames {
  /// The value's name. A value outside the table is a bug in libra (enums are only made by
  /// parsing or by code).
  static std::string_view Name(E value) {
    for (const EnumName<E>& entry : EnumTable(E{})) {
      if (entry.value == value) return entry.name;
    }
    LIBRA_CHECK(false) << "enum value " << static_cast<long long>(value) << " has no name";
    return {};
  }

  /// The value named `name`, or nullopt.
  static std::optional<E> Find(std::string_view name) {
    for (const EnumName<E>& entry : EnumTable(E{})) {
      if (entry.name == name) return entry.value;
    }
    return std::nullopt;
  }

  /// The value named `name`, or kInvalidArgument "must be one of a, b (got 'x'); did you mean
  /// 'a'?" (without a location: the caller knows where the name came from).
  static Result<E> Parse(std::string_view name) {
    if (std::optional<E> value = Find(name)) return *value;
    return Status::InvalidArgument(NotOneOf(name, All()));
  }

  /// Every name, in the table's order.
  static std::vector<std::string> All() {
    std::vector<std::string> names;
    for (const EnumName<E>& entry : EnumTable(E{})) names.emplace_back(entry.name);
    return names;
  }
};

/// Shorthand for EnumNames<E>::Name, as a std::string.
template <typename E>
std::string NameOf(E value) {
  return std::string(EnumNames<E>::Name(value));
}

}  // namespace libra
