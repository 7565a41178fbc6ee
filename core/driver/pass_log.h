// The pass log: what every pass of the pipeline produced, as typed IR, in the order it ran.
//
// A Snapshot is one pass's result: its stage, its name and summary, the decision it applied (for
// a scheduling pass), the IR it returned (a shared pointer to immutable nodes, so any thread may
// read it), whether it returned its input unchanged (pointer identity, as a mutator that changes
// nothing returns its input) and its wall time. The pipeline owns no snapshot-building code of its
// own: every pass goes through `PassLogger::run`, which
//
//   1. stops before the pass when the compile's stop token asks (a newer edit made it stale),
//   2. times the pass, which returns the new IR or null after recording why it failed,
//   3. appends the snapshot and hands it to the observer (the studio shows passes as they finish),
//   4. runs the IR level's verifier on the result; a complaint is a compiler bug naming the pass.
//
// Views and the CLI read snapshots through `core/driver/render.h`; nothing re-parses a pass name
// or a printed decision to learn what a pass was.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/codegen/emit_cuda.h"
#include "core/matile/ir.h"
#include "core/scalar/ir.h"
#include "core/sched/decision.h"
#include "core/spec/ast.h"
#include "core/vrtile/ir.h"

namespace nautilus::driver {

enum class Stage { Spec, Scalar, VRTile, MATile, Cuda };
const char* stage_name(Stage stage);
std::optional<Stage> parse_stage(std::string_view name);
// "spec, scalar, vrtile, matile, cuda" — for messages listing the valid stage names.
std::string stage_names();
std::vector<Stage> all_stages();

using CudaModulePtr = std::shared_ptr<const codegen::EmittedModule>;

// Which pass a snapshot comes from.
struct PassStep {
  Stage stage = Stage::Spec;
  // The registry name ("tilize"), or the printed decision for a scheduling pass.
  std::string name;
  std::string summary;
  // The decision a scheduling pass applies; empty for every other pass.
  std::optional<sched::Decision> decision;
};

struct Snapshot {
  Stage stage = Stage::Spec;
  std::string pass;
  std::string summary;
  std::optional<sched::Decision> decision;  // set exactly for the passes that apply a decision
  spec::SpecPtr spec;            // stage Spec
  scalar::ProgramPtr program;    // stage Scalar
  bool unchanged = false;
  double milliseconds = 0.0;
  vrtile::ModulePtr vr_module;   // stage VRTile
  matile::ModulePtr ma_module;   // stage MATile
  CudaModulePtr cuda;            // stage Cuda: the source and launches
};

// Called on the compiling thread right after each snapshot is appended. The reference is valid
// only during the call (the log may grow afterwards); copy the snapshot to keep it — copies share
// the IR.
using SnapshotObserver = std::function<void(const Snapshot&)>;

// Where each IR type goes in a snapshot, and its verifier (an empty list when the IR is
// well-formed; the spec and the CUDA source have none beyond their producers' own checks).
void store_ir(Snapshot& snapshot, const spec::SpecPtr& spec);
void store_ir(Snapshot& snapshot, const scalar::ProgramPtr& program);
void store_ir(Snapshot& snapshot, const vrtile::ModulePtr& module);
void store_ir(Snapshot& snapshot, const matile::ModulePtr& module);
void store_ir(Snapshot& snapshot, const CudaModulePtr& cuda);
std::vector<std::string> verify_ir(const spec::Spec& spec);
std::vector<std::string> verify_ir(const scalar::Program& program);
std::vector<std::string> verify_ir(const vrtile::Module& module);
std::vector<std::string> verify_ir(const matile::Module& module);
std::vector<std::string> verify_ir(const codegen::EmittedModule& cuda);

class PassLogger {
 public:
  explicit PassLogger(SnapshotObserver observer = {}, std::stop_token stop = {})
      : observer_(std::move(observer)), stop_(std::move(stop)) {}

  // Runs `pass` (a callable returning the same pointer type as `input`) as the pass `step` and
  // logs its result. Returns the pass's IR, or null when the compile was stopped before the pass,
  // when the pass failed (it returns null after recording its own reason, e.g. a schedule error)
  // or when the verifier rejected its output (`malformed()` says how). `input` is the IR the pass
  // rewrites, or null for a pass that starts a stage from nothing the log holds.
  template <typename IRPtr, typename Pass>
  IRPtr run(PassStep step, const IRPtr& input, Pass&& pass) {
    static_assert(std::is_same_v<std::invoke_result_t<Pass&>, IRPtr>,
                  "a pass returns the IR type it rewrites");
    if (stop_.stop_requested()) {
      cancelled_ = true;
      return nullptr;
    }
    const auto start = std::chrono::steady_clock::now();
    IRPtr output = pass();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!output) return nullptr;
    Snapshot snapshot;
    snapshot.stage = step.stage;
    snapshot.pass = std::move(step.name);
    snapshot.summary = std::move(step.summary);
    snapshot.decision = std::move(step.decision);
    snapshot.unchanged = input != nullptr && output == input;
    snapshot.milliseconds = ms;
    store_ir(snapshot, output);
    log_.push_back(std::move(snapshot));
    if (observer_) observer_(log_.back());
    if (!record_problems(verify_ir(*output), log_.back())) return nullptr;
    return output;
  }

  // True once a pass was skipped because the stop token asked.
  bool cancelled() const { return cancelled_; }
  // "scalar IR after pass 'tile(O, m=64)' is malformed: ..." — a compiler bug; empty when none.
  const std::string& malformed() const { return malformed_; }
  const std::vector<Snapshot>& log() const { return log_; }
  std::vector<Snapshot> take_log() { return std::move(log_); }

 private:
  // Records the verifier's problems with the IR of `snapshot`; true when there are none.
  bool record_problems(const std::vector<std::string>& problems, const Snapshot& snapshot);

  SnapshotObserver observer_;
  std::stop_token stop_;
  std::vector<Snapshot> log_;
  bool cancelled_ = false;
  std::string malformed_;
};

}  // namespace nautilus::driver
