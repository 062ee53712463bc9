// Engine capabilities, probed at the start of a run on the first engine that serves, by using
// them: generation that returns token ids (greedy, a few tokens), stopping at a token id (the
// same request asked to stop at one of the tokens it generated), weight reload from disk (when
// the recipe syncs weights from disk: the engine reloads the weights it already holds) and
// memory release and resume (when the layout is colocated). CheckCapabilities then refuses a
// recipe that needs what the engine lacks, before anything trains, naming the engine, the route
// and the recipe key. A distributed weight update cannot be probed without the trainer's group;
// a refused one fails the first sync at once (weight_sync.h).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cluster/engine_client.h"
#include "cluster/runtime.h"

namespace libra::cluster {

/// What to probe.
struct ProbePlan {
  /// A token id of the model's vocabulary, the probe's prompt.
  TokenId prompt_token = 0;
  /// Reload policy.pt (labelled `version`).
  bool reload = false;
  int version = 0;
  /// Release and resume memory.
  bool sleep = false;
};

/// One capability: unknown until probed; `error` says why it is missing (the route and the
/// engine's answer).
struct Capability {
  std::optional<bool> present;
  std::string error;
  bool operator==(const Capability&) const = default;
};

struct EngineCapabilities {
  Capability token_ids;
  Capability stop_at_token_ids;
  Capability reload_from_disk;
  Capability sleep_wake;
  bool operator==(const EngineCapabilities&) const = default;
  /// "token ids: yes, stop at token ids: no (cut by libra), reload: yes, sleep: not probed".
  std::string ToString() const;
};

/// Probes `client`'s engine; `done` gets what it found (never an error: a failed probe is a
/// missing capability).
void ProbeEngine(Runtime& runtime, const EngineClient& client, const ProbePlan& plan,
                 std::function<void(EngineCapabilities)> done);

/// OK when the recipe can run on engines with `found`; else kInvalidRecipe naming `engine`, the
/// route that failed and the recipe key that needs it. Pure.
Status CheckCapabilities(const std::string& engine, const EngineClient& client,
                         const EngineCapabilities& found, const ClusterOptions& options,
                         bool colocated);

}  // namespace libra::cluster
