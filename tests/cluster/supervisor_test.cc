#include "cluster/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cluster/cluster_test_util.h"
#include "support/test_util.h"

namespace libra::cluster {
namespace {

// Supervise() in a child of the test with `args` after the flag (the tool's argv after "--"),
// its stderr into `log`; the child's wait status.
int SuperviseInChild(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> strings = {"supervisor", kSupervisorFlag};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    if (freopen(log.c_str(), "w", stderr) == nullptr) _exit(99);
    _exit(Supervise(static_cast<int>(strings.size()), argv.data(), environ));
  }
  int status = 0;
  waitpid(child, &status, 0);
  return status;
}

class SupervisorTest : public ::testing::Test {
 protected:
  // The supervisor's arguments for a call in dir_ under scratch_, no limits, then "--".
  std::vector<std::string> Call(std::vector<std::string> tool) const {
    std::vector<std::string> args = {std::to_string(getpid()),
                                     dir_.path().string(),
                                     scratch_.path().string(),
                                     "0",
                                     "0",
                                     "0",
                                     "0",
                                     "0",
                                     "--"};
    args.insert(args.end(), tool.begin(), tool.end());
    return args;
  }
  test::ScopedTempDir scratch_;
  test::ScopedTempDir dir_;
  test::ScopedTempDir logs_;
};

TEST_F(SupervisorTest, ExitsAsTheToolDid) {
  const int exited = SuperviseInChild(Call({"/bin/sh", "-c", "exit 3"}), logs_.File("a"));
  ASSERT_TRUE(WIFEXITED(exited));
  EXPECT_EQ(WEXITSTATUS(exited), 3);
  const int killed = SuperviseInChild(Call({"/bin/sh", "-c", "kill -TERM $$"}), logs_.File("b"));
  ASSERT_TRUE(WIFSIGNALED(killed));
  EXPECT_EQ(WTERMSIG(killed), SIGTERM);
}

TEST_F(SupervisorTest, SaysWhatIsWrongWithItsArgumentsOrTheTool) {
  const int bad = SuperviseInChild({"1", "2"}, logs_.File("bad"));
  ASSERT_TRUE(WIFEXITED(bad));
  EXPECT_EQ(WEXITSTATUS(bad), 126);
  EXPECT_EQ(test::ReadIfExists(logs_.File("bad")), "libra sandbox: bad supervisor arguments\n");
  const int missing = SuperviseInChild(Call({"/no/such/tool"}), logs_.File("missing"));
  ASSERT_TRUE(WIFEXITED(missing));
  EXPECT_EQ(WEXITSTATUS(missing), 127);
  EXPECT_NE(test::ReadIfExists(logs_.File("missing")).find("cannot start '/no/such/tool'"),
            std::string::npos);
}

}  // namespace
}  // namespace libra::cluster
