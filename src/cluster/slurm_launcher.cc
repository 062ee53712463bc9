#include "cluster/slurm_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "cluster/command.h"
#include "common/strings.h"

extern char** environ;

namespace libra::cluster {
namespace {

constexpr std::chrono::seconds kCommandTimeout{60};

std::string Shown(const std::vector<std::string>& argv) { return ShellJoin(argv); }

std::string Trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// Reads `fd` into `out` until end-of-file or `deadline`; false on timeout.
bool ReadAll(int fd, std::string* out, std::chrono::steady_clock::time_point deadline) {
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    out->append(buffer, static_cast<size_t>(n));
  }
}

// Starts `argv` (looked up on PATH) with stdout and stderr on pipes; stdin is /dev/null.
Result<pid_t> Spawn(const std::vector<std::string>& argv, int* out, int* err) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Status::Backend("slurm", std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status::Backend("slurm", std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Status::Backend("slurm", "cannot start '" + argv[0] + "': " + std::strerror(spawned));
  }
  *out = out_pipe[0];
  *err = err_pipe[0];
  return pid;
}

// Runs a short Slurm command to its end; its stdout, or kBackend with its stderr.
Result<std::string> Capture(const std::vector<std::string>& argv) {
  int out = -1, err = -1;
  LIBRA_ASSIGN_OR_RETURN(pid_t pid, Spawn(argv, &out, &err));
  const auto deadline = std::chrono::steady_clock::now() + kCommandTimeout;
  std::string stdout_text, stderr_text;
  const bool done = ReadAll(out, &stdout_text, deadline) && ReadAll(err, &stderr_text, deadline);
  close(out);
  close(err);
  if (!done) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!done) return Status(StatusCode::kTimeout, Shown(argv) + ": timed out");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = Trim(stderr_text);
    if (why.empty()) why = "failed";
    return Status::Backend("slurm", Shown(argv) + ": " + why);
  }
  return stdout_text;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (const std::string& line : StrSplit(text, '\n')) {
    std::string trimmed = Trim(line);
    if (!trimmed.empty()) lines.push_back(std::move(trimmed));
  }
  return lines;
}

// The job id in salloc's "Granted job allocation 123", or "".
std::string GrantedJob(const std::string& text) {
  const std::string marker = "Granted job allocation ";
  const size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  size_t end = at + marker.size();
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  return text.substr(at + marker.size(), end - at - marker.size());
}

}  // namespace

SlurmAllocation::SlurmAllocation(SlurmOptions options)
    : options_(std::move(options)), step_prefix_(StrFormat("libra-%d-", getpid())) {}

