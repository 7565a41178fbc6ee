// Measuring a schedule: the scheduled compilation and the unscheduled lowering of the same spec
// become kernel packages (core/driver/kernel_package.h), and nautilus-runner (a child process,
// runner_client.h) validates the first against the second and times it. `nautilus run`,
// `nautilus schedule --measure` and the studio's Profiler panel all measure through here, so
// they build the same packages and read the runner the same way.
//
//   ScheduleMeasurer measurer(options);            // packages under options.directory, or a
//   Measurement m = measurer.measure(compilation);  // temporary directory removed with it
//   m.built() ? m.run.total_median_us : m.build_error
//
// The reference package of a spec and its sizes is built once per measurer and reused for every
// schedule measured after it (a search measures many schedules of one spec); its outputs are
// computed once too: every run of the measurer passes the runner the same --reference-cache
// directory (reference_cache.h), so the first runner runs the reference kernels and the others
// read what it stored.
//
// Building and running are also separate steps, for callers that build on several threads and run
// on several GPUs (the tuner's local executor, profiler/local_executor.h), or run the packages
// elsewhere (the Slurm executor, profiler/slurm_executor.h, submits each as a job):
//
//   Measurement m = measurer.prepare(file, sizes, schedule);  // any thread: packages only
//   if (m.built()) measurer.run(m, /*device=*/1);              // the runner, on CUDA device 1
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/codegen/package.h"
#include "core/driver/pipeline.h"
#include "profiler/runner_client.h"

namespace nautilus::profiler {

struct MeasureOptions {
  // Repetitions, warm-up, seed, ... of every run; the package directories are filled in.
  RunRequest run;
  ClientOptions client;
  // Validate against the unscheduled lowering of the same spec (its package is built too).
  bool validate = true;
  // Where the packages go: DIR/package (then DIR/package-2, ...) and DIR/reference. Empty: a
  // fresh temporary directory, removed when the measurer is destroyed.
  std::string directory;
  // The arches every package is compiled for; the first is the package's main one. A module
  // lowered for sm_90a (TMA, mbarriers, wgmma) is compiled for sm_90a alone.
  std::vector<codegen::GpuArch> archs = {codegen::GpuArch::Sm90a, codegen::GpuArch::Sm80};
  // The arch measure(file, sizes, schedule) lowers the schedule for: the search's own (its
  // estimates are of that lowering; on sm_90a warp_spec becomes a TMA producer and wgmma
  // consumers, on sm_80 it is not lowered at all), so that the kernel timed is the one ranked.
  std::string lower_arch = "sm_80";
  // Share the reference's outputs between the runs of this measurer (reference_cache.h); false:
  // every run computes them again.
  bool share_reference_outputs = true;
};

struct Measurement {
  // Why nothing ran: a package could not be built ("" when the runner was started); a failure of
  // the reference package starts with "the reference package: ".
  std::string build_error;
  // The build failed on a compiler bug: NVRTC rejected the emitted CUDA (its log is in
  // `build_log`) or the emitter does not trust the MA module. Otherwise a build error is the
  // input's or the machine's (a schedule that does not apply, NVRTC not installed, ...).
  bool build_error_is_internal = false;
  std::string build_log;
  // The runner's outcome; meaningful when built().
  RunResult run;
  std::string package_dir;
  std::string reference_dir;  // empty when not validated

  bool built() const { return build_error.empty(); }
  bool ok() const { return built() && run.status == RunStatus::Ok; }
};

class ScheduleMeasurer {
 public:
  explicit ScheduleMeasurer(MeasureOptions options);
  ~ScheduleMeasurer();
  ScheduleMeasurer(const ScheduleMeasurer&) = delete;
  ScheduleMeasurer& operator=(const ScheduleMeasurer&) = delete;

  // The directory of the packages; empty when a temporary one could not be created (every
  // measurement then says so).
  const std::string& directory() const { return directory_; }
  // The runner's --reference-cache for the runs of this measurer: DIR/reference-outputs; empty
  // when the outputs are not shared.
  std::string reference_cache_dir() const;

  // Measures `scheduled`, a compilation to stage matile or later of the schedule to time.
  Measurement measure(const driver::Compilation& scheduled);
  // Compiles `file` at `sizes` with `schedule` to stage matile, then measures it; a schedule
  // that does not apply is a build error with the compiler's reason.
  Measurement measure(const SourceFilePtr& file, const std::vector<spec::SizeOverride>& sizes,
                      const sched::Schedule& schedule);

  // The first half of measure(): builds the package (each call its own directory) and, when
  // validating, the reference package (once per spec and sizes; a concurrent caller waits for
  // it), but runs nothing. Safe to call from several threads at once.
  Measurement prepare(const driver::Compilation& scheduled);
  Measurement prepare(const SourceFilePtr& file, const std::vector<spec::SizeOverride>& sizes,
                      const sched::Schedule& schedule);
  // The second half: runs the runner on a prepared, built measurement and fills `run`; `device`
  // replaces the CUDA ordinal of options.run. Safe to call from several threads at once.
  void run(Measurement& prepared, std::optional<int> device = std::nullopt) const;

 private:
  // Builds the package of `compilation` into `directory`; fills the build fields of `out` (the
  // reason prefixed with `what` when it is not empty) and returns false on failure.
  bool build(const driver::Compilation& compilation, const std::string& directory,
             const std::string& what, Measurement& out) const;
  // The reference package of the spec and sizes of `scheduled`, built on first need.
  bool reference_for(const driver::Compilation& scheduled, Measurement& out);

  MeasureOptions options_;
  std::string directory_;
  bool owns_directory_ = false;
  std::atomic<int> packages_{0};
  // Held while the reference is looked up or built: one build per spec and sizes, even when
  // several threads prepare candidates of one spec at once.
  std::mutex reference_mutex_;
  // The spec and sizes whose reference package is at reference_dir_.
  SourceFilePtr reference_file_;
  std::vector<std::pair<std::string, int64_t>> reference_sizes_;
  std::string reference_dir_;
};

}  // namespace nautilus::profiler
