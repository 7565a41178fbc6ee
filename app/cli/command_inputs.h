// Inputs that several commands read the same way from their command lines: the -D size bindings,
// decisions given as text (--pin, --forbid) and the cost model's --device. Each prints the first bad one, naming the
// option, and returns false.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "app/cli/options.h"
#include "core/cost/device_models.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"

namespace nautilus::cli {

// Appends every -D NAME=VALUE of the command line to `sizes`.
bool read_size_bindings(const ParsedOptions& options, std::vector<spec::SizeOverride>& sizes,
                        std::ostream& err);

// Appends the decisions written in `texts` (the values of --`option`) to `out`.
bool read_decisions(const std::vector<std::string>& texts, const std::string& option,
                    std::vector<sched::Decision>& out, std::ostream& err);

// The cost model's GPU named by --device (default h100), or nullopt after naming the known ones.
std::optional<cost::DeviceModel> read_device_model(const ParsedOptions& options, std::ostream& err);

}  // namespace nautilus::cli
