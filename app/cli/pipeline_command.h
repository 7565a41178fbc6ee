// `nautilus pipeline FILE [--schedule S] [--pin D]... [-D N=V] [--arch sm_80|sm_90a]
// [--max-regs N] [--stages N] [--max-ii CYCLES] [--consumers N] [--pin-role OP=ROLE]...
// [--pin-stage OP=N]...
// [--time-limit SECONDS] [--kernel NAME] [--cache DIR] [--json]`: the pipeline solver
// (core/pipeline, docs/pipeline.md) on the software-pipelined loop of a spec's MA tile IR.
//
// It prints the loop's dependence graph (ops, latencies, units, registers, buffers, edges), the
// solution (II, length, stages, per-op cycle / stage / role, per-role registers), whether it is
// optimal or the best found within the time limit, the solve time, and, when the limits make
// the problem infeasible or the interval is above its lower bound, the conflicting constraints
// in words. Exit status: 0 a schedule was found; 1 no schedule (infeasible limits, a timeout
// with nothing found, a bad option, no pipelined loop); 2 an internal compiler error.
//
//   nautilus pipeline assets/specs/gemm.nt --schedule assets/schedules/gemm.json --arch sm_90a
#pragma once

#include <iosfwd>
#include <vector>

#include "app/cli/options.h"
#include "core/driver/pipeline.h"

namespace nautilus::cli {

// The command's name, usage, help and options (-D, --schedule and --pin are shared with lower).
const CommandSpec& pipeline_command_spec(const std::vector<OptionSpec>& shared_options);

// Everything after the compile: builds the graph of `compilation`'s MA module and solves it.
// `schedule` is the one compiled; the realizing decision names the block its decisions name.
int run_pipeline_command(const driver::Compilation& compilation, const sched::Schedule& schedule,
                         const ParsedOptions& options, std::ostream& out, std::ostream& err);

}  // namespace nautilus::cli
