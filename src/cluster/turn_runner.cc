#include "cluster/turn_runner.h"

#include <algorithm>

#include "common/strings.h"

namespace libra::cluster {
namespace {

// {"tokens": [...]} (and the optional "status") of a task command's output.
Result<JsonValue> ParseTaskOutput(const std::string& what, const std::string& output) {
  Result<JsonValue> json = ParseJson(output);
  if (!json.ok() || !json->is_object()) {
    std::string shown = output.substr(0, 200);
    return Status::Backend(what, "expected one JSON object on stdout, got '" + shown + "'");
  }
  return json;
}

Result<std::vector<TokenId>> TokensOf(const std::string& what, const JsonValue& object) {
  ReplyReader reader(what);
  LIBRA_ASSIGN_OR_RETURN(const JsonValue* tokens, reader.Member(object, "", "tokens"));
  return reader.TokenIds(*tokens, "tokens");
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  return x & 0x7FFFFFFFFFFFULL;
}

}  // namespace

std::string TrajectoryName(TrajectoryId id) {
  if (id.value >= kFirstEvalTrajectory) {
    return StrFormat("eval-%lld", static_cast<long long>(id.value - kFirstEvalTrajectory));
  }
  return StrFormat("t%lld", static_cast<long long>(id.value));
}

TurnRunner::TurnRunner(Runtime& runtime, EngineSupervisor& engines, Sandbox& sandbox, uint64_t seed)
    : runtime_(runtime), engines_(engines), sandbox_(sandbox), seed_(seed) {}

Result<SandboxCall> TurnRunner::TaskCall(const std::string& name, const CommandTemplate& command,
                                         const std::map<std::string, std::string>& values,
                                         std::string input) const {
  const AgentOptions& agent = runtime_.options->agent;
  SandboxCall call;
  call.name = name;
  LIBRA_ASSIGN_OR_RETURN(call.argv, command.Expand(runtime_.Values(values)));
  call.input = std::move(input);
  call.env = agent.env;
  call.limits = agent.limits;
  return call;
}

void TurnRunner::WithPrompt(int64_t prompt, std::function<void()> then) {
  Prompt& p = prompts_[prompt];
  if (p.loaded) return then();
  p.waiters.push_back(std::move(then));
  if (p.waiters.size() > 1) return;  // already being loaded
  Result<SandboxCall> call =
      TaskCall(StrFormat("prompt-%lld", static_cast<long long>(prompt)),
               runtime_.options->agent.prompt_command, {{"prompt", std::to_string(prompt)}}, "{}");
  if (!call.ok()) return runtime_.Fail(call.status());
  sandbox_.Run(*call, [this, prompt, name = call->name](Result<std::string> out) {
    if (!out.ok()) return runtime_.Fail(out.status());
    Result<JsonValue> json = ParseTaskOutput(name, *out);
    if (!json.ok()) return runtime_.Fail(json.status());
    Result<std::vector<TokenId>> ids = TokensOf(name, *json);
    if (!ids.ok()) return runtime_.Fail(ids.status());
    if (ids->empty()) return runtime_.Fail(Status::Backend(name, "the prompt has no tokens"));
    // As verl does by default (truncation = "error"): a prompt that leaves no room to generate
    // stops the run here, naming it, not at the train step.
    const int64_t limit = runtime_.options->engine.max_context_tokens;
    if (static_cast<int64_t>(ids->size()) >= limit) {
      return runtime_.Fail(Status::Backend(
          name, StrFormat("the prompt has %zu tokens, and [engine] max_context_tokens = %lld "
                          "leaves no room to generate; raise it, or shorten or drop the prompt",
                          ids->size(), static_cast<long long>(limit))));
    }
    Prompt& loaded = prompts_[prompt];
    loaded.loaded = true;
    loaded.ids = std::move(*ids);
    for (auto& waiter : std::exchange(loaded.waiters, {})) waiter();
  });
}

void TurnRunner::StartTurn(const backend::StartTurn& turn) {
  Trajectory& t = trajectories_[turn.trajectory];
  if (turn.turn == 0 && t.turns == 0) {
    t.prompt = turn.prompt;
    t.sample = turn.sample;
  }
  WithPrompt(turn.prompt, [this, turn] {
    Trajectory& loaded = trajectories_[turn.trajectory];
    if (loaded.prompt_ids.empty()) loaded.prompt_ids = prompts_[turn.prompt].ids;
    Generate(turn);
  });
}

void TurnRunner::Generate(const backend::StartTurn& turn) {
  const EngineOptions& options = runtime_.options->engine;
  Trajectory& t = trajectories_.at(turn.trajectory);
  Engine* e = engines_.Serving(turn.instance);
  if (e == nullptr) {
    runtime_.Emit(backend::TurnFailed{turn.trajectory, turn.instance,
                                      "instance " + turn.instance.ToString() + " is not serving"},
                  true);
    return;
  }
  if (e->state != EngineState::kReady || e->paused) {
    engines_.WhenServing(e->key, [this, turn](Status serving) {
      if (serving.ok()) return Generate(turn);
      runtime_.Emit(backend::TurnFailed{turn.trajectory, turn.instance, serving.message()}, true);
    });
    return;
  }
  const int64_t context = static_cast<int64_t>(t.prompt_ids.size() + t.completion.size());
  const int64_t room = options.max_context_tokens - context;
  if (room <= 0) {
    FinishTrajectory(turn, 0, workload::TurnEnd::kTruncated, runtime_.Now());
    return;
  }
  GenerateRequest request;
  request.prompt = t.prompt_ids;
  request.prompt.insert(request.prompt.end(), t.completion.begin(), t.completion.end());
  request.max_tokens = static_cast<int>(std::min<int64_t>(options.max_tokens_per_turn, room));
  request.temperature = options.temperature;
  request.top_p = options.top_p;
  request.top_k = options.top_k;
  request.min_p = options.min_p;
  request.stop_token_ids = runtime_.options->agent.stop_token_ids;
  uint64_t seed = Mix(Mix(seed_, static_cast<uint64_t>(turn.trajectory.value)), turn.turn);
  // A turn sent again is sampled again: another seed.
  if (auto failed = failures_.find(turn.trajectory); failed != failures_.end()) {
    seed = Mix(seed, static_cast<uint64_t>(failed->second));
  }
  request.seed = static_cast<int64_t>(seed);
  const uint64_t attempt = engines_.BeginTurn(e->key, turn.trajectory);
  request.request_id = StrFormat("libra-%s-%d-a%llu", TrajectoryName(turn.trajectory).c_str(),
                                 turn.turn, static_cast<unsigned long long>(attempt));
  request.timeout_s = options.turn_timeout_s;
  const double started = runtime_.Now();
  runtime_.transport->Send(
      e->client->Generate(request),
      [this, turn, key = e->key, attempt, started, request](Result<HttpResponse> r) {
        OnGenerated(turn, key, attempt, started, request, std::move(r));
      });
}

void TurnRunner::OnGenerated(const backend::StartTurn& turn, int64_t engine_key, uint64_t attempt,
                             double started_at, const GenerateRequest& request,
                             Result<HttpResponse> response) {
  if (!engines_.EndTurn(engine_key, turn.trajectory, attempt)) return;  // engine died
  Engine& e = engines_.at(engine_key);
  if (!response.ok()) {
    engines_.Check(engine_key);
    return Retry(turn, response.status().message());
  }
  if (response->status >= 500) {
    engines_.Check(engine_key);
    return Retry(turn, StrFormat("%s answered HTTP %ld: %s", e.name.c_str(), response->status,
                                 ErrorMessageOf(response->body).c_str()));
  }
  Result<GenerateResult> result = e.client->ParseGenerate(request, *response);
  if (!result.ok()) return runtime_.Fail(result.status());
  if (result->finish_reason == FinishReason::kAbort) {
    // Aborted by libra (its engine is going away): the coordinator routes it again.
    runtime_.Emit(backend::TurnFailed{turn.trajectory, turn.instance, e.name + " aborted the turn"},
                  true);
    return;
  }
  failures_.erase(turn.trajectory);
  if (result->overshoot_tokens > 0) {
    ++overshoot_turns_;
    overshoot_tokens_ += result->overshoot_tokens;
  }
  const AgentOptions& agent = runtime_.options->agent;
  Trajectory& t = trajectories_.at(turn.trajectory);
  t.completion.insert(t.completion.end(), result->token_ids.begin(), result->token_ids.end());
  t.logprobs.insert(t.logprobs.end(), result->logprobs.begin(), result->logprobs.end());
  t.mask.insert(t.mask.end(), result->token_ids.size(), 1);
  t.last_turn = result->token_ids;
  ++t.turns;
  const auto generated = static_cast<int64_t>(result->token_ids.size());
  const bool called = result->finish_reason == FinishReason::kStop && !t.last_turn.empty() &&
                      t.last_turn.back() == agent.tool_call_token;
  if (called && t.turns < agent.max_turns) {
    backend::TurnDone done;
    done.trajectory = turn.trajectory;
    done.instance = turn.instance;
    done.generated_tokens = generated;
    done.end = workload::TurnEnd::kToolCall;
    done.tool = agent.tool_name;
    done.started_at = started_at;
    if (turn.turn == 0) done.prompt_tokens = static_cast<int64_t>(t.prompt_ids.size());
    runtime_.Emit(std::move(done), true);
    return;
  }
  const workload::TurnEnd end = result->finish_reason == FinishReason::kStop && !called
                                    ? workload::TurnEnd::kStop
                                    : workload::TurnEnd::kTruncated;
  FinishTrajectory(turn, generated, end, started_at);
}

void TurnRunner::Retry(const backend::StartTurn& turn, const std::string& why) {
  const EngineOptions& options = runtime_.options->engine;
  const int failed = ++failures_[turn.trajectory];
  const std::string where = "instance " + turn.instance.ToString();
  if (failed <= options.turn_retries) {
    const double backoff = options.retry_backoff_s * static_cast<double>(1 << (failed - 1));
    runtime_.Emit(backend::Incident{"retry", where,
                                    StrFormat("trajectory %lld turn %d, attempt %d failed: %s; "
                                              "again in %.1f s with another seed",
                                              static_cast<long long>(turn.trajectory.value),
                                              turn.turn, failed, why.c_str(), backoff),
                                    runtime_.Now()},
                  false);
    runtime_.loop->AddTimer(std::chrono::duration_cast<EventLoop::Clock::duration>(
                                std::chrono::duration<double>(backoff)),
                            [this, turn] { Generate(turn); });
    return;
  }
  failures_.erase(turn.trajectory);
  trajectories_.erase(turn.trajectory);
  ++dropped_;
  runtime_.Emit(
      backend::TurnFailed{
          turn.trajectory, turn.instance,
          StrFormat("turn %d failed %d times (last: %s)", turn.turn, failed, why.c_str()), true},
      true);
  const int64_t ended = finished_ + dropped_;
  if (static_cast<double>(dropped_) >
      options.max_dropped_fraction * static_cast<double>(std::max<int64_t>(ended, 100))) {
    runtime_.Fail(Status::Backend(
        "cluster", StrFormat("%lld of %lld trajectories were dropped after failed turns, more "
                             "than [engine] max_dropped_fraction = %g allows (counted over at "
                             "least 100 trajectories); the last: turn %d of trajectory %lld on "
                             "%s failed %d times, last: %s",
                             static_cast<long long>(dropped_), static_cast<long long>(ended),
                             options.max_dropped_fraction, turn.turn,
                             static_cast<long long>(turn.trajectory.value), where.c_str(), failed,
                             why.c_str())));
  }
}

JsonValue TurnRunner::TaskInput(TrajectoryId id) const {
  const Trajectory& t = trajectories_.at(id);
  return JsonValue::MakeObject()
      .Set("seed", static_cast<int64_t>(seed_))
      .Set("prompt", t.prompt)
      .Set("sample", t.sample)
      .Set("turn", t.turns)
      .Set("prompt_ids", TokenIdsToJson(t.prompt_ids))
      .Set("completion_ids", TokenIdsToJson(t.completion))
      .Set("call", TokenIdsToJson(t.last_turn))
      .Set("answer", TokenIdsToJson(t.last_turn));
}

void TurnRunner::FinishTrajectory(const backend::StartTurn& turn, int64_t generated,
                                  workload::TurnEnd end, double started_at) {
  Result<SandboxCall> call =
      TaskCall("reward-" + TrajectoryName(turn.trajectory), runtime_.options->agent.reward_command,
               {}, ToJson(TaskInput(turn.trajectory)));
  if (!call.ok()) return runtime_.Fail(call.status());
  sandbox_.Run(
      *call, [this, turn, generated, end, started_at, name = call->name](Result<std::string> out) {
        if (!out.ok()) return runtime_.Fail(out.status());
        Result<JsonValue> json = ParseTaskOutput(name, *out);
        if (!json.ok()) return runtime_.Fail(json.status());
        Result<double> reward = ReplyReader(name).Number(*json, "", "reward");
        if (!reward.ok()) return runtime_.Fail(reward.status());
        ++finished_;
        backend::TurnDone done;
        done.trajectory = turn.trajectory;
        done.instance = turn.instance;
        done.generated_tokens = generated;
        done.end = end;
        done.reward = *reward;
        done.started_at = started_at;
        if (turn.turn == 0) {
          done.prompt_tokens =
              static_cast<int64_t>(trajectories_.at(turn.trajectory).prompt_ids.size());
        }
        runtime_.Emit(std::move(done), true);
      });
}

void TurnRunner::RunTool(const backend::RunTool& tool) {
  const double started = runtime_.Now();
  const AgentOptions& agent = runtime_.options->agent;
  if (!agent.tool_url.empty()) return RunHttpTool(tool, started);
  Result<SandboxCall> call =
      TaskCall(StrFormat("tool-%s-%d", TrajectoryName(tool.trajectory).c_str(),
                         trajectories_.at(tool.trajectory).turns),
               agent.tool_command, {}, ToJson(TaskInput(tool.trajectory)));
  if (!call.ok()) return runtime_.Fail(call.status());
  sandbox_.Run(*call,
               [this, id = tool.trajectory, started, name = call->name](Result<std::string> out) {
                 const bool timed_out = !out.ok() && out.status().code() == StatusCode::kTimeout;
                 ToolFinished(id, started, name, std::move(out), timed_out);
               });
}

void TurnRunner::RunHttpTool(const backend::RunTool& tool, double started) {
  const AgentOptions& agent = runtime_.options->agent;
  const std::string name = StrFormat("tool-%s-%d", TrajectoryName(tool.trajectory).c_str(),
                                     trajectories_.at(tool.trajectory).turns);
  const HttpRequest request =
      PostJson(agent.tool_url, TaskInput(tool.trajectory), agent.limits.timeout_s);
  runtime_.transport->Send(request, [this, id = tool.trajectory, started,
                                     name](Result<HttpResponse> response) {
    if (!response.ok()) {
      const bool timed_out = response.status().code() == StatusCode::kTimeout;
      return ToolFinished(id, started, name, response.status(), timed_out);
    }
    if (response->status < 200 || response->status >= 300) {
      return ToolFinished(id, started, name,
                          Status::Backend(name, StrFormat("HTTP %ld: %s", response->status,
                                                          ErrorMessageOf(response->body).c_str())),
                          false);
    }
    ToolFinished(id, started, name, std::move(response->body), false);
  });
}

void TurnRunner::ToolFinished(TrajectoryId id, double started, const std::string& name,
                              Result<std::string> output, bool timed_out) {
  backend::ToolDone done;
  done.trajectory = id;
  done.started_at = started;
  std::vector<TokenId> tokens;
  Status failed = output.status();
  if (output.ok()) {
    // {"tokens": [...], "status": "success" | "failure" ("error") | "timeout"}.
    Result<JsonValue> json = ParseTaskOutput(name, *output);
    Result<std::vector<TokenId>> ids =
        json.ok() ? TokensOf(name, *json) : Result<std::vector<TokenId>>(json.status());
    if (ids.ok()) {
      tokens = std::move(*ids);
      const JsonValue* status = json->Find("status");
      std::string named =
          status != nullptr && status->is_string() ? status->as_string() : "success";
      if (named == "error") named = "failure";
      done.status =
          EnumNames<workload::ToolStatus>::Find(named).value_or(workload::ToolStatus::kFailure);
    } else {
      failed = ids.status();
    }
  }
  if (!failed.ok()) {
    // A tool that could not run is a failed call for the router, and an incident on record.
    done.status = timed_out ? workload::ToolStatus::kTimeout : workload::ToolStatus::kFailure;
    runtime_.Emit(backend::Incident{"tool", name, failed.message(), started}, false);
  }
  Trajectory& t = trajectories_.at(id);
  t.completion.insert(t.completion.end(), tokens.begin(), tokens.end());
  t.logprobs.insert(t.logprobs.end(), tokens.size(), 0.0);
  t.mask.insert(t.mask.end(), tokens.size(), 0);
  done.output_tokens = static_cast<int64_t>(tokens.size());
  runtime_.Emit(std::move(done), true);
}

void TurnRunner::Forget(TrajectoryId trajectory) {
  trajectories_.erase(trajectory);
  failures_.erase(trajectory);
}

std::optional<backend::Incident> TurnRunner::TakeOvershoot() {
  if (overshoot_tokens_ == 0) return std::nullopt;
  backend::Incident incident{
      "overshoot", "engines",
      StrFormat("%lld turns generated %lld tokens past a stop token (the engines do not stop at "
                "token ids); cut, never trained on",
                static_cast<long long>(overshoot_turns_),
                static_cast<long long>(overshoot_tokens_)),
      runtime_.Now()};
  overshoot_turns_ = overshoot_tokens_ = 0;
  return incident;
}

Result<std::vector<TrainSequence>> TurnRunner::TakeSequences(
    const std::vector<TrajectoryId>& trajectories, const std::vector<double>& advantages) {
  std::vector<TrainSequence> sequences;
  sequences.reserve(trajectories.size());
  for (size_t i = 0; i < trajectories.size(); ++i) {
    auto it = trajectories_.find(trajectories[i]);
    if (it == trajectories_.end()) {
      return Status::Internal("no transcript of trajectory " + trajectories[i].ToString());
    }
    TrainSequence s;
    s.prompt_ids = std::move(it->second.prompt_ids);
    s.completion_ids = std::move(it->second.completion);
    s.logprobs = std::move(it->second.logprobs);
    s.loss_mask = std::move(it->second.mask);
    s.advantage = i < advantages.size() ? advantages[i] : 0.0;
    sequences.push_back(std::move(s));
    trajectories_.erase(it);
  }
  return sequences;
}

}  // namespace libra::cluster
