// The tuner's local executor (core/tune/executor.h): one candidate at a time, each compiled into
// a kernel package and run by nautilus-runner (a child process, so a faulting candidate cannot
// take the tuner down) on the local GPU, validated against the unscheduled reference package of
// the same spec before it is timed (profiler/measure.h).
//
// The device identity comes from the same CUDA driver the runner loads: `driver_library` (the
// runner's --driver, tests pass the fake driver) or the system's libcuda.
#pragma once

#include <optional>
#include <string>

#include "core/search/search.h"
#include "core/tune/executor.h"
#include "profiler/measure.h"

namespace nautilus::profiler {

struct LocalExecutorOptions {
  std::string runner_command;   // empty: nautilus-runner next to this program
  std::string driver_library;   // empty: the system's libcuda; else passed to the runner too
  int device = 0;               // the CUDA ordinal measured on
  double timeout_seconds = 600.0;
  std::string lower_arch = "sm_80";  // the search's (search::lowering_arch): what is timed
};

class LocalExecutor : public tune::Executor {
 public:
  LocalExecutor(search::SearchInput input, LocalExecutorOptions options);

  std::optional<tune::MachineIdentity> identity(std::string* why_not) override;
  void measure(const std::vector<sched::Schedule>& batch,
               const std::function<void(size_t, const tune::CandidateOutcome&)>& on_result)
      override;

 private:
  tune::CandidateOutcome measure_one(const sched::Schedule& schedule);

  search::SearchInput input_;
  LocalExecutorOptions options_;
  ScheduleMeasurer measurer_;
};

// Fills the outcome's times, validation, registers and spills from a runner report.
void read_runner_report(const RunResult& run, tune::CandidateOutcome& outcome);

}  // namespace nautilus::profiler
