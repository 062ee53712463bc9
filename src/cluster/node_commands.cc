#include "cluster/node_commands.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/strings.h"

namespace libra::cluster {
namespace {

// How often FirstLine looks at the output file.
constexpr std::chrono::milliseconds kPoll{20};
// Between asking a command that ran out of time to stop and killing it; over ssh it must exceed
// the remote grace (SshOptions::remote_grace, 5 s) so that the remote end is stopped too.
constexpr std::chrono::milliseconds kStopGrace{7000};

// Output a node command may leave; past it, only the first kMaxOutputBytes are read.
constexpr size_t kMaxOutputBytes = size_t{64} << 20;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text;
  char buffer[1 << 16];
  while (in && text.size() < kMaxOutputBytes) {
    in.read(buffer,
            static_cast<std::streamsize>(std::min(sizeof(buffer), kMaxOutputBytes - text.size())));
    text.append(buffer, static_cast<size_t>(in.gcount()));
  }
  return text;
}

}  // namespace

std::string OutputTail(const std::string& text) {
  constexpr size_t kMax = 600;
  std::string tail = text.size() > kMax ? "..." + text.substr(text.size() - kMax) : text;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  return tail.empty() ? "nothing on stderr" : tail;
}

Result<std::unique_ptr<NodeCommands>> NodeCommands::Create(const LauncherOptions& launcher,
                                                           std::string log_dir) {
  LIBRA_ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  auto commands =
      std::unique_ptr<NodeCommands>(new NodeCommands(std::move(loop), std::move(log_dir)));
  LauncherOptions hosts = launcher;
  LIBRA_ASSIGN_OR_RETURN(commands->launchers_, MakeLaunchers(hosts));
  commands->processes_ = std::make_unique<ProcessSet>(commands->loop_.get());
  return commands;
}

NodeCommands::~NodeCommands() {
  // Processes first (they run through the launchers' connections), then the launchers.
  if (processes_) processes_->StopAll(kStopGrace);
  processes_.reset();
  launchers_.clear();
}

std::string NodeCommands::Describe(size_t node) const {
  return StrFormat("node %zu (%s)", node, launchers_.at(node)->Describe().c_str());
}

std::string NodeCommands::LogPath(const Command& c, const char* stream) const {
  return log_dir_ + "/" + c.name + "." + stream;
}

Result<size_t> NodeCommands::Start(size_t node, const std::string& name,
                                   const std::vector<std::string>& argv) {
  if (node >= launchers_.size()) {
    return Status::InvalidArgument(
        StrFormat("node %zu does not exist (there are %zu)", node, launchers_.size()));
  }
  ProcessSpec spec;
  spec.name = name;
  spec.argv = argv;
  spec.log_dir = log_dir_;
  spec.env["LIBRA_NODE"] = std::to_string(node);
  LIBRA_ASSIGN_OR_RETURN(ProcessSpec wrapped, launchers_[node]->Wrap(spec));
  wrapped.die_with_libra = true;
  const size_t index = commands_.size();
  LIBRA_ASSIGN_OR_RETURN(const ProcessId process,
                         processes_->Spawn(wrapped, [this, index](const ExitStatus& status) {
                           commands_[index].exited = true;
                           commands_[index].exit = status;
                         }));
  commands_.push_back(Command{node, name, process});
  return index;
}

Result<std::string> NodeCommands::FirstLine(size_t index, std::chrono::milliseconds timeout) {
  const Command& c = commands_.at(index);
  const auto deadline = EventLoop::Clock::now() + timeout;
  const std::string out_path = LogPath(c, "out");
  for (;;) {
    const std::string out = ReadAll(out_path);
    if (const size_t end = out.find('\n'); end != std::string::npos) return out.substr(0, end);
    if (c.exited) {
      return Status::Backend(c.name, StrFormat("%s exited (%s) before it printed a line: %s",
                                               Describe(c.node).c_str(), c.exit.ToString().c_str(),
                                               OutputTail(ReadAll(LogPath(c, "err"))).c_str()));
    }
    const auto now = EventLoop::Clock::now();
    if (now >= deadline) {
      return Status(
          StatusCode::kTimeout,
          StrFormat("%s: %s printed nothing within %g s", c.name.c_str(), Describe(c.node).c_str(),
                    std::chrono::duration<double>(timeout).count()));
    }
    const Status ran = loop_->RunUntil([&] { return c.exited; }, std::min(deadline, now + kPoll));
    if (!ran.ok() && ran.code() != StatusCode::kTimeout) return ran;
  }
}

bool NodeCommands::AllExited() const {
  for (const Command& c : commands_) {
    if (!c.exited) return false;
  }
  return true;
}

bool NodeCommands::AnyFailed() const {
  for (const Command& c : commands_) {
    if (c.exited && !c.exit.success()) return true;
  }
  return false;
}

Result<std::vector<NodeOutput>> NodeCommands::Wait(std::chrono::milliseconds timeout,
                                                   bool stop_on_failure) {
  Status ran = loop_->RunUntil([&] { return AllExited() || (stop_on_failure && AnyFailed()); },
                               EventLoop::Clock::now() + timeout);
  if (ran.code() == StatusCode::kTimeout || (ran.ok() && !AllExited())) {
    for (const Command& c : commands_) {
      if (!c.exited) processes_->Stop(c.process, kStopGrace);
    }
    ran = loop_->RunUntil([this] { return AllExited(); });
  }
  LIBRA_RETURN_IF_ERROR(ran);
  std::vector<NodeOutput> outputs;
  for (const Command& c : commands_) {
    outputs.push_back(
        NodeOutput{c.node, c.name, c.exit, ReadAll(LogPath(c, "out")), ReadAll(LogPath(c, "err"))});
  }
  return outputs;
}

}  // namespace libra::cluster
