// The tuner's local executor (core/tune/executor.h): builds every candidate of a batch into a
// kernel package on a pool of threads (lowering and NVRTC, `jobs` at once) and runs each package,
// as soon as it is built, in a nautilus-runner child process (so a faulting candidate cannot take
// the tuner down) on the next free GPU of `devices`, one runner per device at once. Each candidate
// is validated against the unscheduled reference package of the same spec (built once) before it
// is timed (profiler/measure.h).
//
//   batch of 8, jobs 4, devices {0, 1}:
//     build threads   [c0][c1][c2][c3] [c4][c5][c6][c7]       (4 NVRTC compiles at a time)
//     device 0             [run c0]  [run c2]  [run c4] ...    (a runner with --device 0)
//     device 1              [run c1]  [run c3]  [run c5] ...   (a runner with --device 1)
//   results reach the tuner on its own thread in the order the runs finish.
//
// A built candidate whose generated code the tuner says is measured already
// (Executor::skip_code_when) is reported as a duplicate at once and never run.
//
// Every device must be the same model (name and SM count): the database keys a measurement by
// the device, and the identity recorded is that model's. A runner that fails on one device (a
// fault, a crash, a timeout) is that candidate's recorded failure; the devices go on with the
// next candidates.
//
// The device identity comes from the same CUDA driver the runner loads: `driver_library` (the
// runner's --driver, tests pass the fake driver) or the system's libcuda.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/search/search.h"
#include "core/tune/executor.h"
#include "profiler/measure.h"

namespace nautilus::profiler {

struct LocalExecutorOptions {
  std::string runner_command;   // empty: nautilus-runner next to this program
  std::string driver_library;   // empty: the system's libcuda; else passed to the runner too
  std::vector<int> devices = {0};  // the CUDA ordinals measured on, one runner each at a time
  int jobs = 1;                 // candidates built (lowered and compiled by NVRTC) at once
  double timeout_seconds = 600.0;
  std::string lower_arch = "sm_80";  // the search's (search::lowering_arch): what is timed
};

// Candidates per device in one batch: the builds of a batch run ahead of its runs, so a device
// waits for a build only at the start of each batch.
inline constexpr int kCandidatesPerDevice = 4;

class LocalExecutor : public tune::Executor {
 public:
  LocalExecutor(search::SearchInput input, LocalExecutorOptions options);

  std::optional<tune::MachineIdentity> identity(std::string* why_not) override;
  // kCandidatesPerDevice per device.
  int parallelism() const override;
  void measure(const std::vector<sched::Schedule>& batch,
               const std::function<void(size_t, const tune::CandidateOutcome&)>& on_result)
      override;

 private:
  search::SearchInput input_;
  LocalExecutorOptions options_;
  ScheduleMeasurer measurer_;
};

// The local executor as `nautilus tune` and the studio's Measure build it: `options` with
// `lower_arch` set to the arch the search with `search_options` lowers for on `model`
// (search::lowering_arch), so the kernels timed are the ones the search estimated.
std::unique_ptr<LocalExecutor> make_local_executor(const search::SearchInput& input,
                                                   const search::SearchOptions& search_options,
                                                   const cost::CostModel& model,
                                                   LocalExecutorOptions options);

// The name of local CUDA device `index` as the database keys it, through `driver_library` (""
// for the system's libcuda); "" with `why` when there is no GPU or no such device.
std::string local_device_name(const std::string& driver_library, int index, std::string* why);

// Parses a --devices list such as "0,1,3": distinct non-negative CUDA ordinals; nullopt with
// `error` otherwise.
std::optional<std::vector<int>> parse_device_list(const std::string& text, std::string* error);

// The code hash the database keys a built package by: tune::hash_text of its kernel.cu ("" when
// it has none).
std::string package_code_hash(const std::string& package_dir);

// The outcome of a prepared (and, when built, run) measurement: the build error, or the runner's
// status, validation, times, registers and spills.
tune::CandidateOutcome candidate_outcome(const Measurement& measured);

// The compiler a measurement is keyed by (MachineIdentity::compiler_version): "nautilus 0.1.0
// (compiler 3f2a9c0d1e4b), NVRTC 13.0", the hash of core/'s sources at build time
// (core/support/build_identity.h); "NVRTC missing" without the library.
std::string compiler_version();

// Fills the outcome's times, validation, registers and spills from a runner report.
void read_runner_report(const RunResult& run, tune::CandidateOutcome& outcome);

}  // namespace nautilus::profiler
