// Runtime: what every part of the cluster backend shares (engine and trainer supervisors, the
// turn runner, weight sync): the recipe's options, the run folder, the event loop with its
// processes and HTTP transport, the launcher of each node, the run's clock, and the sink that
// takes their events for the coordinator and the error that ends the run. ClusterBackend builds
// one and owns everything it points to; tests build one around a fake launcher and a recording
// sink, so that each part is tested alone.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cluster/async.h"
#include "cluster/cluster_options.h"
#include "cluster/event_loop.h"
#include "cluster/http_transport.h"
#include "cluster/launcher.h"
#include "cluster/process.h"

namespace libra::cluster {

/// Takes what the parts report: events for the coordinator, and the error that ends the run.
class EventSink {
 public:
  virtual ~EventSink() = default;
  /// Queues an event; `completes` ends one action in flight.
  virtual void Emit(backend::EventWhat what, bool completes) = 0;
  /// Ends the run with `error` (the first one wins).
  virtual void Fail(Status error) = 0;
};

/// Shared services, by reference: everything here outlives the parts that use it.
struct Runtime {
  const ClusterOptions* options = nullptr;
  /// Absolute; holds logs/ and weights/.
  std::string run_dir;
  EventLoop* loop = nullptr;
  ProcessSet* processes = nullptr;
  HttpTransport* transport = nullptr;
  /// One per node, in node order.
  std::vector<Launcher*> launchers;
  EventSink* sink = nullptr;
  /// Time 0 of the events.
  EventLoop::Clock::time_point start = EventLoop::Clock::now();
  /// Set while the backend is being destroyed: exits are no faults then.
  bool shutting_down = false;

  /// Seconds since `start`.
  double Now() const;
  void Emit(backend::EventWhat what, bool completes) const {
    sink->Emit(std::move(what), completes);
  }
  void Fail(Status error) const { sink->Fail(std::move(error)); }

  /// weights/<policy_name>: the synced weights the engines load.
  std::string PolicyPath() const;
  /// weights/v<version> with the policy's extension: the trainer's checkpoint of `version`.
  std::string CheckpointPath(int version) const;
  /// Where libra reaches node `node`'s servers.
  const std::string& Address(int node) const;
  /// The values of every command template, plus `extra`.
  std::map<std::string, std::string> Values(std::map<std::string, std::string> extra) const;
  /// A process running `command` on `node` through its launcher, logging into logs/<name>, which
  /// dies with libra.
  Result<ProcessSpec> MakeSpec(int node, const std::string& name, const CommandTemplate& command,
                               const std::map<std::string, std::string>& values,
                               std::map<std::string, std::string> env) const;
  /// "its log: <run_dir>/logs/<name>.err", for messages.
  std::string LogHint(const std::string& name) const;
  /// Sends `request`; `done` gets the transport's error or `parse`'s verdict on the reply.
  void Control(const HttpRequest& request, std::function<Status(const HttpResponse&)> parse,
               Done done) const;
};

}  // namespace libra::cluster
