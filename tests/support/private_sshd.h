// A private OpenSSH server for tests of libra's ssh launcher and of the cluster backend over ssh:
// /usr/sbin/sshd on a free port of 127.0.0.1, with a generated host key (already in a
// known_hosts file, so StrictHostKeyChecking=yes holds) and a generated client key that logs in
// as the current user, root included. Its keys, config and log live in the folder the caller gives.
//
// Sessions get the caller's PATH and HOME (sshd's SetEnv; no AcceptEnv or PermitUserEnvironment is
// needed, and libra's ssh launcher passes a spec's env and cwd in the remote command line). The
// user's login shell still runs the command, so its rc files may prepend to PATH (Debian's bash
// reads ~/.bashrc under sshd): name programs by absolute path where it matters.
//
//   test::ScopedTempDir dir;
//   auto sshd = test::PrivateSshd::Start(dir.File("sshd"));
//   if (!sshd.ok()) GTEST_SKIP() << sshd.status().message();
//   auto launcher = cluster::SshLauncher::Create((*sshd)->Target(), (*sshd)->Options());
#pragma once

#include <memory>
#include <string>

#include "cluster/event_loop.h"
#include "cluster/launcher.h"
#include "cluster/process.h"
#include "common/status.h"

namespace libra::test {

/// Where and how to log in to a PrivateSshd.
struct SshdEndpoint {
  std::string host = "127.0.0.1";
  int port = 0;
  /// The current user's name.
  std::string user;
  /// The client's private key (its public half is in sshd's authorized keys).
  std::string identity_file;
  /// Holds "[127.0.0.1]:<port> <host key>", nothing else.
  std::string known_hosts_file;
};

class PrivateSshd {
 public:
  /// Starts sshd with its files in `dir` (created if missing; absolute or relative to the current
  /// folder; no blank, '%' or '"' in it, as sshd's options would split or expand them) and
  /// returns once a first login with the client key has run a command. Errors, for the caller
  /// to GTEST_SKIP() with the message: kNotFound when sshd, ssh or ssh-keygen is not installed;
  /// kInvalidArgument for an unusable `dir`; kBackend when sshd cannot start or refuses the login
  /// (the message holds sshd's log).
  static Result<std::unique_ptr<PrivateSshd>> Start(const std::string& dir);
  /// Stops sshd and every session it started, with whatever those sessions left running (found
  /// by process ancestry and by a variable sshd sets in each session). Leaves `dir` in place.
  ~PrivateSshd();
  PrivateSshd(const PrivateSshd&) = delete;
  PrivateSshd& operator=(const PrivateSshd&) = delete;

  const SshdEndpoint& endpoint() const { return endpoint_; }
  /// The endpoint as a launcher target.
  cluster::SshTarget Target() const;
  /// Launcher options for this server: its known_hosts file, StrictHostKeyChecking=yes, no ssh
  /// config file (-F /dev/null) and a remote grace of 1 s.
  cluster::SshOptions Options() const;

  /// Logins sshd has accepted so far (the check in Start included).
  int AcceptedLogins() const;
  /// sshd's log so far (its stderr), for failure messages.
  std::string Log() const;

 private:
  PrivateSshd(std::string dir, SshdEndpoint endpoint);
  // One try on endpoint_.port: "" once sshd accepts connections, else why not.
  std::string Launch();
  // Runs `true` over ssh with the client key: "" when it succeeds, else why not.
  std::string CheckLogin() const;
  void StopAll();

  std::string dir_;
  SshdEndpoint endpoint_;
  std::unique_ptr<cluster::EventLoop> loop_;
  std::unique_ptr<cluster::ProcessSet> processes_;
  cluster::ProcessId sshd_id_{};
  pid_t sshd_pid_ = 0;
};

}  // namespace libra::test
