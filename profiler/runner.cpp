#include "profiler/runner.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "core/codegen/package.h"
#include "core/support/rng.h"
#include "core/support/tensor.h"
#include "profiler/cupti_activity.h"
#include "profiler/device_info.h"
#include "profiler/gpu_session.h"
#include "profiler/kernel_binary.h"
#include "profiler/reference_cache.h"
#include "profiler/tensor_bytes.h"

namespace nautilus::profiler {

using json = nlohmann::ordered_json;

const char* runner_error_kind_name(RunnerErrorKind kind) {
  switch (kind) {
    case RunnerErrorKind::UsageError: return "usage_error";
    case RunnerErrorKind::NoGpu: return "no_gpu";
    case RunnerErrorKind::LoadError: return "load_error";
    case RunnerErrorKind::CompileError: return "compile_error";
    case RunnerErrorKind::LaunchError: return "launch_error";
    case RunnerErrorKind::Timeout: return "timeout";
    case RunnerErrorKind::WrongResults: return "wrong_results";
    case RunnerErrorKind::InternalError: return "internal_error";
  }
  return "unknown";
}

int exit_code_for(std::optional<RunnerErrorKind> first_error) {
  if (!first_error) return 0;
  switch (*first_error) {
    case RunnerErrorKind::WrongResults: return 1;
    case RunnerErrorKind::UsageError: return 2;
    case RunnerErrorKind::NoGpu: return 3;
    case RunnerErrorKind::LoadError:
    case RunnerErrorKind::CompileError: return 4;
    case RunnerErrorKind::LaunchError: return 5;
    case RunnerErrorKind::Timeout: return 6;
    case RunnerErrorKind::InternalError: return 70;
  }
  return 1;
}

SampleSummary summarize(std::vector<double> samples) {
  SampleSummary summary;
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  summary.count = static_cast<int>(n);
  summary.min = samples.front();
  summary.max = samples.back();
  summary.median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  double sum = 0;
  for (double s : samples) sum += s;
  summary.mean = sum / static_cast<double>(n);
  return summary;
}

std::string runner_usage() {
  return "usage: nautilus-runner PACKAGE_DIR [--reference REF_DIR] [--reference-cache DIR]\n"
         "                       [--seed N] [--warmup N] [--reps N] [--device I]\n"
         "                       [--flush read|write|none] [--no-flush] [--timeout SECONDS]\n"
         "                       [--timer auto|events] [--driver LIBCUDA]\n"
         "       nautilus-runner --devices [--driver LIBCUDA]\n"
         "\n"
         "Loads the kernel package in PACKAGE_DIR on the local GPU, checks its outputs against the\n"
         "reference package REF_DIR on the same seeded random inputs, times every kernel (CUPTI,\n"
         "or CUDA events when CUPTI is unavailable) and prints one JSON report on stdout.\n"
         "\n"
         "  --reference REF_DIR  package whose outputs are the expected ones (no validation without)\n"
         "  --reference-cache DIR  share the reference's outputs with the other runners that use\n"
         "                       DIR: the first computes and stores them, the others read them\n"
         "  --seed N             seed of the random inputs (default 0, as nautilus eval)\n"
         "  --warmup N           untimed repetitions before timing (default 10)\n"
         "  --reps N             timed repetitions (default 100)\n"
         "  --device I           CUDA device ordinal (default 0)\n"
         "  --flush MODE         how L2 is emptied before each repetition: read (default) reads a\n"
         "                       buffer of twice the L2 and leaves it clean; write fills it and\n"
         "                       leaves it dirty (the next kernel pays the write-back); none\n"
         "  --no-flush           the same as --flush none\n"
         "  --timeout SECONDS    longest wait for the GPU before reporting a timeout (default 60)\n"
         "  --timer auto|events  auto: CUPTI activity records, events if CUPTI is unavailable\n"
         "  --driver LIBCUDA     load this libcuda instead of libcuda.so.1\n"
         "  --devices            print this machine's CUDA devices as JSON instead (exit 3: no GPU)\n"
         "\n"
         "Exit status: 0 ok, 1 wrong results, 2 usage error, 3 no GPU, 4 load or compile error,\n"
         "5 launch error (e.g. illegal memory access), 6 timeout, 70 internal error.\n";
}

namespace {

template <typename T>
std::optional<T> parse_number(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

// A JSON number, or "inf"/"-inf"/"nan" (JSON has no non-finite numbers).
json number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

json summary_json(const SampleSummary& s) {
  return {{"median_us", s.median}, {"min_us", s.min}, {"max_us", s.max}, {"mean_us", s.mean}};
}

// The report under construction and its first error (which decides status and exit code).
class Report {
 public:
  Report() {
    doc_["format"] = kRunnerReportFormat;
    doc_["version"] = kRunnerReportVersion;
    doc_["status"] = "ok";
  }
  json& operator[](const char* key) { return doc_[key]; }
  void error(RunnerErrorKind kind, const std::string& message, json details = json::object()) {
    json entry = {{"kind", runner_error_kind_name(kind)}, {"message", message}};
    for (auto& [key, value] : details.items()) entry[key] = value;
    errors_.push_back(std::move(entry));
    if (!first_) {
      first_ = kind;
      doc_["status"] = runner_error_kind_name(kind);
    }
  }
  void gpu_error(const GpuError& failure, const std::string& phase, const std::string& kernel = {}) {
    json details = {{"phase", phase}};
    if (!kernel.empty()) details["kernel"] = kernel;
    if (failure.cuda_error != 0) {
      details["cuda_error"] = failure.cuda_error;
      details["cuda_error_name"] = failure.cuda_error_name;
    }
    RunnerErrorKind kind = failure.kind == GpuError::Kind::Load     ? RunnerErrorKind::LoadError
                           : failure.kind == GpuError::Kind::Timeout ? RunnerErrorKind::Timeout
                                                                     : RunnerErrorKind::LaunchError;
    std::string message = failure.message;
    if (!kernel.empty()) message = "kernel " + kernel + ": " + message;
    error(kind, message, std::move(details));
  }
  bool failed() const { return first_.has_value(); }
  RunnerOutcome finish(bool abandon_gpu) {
    RunnerOutcome outcome;
    outcome.exit_code = exit_code_for(first_);
    doc_["errors"] = std::move(errors_);  // last, after the sections it refers to
    outcome.report = std::move(doc_);
    outcome.abandon_gpu = abandon_gpu;
    return outcome;
  }

 private:
  json doc_;
  json errors_ = json::array();
  std::optional<RunnerErrorKind> first_;
};

// A package on its way to the GPU.
struct LoadedPackage {
  std::string dir;
  codegen::KernelPackage package;
  json launch;  // launch.json as written (for the optional "flops" / "bytes")
  KernelBinary binary;
  std::vector<cu::Function> functions;  // per kernel, launch order
  std::vector<int> registers;
  // Per kernel, the grid it is launched with: launch.json's, or for a persistent kernel its tile
  // count clamped to the CTAs the device holds at once (asked once, when the kernel is loaded).
  std::vector<std::array<int64_t, 3>> grids;
  std::map<std::string, cu::DevicePtr> buffers;
  TensorMapCache tensor_maps;
};

bool uses_hopper_launch_features(const codegen::KernelPackage& package) {
  for (const codegen::KernelLaunch& kernel : package.kernels) {
    if (kernel.cluster) return true;
    for (const codegen::KernelArgument& argument : kernel.arguments) {
      if (argument.tensor_map) return true;
    }
  }
  return false;
}

std::optional<std::string> read_package_into(const std::string& dir, LoadedPackage* loaded) {
  auto package = codegen::read_package(dir);
  if (!package.ok()) return package.error().message;
  loaded->dir = dir;
  loaded->package = *package;
  std::ifstream file(std::filesystem::path(dir) / "launch.json");
  std::stringstream text;
  text << file.rdbuf();
  loaded->launch = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (loaded->launch.is_discarded()) loaded->launch = json::object();
  return std::nullopt;
}

json package_json(const LoadedPackage& loaded) {
  const codegen::KernelPackage& p = loaded.package;
  json sizes = json::object();
  for (const auto& [name, value] : p.sizes) sizes[name] = value;
  return {{"path", loaded.dir},
          {"spec", p.spec_name},
          {"sizes", sizes},
          {"arch", codegen::arch_name(p.arch)},
          {"kernels", p.kernels.size()}};
}

// Checks that the reference takes the package's inputs and produces its outputs.
std::optional<std::string> check_reference_matches(const codegen::KernelPackage& package,
                                                   const codegen::KernelPackage& reference) {
  auto find = [](const codegen::KernelPackage& p, const std::string& name) {
    const codegen::KernelArgument* found = nullptr;
    for (const auto& buffer : p.buffers) {
      if (buffer.name == name) found = &buffer;
    }
    return found;
  };
  for (const auto& buffer : package.buffers) {
    if (buffer.role == "intermediate" || buffer.role == "workspace") continue;
    const codegen::KernelArgument* other = find(reference, buffer.name);
    if (other == nullptr || other->role != buffer.role) {
      return "the reference package has no " + buffer.role + " " + buffer.name;
    }
    if (other->shape != buffer.shape) {
      return buffer.role + " " + buffer.name + " has another shape in the reference package";
    }
    if (buffer.role == "input" && other->dtype != buffer.dtype) {
      return "input " + buffer.name + " has another dtype in the reference package";
    }
  }
  for (const auto& buffer : reference.buffers) {
    if (buffer.role == "input" && find(package, buffer.name) == nullptr) {
      return "the reference package needs input " + buffer.name + ", which the package lacks";
    }
  }
  return std::nullopt;
}

// The parameters of kernel k: buffer pointers, and tensor maps over the buffers' current
// addresses (encoded once, again only when a buffer moved). `argument` names the one that failed.
std::optional<GpuError> kernel_parameters(GpuSession& session, LoadedPackage& loaded, size_t k,
                                          KernelParameters* parameters, std::string* argument) {
  const codegen::KernelLaunch& kernel = loaded.package.kernels[k];
  for (size_t a = 0; a < kernel.arguments.size(); ++a) {
    const codegen::KernelArgument& arg = kernel.arguments[a];
    const cu::DevicePtr base = loaded.buffers.at(arg.name);
    if (!arg.tensor_map) {
      parameters->add_pointer(base);
      continue;
    }
    const TensorMapBytes* map = nullptr;
    if (auto failure = loaded.tensor_maps.get(session, k, a, *arg.tensor_map, arg.dtype, base, &map)) {
      if (argument != nullptr) *argument = arg.name;
      return failure;
    }
    parameters->add_tensor_map(*map);
  }
  return std::nullopt;
}

// Loads the binary, finds every kernel and allocates every buffer. Errors are reported.
bool prepare_on_device(GpuSession& session, const DeviceInfo& device, LoadedPackage& loaded,
                       const std::string& phase, Report& report) {
  if (uses_hopper_launch_features(loaded.package) && device.compute_major < 9) {
    report.error(RunnerErrorKind::LoadError,
                 "the package uses tensor maps or thread-block clusters, which need compute "
                 "capability 9.0 or later; the device has " +
                     std::to_string(device.compute_major) + "." + std::to_string(device.compute_minor),
                 {{"phase", phase}});
    return false;
  }
  BinaryResult binary = kernel_binary_for_device(loaded.package, device.compute_major,
                                                 device.compute_minor);
  if (binary.error) {
    json details = {{"phase", phase}};
    if (!binary.error->log.empty()) details["log"] = binary.error->log;
    report.error(binary.error->kind == BinaryError::Kind::Compile ? RunnerErrorKind::CompileError
                                                                  : RunnerErrorKind::LoadError,
                 binary.error->message, std::move(details));
    return false;
  }
  loaded.binary = std::move(*binary.binary);

  cu::Module module = nullptr;
  if (auto failure = session.load_module(loaded.binary.image, &module)) {
    report.gpu_error(*failure, phase);
    return false;
  }
  for (const codegen::KernelLaunch& kernel : loaded.package.kernels) {
    if (kernel.dynamic_shared_bytes > device.shared_memory_per_block_optin_bytes) {
      report.error(RunnerErrorKind::LoadError,
                   "kernel " + kernel.name + " needs " +
                       std::to_string(kernel.dynamic_shared_bytes) +
                       " bytes of dynamic shared memory; the device allows " +
                       std::to_string(device.shared_memory_per_block_optin_bytes) + " per block",
                   {{"phase", phase}, {"kernel", kernel.name}});
      return false;
    }
    cu::Function function = nullptr;
    int registers = 0;
    if (auto failure = session.get_function(module, kernel.name, kernel.dynamic_shared_bytes,
                                            &function, &registers)) {
      report.gpu_error(*failure, phase, kernel.name);
      return false;
    }
    loaded.functions.push_back(function);
    loaded.registers.push_back(registers);
    std::array<int64_t, 3> grid = kernel.grid;
    if (kernel.persistent) {
      // Persistent CTAs walk the tiles themselves: as many as the device holds at once.
      grid[0] = std::min(grid[0], session.resident_ctas(function, kernel.block[0], kernel.dynamic_shared_bytes));
    }
    loaded.grids.push_back(grid);
  }
  for (const codegen::KernelArgument& buffer : loaded.package.buffers) {
    int64_t count = 1;
    for (int64_t extent : buffer.shape) count *= extent;
    std::optional<uint64_t> bytes = buffer_bytes(buffer.dtype, count);
    if (!bytes) {
      report.error(RunnerErrorKind::LoadError, "buffer " + buffer.name + " has no device size",
                   {{"phase", phase}});
      return false;
    }
    cu::DevicePtr pointer = 0;
    if (auto failure = session.allocate(*bytes, &pointer)) {
      report.gpu_error(*failure, phase + " (buffer " + buffer.name + ")");
      return false;
    }
    loaded.buffers[buffer.name] = pointer;
  }
  // Every tensor map now, so that a map the driver refuses is a load error naming it.
  for (size_t k = 0; k < loaded.package.kernels.size(); ++k) {
    KernelParameters parameters;
    std::string argument;
    if (auto failure = kernel_parameters(session, loaded, k, &parameters, &argument)) {
      failure->message = "tensor map of argument " + argument + ": " + failure->message;
      report.gpu_error(*failure, phase, loaded.package.kernels[k].name);
      return false;
    }
  }
  return true;
}

// Queues zero bytes over every workspace of kernel k (the dynamic tile scheduler's counter,
// codegen/package.h): in stream order before each launch of the kernel, as a memset of its own,
// so that a re-launched kernel starts from a fresh counter and CUPTI's kernel records do not
// include the memset.
std::optional<GpuError> zero_workspaces(GpuSession& session, LoadedPackage& loaded, size_t k) {
  for (const codegen::KernelArgument& argument : loaded.package.kernels[k].arguments) {
    if (argument.role != "workspace") continue;
    int64_t count = 1;
    for (int64_t extent : argument.shape) count *= extent;
    if (auto failure = session.fill(loaded.buffers.at(argument.name), 0, *buffer_bytes(argument.dtype, count))) {
      return failure;
    }
  }
  return std::nullopt;
}

// Queues kernel k of `loaded`, its workspaces zeroed first unless the caller already queued
// that (`zeroed`).
std::optional<GpuError> launch_kernel(GpuSession& session, LoadedPackage& loaded, size_t k,
                                      bool zeroed = false) {
  const codegen::KernelLaunch& kernel = loaded.package.kernels[k];
  if (!zeroed) {
    if (auto failure = zero_workspaces(session, loaded, k)) return failure;
  }
  KernelParameters parameters;
  if (auto failure = kernel_parameters(session, loaded, k, &parameters, nullptr)) return failure;
  LaunchShape shape{loaded.grids[k], kernel.block, kernel.cluster, kernel.dynamic_shared_bytes};
  return session.launch(loaded.functions[k], shape, parameters);
}

// Uploads the inputs, poisons outputs and intermediates with NaN bytes, runs every kernel once
// (waiting after each, so that a fault or a hang names its kernel) and downloads the outputs.
bool run_once(GpuSession& session, LoadedPackage& loaded, const TensorMap& inputs,
              double timeout_seconds, const std::string& phase, TensorMap* outputs,
              Report& report) {
  for (const codegen::KernelArgument& buffer : loaded.package.buffers) {
    const cu::DevicePtr pointer = loaded.buffers.at(buffer.name);
    std::optional<GpuError> failure;
    if (buffer.role == "input") {
      failure = session.upload(pointer, encode_tensor(inputs.at(buffer.name)));
    } else {
      int64_t count = 1;
      for (int64_t extent : buffer.shape) count *= extent;
      failure = session.fill(pointer, 0xff, *buffer_bytes(buffer.dtype, count));
    }
    if (failure) {
      report.gpu_error(*failure, phase);
      return false;
    }
  }
  for (size_t k = 0; k < loaded.package.kernels.size(); ++k) {
    const std::string& name = loaded.package.kernels[k].name;
    std::optional<GpuError> failure = launch_kernel(session, loaded, k);
    if (!failure) failure = session.wait(timeout_seconds);
    if (failure) {
      report.gpu_error(*failure, phase, name);
      return false;
    }
  }
  for (const codegen::KernelArgument& buffer : loaded.package.buffers) {
    if (buffer.role != "output") continue;
    int64_t count = 1;
    for (int64_t extent : buffer.shape) count *= extent;
    std::vector<uint8_t> bytes(*buffer_bytes(buffer.dtype, count));
    if (auto failure = session.download(loaded.buffers.at(buffer.name), &bytes)) {
      report.gpu_error(*failure, phase + " (reading " + buffer.name + ")");
      return false;
    }
    (*outputs)[buffer.name] = *decode_tensor(bytes, buffer.shape, buffer.dtype);
  }
  return true;
}

// Per-kernel durations of the timed repetitions: us[k][r] for kernel k, repetition r.
struct Timings {
  std::string timer;  // "cupti" or "events"
  std::string cupti_unavailable;
  std::vector<std::vector<double>> us;
};

class RepetitionRunner {
 public:
  RepetitionRunner(GpuSession& session, LoadedPackage& loaded, const RunnerOptions& options,
                   L2Flush& flush)
      : session_(session), loaded_(loaded), options_(options), flush_(flush) {}

  // One repetition: flush L2, launch every kernel (bracketed by `events` when given), wait.
  std::optional<GpuError> run(const std::vector<cu::Event>* events, std::string* kernel) {
    if (auto failure = flush_.run()) return failure;
    const size_t count = loaded_.package.kernels.size();
    for (size_t k = 0; k < count; ++k) {
      *kernel = loaded_.package.kernels[k].name;
      // The workspaces' memset goes before the kernel's event: the events time the kernel alone.
      if (auto failure = zero_workspaces(session_, loaded_, k)) return failure;
      if (events != nullptr) {
        if (auto failure = session_.record((*events)[k])) return failure;
      }
      if (auto failure = launch_kernel(session_, loaded_, k, /*zeroed=*/true)) return failure;
    }
    if (events != nullptr) {
      if (auto failure = session_.record((*events)[count])) return failure;
    }
    kernel->clear();
    return session_.wait(options_.timeout_seconds);
  }

 private:
  GpuSession& session_;
  LoadedPackage& loaded_;
  const RunnerOptions& options_;
  L2Flush& flush_;
};

std::optional<GpuError> time_with_events(GpuSession& session, RepetitionRunner& repetitions,
                                         size_t kernel_count, int count, Timings* timings,
                                         std::string* kernel) {
  std::vector<cu::Event> events(kernel_count + 1);
  for (cu::Event& event : events) {
    if (auto failure = session.create_event(&event)) return failure;
  }
  timings->timer = "events";
  timings->us.assign(kernel_count, {});
  for (int r = 0; r < count; ++r) {
    if (auto failure = repetitions.run(&events, kernel)) return failure;
    for (size_t k = 0; k < kernel_count; ++k) {
      float ms = 0;
      if (auto failure = session.elapsed_ms(events[k], events[k + 1], &ms)) return failure;
      timings->us[k].push_back(static_cast<double>(ms) * 1e3);
    }
  }
  return std::nullopt;
}

// Matches CUPTI's records to the launches: repetition r, kernel k is the (r*K + k)-th record of
// a package kernel in start order. Returns a reason when they do not line up.
std::optional<std::string> assign_cupti_records(const std::vector<KernelActivity>& records,
                                                const codegen::KernelPackage& package, int count,
                                                Timings* timings) {
  std::vector<const KernelActivity*> ours;
  for (const KernelActivity& record : records) {
    for (const codegen::KernelLaunch& kernel : package.kernels) {
      if (record.name == kernel.name) {
        ours.push_back(&record);
        break;
      }
    }
  }
  const size_t kernel_count = package.kernels.size();
  const size_t expected = kernel_count * static_cast<size_t>(count);
  if (ours.size() != expected) {
    return "CUPTI delivered " + std::to_string(ours.size()) + " kernel records for " +
           std::to_string(expected) + " launches";
  }
  timings->us.assign(kernel_count, {});
  for (size_t i = 0; i < ours.size(); ++i) {
    const size_t k = i % kernel_count;
    if (ours[i]->name != package.kernels[k].name) {
      return "CUPTI's kernel records are not in launch order";
    }
    timings->us[k].push_back(ours[i]->duration_us());
  }
  timings->timer = "cupti";
  return std::nullopt;
}

std::optional<GpuError> time_kernels(GpuSession& session, const LoadedPackage& loaded,
                                     const RunnerOptions& options, RepetitionRunner& repetitions,
                                     Timings* timings, std::string* kernel) {
  for (int r = 0; r < options.warmup; ++r) {
    if (auto failure = repetitions.run(nullptr, kernel)) return failure;
  }
  const size_t kernel_count = loaded.package.kernels.size();
  if (!options.use_cupti) {
    timings->cupti_unavailable = "--timer events";
  } else {
    std::string reason;
    std::unique_ptr<CuptiKernelActivity> cupti = CuptiKernelActivity::start(&reason);
    if (cupti != nullptr) {
      for (int r = 0; r < options.repetitions; ++r) {
        if (auto failure = repetitions.run(nullptr, kernel)) return failure;
      }
      std::vector<KernelActivity> records;
      if (!cupti->stop(&records, &reason)) {
        timings->cupti_unavailable = reason;
      } else if (auto mismatch = assign_cupti_records(records, loaded.package, options.repetitions,
                                                      timings)) {
        timings->cupti_unavailable = *mismatch;
      } else {
        return std::nullopt;
      }
    } else {
      timings->cupti_unavailable = reason;
    }
  }
  return time_with_events(session, repetitions, kernel_count, options.repetitions, timings,
                          kernel);
}

// "flops" / "bytes" of a launch.json object, when present and positive.
std::optional<double> work_field(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  double value = object[key].get<double>();
  return value > 0 ? std::optional<double>(value) : std::nullopt;
}

// Adds TFLOP/s and GB/s for the work in `work` done in `median_us`.
void add_throughput(json& entry, const json& work, double median_us, const DeviceInfo& device) {
  const double seconds = median_us * 1e-6;
  if (seconds <= 0) return;
  if (auto flops = work_field(work, "flops")) {
    entry["flops"] = *flops;
    entry["tflops"] = *flops / seconds * 1e-12;
  }
  if (auto bytes = work_field(work, "bytes")) {
    entry["bytes"] = *bytes;
    entry["gbps"] = *bytes / seconds * 1e-9;
    const double ceiling = device.peak_memory_bandwidth_bytes_per_s();
    if (ceiling > 0) entry["memory_bandwidth_fraction"] = *bytes / seconds / ceiling;
  }
}

json validation_skipped(const std::string& reason) {
  return {{"status", "skipped"}, {"reason", reason}};
}

}  // namespace

RunnerOutcome early_error_outcome(RunnerErrorKind kind, const std::string& message) {
  Report report;
  report.error(kind, message);
  return report.finish(false);
}

ParsedRunnerArgs parse_runner_args(const std::vector<std::string>& args) {
  ParsedRunnerArgs parsed;
  RunnerOptions options;
  bool have_package = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string value;
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        inline_value = true;
      }
    }
    auto take_value = [&]() -> bool {
      if (inline_value) return true;
      if (i + 1 >= args.size()) {
        parsed.error = arg + " expects a value";
        return false;
      }
      value = args[++i];
      return true;
    };
    auto bad = [&](const std::string& expected) {
      parsed.error = arg + " expects " + expected + ", got '" + value + "'";
      return parsed;
    };
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      return parsed;
    } else if (arg == "--devices") {
      if (inline_value) return bad("no value");
      parsed.list_devices = true;
    } else if (arg == "--no-flush") {
      if (inline_value) return bad("no value");
      options.l2_flush = L2FlushMode::None;
    } else if (arg == "--flush") {
      if (!take_value()) return parsed;
      auto mode = parse_l2_flush_mode(value);
      if (!mode) return bad("read, write or none");
      options.l2_flush = *mode;
    } else if (arg == "--reference") {
      if (!take_value()) return parsed;
      options.reference_dir = value;
    } else if (arg == "--reference-cache") {
      if (!take_value()) return parsed;
      if (value.empty()) return bad("a directory");
      options.reference_cache_dir = value;
    } else if (arg == "--seed") {
      if (!take_value()) return parsed;
      auto seed = parse_number<uint64_t>(value);
      if (!seed) return bad("a non-negative integer");
      options.seed = *seed;
    } else if (arg == "--warmup" || arg == "--reps" || arg == "--device") {
      if (!take_value()) return parsed;
      auto n = parse_number<int>(value);
      const int least = arg == "--reps" ? 1 : 0;
      if (!n || *n < least) return bad(least == 1 ? "a positive integer" : "a non-negative integer");
      (arg == "--warmup" ? options.warmup : arg == "--reps" ? options.repetitions : options.device) = *n;
    } else if (arg == "--timeout") {
      if (!take_value()) return parsed;
      auto seconds = parse_number<double>(value);
      if (!seconds || !(*seconds > 0) || !std::isfinite(*seconds)) return bad("a positive number of seconds");
      options.timeout_seconds = *seconds;
    } else if (arg == "--timer") {
      if (!take_value()) return parsed;
      if (value != "auto" && value != "events") return bad("auto or events");
      options.use_cupti = value == "auto";
    } else if (arg == "--driver") {
      if (!take_value()) return parsed;
      if (value.empty()) return bad("a library name or path");
      options.driver_library = value;
    } else if (arg.rfind("-", 0) == 0 && arg != "-") {
      parsed.error = "unknown option " + arg;
      return parsed;
    } else if (have_package) {
      parsed.error = "more than one package directory: '" + options.package_dir + "' and '" + arg + "'";
      return parsed;
    } else {
      options.package_dir = arg;
      have_package = true;
    }
  }
  if (parsed.list_devices) {
    // Only --driver goes with --devices; the options of a run would be silently ignored.
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--driver") {
        ++i;  // its value
      } else if (args[i] != "--devices" && args[i].rfind("--driver=", 0) != 0) {
        parsed.list_devices = false;
        parsed.error = "--devices takes only --driver LIBCUDA, got '" + args[i] + "'";
        return parsed;
      }
    }
    parsed.devices_driver = options.driver_library;
    return parsed;
  }
  if (!have_package) {
    parsed.error = "missing PACKAGE_DIR";
    return parsed;
  }
  parsed.options = options;
  return parsed;
}

