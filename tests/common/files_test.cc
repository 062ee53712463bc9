#include "common/files.h"

#include <gtest/gtest.h>

#include <filesystem>

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
