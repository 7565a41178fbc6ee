// `nautilus run FILE [--schedule S] [--pin D]... [-D N=V]... [--reps N]` measures a schedule
// (profiler/measure.h): the spec compiled into a kernel package (both sm_80 and sm_90a cubins),
// the unscheduled program of the same spec as its reference, both run through nautilus-runner (a child process: a kernel that
// faults or hangs cannot take the command down); `nautilus run DIR` runs an existing package.
// It prints the device, the validation against the reference and the median time of every
// kernel. Without a GPU it says "no GPU" and exits 1. Exit status: 0 validated (or validation
// skipped with --no-reference) and timed; 1 any failure the runner reports or a compile error;
// 2 internal errors.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "app/cli/options.h"
#include "profiler/runner_client.h"

namespace nautilus::cli {

// The command's options besides those it shares with compile (-D, --schedule, --pin).
std::vector<OptionSpec> run_command_options();

// Reads --reps, --warmup, --seed, --runner and --timeout into `request` and `client`; on a bad
// value prints the error and returns false.
bool read_runner_options(const ParsedOptions& options, profiler::RunRequest* request,
                         profiler::ClientOptions* client, std::ostream& err);

// Prints the runner's result (device, validation, per-kernel medians; `validated` says whether a
// reference was given) and returns the exit status: 0 when the runner reports ok.
int report_run(const profiler::RunResult& result, bool validated, std::ostream& out,
               std::ostream& err);

// Runs `package_dir` (validated against `reference_dir` unless it is empty) with the runner
// options in `options`, prints the summary and returns the exit status.
int run_packages(const std::string& package_dir, const std::string& reference_dir,
                 const ParsedOptions& options, std::ostream& out, std::ostream& err);

}  // namespace nautilus::cli
