#include "profiler/local_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/codegen/nvrtc.h"
#include "core/support/build_identity.h"
#include "core/tune/text_hash.h"
#include "profiler/device_info.h"

namespace nautilus::profiler {
namespace {

MeasureOptions measure_options(const LocalExecutorOptions& options) {
  MeasureOptions measure;
  measure.client.command_template = options.runner_command;
  measure.client.timeout_seconds = options.timeout_seconds;
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

std::string join_devices(const std::vector<int>& devices) {
  std::string text;
  for (int device : devices) text += (text.empty() ? "" : ",") + std::to_string(device);
  return text;
}

}  // namespace

std::unique_ptr<LocalExecutor> make_local_executor(const search::SearchInput& input,
                                                   const search::SearchOptions& search_options,
                                                   const cost::CostModel& model,
                                                   LocalExecutorOptions options) {
  options.lower_arch = search::lowering_arch(search_options, model);
  return std::make_unique<LocalExecutor>(input, std::move(options));
}

std::string local_device_name(const std::string& driver_library, int index, std::string* why) {
  const DeviceQuery query =
      driver_library.empty() ? query_devices() : query_devices(driver_library);
  if (!query.has_gpu()) {
    *why = query.no_gpu->message;
    return "";
  }
  if (index < 0 || index >= static_cast<int>(query.devices.size())) {
    *why = "no CUDA device " + std::to_string(index);
    return "";
  }
  return query.devices[static_cast<size_t>(index)].name;
}

std::optional<std::vector<int>> parse_device_list(const std::string& text, std::string* error) {
  std::vector<int> devices;
  std::set<int> seen;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const bool digits =
        !item.empty() && item.size() <= 4 &&
        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      *error = "--devices expects CUDA device ordinals separated by commas, such as 0,1; got '" +
               text + "'";
      return std::nullopt;
    }
    const int device = std::stoi(item);
    if (!seen.insert(device).second) {
      *error = "--devices names device " + item + " twice";
      return std::nullopt;
    }
    devices.push_back(device);
  }
  if (devices.empty() || text.back() == ',') {
    *error = "--devices expects CUDA device ordinals separated by commas, such as 0,1; got '" +
             text + "'";
    return std::nullopt;
  }
  return devices;
}

LocalExecutor::LocalExecutor(search::SearchInput input, LocalExecutorOptions options)
    : input_(std::move(input)), options_(std::move(options)), measurer_(measure_options(options_)) {
  if (options_.devices.empty()) options_.devices = {0};
  options_.jobs = std::max(1, options_.jobs);
}

int LocalExecutor::parallelism() const {
  return kCandidatesPerDevice * static_cast<int>(options_.devices.size());
}

std::optional<tune::MachineIdentity> LocalExecutor::identity(std::string* why_not) {
  const DeviceQuery query = options_.driver_library.empty()
                                ? query_devices()
                                : query_devices(options_.driver_library);
  if (!query.has_gpu()) {
    *why_not = "no GPU: " + query.no_gpu->message;
    return std::nullopt;
  }
  for (int device : options_.devices) {
    if (device < 0 || device >= static_cast<int>(query.devices.size())) {
      *why_not = "no CUDA device " + std::to_string(device) + " (this machine has " +
                 std::to_string(query.devices.size()) + ")";
      return std::nullopt;
    }
  }
  // One model only: a measurement is keyed by the device, so the times of two models must not
  // be mixed under one name.
  const DeviceInfo& first = query.devices[static_cast<size_t>(options_.devices.front())];
  for (int device : options_.devices) {
    const DeviceInfo& other = query.devices[static_cast<size_t>(device)];
    if (other.name != first.name || other.sm_count != first.sm_count) {
      std::ostringstream message;
      message << "--devices " << join_devices(options_.devices)
              << " are not all the same model: ";
      for (size_t i = 0; i < options_.devices.size(); ++i) {
        const DeviceInfo& info = query.devices[static_cast<size_t>(options_.devices[i])];
        message << (i ? ", " : "") << "device " << options_.devices[i] << " is " << info.name
                << " (" << info.sm_count << " SMs)";
      }
      message << "; tune on one model at a time";
      *why_not = message.str();
      return std::nullopt;
    }
  }
  tune::MachineIdentity identity;
  identity.device_name = first.name;
  identity.sm_count = first.sm_count;
  identity.sm_clock_khz = first.sm_clock_khz;
  identity.memory_clock_khz = first.memory_clock_khz;
  identity.driver_version = query.driver_version;
  identity.compiler_version = compiler_version();
  return identity;
}

std::string compiler_version() {
  const auto& nvrtc = codegen::Nvrtc::shared();
  return "nautilus " + compiler_build_identity() + ", NVRTC " +
         (nvrtc ? (*nvrtc)->version() : std::string("missing"));
}

