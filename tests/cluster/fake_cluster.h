// A cluster without torch, for testing the cluster backend's parts: a fake launcher whose
// "engines" and "trainer" are sleeping processes (real children, so they can be killed), with
// HttpTestServers on their ports that answer as an SGLang engine and as libra's trainer protocol
// would; and a sink that records what the parts report. Everything runs on one EventLoop.
#pragma once

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_backend.h"
#include "cluster/cluster_options.h"
#include "cluster/engine_supervisor.h"
#include "cluster/runtime.h"
#include "cluster/sandbox.h"
#include "cluster/turn_runner.h"
#include "common/json.h"
#include "common/strings.h"
#include "gtest/gtest.h"
#include "support/http_test_server.h"
#include "support/test_util.h"

namespace libra::test {

/// Runs every process as `sleep 600`, or as the program given for its name in `programs`
/// (named and logged as asked), remembering what it was asked to run.
class FakeLauncher final : public cluster::Launcher {
 public:
  explicit FakeLauncher(std::vector<cluster::ProcessSpec>* asked) : asked_(asked) {}
  std::string Describe() const override { return "fake"; }
  Result<cluster::ProcessSpec> Wrap(const cluster::ProcessSpec& spec) const override {
    asked_->push_back(spec);
    cluster::ProcessSpec wrapped = spec;
    auto it = programs.find(spec.name);
    wrapped.argv = it != programs.end() ? it->second : std::vector<std::string>{"sleep", "600"};
    return wrapped;
  }

  std::map<std::string, std::vector<std::string>> programs;

 private:
  std::vector<cluster::ProcessSpec>* asked_;
};

/// Records events and the first failure; a failure stops the loop.
class RecordingSink final : public cluster::EventSink {
 public:
  explicit RecordingSink(cluster::EventLoop* loop) : loop_(loop) {}
  void Emit(backend::EventWhat what, bool completes) override {
    events.push_back(std::move(what));
    completed += completes;
  }
  void Fail(Status error) override {
    if (failure.ok()) failure = std::move(error);
    loop_->Stop();
  }
  /// The incidents of `kind`, as "resource: detail".
  std::vector<std::string> Incidents(const std::string& kind) const {
    std::vector<std::string> out;
    for (const backend::EventWhat& e : events) {
      if (const auto* i = std::get_if<backend::Incident>(&e); i && i->kind == kind) {
        out.push_back(i->resource + ": " + i->detail);
      }
    }
    return out;
  }
  template <typename T>
  std::vector<T> Of() const {
    std::vector<T> out;
    for (const backend::EventWhat& e : events) {
      if (const auto* x = std::get_if<T>(&e)) out.push_back(*x);
    }
    return out;
  }

  std::vector<backend::EventWhat> events;
  int completed = 0;
  Status failure;

 private:
  cluster::EventLoop* loop_;
};

/// One request a fake server received.
struct Received {
  int port = 0;
  std::string path;
  JsonValue body;
};

/// SGLang-native engines on `count` consecutive ports from `base_port`. By default a turn whose
/// prompt does not yet hold `tool_output` generates [7, tool_call] (a tool call), else [8, eos];
/// every control request succeeds.
class FakeEngines {
 public:
  using Generator = std::function<TestHttpReply(int port, const std::vector<int64_t>& prompt)>;
  /// Replies of control routes by path (e.g. "/release_memory_occupation"), when set.
  using Control = std::function<std::optional<TestHttpReply>(int port, const std::string& path)>;

  static constexpr int kToolCall = 20;
  static constexpr int kEos = 2;
  static constexpr int kToolOutput = 30;

  FakeEngines(cluster::EventLoop* loop, int base_port, int count) {
    for (int i = 0; i < count; ++i) {
      const int port = base_port + i;
      auto server = HttpTestServer::Start(
          loop, [this, port](const TestHttpRequest& r) { return Answer(port, r); }, port);
      EXPECT_TRUE(server.ok()) << server.status().message();
      if (server.ok()) servers_.push_back(std::move(*server));
    }
  }

