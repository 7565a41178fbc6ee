#include "app/cli/cli.h"

#include <stdlib.h>

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/command_inputs.h"
#include "app/cli/compile_command.h"
#include "app/cli/devices_command.h"
#include "app/cli/options.h"
#include "app/cli/pipeline_command.h"
#include "app/cli/run_command.h"
#include "app/cli/schedule_command.h"
#include "app/cli/tune_command.h"
#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/evaluate.h"
#include "core/driver/render.h"
#include "core/scalar/printer.h"
#include "profiler/measure.h"
#include "core/codegen/emit_cuda.h"

namespace nautilus::cli {
namespace {

const OptionSpec kSizeOption{"D", "NAME=VALUE",
                             "bind a size symbol (overrides the spec's `let`); repeatable", true};

const OptionSpec kScheduleOption{"schedule", "FILE",
                                 "apply the schedule in FILE (JSON: {\"decisions\": [...]}) after lowering"};
const OptionSpec kPinOption{"pin", "DECISION",
                            "apply DECISION after the schedule, e.g. --pin 'tile(O_sum, m=64)'; "
                            "repeatable",
                            true};

const CommandSpec kCheck{
    "check", "nautilus check FILE [-D NAME=VALUE]...",
    "Checks a spec and prints its diagnostics. Exits 0 when it has no errors, 1 otherwise.",
    {kSizeOption}};

const OptionSpec kArchOption{
    "arch", "ARCH",
    "target of the MA lowering: sm_80 (default) or sm_90a (Hopper: TMA, mbarriers, wgmma and "
    "warp roles where the schedule asks for them)"};

const OptionSpec kEpilogueOption{
    "epilogue", "MODE",
    "how a warp-specialized kernel stores its accumulator tile: staged (default: stmatrix into "
    "shared memory, then coalesced row stores, or in a persistent kernel one TMA store where rows "
    "are 16-byte aligned), tma (staged, with the TMA store wherever it applies), rows (staged, "
    "always stored row by row by the consumers), realigned (rows, and rows at a pitch that is not "
    "16-byte aligned stored as aligned 16-byte vectors with the misaligned ends element by "
    "element; experimental, off by default) or fragments (straight from the wgmma layout, for "
    "comparisons)"};

const OptionSpec kRingReleaseOption{
    "ring-release", "MODE",
    "when a warp-specialized kernel's consumers release a ring slot: auto (default: together, "
    "unless that ring does not fit or leaves the staged epilogue no room, then early), early "
    "(the operands whose dots' results the iteration reads, attention's K, in their own "
    "iteration, the others in the next, wherever that applies; docs/matile.md \"early "
    "release\") or together (every operand in the next iteration)"};

const OptionSpec kRingArriveOption{
    "ring-arrive", "MODE",
    "how a warp-specialized kernel's consumers arrive on the barriers that release a ring slot: "
    "warp (default: lane 0 of each warp after __syncwarp) or thread (every thread for itself, "
    "32x the shared-memory atomics, for comparisons)"};

const OptionSpec kLayoutsOption{
    "layouts", "MODE",
    "register layouts: synthesized (default: the rules' layouts improved wherever the cost "
    "model prices the kernel lower, docs/matile.md \"Layout synthesis\") or rules (the "
    "first-wins rules alone, for comparisons)"};

const OptionSpec kSharedReadsOption{
    "shared-reads", "MODE",
    "how a kernel reads register tiles element by element from shared memory: auto (default: "
    "as each kernel's launch decision says with reads=, and where it says nothing grouped when "
    "a widened int8 mma operand is read 4 or more bytes at a time, element by element "
    "elsewhere), elements (one ld.shared per element, or per run of neighbouring slots, at its "
    "own swizzled offset) or grouped (a lane's neighbouring elements in one ld.shared at hoisted "
    "addresses, and widened 8-bit mma operands stored [K, N] through atoms with interleaved "
    "columns; refused with a note where those would be read fewer than 4 bytes at a time; "
    "docs/codegen.md)"};

// The options of every command that compiles a spec (load_inputs reads them): sizes, schedule,
// pins and the lowering's modes, with --arch where `arch` (compile declares its own), then the
// command's own options.
std::vector<OptionSpec> compiling_options(bool arch, std::vector<OptionSpec> own) {
  std::vector<OptionSpec> options = {kSizeOption, kScheduleOption, kPinOption};
  if (arch) options.push_back(kArchOption);
  for (const OptionSpec& mode :
       {kEpilogueOption, kRingReleaseOption, kRingArriveOption, kLayoutsOption, kSharedReadsOption}) {
    options.push_back(mode);
  }
  options.insert(options.end(), own.begin(), own.end());
  return options;
}

const CommandSpec kLower{
    "lower", "nautilus lower FILE [--stage STAGE] [--format text|dot|json] [--schedule FILE] [--pin D]... [--arch ARCH] [--explain-layouts] [--estimate DEVICE]",
    "Lowers a spec and prints the IR of one stage or of all (--stage all, the default).",
    compiling_options(true, {
     {"explain-layouts", "",
      "note in each MA kernel, for every register tile, its layout, the rule that fixed it "
      "(propagated from an operand, wanted by a consumer, or the blocked default) and the users "
      "that wanted another layout"},
     {"stage", "STAGE", "spec, scalar, vrtile, matile, cuda or all (default all)"},
     {"format", "FORMAT", "text (default), dot or json"},
     {"print-after-all", "", "print the IR after every pass of the pipeline, with timings"},
     {"diff-after-all", "",
      "print, for every pass of the pipeline, a unified diff of its IR text against the IR "
      "before it (the first pass against nothing), with timings"},
     {"estimate", "DEVICE",
      "after the IR, the cost model's estimate of the matile stage on DEVICE (h100, a100, sm_90, sm_80)"},
     {"output", "FILE", "write to FILE instead of standard output"}})};

const CommandSpec kEval{
    "eval", "nautilus eval FILE [--stage scalar|vrtile|matile] [--seed N] [--save DIR] [--schedule FILE] [--pin D]... [--arch ARCH]",
    "Checks a stage on the CPU against the float64 reference of the spec.\n"
    "Runs the stage's interpreter on seeded random inputs, prints the maximum relative error\n"
    "max|out - ref| / max|ref| of every output and exits 1 when one exceeds its dtype's\n"
    "tolerance (f32 1e-4, f16 5e-3, bf16 2e-2, fp8e4m3 0.125, fp8e5m2 0.25, int8 2e-2).",
    compiling_options(true, {
     {"stage", "STAGE", "the stage to evaluate (default scalar)"},
     {"seed", "N", "seed of the random inputs (default 0)"},
     {"save", "DIR", "write inputs, reference and outputs as .npy files plus manifest.json"},
     {"max-ops", "N", "refuse sizes needing more scalar operations (default 2e9)"}})};

const CommandSpec& kCompile = compile_command_spec(compiling_options(false, {}));

const CommandSpec kRun = [] {
  CommandSpec command{
      "run",
      "nautilus run FILE|DIR [--schedule FILE] [--pin D]... [--arch ARCH] [-D NAME=VALUE]... [--reps N]",
      "Runs a spec (or a kernel package directory) on the GPU: lowers it for --arch (sm_80 by\n"
      "default: compiled for sm_80 and sm_90a; sm_90a: TMA, wgmma and warp roles, compiled for\n"
      "sm_90a), compiles the unscheduled program of the same spec as the reference, runs both\n"
      "through nautilus-runner in a child process, and prints the validation and the median time\n"
      "of every kernel. Without a GPU it says so and exits 1.",
      {kSizeOption, kScheduleOption, kPinOption, kArchOption}};
  for (const OptionSpec& option : run_command_options()) command.options.push_back(option);
  return command;
}();

const CommandSpec& kSchedule = schedule_command_spec({kSizeOption});

const CommandSpec& kPipeline = pipeline_command_spec({kSizeOption, kScheduleOption, kPinOption});

const CommandSpec& kTune = tune_command_spec({kSizeOption});

const CommandSpec& kDb = db_command_spec({kSizeOption});

const std::vector<const CommandSpec*>& all_commands() {
  static const std::vector<const CommandSpec*> commands = {&kCheck, &kLower, &kEval, &kCompile,
                                                           &kRun, &kSchedule, &kPipeline,
                                                           &kTune, &kDb};
  return commands;
}

std::string general_help() {
  std::ostringstream out;
  out << "nautilus " << NAUTILUS_VERSION
      << " — the command line of Nautilus Studio, an auto-scheduling tensor compiler.\n\n"
         "usage: nautilus COMMAND [options]\n\ncommands:\n";
  for (const CommandSpec* command : all_commands()) {
    std::string first_line = command->summary.substr(0, command->summary.find('\n'));
    out << "  " << std::left << std::setw(9) << command->name << first_line << "\n";
  }
  out << "  " << std::left << std::setw(9) << "devices"
      << "Lists the local CUDA devices (nautilus devices [--json])\n";
  out << "  " << std::left << std::setw(9) << "help"
      << "Shows help for a command: nautilus help COMMAND\n"
         "\nStages: "
      << driver::stage_names()
      << ". Sizes bound with -D override the spec's `let` values.\n"
         "Exit status: 0 success, 1 user error or failed check, 2 internal compiler error.\n";
  return out.str();
}

// Shared by the commands that compile a spec: reads the file, parses -D, runs the pipeline and
// prints diagnostics. Returns nullopt-like (ok == false) with the exit status when it failed.
struct Loaded {
  driver::Compilation compilation;
  sched::Schedule schedule;  // the schedule compiled: --schedule's decisions, then the pins
  int exit_status = kExitOk;
  bool ok = false;
};

Loaded load(const ParsedOptions& options, driver::Stage last_stage, const CliHooks& hooks,
            std::ostream& err) {
  Loaded loaded;
  driver::CompileOptions compile_options;
  compile_options.last_stage = last_stage;
  compile_options.extra_passes = hooks.extra_passes;
  compile_options.extra_vr_passes = hooks.extra_vr_passes;
  if (!read_size_bindings(options, compile_options.sizes, err)) {
    loaded.exit_status = kExitFailure;
    return loaded;
  }
  std::string error;
  if (options.has("schedule")) {
    auto schedule = sched::read_schedule_file(options.get("schedule"), &error);
    if (!schedule) {
      err << "nautilus: error: " << error << "\n";
      loaded.exit_status = kExitFailure;
      return loaded;
    }
    compile_options.schedule = *schedule;
  }
  for (const std::string& text : options.all("pin")) {
    sched::DecisionParseError parse_error;
    auto decision = sched::parse_decision(text, &parse_error);
    if (!decision) {
      err << "nautilus: error: --pin '" << text << "': " << sched::to_string(parse_error) << "\n";
      loaded.exit_status = kExitFailure;
      return loaded;
    }
    compile_options.schedule.decisions.push_back(*decision);
  }
  // The MA lowering's target (compile's --arch is the same option).
  if (options.has("arch")) {
    const std::string arch = options.get("arch");
    if (arch != "sm_80" && arch != "sm_90a") {
      err << "nautilus: error: unknown --arch '" << arch << "'; expected sm_80, sm_90a\n";
      loaded.exit_status = kExitFailure;
      return loaded;
    }
    compile_options.matile.arch = arch;
  }
  if (options.has("explain-layouts")) compile_options.matile.explain_layouts = true;
  // A --NAME=MODE option limited to `modes`: its value in *mode (left empty when absent); false
  // after reporting an unknown value.
  const auto mode_of = [&](const std::string& name, const std::vector<std::string>& modes, std::string* mode) {
    if (!options.has(name)) return true;
    *mode = options.get(name);
    if (std::find(modes.begin(), modes.end(), *mode) != modes.end()) return true;
    err << "nautilus: error: unknown --" << name << " '" << *mode << "'; expected ";
    for (size_t i = 0; i < modes.size(); ++i) err << (i ? ", " : "") << modes[i];
    err << "\n";
    return false;
  };
  std::string layouts, ring_release, ring_arrive, epilogue, shared_reads;
  if (!mode_of("layouts", {"synthesized", "rules"}, &layouts) ||
      !mode_of("shared-reads", {"auto", "elements", "grouped"}, &shared_reads) ||
      !mode_of("ring-release", {"auto", "early", "together"}, &ring_release) ||
      !mode_of("ring-arrive", {"warp", "thread"}, &ring_arrive) ||
      !mode_of("epilogue", {"staged", "tma", "rows", "realigned", "fragments"}, &epilogue)) {
    loaded.exit_status = kExitFailure;
    return loaded;
  }
  if (!layouts.empty()) compile_options.matile.synthesize_layouts = layouts == "synthesized";
  if (!shared_reads.empty()) compile_options.matile.shared_reads = *scalar::shared_reads_from_name(shared_reads);
  if (!ring_release.empty()) {
    using RingRelease = matile::LowerOptions::RingRelease;
    compile_options.matile.ring_release = ring_release == "early"      ? RingRelease::Early
                                          : ring_release == "together" ? RingRelease::Together
                                                                       : RingRelease::Auto;
  }
  if (!ring_arrive.empty()) compile_options.matile.arrive_per_warp = ring_arrive == "warp";
  if (!epilogue.empty()) {
    compile_options.matile.stage_epilogue = epilogue != "fragments";
    compile_options.matile.realign_rows = epilogue == "realigned";
    compile_options.matile.tma_store = epilogue == "tma"      ? matile::LowerOptions::TmaStore::Always
                                       : epilogue == "staged" ? matile::LowerOptions::TmaStore::Persistent
                                                              : matile::LowerOptions::TmaStore::Never;
  }
  SourceFilePtr file = SourceFile::read(options.positionals.front(), &error);
  if (!file) {
    err << "nautilus: error: " << error << "\n";
    loaded.exit_status = kExitFailure;
    return loaded;
  }
  loaded.schedule = compile_options.schedule;
  loaded.compilation = driver::compile(file, compile_options);
  err << loaded.compilation.diagnostics->render_all();
  if (!loaded.compilation.internal_error.empty()) {
    err << "nautilus: internal error: " << loaded.compilation.internal_error << "\n";
    loaded.exit_status = kExitInternal;
    return loaded;
  }
  if (!loaded.compilation.schedule_error.empty()) {
    err << "nautilus: error: " << loaded.compilation.schedule_error << "\n";
    loaded.exit_status = kExitFailure;
    return loaded;
  }
  if (!loaded.compilation.ok()) {
    loaded.exit_status = kExitFailure;
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}

int run_check(const ParsedOptions& options, std::ostream& out, std::ostream& err,
              const CliHooks& hooks) {
  Loaded loaded = load(options, driver::Stage::Spec, hooks, err);
  if (!loaded.ok) return loaded.exit_status;
  const spec::Spec& spec = *loaded.compilation.spec;
  out << spec.file->path() << ": ok: " << spec.definitions.size() << " statements, "
      << spec.inputs.size() << (spec.inputs.size() == 1 ? " input, " : " inputs, ")
      << spec.outputs.size() << (spec.outputs.size() == 1 ? " output" : " outputs") << "\n";
  return kExitOk;
}

int run_lower(const ParsedOptions& options, std::ostream& out, std::ostream& err,
              const CliHooks& hooks) {
  const std::string format = options.get("format", "text");
  if (format != "text" && format != "dot" && format != "json") {
    err << "nautilus: error: unknown format '" << format << "'; expected text, dot or json\n";
    return kExitFailure;
  }
  const driver::RenderFormat render_format = *driver::parse_render_format(format);
  const std::string stage_text = options.get("stage", "all");
  std::optional<driver::Stage> stage;
  if (stage_text != "all") {
    stage = driver::parse_stage(stage_text);
    if (!stage) {
      err << "nautilus: error: unknown stage '" << stage_text << "'; expected "
          << driver::stage_names() << " or all\n";
      return kExitFailure;
    }
  }
  const bool after_all = options.has("print-after-all");
  const bool diff_all = options.has("diff-after-all");
  if (after_all && diff_all) {
    err << "nautilus: error: --print-after-all and --diff-after-all exclude each other: choose "
           "the whole IR or the diffs\n";
    return kExitFailure;
  }
  if (diff_all && format != "text") {
    err << "nautilus: error: --diff-after-all diffs the IR text: use --format text\n";
    return kExitFailure;
  }
  if (format == "dot" && (!stage || after_all)) {
    err << "nautilus: error: --format dot shows one graph: choose one --stage ("
        << driver::stage_names() << ")\n";
    return kExitFailure;
  }
  if (format == "dot" && stage == driver::Stage::Cuda) {
    err << "nautilus: error: --format dot: the cuda stage is source text, not a graph; use text "
           "or json\n";
    return kExitFailure;
  }
  Loaded loaded = load(options, stage.value_or(driver::all_stages().back()), hooks, err);
  if (!loaded.ok) return loaded.exit_status;
  const driver::Compilation& compilation = loaded.compilation;
  const SourceFile* source = compilation.file.get();

  // One banner per shown snapshot; with a pass-by-pass log it also names the pass and its time.
  const auto banner = [](const char* what, const driver::Snapshot& snapshot, bool timed) {
    std::ostringstream line;
    line << "# ===== " << what << (timed ? " pass " + snapshot.pass + ", stage " : " ")
         << driver::stage_name(snapshot.stage);
    if (timed) {
      line << std::fixed << std::setprecision(2) << " (" << snapshot.milliseconds << " ms"
           << (snapshot.unchanged ? ", unchanged" : "") << ")";
    }
    line << " =====\n";
    return line.str();
  };

  std::ostringstream text;
  if (diff_all) {
    // Every pass of the log, however --stage limits how far the pipeline runs.
    for (size_t i = 0; i < compilation.log.size(); ++i) {
      if (i > 0) text << "\n";
      text << banner("diff after", compilation.log[i], true)
           << driver::pass_diff(compilation.log, i, source);
    }
  } else {
    // The snapshots to print: every pass, or the final snapshot of each requested stage.
    std::vector<const driver::Snapshot*> shown;
    if (after_all) {
      for (const driver::Snapshot& snapshot : compilation.log) shown.push_back(&snapshot);
    } else {
      for (driver::Stage s : driver::all_stages()) {
        if (stage && *stage != s) continue;
        if (const driver::Snapshot* snapshot = compilation.final_snapshot(s)) {
          shown.push_back(snapshot);
        }
      }
    }
    if (render_format == driver::RenderFormat::Json) {
      nlohmann::ordered_json document = nlohmann::ordered_json::array();
      for (const driver::Snapshot* snapshot : shown) {
        document.push_back({{"stage", driver::stage_name(snapshot->stage)},
                            {"pass", snapshot->pass},
                            {"unchanged", snapshot->unchanged},
                            {"milliseconds", snapshot->milliseconds},
                            {"ir", driver::render_json(*snapshot)}});
      }
      if (shown.size() == 1 && !after_all) document = document[0]["ir"];
      text << document.dump(2) << "\n";
    } else {
      const bool banners = shown.size() > 1 || after_all;
      for (size_t i = 0; i < shown.size(); ++i) {
        if (banners) {
          if (i > 0) text << "\n";
          text << (after_all ? banner("after", *shown[i], true) : banner("stage", *shown[i], false));
        }
        text << driver::render(*shown[i], render_format, source);
      }
    }
  }

  if (options.has("estimate")) {
    const std::string device_name = options.get("estimate", "h100");
    const std::optional<cost::DeviceModel> device = cost::device_model_for(device_name);
    if (!device) {
      err << "nautilus: error: --estimate: no cost model for '" << device_name << "'; known: "
          << cost::known_device_models() << "\n";
      return kExitFailure;
    }
    if (format != "text" || !compilation.ma_module) {
      err << "nautilus: error: --estimate prints text after the matile stage (--stage matile, "
             "cuda or all)\n";
      return kExitFailure;
    }
    text << "\n# ===== estimate: " << device->name << " =====\n"
         << cost::describe(cost::make_analytical_model(*device)->estimate(*compilation.ma_module));
  }

  const std::string path = options.get("output");
  if (path.empty() || path == "-") {
    out << text.str();
  } else {
    std::ofstream file(path, std::ios::binary);
    file << text.str();
    if (!file) {
      err << "nautilus: error: cannot write '" << path << "'\n";
      return kExitFailure;
    }
  }
  return kExitOk;
}

// "[0, 3, 1]" for a flat row-major index.
std::string coordinates(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coords(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    coords[i] = shape[i] > 0 ? flat % shape[i] : 0;
    flat = shape[i] > 0 ? flat / shape[i] : 0;
  }
  std::string text = "[";
  for (size_t i = 0; i < coords.size(); ++i) text += (i ? ", " : "") + std::to_string(coords[i]);
  return text + "]";
}

int run_eval(const ParsedOptions& options, std::ostream& out, std::ostream& err,
             const CliHooks& hooks) {
  driver::EvalOptions eval_options;
  const std::string stage_text = options.get("stage", "scalar");
  auto stage = driver::parse_stage(stage_text);
  if (!stage) {
    err << "nautilus: error: unknown stage '" << stage_text << "'; expected "
        << driver::stage_names() << "\n";
    return kExitFailure;
  }
  eval_options.stage = *stage;
  if (options.has("seed")) {
    auto seed = parse_non_negative(options.get("seed"), 19);
    if (!seed) {
      err << "nautilus: error: --seed expects a non-negative integer, got '" << options.get("seed")
          << "'\n";
      return kExitFailure;
    }
    eval_options.seed = *seed;
  }
  if (options.has("max-ops")) {
    char* end = nullptr;
    std::string text = options.get("max-ops");
    double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(value > 0)) {
      err << "nautilus: error: --max-ops expects a positive number, got '" << text << "'\n";
      return kExitFailure;
    }
    eval_options.max_operations = value;
  }
  Loaded loaded = load(options, *stage, hooks, err);
  if (!loaded.ok) return loaded.exit_status;

  driver::EvalResult result = driver::evaluate(loaded.compilation, eval_options);
  if (!result.ran) {
    err << "nautilus: error: " << result.error << "\n";
    return kExitFailure;
  }
  const spec::Spec& spec = *loaded.compilation.spec;
  out << "eval " << spec.file->path() << " --stage " << driver::stage_name(*stage) << " --seed "
      << eval_options.seed << "\n  sizes:";
  for (const auto& [name, value] : spec.sizes) out << " " << name << "=" << value;
  out << "\n";
  std::string first_failure;
  for (const driver::OutputCheck& check : result.outputs) {
    out << "  output " << check.name << " (" << dtype_name(check.dtype)
        << "): max relative error " << std::scientific << std::setprecision(2)
        << check.error.max_relative_error << " (tolerance " << check.tolerance << ")  "
        << (check.passed ? "ok" : "FAILED") << std::defaultfloat << "\n";
    if (!check.passed && first_failure.empty()) {
      const TensorData& actual = result.actual.at(check.name);
      const TensorData& expected = result.reference.at(check.name);
      std::ostringstream message;
      message << "output " << check.name << " differs from the float64 reference: max relative error "
              << std::scientific << std::setprecision(3) << check.error.max_relative_error
              << " > tolerance " << std::setprecision(1) << check.tolerance;
      if (check.error.worst_index >= 0) {
        size_t w = static_cast<size_t>(check.error.worst_index);
        message << std::defaultfloat << std::setprecision(6) << "; worst at " << check.name
                << coordinates(check.error.worst_index, expected.shape) << ": got "
                << actual.values[w] << ", expected " << expected.values[w];
      }
      first_failure = message.str();
    }
  }
  if (options.has("save")) {
    std::string error = driver::save_evaluation(result, options.get("save"));
    if (!error.empty()) {
      err << "nautilus: error: " << error << "\n";
      return kExitFailure;
    }
    out << "  saved inputs, reference and outputs to " << options.get("save") << "\n";
  }
  if (!first_failure.empty()) {
    out << "FAIL\n";
    err << "nautilus: error: " << first_failure << "\n";
    return kExitFailure;
  }
  out << "PASS\n";
  return kExitOk;
}

int run_run(const ParsedOptions& options, std::ostream& out, std::ostream& err,
            const CliHooks& hooks) {
  const std::string& target = options.positionals.front();
  std::error_code ec;
  if (std::filesystem::is_directory(target, ec)) {
    return run_packages(target, options.get("reference"), options, out, err);
  }
  profiler::MeasureOptions measure;
  if (!read_runner_options(options, &measure.run, &measure.client, err)) return kExitFailure;
  measure.validate = !options.has("no-reference");
  measure.directory = options.get("output");
  Loaded loaded = load(options, driver::Stage::MATile, hooks, err);
  if (!loaded.ok) return loaded.exit_status;
  profiler::ScheduleMeasurer measurer(measure);
  if (measurer.directory().empty()) {
    err << "nautilus: error: cannot create a directory for the kernel packages\n";
    return kExitFailure;
  }
  const profiler::Measurement measured = measurer.measure(loaded.compilation);
  if (!measured.built()) {
    if (measured.build_error_is_internal) {
      err << "nautilus: internal error: " << measured.build_error << "\n" << measured.build_log;
      return kExitInternal;
    }
    err << "nautilus: error: " << measured.build_error << "\n";
    return kExitFailure;
  }
  out << "packages: " << measurer.directory()
      << (options.has("output") ? "" : " (removed after the run)") << "\n";
  return report_run(measured.run, measure.validate, out, err);
}

int run_compile(const ParsedOptions& options, std::ostream& out, std::ostream& err,
                const CliHooks& hooks) {
  Loaded loaded = load(options, driver::Stage::MATile, hooks, err);
  if (!loaded.ok) return loaded.exit_status;
  return run_compile_command(loaded.compilation, loaded.compilation.ma_module, options, out, err);
}

int run_schedule(const ParsedOptions& options, std::ostream& out, std::ostream& err,
                 const CliHooks&) {
  return run_schedule_command(options, out, err);
}

int run_tune(const ParsedOptions& options, std::ostream& out, std::ostream& err,
             const CliHooks&) {
  return run_tune_command(options, out, err);
}

int run_db(const ParsedOptions& options, std::ostream& out, std::ostream& err, const CliHooks&) {
  return run_db_command(options, out, err);
}

int run_pipeline(const ParsedOptions& options, std::ostream& out, std::ostream& err,
                 const CliHooks& hooks) {
  Loaded loaded = load(options, driver::Stage::MATile, hooks, err);
  if (!loaded.ok) return loaded.exit_status;
  return run_pipeline_command(loaded.compilation, loaded.schedule, options, out, err);
}

using CommandRunner = std::function<int(const ParsedOptions&, std::ostream&, std::ostream&,
                                        const CliHooks&)>;

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const CliHooks& hooks) {
  if (args.empty()) {
    err << general_help();
    return kExitFailure;
  }
  const std::string& command = args.front();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h") {
    out << general_help();
    return kExitOk;
  }
  if (command == "--version") {
    out << "nautilus " << NAUTILUS_VERSION << "\n";
    return kExitOk;
  }
  if (command == "devices") return run_devices_command(rest, out, err);
  if (command == "help") {
    if (rest.empty()) {
      out << general_help();
      return kExitOk;
    }
    for (const CommandSpec* spec : all_commands()) {
      if (spec->name == rest.front()) {
        out << command_help(*spec);
        return kExitOk;
      }
    }
    err << "nautilus: error: unknown command '" << rest.front() << "'\n";
    return kExitFailure;
  }

  const std::vector<std::pair<const CommandSpec*, CommandRunner>> runners = {
      {&kCheck, run_check}, {&kLower, run_lower},     {&kEval, run_eval},
      {&kCompile, run_compile}, {&kRun, run_run}, {&kSchedule, run_schedule},
      {&kPipeline, run_pipeline}, {&kTune, run_tune}, {&kDb, run_db}};
  for (const auto& [spec, runner] : runners) {
    if (spec->name != command) continue;
    if (!rest.empty() && (rest.front() == "--help" || rest.front() == "-h")) {
      out << command_help(*spec);
      return kExitOk;
    }
    std::string error;
    const bool output_flag =
        spec == &kCompile || spec == &kSchedule || spec == &kTune || spec == &kDb;
    auto parsed = parse_options(*spec, output_flag ? expand_output_flag(rest) : rest, &error);
    if (!parsed) {
      err << "nautilus: error: " << error << "\n";
      return kExitFailure;
    }
    return runner(*parsed, out, err, hooks);
  }
  err << "nautilus: error: unknown command '" << command
      << "'; expected check, lower, eval, compile, run, schedule, pipeline, tune, db, devices or help (see 'nautilus --help')\n";
  return kExitFailure;
}

}  // namespace nautilus::cli
