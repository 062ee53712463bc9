#include "common/json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>
#include <unordered_set>

#include "common/strings.h"

namespace libra {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsWordChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; }
// Characters that may continue a number token; letters are included so that "-Infinity" or "1x"
// is reported as one bad token (valid JSON never has a letter right after a number).
bool IsNumberChar(char c) { return IsWordChar(c) || c == '-' || c == '+' || c == '.'; }
bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The length of the valid UTF-8 sequence that starts with the non-ASCII byte text[pos], or 0
/// when it is not valid UTF-8 (stray continuation byte, overlong form, surrogate, above U+10FFFF,
/// truncated).
size_t Utf8Length(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) -> unsigned {
    return i < text.size() ? static_cast<unsigned char>(text[i]) : 0x100u;
  };
  auto cont = [&](size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
    const unsigned b = byte(i);
    return b >= lo && b <= hi;
  };
  const unsigned b0 = byte(pos);
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(pos + 1) ? 2 : 0;
  if (b0 == 0xE0) return cont(pos + 1, 0xA0, 0xBF) && cont(pos + 2) ? 3 : 0;
  if (b0 == 0xED) return cont(pos + 1, 0x80, 0x9F) && cont(pos + 2) ? 3 : 0;
  if (b0 >= 0xE1 && b0 <= 0xEF) return cont(pos + 1) && cont(pos + 2) ? 3 : 0;
  if (b0 == 0xF0) return cont(pos + 1, 0x90, 0xBF) && cont(pos + 2) && cont(pos + 3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return cont(pos + 1) && cont(pos + 2) && cont(pos + 3) ? 4 : 0;
  if (b0 == 0xF4) return cont(pos + 1, 0x80, 0x8F) && cont(pos + 2) && cont(pos + 3) ? 4 : 0;
  return 0;
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

/// Whether `token` is a JSON number (RFC 8259 grammar); `integral` tells whether it has neither
/// a fraction nor an exponent.
bool MatchesNumberGrammar(std::string_view token, bool* integral) {
  size_t i = 0;
  const size_t n = token.size();
  auto digits = [&] {
    const size_t start = i;
    while (i < n && IsDigit(token[i])) ++i;
    return i > start;
  };
  if (i < n && token[i] == '-') ++i;
  if (i < n && token[i] == '0') {
    ++i;
  } else if (i >= n || token[i] < '1' || token[i] > '9' || !digits()) {
    return false;
  }
  *integral = true;
  if (i < n && token[i] == '.') {
    ++i;
    *integral = false;
    if (!digits()) return false;
  }
  if (i < n && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    *integral = false;
    if (i < n && (token[i] == '+' || token[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == n;
}

/// `text` cut to `max` bytes, with "..." when cut, for quoting input in messages.
std::string Excerpt(std::string_view text, size_t max = 40) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "...";
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<JsonValue> ParseDocument() {
    JsonValue value;
    SkipWhitespace();
    LIBRA_RETURN_IF_ERROR(ParseValue(0, &value));
    SkipWhitespace();
    if (pos_ < text_.size()) {
      return Error(pos_, "expected end of input after the value (got " + Got(pos_) + ")");
    }
    return value;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool AtEnd() const { return pos_ >= text_.size(); }

  void SkipWhitespace() {
    while (pos_ < text_.size() && IsWhitespace(text_[pos_])) ++pos_;
  }

  Status Error(size_t at, const std::string& what) const {
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return Status::InvalidArgument(
        StrFormat("line %d, column %zu: %s", line, at - line_start + 1, what.c_str()));
  }

  /// What is found at `at`, for "expected X (got Y)": "end of input", a word ('NaN'), a
  /// printable character (']') or a byte (byte 0x01).
  std::string Got(size_t at) const {
    if (at >= text_.size()) return "end of input";
    const char c = text_[at];
    if (IsWordChar(c)) {
      size_t end = at;
      while (end < text_.size() && IsWordChar(text_[end])) ++end;
      return "'" + Excerpt(text_.substr(at, end - at), 20) + "'";
    }
    if (c >= 0x20 && c < 0x7F) return std::string("'") + c + "'";
    return StrFormat("byte 0x%02X", static_cast<unsigned char>(c));
  }

  Status ParseValue(int depth, JsonValue* out) {
    if (AtEnd()) return Error(pos_, "expected a value (got end of input)");
    const char c = Peek();
    if (c == '{') return ParseObject(depth, out);
    if (c == '[') return ParseArray(depth, out);
    if (c == '"') {
      std::string text;
      LIBRA_RETURN_IF_ERROR(ParseString(&text));
      *out = JsonValue(std::move(text));
      return Status();
    }
    if (c == '-' || IsDigit(c)) return ParseNumber(out);
    if (IsAlpha(c)) {
      size_t end = pos_;
      while (end < text_.size() && IsWordChar(text_[end])) ++end;
      const std::string_view word = text_.substr(pos_, end - pos_);
      if (word == "true" || word == "false") {
        *out = JsonValue(word == "true");
      } else if (word == "null") {
        *out = JsonValue();
      } else {
        return Error(pos_, "expected a value (got " + Got(pos_) + ")");
      }
      pos_ = end;
      return Status();
    }
    return Error(pos_, "expected a value (got " + Got(pos_) + ")");
  }

  Status CheckDepth(int depth) const {
    if (depth >= kJsonMaxDepth) {
      return Error(pos_, StrFormat("nesting deeper than %d levels", kJsonMaxDepth));
    }
    return Status();
  }

  Status ParseArray(int depth, JsonValue* out) {
    LIBRA_RETURN_IF_ERROR(CheckDepth(depth));
    ++pos_;  // '['
    JsonValue::Array items;
    SkipWhitespace();
    if (Peek() == ']') {
      ++pos_;
      *out = JsonValue::MakeArray();
      return Status();
    }
    while (true) {
      JsonValue item;
      LIBRA_RETURN_IF_ERROR(ParseValue(depth + 1, &item));
      items.push_back(std::move(item));
      SkipWhitespace();
      if (!AtEnd() && Peek() == ',') {
        ++pos_;
        SkipWhitespace();
        if (!AtEnd() && Peek() == ']') return Error(pos_, "trailing comma before ']'");
        continue;
      }
      if (!AtEnd() && Peek() == ']') {
        ++pos_;
        break;
      }
      return Error(pos_, "expected ',' or ']' (got " + Got(pos_) + ")");
    }
    *out = JsonValue::MakeArray(std::move(items));
    return Status();
  }

  Status ParseObject(int depth, JsonValue* out) {
    LIBRA_RETURN_IF_ERROR(CheckDepth(depth));
    ++pos_;  // '{'
    JsonValue::Object members;
    std::unordered_set<std::string> keys;
    SkipWhitespace();
    if (Peek() == '}') {
      ++pos_;
      *out = JsonValue::MakeObject();
      return Status();
    }
    while (true) {
      if (AtEnd() || Peek() != '"') {
        return Error(pos_, "expected a string key (got " + Got(pos_) + ")");
      }
      const size_t key_at = pos_;
      std::string key;
      LIBRA_RETURN_IF_ERROR(ParseString(&key));
      if (!keys.insert(key).second) return Error(key_at, "duplicate key " + JsonQuote(key));
      SkipWhitespace();
      if (AtEnd() || Peek() != ':') {
        return Error(pos_, "expected ':' after the key (got " + Got(pos_) + ")");
      }
      ++pos_;
      SkipWhitespace();
      JsonValue value;
      LIBRA_RETURN_IF_ERROR(ParseValue(depth + 1, &value));
      members.emplace_back(std::move(key), std::move(value));
      SkipWhitespace();
      if (!AtEnd() && Peek() == ',') {
        ++pos_;
        SkipWhitespace();
        if (!AtEnd() && Peek() == '}') return Error(pos_, "trailing comma before '}'");
        continue;
      }
      if (!AtEnd() && Peek() == '}') {
        ++pos_;
        break;
      }
      return Error(pos_, "expected ',' or '}' (got " + Got(pos_) + ")");
    }
    // The keys were checked above; build the object without checking them again.
    *out = JsonValue::MakeObject();
    out->as_object() = std::move(members);
    return Status();
  }

  /// Parses the string literal at pos_ (a '"') into `out`, decoding escapes.
  Status ParseString(std::string* out) {
    const size_t open = pos_++;
    while (true) {
      // Copy the run of plain characters at once.
      size_t end = pos_;
      while (end < text_.size()) {
        const unsigned char b = static_cast<unsigned char>(text_[end]);
        if (b == '"' || b == '\\' || b < 0x20 || b >= 0x80) break;
        ++end;
      }
      out->append(text_.substr(pos_, end - pos_));
      pos_ = end;
      if (AtEnd()) return Error(open, "unterminated string");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status();
      }
      if (c == '\\') {
        LIBRA_RETURN_IF_ERROR(ParseEscape(open, out));
        continue;
      }
      if (c < 0x20) {
        return Error(pos_,
                     StrFormat("control character U+%04X in a string (it must be escaped)", c));
      }
      const size_t length = Utf8Length(text_, pos_);
      if (length == 0) return Error(pos_, "invalid UTF-8 in a string");
      out->append(text_.substr(pos_, length));
      pos_ += length;
    }
  }

  /// Reads 4 hex digits at `at` into `value`; false when they are not there.
  bool Hex4(size_t at, uint32_t* value) const {
    if (at + 4 > text_.size()) return false;
    uint32_t v = 0;
    for (size_t i = at; i < at + 4; ++i) {
      const int d = HexDigit(text_[i]);
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    *value = v;
    return true;
  }

  /// Decodes the escape at pos_ (a '\') of the string opened at `open`.
  Status ParseEscape(size_t open, std::string* out) {
    const size_t at = pos_;
    if (at + 1 >= text_.size()) return Error(open, "unterminated string");
    const char e = text_[at + 1];
    pos_ += 2;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out->push_back(e);
        return Status();
      case 'b':
        out->push_back('\b');
        return Status();
      case 'f':
        out->push_back('\f');
        return Status();
      case 'n':
        out->push_back('\n');
        return Status();
      case 'r':
        out->push_back('\r');
        return Status();
      case 't':
        out->push_back('\t');
        return Status();
      case 'u':
        break;
      default:
        if (e >= 0x20 && e < 0x7F) return Error(at, StrFormat("invalid escape '\\%c'", e));
        return Error(at, StrFormat("invalid escape ('\\' followed by byte 0x%02X)",
                                   static_cast<unsigned char>(e)));
    }
    uint32_t code_point = 0;
    if (!Hex4(pos_, &code_point)) return Error(at, "invalid \\u escape (expected 4 hex digits)");
    pos_ += 4;
    if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
      return Error(at, StrFormat("unpaired surrogate \\u%04X", code_point));
    }
    if (code_point >= 0xD800 && code_point <= 0xDBFF) {
      uint32_t low = 0;
      if (pos_ + 1 >= text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u' ||
          !Hex4(pos_ + 2, &low) || low < 0xDC00 || low > 0xDFFF) {
        return Error(at, StrFormat("unpaired surrogate \\u%04X", code_point));
      }
      pos_ += 6;
      code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(code_point, out);
    return Status();
  }

  Status ParseNumber(JsonValue* out) {
    const size_t start = pos_;
    size_t end = pos_;
    while (end < text_.size() && IsNumberChar(text_[end])) ++end;
    const std::string_view token = text_.substr(start, end - start);
    bool integral = false;
    if (!MatchesNumberGrammar(token, &integral)) {
      return Error(start, "invalid number '" + Excerpt(token) + "'");
    }
    pos_ = end;
    const char* first = token.data();
    const char* last = token.data() + token.size();
    if (integral) {
      int64_t value = 0;
      const auto [ptr, ec] = std::from_chars(first, last, value);
      if (ec == std::errc() && ptr == last) {
        *out = JsonValue(value);
        return Status();
      }
      // Too large for an int64: kept as a double.
    }
    double value = 0;
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
      // Overflow is an error; underflow rounds to zero (or a subnormal) as strtod does.
      const std::string copy(token);
      value = std::strtod(copy.c_str(), nullptr);
      if (std::isinf(value)) {
        return Error(start, "number '" + Excerpt(token) + "' is out of range");
      }
    } else if (ec != std::errc() || ptr != last) {
      return Error(start, "invalid number '" + Excerpt(token) + "'");
    }
    *out = JsonValue(value);
    return Status();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

void WriteString(std::string_view text, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append(StrFormat("\\u%04x", c));
        } else if (c < 0x80) {
          out->push_back(static_cast<char>(c));
        } else {
          const size_t length = Utf8Length(text, i);
          if (length == 0) {
            out->append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
          } else {
            out->append(text.substr(i, length));
            i += length;
            continue;
          }
        }
    }
    ++i;
  }
  out->push_back('"');
}

void WriteDouble(double value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  LIBRA_CHECK(ec == std::errc()) << "to_chars failed";
  const std::string_view text(buffer, static_cast<size_t>(end - buffer));
  out->append(text);
  if (text.find_first_of(".e") == std::string_view::npos) out->append(".0");
}

void Write(const JsonValue& value, std::string* out) {
  switch (value.type()) {
    case JsonValue::Type::kNull:
      out->append("null");
      return;
    case JsonValue::Type::kBool:
      out->append(value.as_bool() ? "true" : "false");
      return;
    case JsonValue::Type::kInt:
      out->append(std::to_string(value.as_int()));
      return;
    case JsonValue::Type::kDouble:
      WriteDouble(value.as_double(), out);
      return;
    case JsonValue::Type::kString:
      WriteString(value.as_string(), out);
      return;
    case JsonValue::Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const JsonValue& item : value.as_array()) {
        if (!first) out->push_back(',');
        first = false;
        Write(item, out);
      }
      out->push_back(']');
      return;
    }
    case JsonValue::Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, member] : value.as_object()) {
        if (!first) out->push_back(',');
        first = false;
        WriteString(key, out);
        out->push_back(':');
        Write(member, out);
      }
      out->push_back('}');
      return;
    }
  }
}

}  // namespace

