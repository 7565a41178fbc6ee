// `nautilus schedule FILE [-D ...] [--pin D]... [--forbid D]... [--schedule S] [--beam N]
// [--seed N] [--tree tree.json] [-o schedule.json] [--measure K]`: the auto-scheduler
// (core/search) from the command line.
//
// It prints the chosen decisions, the cost model's estimate (per kernel, with what bounds it) and
// the search's statistics (nodes expanded, pruned, leaves, compiles, time); `--tree` writes every
// node of the search tree as JSON (docs/search.md), `-o` the chosen schedule as a schedule file
// that `nautilus compile/run/eval --schedule` accept. `--measure K` times the K best complete
// schedules through nautilus-runner (each validated against the unscheduled reference) and
// chooses by measured time; without a GPU it warns "no GPU" and keeps the estimate's choice.
// Exit status: 0 a schedule was chosen; 1 a user-facing failure (bad option, conflicting pins,
// nothing compiles); 2 an internal compiler error.
#pragma once

#include <iosfwd>
#include <vector>

#include "app/cli/options.h"

namespace nautilus::cli {

// The command's name, usage, help and options (-D is shared with the other commands).
const CommandSpec& schedule_command_spec(const std::vector<OptionSpec>& shared_options);

int run_schedule_command(const ParsedOptions& options, std::ostream& out, std::ostream& err);

}  // namespace nautilus::cli
