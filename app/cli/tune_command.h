// `nautilus tune` and `nautilus db`: measured tuning with the tuning database (docs/tuning.md).
//
//   nautilus tune FILE [-D ...] [--pin D]... [--budget N | --time T] [--resume] [--db PATH]
//                [--devices 0,1,...] [--jobs N]
//     searches, then measures the candidates the cost model ranks best (the search's leaves,
//     then mutations of the best measured schedules) on the local GPUs (one runner per device
//     at once, candidates compiled on --jobs threads), each validated before it is timed and
//     written to the database as it arrives; progress with an ETA on stderr; Ctrl-C stops after
//     the candidates in flight and `--resume` continues the budget.
//   nautilus db list|show ID|export|prune [--db PATH] ...   and   nautilus db --best FILE -D ...
//     reads and maintains the database; `nautilus db calibrate` (calibrate_command.h) fits the
//     cost model to it.
// Exit status: 0 success; 1 a user-facing failure (bad option, missing / corrupt / newer
// database, no GPU, nothing measured successfully); 2 an internal compiler error.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/options.h"
#include "core/tune/tuning_db.h"

namespace nautilus::cli {

const CommandSpec& tune_command_spec(const std::vector<OptionSpec>& shared_options);
int run_tune_command(const ParsedOptions& options, std::ostream& out, std::ostream& err);

const CommandSpec& db_command_spec(const std::vector<OptionSpec>& shared_options);
int run_db_command(const ParsedOptions& options, std::ostream& out, std::ostream& err);

// The --db option's path, else the per-user default (tuning_db.h).
std::string database_path(const ParsedOptions& options);

// For `nautilus schedule`: the best validated measurement of this spec (text), sizes and the
// local GPU (`driver_library`: "" for the system's libcuda), when the database at `db_path` has
// one. Quiet (nullopt) when there is no database, no GPU or no record.
std::optional<tune::TuningRecord> best_measured_for(const std::string& db_path,
                                                    const std::string& spec_text,
                                                    const std::string& sizes,
                                                    const std::string& driver_library);

}  // namespace nautilus::cli
