#include "cluster/cluster_options.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/strings.h"

namespace libra::cluster {
namespace {

using recipe::OptionReader;
using recipe::OptionTable;
using recipe::OptionValue;

// The placeholders each template may use, besides the values every template gets.
const std::vector<std::string> kCommon = {"recipe_dir", "workers_dir", "run_dir", "model", "seed"};
const std::vector<std::string> kEngine = {"port", "tp",      "gpus",    "node",
                                          "host", "weights", "dialect", "instance"};
const std::vector<std::string> kTrainer = {"port", "node", "host", "weights", "version", "replica"};
const std::vector<std::string> kPrompt = {"prompt"};

// Collects the problems of all four tables, so that a recipe shows every one at once.
class Decoder {
 public:
  void Add(const Status& status) {
    if (!status.ok()) errors_.push_back(status.message());
  }
  Status Finish() const {
    if (errors_.empty()) return Status();
    return Status(StatusCode::kInvalidRecipe, StrJoin(errors_, "\n"));
  }

  // A command template at `key`, using only `allowed` (and kCommon) placeholders.
  CommandTemplate Template(OptionReader& reader, const std::string& key,
                           const std::vector<std::string>& allowed, bool required) {
    const std::string text = reader.String(key, "");
    if (text.empty()) {
      if (required) reader.Error(key, "is required (the command that starts it)");
      return CommandTemplate();
    }
    Result<CommandTemplate> parsed = CommandTemplate::Parse(text);
    if (!parsed.ok()) {
      reader.Error(key, parsed.status().message());
      return CommandTemplate();
    }
    std::vector<std::string> known = kCommon;
    known.insert(known.end(), allowed.begin(), allowed.end());
    for (const std::string& name : parsed->Placeholders()) {
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::sort(known.begin(), known.end());
        reader.Error(
            key, "unknown placeholder {" + name + "} (known here: " + StrJoin(known, ", ") + ")");
      }
    }
    return *std::move(parsed);
  }

  // An array of strings at `key` (extra arguments of a command).
  std::vector<std::string> Strings(OptionReader& reader, const OptionTable& table,
                                   const std::string& key) {
    std::vector<std::string> out;
    if (!reader.Has(key)) return out;
    const OptionValue* value = table.Find(key);
    if (value->kind != OptionValue::Kind::kArray) {
      reader.Error(key, "expected an array of strings, got " + value->KindName());
      return out;
    }
    for (size_t i = 0; i < value->array.size(); ++i) {
      const OptionValue& item = value->array[i];
      if (item.kind != OptionValue::Kind::kString) {
        reader.Error(key,
                     StrFormat("[%zu]: expected a string, got %s", i, item.KindName().c_str()));
        continue;
      }
      out.push_back(item.string_value);
    }
    return out;
  }

  // A table of strings at `key` (an environment).
  std::map<std::string, std::string> StringMap(OptionReader& reader, const OptionTable& table,
                                               const std::string& key) {
    std::map<std::string, std::string> out;
    if (!reader.Has(key)) return out;
    const OptionValue* value = table.Find(key);
    if (value->kind != OptionValue::Kind::kTable) {
      reader.Error(key, "expected a table of strings, got " + value->KindName());
      return out;
    }
    for (const recipe::OptionEntry& e : value->table) {
      if (e.value.kind != OptionValue::Kind::kString) {
        reader.Error(key, e.key + ": expected a string, got " + e.value.KindName());
        continue;
      }
      out[e.key] = e.value.string_value;
    }
    return out;
  }

