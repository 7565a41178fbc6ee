#include "app/cli/schedule_command.h"

#include <fstream>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>

#include "app/cli/calibrate_command.h"
#include "app/cli/command_inputs.h"
#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pipeline.h"
#include "core/pipeline/finish_search.h"
#include "core/search/search.h"
#include "core/search/tree_json.h"
#include "core/tune/tuner.h"
#include "app/cli/tune_command.h"
#include "profiler/device_info.h"
#include "profiler/measure.h"
#include "profiler/runner_client.h"

namespace nautilus::cli {
namespace {

std::string microseconds(double us) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(us < 10 ? 2 : 1) << us << " µs";
  return out.str();
}

// Times schedules through nautilus-runner (profiler/measure.h): each is lowered for the search's
// arch and compiled into a kernel package (sm_90a and sm_80 cubins; sm_90a alone for a Hopper
// lowering) and validated against the unscheduled reference package,
// built once.
class RunnerMeasurer {
 public:
  RunnerMeasurer(const search::SearchInput& input, std::string runner, double timeout_seconds,
                 std::string lower_arch)
      : input_(input),
        runner_(std::move(runner)),
        measurer_(measure_options(timeout_seconds, std::move(lower_arch))) {}

  search::Measurement operator()(const sched::Schedule& schedule) {
    search::Measurement measurement;
    // A local runner needs a local GPU: say so before compiling anything.
    if (runner_.empty()) {
      if (!gpu_checked_) {
        const profiler::DeviceQuery query = profiler::query_devices();
        gpu_checked_ = true;
        if (!query.has_gpu()) no_gpu_ = query.no_gpu->message;
      }
      if (no_gpu_) {
        measurement.status = search::Measurement::Status::NoGpu;
        measurement.message = *no_gpu_;
        return measurement;
      }
    }
    const profiler::Measurement measured = measurer_.measure(input_.file, input_.sizes, schedule);
    if (!measured.built()) {
      measurement.message = measured.build_error;
      return measurement;
    }
    const profiler::RunResult& result = measured.run;
    if (result.status == profiler::RunStatus::NoGpu) {
      measurement.status = search::Measurement::Status::NoGpu;
      measurement.message = result.message;
    } else if (result.status != profiler::RunStatus::Ok || !result.total_median_us) {
      measurement.message = std::string(profiler::run_status_name(result.status)) + ": " +
                            result.message;
    } else {
      measurement.status = search::Measurement::Status::Ok;
      measurement.microseconds = *result.total_median_us;
    }
    return measurement;
  }

 private:
  profiler::MeasureOptions measure_options(double timeout_seconds, std::string lower_arch) const {
    profiler::MeasureOptions options;
    options.client.command_template = runner_;
    options.client.timeout_seconds = timeout_seconds;
    options.lower_arch = std::move(lower_arch);
    return options;
  }

  const search::SearchInput& input_;
  std::string runner_;
  profiler::ScheduleMeasurer measurer_;
  bool gpu_checked_ = false;
  std::optional<std::string> no_gpu_;
};

bool write_text(const std::string& path, const std::string& text, std::ostream& err) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  if (!file) {
    err << "nautilus: error: cannot write '" << path << "'\n";
    return false;
  }
  return true;
}

}  // namespace

