#include "support/test_util.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

namespace libra::test {

double TimeScale() {
  const char* text = std::getenv("LIBRA_TEST_TIME_SCALE");
  if (text == nullptr) return 1.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  return end != text && *end == '\0' && value >= 1 && value <= 1000 ? value : 1.0;
}

ScopedTempDir::ScopedTempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "libra_test_XXXXXX").string();
  char* made = mkdtemp(pattern.data());
  if (made == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return;
  }
  path_ = made;
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

void WriteFile(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string SourcePath(const std::string& relative) {
  return std::string(LIBRA_SOURCE_DIR) + "/" + relative;
}

void ExpectGolden(const std::string& name, const std::string& description,
                  const std::string& actual) {
  const std::string path = SourcePath("tests/golden/" + name);
  const char* update = std::getenv("LIBRA_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    WriteFile(path, "# name: " + name + "\n# description: " + description + "\n----\n" + actual);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden file " << path
                         << " (run the tests with LIBRA_UPDATE_GOLDEN=1 to create it)";
  std::ostringstream text;
  text << in.rdbuf();
  const std::string whole = text.str();
  const size_t separator = whole.find("\n----\n");
  ASSERT_NE(separator, std::string::npos) << path << " has no '----' separator line";
  const std::string expected = whole.substr(separator + 6);
  EXPECT_EQ(expected, actual) << "output differs from " << path
                              << " (if the change is intended, rerun with "
                                 "LIBRA_UPDATE_GOLDEN=1 and review the diff)";
}

namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<size_t>(n));
  return out;
}

}  // namespace

CommandResult RunProgram(const std::vector<std::string>& argv, const std::string& cwd,
                         const std::string& stdin_path) {
  CommandResult result;
  char out_path[] = "/tmp/libra_out_XXXXXX";
  char err_path[] = "/tmp/libra_err_XXXXXX";
  const int out_fd = mkstemp(out_path);
  const int err_fd = mkstemp(err_path);
  const pid_t pid = fork();
  if (pid == 0) {
    const int in_fd = open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    const std::string dir = cwd.empty() ? std::string(LIBRA_SOURCE_DIR) : cwd;
    if (chdir(dir.c_str()) != 0) _exit(127);
    std::vector<std::string> copy = argv;
    std::vector<char*> raw;
    for (std::string& a : copy) raw.push_back(a.data());
    raw.push_back(nullptr);
    execvp(raw[0], raw.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  lseek(out_fd, 0, SEEK_SET);
  lseek(err_fd, 0, SEEK_SET);
  result.out = ReadAll(out_fd);
  result.err = ReadAll(err_fd);
  close(out_fd);
  close(err_fd);
  unlink(out_path);
  unlink(err_path);
  return result;
}

CommandResult RunLibra(const std::vector<std::string>& args, const std::string& cwd) {
  std::vector<std::string> argv = {LIBRA_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, cwd);
}

namespace {

bool Bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return ok;
}

// Claims `port` for this process until it exits: an exclusive lock on a file named after it, shared
// by every test process of this user, so that two tests running side by side never hand out the
// same port, even one that neither has bound yet (an engine started later in the run).
bool Claim(int port) {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("libra-test-ports-" + std::to_string(getuid()));
    std::error_code ignored;
    std::filesystem::create_directories(d, ignored);
    return d;
  }();
  const std::string path = (dir / std::to_string(port)).string();
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return false;
  }
  return true;  // the descriptor stays open: the lock goes with the process
}

// The lowest port of the kernel's ephemeral range (32768 when it cannot be read).
int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low && low > 2048 ? low : 32768;
}

}  // namespace

int FreePorts(int count) {
  static std::mutex mu;
  static int next = 0;  // where the next search starts
  const std::lock_guard<std::mutex> lock(mu);
  constexpr int kLowest = 10000;
  const int span = EphemeralLow() - kLowest;
  if (count < 1 || span < count) return 0;
  if (next == 0) next = static_cast<int>(getpid() * 97L % span);
  for (int tried = 0; tried < span; tried += count) {
    const int base = kLowest + (next + tried) % (span - count + 1);
    bool free = true;
    for (int p = base; p < base + count && free; ++p) free = Bindable(p);
    // Claims are never given back: a port claimed by a block that then fails stays out of use.
    for (int p = base; p < base + count && free; ++p) free = Claim(p);
    if (free) {
      next = base + count - kLowest;
      return base;
    }
  }
  return 0;
}

}  // namespace libra::test
