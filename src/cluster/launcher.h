// Launchers: where a process runs. A launcher turns "run this on my node" into the local process
// that does it, which a ProcessSet then starts, watches and stops like any other child.
//
// The local launcher runs the command itself. The ssh launcher runs the OpenSSH client in batch
// mode (no prompt can hang the run), over one shared connection per host (ControlMaster), with
// the command passed as one line of single-quoted words, so no value can inject shell. Its output
// comes back over ssh into the local log files.
//
// No orphans on the remote node: sshd does not signal a command when its session ends (there is
// no terminal), so the command runs under a small sh wrapper that starts it in its own session and
// process group (setsid) and waits for end-of-file on its stdin, which libra holds as a pipe
// (StopBy::kCloseStdin). Closing that pipe, killing the ssh client or libra dying close the
// remote stdin at once (a lost connection does once sshd notices it, through its ClientAlive or
// TCP keepalive settings), and the wrapper then sends SIGTERM to the command's process group and
// SIGKILL after SshOptions::remote_grace. When the command exits by itself, the wrapper kills
// what it left in its group and exits with its status (128 + n when signal n killed it).
//
// Stop an ssh process with a grace longer than SshOptions::remote_grace, so that the remote
// SIGTERM-then-SIGKILL runs to its end and the remote exit status comes back over ssh. The remote
// node needs a POSIX login shell and sh, setsid, cat, sleep and kill (any Linux).
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>

#include "cluster/process.h"
#include "common/enum_names.h"
#include "common/status.h"

namespace libra::cluster {

/// ssh's own exit code when it fails (host unreachable, authentication or host key refused),
/// rather than the remote command.
inline constexpr int kSshFailureExitCode = 255;

class Launcher {
 public:
  virtual ~Launcher() = default;
  /// Where commands run, for messages: "local" or "ssh://user@host:port".
  virtual std::string Describe() const = 0;
  /// The local process that runs `spec` on this launcher's node; its name and log folder are
  /// `spec`'s. kInvalidArgument for a spec no launcher can run (empty argv, bad variable name).
  virtual Result<ProcessSpec> Wrap(const ProcessSpec& spec) const = 0;
};

/// Runs commands as children of libra, on this node.
class LocalLauncher final : public Launcher {
 public:
  std::string Describe() const override { return "local"; }
  /// `spec` unchanged.
  Result<ProcessSpec> Wrap(const ProcessSpec& spec) const override;
};

/// Which node, and as whom. Fields left empty fall back to ~/.ssh/config, then ssh's defaults.
struct SshTarget {
  /// Host name, address, or an alias from the ssh config.
  std::string host;
  /// Login user. Default: the config's, else the local user.
  std::string user;
  /// Port. Default (0): the config's, else 22.
  int port = 0;
  /// Private key file, used alone (IdentitiesOnly). Default: the agent and ssh's defaults.
  std::string identity_file;
  bool operator==(const SshTarget&) const = default;
};

/// ssh's StrictHostKeyChecking: "yes" refuses a host whose key is not in known_hosts (batch mode
/// cannot ask), "accept-new" trusts a host's key the first time, "no" trusts any key (unsafe).
enum class HostKeyChecking { kYes, kAcceptNew, kNo };
constexpr std::array<EnumName<HostKeyChecking>, 3> EnumTable(HostKeyChecking) {
  return {{{HostKeyChecking::kYes, "yes"},
           {HostKeyChecking::kAcceptNew, "accept-new"},
           {HostKeyChecking::kNo, "no"}}};
}

struct SshOptions {
  /// Default: yes.
  HostKeyChecking strict_host_key_checking = HostKeyChecking::kYes;
  /// UserKnownHostsFile. Default: ssh's (~/.ssh/known_hosts).
  std::string known_hosts_file;
  /// ssh config file (-F). Default: ssh's (~/.ssh/config).
  std::string config_file;
  /// How long to wait for the connection (ConnectTimeout). Default: 10 s.
  std::chrono::seconds connect_timeout{10};
  /// The connection is declared lost (ssh exits with 255) after this many seconds without an
  /// answer from the server (ServerAliveInterval x 3). Default: 15 s.
  std::chrono::seconds server_alive_interval{15};
  /// How long the shared connection stays open after its last session (ControlPersist); the
  /// launcher closes it on destruction anyway. Default: 60 s.
  std::chrono::seconds control_persist{60};
  /// Between SIGTERM and SIGKILL to the remote process group once its session ends. Default: 5 s.
  std::chrono::seconds remote_grace{5};
  /// The ssh client. Default: "ssh" on PATH.
  std::string ssh_program = "ssh";
};

/// Runs commands on one node over ssh. sshd's MaxSessions (default 10) caps the sessions open at
/// once over the shared connection; raise it on nodes that run more processes than that.
class SshLauncher final : public Launcher {
 public:
  /// kInvalidArgument for an empty host, a host or user that could be read as an option or a port
  /// out of range; kBackend when the private folder of the control socket cannot be made.
  static Result<std::unique_ptr<SshLauncher>> Create(SshTarget target, SshOptions options = {});
  /// Closes the shared connection (ssh -O exit), which ends any session still open over it, and
  /// removes the control socket's folder.
  ~SshLauncher() override;
  SshLauncher(const SshLauncher&) = delete;
  SshLauncher& operator=(const SshLauncher&) = delete;

  std::string Describe() const override;
  /// `ssh <options> -- <host> <wrapped command>`, stopped by closing its stdin. The spec's env
  /// and cwd apply on the remote node; the local ssh client gets the inherited variables and
  /// SSH_AUTH_SOCK.
  Result<ProcessSpec> Wrap(const ProcessSpec& spec) const override;

  /// The private folder holding the control socket.
  const std::string& control_dir() const { return control_dir_; }

 private:
  SshLauncher(SshTarget target, SshOptions options, std::string control_dir);
  // ssh and its options, up to and including the destination.
  std::vector<std::string> SshArgv() const;

  SshTarget target_;
  SshOptions options_;
  std::string control_dir_;
};

}  // namespace libra::cluster