  /// A finished SGLang reply for `tokens`.
  static TestHttpReply Reply(const std::vector<int64_t>& prompt, const std::vector<int>& tokens,
                             const std::string& finish = "stop") {
    JsonValue::Array logprobs;
    for (int t : tokens) logprobs.push_back(JsonValue::MakeArray({JsonValue(-0.5), t, nullptr}));
    JsonValue finish_reason = JsonValue::MakeObject().Set("type", finish);
    if (finish == "stop" && !tokens.empty()) finish_reason.Set("matched", tokens.back());
    JsonValue meta = JsonValue::MakeObject()
                         .Set("finish_reason", std::move(finish_reason))
                         .Set("output_token_logprobs", JsonValue::MakeArray(std::move(logprobs)))
                         .Set("prompt_tokens", static_cast<int64_t>(prompt.size()))
                         .Set("completion_tokens", static_cast<int64_t>(tokens.size()));
    TestHttpReply reply;
    reply.body =
        JsonValue::MakeObject().Set("text", "").Set("meta_info", std::move(meta)).ToString();
    return reply;
  }

  /// A route the engine does not have, as FastAPI answers it.
  static TestHttpReply NotFound() {
    TestHttpReply reply;
    reply.status = 404;
    reply.body = R"({"detail": "Not Found"})";
    return reply;
  }

  /// Requests received so far on `path` (every port).
  int Count(const std::string& path) const {
    int n = 0;
    for (const Received& r : received) n += r.path == path;
    return n;
  }

  Generator generate;
  Control control;
  std::vector<Received> received;
  /// When set, every request is appended as "engine <port> <path>".
  std::vector<std::string>* timeline = nullptr;

 private:
  TestHttpReply Answer(int port, const TestHttpRequest& request) {
    Received r{port, request.path, JsonValue()};
    if (!request.body.empty()) {
      Result<JsonValue> body = ParseJson(request.body);
      if (body.ok()) r.body = *body;
    }
    received.push_back(r);
    if (timeline != nullptr) {
      timeline->push_back("engine " + std::to_string(port) + " " + request.path);
    }
    if (request.path == "/generate") {
      std::vector<int64_t> prompt;
      if (const JsonValue* ids = r.body.Find("input_ids"); ids && ids->is_array()) {
        for (const JsonValue& id : ids->as_array()) prompt.push_back(id.as_int());
      }
      if (generate) return generate(port, prompt);
      const bool answered =
          std::find(prompt.begin(), prompt.end(), int64_t{kToolOutput}) != prompt.end();
      return Reply(prompt, answered ? std::vector<int>{8, kEos} : std::vector<int>{7, kToolCall});
    }
    if (control) {
      if (std::optional<TestHttpReply> reply = control(port, request.path)) return *reply;
    }
    TestHttpReply ok;
    ok.body = request.path == "/health" ? "" : R"({"success": true})";
    return ok;
  }

  std::vector<std::unique_ptr<HttpTestServer>> servers_;
};

/// libra's trainer protocol on one port. It answers only while `alive()` says so (else it
/// resets the connection, as a dead process's port would); it holds a version, writes the files
/// it is asked to save, and keeps its replicas.
class FakeTrainer {
 public:
  FakeTrainer(cluster::EventLoop* loop, int port) {
    auto server = HttpTestServer::Start(
        loop, [this](const TestHttpRequest& r) { return Answer(r); }, port);
    EXPECT_TRUE(server.ok()) << server.status().message();
    if (server.ok()) server_ = std::move(*server);
  }

  int Count(const std::string& path) const {
    int n = 0;
    for (const Received& r : received) n += r.path == path;
    return n;
  }

  std::function<bool()> alive = [] { return true; };
  /// The reply to a request on `path` instead of the protocol's, when set and it returns one.
  std::function<std::optional<TestHttpReply>(const std::string& path)> control;
  /// When set, every request is appended as "trainer <path>".
  std::vector<std::string>* timeline = nullptr;
  int version = 0;
  std::vector<std::string> replicas = {"replica-0"};
  /// Reported by /train_step when set.
  std::optional<double> logprob_diff;
  std::optional<double> clip_fraction;
  std::vector<Received> received;

 private:
  static TestHttpReply Json(const JsonValue& body, int status = 200) {
    TestHttpReply reply;
    reply.status = status;
    reply.body = body.ToString();
    return reply;
  }