const CommandSpec& schedule_command_spec(const std::vector<OptionSpec>& shared_options) {
  static const CommandSpec spec = [&] {
    CommandSpec command{
        "schedule",
        "nautilus schedule FILE [-D NAME=VALUE]... [--pin D]... [--forbid D]... [--schedule S] "
        "[--beam N] [--seed N] [--tree FILE] [-o FILE] [--measure K]",
        "Searches for a schedule of a spec (the auto-scheduler, docs/search.md).\n"
        "Prints the chosen decisions, the cost model's estimate and the search's statistics;\n"
        "--tree writes every node of the search tree as JSON, -o the chosen schedule as a file\n"
        "that compile, run and eval accept with --schedule. Pins must appear in the result;\n"
        "forbidden decisions (kind, target and the arguments given) are never used.\n"
        "When the tuning database (nautilus tune) holds a validated measurement of this spec at\n"
        "these sizes on the local GPU, and no pin, forbid, partial schedule, --measure or --tree\n"
        "is given, the best measured schedule is printed and written instead, and it says so;\n"
        "--ignore-db searches anyway. When the database holds a calibration of the cost model\n"
        "for the device (nautilus db calibrate), the estimates use it and it says so;\n"
        "--no-calibration estimates with the device's preset.\n"
        "Then the pipeline solver (Z3, docs/pipeline.md) completes every kernel with a\n"
        "software-pipelined loop: it appends pipeline(BLOCK, stages=S[, consumers=C]) with the\n"
        "ring depth it proved best under the schedule's own pipeline pins, one line per kernel\n"
        "says what it found; --no-pipeline-solver keeps the search's stages.\n"
        "Before that, the register check compiles the pick with NVRTC (no GPU needed): when ptxas\n"
        "spills its registers or the Hopper gate refuses it, the next leaves by estimate are\n"
        "compiled until one fits, and that one is used; --no-register-check skips it.",
        shared_options};
    command.options.push_back({"pin", "DECISION",
                               "the result must contain DECISION, applied as early as it applies, "
                               "e.g. --pin 'tile(O_sum_acc, m=64)'; repeatable",
                               true});
    command.options.push_back({"schedule", "FILE",
                               "a partial schedule to complete (its decisions act as the first pins)"});
    command.options.push_back({"forbid", "DECISION",
                               "never use a decision matching this, e.g. --forbid "
                               "'rolling_update(O_sum, n)'; repeatable",
                               true});
    command.options.push_back({"beam", "N", "entries kept per round of the beam search (default 3)"});
    command.options.push_back({"seed", "N", "breaks ties between equal estimates (default 0)"});
    command.options.push_back({"threads", "N", "compile up to N candidates at once (default 2)"});
    command.options.push_back({"device", "NAME", "the cost model's GPU: " +
                                                     cost::known_device_models() +
                                                     " (default h100)"});
    command.options.push_back({"tree", "FILE", "write the search tree as JSON"});
    command.options.push_back({"output", "FILE", "write the chosen schedule, also -o FILE"});
    command.options.push_back({"measure", "K",
                               "time the K best schedules on the GPU and choose by measurement"});
    command.options.push_back({"runner", "COMMAND",
                               "the runner command for --measure (default: nautilus-runner next "
                               "to this program)"});
    command.options.push_back({"db", "PATH",
                               "the tuning database consulted for a measured best and a "
                               "calibration of the cost model (default "
                               "$XDG_DATA_HOME/nautilus/tuning.db, else ~/.local/share/...)"});
    command.options.push_back(no_calibration_option());
    command.options.push_back({"ignore-db", "",
                               "search even when the tuning database has a measured best"});
    command.options.push_back({"driver", "LIBCUDA",
                               "the CUDA driver that names the local GPU (default the system's)"});
    command.options.push_back({"no-pipeline-solver", "",
                               "keep the search's pipeline stages instead of the pipeline "
                               "solver's (docs/pipeline.md)"});
    command.options.push_back({"no-register-check", "",
                               "keep the search's pick without compiling it to check for spills"});
    command.options.push_back({"solver-time", "SECONDS",
                               "the pipeline solver's time limit per kernel, in solver seconds (Z3's work count, "
                               "docs/pipeline.md §5; default 25)"});
    return command;
  }();
  return spec;
}

