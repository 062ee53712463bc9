// Small string helpers (GCC 12 has no <format>).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace libra {

/// printf-style formatting into a std::string.
std::string StrFormat(const char* format, ...) __attribute__((format(printf, 1, 2)));

/// Joins the items with `separator` between them.
std::string StrJoin(const std::vector<std::string>& items, std::string_view separator);

/// Splits on every `separator` (empty fields kept).
std::vector<std::string> StrSplit(std::string_view text, char separator);

/// Whether `text` starts / ends with the given string.
bool StartsWith(std::string_view text, std::string_view prefix);
bool EndsWith(std::string_view text, std::string_view suffix);

/// `text` safe to print on a terminal line: control characters (a newline, an escape sequence's
/// ESC, DEL) become visible escapes ("\n", "\t", "\x1b"); with `keep_newlines`, '\n' stays a line
/// break. For messages that echo what a user or a file gave.
std::string EscapeControl(std::string_view text, bool keep_newlines = false);

/// The closest of `candidates` to `word` by edit distance (a name that one of them starts with,
/// or that starts with one of them, counts as close), or "" when none is close; for
/// "did you mean ...?" hints.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

/// "must be one of a, b (got 'x'); did you mean 'a'?" (the hint when one is close): what a value
/// outside a fixed set of names is told.
std::string NotOneOf(std::string_view got, const std::vector<std::string>& allowed);

}  // namespace libra