JsonValue JsonValue::MakeArray(Array items) {
  JsonValue value;
  value.data_ = std::move(items);
  return value;
}

JsonValue JsonValue::MakeObject(Object members) {
  std::unordered_set<std::string_view> keys;
  for (const Member& m : members) {
    LIBRA_CHECK(keys.insert(m.first).second) << "duplicate JSON key " << JsonQuote(m.first);
  }
  JsonValue value;
  value.data_ = std::move(members);
  return value;
}

const char* JsonValue::type_name() const {
  switch (type()) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "a boolean";
    case Type::kInt:
      return "an integer";
    case Type::kDouble:
      return "a number";
    case Type::kString:
      return "a string";
    case Type::kArray:
      return "an array";
    case Type::kObject:
      return "an object";
  }
  return "?";
}

bool JsonValue::as_bool() const {
  LIBRA_CHECK(is_bool()) << "as_bool() on " << type_name();
  return std::get<bool>(data_);
}

int64_t JsonValue::as_int() const {
  LIBRA_CHECK(is_int()) << "as_int() on " << type_name();
  return std::get<int64_t>(data_);
}

double JsonValue::as_double() const {
  LIBRA_CHECK(is_number()) << "as_double() on " << type_name();
  return is_int() ? static_cast<double>(std::get<int64_t>(data_)) : std::get<double>(data_);
}

