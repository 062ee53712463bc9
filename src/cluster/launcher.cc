#include "cluster/launcher.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "cluster/command.h"
#include "common/strings.h"

namespace libra::cluster {
namespace {

// Runs on the remote node as `sh -c WRAPPER libra-remote GRACE_S DIR NAME=VALUE... -- ARGV...`
// (launcher.h says why): exports the variables, enters DIR (when not empty), starts ARGV in its
// own session and process group, and a watcher, in a process group of its own, that waits for
// end-of-file on the session's stdin (fd 3 here; a background job's stdin would be /dev/null)
// and then stops the command's group: SIGTERM, SIGKILL GRACE_S seconds later. The positional
// parameters are data, never parsed as shell.
constexpr const char* kRemoteWrapper = R"(grace=$1 dir=$2
shift 2
while [ "$1" != -- ]; do export "$1"; shift; done
shift
if [ -n "$dir" ]; then cd "$dir" || exit 126; fi
exec 3<&0 </dev/null
setsid "$@" 3<&- &
pid=$!
setsid sh -c 'cat >/dev/null; kill -TERM -"$1"; sleep "$2"; kill -KILL -"$1"' \
  watch "$pid" "$grace" <&3 >/dev/null 2>&1 &
watcher=$!
exec 3<&-
trap 'kill -TERM -"$pid" 2>/dev/null' HUP INT TERM
wait "$pid"
status=$?
kill -KILL -"$watcher" 2>/dev/null
kill -KILL -"$pid" 2>/dev/null
exit "$status")";

// The socket's name inside the control folder.
constexpr const char* kControlSocket = "master";
// The longest temporary folder for which <tmp>/libra-ssh-XXXXXX/master fits a Unix socket's
// path (107 characters); /tmp is used instead of a longer $TMPDIR.
constexpr size_t kMaxTmpDir = 80;

bool HasBlank(const std::string& s) { return s.find_first_of(" \t\n\r\"") != std::string::npos; }

Status SshError(const std::string& what) {
  return Status::InvalidArgument("ssh launcher: " + what);
}

}  // namespace

Result<ProcessSpec> LocalLauncher::Wrap(const ProcessSpec& spec) const {
  LIBRA_RETURN_IF_ERROR(ValidateProcessSpec(spec));
  return spec;
}

Result<std::unique_ptr<SshLauncher>> SshLauncher::Create(SshTarget target, SshOptions options) {
  if (target.host.empty()) return SshError("empty host");
  if (target.host[0] == '-' || HasBlank(target.host)) {
    return SshError(StrFormat("bad host '%s'", target.host.c_str()));
  }
  if (!target.user.empty() && (target.user[0] == '-' || HasBlank(target.user))) {
    return SshError(StrFormat("bad user '%s' for %s", target.user.c_str(), target.host.c_str()));
  }
  if (target.port < 0 || target.port > 65535) {
    return SshError(StrFormat("port %d of %s is out of range", target.port, target.host.c_str()));
  }
  if (HasBlank(options.known_hosts_file) || HasBlank(options.config_file)) {
    return SshError("the known_hosts and config file paths cannot hold blanks or quotes");
  }

  std::error_code error;
  std::string tmp = std::filesystem::temp_directory_path(error).string();
  if (error || tmp.size() > kMaxTmpDir) tmp = "/tmp";
  // Named after this process, so that a later libra removes it if this one dies without
  // cleaning up.
  RemoveFoldersOfDeadLibras(tmp, "libra-ssh-");
  std::string pattern = tmp + StrFormat("/libra-ssh-%d-XXXXXX", static_cast<int>(getpid()));
  if (mkdtemp(pattern.data()) == nullptr) {
    return Status::Backend("ssh launcher", StrFormat("cannot create a folder for the control "
                                                     "socket in %s: %s",
                                                     tmp.c_str(), std::strerror(errno)));
  }
  return std::unique_ptr<SshLauncher>(
      new SshLauncher(std::move(target), std::move(options), std::move(pattern)));
}

SshLauncher::SshLauncher(SshTarget target, SshOptions options, std::string control_dir)
    : target_(std::move(target)),
      options_(std::move(options)),
      control_dir_(std::move(control_dir)) {}

SshLauncher::~SshLauncher() {
  std::error_code error;
  if (std::filesystem::exists(control_dir_ + "/" + kControlSocket, error)) {
    ProcessSpec exit_spec;
    exit_spec.name = "ssh-exit";
    exit_spec.argv = SshArgv();
    // `ssh ... -O exit -- host`: asks the master to close the connection and exit.
    exit_spec.argv.insert(exit_spec.argv.end() - 2, {"-O", "exit"});
    // Best effort: if it fails the master still exits after ControlPersist.
    RunToCompletion(exit_spec, std::chrono::seconds(5));
  }
  std::filesystem::remove_all(control_dir_, error);
}

std::string SshLauncher::Describe() const {
  std::string where = "ssh://";
  if (!target_.user.empty()) where += target_.user + "@";
  where += target_.host;
  if (target_.port != 0) where += ":" + std::to_string(target_.port);
  return where;
}

std::vector<std::string> SshLauncher::SshArgv() const {
  auto seconds = [](std::chrono::seconds s) { return std::to_string(s.count()); };
  std::vector<std::string> config = {
      "BatchMode=yes",
      "ControlMaster=auto",
      "ControlPath=" + control_dir_ + "/" + kControlSocket,
      "ControlPersist=" + seconds(options_.control_persist),
      "ConnectTimeout=" + seconds(options_.connect_timeout),
      "ServerAliveInterval=" + seconds(options_.server_alive_interval),
      "ServerAliveCountMax=3",
      "StrictHostKeyChecking=" + NameOf(options_.strict_host_key_checking),
  };
  if (!options_.known_hosts_file.empty()) {
    config.push_back("UserKnownHostsFile=" + options_.known_hosts_file);
  }
  std::vector<std::string> argv = {options_.ssh_program, "-T"};
  for (const std::string& option : config) argv.insert(argv.end(), {"-o", option});
  if (!options_.config_file.empty()) argv.insert(argv.end(), {"-F", options_.config_file});
  if (target_.port != 0) argv.insert(argv.end(), {"-p", std::to_string(target_.port)});
  if (!target_.user.empty()) argv.insert(argv.end(), {"-l", target_.user});
  if (!target_.identity_file.empty()) {
    argv.insert(argv.end(), {"-i", target_.identity_file, "-o", "IdentitiesOnly=yes"});
  }
  argv.insert(argv.end(), {"--", target_.host});
  return argv;
}

Result<ProcessSpec> SshLauncher::Wrap(const ProcessSpec& spec) const {
  LIBRA_RETURN_IF_ERROR(ValidateProcessSpec(spec));
  std::vector<std::string> remote = {
      "sh",    "-c", kRemoteWrapper, "libra-remote", std::to_string(options_.remote_grace.count()),
      spec.cwd};
  for (const auto& [name, value] : spec.env) remote.push_back(name + "=" + value);
  remote.push_back("--");
  remote.insert(remote.end(), spec.argv.begin(), spec.argv.end());

  ProcessSpec local;
  local.name = spec.name;
  local.log_dir = spec.log_dir;
  local.stop_by = StopBy::kCloseStdin;
  local.argv = SshArgv();
  // ssh passes the line to the remote login shell, which must see each word literally.
  local.argv.push_back("exec " + ShellJoin(remote));
  if (const char* agent = std::getenv("SSH_AUTH_SOCK")) local.env["SSH_AUTH_SOCK"] = agent;
  return local;
}

}  // namespace libra::cluster