 private:
  std::vector<std::string> errors_;
};

std::chrono::milliseconds Seconds(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

/// One [[launcher.hosts]] entry of a launcher of `kind`.
HostOptions DecodeHost(const recipe::Recipe& r, LauncherKind kind, OptionReader& h) {
  HostOptions o;
  o.ssh.host = h.String("host", "");
  o.ssh.user = h.String("user", "");
  o.ssh.port = static_cast<int>(h.Int("port", 0, 0, 65535));
  o.ssh.identity_file = h.String("identity_file", "");
  o.address = h.String("address", "");
  if (o.ssh.host.empty() && kind == LauncherKind::kSsh) h.Error("host", "is required for ssh");
  // What SshLauncher::Create refuses at run time, refused at validation.
  for (const auto& [key, value] :
       {std::pair{"host", &o.ssh.host}, std::pair{"user", &o.ssh.user}}) {
    if (!value->empty() &&
        ((*value)[0] == '-' || value->find_first_of(" \t\n\r\"") != std::string::npos)) {
      h.Error(key, "'" + EscapeControl(*value) +
                       "' must not start with '-' or hold blanks or quotes (ssh would read it as "
                       "an option)");
    }
  }
  if (!o.ssh.identity_file.empty() && std::filesystem::path(o.ssh.identity_file).is_relative()) {
    o.ssh.identity_file =
        (std::filesystem::path(r.cluster_backend.base_dir) / o.ssh.identity_file).string();
  }
  return o;
}

void DecodeLauncher(const recipe::Recipe& r, Decoder& d, LauncherOptions* out) {
  const OptionTable& table = r.cluster_backend.launcher;
  OptionReader reader(table);
  out->kind = reader.Enum("kind", LauncherKind::kLocal);
  SlurmOptions& slurm = out->slurm;
  slurm.job_id = reader.String("job_id", "");
  slurm.salloc_args = d.Strings(reader, table, "salloc_args");
  slurm.srun_args = d.Strings(reader, table, "srun_args");
  slurm.allocation_timeout =
      std::chrono::seconds(reader.Int("allocation_timeout_s", 600, 1, 86400 * 7));
  SshOptions& ssh = out->ssh;
  ssh.strict_host_key_checking = reader.Enum("strict_host_key_checking", HostKeyChecking::kYes);
  ssh.known_hosts_file = reader.String("known_hosts_file", "");
  ssh.config_file = reader.String("ssh_config", "");
  ssh.connect_timeout = std::chrono::seconds(reader.Int("connect_timeout_s", 10, 1, 600));
  ssh.ssh_program = reader.String("ssh_program", "ssh");
  if (reader.Has("hosts")) {
    const OptionValue* hosts = table.Find("hosts");
    if (hosts->kind != OptionValue::Kind::kArray) {
      reader.Error("hosts", "expected an array of tables ([[launcher.hosts]])");
    } else {
      for (size_t i = 0; i < hosts->array.size(); ++i) {
        const OptionValue& host = hosts->array[i];
        if (host.kind != OptionValue::Kind::kTable) {
          reader.Error("hosts", StrFormat("hosts[%zu]: expected a table", i));
          continue;
        }
        OptionTable entry{host.table, host.where, table.path + StrFormat(".hosts[%zu]", i)};
        OptionReader h(entry);
        HostOptions o = DecodeHost(r, out->kind, h);
        d.Add(h.Finish());
        out->hosts.push_back(std::move(o));
      }
    }
  }
  if (out->kind == LauncherKind::kSsh &&
      out->hosts.size() != static_cast<size_t>(r.cluster.nodes)) {
    reader.Error("hosts", StrFormat("the ssh launcher needs one [[launcher.hosts]] per node: "
                                    "%zu given, [cluster] has %d node(s)",
                                    out->hosts.size(), r.cluster.nodes));
  }
  if (out->kind == LauncherKind::kLocal && !out->hosts.empty() &&
      out->hosts.size() != static_cast<size_t>(r.cluster.nodes)) {
    reader.Error("hosts",
                 StrFormat("%zu hosts for %d node(s)", out->hosts.size(), r.cluster.nodes));
  }
  if (out->kind == LauncherKind::kSlurm && !out->hosts.empty() &&
      out->hosts.size() != static_cast<size_t>(r.cluster.nodes)) {
    reader.Error("hosts", StrFormat("%zu hosts for %d node(s): give one [[launcher.hosts]] per "
                                    "node, or none (the allocation's nodes, in order)",
                                    out->hosts.size(), r.cluster.nodes));
  }
  out->hosts.resize(static_cast<size_t>(std::max(0, r.cluster.nodes)));
  for (HostOptions& host : out->hosts) {
    if (host.address.empty()) {
      // Slurm nodes without an address are reached by their node name, set once the allocation
      // is known (MakeLaunchers).
      host.address = out->kind == LauncherKind::kSsh     ? host.ssh.host
                     : out->kind == LauncherKind::kSlurm ? ""
                                                         : "127.0.0.1";
    }
  }
  d.Add(reader.Finish());
}

void DecodeEngine(const recipe::Recipe& r, Decoder& d, EngineOptions* out) {
  const OptionTable& table = r.cluster_backend.engine;
  OptionReader reader(table);
  out->dialect = reader.Enum("dialect", EngineDialect::kSglang);
  out->command = d.Template(reader, "command", kEngine, true);
  out->env = d.StringMap(reader, table, "env");
  out->base_port = static_cast<int>(reader.Int("base_port", 18000, 1024, 65000));
  out->health_timeout = Seconds(reader.Double("health_timeout_s", 300, 0.1, 86400));
  out->restarts = static_cast<int>(reader.Int("restarts", 2, 0, 100));
  out->client.model = reader.String("served_model_name", "");
  out->client.vllm_sleep_level = static_cast<int>(reader.Int("vllm_sleep_level", 1, 1, 2));
  out->client.control_timeout_s = reader.Double("control_timeout_s", 600, 0.1, 86400);
  out->max_tokens_per_turn = static_cast<int>(reader.Int("max_tokens_per_turn", 512, 1, 1 << 20));
  out->max_context_tokens = reader.Int("max_context_tokens", 32768, 2, int64_t{1} << 30);
  out->temperature = reader.Double("temperature", 1.0, 0, 100);
  out->top_p = reader.Double("top_p", 1.0, 0, 1);
  out->top_k = static_cast<int>(reader.Int("top_k", -1, -1, 1 << 24));
  if (out->top_k == 0) reader.Error("top_k", "0 is no token; use -1 for every token");
  out->min_p = reader.Double("min_p", 0, 0, 1);
  out->turn_timeout_s = reader.Double("turn_timeout_s", 600, 0, 86400);
  out->turn_retries = static_cast<int>(reader.Int("turn_retries", 3, 0, 20));
  out->retry_backoff_s = reader.Double("retry_backoff_s", 1, 0, 3600);
  out->max_dropped_fraction = reader.Double("max_dropped_fraction", 0.05, 0, 1);
  out->max_connections = static_cast<int>(reader.Int("max_connections", 256, 0, 1 << 20));
  out->group_rank_per_gpu =
      reader.String("group_ranks", "per-gpu", {"per-gpu", "per-engine"}) == "per-gpu";
  d.Add(reader.Finish());
}

void DecodeTrainer(const recipe::Recipe& r, Decoder& d, TrainerOptions* out) {
  const OptionTable& table = r.cluster_backend.trainer;
  OptionReader reader(table);
  out->command = d.Template(reader, "command", kTrainer, true);
  out->initial_weights = reader.String("initial_weights", "");
  if (out->initial_weights.empty()) {
    reader.Error("initial_weights", "is required (the weights the trainer starts from)");
  } else if (std::filesystem::path(out->initial_weights).is_relative()) {
    out->initial_weights =
        std::filesystem::absolute(std::filesystem::path(r.cluster_backend.base_dir) /
                                  out->initial_weights)
            .lexically_normal()
            .string();
  }
  out->policy_name = reader.String("policy_name", "policy.pt");
  if (out->policy_name.empty() || out->policy_name.find('/') != std::string::npos) {
    reader.Error("policy_name", "must be a file or folder name, without '/'");
  }
  out->has_prepare_command = reader.Has("prepare_command");
  out->prepare_command = d.Template(reader, "prepare_command", {"weights", "node", "host"}, false);
  out->env = d.StringMap(reader, table, "env");
  out->node = static_cast<int>(reader.Int("node", 0, 0, std::max(0, r.cluster.nodes - 1)));
  out->port = static_cast<int>(reader.Int("port", 18100, 1024, 65535));
  out->health_timeout = Seconds(reader.Double("health_timeout_s", 300, 0.1, 86400));
  out->restarts = static_cast<int>(reader.Int("restarts", 1, 0, 100));
  out->weight_sync = reader.Enum("weight_sync", WeightSyncMode::kDisk);
  out->group_backend = reader.String("group_backend", "nccl", {"nccl", "gloo"});
  out->master_port = static_cast<int>(reader.Int("master_port", 18200, 1024, 65535));
  out->step_timeout_s = reader.Double("step_timeout_s", 0, 0, 86400 * 7);
  out->max_logprob_diff = reader.Double("max_logprob_diff", 1, 0, 1000);
  out->max_clip_fraction = reader.Double("max_clip_fraction", 0.9, 0, 1);
  d.Add(reader.Finish());
}

void DecodeAgent(const recipe::Recipe& r, Decoder& d, AgentOptions* out) {
  const OptionTable& table = r.cluster_backend.agent;
  OptionReader reader(table);
  out->prompt_command = d.Template(reader, "prompt_command", kPrompt, true);
  out->tool_url = reader.String("tool_url", "");
  out->tool_command = d.Template(reader, "tool_command", {}, out->tool_url.empty());
  if (!out->tool_url.empty() && reader.Has("tool_command")) {
    reader.Error("tool_url", "give tool_command or tool_url, not both");
  }
  if (!out->tool_url.empty() && !StartsWith(out->tool_url, "http://") &&
      !StartsWith(out->tool_url, "https://")) {
    reader.Error("tool_url", "must start with http:// or https://");
  }
  out->reward_command = d.Template(reader, "reward_command", {}, true);
  for (int64_t id : reader.IntList("stop_token_ids", {}, 0, (int64_t{1} << 31) - 1)) {
    out->stop_token_ids.push_back(static_cast<TokenId>(id));
  }
  out->tool_call_token =
      static_cast<TokenId>(reader.Int("tool_call_token", 0, 0, (int64_t{1} << 31) - 1));
  if (!reader.Has("tool_call_token")) {
    reader.Error("tool_call_token", "is required (the token that ends a tool call)");
  }
  out->tool_name = reader.String("tool_name", "tool");
  out->max_turns = static_cast<int>(reader.Int("max_turns", 16, 1, 10000));
  SandboxLimits& limits = out->limits;
  limits.timeout_s = reader.Double("tool_timeout_s", limits.timeout_s, 0.01, 86400);
  limits.cpu_seconds = static_cast<int>(reader.Int("tool_cpu_s", limits.cpu_seconds, 0, 86400));
  limits.memory_bytes = reader.Int("tool_memory_mb", limits.memory_bytes >> 20, 0, 1 << 24) << 20;
  out->max_parallel_calls = static_cast<int>(reader.Int("max_parallel_calls", 0, 0, 1 << 20));
  out->env = d.StringMap(reader, table, "env");
  d.Add(reader.Finish());
}

}  // namespace

Result<std::vector<std::unique_ptr<Launcher>>> MakeLaunchers(LauncherOptions& launcher) {
  std::vector<std::unique_ptr<Launcher>> launchers;
  if (launcher.kind == LauncherKind::kSlurm) {
    LIBRA_ASSIGN_OR_RETURN(
        std::shared_ptr<SlurmAllocation> allocation,
        SlurmAllocation::Acquire(launcher.slurm, static_cast<int>(launcher.hosts.size())));
    for (size_t i = 0; i < launcher.hosts.size(); ++i) {
      HostOptions& host = launcher.hosts[i];
      if (host.ssh.host.empty()) {
        if (i >= allocation->nodes().size()) {
          return Status::Backend(
              "slurm",
              StrFormat("job %s has %zu node(s), the recipe %zu", allocation->job_id().c_str(),
                        allocation->nodes().size(), launcher.hosts.size()));
        }
        host.ssh.host = allocation->nodes()[i];
      }
      if (host.address.empty()) host.address = host.ssh.host;
      launchers.push_back(std::make_unique<SlurmLauncher>(allocation, host.ssh.host));
    }
    return launchers;
  }
  for (const HostOptions& host : launcher.hosts) {
    if (launcher.kind == LauncherKind::kSsh) {
      LIBRA_ASSIGN_OR_RETURN(auto ssh, SshLauncher::Create(host.ssh, launcher.ssh));
      launchers.push_back(std::move(ssh));
    } else {
      launchers.push_back(std::make_unique<LocalLauncher>());
    }
  }
  return launchers;
}

Result<LauncherOptions> DecodeLauncherOptions(const recipe::Recipe& recipe) {
  LauncherOptions options;
  Decoder decoder;
  DecodeLauncher(recipe, decoder, &options);
  LIBRA_RETURN_IF_ERROR(decoder.Finish());
  return options;
}

Result<ClusterOptions> DecodeClusterOptions(const recipe::Recipe& recipe) {
  ClusterOptions options;
  Decoder decoder;
  DecodeLauncher(recipe, decoder, &options.launcher);
  DecodeEngine(recipe, decoder, &options.engine);
  DecodeTrainer(recipe, decoder, &options.trainer);
  DecodeAgent(recipe, decoder, &options.agent);
  LIBRA_RETURN_IF_ERROR(decoder.Finish());
  std::filesystem::path dir = recipe.cluster_backend.base_dir.empty()
                                  ? std::filesystem::current_path()
                                  : std::filesystem::absolute(recipe.cluster_backend.base_dir);
  options.values["recipe_dir"] = dir.lexically_normal().string();
  // libra's CPU stand-in workers (workers/), wherever the recipe was copied to.
  const char* workers = std::getenv("LIBRA_WORKERS_DIR");
  options.values["workers_dir"] =
      workers != nullptr && *workers != '\0' ? workers : LIBRA_WORKERS_DIR;
  options.values["model"] = recipe.model.name;
  options.values["seed"] = std::to_string(recipe.seed);
  return options;
}

}  // namespace libra::cluster