void LocalExecutor::measure(
    const std::vector<sched::Schedule>& batch,
    const std::function<void(size_t, const tune::CandidateOutcome&)>& on_result) {
  // 1. Build threads take the batch's candidates in order and queue each built package (or
  //    report its build error). 2. One thread per device takes built packages in order and runs
  //    them there. 3. This thread hands each outcome to `on_result` as it arrives and asks the
  //    stop condition; once it holds, nothing more is built or started.
  struct Finished {
    size_t index;
    tune::CandidateOutcome outcome;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::pair<size_t, Measurement>> built;  // waiting for a device
  std::deque<Finished> finished;                     // waiting for on_result
  size_t builds_left = batch.size();
  int workers_left = 0;
  bool stopping = false;
  std::atomic<size_t> next_build{0};

  // Built candidates wait here until every earlier candidate of the batch is built, and are then
  // handed on in batch order: of two candidates with the same code, the earlier one is measured
  // and the other is its duplicate, whichever compiled first (the run must not depend on it).
  std::map<size_t, std::pair<Measurement, std::string>> awaiting_order;  // and its code hash
  size_t next_in_order = 0;
  auto hand_on_in_order = [&] {  // with `mutex` held
    for (auto it = awaiting_order.find(next_in_order); it != awaiting_order.end();
         it = awaiting_order.find(++next_in_order)) {
      auto& [measurement, code_hash] = it->second;
      if (!measurement.built()) {
        finished.push_back({next_in_order, candidate_outcome(measurement)});
      } else if (code_already_measured(code_hash)) {
        // The same generated code as a candidate measured (or being measured) already:
        // reported as its duplicate, never run.
        std::error_code ignored;
        std::filesystem::remove_all(measurement.package_dir, ignored);
        finished.push_back({next_in_order, duplicate_outcome(code_hash)});
      } else {
        built.emplace_back(next_in_order, std::move(measurement));
      }
      awaiting_order.erase(it);
    }
  };
  auto build_work = [&] {
    for (size_t i; (i = next_build++) < batch.size();) {
      {
        const std::lock_guard<std::mutex> lock(mutex);
        if (stopping) break;
      }
      Measurement measurement = measurer_.prepare(input_.file, input_.sizes, batch[i]);
      std::string code_hash =
          measurement.built() ? package_code_hash(measurement.package_dir) : std::string();
      const std::lock_guard<std::mutex> lock(mutex);
      --builds_left;
      if (stopping) break;  // nothing of this batch is reported after the stop but runs
      awaiting_order.emplace(i, std::make_pair(std::move(measurement), std::move(code_hash)));
      hand_on_in_order();
      changed.notify_all();
    }
    const std::lock_guard<std::mutex> lock(mutex);
    --workers_left;
    changed.notify_all();
  };
  auto device_work = [&](int device) {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stopping || !built.empty() || builds_left == 0; });
      if (stopping || built.empty()) break;
      auto [index, measurement] = std::move(built.front());
      built.pop_front();
      lock.unlock();
      measurer_.run(measurement, device);
      tune::CandidateOutcome outcome = candidate_outcome(measurement);
      // The package is measured: its directory is not needed any more (a long run would
      // otherwise keep every cubin).
      std::error_code ignored;
      std::filesystem::remove_all(measurement.package_dir, ignored);
      lock.lock();
      finished.push_back({index, std::move(outcome)});
      changed.notify_all();
    }
    --workers_left;
    changed.notify_all();
  };

  const size_t build_threads = std::min<size_t>(static_cast<size_t>(options_.jobs), batch.size());
  std::vector<std::thread> threads;
  workers_left = static_cast<int>(build_threads + options_.devices.size());
  for (size_t t = 0; t < build_threads; ++t) threads.emplace_back(build_work);
  for (int device : options_.devices) threads.emplace_back(device_work, device);

  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    // Wake up now and then to ask the stop condition (Ctrl-C, the time limit) while runs last.
    changed.wait_for(lock, std::chrono::milliseconds(50),
                     [&] { return !finished.empty() || workers_left == 0; });
    while (!finished.empty()) {
      Finished next = std::move(finished.front());
      finished.pop_front();
      lock.unlock();
      on_result(next.index, next.outcome);
      lock.lock();
    }
    if (workers_left == 0) break;
    if (!stopping) {
      lock.unlock();
      const bool stop = should_stop_starting();
      lock.lock();
      if (stop) {
        stopping = true;
        changed.notify_all();
      }
    }
  }
  lock.unlock();
  for (std::thread& thread : threads) thread.join();
}

std::string package_code_hash(const std::string& package_dir) {
  std::ifstream source(package_dir + "/kernel.cu", std::ios::binary);
  if (!source) return "";
  std::ostringstream text;
  text << source.rdbuf();
  return tune::hash_text(text.str());
}

tune::CandidateOutcome candidate_outcome(const Measurement& measured) {
  tune::CandidateOutcome outcome;
  if (!measured.built()) {
    outcome.status = "build-error";
    outcome.message = measured.build_error;
    return outcome;
  }
  outcome.code_hash = package_code_hash(measured.package_dir);
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
