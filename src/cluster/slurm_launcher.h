// The Slurm launcher: every process of a run as a job step on its node, for clusters where nodes
// are reached through the scheduler rather than by ssh.
//
// Inside an allocation (libra started by sbatch or salloc: SLURM_JOB_ID is set, or [launcher]
// job_id names one) the steps run in it; otherwise libra requests one with salloc, held by a
// salloc child process for the run's length (its command reads a pipe from libra), so that the
// allocation ends with libra even when libra crashes. Each process is `srun --jobid J --nodelist
// NODE --nodes 1 --ntasks 1 --overlap
// --job-name libra-<pid>-<name> ... env VAR=VALUE... COMMAND`: srun's output is the step's, logged
// by libra per process; a SIGTERM to srun ends the step (srun forwards it), and so does srun's
// death. At the end (and on Ctrl-C) every step whose name carries this libra's prefix that is
// still known to the scheduler is cancelled with scancel, and an allocation libra requested is
// released, so that `squeue --steps` shows none of them.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cluster/launcher.h"
#include "common/status.h"

namespace libra::cluster {

struct SlurmOptions {
  /// The allocation whose nodes run the steps. Default: $SLURM_JOB_ID; when neither is set,
  /// libra requests one (salloc) with as many nodes as the recipe has.
  std::string job_id;
  /// Extra arguments of salloc when libra requests the allocation (--partition, --time,
  /// --account, --gres ...). Default: none.
  std::vector<std::string> salloc_args;
  /// Extra arguments of every srun (--gres=gpu:8, --cpus-per-task ...). Default: none.
  std::vector<std::string> srun_args;
  /// How long salloc may wait for the allocation. Default: 600 s.
  std::chrono::seconds allocation_timeout{600};
  /// The Slurm commands. Default: on PATH.
  std::string srun = "srun";
  std::string salloc = "salloc";
  std::string scancel = "scancel";
  std::string squeue = "squeue";
  std::string scontrol = "scontrol";
};

/// The allocation the steps of one run share: joined, or requested and held by a salloc child.
class SlurmAllocation {
 public:
  /// Joins options.job_id (or $SLURM_JOB_ID), else requests `nodes` nodes with salloc and waits
  /// for the grant. kBackend naming the command and its message when Slurm refuses, kTimeout
  /// after allocation_timeout.
  static Result<std::shared_ptr<SlurmAllocation>> Acquire(const SlurmOptions& options, int nodes);
  /// Cancels every step of this libra that the scheduler still knows, then releases an
  /// allocation it requested (waiting for salloc to exit).
  ~SlurmAllocation();
  SlurmAllocation(const SlurmAllocation&) = delete;
  SlurmAllocation& operator=(const SlurmAllocation&) = delete;

  const std::string& job_id() const { return job_id_; }
  /// The allocation's nodes, in Slurm's order.
  const std::vector<std::string>& nodes() const { return nodes_; }
  /// The start of every step name of this libra: "libra-<pid>-".
  const std::string& step_prefix() const { return step_prefix_; }
  const SlurmOptions& options() const { return options_; }
  /// Cancels the steps of this libra still running (scancel <job>.<step> for each); their srun
  /// clients then exit.
  void CancelSteps() const;
  /// The steps of this libra that the scheduler lists: "<job>.<step> <name>" lines.
  Result<std::vector<std::string>> Steps() const;

 private:
  explicit SlurmAllocation(SlurmOptions options);

  SlurmOptions options_;
  std::string job_id_;
  std::vector<std::string> nodes_;
  std::string step_prefix_;
  /// The salloc holding an allocation libra requested; 0 when libra joined one.
  pid_t salloc_pid_ = 0;
  int salloc_stderr_ = -1;
  /// The write end of salloc's command's stdin: closing it ends the allocation.
  int salloc_stdin_ = -1;
};

/// Runs commands as job steps on one node of an allocation.
class SlurmLauncher final : public Launcher {
 public:
  SlurmLauncher(std::shared_ptr<SlurmAllocation> allocation, std::string node);
  /// "slurm://<job>/<node>".
  std::string Describe() const override;
  /// `srun ... env NAME=VALUE... <argv>`; libra's SLURM_CONF (when set) goes to srun.
  Result<ProcessSpec> Wrap(const ProcessSpec& spec) const override;

  const std::string& node() const { return node_; }

 private:
  std::shared_ptr<SlurmAllocation> allocation_;
  std::string node_;
};

}  // namespace libra::cluster
