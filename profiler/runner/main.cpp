// nautilus-runner: the separate process that runs kernel packages on the GPU (profiler/runner.h).
// It links only nautilus_core and nautilus_profiler (no Qt, ImGui, Z3 or Graphviz) and dlopen()s
// libcuda, so one binary starts on every Linux machine and reports "no GPU" where there is none.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "profiler/device_info.h"
#include "profiler/runner.h"

namespace {

// Prints the report as the one JSON document on stdout.
void print_report(const nlohmann::ordered_json& report) {
  std::cout << report.dump(2) << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nautilus::profiler;
  std::vector<std::string> args(argv + 1, argv + argc);
  ParsedRunnerArgs parsed = parse_runner_args(args);
  if (parsed.help) {
    std::cout << runner_usage();
    return 0;
  }
  if (parsed.list_devices) {
    // The device query alone, for executors that must learn which GPU a remote node has.
    const DeviceQuery query = query_devices(parsed.devices_driver);
    print_report(to_json(query));
    return query.has_gpu() ? 0 : exit_code_for(RunnerErrorKind::NoGpu);
  }
  RunnerOutcome outcome;
  try {
    outcome = parsed.options ? run_runner(*parsed.options)
                             : early_error_outcome(RunnerErrorKind::UsageError, parsed.error);
  } catch (const std::exception& e) {
    // A bug in the runner, not in the kernel: still answer in the documented format.
    outcome = early_error_outcome(RunnerErrorKind::InternalError, e.what());
  }
  if (!parsed.options) std::cerr << "nautilus-runner: " << parsed.error << "\n";
  print_report(outcome.report);
  if (outcome.abandon_gpu) {
    // A kernel may still be running: skip static destructors and the driver's exit handlers,
    // which could wait for it; the kernel dies with the process.
    std::fflush(nullptr);
    std::_Exit(outcome.exit_code);
  }
  return outcome.exit_code;
}
