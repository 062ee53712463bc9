#include "support/python_workers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/http_client_for_tests.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

// Starts `kWorkerPython -B args...` in workers/ with stdout and stderr appended to `log_path`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> argv = {kWorkerPython, "-B"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string workers = SourcePath("workers");
  std::vector<char*> raw;
  for (std::string& arg : argv) raw.push_back(arg.data());
  raw.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // The child: only async-signal-safe calls until exec.
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  const int null = open("/dev/null", O_RDONLY);
  if (log < 0 || null < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0 ||
      chdir(workers.c_str()) != 0) {
    _exit(127);
  }
  execv(raw[0], raw.data());
  _exit(127);
}

std::string Tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

void Stop(pid_t pid) {
  kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + Deadline(std::chrono::seconds(5));
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

}  // namespace

std::optional<std::string> WorkersUnavailable() {
  static const std::optional<std::string> reason = []() -> std::optional<std::string> {
    if (access(kWorkerPython, X_OK) != 0) return std::string(kWorkerPython) + " is missing";
    const std::string log = "/dev/null";
    const int code = RunWorkerScript({"-c", "import torch, torch.distributed"}, log);
    if (code != 0) return std::string(kWorkerPython) + " cannot import torch";
    return std::nullopt;
  }();
  return reason;
}

int RunWorkerScript(const std::vector<std::string>& args, const std::string& log_path) {
  const pid_t pid = Spawn(args, log_path);
  if (pid < 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Result<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(const std::string& script,
                                                            const std::vector<std::string>& args,
                                                            const std::string& log_path,
                                                            double timeout_s) {
  const int port = FreePort();
  std::vector<std::string> argv = {script, "--port", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = Spawn(argv, log_path);
  if (pid < 0) return Status::Backend(script, "fork failed");
  std::unique_ptr<WorkerProcess> worker(
      new WorkerProcess(pid, "http://127.0.0.1:" + std::to_string(port)));
  cluster::HttpRequest health;
  health.method = "GET";
  health.url = worker->url() + "/health";
  health.timeout_s = 2;
  const auto deadline =
      std::chrono::steady_clock::now() + Deadline(std::chrono::duration<double>(timeout_s));
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      worker->pid_ = -1;
      return Status::Backend(script, "exited while starting; its log:\n" + Tail(log_path));
    }
    Result<cluster::HttpResponse> reply = SendBlocking(health);
    if (reply.ok() && reply->status == 200) return worker;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Backend(script, "not healthy in time; its log:\n" + Tail(log_path));
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) Stop(pid_);
}

}  // namespace libra::test
