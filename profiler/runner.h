// nautilus-runner: loads a kernel package on the local GPU, validates it against a reference
// package, times every kernel, and describes all of it in one JSON document.
//
//   nautilus-runner PACKAGE_DIR [--reference REF_DIR] [--reference-cache DIR] [--seed N]
//                   [--warmup N] [--reps N] [--device I] [--flush read|write|none] [--no-flush]
//                   [--timeout SECONDS]
//                   [--timer auto|events] [--driver LIBCUDA]
//   nautilus-runner --devices [--driver LIBCUDA]
//                   prints the machine's device query (device_info.h's to_json) and exits 0, or
//                   3 without a GPU: how a remote executor learns which GPU a node has (the
//                   Slurm executor's first job, profiler/slurm_executor.h).
//
// What one run does (docs/runner.md has the JSON format):
//   1. reads the package (and the reference package) with codegen::read_package;
//   2. finds the GPU (device_info.h) and retains its primary context;
//   3. picks the binary: a fitting cubin, else NVRTC for the local arch, else PTX (kernel_binary.h);
//   4. allocates every buffer; inputs get seeded random values, input k (k-th "input" buffer of
//      launch.json) = random_tensor(shape, dtype, derive_seed(seed, k)): the same values as
//      spec::make_random_inputs, so the CPU interpreters see the GPU's inputs; outputs and
//      intermediates are filled with NaN bytes so that an element a kernel never writes fails;
//   5. computes the expected outputs: runs the reference package on the inputs, or, with
//      --reference-cache, reads the outputs an earlier runner of the same reference, seed and
//      device model stored there (reference_cache.h: a tuning run computes its reference once);
//      the reference always runs before the package, so a faulting package cannot spoil it;
//   6. launches the package's kernels in order, waiting after each so a fault names its kernel,
//      and compares every output with compare_tensors against tolerance(dtype);
//   7. times: `warmup` untimed repetitions, then `reps` timed ones, L2 flushed before each by
//      writing a buffer twice the L2 size; per-kernel durations from CUPTI activity records,
//      or CUDA events when CUPTI is unavailable (the JSON says which and why); median, min, max.
//
// Errors are typed: usage_error, no_gpu, load_error, compile_error, launch_error, timeout,
// wrong_results (and internal_error for a bug in the runner). A launch error (e.g. an illegal memory access, which kills the context) and a
// timeout end the run at once; the report is still printed. Exit status: 0 only when everything
// ran and validation did not fail (see exit_code_for).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/cuda_driver.h"
#include "profiler/l2_flush.h"

namespace nautilus::profiler {

inline constexpr const char* kRunnerReportFormat = "nautilus-runner-report";
inline constexpr int kRunnerReportVersion = 1;

struct RunnerOptions {
  std::string package_dir;
  std::string reference_dir;  // empty: validation is skipped
  // Where the reference's outputs are shared between runners (reference_cache.h); empty: the
  // reference runs every time.
  std::string reference_cache_dir;
  uint64_t seed = 0;          // as `nautilus eval --seed`
  int warmup = 10;
  int repetitions = 100;
  int device = 0;
  L2FlushMode l2_flush = L2FlushMode::Read;  // --flush; --no-flush is none
  double timeout_seconds = 60.0;  // for each wait on the GPU
  bool use_cupti = true;          // --timer events sets false
  std::string driver_library = CudaDriver::kSystemLibrary;
};

struct ParsedRunnerArgs {
  std::optional<RunnerOptions> options;  // set when the arguments are valid
  bool help = false;                     // --help: print runner_usage() and exit 0
  // --devices: print the device query of `devices_driver` and exit (no package).
  bool list_devices = false;
  std::string devices_driver = CudaDriver::kSystemLibrary;
  std::string error;                     // one line when neither
};
ParsedRunnerArgs parse_runner_args(const std::vector<std::string>& args);
std::string runner_usage();

// The error kinds of a report, in its "errors"[i]["kind"].
enum class RunnerErrorKind {
  UsageError,
  NoGpu,
  LoadError,
  CompileError,
  LaunchError,
  Timeout,
  WrongResults,
  InternalError,  // a bug in the runner itself (an exception escaped)
};
const char* runner_error_kind_name(RunnerErrorKind kind);  // "usage_error", "no_gpu", ...

// 0 ok, 1 wrong_results, 2 usage_error, 3 no_gpu, 4 load_error or compile_error,
// 5 launch_error, 6 timeout, 70 internal_error.
int exit_code_for(std::optional<RunnerErrorKind> first_error);

struct RunnerOutcome {
  nlohmann::ordered_json report;
  int exit_code = 0;
  // A kernel may still be running (timeout): the caller must print and leave with _exit, since
  // normal exit runs driver teardown that could wait for it.
  bool abandon_gpu = false;
};

// Runs everything above and returns the report; never throws for bad input or GPU failures.
RunnerOutcome run_runner(const RunnerOptions& options);
// The report of a run that ended before the GPU: arguments that did not parse (UsageError), or
// an exception that escaped run_runner (InternalError).
RunnerOutcome early_error_outcome(RunnerErrorKind kind, const std::string& message);

// Median / min / max / mean of `samples` (median of an even count: mean of the middle two).
struct SampleSummary {
  double median = 0, min = 0, max = 0, mean = 0;
  int count = 0;
};
SampleSummary summarize(std::vector<double> samples);

}  // namespace nautilus::profiler
