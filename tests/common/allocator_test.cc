#include "common/allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace libra {
namespace {

#if defined(__GLIBC__)
// Exits 0 when a 24 MiB block is mapped on its own before tuning and comes from the heap after,
// staying there once freed; otherwise the number of the check that failed. Nothing is freed
// before the tuning: freeing a mapped block raises glibc's adaptive threshold by itself.
[[noreturn]] void CheckLargeBlocks() {
  constexpr size_t kBlock = size_t{24} << 20;
  const size_t mapped = mallinfo2().hblks;
  auto before = std::make_unique<char[]>(kBlock);
  before[0] = 1;
  if (mallinfo2().hblks != mapped + 1) std::_Exit(2);  // glibc's default: mapped alone
  TuneAllocator();
  auto after = std::make_unique<char[]>(kBlock);
  after[0] = 1;
  if (mallinfo2().hblks != mapped + 1) std::_Exit(3);  // tuned: from the heap
  const size_t arena = mallinfo2().arena;
  after.reset();
  if (mallinfo2().arena != arena) std::_Exit(4);  // and kept there for the next one
  std::_Exit(0);
}

TEST(AllocatorTest, LargeBlocksComeFromTheHeapAndStayThere) {
  // In a fresh process: earlier tests may have moved glibc's adaptive threshold.
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CheckLargeBlocks(), testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, style);
}
#endif

}  // namespace
}  // namespace libra
