#include "core/driver/pipeline.h"

#include <algorithm>
#include <chrono>

#include "core/matile/split_masked.h"
#include "core/matile/verifier.h"
#include "core/rewrite/rewrite.h"
#include "core/sched/launch.h"
#include "core/scalar/lower_spec.h"
#include "core/scalar/verifier.h"
#include "core/tilize/lower_scalar.h"
#include "core/vrtile/verifier.h"

namespace nautilus::driver {

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::Spec: return "spec";
    case Stage::Scalar: return "scalar";
    case Stage::VRTile: return "vrtile";
    case Stage::MATile: return "matile";
    case Stage::Cuda: return "cuda";
  }
  return "?";
}

std::vector<Stage> all_stages() {
  return {Stage::Spec, Stage::Scalar, Stage::VRTile, Stage::MATile, Stage::Cuda};
}

std::optional<Stage> parse_stage(std::string_view name) {
  for (Stage stage : all_stages()) {
    if (name == stage_name(stage)) return stage;
  }
  return std::nullopt;
}

std::string stage_names() {
  std::string names;
  for (Stage stage : all_stages()) {
    if (!names.empty()) names += ", ";
    names += stage_name(stage);
  }
  return names;
}

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> passes = {
      {"parse-and-check", Stage::Spec,
       "Parses the .nt file and checks names, ranks, extents, index roles, dtypes and sizes."},
      {"lower-to-scalar", Stage::Scalar,
       "One loop nest per statement (plus one per nested reduction), intermediates in global "
       "memory, f32 arithmetic."},
      {"tilize", Stage::VRTile,
       "One kernel per loop nest: grid loops become the CTA grid, split reduction loops become "
       "`for` loops carrying running values, every other loop becomes a tile axis; values a "
       "kernel reads back stay in registers."},
      {"place", Stage::MATile,
       "Every tile gets a memory space and an explicit layout: dot operands go global → shared "
       "(cp.async, swizzled) → registers (ldmatrix) → mma.sync, loads in loops are software "
       "pipelined, the rest uses blocked register layouts."},
      {"split-masked", Stage::MATile,
       "A loop whose body masks its tile with a comparison of index tiles (causal attention's "
       "n <= m) is split in two: the iterations where the comparison holds on the whole tile "
       "run without the mask, the rest (the diagonal tiles) with it, so the main loop carries "
       "no mask arithmetic or its registers."},
      {"emit-cuda", Stage::Cuda,
       "Prints the MA tile IR as CUDA C++: one extern \"C\" kernel per MA kernel, register "
       "tiles as per-thread arrays, cp.async / ldmatrix / mma.sync as inline PTX, comments "
       "quoting the spec line of each section."},
  };
  return passes;
}

const Snapshot* Compilation::final_snapshot(Stage stage) const {
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    if (it->stage == stage) return &*it;
  }
  return nullptr;
}

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

const PassInfo& pass_info(const std::string& name) {
  for (const PassInfo& info : pass_registry()) {
    if (info.name == name) return info;
  }
  return pass_registry().front();
}

// Records a verifier's problems with `level` IR after `pass` as an internal error (a compiler
// bug naming the pass); true when there are none.
bool no_problems(const std::vector<std::string>& problems, const std::string& level,
                 const std::string& pass, Compilation& result) {
  if (problems.empty()) return true;
  result.internal_error = level + " after pass '" + pass + "' is malformed: " + problems.front();
  if (problems.size() > 1) {
    result.internal_error += " (and " + std::to_string(problems.size() - 1) + " more)";
  }
  return false;
}

bool verify_after(const std::string& pass, const scalar::Program& program, Compilation& result) {
  return no_problems(scalar::verify(program), "scalar IR", pass, result);
}

// A log entry without IR; the caller sets the IR field of its stage.
Snapshot log_entry(Stage stage, std::string pass, std::string summary, bool unchanged, double ms) {
  Snapshot snapshot;
  snapshot.stage = stage;
  snapshot.pass = std::move(pass);
  snapshot.summary = std::move(summary);
  snapshot.unchanged = unchanged;
  snapshot.milliseconds = ms;
  return snapshot;
}

bool verify_vr_after(const std::string& pass, const vrtile::Module& module, Compilation& result) {
  return no_problems(vrtile::verify(module), "VR tile IR", pass, result);
}

