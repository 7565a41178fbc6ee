// `nautilus run FILE [--schedule S] [--pin D]... [-D N=V]... [--reps N]` compiles a spec into a
// kernel package (both sm_80 and sm_90a cubins), compiles the unscheduled program of the same
// spec as its reference, and runs both through nautilus-runner (a child process: a kernel that
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

namespace nautilus::cli {

// The command's options besides those it shares with compile (-D, --schedule, --pin).
std::vector<OptionSpec> run_command_options();

// Runs `package_dir` (validated against `reference_dir` unless it is empty) with the runner
// options in `options`, prints the summary and returns the exit status.
int run_packages(const std::string& package_dir, const std::string& reference_dir,
                 const ParsedOptions& options, std::ostream& out, std::ostream& err);

}  // namespace nautilus::cli
