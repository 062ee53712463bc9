#include "support/private_sshd.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/cluster_test_util.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

using std::chrono::milliseconds;

constexpr const char* kSshd = "/usr/sbin/sshd";
// sshd running as root insists on its compiled-in privilege-separation folder.
constexpr const char* kPrivsepDir = "/run/sshd";
// Set in every session (sshd's SetEnv) to its server's folder, so that the destructor finds what
// a session left running even once it has left sshd's process tree.
constexpr const char* kSessionMarker = "LIBRA_PRIVATE_SSHD";
// Ports tried when sshd cannot bind the free port it was given (another process took it).
constexpr int kLaunchTries = 3;

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && access((std::filesystem::path(dir) / program).c_str(), X_OK) == 0) {
      return true;
    }
  }
  return false;
}

bool Accepts(int port) {
  const cluster::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

// "" once `ssh-keygen` has written a key pair at `path`, else why not.
std::string Keygen(const std::string& path) {
  cluster::ProcessSpec keygen;
  keygen.name = "keygen";
  keygen.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path};
  const auto status = cluster::RunToCompletion(keygen, test::Deadline(milliseconds(60000)));
  if (!status.ok()) return status.status().message();
  return status->success() ? "" : "ssh-keygen: " + status->ToString();
}

// One sshd_config word, double-quoted: sshd splits option values on blanks and unquotes them.
std::string ConfigQuote(const std::string& word) {
  std::string quoted = "\"";
  for (const char c : word) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// Live processes (not zombies) by pid, with their parent.
std::map<pid_t, pid_t> LiveProcesses() {
  std::map<pid_t, pid_t> parents;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return parents;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    // "pid (comm) state ppid ...": comm may hold anything, so parse after its last ')'.
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(text.substr(paren + 1));
    char state = 0;
    pid_t ppid = 0;
    if (!(rest >> state >> ppid) || state == 'Z' || state == 'X') continue;
    parents[static_cast<pid_t>(pid)] = ppid;
  }
  closedir(proc);
  return parents;
}

bool HasVariable(pid_t pid, const std::string& entry) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  for (std::string variable; std::getline(in, variable, '\0');) {
    if (variable == entry) return true;
  }
  return false;
}

// The live descendants of `root`, and every live process whose environment holds `marker`.
std::set<pid_t> Strays(pid_t root, const std::string& marker) {
  const std::map<pid_t, pid_t> parents = LiveProcesses();
  std::multimap<pid_t, pid_t> children;
  for (const auto& [pid, ppid] : parents) children.emplace(ppid, pid);
  std::set<pid_t> found;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    const auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      if (found.insert(it->second).second) todo.push_back(it->second);
    }
  }
  for (const auto& [pid, ppid] : parents) {
    if (pid != getpid() && HasVariable(pid, marker)) found.insert(pid);
  }
  found.erase(root);
  found.erase(getpid());
  return found;
}

}  // namespace

PrivateSshd::PrivateSshd(std::string dir, SshdEndpoint endpoint)
    : dir_(std::move(dir)), endpoint_(std::move(endpoint)) {}

Result<std::unique_ptr<PrivateSshd>> PrivateSshd::Start(const std::string& dir) {
  if (!std::filesystem::exists(kSshd))
    return Status::NotFound(std::string(kSshd) + " is not installed");
  for (const char* program : {"ssh", "ssh-keygen"}) {
    if (!OnPath(program)) return Status::NotFound(std::string(program) + " is not installed");
  }
  std::error_code error;
  const std::string absolute = std::filesystem::absolute(dir, error).lexically_normal().string();
  if (error || absolute.find_first_of(" \t\n\r\"%") != std::string::npos) {
    return Status::InvalidArgument("private sshd: unusable folder '" + dir + "'");
  }
  std::filesystem::create_directories(absolute, error);
  if (error)
    return Status::Backend("private sshd", "cannot create " + absolute + ": " + error.message());
  if (geteuid() == 0) {
    // Left in place afterwards, as the system's sshd service does: another test process may be
    // running its own sshd at the same time.
    std::filesystem::create_directory(kPrivsepDir, error);
    if (error) {
      return Status::Backend("private sshd",
                             std::string("cannot create ") + kPrivsepDir + ": " + error.message());
    }
  }

  SshdEndpoint endpoint;
  const passwd* user = getpwuid(geteuid());
  if (user == nullptr) return Status::Backend("private sshd", "the current user has no name");
  endpoint.user = user->pw_name;
  const auto file = [&](const std::string& name) { return absolute + "/" + name; };
  endpoint.identity_file = file("client_key");
  endpoint.known_hosts_file = file("known_hosts");
  for (const std::string& key : {file("host_key"), file("client_key")}) {
    std::filesystem::remove(key, error);
    std::filesystem::remove(key + ".pub", error);
    const std::string why = Keygen(key);
    if (!why.empty()) return Status::Backend("private sshd", why);
  }
  WriteFile(file("authorized_keys"), ReadIfExists(file("client_key.pub")));

  std::unique_ptr<PrivateSshd> sshd(new PrivateSshd(absolute, std::move(endpoint)));
  sshd->loop_ = std::move(cluster::EventLoop::Create()).value();
  sshd->processes_ = std::make_unique<cluster::ProcessSet>(sshd->loop_.get());
  std::string why;
  for (int attempt = 0; attempt < kLaunchTries; ++attempt) {
    why = sshd->Launch();
    if (why.empty()) break;
  }
  if (!why.empty()) return Status::Backend("private sshd", why);
  WriteFile(sshd->endpoint_.known_hosts_file,
            "[127.0.0.1]:" + std::to_string(sshd->endpoint_.port) + " " +
                ReadIfExists(file("host_key.pub")));
  why = sshd->CheckLogin();
  if (!why.empty()) return Status::Backend("private sshd", why);
  return sshd;
}

