// TuneAllocator: the C library allocator set for what libra does, once at the start of a program.
#pragma once

namespace libra {

/// Keeps freed memory in the process for reuse instead of returning it to the system, and serves
/// blocks up to 32 MiB from the heap. A simulated step builds and drops vectors sized by the
/// cluster (thousands of instances and trajectories at 8,192 GPUs); with glibc's defaults each
/// large one is mapped afresh and its pages faulted in again, and whether a size is mapped
/// depends on what was freed before (the threshold adapts), so an unrelated allocation could move
/// a run's page faults by a factor of two. With glibc only; elsewhere a no-op.
void TuneAllocator();

}  // namespace libra
