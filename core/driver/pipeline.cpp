#include "core/driver/pipeline.h"

#include "core/matile/global_barriers.h"
#include "core/matile/split_masked.h"
#include "core/rewrite/rewrite.h"
#include "core/scalar/lower_spec.h"
#include "core/tilize/lower_scalar.h"

namespace nautilus::driver {

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
      {"order-global-accesses", Stage::MATile,
       "A kernel that writes a global buffer and then reads it back or writes it again gets a "
       "barrier between a thread's write and the other threads' accesses of that buffer "
       "(threads of a CTA see each other's global writes only across a barrier)."},
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

// The registry's description of a built-in pass, as the logger's step.
PassStep registered_step(const std::string& name) {
  for (const PassInfo& info : pass_registry()) {
    if (info.name == name) return {info.stage, info.name, info.summary, std::nullopt};
  }
  return {Stage::Spec, name, {}, std::nullopt};
}

// Stage vrtile: tilize, the VR rewrites (core/rewrite), then any extra VR passes.
vrtile::ModulePtr build_vrtile(const CompileOptions& options, const scalar::ProgramPtr& program,
                               PassLogger& logger, Compilation& result) {
  vrtile::ModulePtr module =
      logger.run(registered_step("tilize"), vrtile::ModulePtr(), [&]() -> vrtile::ModulePtr {
        tilize::TilizeResult tiled = tilize::lower_to_vrtile(*program);
        if (!tiled.module) {
          result.schedule_error =
              "the scheduled program cannot be lowered to tiles: " + tiled.error;
          return nullptr;
        }
        result.kernel_blocks = tiled.kernel_blocks;
        return tiled.module;
      });
  if (!module) return nullptr;
  std::vector<VRPass> passes;
  for (const rewrite::VRPassInfo& rewrite : rewrite::vr_rewrite_passes()) {
    passes.push_back({rewrite.name, rewrite.summary, rewrite.run});
  }
  passes.insert(passes.end(), options.extra_vr_passes.begin(), options.extra_vr_passes.end());
  for (const VRPass& pass : passes) {
    module = logger.run(PassStep{Stage::VRTile, pass.name, pass.summary, std::nullopt}, module,
                        [&] { return pass.run(module); });
    if (!module) return nullptr;
  }
  return module;
}

}  // namespace

Compilation compile(SourceFilePtr file, const CompileOptions& options) {
  Compilation result;
  result.file = file;
  result.diagnostics = std::make_shared<DiagnosticEngine>(file);
  PassLogger logger(options.on_snapshot, options.stop);
  // Every exit hands the log and the logger's verdicts to the result.
  const auto finish = [&]() -> Compilation {
    result.log = logger.take_log();
    if (result.internal_error.empty()) result.internal_error = logger.malformed();
    result.cancelled = logger.cancelled();
    return std::move(result);
  };

  result.spec = logger.run(registered_step("parse-and-check"), spec::SpecPtr(), [&] {
    return spec::load_spec(file, options.sizes, *result.diagnostics);
  });
  if (!result.spec || options.last_stage == Stage::Spec) return finish();

  scalar::ProgramPtr program =
      logger.run(registered_step("lower-to-scalar"), scalar::ProgramPtr(),
                 [&] { return scalar::lower_spec(*result.spec); });
  if (!program) return finish();

  for (size_t i = 0; i < options.schedule.decisions.size(); ++i) {
    const sched::Decision& decision = options.schedule.decisions[i];
    const sched::DecisionKind* kind = sched::find_decision_kind(decision.kind);
    PassStep step{Stage::Scalar, sched::print_decision(decision),
                  kind ? kind->summary : std::string(), decision};
    program = logger.run(step, program, [&]() -> scalar::ProgramPtr {
      sched::ApplyResult applied = sched::apply_decision(program, decision);
      if (!applied.ok()) {
        result.schedule_error = "decision " + std::to_string(i + 1) + " " + step.name +
                                " does not apply: " + applied.reason;
      }
      return applied.program;
    });
    if (!program) return finish();
  }

  for (const ScalarPass& pass : options.extra_passes) {
    program = logger.run(PassStep{Stage::Scalar, pass.name, pass.summary, std::nullopt}, program,
                         [&] { return pass.run(program); });
    if (!program) return finish();
  }
  result.program = program;
  if (options.last_stage == Stage::Scalar) return finish();

  result.vr_module = build_vrtile(options, program, logger, result);
  if (options.last_stage == Stage::VRTile || !result.vr_module) return finish();

  // Stage matile: placement of every tile, then loops split at their mask's diagonal, then
  // barriers between threads' accesses of a global buffer a kernel writes and reads back.
  const matile::ModulePtr placed =
      logger.run(registered_step("place"), matile::ModulePtr(), [&]() -> matile::ModulePtr {
        // Each kernel carries its own warps and stages (the schedule's launch attributes).
        layout::Result<matile::ModulePtr> kernels =
            matile::lower_to_matile(result.vr_module, options.matile);
        if (!kernels) {
          result.schedule_error = "the tiles cannot be placed: " + kernels.error().message;
          return nullptr;
        }
        return *kernels;
      });
  if (!placed) return finish();
  const matile::ModulePtr split = logger.run(registered_step("split-masked"), placed,
                                             [&] { return matile::split_masked_loops(placed); });
  if (!split) return finish();
  result.ma_module = logger.run(registered_step("order-global-accesses"), split,
                                [&] { return matile::order_global_accesses(split); });
  if (options.last_stage == Stage::MATile || !result.ma_module) return finish();

  // Stage cuda: the emitter. A construct it cannot print is a limit of the schedule's kernel
  // (reported like a schedule error); malformed MA tile IR is a compiler bug.
  result.cuda = logger.run(registered_step("emit-cuda"), CudaModulePtr(), [&]() -> CudaModulePtr {
    codegen::EmitOptions emit_options;
    emit_options.source = result.file.get();
    codegen::Result<codegen::EmittedModule> emitted =
        codegen::emit_cuda(*result.ma_module, emit_options);
    if (!emitted.ok()) {
      std::string& error = emitted.error().kind == codegen::CodegenError::Kind::InvalidInput
                               ? result.internal_error
                               : result.schedule_error;
      error = "cannot emit CUDA: " + emitted.error().message;
      return nullptr;
    }
    return std::make_shared<const codegen::EmittedModule>(std::move(*emitted));
  });
  return finish();
}

}  // namespace nautilus::driver
