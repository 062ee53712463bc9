#include "cluster/engine_probe.h"

#include <algorithm>
#include <memory>

#include "common/strings.h"

namespace libra::cluster {
namespace {

constexpr int kProbeTokens = 8;

std::string Shown(const Capability& c, const char* missing) {
  if (!c.present) return "not probed";
  return *c.present ? "yes" : missing;
}

GenerateRequest ProbeRequest(TokenId token) {
  GenerateRequest request;
  request.prompt = {token};
  request.max_tokens = kProbeTokens;
  request.temperature = 0;
  request.ignore_eos = true;
  request.seed = 1;
  request.timeout_s = 300;
  return request;
}

// The first generated token (after the first) that did not come before: asked to stop at it, an
// engine that stops at token ids returns exactly up to it. -1 when there is none.
int StopProbeIndex(const std::vector<TokenId>& tokens) {
  for (size_t i = 1; i < tokens.size(); ++i) {
    if (std::find(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(i), tokens[i]) ==
        tokens.begin() + static_cast<ptrdiff_t>(i)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

struct Probe {
  Runtime* runtime = nullptr;
  EngineClient client;
  ProbePlan plan;
  EngineCapabilities found;
  std::function<void(EngineCapabilities)> done;
};

void Generate(const std::shared_ptr<Probe>& probe, const GenerateRequest& request,
              std::function<void(Result<GenerateResult>)> then) {
  probe->runtime->transport->Send(probe->client.Generate(request),
                                  [probe, request, then = std::move(then)](Result<HttpResponse> r) {
                                    if (!r.ok()) return then(r.status());
                                    then(probe->client.ParseGenerate(request, *r));
                                  });
}

void Ack(const std::shared_ptr<Probe>& probe, const HttpRequest& request, Capability* into,
         std::function<void()> then) {
  probe->runtime->transport->Send(
      request, [probe, request, into, then = std::move(then)](Result<HttpResponse> r) {
        const Status s = r.ok() ? probe->client.ParseAck(request, *r) : r.status();
        into->present = s.ok();
        if (!s.ok()) into->error = s.message();
        then();
      });
}

void Sleep(const std::shared_ptr<Probe>& probe) {
  if (!probe->plan.sleep) return probe->done(probe->found);
  Ack(probe, probe->client.ReleaseMemory(), &probe->found.sleep_wake, [probe] {
    if (!*probe->found.sleep_wake.present) return probe->done(probe->found);
    Ack(probe, probe->client.ResumeMemory(), &probe->found.sleep_wake,
        [probe] { probe->done(probe->found); });
  });
}

void Reload(const std::shared_ptr<Probe>& probe) {
  if (!probe->plan.reload) return Sleep(probe);
  Result<HttpRequest> update =
      probe->client.UpdateWeightsFromDisk(probe->client.options().model_path, probe->plan.version);
  if (!update.ok()) {
    probe->found.reload_from_disk = {false, update.status().message()};
    return Sleep(probe);
  }
  Ack(probe, *update, &probe->found.reload_from_disk, [probe] { Sleep(probe); });
}

}  // namespace

std::string EngineCapabilities::ToString() const {
  return "token ids: " + Shown(token_ids, "no") +
         ", stop at token ids: " + Shown(stop_at_token_ids, "no (cut by libra)") +
         ", reload from disk: " + Shown(reload_from_disk, "no") +
         ", sleep / wake: " + Shown(sleep_wake, "no");
}

void ProbeEngine(Runtime& runtime, const EngineClient& client, const ProbePlan& plan,
                 std::function<void(EngineCapabilities)> done) {
  auto probe = std::make_shared<Probe>(Probe{&runtime, client, plan, {}, std::move(done)});
  const GenerateRequest free_run = ProbeRequest(plan.prompt_token);
  Generate(probe, free_run, [probe, free_run](Result<GenerateResult> first) {
    if (!first.ok()) {
      probe->found.token_ids = {false, first.status().message()};
      return Reload(probe);
    }
    probe->found.token_ids = {true, ""};
    const int at = StopProbeIndex(first->token_ids);
    if (at < 0) return Reload(probe);  // all one token: nothing to stop at
    GenerateRequest stop = free_run;
    stop.stop_token_ids = {first->token_ids[static_cast<size_t>(at)]};
    const std::vector<TokenId> expected(first->token_ids.begin(),
                                        first->token_ids.begin() + at + 1);
    Generate(probe, stop, [probe, expected](Result<GenerateResult> second) {
      // ParseGenerate cuts an overshoot: a stopping engine generated no more than the cut.
      if (second.ok() && second->token_ids == expected) {
        probe->found.stop_at_token_ids = {
            second->overshoot_tokens == 0,
            second->overshoot_tokens == 0
                ? ""
                : StrFormat("generated %lld tokens past it",
                            static_cast<long long>(second->overshoot_tokens))};
      }
      Reload(probe);
    });
  });
}

Status CheckCapabilities(const std::string& engine, const EngineClient& client,
                         const EngineCapabilities& found, const ClusterOptions& options,
                         bool colocated) {
  const std::string who = StrFormat("%s (%s engine at %s)", engine.c_str(),
                                    NameOf(client.dialect()).c_str(), client.base_url().c_str());
  const std::string generate =
      client.dialect() == EngineDialect::kVllm ? "POST /v1/completions" : "POST /generate";
  std::vector<std::string> refused;
  if (found.token_ids.present == false) {
    refused.push_back(StrFormat(
        "%s: %s does not return the token ids it generates (%s); libra trains on token ids, so "
        "[engine] dialect = \"%s\" needs an engine that returns them",
        who.c_str(), generate.c_str(), found.token_ids.error.c_str(),
        NameOf(client.dialect()).c_str()));
  }
  if (found.reload_from_disk.present == false) {
    const std::string route = client.dialect() == EngineDialect::kVllm
                                  ? "POST /collective_rpc (reload_weights)"
                                  : "POST /update_weights_from_disk";
    refused.push_back(StrFormat(
        "%s: %s failed (%s); [trainer] weight_sync = \"%s\" needs engines that reload weights "
        "from disk: use weight_sync = \"restart\" (or \"none\" to roll out without syncing)",
        who.c_str(), route.c_str(), found.reload_from_disk.error.c_str(),
        NameOf(options.trainer.weight_sync).c_str()));
  }
  if (colocated && found.sleep_wake.present == false) {
    const std::string route = client.dialect() == EngineDialect::kVllm
                                  ? "POST /sleep, /wake_up"
                                  : "POST /release_memory_occupation, /resume_memory_occupation";
    refused.push_back(StrFormat(
        "%s: %s failed (%s); a colocated layout ([system] planner) frees the engines' memory "
        "for every train step, which needs them",
        who.c_str(), route.c_str(), found.sleep_wake.error.c_str()));
  }
  if (refused.empty()) return Status();
  return Status(StatusCode::kInvalidRecipe, StrJoin(refused, "\n"));
}

}  // namespace libra::cluster
