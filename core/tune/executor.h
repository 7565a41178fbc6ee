// Where the tuner's candidates are measured: the seam between the tuner (core/tune/tuner.h),
// which decides what to measure and records it, and the machinery that builds and times kernels.
//
// The local executor (profiler/local_executor.h) builds a batch's kernel packages on a pool of
// threads and runs one nautilus-runner child per local GPU at once; an executor that hands a
// batch to Slurm implements the same interface: `parallelism()` tells the tuner how large a
// batch to hand over, and results come back through the callback as they arrive, in any order,
// so the tuner writes each to the database at once.
//
// This header is types only (no SQLite): profiler/ implements it without linking the database.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/sched/decision.h"
#include "core/tune/tuning_db.h"

namespace nautilus::tune {

// The machine a measurement is made on, as the database keys it.
struct MachineIdentity {
  std::string device_name;
  int sm_count = 0;
  int sm_clock_khz = 0;
  int memory_clock_khz = 0;
  int driver_version = 0;
  std::string compiler_version;
};

// What measuring one schedule gave; the tuner adds the key and the estimate and records it.
struct CandidateOutcome {
  std::string code_hash;  // of the generated CUDA; "" when nothing was built
  std::string status;     // "ok", "build-error", or the runner's status name
  std::string message;
  Validation validation = Validation::NotRun;
  std::optional<double> max_relative_error;
  std::optional<double> median_us, min_us, max_us;
  std::vector<KernelTiming> kernels;
  std::optional<int> registers;
  std::optional<int64_t> spill_bytes;
  // No device to measure on (the run should stop rather than record every candidate as failed).
  bool no_gpu = false;
  // Not run: its generated code (`code_hash`) is measured already, or is being measured, for
  // this run (Executor::skip_code_when). The tuner links it to that measurement.
  bool duplicate = false;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // The device measurements are made on; nullopt with `why_not` (e.g. "no GPU: ...").
  virtual std::optional<MachineIdentity> identity(std::string* why_not) = 0;
  // How many candidates the executor measures at once (the tuner's batch size).
  virtual int parallelism() const { return 1; }
  // Builds, validates and times every schedule of `batch`, calling `on_result(index, outcome)`
  // on the calling thread as each finishes. Every candidate is validated before it is timed.
  virtual void measure(const std::vector<sched::Schedule>& batch,
                       const std::function<void(size_t, const CandidateOutcome&)>& on_result) = 0;

  // The tuner's stop condition (Ctrl-C, the time limit, a fatal error), asked on the calling
  // thread while a batch is measured: once it answers true, an executor that measures several
  // candidates of a batch in turn starts no further one; those already running finish and are
  // reported, the others are not (never recorded, so a later run measures them). An executor
  // that ignores it only makes the tuner stop at the end of the batch.
  void stop_starting_when(std::function<bool()> stop) { stop_starting_ = std::move(stop); }

  // The tuner's duplicate check: two schedules often lower to the same CUDA (a decision that
  // changes nothing, two tile orders of one loop), and timing the same kernel twice wastes the
  // GPU. An executor asks `measured(code_hash)` (text_hash.h over the generated kernel.cu) for
  // every candidate it built, before running it; true means that code is measured already, so
  // the candidate is reported at once with `duplicate` set and its code hash, not run. The
  // check claims the code for the first candidate it answers false for; it may be called from
  // any thread (the tuner's is thread-safe).
  void skip_code_when(std::function<bool(const std::string& code_hash)> measured) {
    code_measured_ = std::move(measured);
  }

 protected:
  bool should_stop_starting() const { return stop_starting_ && stop_starting_(); }
  bool code_already_measured(const std::string& code_hash) const {
    return code_measured_ && !code_hash.empty() && code_measured_(code_hash);
  }
  // The outcome of a candidate that is not run because its code is measured already.
  static CandidateOutcome duplicate_outcome(const std::string& code_hash) {
    CandidateOutcome outcome;
    outcome.code_hash = code_hash;
    outcome.status = "duplicate";
    outcome.duplicate = true;
    return outcome;
  }

 private:
  std::function<bool()> stop_starting_;
  std::function<bool(const std::string&)> code_measured_;
};

}  // namespace nautilus::tune