std::string PrivateSshd::Launch() {
  StopAll();
  endpoint_.port = FreePort();
  if (endpoint_.port == 0) return "no free port on 127.0.0.1";
  const auto file = [&](const std::string& name) { return dir_ + "/" + name; };
  cluster::ProcessSpec spec;
  spec.name = "sshd";
  spec.log_dir = dir_;
  spec.argv = {
      kSshd,           "-D", "-e", "-f", "/dev/null", "-p", std::to_string(endpoint_.port), "-h",
      file("host_key")};
  // sshd keeps only the first SetEnv line, so all variables go in one.
  std::string session_env = ConfigQuote(std::string(kSessionMarker) + "=" + dir_);
  for (const char* name : {"PATH", "HOME"}) {
    if (const char* value = std::getenv(name)) {
      session_env += " " + ConfigQuote(std::string(name) + "=" + value);
    }
  }
  for (const std::string& option :
       {std::string("ListenAddress=127.0.0.1"), "PidFile=" + file("sshd.pid"),
        "AuthorizedKeysFile=" + file("authorized_keys"), std::string("UsePAM=no"),
        std::string("StrictModes=no"), std::string("PasswordAuthentication=no"),
        std::string("KbdInteractiveAuthentication=no"), std::string("PubkeyAuthentication=yes"),
        std::string("PermitRootLogin=prohibit-password"), std::string("MaxSessions=32"),
        "SetEnv=" + session_env}) {
    spec.argv.insert(spec.argv.end(), {"-o", option});
  }
  const auto id = processes_->Spawn(spec, [](const cluster::ExitStatus&) {});
  if (!id.ok()) return id.status().message();
  sshd_id_ = *id;
  sshd_pid_ = processes_->pid(*id).value_or(0);
  const pid_t pid = sshd_pid_;
  const int port = endpoint_.port;
  // The loop never runs, so an sshd that has exited stays a zombie: IsAlive sees it gone.
  Eventually([&] { return Accepts(port) || !IsAlive(pid); }, test::Deadline(milliseconds(60000)));
  if (IsAlive(pid) && Accepts(port)) return "";
  return "sshd did not start on port " + std::to_string(port) + ": " + Log();
}

std::string PrivateSshd::CheckLogin() const {
  cluster::ProcessSpec ssh;
  ssh.name = "login-check";
  ssh.log_dir = dir_;
  ssh.argv = {"ssh",       "-F",
              "/dev/null", "-T",
              "-o",        "BatchMode=yes",
              "-o",        "StrictHostKeyChecking=yes",
              "-o",        "UserKnownHostsFile=" + endpoint_.known_hosts_file,
              "-o",        "IdentitiesOnly=yes",
              "-o",        "ConnectTimeout=10",
              "-i",        endpoint_.identity_file,
              "-p",        std::to_string(endpoint_.port),
              "-l",        endpoint_.user,
              "--",        endpoint_.host,
              "true"};
  const auto status = cluster::RunToCompletion(ssh, test::Deadline(milliseconds(60000)));
  if (!status.ok()) return status.status().message();
  if (status->success()) return "";
  return "ssh " + endpoint_.user + "@" + endpoint_.host + ":" + std::to_string(endpoint_.port) +
         " true: " + status->ToString() + ": " + ReadIfExists(dir_ + "/login-check.err") +
         "; sshd: " + Log();
}

void PrivateSshd::StopAll() {
  if (sshd_pid_ == 0) return;
  // A stopped sshd accepts no connection and keeps its children's parent link, so its tree can
  // be walked; sessions that left the tree carry the marker.
  kill(sshd_pid_, SIGSTOP);
  const std::string marker = std::string(kSessionMarker) + "=" + dir_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int quiet = 0; quiet < 3 && std::chrono::steady_clock::now() < deadline;) {
    const std::set<pid_t> strays = Strays(sshd_pid_, marker);
    for (const pid_t pid : strays) kill(pid, SIGKILL);
    quiet = strays.empty() ? quiet + 1 : 0;
    std::this_thread::sleep_for(milliseconds(5));
  }
  processes_->Kill(sshd_id_);
  sshd_pid_ = 0;
}

PrivateSshd::~PrivateSshd() {
  StopAll();
  processes_.reset();
  loop_.reset();
}

cluster::SshTarget PrivateSshd::Target() const {
  return cluster::SshTarget{.host = endpoint_.host,
                            .user = endpoint_.user,
                            .port = endpoint_.port,
                            .identity_file = endpoint_.identity_file};
}

cluster::SshOptions PrivateSshd::Options() const {
  cluster::SshOptions options;
  options.strict_host_key_checking = cluster::HostKeyChecking::kYes;
  options.known_hosts_file = endpoint_.known_hosts_file;
  options.config_file = "/dev/null";
  options.remote_grace = std::chrono::seconds(1);
  return options;
}

int PrivateSshd::AcceptedLogins() const {
  const std::string log = Log();
  int count = 0;
  for (size_t at = log.find("Accepted publickey"); at != std::string::npos;
       at = log.find("Accepted publickey", at + 1)) {
    ++count;
  }
  return count;
}

std::string PrivateSshd::Log() const { return ReadIfExists(dir_ + "/sshd.err"); }

}  // namespace libra::test
