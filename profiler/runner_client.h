// The client side of nautilus-runner: runs it as a child process and turns whatever happens into
// one typed RunResult. Used by `nautilus run`, the tuner and the app's profiler panel.
//
// The runner command is a template: words split like a shell would (whitespace, '...' and "..."
// quoting, backslash escapes; no expansion), to which the runner's arguments are appended. The
// default is the nautilus-runner installed next to the calling executable (then "nautilus-runner"
// on PATH); a user without a local GPU may set e.g. "ssh gpuhost nautilus-runner" (the package
// path must then exist on that host too). The whole call has a timeout: past it the runner's
// process group is killed.
//
// Status, from the runner's exit and its JSON report:
//   ok                      exit 0, report status "ok"
//   no_gpu                  no driver, no device (the report says which)
//   compile_error           NVRTC could not compile kernel.cu for the local arch
//   load_error              the package could not be read, or the device refused it
//   illegal_memory_access   a kernel faulted with CUDA_ERROR_ILLEGAL_ADDRESS
//   launch_error            any other launch failure or kernel fault
//   timeout                 the runner reported a GPU timeout, or the client's deadline passed
//   wrong_results           the outputs differ from the reference beyond tolerance
//   usage_error             the runner rejected its arguments
//   runner_crashed          the runner died from a signal (or reported an internal error)
//   malformed_output        no valid report on stdout, or one that contradicts the exit status
//   spawn_failed            the runner command could not be started
// Nothing here throws or aborts for anything the child does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/child_process.h"

namespace nautilus::profiler {

enum class RunStatus {
  Ok,
  NoGpu,
  CompileError,
  LoadError,
  IllegalMemoryAccess,
  LaunchError,
  Timeout,
  WrongResults,
  UsageError,
  RunnerCrashed,
  MalformedOutput,
  SpawnFailed,
};
const char* run_status_name(RunStatus status);  // "ok", "no_gpu", "illegal_memory_access", ...

// What to run: the runner's command-line options (runner.h).
struct RunRequest {
  std::string package_dir;
  std::string reference_dir;  // empty: no validation
  // The runner's --reference-cache: the runners given the same directory compute the
  // reference's outputs once (profiler/reference_cache.h); empty: every run computes them.
  std::string reference_cache_dir;
  std::optional<uint64_t> seed;
  std::optional<int> warmup;
  std::optional<int> repetitions;
  std::optional<int> device;
  bool flush_l2 = true;
  std::optional<double> gpu_timeout_seconds;  // the runner's --timeout
  std::vector<std::string> extra_arguments;   // appended verbatim (e.g. --timer events)
};

struct ClientOptions {
  std::string command_template;  // empty: default_runner_command()
  double timeout_seconds = 600.0;
};

struct RunResult {
  RunStatus status = RunStatus::MalformedOutput;
  std::string message;  // one line for people: what happened and why
  // The runner's report when it printed one (null otherwise).
  nlohmann::json report;
  // Convenience fields read from the report (absent when it has none).
  std::optional<double> total_median_us;
  std::optional<double> max_relative_error;
  std::optional<bool> validation_passed;

  std::vector<std::string> command;  // what was run
  ChildResult process;               // exit code / signal, stdout, stderr, wall time
};

// "<dir of this executable>/nautilus-runner" when that file exists, else "nautilus-runner".
std::string default_runner_command();

// Splits a command template into words (see above); nullopt with `error` for an unterminated
// quote or an empty template.
std::optional<std::vector<std::string>> split_command_template(const std::string& text,
                                                               std::string* error);

// The runner's arguments for `request`: PACKAGE_DIR then options.
std::vector<std::string> runner_arguments(const RunRequest& request);

// Classifies a finished child (pure: used by run_package and by tests).
RunResult classify_runner_result(ChildResult process, double client_timeout_seconds);

// Runs the runner for `request` and classifies the result. Never throws.
RunResult run_package(const RunRequest& request, const ClientOptions& options = {});

}  // namespace nautilus::profiler
