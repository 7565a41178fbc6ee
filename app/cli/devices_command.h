// `nautilus devices [--json]`: lists the CUDA devices of this machine.
//
// Prints one row per device (name, architecture, SMs, memory, clocks, bandwidth, L2, opt-in
// shared memory per block), or with --json the object of profiler::to_json(DeviceQuery). Without a
// usable GPU it prints "no GPU: <reason>" on stderr and exits 1 (with --json the JSON, which then
// carries the typed reason, is still printed on stdout for scripts).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace nautilus::cli {

// `args` are the arguments after the subcommand name. Returns the process exit code: 0 with at
// least one device, 1 without a GPU or on a usage error (the CLI's convention, app/cli/cli.h).
// Output goes to `out`, the "no GPU" line and usage errors to `err`.
int run_devices_command(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err);
// The same on std::cout / std::cerr.
int run_devices_command(const std::vector<std::string>& args);

}  // namespace nautilus::cli
