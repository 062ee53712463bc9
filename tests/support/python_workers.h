// Starts libra's CPU workers (workers/rollout_server.py, workers/trainer.py) as child processes
// for integration tests: each on a free port of 127.0.0.1, logging to a file, ready (its /health
// answers 200) before Start returns, and stopped (SIGTERM, then SIGKILL) when it goes away.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace libra::test {

/// The interpreter the workers need: Debian's, which has python3-torch.
inline constexpr const char* kWorkerPython = "/usr/bin/python3";

/// Why the workers cannot run here (no /usr/bin/python3, or it cannot import torch), or nullopt
/// when they can. Checked once per test binary.
std::optional<std::string> WorkersUnavailable();

/// Runs `kWorkerPython -B <args>` in workers/ to completion, output appended to `log_path`;
/// returns its exit code (-1 when it could not run).
int RunWorkerScript(const std::vector<std::string>& args, const std::string& log_path);

class WorkerProcess {
 public:
  /// Starts `kWorkerPython -B workers/<script> --port <free port> <args>` and waits up to
  /// `timeout_s` for GET /health to answer 200. kBackend with the log's tail when the process
  /// exits or stays unhealthy.
  static Result<std::unique_ptr<WorkerProcess>> Start(const std::string& script,
                                                      const std::vector<std::string>& args,
                                                      const std::string& log_path,
                                                      double timeout_s = 60);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  /// "http://127.0.0.1:<port>".
  const std::string& url() const { return url_; }

 private:
  WorkerProcess(pid_t pid, std::string url) : pid_(pid), url_(std::move(url)) {}

  pid_t pid_;
  std::string url_;
};

}  // namespace libra::test
