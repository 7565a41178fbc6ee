#include "app/cli/tune_command.h"

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/cli/calibrate_command.h"
#include "app/cli/command_inputs.h"
#include "app/cli/options.h"
#include "app/cli/tune_executor.h"
#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/search/search.h"
#include "core/tune/tuner.h"
#include "profiler/device_info.h"
#include "profiler/local_executor.h"
#include "profiler/slurm_executor.h"

namespace nautilus::cli {
namespace {

// Set by SIGINT: the tuner finishes the candidates in flight, records them and stops.
volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int) {
  g_interrupted = 1;
  // A second Ctrl-C ends the process at once.
  std::signal(SIGINT, SIG_DFL);
}

// Installs on_interrupt for the tuner's lifetime and restores the previous handler.
class InterruptScope {
 public:
  InterruptScope() {
    g_interrupted = 0;
    previous_ = std::signal(SIGINT, on_interrupt);
  }
  ~InterruptScope() { std::signal(SIGINT, previous_); }

 private:
  void (*previous_)(int);
};

std::string microseconds(std::optional<double> us) {
  if (!us) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(*us < 10 ? 2 : 1) << *us << " µs";
  return out.str();
}

std::string duration(double seconds) {
  const long total = static_cast<long>(seconds + 0.5);
  std::ostringstream out;
  if (total >= 3600) out << total / 3600 << "h";
  out << std::setw(total >= 3600 ? 2 : 1) << std::setfill('0') << (total / 60) % 60 << "m"
      << std::setw(2) << std::setfill('0') << total % 60 << "s";
  return out.str();
}



std::unique_ptr<tune::TuningDatabase> open_database(const ParsedOptions& options, bool create,
                                                    std::ostream& err) {
  std::string error;
  auto db = tune::TuningDatabase::open(database_path(options), create, &error);
  if (!db) err << "nautilus: error: " << error << "\n";
  return db;
}

nlohmann::ordered_json record_to_json(const tune::TuningRecord& r) {
  auto optional = [](const auto& value) -> nlohmann::ordered_json {
    if (!value) return nullptr;
    return *value;
  };
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const tune::KernelTiming& k : r.kernels) {
    kernels.push_back({{"name", k.name},
                       {"median_us", optional(k.median_us)},
                       {"min_us", optional(k.min_us)},
                       {"max_us", optional(k.max_us)},
                       {"registers", optional(k.registers)},
                       {"spill_bytes", optional(k.spill_bytes)}});
  }
  return {{"id", r.id},
          {"created_unix", r.created_unix},
          {"spec_name", r.spec_name},
          {"spec_path", r.spec_path},
          {"spec_hash", r.key.spec_hash},
          {"sizes", r.key.sizes},
          {"schedule", r.key.schedule},
          {"code_hash", r.code_hash},
          {"device_name", r.key.device_name},
          {"sm_count", r.key.sm_count},
          {"sm_clock_khz", r.key.sm_clock_khz},
          {"memory_clock_khz", r.key.memory_clock_khz},
          {"driver_version", r.key.driver_version},
          {"compiler_version", r.key.compiler_version},
          {"status", r.status},
          {"message", r.message},
          {"validation", tune::validation_name(r.validation)},
          {"max_relative_error", optional(r.max_relative_error)},
          {"median_us", optional(r.median_us)},
          {"min_us", optional(r.min_us)},
          {"max_us", optional(r.max_us)},
          {"registers", optional(r.registers)},
          {"spill_bytes", optional(r.spill_bytes)},
          {"estimate_us", optional(r.estimate_us)},
          {"source", r.source},
          {"duplicate_of", optional(r.duplicate_of)},
          {"kernels", kernels}};
}

// RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled.
std::string csv_field(const nlohmann::ordered_json& value) {
  std::string text;
  if (value.is_null()) return "";
  text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

void print_record(std::ostream& out, const tune::TuningRecord& r) {
  out << "record " << r.id << " (" << date_text(r.created_unix) << " UTC, " << r.source << ")\n"
      << "  spec:       " << r.spec_name << " (" << r.spec_path << "), hash " << r.key.spec_hash
      << "\n  sizes:      " << r.key.sizes << "\n  device:     " << r.key.device_name << ", "
      << r.key.sm_count << " SMs, SM clock " << r.key.sm_clock_khz / 1000 << " MHz, memory clock "
      << r.key.memory_clock_khz / 1000 << " MHz, driver "
      << profiler::format_driver_version(r.key.driver_version) << "\n  compiler:   "
      << r.key.compiler_version << "\n  code hash:  " << (r.code_hash.empty() ? "-" : r.code_hash)
      << "\n  status:     " << r.status << (r.message.empty() ? "" : " (" + r.message + ")")
      << "\n  validation: " << tune::validation_name(r.validation);
  if (r.max_relative_error) out << " (max relative error " << *r.max_relative_error << ")";
  if (r.duplicate_of) {
    out << "\n  duplicate:  of record " << *r.duplicate_of
        << " (the same generated code; not measured again, see nautilus db show "
        << *r.duplicate_of << ")";
  }
  out << "\n  time:       median " << microseconds(r.median_us) << ", min "
      << microseconds(r.min_us) << ", max " << microseconds(r.max_us)
      << "\n  estimate:   " << microseconds(r.estimate_us) << "\n";
  if (r.registers) out << "  registers:  " << *r.registers << "\n";
  if (r.spill_bytes) out << "  spills:     " << *r.spill_bytes << " bytes\n";
  for (const tune::KernelTiming& k : r.kernels) {
    out << "  kernel " << k.name << ": median " << microseconds(k.median_us) << ", min "
        << microseconds(k.min_us) << ", max " << microseconds(k.max_us);
    if (k.registers) out << ", " << *k.registers << " registers";
    out << "\n";
  }
  out << "  schedule:\n";
  std::istringstream decisions(r.key.schedule);
  for (std::string decision; std::getline(decisions, decision, ';');) {
    const size_t start = decision.find_first_not_of(' ');
    if (start != std::string::npos) out << "    " << decision.substr(start) << "\n";
  }
}

bool write_schedule(const std::string& path, const std::string& schedule_json, std::ostream& err) {
  const nlohmann::json json = nlohmann::json::parse(schedule_json, nullptr, false);
  std::ofstream file(path, std::ios::binary);
  file << json.dump(2) << "\n";
  if (!file) {
    err << "nautilus: error: cannot write '" << path << "'\n";
    return false;
  }
  return true;
}

// The spec identity (hash, resolved sizes) of FILE with the -D options.
std::optional<tune::SpecIdentity> spec_identity(const ParsedOptions& options,
                                                const std::string& path,
                                                search::SearchInput& input, std::ostream& err) {
  if (!read_size_bindings(options, input.sizes, err)) return std::nullopt;
  std::string error;
  input.file = SourceFile::read(path, &error);
  if (!input.file) {
    err << "nautilus: error: " << error << "\n";
    return std::nullopt;
  }
  auto identity = tune::identify_spec(input, &error);
  if (!identity) err << "nautilus: error: " << error;
  return identity;
}

int run_db_best(const ParsedOptions& options, std::ostream& out, std::ostream& err) {
  search::SearchInput input;
  const auto identity = spec_identity(options, options.get("best"), input, err);
  if (!identity) return kExitFailure;
  std::string gpu = options.get("gpu");
  if (gpu.empty()) {
    std::string why;
    gpu = profiler::local_device_name(options.get("driver"), 0, &why);
    if (gpu.empty()) {
      err << "nautilus: error: --best needs a device: no local GPU (" << why
          << "); name one with --gpu NAME (see nautilus db list)\n";
      return kExitFailure;
    }
  }
  auto db = open_database(options, false, err);
  if (!db) return kExitFailure;
  const auto best = db->best(identity->spec_hash, identity->sizes, gpu);
  if (!best) {
    err << "nautilus: error: no validated measurement of " << input.file->path() << " at "
        << identity->sizes << " on " << gpu << " in " << db->path() << "\n";
    return kExitFailure;
  }
  print_record(out, *best);
  if (options.has("output") && !write_schedule(options.get("output"), best->schedule_json, err)) {
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

std::string database_path(const ParsedOptions& options) {
  return options.has("db") ? options.get("db") : tune::default_database_path();
}

std::optional<tune::TuningRecord> best_measured_for(const std::string& db_path,
                                                    const std::string& spec_text,
                                                    const std::string& sizes,
                                                    const std::string& driver_library) {
  std::string why;
  const std::string gpu = profiler::local_device_name(driver_library, 0, &why);
  if (gpu.empty()) return std::nullopt;
  std::string error;
  auto db = tune::TuningDatabase::open(db_path, false, &error);
  if (!db) return std::nullopt;
  return db->best(tune::spec_text_hash(spec_text), sizes, gpu);
}

// Functions, not globals: cli.cpp builds its command table during static initialization, when
// this file's globals may not exist yet.
OptionSpec db_option() {
  return {"db", "PATH",
          "the tuning database (default $XDG_DATA_HOME/nautilus/tuning.db, else "
          "~/.local/share/nautilus/tuning.db)"};
}
OptionSpec driver_option() {
  return {"driver", "LIBCUDA",
          "the CUDA driver library to query and run with (default the system's libcuda; tests "
          "pass a stand-in)"};
}

const CommandSpec& tune_command_spec(const std::vector<OptionSpec>& shared_options) {
  static const CommandSpec spec = [&] {
    CommandSpec command{
        "tune",
        "nautilus tune FILE [-D NAME=VALUE]... [--pin D]... [--forbid D]... [--budget N | --time T] "
        "[--resume] [--db PATH] [--devices 0,1,...] [--jobs N] [--executor local|slurm ...]",
        "Tunes a spec on the local GPUs, or on a Slurm cluster, by measurement (docs/tuning.md).\n"
        "Searches first, then measures the candidates the cost model ranks best: the search's\n"
        "leaves, then mutations of the best measured schedules (other tile sizes, raster orders,\n"
        "warps, stages, pipelining, fusions, one decision at a time). Every candidate is\n"
        "validated against the unscheduled reference before it is timed, and every result is\n"
        "written to the tuning database as it arrives; candidates the database already has for\n"
        "this spec, sizes and device are not measured again, and a candidate whose generated\n"
        "code was measured already is recorded as that record's duplicate instead of being run\n"
        "(duplicates do not count against the budget). The runners of a run compute the\n"
        "reference's outputs once and share them. Progress and an ETA go to stderr;\n"
        "Ctrl-C stops after the candidates in flight, and --resume continues the budget.\n"
        "Candidates are compiled on --jobs threads and measured on every device of --devices\n"
        "at once (one runner per device); the results go into the one database.\n"
        "With --executor slurm every candidate is compiled here and run by nautilus-runner in a\n"
        "Slurm job with a GPU request (sbatch; the packages and results go through --slurm-dir,\n"
        "a directory the nodes share); the device recorded is the one the first job finds on\n"
        "its node; a job that fails, dies with its node or times out is a recorded failure, and\n"
        "Ctrl-C cancels the jobs still queued or running (scancel).",
        shared_options};
    command.options.push_back({"pin", "DECISION", "every candidate contains DECISION; repeatable",
                               true});
    command.options.push_back({"forbid", "DECISION", "no candidate uses a decision matching this; "
                               "repeatable", true});
    command.options.push_back({"budget", "N", "measure at most N candidates (default 64)"});
    command.options.push_back({"time", "T", "stop starting candidates after T (90, 90s, 15m, 2h)"});
    command.options.push_back({"resume", "", "count what earlier runs measured for this spec, sizes "
                               "and device against the budget (continue an interrupted run)"});
    command.options.push_back(db_option());
    command.options.push_back(no_calibration_option());
    command.options.push_back({"skip-slower", "R", "do not measure candidates the cost model "
                               "estimates at more than R times the search's pick (default 20; "
                               "0 measures every candidate)"});
    command.options.push_back({"beam", "N", "the search's beam (default 3)"});
    command.options.push_back({"device", "NAME", "the cost model's GPU: " +
                                                     cost::known_device_models() +
                                                     " (default h100)"});
    command.options.push_back({"devices", "LIST", "the CUDA devices to measure on, one runner "
                               "each at a time, e.g. 0,1 (default 0; all the same model)"});
    command.options.push_back({"gpu-index", "N", "the one CUDA device to measure on: --devices N"});
    command.options.push_back({"jobs", "N", "candidates compiled at once (default: the number "
                               "of cores)"});
    command.options.push_back({"runner", "COMMAND", "the runner command (default: nautilus-runner "
                               "next to this program)"});
    command.options.push_back(driver_option());
    command.options.push_back({"output", "FILE", "write the best measured schedule, also -o FILE"});
    add_executor_options(command);
    return command;
  }();
  return spec;
}

int run_tune_command(const ParsedOptions& options, std::ostream& out, std::ostream& err) {
  if (options.has("budget") && options.has("time")) {
    err << "nautilus: error: give --budget or --time, not both\n";
    return kExitFailure;
  }
  tune::TuneOptions tune_options;
  if (!read_decisions(options.all("pin"), "pin", tune_options.search.pins, err) ||
      !read_decisions(options.all("forbid"), "forbid", tune_options.search.forbids, err)) {
    return kExitFailure;
  }
  struct Count {
    const char* name;
    int* target;
    uint64_t min;
  };
  int gpu_index = 0;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const Count& count : {Count{"budget", &tune_options.budget, 1},
                             Count{"beam", &tune_options.search.beam, 1},
                             Count{"gpu-index", &gpu_index, 0}, Count{"jobs", &jobs, 1}}) {
    if (!options.has(count.name)) continue;
    const std::optional<uint64_t> value = parse_non_negative(options.get(count.name));
    if (!value || *value < count.min) {
      err << "nautilus: error: --" << count.name << " expects an integer of at least "
          << count.min << ", got '" << options.get(count.name) << "'\n";
      return kExitFailure;
    }
    *count.target = static_cast<int>(*value);
  }
  // --gpu-index N is the one-device spelling of --devices N.
  std::vector<int> devices = {gpu_index};
  if (options.has("devices")) {
    if (options.has("gpu-index")) {
      err << "nautilus: error: give --devices or --gpu-index, not both\n";
      return kExitFailure;
    }
    std::string devices_error;
    const std::optional<std::vector<int>> parsed =
        profiler::parse_device_list(options.get("devices"), &devices_error);
    if (!parsed) {
      err << "nautilus: error: " << devices_error << "\n";
      return kExitFailure;
    }
    devices = *parsed;
  }
  // The search compiles its candidates on the same threads as the builds.
  tune_options.search.threads = jobs;
  if (options.has("time")) {
    tune_options.time_limit_seconds = parse_duration(options.get("time"));
    if (!tune_options.time_limit_seconds) {
      err << "nautilus: error: --time expects a duration such as 90, 90s, 15m or 2h, got '"
          << options.get("time") << "'\n";
      return kExitFailure;
    }
    // The clock, not the count, ends a timed run.
    tune_options.budget = 1 << 30;
  }
  tune_options.resume = options.has("resume");
  if (options.has("skip-slower")) {
    char* end = nullptr;
    const std::string text = options.get("skip-slower");
    const double ratio = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(ratio == 0 || ratio >= 1)) {
      err << "nautilus: error: --skip-slower expects 0 or a ratio of at least 1, got '" << text << "'\n";
      return kExitFailure;
    }
    tune_options.skip_estimate_ratio = ratio;
  }
  const std::optional<cost::DeviceModel> device = read_device_model(options, err);
  if (!device) return kExitFailure;
  search::SearchInput input;
  if (!read_size_bindings(options, input.sizes, err)) return kExitFailure;
  std::string error;
  input.file = SourceFile::read(options.positionals.front(), &error);
  if (!input.file) {
    err << "nautilus: error: " << error << "\n";
    return kExitFailure;
  }
  auto db = open_database(options, true, err);
  if (!db) return kExitFailure;

  std::string calibration_note;
  const std::unique_ptr<cost::CostModel> model = cost::make_analytical_model(
      device_for_estimates(options, db->path(), *device, &calibration_note));
  if (!calibration_note.empty()) err << "tune: " << calibration_note << "\n";
  const std::optional<ExecutorChoice> choice = read_executor_choice(options, err);
  if (!choice) return kExitFailure;
  std::unique_ptr<tune::Executor> executor;
  if (choice->slurm) {
    profiler::SlurmExecutorOptions slurm = choice->slurm_options;
    slurm.runner_command = options.get("runner");
    slurm.driver_library = options.get("driver");
    slurm.lower_arch = search::lowering_arch(tune_options.search, *model);
    slurm.job_name = "nautilus-tune-" + std::filesystem::path(input.file->path()).stem().string();
    // Ctrl-C cancels the jobs still queued or running (the tuner then stops).
    slurm.cancelled = [] { return g_interrupted != 0; };
    err << "tune: measuring through Slurm: one job per candidate, up to " << slurm.max_jobs
        << " at once, packages and results in "
        << (slurm.directory.empty() ? profiler::default_slurm_directory() : slurm.directory)
        << "\n";
    executor = std::make_unique<profiler::SlurmExecutor>(input, slurm);
  } else {
    profiler::LocalExecutorOptions executor_options;
    executor_options.runner_command = options.get("runner");
    executor_options.driver_library = options.get("driver");
    executor_options.devices = devices;
    executor_options.jobs = jobs;
    executor = profiler::make_local_executor(input, tune_options.search, *model, executor_options);
    err << "tune: measuring on CUDA device" << (devices.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < devices.size(); ++i) err << (i ? "," : "") << devices[i];
    err << " (one runner each), compiling " << jobs << " candidate" << (jobs > 1 ? "s" : "")
        << " at once\n";
  }

  InterruptScope interrupt_scope;
  tune_options.should_stop = [] { return g_interrupted != 0; };
  const int budget = tune_options.budget;
  const bool timed = tune_options.time_limit_seconds.has_value();
  const tune::TuneResult result = tune::run_tune(
      input, *model, *db, *executor, tune_options, [&](const tune::TuneProgress& progress) {
        err << "tune: [" << progress.measured;
        if (!timed) err << "/" << progress.measured + progress.budget_left;
        err << "] ";
        if (progress.duplicate_of) {
          // Not measured: the same kernel as a record; the budget is not spent on it.
          err << "same code as record " << *progress.duplicate_of << ", not measured";
        } else {
          err << progress.outcome;
        }
        err << ", best " << microseconds(progress.best_us);
        if (progress.duplicates > 0) err << ", " << progress.duplicates << " duplicates skipped";
        err << ", elapsed " << duration(progress.seconds);
        if (!timed && progress.eta_seconds) err << ", ETA " << duration(*progress.eta_seconds);
        err << "  " << progress.schedule << "\n";
      });
  (void)budget;
  if (!result.ok) {
    err << "nautilus: error: " << result.error << "\n";
    if (result.measured > 0) {
      err << "nautilus: " << result.measured << " candidates were recorded in " << db->path()
          << " before that\n";
    }
    return kExitFailure;
  }
  out << "tuned " << input.file->path() << " at " << result.key.sizes << " on "
      << result.key.device_name << ": " << result.measured << " measured ("
      << result.failed << " failed validation or did not run), " << result.skipped
      << " already in the database, " << result.duplicates
      << " duplicates skipped (the same generated code as a measured candidate)";
  if (result.carried_over > 0) {
    out << ", " << result.carried_over << " of them carried over from another build of the compiler "
        << "(its measurement counts as this one's)";
  }
  if (result.hopeless > 0) {
    out << ", " << result.hopeless << " not measured (estimated at more than "
        << tune_options.skip_estimate_ratio << "x the search's pick)";
  }
  out << "\n";
  out << "time: " << std::fixed << std::setprecision(1) << result.seconds << " s, the search "
      << "included (" << result.measured * 60.0 / std::max(result.seconds, 1e-9)
      << " candidates per minute "
      << (choice->slurm ? std::string("through Slurm")
                        : "on " + std::to_string(devices.size()) + " device" +
                              (devices.size() > 1 ? "s" : ""))
      << ")\n" << std::defaultfloat;
  if (result.stopped) {
    out << (choice->slurm ? "interrupted: the jobs in flight were cancelled"
                          : "interrupted: stopped after the candidates in flight")
        << "; run again with --resume to continue\n";
  } else if (result.exhausted) {
    out << "no new candidate left: the search's space around the best schedules is measured\n";
  }
  if (!result.best) {
    err << "nautilus: error: no candidate was validated and timed (see nautilus db list --db "
        << db->path() << ")\n";
    return kExitFailure;
  }
  out << "best: " << microseconds(result.best->median_us) << " (record " << result.best->id
      << ", estimate " << microseconds(result.best->estimate_us) << ")\n";
  print_record(out, *result.best);
  if (result.analytical_pick_us) {
    out << "the search's own pick: " << microseconds(result.analytical_pick_us) << " ("
        << std::fixed << std::setprecision(2)
        << *result.analytical_pick_us / *result.best->median_us << std::defaultfloat
        << "x the best)\n";
  }
  out << "database: " << db->path() << "\n";
  if (options.has("output") &&
      !write_schedule(options.get("output"), result.best->schedule_json, err)) {
    return kExitFailure;
  }
  return kExitOk;
}

const CommandSpec& db_command_spec(const std::vector<OptionSpec>& shared_options) {
  static const CommandSpec spec = [&] {
    CommandSpec command{
        "db",
        "nautilus db list|show ID|export|prune|calibrate [--db PATH] [options]  |  nautilus db "
        "--best FILE [-D NAME=VALUE]...",
        "Reads and maintains the tuning database (docs/tuning.md).\n"
        "  list                      the records, newest first (--spec FILE -D ... and --gpu NAME\n"
        "                            filter them)\n"
        "  show ID                   every field of one record\n"
        "  export --format csv|json  every record (filtered as list) to stdout or -o FILE\n"
        "  prune                     deletes records: --older-than DAYS, --spec FILE [-D ...],\n"
        "                            --gpu NAME select them; --keep-best N keeps the N fastest\n"
        "                            validated records of each spec, sizes and device\n"
        "  calibrate                 fits the cost model's constants to one device's validated\n"
        "                            records (--device NAME; --hold-out SPEC,... or none;\n"
        "                            --dry-run; --json) and stores them: schedule and tune\n"
        "                            then estimate with them for that device (their\n"
        "                            --no-calibration: not);\n"
        "                            --show lists the stored ones, --remove DEVICE deletes one\n"
        "  --best FILE [-D ...]      the best validated record of FILE at its sizes on the local\n"
        "                            GPU (or --gpu NAME); -o writes its schedule",
        shared_options};
    command.min_positionals = 0;
    command.max_positionals = 2;
    command.options.push_back(db_option());
    command.options.push_back({"best", "FILE", "print the best validated record of FILE"});
    command.options.push_back({"spec", "FILE", "only records of this spec (and -D sizes)"});
    command.options.push_back({"gpu", "NAME", "only records of this device name"});
    command.options.push_back({"format", "FORMAT", "export format: csv or json"});
    command.options.push_back({"older-than", "DAYS", "prune: records older than DAYS days"});
    command.options.push_back({"keep-best", "N", "prune: keep the N fastest of each configuration"});
    command.options.push_back({"output", "FILE", "export: write to FILE; --best: the schedule"});
    command.options.push_back(driver_option());
    command.options.push_back({"device", "NAME", "calibrate: the device whose records are fitted "
                               "(its name as db list shows it, or a unique part of it; default: "
                               "the only device)"});
    command.options.push_back({"hold-out", "SPECS", "calibrate: specs left out of the fit and "
                               "reported apart (names, hash prefixes or paths, comma-separated; "
                               "'none'; default every third spec by hash)"});
    command.options.push_back({"spec-dir", "DIR", "calibrate: where to look for a spec file (by "
                               "its name) that is no longer at the record's path; repeatable",
                               true});
    command.options.push_back({"dry-run", "", "calibrate: report, but store nothing"});
    command.options.push_back({"force", "", "calibrate: store the calibration even when it estimates "
                               "the held-out records or a problem's ranking worse than the preset"});
    command.options.push_back({"json", "", "calibrate: the report as JSON"});
    command.options.push_back({"show", "", "calibrate: list the stored calibrations instead"});
    command.options.push_back({"remove", "DEVICE", "calibrate: delete the calibration of DEVICE "
                               "(its name as --show prints it)"});
    return command;
  }();
  return spec;
}

int run_db_command(const ParsedOptions& options, std::ostream& out, std::ostream& err) {
  if (options.has("best")) {
    if (!options.positionals.empty()) {
      err << "nautilus: error: --best takes no subcommand (got '" << options.positionals.front()
          << "')\n";
      return kExitFailure;
    }
    return run_db_best(options, out, err);
  }
  if (options.positionals.empty()) {
    err << "nautilus: error: db expects a subcommand: list, show ID, export, prune, calibrate or "
           "--best FILE\n";
    return kExitFailure;
  }
  const std::string& sub = options.positionals.front();
  if (sub != "list" && sub != "show" && sub != "export" && sub != "prune" && sub != "calibrate") {
    err << "nautilus: error: unknown db subcommand '" << sub
        << "'; expected list, show, export, prune or calibrate\n";
    return kExitFailure;
  }
  if (sub == "calibrate") {
    if (options.positionals.size() > 1) {
      err << "nautilus: error: db calibrate takes no argument\n";
      return kExitFailure;
    }
    for (const char* other : {"spec", "older-than", "keep-best", "format", "output", "D"}) {
      if (options.has(other)) {
        err << "nautilus: error: " << (std::string(other) == "D" ? "-D" : "--" + std::string(other))
            << " does not apply to db calibrate (it fits every validated record of the device)\n";
        return kExitFailure;
      }
    }
    return run_db_calibrate(options, out, err);
  }
  for (const char* only : {"device", "hold-out", "spec-dir", "dry-run", "force", "json", "show", "remove"}) {
    if (options.has(only)) {
      err << "nautilus: error: --" << only << " belongs to db calibrate\n";
      return kExitFailure;
    }
  }
  if ((sub == "show") != (options.positionals.size() == 2)) {
    err << "nautilus: error: " << (sub == "show" ? "db show expects a record id"
                                                 : "db " + sub + " takes no argument")
        << "\n";
    return kExitFailure;
  }
  tune::RecordFilter filter;
  if (options.has("spec")) {
    search::SearchInput input;
    const auto identity = spec_identity(options, options.get("spec"), input, err);
    if (!identity) return kExitFailure;
    filter.spec_hash = identity->spec_hash;
    filter.sizes = identity->sizes;
  } else if (!options.all("D").empty()) {
    err << "nautilus: error: -D selects sizes of a spec: give --spec FILE too\n";
    return kExitFailure;
  }
  filter.device_name = options.get("gpu");
  if (options.has("older-than")) {
    const std::optional<uint64_t> days = parse_non_negative(options.get("older-than"));
    if (!days) {
      err << "nautilus: error: --older-than expects a number of days, got '"
          << options.get("older-than") << "'\n";
      return kExitFailure;
    }
    filter.older_than_unix = static_cast<int64_t>(std::time(nullptr)) -
                             static_cast<int64_t>(*days) * 86400;
  }
  auto db = open_database(options, false, err);
  if (!db) return kExitFailure;

  if (sub == "show") {
    const std::optional<uint64_t> id = parse_non_negative(options.positionals[1], 18);
    if (!id) {
      err << "nautilus: error: db show expects a record id, got '" << options.positionals[1]
          << "'\n";
      return kExitFailure;
    }
    const auto record = db->get(static_cast<int64_t>(*id));
    if (!record) {
      err << "nautilus: error: no record " << *id << " in " << db->path() << "\n";
      return kExitFailure;
    }
    print_record(out, *record);
    return kExitOk;
  }
  if (sub == "prune") {
    tune::PruneRequest request;
    request.filter = filter;
    if (options.has("keep-best")) {
      const std::optional<uint64_t> keep = parse_non_negative(options.get("keep-best"));
      if (!keep) {
        err << "nautilus: error: --keep-best expects an integer, got '"
            << options.get("keep-best") << "'\n";
        return kExitFailure;
      }
      request.keep_best = static_cast<int>(*keep);
    }
    if (!request.keep_best && filter.spec_hash.empty() && filter.device_name.empty() &&
        !filter.older_than_unix) {
      err << "nautilus: error: db prune needs --older-than DAYS, --spec FILE, --gpu NAME or "
             "--keep-best N (it never deletes everything unasked)\n";
      return kExitFailure;
    }
    std::string error;
    const int64_t deleted = db->prune(request, &error);
    if (deleted < 0) {
      err << "nautilus: error: " << error << "\n";
      return kExitFailure;
    }
    out << "deleted " << deleted << (deleted == 1 ? " record" : " records") << " from "
        << db->path() << "\n";
    return kExitOk;
  }
  const std::vector<tune::TuningRecord> records = db->list(filter);
  if (sub == "export") {
    const std::string format = options.get("format", "json");
    if (format != "json" && format != "csv") {
      err << "nautilus: error: unknown --format '" << format << "'; expected csv, json\n";
      return kExitFailure;
    }
    std::ostringstream text;
    if (format == "json") {
      nlohmann::ordered_json array = nlohmann::ordered_json::array();
      for (const auto& record : records) array.push_back(record_to_json(record));
      text << array.dump(1) << "\n";
    } else {
      const nlohmann::ordered_json header = record_to_json(tune::TuningRecord{});
      bool first = true;
      for (const auto& [name, value] : header.items()) {
        text << (first ? "" : ",") << name;
        first = false;
      }
      text << "\n";
      for (const auto& record : records) {
        first = true;
        const nlohmann::ordered_json row = record_to_json(record);
        for (const auto& [name, value] : row.items()) {
          text << (first ? "" : ",") << csv_field(value);
          first = false;
        }
        text << "\n";
      }
    }
    if (options.has("output")) {
      std::ofstream file(options.get("output"), std::ios::binary);
      file << text.str();
      if (!file) {
        err << "nautilus: error: cannot write '" << options.get("output") << "'\n";
        return kExitFailure;
      }
    } else {
      out << text.str();
    }
    return kExitOk;
  }
  // list
  out << std::left << std::setw(6) << "id" << std::setw(18) << "date (UTC)" << std::setw(14)
      << "spec" << std::setw(22) << "sizes" << std::setw(24) << "device" << std::setw(16)
      << "outcome" << std::setw(12) << "median" << std::setw(12) << "estimate"
      << "schedule\n";
  for (const tune::TuningRecord& r : records) {
    std::string outcome = r.status == "ok" ? tune::validation_name(r.validation) : r.status;
    if (r.duplicate_of) outcome = "dup of #" + std::to_string(*r.duplicate_of);
    out << std::left << std::setw(6) << r.id << std::setw(18) << date_text(r.created_unix)
        << std::setw(14) << r.spec_name << std::setw(22) << r.key.sizes << std::setw(24)
        << r.key.device_name << std::setw(16) << outcome << std::setw(12)
        << microseconds(r.median_us) << std::setw(12) << microseconds(r.estimate_us)
        << r.key.schedule << "\n";
  }
  out << records.size() << (records.size() == 1 ? " record" : " records") << " in " << db->path()
      << "\n";
  return kExitOk;
}

}  // namespace nautilus::cli