// Stage vrtile: tilize, the VR rewrites (core/rewrite), then any extra VR passes, verifying
// after each.
void build_vrtile(const CompileOptions& options, Compilation& result) {
  auto start = Clock::now();
  tilize::TilizeResult tiled = tilize::lower_to_vrtile(*result.program);
  if (!tiled.module) {
    result.schedule_error = "the scheduled program cannot be lowered to tiles: " + tiled.error;
    return;
  }
  result.kernel_blocks = tiled.kernel_blocks;
  const PassInfo& info = pass_info("tilize");
  Snapshot snapshot = log_entry(Stage::VRTile, info.name, info.summary, false, elapsed_ms(start));
  snapshot.vr_module = tiled.module;
  result.log.push_back(std::move(snapshot));
  if (!verify_vr_after(info.name, *tiled.module, result)) return;
  vrtile::ModulePtr module = tiled.module;
  std::vector<VRPass> passes;
  for (const rewrite::VRPassInfo& rewrite : rewrite::vr_rewrite_passes()) {
    passes.push_back({rewrite.name, rewrite.summary, rewrite.run});
  }
  passes.insert(passes.end(), options.extra_vr_passes.begin(), options.extra_vr_passes.end());
  for (const VRPass& pass : passes) {
    start = Clock::now();
    vrtile::ModulePtr next = pass.run(module);
    Snapshot step =
        log_entry(Stage::VRTile, pass.name, pass.summary, next == module, elapsed_ms(start));
    step.vr_module = next;
    result.log.push_back(std::move(step));
    module = next;
    if (!verify_vr_after(pass.name, *module, result)) return;
  }
  result.vr_module = module;
}

// The placement of a module whose kernels may have their own launch choices: kernels without
// one use `options.matile`; each kernel with one is placed alone with its warps and stages.
layout::Result<matile::ModulePtr> place_kernels(const CompileOptions& options,
                                                const Compilation& result) {
  const std::vector<sched::LaunchChoice> choices = sched::launch_choices(options.schedule);
  if (choices.empty()) return matile::lower_to_matile(result.vr_module, options.matile);
  const vrtile::Module& vr = *result.vr_module;
  auto merged = std::make_shared<matile::Module>();
  for (size_t k = 0; k < vr.kernels.size(); ++k) {
    matile::LowerOptions kernel_options = options.matile;
    for (const sched::LaunchChoice& choice : choices) {
      const std::vector<std::string>& blocks = result.kernel_blocks.at(k);
      if (std::find(blocks.begin(), blocks.end(), choice.block) != blocks.end()) {
        kernel_options.warps = choice.warps;
        kernel_options.stages = choice.stages;
      }
    }
    auto single = std::make_shared<vrtile::Module>(vr);
    single->kernels = {vr.kernels[k]};
    layout::Result<matile::ModulePtr> placed = matile::lower_to_matile(single, kernel_options);
    if (!placed) return placed;
    if (merged->kernels.empty()) {
      matile::Module header = **placed;
      header.kernels.clear();
      *merged = header;
    }
    for (const matile::KernelPtr& kernel : (*placed)->kernels) merged->kernels.push_back(kernel);
  }
  return matile::ModulePtr(merged);
}

// Stage matile: placement of every tile, then the MA verifier.
void build_matile(const CompileOptions& options, Compilation& result) {
  auto start = Clock::now();
  layout::Result<matile::ModulePtr> placed = place_kernels(options, result);
  if (!placed) {
    result.schedule_error = "the tiles cannot be placed: " + placed.error().message;
    return;
  }
  const PassInfo& info = pass_info("place");
  Snapshot snapshot = log_entry(Stage::MATile, info.name, info.summary, false, elapsed_ms(start));
  snapshot.ma_module = *placed;
  result.log.push_back(std::move(snapshot));
  if (!no_problems(matile::verify(**placed), "MA tile IR", info.name, result)) return;

  start = Clock::now();
  matile::ModulePtr split = matile::split_masked_loops(*placed);
  const PassInfo& split_info = pass_info("split-masked");
  Snapshot split_snapshot = log_entry(Stage::MATile, split_info.name, split_info.summary,
                                      split == *placed, elapsed_ms(start));
  split_snapshot.ma_module = split;
  result.log.push_back(std::move(split_snapshot));
  if (!no_problems(matile::verify(*split), "MA tile IR", split_info.name, result)) return;
  result.ma_module = split;
}

