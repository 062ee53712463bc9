// `libra cost`: the cost model's numbers for a recipe's GPU and model, the table a user checks
// before trusting a plan.
#include <algorithm>
#include <ostream>

#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/strings.h"
#include "model/cost_model.h"
#include "planner/planner.h"
#include "report/document.h"
#include "report/table.h"

namespace libra::cli {
namespace {

std::string Kilo(int64_t tokens) {
  return tokens % 1024 == 0 ? StrFormat("%lldk", static_cast<long long>(tokens / 1024))
                            : StrFormat("%lld", static_cast<long long>(tokens));
}

report::Table RolloutTable(const model::CostModel& m, const std::vector<int>& tps,
                           const CostOptions& options) {
  std::vector<report::Column> columns = {{"tp", "tp", true},
                                         {"kv_capacity_tokens", "KV tokens", true}};
  for (int64_t c : options.contexts) {
    columns.push_back({"single_seq_tok_s_" + Kilo(c), "1 seq @" + Kilo(c), true});
  }
  for (int64_t c : options.contexts) {
    columns.push_back({"saturated_tok_s_gpu_" + Kilo(c), "full/GPU @" + Kilo(c), true});
  }
  columns.push_back({"prefill_tok_s", "prefill", true});
  report::Table table(columns);
  for (int tp : tps) {
    std::vector<report::Cell> row = {report::Cell::Integer(tp),
                                     report::Cell::Integer(m.KvCapacityTokens(tp))};
    const bool fits = m.KvCapacityTokens(tp) > 0;
    for (int64_t c : options.contexts) {
      row.push_back(fits && m.KvCapacityTokens(tp) >= c
                        ? report::Cell::Number(model::SingleSequenceDecodeRate(m, tp, c), 0)
                        : report::Cell::Missing());
    }
    for (int64_t c : options.contexts) {
      const double rate = model::SaturatedDecodeRatePerGpu(m, tp, c, options.max_sequences);
      row.push_back(rate > 0 ? report::Cell::Number(rate, 0) : report::Cell::Missing());
    }
    row.push_back(fits ? report::Cell::Number(model::PrefillRate(m, tp, 8192), 0)
                       : report::Cell::Missing());
    table.AddRow(std::move(row));
  }
  return table;
}

/// Training on `train_gpus`: every TP x PP layout's step time, its parts and memory.
void AddTrainingTable(const model::CostModel& m, const recipe::Recipe& recipe, int train_gpus,
                      const CostOptions& options, report::Document* doc) {
  const int sequences = recipe.rl.prompts_per_step * recipe.rl.group_size;
  const std::vector<int64_t> batch(static_cast<size_t>(sequences), options.train_tokens);
  const model::TrainPasses passes;
  const std::string training = StrFormat(
      "Training on %d GPUs, one step of %d sequences of %lld tokens (activation recompute, "
      "old log-probs, reference)",
      train_gpus, sequences, static_cast<long long>(options.train_tokens));
  report::Table train({
      {"layout", "layout", false},
      {"step_s", "step s", true},
      {"compute_s", "compute s", true},
      {"tp_comm_s", "TP s", true},
      {"pp_s", "PP s", true},
      {"dp_comm_s", "DP s", true},
      {"optimizer_s", "optimizer s", true},
      {"memory_gb", "GB/GPU", true},
      {"fits", "fits", false},
  });
  for (const model::TrainLayout& layout :
       planner::TrainLayoutCandidates(train_gpus, recipe.cluster.gpus_per_node)) {
    const model::TrainEstimate e = m.TrainStep(layout, passes, batch);
    train.AddRow({
        report::Cell::Text(layout.ToString()),
        report::Cell::Number(e.step_s, 1),
        report::Cell::Number(e.compute_s, 1),
        report::Cell::Number(e.tp_comm_s, 2),
        report::Cell::Number(e.pp_bubble_s, 2),
        report::Cell::Number(e.dp_comm_s, 2),
        report::Cell::Number(e.optimizer_s, 2),
        report::Cell::Number(e.memory_bytes / 1e9, 1),
        report::Cell::Text(e.oom() ? "OOM" : "yes"),
    });
  }
  const bool no_layout = train.rows() == 0;
  doc->AddTable("training", training, std::move(train), report::Document::Shown::kWhenNotEmpty);
  if (no_layout)
    doc->AddNote(training + "\n" + StrFormat("(no TP x PP layout divides %d GPUs)", train_gpus));
}

/// Weight syncs and role switches against a reference trainer layout on `train_gpus`.
report::Table TransitionsTable(const model::CostModel& m, const recipe::Recipe& recipe,
                               int train_gpus) {
  const int gpus_per_node = recipe.cluster.gpus_per_node;
  const model::TrainLayout reference{std::min(8, gpus_per_node), 1,
                                     std::max(1, train_gpus / std::min(8, gpus_per_node)), 1};
  model::SyncRequest sync;
  sync.train = reference;
  sync.rollout_tp = 1;
  sync.cross_node = recipe.cluster.nodes > 1;
  const double nccl = m.WeightSyncTime(sync);
  sync.path = model::SyncPath::kDisk;
  const double disk = m.WeightSyncTime(sync);
  report::Table transitions({{"transition", "transition", false}, {"seconds", "s", true}});
  transitions.AddRow({report::Cell::Text(StrFormat("weight sync, NCCL (trainer %s -> TP-1 "
                                                   "engines%s)",
                                                   reference.ToString().c_str(),
                                                   sync.cross_node ? ", across nodes" : "")),
                      report::Cell::Number(nccl, 2)});
  transitions.AddRow(
      {report::Cell::Text("weight sync, disk and engine restart"), report::Cell::Number(disk, 2)});
  for (int tp : {1, std::min(8, gpus_per_node)}) {
    transitions.AddRow(
        {report::Cell::Text(StrFormat("role switch, TP-%d rollout -> trainer %s", tp,
                                      reference.ToString().c_str())),
         report::Cell::Number(
             m.RoleSwitchTime({model::SwitchDirection::kRolloutToTrain, tp, reference}), 2)});
    transitions.AddRow(
        {report::Cell::Text(StrFormat("role switch, trainer %s -> TP-%d rollout",
                                      reference.ToString().c_str(), tp)),
         report::Cell::Number(
             m.RoleSwitchTime({model::SwitchDirection::kTrainToRollout, tp, reference}), 2)});
  }
  return transitions;
}

}  // namespace

int RunCost(const CostOptions& options, const Io& io) {
  auto format = ChosenFormat(options.common.output);
  if (!format.ok()) return Fail(io, format.status());
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  auto cost = model::MakeCostModel(*recipe);
  if (!cost.ok()) return Fail(io, cost.status());
  const model::CostModel& m = **cost;
  const model::ModelArch& arch = m.arch();
  const int gpus_per_node = recipe->cluster.gpus_per_node;
  const int train_gpus =
      options.train_gpus > 0 ? options.train_gpus : std::max(1, recipe->cluster.total_gpus() / 2);
  if (train_gpus > recipe->cluster.total_gpus()) {
    return Fail(
        io, Status::InvalidArgument(StrFormat("--train-gpus %d is more than the cluster's %d GPUs",
                                              train_gpus, recipe->cluster.total_gpus())));
  }

  report::Document doc(StrFormat(
      "%s on %s: %s cost model, %d nodes x %d GPUs\nweights %.1f GB, KV %.0f KiB per token, %.2f "
      "B matmul parameters per token",
      arch.name.c_str(), m.gpu().name.c_str(), std::string(m.Name()).c_str(), recipe->cluster.nodes,
      gpus_per_node, arch.WeightBytes() / 1e9, arch.KvBytesPerToken() / 1024,
      arch.ActiveMatmulParams() / 1e9));
  doc.AddField("model", arch.name);
  doc.AddField("gpu", m.gpu().name);
  doc.AddField("cost_model", std::string(m.Name()));
  doc.AddField("weight_bytes", arch.WeightBytes());
  doc.AddField("kv_bytes_per_token", arch.KvBytesPerToken());
  doc.AddField("matmul_params_per_token", arch.ActiveMatmulParams());

  std::vector<int> tps;
  for (int tp : {1, 2, 4, 8}) {
    if (tp <= gpus_per_node) tps.push_back(tp);
  }
  doc.AddTable("rollout",
               StrFormat("Rollout per TP-t instance: KV capacity; decode tokens/s of one sequence "
                         "alone (1 seq)\nand per GPU with the instance full (up to %lld "
                         "sequences); prefill tokens/s of an 8k prompt",
                         static_cast<long long>(options.max_sequences)),
               RolloutTable(m, tps, options));
  AddTrainingTable(m, *recipe, train_gpus, options, &doc);
  doc.AddTable("transitions", "Transitions", TransitionsTable(m, *recipe, train_gpus));
  return Print(io, doc, options.common.output);
}

}  // namespace libra::cli
