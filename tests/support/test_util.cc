#include "support/test_util.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace libra::test {

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

CommandResult RunLibra(const std::vector<std::string>& args, const std::string& cwd) {
  CommandResult result;
  char out_path[] = "/tmp/libra_out_XXXXXX";
  char err_path[] = "/tmp/libra_err_XXXXXX";
  const int out_fd = mkstemp(out_path);
  const int err_fd = mkstemp(err_path);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    const std::string dir = cwd.empty() ? std::string(LIBRA_SOURCE_DIR) : cwd;
    if (chdir(dir.c_str()) != 0) _exit(127);
    std::vector<char*> argv;
    std::string binary = LIBRA_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
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

}  // namespace libra::test