// Stage cuda: the emitter. A construct it cannot print is a limit of the schedule's kernel
// (reported like a schedule error); malformed MA tile IR is a compiler bug.
void build_cuda(Compilation& result) {
  auto start = Clock::now();
  codegen::EmitOptions emit_options;
  emit_options.source = result.file.get();
  codegen::Result<codegen::EmittedModule> emitted = codegen::emit_cuda(*result.ma_module,
                                                                       emit_options);
  if (!emitted.ok()) {
    if (emitted.error().kind == codegen::CodegenError::Kind::InvalidInput) {
      result.internal_error = "cannot emit CUDA: " + emitted.error().message;
    } else {
      result.schedule_error = "cannot emit CUDA: " + emitted.error().message;
    }
    return;
  }
  const PassInfo& info = pass_info("emit-cuda");
  Snapshot snapshot = log_entry(Stage::Cuda, info.name, info.summary, false, elapsed_ms(start));
  auto cuda = std::make_shared<const codegen::EmittedModule>(std::move(*emitted));
  snapshot.cuda = cuda;
  result.log.push_back(std::move(snapshot));
  result.cuda = cuda;
}

}  // namespace

Compilation compile(SourceFilePtr file, const CompileOptions& options) {
  Compilation result;
  result.file = file;
  result.diagnostics = std::make_shared<DiagnosticEngine>(file);

  auto start = Clock::now();
  result.spec = spec::load_spec(file, options.sizes, *result.diagnostics);
  if (!result.spec) return result;
  {
    const PassInfo& info = pass_info("parse-and-check");
    Snapshot snapshot = log_entry(Stage::Spec, info.name, info.summary, false, elapsed_ms(start));
    snapshot.spec = result.spec;
    result.log.push_back(std::move(snapshot));
  }
  if (options.last_stage == Stage::Spec) return result;

  start = Clock::now();
  scalar::ProgramPtr program = scalar::lower_spec(*result.spec);
  {
    const PassInfo& info = pass_info("lower-to-scalar");
    Snapshot snapshot = log_entry(Stage::Scalar, info.name, info.summary, false, elapsed_ms(start));
    snapshot.program = program;
    result.log.push_back(std::move(snapshot));
  }
  if (!verify_after("lower-to-scalar", *program, result)) return result;

  for (size_t i = 0; i < options.schedule.decisions.size(); ++i) {
    const sched::Decision& decision = options.schedule.decisions[i];
    const std::string text = sched::print_decision(decision);
    start = Clock::now();
    sched::ApplyResult applied = sched::apply_decision(program, decision);
    if (!applied.ok()) {
      result.schedule_error =
          "decision " + std::to_string(i + 1) + " " + text + " does not apply: " + applied.reason;
      return result;
    }
    const sched::DecisionKind* kind = sched::find_decision_kind(decision.kind);
    Snapshot snapshot = log_entry(Stage::Scalar, text, kind ? kind->summary : std::string(),
                                  applied.program == program, elapsed_ms(start));
    snapshot.program = applied.program;
    result.log.push_back(std::move(snapshot));
    program = applied.program;
    if (!verify_after(text, *program, result)) return result;
  }

  for (const ScalarPass& pass : options.extra_passes) {
    start = Clock::now();
    scalar::ProgramPtr next = pass.run(program);
    double ms = elapsed_ms(start);
    bool unchanged = next == program;
    Snapshot snapshot = log_entry(Stage::Scalar, pass.name, pass.summary, unchanged, ms);
    snapshot.program = next;
    result.log.push_back(std::move(snapshot));
    program = next;
    if (!verify_after(pass.name, *program, result)) return result;
  }
  result.program = program;
  if (options.last_stage == Stage::Scalar) return result;
  build_vrtile(options, result);
  if (options.last_stage == Stage::VRTile || !result.vr_module) return result;
  build_matile(options, result);
  if (options.last_stage == Stage::MATile || !result.ma_module) return result;
  build_cuda(result);
  return result;
}

}  // namespace nautilus::driver
