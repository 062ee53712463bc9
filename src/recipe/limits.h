// The input limits of recipes: every size a recipe can set, and the files it reads, is bounded, so
// that no recipe can exhaust memory or time before libra says what is wrong with it. Each limit
// is far above what a real experiment needs (the paper's largest setting: 6 nodes of 8 GPUs,
// 32 prompts x 8 samples per step); docs/recipes.md lists them. Validation refuses a recipe
// beyond one, naming the limit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace libra::recipe {

/// Bytes of a recipe file, and of each file it includes.
inline constexpr size_t kMaxRecipeBytes = size_t{1} << 20;
/// Files one recipe includes.
inline constexpr int kMaxIncludes = 16;
/// Nesting of tables, arrays and dotted-key segments together (`a.b.c = [[1]]` is 5 deep).
inline constexpr int kMaxNesting = 32;
/// `--set` overrides on one command line, and bytes of one.
inline constexpr int kMaxOverrides = 1000;
inline constexpr size_t kMaxOverrideBytes = size_t{64} << 10;
/// Problems listed for one recipe; the rest are counted.
inline constexpr size_t kMaxDiagnostics = 100;

/// `steps`.
inline constexpr int kMaxSteps = 1'000'000;
/// `cluster.nodes` and `cluster.gpus_per_node`, and GPUs in all.
inline constexpr int kMaxNodes = 1024;
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int kMaxGpus = 8192;
/// `rl.prompts_per_step`, `rl.group_size`, and trajectories per step (their product).
inline constexpr int kMaxPromptsPerStep = 65'536;
inline constexpr int kMaxGroupSize = 4096;
inline constexpr int64_t kMaxTrajectoriesPerStep = int64_t{1} << 20;
/// `rl.staleness` (and a system's), and `rl.sync_interval`.
inline constexpr int kMaxStaleness = 1000;
/// Trajectories a pipeline may hold at once: (staleness + 1) steps' worth.
inline constexpr int64_t kMaxTrajectoriesInFlight = int64_t{1} << 22;
/// `sim.max_num_seqs`, `sim.max_batched_tokens`, `sim.tool_concurrency`.
inline constexpr int kMaxNumSeqs = 1 << 20;
inline constexpr int kMaxBatchedTokens = 1 << 24;
inline constexpr int kMaxToolConcurrency = 1 << 20;
/// `[[baselines]]` entries.
inline constexpr int kMaxBaselines = 256;
/// Bytes of a file a policy's options name (C-MLFQ's warm_start tree).
inline constexpr size_t kMaxPolicyFileBytes = size_t{256} << 20;

}  // namespace libra::recipe
