#include "profiler/local_executor.h"

#include <fstream>
#include <sstream>

#include "core/codegen/nvrtc.h"
#include "core/tune/text_hash.h"
#include "profiler/device_info.h"

namespace nautilus::profiler {
namespace {

MeasureOptions measure_options(const LocalExecutorOptions& options) {
  MeasureOptions measure;
  measure.client.command_template = options.runner_command;
  measure.client.timeout_seconds = options.timeout_seconds;
  measure.run.device = options.device;
  if (!options.driver_library.empty()) {
    measure.run.extra_arguments = {"--driver", options.driver_library};
  }
  measure.validate = true;  // a candidate is never timed without being checked
  measure.lower_arch = options.lower_arch;
  return measure;
}

std::optional<double> number(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  return object[key].get<double>();
}

}  // namespace

LocalExecutor::LocalExecutor(search::SearchInput input, LocalExecutorOptions options)
    : input_(std::move(input)), options_(std::move(options)), measurer_(measure_options(options_)) {}

std::optional<tune::MachineIdentity> LocalExecutor::identity(std::string* why_not) {
  const DeviceQuery query = options_.driver_library.empty()
                                ? query_devices()
                                : query_devices(options_.driver_library);
  if (!query.has_gpu()) {
    *why_not = "no GPU: " + query.no_gpu->message;
    return std::nullopt;
  }
  if (options_.device < 0 || options_.device >= static_cast<int>(query.devices.size())) {
    *why_not = "no CUDA device " + std::to_string(options_.device) + " (this machine has " +
               std::to_string(query.devices.size()) + ")";
    return std::nullopt;
  }
  const DeviceInfo& device = query.devices[static_cast<size_t>(options_.device)];
  tune::MachineIdentity identity;
  identity.device_name = device.name;
  identity.sm_count = device.sm_count;
  identity.sm_clock_khz = device.sm_clock_khz;
  identity.memory_clock_khz = device.memory_clock_khz;
  identity.driver_version = query.driver_version;
  const auto& nvrtc = codegen::Nvrtc::shared();
  identity.compiler_version = std::string("nautilus ") + NAUTILUS_VERSION + ", NVRTC " +
                              (nvrtc ? (*nvrtc)->version() : std::string("missing"));
  return identity;
}

void LocalExecutor::measure(
    const std::vector<sched::Schedule>& batch,
    const std::function<void(size_t, const tune::CandidateOutcome&)>& on_result) {
  for (size_t i = 0; i < batch.size(); ++i) on_result(i, measure_one(batch[i]));
}

tune::CandidateOutcome LocalExecutor::measure_one(const sched::Schedule& schedule) {
  tune::CandidateOutcome outcome;
  const Measurement measured = measurer_.measure(input_.file, input_.sizes, schedule);
  if (!measured.built()) {
    outcome.status = "build-error";
    outcome.message = measured.build_error;
    return outcome;
  }
  {
    std::ifstream source(measured.package_dir + "/kernel.cu", std::ios::binary);
    std::ostringstream text;
    text << source.rdbuf();
    outcome.code_hash = tune::hash_text(text.str());
  }
  const RunResult& run = measured.run;
  if (run.status == RunStatus::NoGpu) {
    outcome.no_gpu = true;
    outcome.status = run_status_name(run.status);
    outcome.message = run.message;
    return outcome;
  }
  outcome.status = run_status_name(run.status);
  if (run.status != RunStatus::Ok) outcome.message = run.message;
  read_runner_report(run, outcome);
  return outcome;
}

void read_runner_report(const RunResult& run, tune::CandidateOutcome& outcome) {
  if (run.validation_passed) {
    outcome.validation = *run.validation_passed ? tune::Validation::Passed
                                                : tune::Validation::Failed;
  }
  outcome.max_relative_error = run.max_relative_error;
  const nlohmann::json& report = run.report;
  if (!report.is_object() || !report.contains("timing") || !report["timing"].is_object()) return;
  const nlohmann::json& timing = report["timing"];
  if (timing.contains("total")) {
    outcome.median_us = number(timing["total"], "median_us");
    outcome.min_us = number(timing["total"], "min_us");
    outcome.max_us = number(timing["total"], "max_us");
  }
  if (!timing.contains("kernels") || !timing["kernels"].is_array()) return;
  for (const nlohmann::json& entry : timing["kernels"]) {
    if (!entry.is_object()) continue;
    tune::KernelTiming kernel;
    kernel.name = entry.value("name", "");
    kernel.median_us = number(entry, "median_us");
    kernel.min_us = number(entry, "min_us");
    kernel.max_us = number(entry, "max_us");
    if (auto registers = number(entry, "registers")) {
      kernel.registers = static_cast<int>(*registers);
      outcome.registers = std::max(outcome.registers.value_or(0), *kernel.registers);
    }
    if (auto spills = number(entry, "spill_bytes")) {
      kernel.spill_bytes = static_cast<int64_t>(*spills);
      outcome.spill_bytes = outcome.spill_bytes.value_or(0) + *kernel.spill_bytes;
    }
    outcome.kernels.push_back(kernel);
  }
}

}  // namespace nautilus::profiler
