// Runs the `nautilus` command line in-process for tests that link nautilus_cli: the exit status
// and what it printed on each stream.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "app/cli/cli.h"

namespace nautilus::testing {

struct CliRun {
  int status = 0;
  std::string out, err;
};

inline CliRun run_cli_in_process(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = cli::run_cli(args, out, err);
  return {status, out.str(), err.str()};
}

// Whether the runner finds a GPU on this machine (`nautilus devices` succeeds).
inline bool machine_has_gpu() { return run_cli_in_process({"devices"}).status == 0; }

}  // namespace nautilus::testing