Result<std::shared_ptr<SlurmAllocation>> SlurmAllocation::Acquire(const SlurmOptions& options,
                                                                  int nodes) {
  std::shared_ptr<SlurmAllocation> a(new SlurmAllocation(options));
  a->job_id_ = options.job_id;
  if (a->job_id_.empty()) {
    if (const char* job = std::getenv("SLURM_JOB_ID"); job != nullptr) a->job_id_ = job;
  }
  if (a->job_id_.empty()) {
    // salloc holds the allocation while its command runs: `cat` on a pipe that only libra
    // writes to, so that the command ends, and salloc gives the allocation back, when libra
    // closes the pipe or dies however it dies. (salloc answers SIGTERM by revoking the job but
    // then waits for its command: a command that never ends would keep salloc running.)
    std::vector<std::string> argv = {options.salloc, StrFormat("--nodes=%d", nodes),
                                     "--job-name=" + a->step_prefix_ + "run"};
    argv.insert(argv.end(), options.salloc_args.begin(), options.salloc_args.end());
    argv.push_back("cat");
    int err[2], in[2];
    if (pipe2(err, O_CLOEXEC) != 0) return Status::Backend("slurm", std::strerror(errno));
    if (pipe2(in, O_CLOEXEC) != 0) {
      close(err[0]);
      close(err[1]);
      return Status::Backend("slurm", std::strerror(errno));
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return Status::Backend("slurm", std::strerror(errno));
    if (pid == 0) {
      // No parent-death signal: when libra dies, `cat` reads end-of-file and salloc gives the
      // allocation back as its command ended, the path every salloc user takes (a request still
      // pending then is granted and given back at once). With a SIGTERM at libra's death racing
      // that end-of-file, salloc 22.05 now and then stayed behind for good, calling waitpid for
      // a command it no longer had (ECHILD) on a whole core.
      if (getppid() != parent) _exit(127);
      const int null = open("/dev/null", O_RDWR);
      dup2(in[0], 0);
      dup2(null, 1);
      dup2(err[1], 2);
      std::vector<char*> args;
      for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(err[1]);
    close(in[0]);
    a->salloc_pid_ = pid;
    a->salloc_stderr_ = err[0];
    a->salloc_stdin_ = in[1];
    std::string said;
    const auto deadline = std::chrono::steady_clock::now() + options.allocation_timeout;
    char buffer[1024];
    while (GrantedJob(said).empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{err[0], POLLIN, 0};
      const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        return Status(StatusCode::kTimeout, Shown(argv) + ": no allocation after " +
                                                std::to_string(options.allocation_timeout.count()) +
                                                " s");
      }
      const ssize_t n = read(err[0], buffer, sizeof(buffer));
      if (n <= 0) {
        return Status::Backend("slurm",
                               Shown(argv) + ": " + (Trim(said).empty() ? "exited" : Trim(said)));
      }
      said.append(buffer, static_cast<size_t>(n));
    }
    a->job_id_ = GrantedJob(said);
  }
  LIBRA_ASSIGN_OR_RETURN(std::string nodelist, Capture({options.squeue, "--noheader",
                                                        "--jobs=" + a->job_id_, "--format=%N"}));
  nodelist = Trim(nodelist);
  if (nodelist.empty()) {
    return Status::Backend("slurm", "job " + a->job_id_ + " has no nodes (is it running?)");
  }
  LIBRA_ASSIGN_OR_RETURN(std::string hostnames,
                         Capture({options.scontrol, "show", "hostnames", nodelist}));
  a->nodes_ = Lines(hostnames);
  return a;
}

Result<std::vector<std::string>> SlurmAllocation::Steps() const {
  LIBRA_ASSIGN_OR_RETURN(std::string listed, Capture({options_.squeue, "--steps", "--noheader",
                                                      "--jobs=" + job_id_, "--format=%i %j"}));
  std::vector<std::string> ours;
  for (const std::string& line : Lines(listed)) {
    const size_t space = line.find(' ');
    if (space != std::string::npos && StartsWith(line.substr(space + 1), step_prefix_)) {
      ours.push_back(line);
    }
  }
  return ours;
}

void SlurmAllocation::CancelSteps() const {
  Result<std::vector<std::string>> steps = Steps();
  if (!steps.ok()) return;
  for (const std::string& line : *steps) {
    (void)Capture({options_.scancel, "--signal=KILL", line.substr(0, line.find(' '))});
  }
}

SlurmAllocation::~SlurmAllocation() {
  if (!job_id_.empty()) CancelSteps();
  if (salloc_pid_ > 0) {
    // Its command reads end-of-file and ends; salloc then gives the allocation back. One that
    // does not is asked by SIGTERM (the job is revoked), then killed.
    if (salloc_stdin_ >= 0) close(salloc_stdin_);
    const auto start = std::chrono::steady_clock::now();
    // Not granted yet: nothing runs its command, salloc is asked at once.
    bool asked = job_id_.empty() && kill(salloc_pid_, SIGTERM) == 0;
    int status = 0;
    while (waitpid(salloc_pid_, &status, WNOHANG) == 0) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (!asked && waited > std::chrono::seconds(30)) {
        kill(salloc_pid_, SIGTERM);
        asked = true;
      }
      if (waited > std::chrono::seconds(40)) {
        kill(salloc_pid_, SIGKILL);
        waitpid(salloc_pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (salloc_stderr_ >= 0) close(salloc_stderr_);
  }
}

SlurmLauncher::SlurmLauncher(std::shared_ptr<SlurmAllocation> allocation, std::string node)
    : allocation_(std::move(allocation)), node_(std::move(node)) {}

std::string SlurmLauncher::Describe() const {
  return "slurm://" + allocation_->job_id() + "/" + node_;
}

Result<ProcessSpec> SlurmLauncher::Wrap(const ProcessSpec& spec) const {
  LIBRA_RETURN_IF_ERROR(ValidateProcessSpec(spec));
  const SlurmOptions& options = allocation_->options();
  ProcessSpec wrapped;
  wrapped.name = spec.name;
  wrapped.log_dir = spec.log_dir;
  wrapped.limits = spec.limits;
  wrapped.die_with_libra = spec.die_with_libra;
  wrapped.argv = {options.srun,
                  "--jobid=" + allocation_->job_id(),
                  "--nodelist=" + node_,
                  "--nodes=1",
                  "--ntasks=1",
                  "--overlap",
                  "--job-name=" + allocation_->step_prefix() + spec.name,
                  "--kill-on-bad-exit=1",
                  "--quiet"};
  if (!spec.cwd.empty()) wrapped.argv.push_back("--chdir=" + spec.cwd);
  wrapped.argv.insert(wrapped.argv.end(), options.srun_args.begin(), options.srun_args.end());
  // The variables go on the step's command line, after whatever Slurm sets in the step
  // (CUDA_VISIBLE_DEVICES among them).
  wrapped.argv.push_back("env");
  for (const auto& [name, value] : spec.env) wrapped.argv.push_back(name + "=" + value);
  wrapped.argv.insert(wrapped.argv.end(), spec.argv.begin(), spec.argv.end());
  for (const char* name : {"SLURM_CONF"}) {
    if (const char* value = std::getenv(name); value != nullptr) wrapped.env[name] = value;
  }
  wrapped.stdin_file = spec.stdin_file;
  return wrapped;
}

}  // namespace libra::cluster
