#include "cluster/runtime.h"

#include <filesystem>

#include "common/strings.h"

namespace libra::cluster {

double Runtime::Now() const {
  return std::chrono::duration<double>(EventLoop::Clock::now() - start).count();
}

std::string Runtime::PolicyPath() const {
  return run_dir + "/weights/" + options->trainer.policy_name;
}

std::string Runtime::CheckpointPath(int version) const {
  const std::string extension =
      std::filesystem::path(options->trainer.policy_name).extension().string();
  return StrFormat("%s/weights/v%d%s", run_dir.c_str(), version, extension.c_str());
}

const std::string& Runtime::Address(int node) const {
  return options->launcher.hosts.at(static_cast<size_t>(node)).address;
}

std::map<std::string, std::string> Runtime::Values(std::map<std::string, std::string> extra) const {
  for (const auto& [key, value] : options->values) extra.emplace(key, value);
  extra.emplace("run_dir", run_dir);
  return extra;
}

Result<ProcessSpec> Runtime::MakeSpec(int node, const std::string& name,
                                      const CommandTemplate& command,
                                      const std::map<std::string, std::string>& values,
                                      std::map<std::string, std::string> env) const {
  ProcessSpec spec;
  spec.name = name;
  LIBRA_ASSIGN_OR_RETURN(spec.argv, command.Expand(values));
  spec.env = std::move(env);
  spec.log_dir = run_dir + "/logs";
  LIBRA_ASSIGN_OR_RETURN(ProcessSpec wrapped, launchers.at(static_cast<size_t>(node))->Wrap(spec));
  // Even if libra crashes, no engine or trainer outlives it (over ssh: the ssh client, whose
  // end stops the remote process group).
  wrapped.die_with_libra = true;
  return wrapped;
}

std::string Runtime::LogHint(const std::string& name) const {
  return "its log: " + run_dir + "/logs/" + name + ".err";
}

void Runtime::Control(const HttpRequest& request, std::function<Status(const HttpResponse&)> parse,
                      Done done) const {
  transport->Send(
      request, [parse = std::move(parse), done = std::move(done)](Result<HttpResponse> response) {
        if (!response.ok()) return done(response.status());
        done(parse(*response));
      });
}

}  // namespace libra::cluster
