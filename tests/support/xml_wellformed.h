// XmlWellFormed: a small strict check that a document is well-formed XML, for the SVG tests
// (no XML library is a dependency). It accepts what libra writes and rejects what a broken writer
// would produce: unbalanced or misnested tags, unquoted or duplicate attributes, bad entities,
// raw '<' or '&' in text, a second root, text outside the root.
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace libra::test {

/// "" when `doc` is well-formed, else what is wrong and where (byte offset).
inline std::string XmlWellFormed(std::string_view doc) {
  size_t i = 0;
  auto error = [&](const std::string& what) { return what + " at byte " + std::to_string(i); };
  auto is_name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' ||
           c == '.';
  };
  auto entity_ok = [&](size_t at) -> size_t {  // length of a valid entity at doc[at] == '&', or 0
    const size_t end = doc.find(';', at);
    if (end == std::string_view::npos || end - at > 10) return 0;
    const std::string_view name = doc.substr(at + 1, end - at - 1);
    if (name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos") {
      return end - at + 1;
    }
    if (name.size() >= 2 && name[0] == '#') {
      for (size_t k = 1; k < name.size(); ++k) {
        if (!std::isdigit(static_cast<unsigned char>(name[k]))) return 0;
      }
      return end - at + 1;
    }
    return 0;
  };
  if (doc.substr(0, 5) == "<?xml") {
    i = doc.find("?>");
    if (i == std::string_view::npos) return error("unterminated XML declaration");
    i += 2;
  }
  std::vector<std::string> open;
  bool root_seen = false;
  while (i < doc.size()) {
    const char c = doc[i];
    if (c != '<') {
      if (open.empty()) {
        if (!std::isspace(static_cast<unsigned char>(c))) return error("text outside the root");
        ++i;
        continue;
      }
      if (c == '&') {
        const size_t n = entity_ok(i);
        if (n == 0) return error("bad entity");
        i += n;
        continue;
      }
      if (c == '>') return error("raw '>' in text");
      ++i;
      continue;
    }
    if (doc.substr(i, 4) == "<!--") {
      const size_t end = doc.find("-->", i);
      if (end == std::string_view::npos) return error("unterminated comment");
      i = end + 3;
      continue;
    }
    if (doc.substr(i, 2) == "</") {
      size_t j = i + 2;
      while (j < doc.size() && is_name_char(doc[j])) ++j;
      const std::string name(doc.substr(i + 2, j - i - 2));
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size() || doc[j] != '>') return error("malformed end tag");
      if (open.empty() || open.back() != name) return error("end tag </" + name + "> misnested");
      open.pop_back();
      i = j + 1;
      continue;
    }
    // Start tag.
    size_t j = i + 1;
    while (j < doc.size() && is_name_char(doc[j])) ++j;
    const std::string name(doc.substr(i + 1, j - i - 1));
    if (name.empty()) return error("tag without a name");
    if (open.empty()) {
      if (root_seen) return error("second root element");
      root_seen = true;
    }
    std::set<std::string> attributes;
    for (;;) {
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size()) return error("unterminated tag <" + name + ">");
      if (doc[j] == '>') {
        open.push_back(name);
        ++j;
        break;
      }
      if (doc.substr(j, 2) == "/>") {
        j += 2;
        break;
      }
      const size_t a = j;
      while (j < doc.size() && is_name_char(doc[j])) ++j;
      const std::string attribute(doc.substr(a, j - a));
      if (attribute.empty()) return error("bad attribute in <" + name + ">");
      if (!attributes.insert(attribute).second) return error("duplicate attribute " + attribute);
      if (j >= doc.size() || doc[j] != '=')
        return error("attribute " + attribute + " has no value");
      ++j;
      if (j >= doc.size() || (doc[j] != '"' && doc[j] != '\'')) {
        return error("attribute " + attribute + " is not quoted");
      }
      const char quote = doc[j++];
      while (j < doc.size() && doc[j] != quote) {
        if (doc[j] == '<') return error("'<' in attribute " + attribute);
        if (doc[j] == '&') {
          i = j;
          const size_t n = entity_ok(j);
          if (n == 0) return error("bad entity in attribute " + attribute);
          j += n;
          continue;
        }
        ++j;
      }
      if (j >= doc.size()) return error("unterminated attribute " + attribute);
      ++j;
    }
    i = j;
  }
  if (!open.empty()) return error("<" + open.back() + "> is never closed");
  if (!root_seen) return error("no root element");
  return "";
}

}  // namespace libra::test
