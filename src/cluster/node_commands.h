// Short commands on the nodes of a recipe's [launcher], started through the same launchers as a
// cluster run (local, or ssh with every value quoted), watched on one event loop, their output
// collected: how `libra probe --hosts` measures every host, and how it hands the NCCL unique id
// that one node prints to the processes it then starts on the others.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_options.h"
#include "cluster/event_loop.h"
#include "cluster/launcher.h"
#include "cluster/process.h"
#include "common/status.h"

namespace libra::cluster {

/// What one command printed and how it ended.
struct NodeOutput {
  size_t node = 0;
  /// The process's name, e.g. "probe-0".
  std::string name;
  ExitStatus exit{};
  /// Its whole stdout and stderr.
  std::string out;
  std::string err;
};

/// The end of a command's output for an error message: its last few hundred characters, without
/// trailing blanks, or "nothing on stderr".
std::string OutputTail(const std::string& text);

class NodeCommands {
 public:
  /// One launcher per node of `launcher`; each command logs to log_dir/<name>.out and .err.
  /// kBackend when the event loop or an ssh launcher cannot be made.
  static Result<std::unique_ptr<NodeCommands>> Create(const LauncherOptions& launcher,
                                                      std::string log_dir);
  /// Stops whatever still runs (and, over ssh, closes the shared connections).
  ~NodeCommands();
  NodeCommands(const NodeCommands&) = delete;
  NodeCommands& operator=(const NodeCommands&) = delete;

  size_t nodes() const { return launchers_.size(); }
  /// "node 1 (ssh://user@host:22)".
  std::string Describe(size_t node) const;

  /// Starts `argv` on `node` as process `name` (letters, digits, '-', '_', '.'), with LIBRA_NODE
  /// set to the node's index in its environment. Returns the
  /// command's index for FirstLine. kInvalidArgument for a node out of range or a bad name;
  /// kBackend when it cannot start.
  Result<size_t> Start(size_t node, const std::string& name, const std::vector<std::string>& argv);
  /// Runs the loop until command `index` has printed a whole first line on stdout, and returns it
  /// (without the newline) while the command goes on. kBackend naming the node when it exits
  /// first (with the end of its stderr); kTimeout after `timeout`.
  Result<std::string> FirstLine(size_t index, std::chrono::milliseconds timeout);
  /// Runs the loop until every command started has exited, for at most `timeout` (with
  /// `stop_on_failure`, also until one fails: commands that wait for each other would otherwise
  /// wait for the dead one); then stops the rest (their exit says so). Returns each command's
  /// output, in start order.
  Result<std::vector<NodeOutput>> Wait(std::chrono::milliseconds timeout,
                                       bool stop_on_failure = false);

 private:
  struct Command {
    size_t node = 0;
    std::string name;
    ProcessId process;
    bool exited = false;
    ExitStatus exit{};
  };

  NodeCommands(std::unique_ptr<EventLoop> loop, std::string log_dir)
      : loop_(std::move(loop)), log_dir_(std::move(log_dir)) {}
  std::string LogPath(const Command& c, const char* stream) const;
  bool AllExited() const;
  bool AnyFailed() const;

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<ProcessSet> processes_;
  std::vector<std::unique_ptr<Launcher>> launchers_;
  std::string log_dir_;
  std::vector<Command> commands_;
};

}  // namespace libra::cluster
