// ClusterOptions: the cluster backend's recipe tables ([launcher], [engine], [trainer], [agent]),
// decoded and checked. The recipe module hands them over as option tables; this file owns their
// schema, defaults and messages (docs/cluster.md, "Recipe tables", lists every key).
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/command.h"
#include "cluster/engine_client.h"
#include "cluster/launcher.h"
#include "cluster/protocol.h"
#include "cluster/sandbox.h"
#include "cluster/slurm_launcher.h"
#include "common/status.h"
#include "recipe/recipe.h"

namespace libra::cluster {

/// One node of [launcher]: how to reach it.
struct HostOptions {
  /// ssh destination (launcher "ssh"); unused by the local launcher.
  SshTarget ssh{};
  /// The address libra reaches the node's engines and trainer at. Default: the ssh host, or
  /// 127.0.0.1 for the local launcher.
  std::string address;
};

/// How the nodes' processes are started ([launcher] kind).
enum class LauncherKind { kLocal, kSsh, kSlurm };
constexpr std::array<EnumName<LauncherKind>, 3> EnumTable(LauncherKind) {
  return {{{LauncherKind::kLocal, "local"},
           {LauncherKind::kSsh, "ssh"},
           {LauncherKind::kSlurm, "slurm"}}};
}

/// How trained weights reach the engines ([trainer] weight_sync): "disk" (save, then every engine
/// reloads), "distributed" (a broadcast from the trainer in a process group with the engines),
/// "restart" (save, then every engine starts again on the new weights: engines that cannot
/// reload) or "none" (the engines keep their weights: rollout or evaluation only).
enum class WeightSyncMode { kDisk, kDistributed, kRestart, kNone };
constexpr std::array<EnumName<WeightSyncMode>, 4> EnumTable(WeightSyncMode) {
  return {{{WeightSyncMode::kDisk, "disk"},
           {WeightSyncMode::kDistributed, "distributed"},
           {WeightSyncMode::kRestart, "restart"},
           {WeightSyncMode::kNone, "none"}}};
}

struct LauncherOptions {
  /// Default: local.
  LauncherKind kind = LauncherKind::kLocal;
  /// One per recipe node ([cluster] nodes), in node order; the local launcher runs every node on
  /// this machine.
  std::vector<HostOptions> hosts{};
  SshOptions ssh{};
  /// kind "slurm": the allocation and the Slurm commands; a host's `ssh.host` is its Slurm node
  /// name (default: the allocation's nodes, in order).
  SlurmOptions slurm{};
};

struct EngineOptions {
  EngineDialect dialect = EngineDialect::kSglang;
  /// The engine's command; placeholders in docs/cluster.md.
  CommandTemplate command{};
  /// Extra environment of every engine (CUDA_VISIBLE_DEVICES is set from its GPUs).
  std::map<std::string, std::string> env{};
  /// Engines listen on base_port, base_port + 1, ... in launch order. Default: 18000.
  int base_port = 18000;
  /// How long an engine may take to answer its health check. Default: 300 s.
  std::chrono::milliseconds health_timeout{300000};
  /// Times an engine that died is started again before it is dropped. Default: 2.
  int restarts = 2;
  EngineClientOptions client{};
  /// Tokens a turn may generate at most. Default: 512.
  int max_tokens_per_turn = 512;
  /// A trajectory's context limit (the engine's max model length). Default: 32768.
  int64_t max_context_tokens = 32768;
  double temperature = 1.0;
  double top_p = 1.0;
  /// -1: every token. Default: -1.
  int top_k = -1;
  /// 0: no cut. Default: 0.
  double min_p = 0;
  /// Timeout of one turn's request; 0 means none. Default: 600 s.
  double turn_timeout_s = 600;
  /// Times a turn that got no reply or a server error (5xx) is sent again, after a backoff and
  /// with another seed, before its trajectory is dropped. Default: 3.
  int turn_retries = 3;
  /// The first backoff; each retry doubles it. Default: 1 s.
  double retry_backoff_s = 1;
  /// The run stops once the dropped trajectories are more than this fraction of those ended
  /// (counted over at least 100). Default: 0.05.
  double max_dropped_fraction = 0.05;
  /// Connections open at once to one engine (or the trainer); more requests wait in libra, in
  /// order. An engine runs at most its max_num_seqs (vLLM and SGLang: 256) at once anyway, and
  /// libcurl's cost per request grows with the connections it holds. 0: no limit. Default: 256.
  int max_connections = 256;
  /// Ranks an engine takes in the distributed weight-update group: one per GPU (vLLM and SGLang,
  /// whose every TP worker receives the broadcast), or one per engine (a single-process engine,
  /// like workers/rollout_server.py). Default: true (per GPU).
  bool group_rank_per_gpu = true;
};

struct TrainerOptions {
  CommandTemplate command{};
  /// The weights the trainer starts from ({weights} of its first start); relative to the recipe's
  /// folder. Required.
  std::string initial_weights;
  /// Run once before the trainer's first start when initial_weights does not exist yet, to make
  /// it (e.g. a supervised warm start); {weights} is initial_weights. Default: none.
  CommandTemplate prepare_command{};
  bool has_prepare_command = false;
  /// Name, inside the run's weights/ folder, of the synced weights the engines load ({weights}
  /// of an engine): a file, or a folder for engines that load a model directory (vLLM). Every
  /// version's checkpoint is v<k> with the same extension. Default: "policy.pt".
  std::string policy_name = "policy.pt";
  std::map<std::string, std::string> env{};
  /// The node it runs on. Default: 0.
  int node = 0;
  /// Default: 18100.
  int port = 18100;
  std::chrono::milliseconds health_timeout{300000};
  /// Times a trainer that died is started again (from the last checkpoint). Default: 1.
  int restarts = 1;
  /// Default: disk.
  WeightSyncMode weight_sync = WeightSyncMode::kDisk;
  /// The group's backend for "distributed": "nccl" on GPUs, "gloo" on CPUs. Default: "nccl".
  std::string group_backend = "nccl";
  /// Where the trainer listens for the group's rendezvous. Default: 18200.
  int master_port = 18200;
  /// Timeout of one train step; 0 means none. Default: 0.
  double step_timeout_s = 0;
  /// The run stops after a step whose logprob_diff (mean absolute difference of the trainer's
  /// and the engines' log-probabilities of the trained tokens) exceeds this; 0: never. Default: 1.
  double max_logprob_diff = 1;
  /// The run stops after a step whose clip_fraction exceeds this; 0: never. Default: 0.9.
  double max_clip_fraction = 0.9;
};

struct AgentOptions {
  /// Prints a prompt's token ids ({"tokens": [...]}); placeholders {prompt} and {seed}.
  CommandTemplate prompt_command{};
  /// Runs the tool the last turn called: JSON on stdin, {"tokens", "status"} on stdout.
  CommandTemplate tool_command{};
  /// Or an HTTP tool server: the same JSON POSTed here, the same reply. Exactly one of the two.
  std::string tool_url;
  /// Scores a finished trajectory: JSON on stdin, {"reward"} on stdout.
  CommandTemplate reward_command{};
  /// Tokens that end a turn besides the model's EOS.
  std::vector<TokenId> stop_token_ids{};
  /// A turn that ends with this token calls the tool.
  TokenId tool_call_token = 0;
  /// The tool's name in records and for the router. Default: "tool".
  std::string tool_name = "tool";
  /// Turns per trajectory at most; a trajectory still calling tools then is truncated.
  /// Default: 16.
  int max_turns = 16;
  /// Limits of the tool and reward subprocesses.
  SandboxLimits limits{};
  /// Prompt, tool and reward subprocesses running at once; more wait (their timeout starts when
  /// they start). 0: four per core of the controller's machine. Default: 0.
  int max_parallel_calls = 0;
  /// Extra environment of the tool and reward subprocesses (nothing else is inherited but
  /// PATH, HOME and the locale).
  std::map<std::string, std::string> env{};
};

struct ClusterOptions {
  LauncherOptions launcher{};
  EngineOptions engine{};
  TrainerOptions trainer{};
  AgentOptions agent{};
  /// Values every command template may use: {recipe_dir}, {model}, {seed}.
  std::map<std::string, std::string> values{};
};

/// Decodes and checks the recipe's cluster tables against its [cluster] (hosts per node,
/// placeholders of every template). kInvalidRecipe listing every problem with its location.
Result<ClusterOptions> DecodeClusterOptions(const recipe::Recipe& recipe);
/// One launcher per node of `launcher`, in node order. kInvalidArgument / kBackend as
/// SshLauncher::Create. With Slurm it joins (or requests) the allocation, and fills in each
/// host's node name and address from it.
Result<std::vector<std::unique_ptr<Launcher>>> MakeLaunchers(LauncherOptions& launcher);

/// Just the [launcher] table (for commands that only run things on the nodes, as `libra probe
/// --hosts` does); the same errors for it.
Result<LauncherOptions> DecodeLauncherOptions(const recipe::Recipe& recipe);

}  // namespace libra::cluster
