// JSON: a small, strict JSON value type with a parser and a writer, for libra's own files
// (trajectory traces, router tree persistence) and engine HTTP replies. No third-party JSON
// library is used.
//
// The parser accepts exactly RFC 8259: no comments, no trailing commas, no NaN or Infinity, no
// unescaped control characters, UTF-8 only, duplicate object keys rejected, nesting limited to
// kJsonMaxDepth. The writer is compact and deterministic: object members keep their insertion
// order and doubles are written so that they parse back to the same bits. This module knows
// nothing about what the documents mean; callers validate the values they read.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/check.h"
#include "common/status.h"

namespace libra {

/// Arrays and objects deeper than this are a parse error (the parser recurses).
inline constexpr int kJsonMaxDepth = 256;

/// A JSON value: null, a boolean, a number, a string, an array or an object. A value type.
///
/// Numbers are kept as an int64 when they were written as an integer (no fraction, no exponent)
/// that fits, and as a double otherwise; as_double() reads either. Objects keep their members in
/// insertion order and never hold two members with one key. Equality is structural and exact: the
/// integer 1 and the double 1.0 are different values, and so are objects with the same members in
/// another order.
class JsonValue {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Array = std::vector<JsonValue>;
  using Member = std::pair<std::string, JsonValue>;
  using Object = std::vector<Member>;

  /// null. The constructors from C++ values are implicit on purpose, so that building reads
  /// naturally: `object.Set("prompt", 12)`.
  JsonValue() = default;
  JsonValue(std::nullptr_t) {}               // NOLINT(google-explicit-constructor)
  JsonValue(bool value) : data_(value) {}    // NOLINT(google-explicit-constructor)
  JsonValue(double value) : data_(value) {}  // NOLINT(google-explicit-constructor)
  // NOLINTNEXTLINE(google-explicit-constructor)
  JsonValue(std::string value) : data_(std::move(value)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  JsonValue(std::string_view value) : data_(std::string(value)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  JsonValue(const char* value) : data_(std::string(value)) {}
  /// Any integer type (bool picks the boolean constructor). REQUIRES: the value fits in an int64.
  template <std::integral T>
  JsonValue(T value) : data_(static_cast<int64_t>(value)) {  // NOLINT(google-explicit-constructor)
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      LIBRA_CHECK(value <= static_cast<T>(std::numeric_limits<int64_t>::max()))
          << "JSON integer " << value << " too large";
    }
  }

  /// An array holding `items` (empty by default).
  static JsonValue MakeArray(Array items = {});
  /// An object holding `members` in their order (empty by default), e.g.
  /// `JsonValue::MakeObject({{"prompt", 12}, {"end", "stop"}})`.
  /// REQUIRES: no two members share a key.
  static JsonValue MakeObject(Object members = {});

  Type type() const { return static_cast<Type>(data_.index()); }
  /// What the value is, for messages: "null", "a boolean", "an integer", "a number" (a double),
  /// "a string", "an array", "an object".
  const char* type_name() const;

  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  /// An integer number (written without fraction or exponent, and fitting an int64).
  bool is_int() const { return type() == Type::kInt; }
  /// A number that is not is_int().
  bool is_double() const { return type() == Type::kDouble; }
  /// is_int() or is_double().
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  /// The accessors below abort (LIBRA_CHECK) on a value of another type: check the type first.
  /// REQUIRES: is_bool().
  bool as_bool() const;
  /// REQUIRES: is_int().
  int64_t as_int() const;
  /// The number as a double (an integer is converted). REQUIRES: is_number().
  double as_double() const;
  /// REQUIRES: is_string().
  const std::string& as_string() const;
  /// REQUIRES: is_array().
  const Array& as_array() const;
  Array& as_array();
  /// The members in order. REQUIRES: is_object(). Callers that add members through the mutable
  /// reference must keep keys unique (prefer Set).
  const Object& as_object() const;
  Object& as_object();

  /// The member `key` of an object, or null when this is not an object or has no such member.
  /// Linear in the number of members. The pointer is valid until the object is modified.
  const JsonValue* Find(std::string_view key) const;

  /// Sets member `key` of an object: replaces its value in place when present, else appends it.
  /// Returns the object, so that calls chain:
  /// `JsonValue::MakeObject().Set("prompt", 12).Set("end", "stop")`. REQUIRES: is_object().
  JsonValue& Set(std::string key, JsonValue value) &;
  JsonValue&& Set(std::string key, JsonValue value) &&;
  /// Appends `value` to an array; returns the array. REQUIRES: is_array().
  JsonValue& Append(JsonValue value) &;
  JsonValue&& Append(JsonValue value) &&;

  /// ToJson(*this), for test failure messages.
  std::string ToString() const;

  bool operator==(const JsonValue&) const = default;

 private:
  // The alternatives are in Type's order.
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> data_;
};

/// Parses one JSON document (surrounding whitespace allowed). On failure, kInvalidArgument with
/// "line L, column C: what" (1-based; columns count bytes), for example
/// "line 1, column 9: trailing comma before ']'". Callers prefix the file name.
Result<JsonValue> ParseJson(std::string_view text);

/// The compact JSON text of `value` (no whitespace, no newline). Deterministic: object members in
/// their order; integers as integers; doubles in the shortest form that parses back to the same
/// double, always with a '.' or an exponent so that they read back as doubles ("1.0", "0.1",
/// "1e+300"); non-finite doubles, which JSON cannot represent, as null. Strings are written as
/// UTF-8, escaping '"', '\' and control characters; bytes that are not valid UTF-8 become U+FFFD.
std::string ToJson(const JsonValue& value);

/// `text` as a JSON string literal, quotes included (the string case of ToJson).
std::string JsonQuote(std::string_view text);

}  // namespace libra
