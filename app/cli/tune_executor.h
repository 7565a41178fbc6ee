// `nautilus tune --executor local|slurm`: which executor measures the candidates, and the Slurm
// executor's options (profiler/slurm_executor.h, docs/tuning.md "Tuning on a Slurm cluster").
//
//   nautilus tune FILE ... --executor slurm [--slurm-partition P] [--slurm-gres gpu:1|none]
//       [--slurm-time T] [--slurm-jobs N] [--slurm-wait T] [--slurm-dir DIR] [--slurm-arg ARG]...
#pragma once

#include <optional>
#include <ostream>

#include "app/cli/options.h"
#include "profiler/slurm_executor.h"

namespace nautilus::cli {

// Appends --executor and the --slurm-* options to `command`.
void add_executor_options(CommandSpec& command);

struct ExecutorChoice {
  bool slurm = false;
  // The --slurm-* options; the runner, driver, arch and cancellation are the caller's to set.
  profiler::SlurmExecutorOptions slurm_options;
};

// Reads --executor and the --slurm-* options; nullopt after printing the first error (an unknown
// executor, a bad value, a --slurm-* option without --executor slurm).
std::optional<ExecutorChoice> read_executor_choice(const ParsedOptions& options,
                                                   std::ostream& err);

}  // namespace nautilus::cli
