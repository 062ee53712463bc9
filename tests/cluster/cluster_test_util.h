// Helpers shared by the cluster tests: waiting for a condition with a deadline (never a fixed
// sleep), whether a process is still alive, and reading a log that may not exist yet.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "cluster/process.h"
#include "support/test_util.h"

namespace libra::test {

/// Polls `condition` every few milliseconds until it holds (true) or `timeout`, stretched by
/// LIBRA_TEST_TIME_SCALE (Deadline), passes (false).
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(30000)) {
  const auto deadline = std::chrono::steady_clock::now() + Deadline(timeout);
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// Whether `pid` is a live process (not gone, not a zombie).
inline bool IsAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  const char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

/// The file's text, or "" when it does not exist (yet).
inline std::string ReadIfExists(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// `sh -c script` named `name`, logging into `log_dir`.
inline cluster::ProcessSpec Shell(const std::string& name, const std::string& script,
                                  const std::string& log_dir = "") {
  cluster::ProcessSpec spec;
  spec.name = name;
  spec.argv = {"sh", "-c", script};
  spec.log_dir = log_dir;
  return spec;
}

}  // namespace libra::test
