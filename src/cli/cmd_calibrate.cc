// `libra calibrate`: fits the recipe's roofline cost model to what recorded runs measured (and,
// with --probes, to the newest GPU probes), prints predicted against measured per term before and
// after, and writes the result as a calibration TOML a recipe includes.
#include <ostream>

#include "calibrate/calibration_file.h"
#include "calibrate/fit.h"
#include "calibrate/measurements.h"
#include "calibrate/probes.h"
#include "calibrate/tables.h"
#include "cli/common.h"
#include "cli/exit_codes.h"
#include "common/files.h"
#include "common/strings.h"
#include "libra/config.h"
#include "store/store.h"

namespace libra::cli {
namespace {

Result<calibrate::RunRecords> LoadRun(store::Store& store, const records::RunInfo& run) {
  calibrate::RunRecords records;
  records.run = run;
  LIBRA_ASSIGN_OR_RETURN(records.steps, store.Steps(run.id));
  LIBRA_ASSIGN_OR_RETURN(records.trajectories, store.Trajectories(run.id));
  LIBRA_ASSIGN_OR_RETURN(records.turns, store.Turns(run.id));
  LIBRA_ASSIGN_OR_RETURN(records.decisions, store.Decisions(run.id));
  return records;
}

/// "160 rollout, 10 train, 9 sync".
std::string Counts(const calibrate::MeasurementSet& set) {
  int counts[3] = {0, 0, 0};
  for (const calibrate::Measurement& m : set.measurements) {
    ++counts[static_cast<int>(calibrate::TermOf(m))];
  }
  return StrFormat("%d rollout, %d train, %d sync", counts[0], counts[1], counts[2]);
}

/// The runs to fit to, with notes on the ones left out.
Result<std::vector<calibrate::MeasurementSet>> LoadMeasurements(store::Store& store,
                                                                const CalibrateOptions& options,
                                                                const std::string& gpu,
                                                                std::vector<std::string>* notes) {
  std::vector<records::RunInfo> runs;
  if (options.runs.empty()) {
    LIBRA_ASSIGN_OR_RETURN(std::vector<records::RunInfo> all, store.ListRuns());
    for (records::RunInfo& run : all) {
      if (run.status == records::kRunOk) runs.push_back(std::move(run));
    }
  } else {
    for (int64_t id : options.runs) {
      LIBRA_ASSIGN_OR_RETURN(records::RunInfo run, store.GetRun(id));
      runs.push_back(std::move(run));
    }
  }
  std::vector<calibrate::MeasurementSet> sets;
  for (const records::RunInfo& run : runs) {
    LIBRA_ASSIGN_OR_RETURN(calibrate::RunRecords records, LoadRun(store, run));
    auto set = calibrate::MeasurementsFromRun(records);
    if (!set.ok()) {
      notes->push_back(set.status().message() + "; left out");
      continue;
    }
    if (set->gpu != gpu) {
      notes->push_back(set->source + " ran on " + set->gpu + ", not the recipe's " + gpu +
                       "; left out");
      continue;
    }
    notes->insert(notes->end(), set->notes.begin(), set->notes.end());
    sets.push_back(std::move(*set));
  }
  return sets;
}

/// --probes: the newest probe session of the database, calibrated against `gpu`.
Result<calibrate::ProbeCalibration> ProbesOf(store::Store& store, const CalibrateOptions& options,
                                             const model::GpuSpec& gpu) {
  LIBRA_ASSIGN_OR_RETURN(const std::vector<records::ProbeRecord> all, store.Probes());
  const std::vector<records::ProbeRecord> session = calibrate::NewestProbeSession(all);
  if (session.empty()) {
    const std::string db = DbFlag(options.common.db);
    return Status::NotFound("--probes: " + options.common.db + " holds no probes; `libra probe" +
                            db + "` (or `libra probe --import FILE" + db + "`) records them");
  }
  return calibrate::CalibrateFromProbes(session, gpu);
}

/// What the calibration drew on, what it found and the factors it fitted.
void PrintCalibration(const CalibrateOptions& options, const recipe::Recipe& recipe,
                      const std::vector<calibrate::MeasurementSet>& sets,
                      const std::vector<std::string>& notes,
                      const std::optional<calibrate::ProbeCalibration>& probes,
                      const calibrate::ModelPoint& before, const calibrate::FitResult& fit,
                      const Io& io) {
  const model::ModelArch arch = [&] {
    auto context = model::ContextFor(recipe);
    return context.ok() ? context->arch : model::ModelArch();
  }();
  io.out << StrFormat("Calibrating the roofline cost model of %s (%s on %s) from %s\n",
                      options.common.recipe.c_str(), arch.name.c_str(), recipe.cluster.gpu.c_str(),
                      options.common.db.c_str());
  for (const calibrate::MeasurementSet& set : sets) {
    io.out << "  " << set.source << ": " << Counts(set) << " measurements\n";
  }
  if (probes) {
    io.out << StrFormat("  probes of %s at %s", probes->host.c_str(), probes->recorded_at.c_str())
           << (probes->device.empty()
                   ? ""
                   : StrFormat(": %d x %s", probes->gpus, probes->device.c_str()))
           << "\n";
  }
  for (const std::string& note : notes) io.out << "  note: " << note << "\n";
  if (probes) {
    io.out << "\nGPU numbers and factors from the probes\n"
           << calibrate::ProbeTable(*probes, before.params.decode_bw_util)
                  .Render(report::Format::kText);
    for (const std::string& note : probes->notes) io.out << "  note: " << note << "\n";
  }
  if (!fit.terms.empty()) {
    io.out << "\nPredicted against measured, per term (means; error: RMS of predicted / measured "
              "- 1)\n"
           << calibrate::TermTable(fit).Render(report::Format::kText);
  }
  io.out << "\nFactors\n" << calibrate::FactorTable(fit).Render(report::Format::kText);
  for (const calibrate::FactorResult& f : fit.factors) {
    if (!f.note.empty()) io.out << "  " << f.key << ": " << f.note << "\n";
  }
}

}  // namespace

int RunCalibrate(const CalibrateOptions& options, const Io& io) {
  auto recipe = LoadRecipe(options.common);
  if (!recipe.ok()) return Fail(io, recipe.status());
  auto before = calibrate::ModelPointFor(*recipe);
  if (!before.ok()) return Fail(io, before.status());

  auto store = OpenStore(options.common.db, StoreAccess::kRead);
  if (!store.ok()) return Fail(io, store.status());

  std::vector<std::string> notes;
  auto sets = LoadMeasurements(**store, options, recipe->cluster.gpu, &notes);
  if (!sets.ok()) return Fail(io, sets.status());

  // Probes set the starting point: the GPU's measured numbers and decode_bw_util.
  calibrate::ModelPoint start = *before;
  std::optional<calibrate::ProbeCalibration> probes;
  if (options.probes) {
    auto calibration = ProbesOf(**store, options, before->gpu);
    if (!calibration.ok()) return Fail(io, calibration.status());
    probes = std::move(*calibration);
    start.gpu = probes->gpu;
    if (probes->decode_bw_util) start.params.decode_bw_util = *probes->decode_bw_util;
  }

  size_t measurements = 0;
  for (const calibrate::MeasurementSet& set : *sets) measurements += set.measurements.size();
  if (measurements == 0 && !probes) {
    for (const std::string& note : notes) io.err << "note: " << note << "\n";
    return Fail(io,
                Status::NotFound("nothing to calibrate from: no finished run on " +
                                 recipe->cluster.gpu + " in " + options.common.db +
                                 " has measurements (record runs, or name them with --runs), and "
                                 "--probes was not given"));
  }

  const calibrate::FitResult fit = calibrate::Fit(*sets, *before, start);
  PrintCalibration(options, *recipe, *sets, notes, probes, *before, fit, io);
  if (!options.write.empty()) {
    const calibrate::CalibrationFile file = calibrate::MakeCalibrationFile(
        before->gpu.name, probes ? &*probes : nullptr, &fit,
        StrFormat("libra %s calibrate on %s", LIBRA_VERSION, experiment::NowIso8601().c_str()));
    const Status written =
        WriteFileAtomically(options.write, calibrate::CalibrationToml(file), "calibration file");
    if (!written.ok()) return Fail(io, written);
    io.out << "\nwrote " << options.write << ": pull it into a recipe with include = [\""
           << options.write << "\"]\n";
  }
  return kExitOk;
}

}  // namespace libra::cli
