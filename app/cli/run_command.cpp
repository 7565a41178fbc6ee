#include "app/cli/run_command.h"

#include <cstdlib>
#include <iomanip>
#include <optional>
#include <ostream>

#include "profiler/runner_client.h"

namespace nautilus::cli {

std::vector<OptionSpec> run_command_options() {
  return {
      {"reps", "N", "timed repetitions (default 100)"},
      {"warmup", "N", "untimed repetitions before timing (default 10)"},
      {"seed", "N", "seed of the random inputs (default 0)"},
      {"runner", "COMMAND", "the runner command, e.g. 'ssh gpuhost nautilus-runner' "
                            "(default: nautilus-runner next to this program)"},
      {"timeout", "SECONDS", "give up on the runner after this long (default 600)"},
      {"reference", "DIR", "with a package DIR: validate against this reference package"},
      {"no-reference", "", "do not compile and run the unscheduled reference (no validation)"},
      {"output", "DIR", "keep the compiled packages in DIR (DIR/package, DIR/reference)"},
  };
}

bool read_runner_options(const ParsedOptions& options, profiler::RunRequest* request,
                         profiler::ClientOptions* client, std::ostream& err) {
  for (const char* name : {"reps", "warmup", "seed"}) {
    if (!options.has(name)) continue;
    const std::optional<uint64_t> value = parse_non_negative(options.get(name));
    if (!value) {
      err << "nautilus: error: --" << name << " expects a non-negative integer, got '"
          << options.get(name) << "'\n";
      return false;
    }
    if (std::string(name) == "reps") request->repetitions = static_cast<int>(*value);
    if (std::string(name) == "warmup") request->warmup = static_cast<int>(*value);
    if (std::string(name) == "seed") request->seed = static_cast<uint64_t>(*value);
  }
  client->command_template = options.get("runner");
  if (options.has("timeout")) {
    char* end = nullptr;
    const std::string text = options.get("timeout");
    const double seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(seconds > 0)) {
      err << "nautilus: error: --timeout expects a positive number of seconds, got '" << text
          << "'\n";
      return false;
    }
    client->timeout_seconds = seconds;
  }
  return true;
}

int report_run(const profiler::RunResult& result, bool validated, std::ostream& out,
               std::ostream& err) {
  const nlohmann::json& report = result.report;
  if (report.is_object() && report.contains("device") && report["device"].is_object() &&
      report["device"].contains("name")) {
    out << "device: " << report["device"].value("name", std::string()) << "\n";
  }
  if (result.validation_passed) {
    out << "validation: " << (*result.validation_passed ? "passed" : "FAILED");
    if (result.max_relative_error) {
      out << ", max relative error " << std::scientific << std::setprecision(2)
          << *result.max_relative_error << std::defaultfloat;
    }
    out << "\n";
  } else if (!validated) {
    out << "validation: skipped (no reference)\n";
  }
  if (report.is_object() && report.contains("timing") && report["timing"].is_object()) {
    const nlohmann::json& timing = report["timing"];
    out << "timer: " << timing.value("timer", std::string("?")) << "\n";
    if (timing.contains("kernels") && timing["kernels"].is_array()) {
      for (const nlohmann::json& kernel : timing["kernels"]) {
        out << "  " << std::left << std::setw(32) << kernel.value("name", std::string("?"))
            << std::right << std::fixed << std::setprecision(1) << std::setw(12)
            << kernel.value("median_us", 0.0) << " us median" << std::defaultfloat << "\n";
      }
    }
    if (result.total_median_us) {
      out << "  " << std::left << std::setw(32) << "total" << std::right << std::fixed
          << std::setprecision(1) << std::setw(12) << *result.total_median_us << " us median"
          << std::defaultfloat << "\n";
    }
  }
  if (result.status != profiler::RunStatus::Ok) {
    err << "nautilus: error: " << profiler::run_status_name(result.status) << ": "
        << result.message << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

int run_packages(const std::string& package_dir, const std::string& reference_dir,
                 const ParsedOptions& options, std::ostream& out, std::ostream& err) {
  profiler::RunRequest request;
  request.package_dir = package_dir;
  request.reference_dir = reference_dir;
  profiler::ClientOptions client;
  if (!read_runner_options(options, &request, &client, err)) return kExitFailure;
  return report_run(profiler::run_package(request, client), !reference_dir.empty(), out, err);
}

}  // namespace nautilus::cli
