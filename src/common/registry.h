// Registry: name -> factory for a family of pluggable policies (routers, planners, ...).
//
// Built-ins are registered explicitly by one function per family (no self-registering statics:
// static libraries drop unreferenced objects, and initialisation order is unspecified). Creating an
// unknown name is an error that lists the known names.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/strings.h"

namespace libra {

template <typename T, typename... Args>
class Registry {
 public:
  using Factory = std::function<Result<std::unique_ptr<T>>(Args...)>;

  /// `family` names the kind of thing in messages ("router", "planner").
  explicit Registry(std::string family) : family_(std::move(family)) {}

  /// Adds a factory. Fails with kInternal when the name is already taken.
  Status Register(std::string name, std::string summary, Factory factory) {
    if (entries_.count(name) > 0) {
      return Status::Internal(family_ + " '" + name + "' is registered twice");
    }
    entries_.emplace(std::move(name), Entry{std::move(summary), std::move(factory)});
    return Status();
  }

  /// Builds the named policy. kNotFound (listing the known names) for an unknown name; otherwise
  /// whatever the factory returns (typically kInvalidRecipe for bad options).
  Result<std::unique_ptr<T>> Create(const std::string& name, Args... args) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) return Status::NotFound(UnknownMessage(name));
    return it->second.factory(args...);
  }

  bool Contains(const std::string& name) const { return entries_.count(name) > 0; }

  /// "unknown router 'x' (known: a, b; did you mean 'y'?)".
  std::string UnknownMessage(const std::string& name) const {
    std::string message =
        "unknown " + family_ + " '" + name + "' (known: " + StrJoin(Names(), ", ") + ")";
    const std::string hint = ClosestMatch(name, Names());
    if (!hint.empty()) message += "; did you mean '" + hint + "'?";
    return message;
  }

  /// Known names in sorted order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }

  /// The one-line summary given at registration; empty for an unknown name.
  std::string Summary(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? "" : it->second.summary;
  }

  const std::string& family() const { return family_; }

 private:
  struct Entry {
    std::string summary;
    Factory factory;
  };
  std::string family_;
  std::map<std::string, Entry> entries_;
};

}  // namespace libra