  TestHttpReply Answer(const TestHttpRequest& request) {
    if (!alive()) {
      TestHttpReply reset;
      reset.kind = TestHttpReply::Kind::kReset;
      return reset;
    }
    Received r{0, request.path, JsonValue()};
    if (!request.body.empty()) {
      Result<JsonValue> body = ParseJson(request.body);
      if (body.ok()) r.body = *body;
    }
    received.push_back(r);
    if (timeline != nullptr) timeline->push_back("trainer " + request.path);
    if (control) {
      if (std::optional<TestHttpReply> reply = control(request.path)) return *reply;
    }
    const JsonValue& body = r.body;
    if (request.path == "/health") {
      return Json(JsonValue::MakeObject().Set("status", "ok").Set("version", version));
    }
    if (request.path == "/save_weights") {
      const std::string path = body.Find("path")->as_string();
      std::ofstream(path) << "weights v" << version << "\n";
      return Json(
          JsonValue::MakeObject().Set("path", path).Set("version", version).Set("seconds", 0.0));
    }
    if (request.path == "/train_step") {
      int64_t tokens = 0;
      for (const JsonValue& s : body.Find("sequences")->as_array()) {
        for (const JsonValue& m : s.Find("loss_mask")->as_array()) tokens += m.as_int();
      }
      ++version;
      JsonValue reply = JsonValue::MakeObject()
                            .Set("step", body.Find("step")->as_int())
                            .Set("version", version)
                            .Set("loss", 0.0)
                            .Set("kl", 0.0)
                            .Set("grad_norm", 0.0)
                            .Set("tokens", tokens)
                            .Set("seconds", 0.0);
      if (logprob_diff) reply.Set("logprob_diff", *logprob_diff);
      if (clip_fraction) reply.Set("clip_fraction", *clip_fraction);
      return Json(reply);
    }
    if (request.path == "/join" || request.path == "/leave") {
      const std::string replica = body.Find("replica")->as_string();
      auto it = std::find(replicas.begin(), replicas.end(), replica);
      if (request.path == "/join") {
        if (it != replicas.end()) return Json(JsonValue::MakeObject().Set("error", "member"), 400);
        replicas.push_back(replica);
      } else {
        if (it == replicas.end())
          return Json(JsonValue::MakeObject().Set("error", "no member"), 400);
        replicas.erase(it);
      }
      JsonValue::Array names;
      for (const std::string& name : replicas) names.emplace_back(name);
      return Json(JsonValue::MakeObject()
                      .Set("replicas", JsonValue::MakeArray(std::move(names)))
                      .Set("dp_size", static_cast<int64_t>(replicas.size())));
    }
    if (request.path == "/init_weight_update_group") {
      JsonValue tensor = JsonValue::MakeObject()
                             .Set("name", "w")
                             .Set("dtype", "float32")
                             .Set("shape", JsonValue::MakeArray({JsonValue(4)}));
      return Json(JsonValue::MakeObject()
                      .Set("success", true)
                      .Set("tensors", JsonValue::MakeArray({std::move(tensor)})));
    }
    if (request.path == "/broadcast_weights") {
      return Json(JsonValue::MakeObject()
                      .Set("version", version)
                      .Set("tensors", 1)
                      .Set("bytes", 16)
                      .Set("seconds", 0.0));
    }
    return Json(JsonValue::MakeObject().Set("error", "unknown path " + request.path), 404);
  }