RunnerOutcome run_runner(const RunnerOptions& options) {
  Report report;
  report["runner"] = {{"nautilus", NAUTILUS_VERSION},
                      {"seed", options.seed},
                      {"warmup", options.warmup},
                      {"repetitions", options.repetitions},
                      {"l2_flush", l2_flush_mode_name(options.l2_flush)},
                      {"timeout_s", options.timeout_seconds}};
  report["device"] = nullptr;

  // 1. The packages (files only: errors here need no GPU).
  LoadedPackage package;
  if (auto failure = read_package_into(options.package_dir, &package)) {
    report["package"] = {{"path", options.package_dir}};
    report.error(RunnerErrorKind::LoadError, *failure, {{"phase", "package"}});
    return report.finish(false);
  }
  report["package"] = package_json(package);
  std::unique_ptr<LoadedPackage> reference;
  if (!options.reference_dir.empty()) {
    reference = std::make_unique<LoadedPackage>();
    if (auto failure = read_package_into(options.reference_dir, reference.get())) {
      report["reference"] = {{"path", options.reference_dir}};
      report.error(RunnerErrorKind::LoadError, "reference package: " + *failure,
                   {{"phase", "reference"}});
      return report.finish(false);
    }
    report["reference"] = package_json(*reference);
    if (auto mismatch = check_reference_matches(package.package, reference->package)) {
      report.error(RunnerErrorKind::LoadError, *mismatch, {{"phase", "reference"}});
      return report.finish(false);
    }
  }

  // 2. The GPU.
  DeviceQuery query = query_devices(options.driver_library);
  if (!query.has_gpu()) {
    report["device"] = {{"driver_version", query.driver_version > 0
                                               ? json(format_driver_version(query.driver_version))
                                               : json(nullptr)}};
    report.error(RunnerErrorKind::NoGpu, query.no_gpu->message,
                 {{"reason", no_gpu_reason_name(query.no_gpu->reason)}});
    return report.finish(false);
  }
  if (options.device >= static_cast<int>(query.devices.size())) {
    report.error(RunnerErrorKind::UsageError,
                 "--device " + std::to_string(options.device) + ": this machine has " +
                     std::to_string(query.devices.size()) + " CUDA device(s)");
    return report.finish(false);
  }
  const DeviceInfo& device = query.devices[static_cast<size_t>(options.device)];
  json device_json = to_json(device);
  device_json["driver_version"] = format_driver_version(query.driver_version);
  report["device"] = device_json;

  std::shared_ptr<const CudaDriver> driver = CudaDriver::load(options.driver_library, nullptr);
  GpuError open_error;
  std::unique_ptr<GpuSession> session =
      driver != nullptr ? GpuSession::open(driver, options.device, &open_error) : nullptr;
  if (session == nullptr) {
    report.gpu_error(open_error, "context");
    return report.finish(false);
  }
  // Every return below may leave a kernel running: pass the session's state on.
  auto finish = [&]() { return report.finish(session->work_may_be_running()); };

  // 3. Binaries, kernels, buffers.
  if (!prepare_on_device(*session, device, package, "load", report)) return finish();
  auto binary_json = [](const LoadedPackage& loaded) {
    json j = {{"source", binary_source_name(loaded.binary.source)},
              {"arch", loaded.binary.arch},
              {"note", loaded.binary.note}};
    if (loaded.binary.source == KernelBinary::Source::Nvrtc) j["compile_ms"] = loaded.binary.compile_ms;
    return j;
  };
  report["package"]["binary"] = binary_json(package);

  // 4. Inputs: the k-th input buffer gets derive_seed(seed, k), as spec::make_random_inputs.
  TensorMap inputs;
  std::vector<std::string> input_names;
  uint64_t input_index = 0;
  for (const codegen::KernelArgument& buffer : package.package.buffers) {
    if (buffer.role != "input") continue;
    inputs[buffer.name] =
        random_tensor(buffer.shape, buffer.dtype, derive_seed(options.seed, input_index++));
    input_names.push_back(buffer.name);
  }

  // 5. The expected outputs, before the package runs: from the shared cache, else by running
  // the reference (and storing its outputs for the runners after this one).
  TensorMap expected;
  if (reference) {
    std::vector<codegen::KernelArgument> reference_outputs;
    for (const codegen::KernelArgument& buffer : reference->package.buffers) {
      if (buffer.role == "output") reference_outputs.push_back(buffer);
    }
    std::string cache_key;
    std::unique_ptr<ReferenceCacheLock> cache_lock;
    std::optional<TensorMap> cached;
    if (!options.reference_cache_dir.empty()) {
      cache_key = reference_cache_key(options.reference_dir, input_names, options.seed,
                                      device.name, device.compute_major, device.compute_minor);
      // Held until the outputs are stored: a runner on another GPU that needs the same reference
      // waits for them instead of computing them too.
      cache_lock = std::make_unique<ReferenceCacheLock>(options.reference_cache_dir, cache_key);
      cached = read_reference_outputs(options.reference_cache_dir, cache_key, reference_outputs);
      report["reference"]["cache_key"] = cache_key;
    }
    if (cached) {
      expected = std::move(*cached);
      report["reference"]["outputs"] = "cached";
    } else {
      if (!prepare_on_device(*session, device, *reference, "reference load", report)) {
        return finish();
      }
      report["reference"]["binary"] = binary_json(*reference);
      if (!run_once(*session, *reference, inputs, options.timeout_seconds, "reference",
                    &expected, report)) {
        return finish();
      }
      report["reference"]["outputs"] = "computed";
      if (cache_lock) {
        std::string cache_error;
        if (!write_reference_outputs(options.reference_cache_dir, cache_key, reference_outputs,
                                     expected, &cache_error)) {
          // Not fatal: the next runner computes the reference again.
          report["reference"]["cache_error"] = cache_error;
        }
      }
    }
  }

  // 6. One checked run of the package and the comparison.
  TensorMap outputs;
  if (!run_once(*session, package, inputs, options.timeout_seconds, "validation", &outputs,
                report)) {
    return finish();
  }
  if (!reference) {
    report["validation"] = validation_skipped("no --reference package was given");
  } else {
    json per_output = json::array();
    bool passed = true;
    double worst_ratio = -1;
    json worst;
    for (const codegen::KernelArgument& buffer : package.package.buffers) {
      if (buffer.role != "output") continue;
      ErrorReport error = compare_tensors(outputs.at(buffer.name), expected.at(buffer.name));
      const double tol = tolerance(buffer.dtype);
      const bool ok = error.max_relative_error <= tol && error.mismatched_nonfinite == 0;
      passed = passed && ok;
      json entry = {{"name", buffer.name},
                    {"dtype", dtype_name(buffer.dtype)},
                    {"max_relative_error", number(error.max_relative_error)},
                    {"max_abs_error", number(error.max_abs_error)},
                    {"max_abs_reference", number(error.max_abs_reference)},
                    {"worst_index", error.worst_index},
                    {"mismatched_nonfinite", error.mismatched_nonfinite},
                    {"tolerance", tol},
                    {"passed", ok}};
      const double ratio = tol > 0 ? error.max_relative_error / tol : error.max_relative_error;
      if (!(ratio <= worst_ratio)) {  // also takes NaN and infinity
        worst_ratio = ratio;
        worst = entry;
      }
      per_output.push_back(std::move(entry));
    }
    json validation = {{"status", passed ? "passed" : "failed"},
                       {"passed", passed},
                       {"max_relative_error", worst.is_null() ? json(0.0) : worst["max_relative_error"]},
                       {"tolerance", worst.is_null() ? json(0.0) : worst["tolerance"]},
                       {"outputs", per_output}};
    report["validation"] = validation;
    if (!passed) {
      report.error(RunnerErrorKind::WrongResults,
                   "output " + worst["name"].get<std::string>() + " differs from the reference: " +
                       "max relative error " + worst["max_relative_error"].dump() +
                       " > tolerance " + worst["tolerance"].dump(),
                   {{"phase", "validation"}});
    }
  }

  // 7. Timing, with L2 emptied before every repetition (l2_flush.h).
  std::unique_ptr<L2Flush> flush;
  if (auto failure = L2Flush::create(*session, options.l2_flush, device.l2_cache_bytes,
                                     device.sm_count, &flush)) {
    report.gpu_error(*failure, "timing (L2 flush)");
    return finish();
  }
  RepetitionRunner repetitions(*session, package, options, *flush);
  Timings timings;
  std::string kernel;
  if (auto failure = time_kernels(*session, package, options, repetitions, &timings, &kernel)) {
    report.gpu_error(*failure, "timing", kernel);
    return finish();
  }

  json kernels = json::array();
  std::vector<double> totals(static_cast<size_t>(options.repetitions), 0.0);
  const json launch_kernels = package.launch.value("kernels", json::array());
  for (size_t k = 0; k < package.package.kernels.size(); ++k) {
    const codegen::KernelLaunch& launch = package.package.kernels[k];
    SampleSummary summary = summarize(timings.us[k]);
    for (size_t r = 0; r < totals.size(); ++r) totals[r] += timings.us[k][r];
    json entry = {{"name", launch.name},
                  {"grid", launch.grid},
                  {"block", launch.block}};
    if (launch.cluster) entry["cluster"] = *launch.cluster;
    entry["dynamic_shared_memory"] = launch.dynamic_shared_bytes;
    entry["registers"] = package.registers[k];
    const json stats = summary_json(summary);  // a named object: items() does not own it
    for (const auto& [key, value] : stats.items()) entry[key] = value;
    if (k < launch_kernels.size()) add_throughput(entry, launch_kernels[k], summary.median, device);
    kernels.push_back(std::move(entry));
  }
  SampleSummary total = summarize(totals);
  json timing = {{"timer", timings.timer}};
  if (!timings.cupti_unavailable.empty()) timing["cupti_unavailable"] = timings.cupti_unavailable;
  timing["warmup"] = options.warmup;
  timing["repetitions"] = options.repetitions;
  timing["l2_flush"] = l2_flush_mode_name(flush->mode());
  timing["l2_flush_bytes"] = flush->bytes();
  timing["kernels"] = kernels;
  json total_json = summary_json(total);
  add_throughput(total_json, package.launch, total.median, device);
  timing["total"] = total_json;
  report["timing"] = timing;
  return finish();
}

}  // namespace nautilus::profiler
