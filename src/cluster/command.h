// Command templates: the command lines a recipe gives for engines, trainers and tools, with
// placeholders filled in per process, e.g.
//   "vllm serve {model} --tensor-parallel-size {tp} --port {port}"
// A template is split into words once, when it is parsed; each placeholder's value is then
// substituted inside its word and never split or interpreted again, so a value may hold blanks,
// quotes, ';' or "$(...)" and still arrive as one literal argument. No shell runs a template's
// command, except where a command must cross one (ssh's remote command line), and there
// ShellQuote makes every word one literal shell word.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace libra::cluster {

/// A parsed command template.
///
/// Syntax, a small shell-like subset that expands nothing but placeholders:
///   * words are separated by blanks (space, tab, newline) outside quotes;
///   * '...' quotes literally; "..." quotes with \" and \\ as its only escapes; a backslash
///     outside quotes makes the next character literal;
///   * {name} is a placeholder (name: letters, digits, '_', '-', '.'), replaced by its value
///     everywhere, inside quotes too;
///   * {{ and }} stand for literal braces, so that JSON arguments can be written.
class CommandTemplate {
 public:
  /// kInvalidArgument naming the template and the column, for an empty template, an unclosed
  /// quote or '{', a '}' without its '{', or a bad placeholder name.
  static Result<CommandTemplate> Parse(std::string_view text);

  /// The template as written.
  const std::string& text() const { return text_; }
  /// The placeholders it uses, sorted, each once.
  std::vector<std::string> Placeholders() const;
  /// The argv, each placeholder replaced by its value. kInvalidArgument naming the template for
  /// a placeholder without a value, with the closest known name and the list of known ones.
  Result<std::vector<std::string>> Expand(const std::map<std::string, std::string>& values) const;

 private:
  // A word is literal text and placeholders, in order.
  struct Piece {
    bool placeholder = false;
    // The literal text, or the placeholder's name.
    std::string text;
  };

  std::string text_;
  std::vector<std::vector<Piece>> words_;
};

/// `word` as one literal POSIX shell word: as is when it holds only characters no shell treats
/// specially (letters, digits, "_-./:@%+,"), else in single quotes with each ' written '\''.
std::string ShellQuote(std::string_view word);
/// `argv` as one POSIX shell command line: each word ShellQuote'd, separated by spaces.
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace libra::cluster
