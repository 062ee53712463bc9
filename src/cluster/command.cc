#include "cluster/command.h"

#include <cctype>
#include <set>

#include "common/strings.h"

namespace libra::cluster {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

bool IsShellSafe(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("_-./:@%+,").find(c) != std::string_view::npos;
}

Status TemplateError(std::string_view text, const std::string& what) {
  return Status::InvalidArgument(StrFormat(
      "command template \"%.*s\": %s", static_cast<int>(text.size()), text.data(), what.c_str()));
}

}  // namespace

Result<CommandTemplate> CommandTemplate::Parse(std::string_view text) {
  enum class Quote { kNone, kSingle, kDouble };
  CommandTemplate parsed;
  parsed.text_ = std::string(text);
  std::vector<Piece> word;
  bool in_word = false;  // a quote starts a word even when nothing follows it
  Quote quote = Quote::kNone;
  size_t quote_at = 0;
  auto literal = [&word](char c) {
    if (word.empty() || word.back().placeholder) word.push_back(Piece{false, ""});
    word.back().text += c;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool has_next = i + 1 < text.size();
    if (quote == Quote::kNone) {
      if (IsBlank(c)) {
        if (in_word) parsed.words_.push_back(std::move(word));
        word.clear();
        in_word = false;
        continue;
      }
      in_word = true;
      if (c == '\'' || c == '"') {
        quote = c == '\'' ? Quote::kSingle : Quote::kDouble;
        quote_at = i;
        continue;
      }
      if (c == '\\') {
        if (!has_next) return TemplateError(text, "a backslash ends the template");
        literal(text[++i]);
        continue;
      }
    } else if ((quote == Quote::kSingle && c == '\'') || (quote == Quote::kDouble && c == '"')) {
      quote = Quote::kNone;
      continue;
    } else if (quote == Quote::kDouble && c == '\\' && has_next &&
               (text[i + 1] == '"' || text[i + 1] == '\\')) {
      literal(text[++i]);
      continue;
    }
    if (c == '{' && has_next && text[i + 1] == '{') {
      literal(c);
      ++i;
    } else if (c == '}' && has_next && text[i + 1] == '}') {
      literal(c);
      ++i;
    } else if (c == '{') {
      const size_t close = text.find('}', i + 1);
      if (close == std::string_view::npos) {
        return TemplateError(text, StrFormat("'{' at column %zu is never closed", i + 1));
      }
      const std::string_view name = text.substr(i + 1, close - i - 1);
      bool valid = !name.empty();
      for (const char n : name) valid = valid && IsNameChar(n);
      if (!valid) {
        return TemplateError(
            text, StrFormat("bad placeholder {%.*s} at column %zu (a name is letters, digits, "
                            "'_', '-', '.'; write {{ and }} for literal braces)",
                            static_cast<int>(name.size()), name.data(), i + 1));
      }
      word.push_back(Piece{true, std::string(name)});
      i = close;
    } else if (c == '}') {
      return TemplateError(text, StrFormat("'}' at column %zu has no '{' (write }} for a literal "
                                           "brace)",
                                           i + 1));
    } else {
      literal(c);
    }
  }
  if (quote != Quote::kNone) {
    return TemplateError(text, StrFormat("the quote at column %zu is never closed", quote_at + 1));
  }
  if (in_word) parsed.words_.push_back(std::move(word));
  if (parsed.words_.empty()) return TemplateError(text, "empty command");
  return parsed;
}

std::vector<std::string> CommandTemplate::Placeholders() const {
  std::set<std::string> names;
  for (const auto& word : words_) {
    for (const Piece& piece : word) {
      if (piece.placeholder) names.insert(piece.text);
    }
  }
  return {names.begin(), names.end()};
}

Result<std::vector<std::string>> CommandTemplate::Expand(
    const std::map<std::string, std::string>& values) const {
  std::vector<std::string> argv;
  for (const auto& word : words_) {
    std::string arg;
    for (const Piece& piece : word) {
      if (!piece.placeholder) {
        arg += piece.text;
        continue;
      }
      const auto it = values.find(piece.text);
      if (it == values.end()) {
        std::vector<std::string> known;
        for (const auto& [name, value] : values) known.push_back("{" + name + "}");
        const std::string closest = ClosestMatch("{" + piece.text + "}", known);
        return TemplateError(
            text_, StrFormat("unknown placeholder {%s}%s; known: %s", piece.text.c_str(),
                             closest.empty() ? "" : (" (did you mean " + closest + "?)").c_str(),
                             known.empty() ? "none" : StrJoin(known, ", ").c_str()));
      }
      arg += it->second;
    }
    argv.push_back(std::move(arg));
  }
  return argv;
}

std::string ShellQuote(std::string_view word) {
  bool safe = !word.empty();
  for (const char c : word) safe = safe && IsShellSafe(c);
  if (safe) return std::string(word);
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  words.reserve(argv.size());
  for (const std::string& arg : argv) words.push_back(ShellQuote(arg));
  return StrJoin(words, " ");
}

}  // namespace libra::cluster
