#include "common/allocator.h"

#include <cstdlib>  // defines __GLIBC__ with glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace libra {

void TuneAllocator() {
#if defined(__GLIBC__)
  constexpr int kMiB = 1 << 20;
  // Blocks below 32 MiB (glibc's largest mapping threshold) come from the heap; setting it also
  // stops the threshold from adapting.
  mallopt(M_MMAP_THRESHOLD, 32 * kMiB);
  // Free memory at the top of the heap is returned to the system only beyond 256 MiB, and the
  // heap grows 64 MiB at a time (address space only: pages are faulted in when first used).
  mallopt(M_TRIM_THRESHOLD, 256 * kMiB);
  mallopt(M_TOP_PAD, 64 * kMiB);
#endif
}

}  // namespace libra