int run_schedule_command(const ParsedOptions& options, std::ostream& out, std::ostream& err) {
  search::SearchInput input;
  if (!read_size_bindings(options, input.sizes, err)) return kExitFailure;
  search::SearchOptions search_options;
  search_options.threads = 2;
  if (options.has("schedule")) {
    std::string error;
    auto partial = sched::read_schedule_file(options.get("schedule"), &error);
    if (!partial) {
      err << "nautilus: error: " << error << "\n";
      return kExitFailure;
    }
    search_options.pins = partial->decisions;
  }
  if (!read_decisions(options.all("pin"), "pin", search_options.pins, err) ||
      !read_decisions(options.all("forbid"), "forbid", search_options.forbids, err)) {
    return kExitFailure;
  }
  struct Count {
    const char* name;
    int* target;
    int64_t min;
  };
  int seed = 0;
  for (const Count& count : {Count{"beam", &search_options.beam, 1},
                             Count{"threads", &search_options.threads, 1},
                             Count{"measure", &search_options.measure, 0},
                             Count{"seed", &seed, 0}}) {
    if (!options.has(count.name)) continue;
    const std::optional<uint64_t> value = parse_non_negative(options.get(count.name));
    if (!value || static_cast<int64_t>(*value) < count.min) {
      err << "nautilus: error: --" << count.name << " expects an integer of at least " << count.min
          << ", got '" << options.get(count.name) << "'\n";
      return kExitFailure;
    }
    *count.target = static_cast<int>(*value);
  }
  search_options.seed = static_cast<uint64_t>(seed);
  // Checked before the search, which may take a while.
  double time_limit = 25;
  if (options.has("solver-time")) {
    char* end = nullptr;
    const std::string text = options.get("solver-time");
    time_limit = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(time_limit > 0) || time_limit > 3600) {
      err << "nautilus: error: --solver-time expects seconds in (0, 3600], got '" << text << "'\n";
      return kExitFailure;
    }
  }
  const std::optional<cost::DeviceModel> device = read_device_model(options, err);
  if (!device) return kExitFailure;
  std::string error;
  input.file = SourceFile::read(options.positionals.front(), &error);
  if (!input.file) {
    err << "nautilus: error: " << error << "\n";
    return kExitFailure;
  }
  // The measured best beats any estimate: use it when the user asked for nothing it might not
  // honour (pins, forbids, a partial schedule, a measurement, the search tree).
  const bool plain = search_options.pins.empty() && search_options.forbids.empty() &&
                     !options.has("measure") && !options.has("tree");
  if (plain && !options.has("ignore-db")) {
    std::string identity_error;
    if (const auto identity = tune::identify_spec(input, &identity_error)) {
      const auto best = best_measured_for(database_path(options), input.file->text(),
                                          identity->sizes, options.get("driver"));
      if (best) {
        std::string parse_error;
        const auto schedule = sched::schedule_from_json(
            nlohmann::json::parse(best->schedule_json, nullptr, false), &parse_error);
        if (schedule) {
          out << "schedule " << input.file->path() << " (best measured: tuning database record "
              << best->id << " on " << best->key.device_name
              << "; --ignore-db searches instead)\n";
          for (const sched::Decision& decision : schedule->decisions) {
            out << "  " << sched::print_decision(decision) << "\n";
          }
          out << "measured: " << microseconds(*best->median_us);
          if (best->estimate_us) out << " (estimated " << microseconds(*best->estimate_us) << ")";
          out << "\n";
          if (options.has("output") &&
              !write_text(options.get("output"), sched::schedule_to_json(*schedule).dump(2) + "\n",
                          err)) {
            return kExitFailure;
          }
          return kExitOk;
        }
        err << "nautilus: warning: tuning database record " << best->id
            << " holds an unreadable schedule (" << parse_error << "); searching\n";
      }
    }
  }
  std::string calibration_note;
  const std::unique_ptr<cost::CostModel> model = cost::make_analytical_model(
      device_for_estimates(options, database_path(options), *device, &calibration_note));
  if (!calibration_note.empty()) out << calibration_note << "\n";
  RunnerMeasurer measurer(input, options.get("runner"), 600.0,
                          search::lowering_arch(search_options, *model));
  search::Measurer measure_fn = [&](const sched::Schedule& schedule) { return measurer(schedule); };
  const search::SearchResult result =
      search::run_search(input, *model, search_options, nullptr, {}, measure_fn);

  if (options.has("tree")) {
    if (!write_text(options.get("tree"), search::tree_to_json(result).dump(1) + "\n", err)) {
      return kExitFailure;
    }
  }
  for (const std::string& warning : result.warnings) err << "nautilus: warning: " << warning << "\n";
  const search::SearchStats& stats = result.stats;
  std::ostringstream statistics;
  statistics << "search: " << stats.nodes << " nodes (" << stats.expanded << " expanded, "
             << stats.pruned << " pruned, " << stats.leaves << " leaves, " << stats.failed
             << " failed), " << stats.compiles << " compiles, " << stats.rounds << " rounds, "
             << std::fixed << std::setprecision(2) << stats.seconds << " s"
             << std::defaultfloat << "\n";
  if (!result.ok) {
    out << statistics.str();
    err << "nautilus: error: " << result.error << "\n";
    return result.error.rfind("internal compiler error", 0) == 0 ? kExitInternal : kExitFailure;
  }
  // ptxas' registers before the model's, then the pipeline solver (core/pipeline/finish_search.h).
  pipeline::FinishOptions finish_options;
  finish_options.register_check = !options.has("no-register-check");
  finish_options.complete_pipelines = !options.has("no-pipeline-solver");
  finish_options.completion.solve.time_limit_seconds = time_limit;
  const pipeline::FinishedSchedule finished = pipeline::finish_search(
      input, result, *model, search::lowering_arch(search_options, *model), finish_options);
  out << finished.report;
  const sched::Schedule& chosen = finished.schedule;
  const std::optional<cost::CostEstimate>& estimate = finished.estimate;
  out << "schedule " << input.file->path() << " (" << result.model << ")\n";
  for (const sched::Decision& decision : chosen.decisions) {
    out << "  " << sched::print_decision(decision) << "\n";
  }
  if (estimate) {
    out << "estimate: " << microseconds(estimate->microseconds);
    if (result.roofline && result.roofline->microseconds > 0.0) {
      out << " (roofline bound of the math " << cost::describe(*result.roofline) << ", "
          << std::fixed << std::setprecision(1)
          << estimate->microseconds / result.roofline->microseconds << std::defaultfloat
          << "x)";
    }
    out << "\n";
    if (result.beam > 0 && result.beam != search_options.beam) {
      out << "  (searched again with a beam of " << result.beam << ": the first choice was over "
          << static_cast<int>(search::kRooflineSuspicion) << "x the bound)\n";
    }
    for (const cost::KernelCost& kernel : estimate->kernels) {
      out << "  " << kernel.kernel << ": " << microseconds(kernel.microseconds) << ", "
          << kernel.ctas << " CTAs, " << kernel.bound << "-bound\n";
    }
  }
  if (result.measured_us) out << "measured: " << microseconds(*result.measured_us) << "\n";
  out << statistics.str();
  if (options.has("output")) {
    if (!write_text(options.get("output"), sched::schedule_to_json(chosen).dump(2) + "\n",
                    err)) {
      return kExitFailure;
    }
  }
  return kExitOk;
}

}  // namespace nautilus::cli