const std::string& JsonValue::as_string() const {
  LIBRA_CHECK(is_string()) << "as_string() on " << type_name();
  return std::get<std::string>(data_);
}

const JsonValue::Array& JsonValue::as_array() const {
  LIBRA_CHECK(is_array()) << "as_array() on " << type_name();
  return std::get<Array>(data_);
}

JsonValue::Array& JsonValue::as_array() {
  LIBRA_CHECK(is_array()) << "as_array() on " << type_name();
  return std::get<Array>(data_);
}

const JsonValue::Object& JsonValue::as_object() const {
  LIBRA_CHECK(is_object()) << "as_object() on " << type_name();
  return std::get<Object>(data_);
}

JsonValue::Object& JsonValue::as_object() {
  LIBRA_CHECK(is_object()) << "as_object() on " << type_name();
  return std::get<Object>(data_);
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const Member& m : std::get<Object>(data_)) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

JsonValue& JsonValue::Set(std::string key, JsonValue value) & {
  for (Member& m : as_object()) {
    if (m.first == key) {
      m.second = std::move(value);
      return *this;
    }
  }
  as_object().emplace_back(std::move(key), std::move(value));
  return *this;
}

JsonValue&& JsonValue::Set(std::string key, JsonValue value) && {
  return std::move(Set(std::move(key), std::move(value)));
}

JsonValue& JsonValue::Append(JsonValue value) & {
  as_array().push_back(std::move(value));
  return *this;
}

JsonValue&& JsonValue::Append(JsonValue value) && { return std::move(Append(std::move(value))); }

std::string JsonValue::ToString() const { return ToJson(*this); }

Result<JsonValue> ParseJson(std::string_view text) { return Parser(text).ParseDocument(); }

std::string ToJson(const JsonValue& value) {
  std::string out;
  Write(value, &out);
  return out;
}

std::string JsonQuote(std::string_view text) {
  std::string out;
  WriteString(text, &out);
  return out;
}

}  // namespace libra
