#include "common/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace libra {
namespace {

TEST(FilesTest, WritesAndReplacesWholeFiles) {
  test::ScopedTempDir dir;
  const std::string path = dir.File("out.txt");
  ASSERT_OK(WriteFileAtomically(path, "first\n", "report"));
  EXPECT_EQ(test::ReadFile(path), "first\n");
  ASSERT_OK(WriteFileAtomically(path, "second\n", "report"));
  EXPECT_EQ(test::ReadFile(path), "second\n");
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(FilesTest, FailureNamesThePathAndWhat) {
  test::ScopedTempDir dir;
  const std::string nowhere = dir.File("missing/out.svg");
  const Status status = WriteFileAtomically(nowhere, "x", "plot");
  EXPECT_EQ(status.message(), nowhere + ": cannot write the plot (No such file or directory)");
}

TEST(FilesTest, ProcessStatFieldsFollowTheCommandName) {
  // This process runs (state R) and its parent is field 4; no process has id -1.
  const std::vector<std::string> fields = ProcessStatFields(getpid());
  if (fields.empty()) GTEST_SKIP() << "no /proc here";
  ASSERT_GE(fields.size(), 20u);
  EXPECT_EQ(fields[0], "R");
  EXPECT_EQ(fields[1], std::to_string(getppid()));
  EXPECT_FALSE(fields.back().empty());
  EXPECT_EQ(fields.back().find('\n'), std::string::npos);
  EXPECT_TRUE(ProcessStatFields(-1).empty());
}

TEST(FilesTest, PlainFileNamesStayInTheirFolder) {
  for (const char* name : {"a", "call-1_x.log", "..a", "a.."}) {
    EXPECT_TRUE(IsPlainFileName(name)) << name;
  }
  for (const char* name : {"", ".", "..", "../x", "a/b", "/", "a b", "a\nb"}) {
    EXPECT_FALSE(IsPlainFileName(name)) << name;
  }
}

}  // namespace
}  // namespace libra