  std::unique_ptr<HttpTestServer> server_;
};

/// Options for a one-node cluster of fake engines and a fake trainer; tools and rewards are
/// small shell commands: the prompt is [1, 3, 4], the tool answers [30] and the reward is 1.
inline cluster::ClusterOptions FakeClusterOptions(const std::string& dir, int engine_port,
                                                  int trainer_port) {
  cluster::ClusterOptions o;
  cluster::HostOptions host;
  host.address = "127.0.0.1";
  o.launcher.hosts = {host};
  o.engine.dialect = cluster::EngineDialect::kSglang;
  o.engine.command = *cluster::CommandTemplate::Parse("engine --port {port} --tp {tp}");
  o.engine.base_port = engine_port;
  o.engine.health_timeout = std::chrono::milliseconds(60000);
  o.engine.restarts = 1;
  o.engine.max_tokens_per_turn = 16;
  o.trainer.command = *cluster::CommandTemplate::Parse("trainer --port {port} --weights {weights}");
  o.trainer.initial_weights = dir + "/initial.pt";
  o.trainer.port = trainer_port;
  o.trainer.health_timeout = std::chrono::milliseconds(60000);
  o.trainer.restarts = 1;
  o.agent.prompt_command = *cluster::CommandTemplate::Parse(R"(echo '{{"tokens": [1, 3, 4]}}')");
  o.agent.tool_command = *cluster::CommandTemplate::Parse(
      R"(sh -c 'cat >/dev/null; echo "{{\"tokens\": [30], \"status\": \"success\"}}"')");
  o.agent.reward_command =
      *cluster::CommandTemplate::Parse(R"(sh -c 'cat >/dev/null; echo "{{\"reward\": 1}}"')");
  o.agent.stop_token_ids = {FakeEngines::kToolCall};
  o.agent.tool_call_token = FakeEngines::kToolCall;
  o.agent.limits.timeout_s = 60;
  std::ofstream(o.trainer.initial_weights) << "initial\n";
  return o;
}

/// Runs `loop` until `done()` holds or a generous deadline passes; false then.
inline bool RunLoopUntil(cluster::EventLoop& loop, const std::function<bool()>& done,
                         std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const Status s = loop.RunUntil(done, cluster::EventLoop::Clock::now() + timeout);
  return s.ok() && done();
}

/// A Runtime over a real loop, processes and transport, with the fake launcher, a recording sink
/// and FakeClusterOptions (engine and trainer ports free), in a temporary run folder.
struct FakeRuntime {
  FakeRuntime() {
    auto made_loop = cluster::EventLoop::Create();
    loop = std::move(*made_loop);
    processes = std::make_unique<cluster::ProcessSet>(loop.get());
    auto made_transport = cluster::HttpTransport::Create(loop.get());
    transport = std::move(*made_transport);
    sink = std::make_unique<RecordingSink>(loop.get());
    launcher = std::make_unique<FakeLauncher>(&asked);
    options = FakeClusterOptions(dir.path().string(), FreePorts(8), FreePort());
    runtime.options = &options;
    runtime.run_dir = dir.File("run");
    runtime.loop = loop.get();
    runtime.processes = processes.get();
    runtime.transport = transport.get();
    runtime.launchers = {launcher.get()};
    runtime.sink = sink.get();
    std::filesystem::create_directories(runtime.run_dir + "/weights");
  }
  ~FakeRuntime() {
    runtime.shutting_down = true;
    processes->StopAll(std::chrono::milliseconds(2000));
  }
  /// Kills process `pid` (SIGKILL).
  static void Kill(std::optional<pid_t> pid) {
    ASSERT_TRUE(pid.has_value());
    ASSERT_EQ(kill(*pid, SIGKILL), 0);
  }
  bool RunUntil(const std::function<bool()>& done) {
    return RunLoopUntil(*loop, [&] { return done() || !sink->failure.ok(); }) && done();
  }

  ScopedTempDir dir;
  std::unique_ptr<cluster::EventLoop> loop;
  std::unique_ptr<cluster::ProcessSet> processes;
  std::unique_ptr<cluster::HttpTransport> transport;
  std::unique_ptr<RecordingSink> sink;
  std::vector<cluster::ProcessSpec> asked;
  std::unique_ptr<FakeLauncher> launcher;
  cluster::ClusterOptions options;
  cluster::Runtime runtime;
};

/// A layout of `train_gpus` training GPUs (one replica each) and instances of `tps`, in order,
/// on node 0 from GPU `first_gpu` (default: after the trainer's), wrapping around at six GPUs.
inline backend::Layout FakeLayout(int train_gpus, const std::vector<int>& tps,
                                  bool colocated = false, int first_gpu = -1) {
  backend::Layout layout;
  layout.train_gpus = train_gpus;
  layout.train.dp = std::max(1, train_gpus);
  if (train_gpus == 0) layout.train.dp = 0;
  layout.colocated = colocated;
  int gpu = first_gpu >= 0 ? first_gpu : colocated ? 0 : train_gpus;
  for (size_t i = 0; i < tps.size(); ++i) {
    if (gpu + tps[i] > 6) gpu = 0;
    layout.instances.push_back(
        backend::InstanceSpec{InstanceId(static_cast<int64_t>(i)), tps[i], 0, gpu});
    gpu += tps[i];
  }
  return layout;
}

/// The parts a turn needs, on a FakeRuntime: `count` fake engines started and serving instances
/// 0 .. count - 1 (TP 1), their supervisor, a sandbox and a TurnRunner (seed 42).
struct FakeTurnRig {
  explicit FakeTurnRig(int count)
      : engines(f.loop.get(), f.options.engine.base_port, count),
        supervisor(f.runtime, versions),
        sandbox(f.loop.get(), f.processes.get(), f.dir.File("scratch")),
        runner(f.runtime, supervisor, sandbox, 42) {
    std::vector<int64_t> keys;
    for (int i = 0; i < count; ++i) {
      const int64_t key = supervisor.Add(backend::InstanceSpec{InstanceId(i), 1, 0, i}).key;
      std::optional<Status> ready;
      supervisor.Launch(key, [&](Status s) { ready = s; });
      EXPECT_TRUE(f.RunUntil([&] { return ready.has_value(); }));
      keys.push_back(key);
    }
    supervisor.SetInstances(keys);
  }

  FakeRuntime f;
  FakeEngines engines;
  cluster::WeightVersions versions;
  cluster::EngineSupervisor supervisor;
  cluster::Sandbox sandbox;
  cluster::TurnRunner runner;
};

/// A ClusterBackend whose processes are the fake launcher's sleeping children, and whose engines
/// and trainer are FakeEngines and a FakeTrainer served on the backend's own loop.
class FakeClusterBackend {
 public:
  /// Starts the backend; `adjust` may change the options first.
  void Start(const std::function<void(cluster::ClusterOptions&)>& adjust = {}) {
    auto loop = cluster::EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    options_ = FakeClusterOptions(dir_.path().string(), FreePorts(8), FreePort());
    options_.engine.retry_backoff_s = 0.01;
    if (adjust) adjust(options_);
    engines_ = std::make_unique<FakeEngines>(loop->get(), options_.engine.base_port, 8);
    trainer_ = std::make_unique<FakeTrainer>(loop->get(), options_.trainer.port);
    engines_->timeline = &timeline_;
    trainer_->timeline = &timeline_;
    cluster::ClusterBackend::Overrides overrides;
    overrides.launchers.push_back(std::make_unique<FakeLauncher>(&asked_));
    overrides.loop = std::move(*loop);
    auto backend = cluster::ClusterBackend::Create(recipe::Recipe{}, options_, dir_.File("run"), 0,
                                                   std::move(overrides));
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    backend_ = std::move(*backend);
  }
  void Stop() {
    // The fakes live on the backend's loop: they go first.
    engines_.reset();
    trainer_.reset();
    backend_.reset();
  }

  /// Submits `action` and collects events until one of type T arrives (or the run fails:
  /// `*failure` gets the error when given, else the test fails).
  template <typename T>
  std::vector<backend::Event> Until(const backend::Action& action, Status* failure = nullptr) {
    const Status submitted = backend_->Submit(action);
    EXPECT_TRUE(submitted.ok()) << submitted.message();
    std::vector<backend::Event> seen;
    for (;;) {
      auto events = backend_->Wait();
      if (!events.ok()) {
        if (failure != nullptr) {
          *failure = events.status();
        } else {
          ADD_FAILURE() << events.status().message();
        }
        return seen;
      }
      if (events->empty()) {
        ADD_FAILURE() << "nothing in flight";
        return seen;
      }
      bool found = false;
      for (backend::Event& e : *events) {
        found = found || std::holds_alternative<T>(e.what);
        seen.push_back(std::move(e));
      }
      if (found) return seen;
    }
  }

  static std::vector<std::string> Incidents(const std::vector<backend::Event>& events,
                                            const std::string& kind) {
    std::vector<std::string> out;
    for (const backend::Event& e : events) {
      if (const auto* i = std::get_if<backend::Incident>(&e.what); i && i->kind == kind) {
        out.push_back(i->resource + ": " + i->detail);
      }
    }
    return out;
  }

  /// One whole trajectory (a tool call, the tool, the answer) on instance 0.
  void RunTrajectory(int64_t id) {
    backend::StartTurn turn;
    turn.trajectory = TrajectoryId(id);
    turn.prompt = id;
    turn.instance = InstanceId(0);
    Until<backend::TurnDone>(turn);
    Until<backend::ToolDone>(backend::RunTool{TrajectoryId(id), "tool"});
    turn.turn = 1;
    Until<backend::TurnDone>(turn);
  }

  /// The position of the first timeline entry starting with `prefix`; -1 when none.
  int Position(const std::string& prefix) const {
    for (size_t i = 0; i < timeline_.size(); ++i) {
      if (timeline_[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
    }
    return -1;
  }

  ScopedTempDir dir_;
  cluster::ClusterOptions options_;
  std::vector<cluster::ProcessSpec> asked_;
  /// Every request the fakes received, in order: "engine <port> <path>", "trainer <path>".
  std::vector<std::string> timeline_;
  std::unique_ptr<FakeEngines> engines_;
  std::unique_ptr<FakeTrainer> trainer_;
  std::unique_ptr<cluster::ClusterBackend> backend_;
};

}  // namespace libra::test
