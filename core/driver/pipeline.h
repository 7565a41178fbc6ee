// The compilation pipeline: one flat list of stages and passes, with a log of snapshots.
//
//   parse+check   .nt text → Spec               (stage "spec")
//   lower         Spec → scalar IR               (stage "scalar")
//   decisions     the schedule, one pass per decision (tile, inline, rolling_update, ...)
//   verify        scalar IR structural checks after every pass (internal errors only)
//   tilize        scheduled scalar IR → VR tile IR (stage "vrtile"), one kernel per loop nest
//   VR rewrites   CSE, hoisting, delayed normalization, scale folding, rescale cancellation,
//                 exp → exp2, dot operand narrowing (core/rewrite), then `extra_vr_passes`;
//                 the VR verifier after each
//   place         VR tile IR → MA tile IR (stage "matile"): memory spaces, layouts, copies,
//                 mma.sync, software pipelining (core/matile/lower.h); the MA verifier after it
//   emit-cuda     MA tile IR → CUDA C++ (stage "cuda", core/codegen/emit_cuda.h); compiling it
//                 with NVRTC is `nautilus compile`'s job
//
// Every pass runs through a PassLogger (pass_log.h), which records a Snapshot after it: the stage,
// the pass name and summary, the decision it applied, the IR (shared, immutable), whether the pass
// left the IR unchanged (pointer identity) and its wall time, then runs the IR level's verifier.
// The CLI (`--print-after-all`, `--diff-after-all`), the tests and every view of the app read this
// log; nothing recomputes compiler state on its own. A caller may watch snapshots as they are
// recorded (`on_snapshot`) and stop a compile that became stale (`stop`). Extra passes can be
// inserted after a stage (`extra_passes`): tests use this to perturb IR on purpose, and later
// schedules plug in the same way.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "core/driver/pass_log.h"
#include "core/scalar/ir.h"
#include "core/sched/decision.h"
#include "core/spec/ast.h"
#include "core/spec/sema.h"
#include "core/support/diagnostics.h"
#include "core/codegen/emit_cuda.h"
#include "core/matile/ir.h"
#include "core/matile/lower.h"
#include "core/vrtile/ir.h"

namespace nautilus::driver {

// Static description of a pass: the same text feeds CLI help, pass logs and GUI tooltips.
struct PassInfo {
  std::string name;
  Stage stage;
  std::string summary;
};
const std::vector<PassInfo>& pass_registry();

// A user-supplied rewrite of scalar IR run after the built-in scalar passes.
struct ScalarPass {
  std::string name;
  std::string summary;
  std::function<scalar::ProgramPtr(const scalar::ProgramPtr&)> run;
};

// A user-supplied rewrite of VR tile IR run after the built-in VR passes.
struct VRPass {
  std::string name;
  std::string summary;
  std::function<vrtile::ModulePtr(const vrtile::ModulePtr&)> run;
};

struct CompileOptions {
  std::vector<spec::SizeOverride> sizes;
  Stage last_stage = Stage::Scalar;
  // Applied in order after lowering; a decision that does not apply stops the pipeline with
  // `schedule_error` (a user error: the schedule does not fit this spec).
  sched::Schedule schedule;
  std::vector<ScalarPass> extra_passes;
  std::vector<VRPass> extra_vr_passes;
  // Target arch and instruction choices of the MA lowering, and the warps per CTA and pipeline
  // stages of kernels whose nest has no launch attributes (the schedule's `launch` decisions
  // put those in the scalar IR).
  matile::LowerOptions matile;
  // Called on the compiling thread after every pass (see SnapshotObserver).
  SnapshotObserver on_snapshot;
  // When stop is requested the pipeline runs no further pass and returns what it has, with
  // `Compilation::cancelled` set.
  std::stop_token stop;
};

struct Compilation {
  SourceFilePtr file;
  std::shared_ptr<DiagnosticEngine> diagnostics;
  spec::SpecPtr spec;
  scalar::ProgramPtr program;  // the scalar IR after every scalar pass
  vrtile::ModulePtr vr_module;  // the VR tile IR after every VR pass (stage vrtile and later)
  matile::ModulePtr ma_module;  // the MA tile IR (stage matile and later)
  std::shared_ptr<const codegen::EmittedModule> cuda;  // the emitted CUDA C++ (stage cuda)
  // Per kernel of vr_module: the scalar blocks it computes (a decision names a block; the
  // search maps a kernel's estimate back to the blocks a launch decision may name).
  std::vector<std::vector<std::string>> kernel_blocks;
  std::vector<Snapshot> log;
  // A compiler bug (e.g. the verifier rejected a pass's output); empty when none.
  std::string internal_error;
  // "decision 2 tile(O, q=4) does not apply: ..." or "the scheduled program cannot be lowered
  // to tiles: ..."; empty when the schedule applied and every stage asked for was built.
  std::string schedule_error;
  // The compile was stopped (CompileOptions::stop) before every stage asked for was built.
  bool cancelled = false;

  bool ok() const {
    return spec && !diagnostics->has_errors() && internal_error.empty() &&
           schedule_error.empty() && !cancelled;
  }
  // The last snapshot of `stage`, or nullptr when the pipeline did not reach it.
  const Snapshot* final_snapshot(Stage stage) const;
};

Compilation compile(SourceFilePtr file, const CompileOptions& options);

}  // namespace nautilus::driver
