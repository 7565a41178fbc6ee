// The `nautilus` command line: check, lower, eval, devices, help.
//
// Every command reads a `.nt` spec, runs the same pipeline as the app (core/driver) and prints
// to `out`; problems go to `err`. Exit status: 0 success, 1 a user-facing failure (bad spec,
// failed evaluation, bad option), 2 an internal compiler error. Commands run in-process so
// tests can call `run_cli` directly.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "core/driver/pipeline.h"

namespace nautilus::cli {

// Extension points for tests and embedders: extra scalar passes appended to the pipeline.
struct CliHooks {
  std::vector<driver::ScalarPass> extra_passes;
  std::vector<driver::VRPass> extra_vr_passes;
};

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const CliHooks& hooks = {});

}  // namespace nautilus::cli
