#include "core/codegen/nvrtc.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <string>

#include "core/support/shared_library.h"

namespace nautilus::codegen {

const char* codegen_error_kind_name(CodegenError::Kind kind) {
  switch (kind) {
    case CodegenError::Kind::NvrtcNotFound: return "nvrtc-not-found";
    case CodegenError::Kind::BadOption: return "bad-option";
    case CodegenError::Kind::Compilation: return "compilation";
    case CodegenError::Kind::Rejected: return "rejected";
    case CodegenError::Kind::Unsupported: return "unsupported";
    case CodegenError::Kind::InvalidInput: return "invalid-input";
    case CodegenError::Kind::Io: return "io";
  }
  return "unknown";
}

const char* arch_name(GpuArch arch) {
  switch (arch) {
    case GpuArch::Sm80: return "sm_80";
    case GpuArch::Sm90a: return "sm_90a";
  }
  return "unknown";
}

std::optional<GpuArch> parse_arch(std::string_view name) {
  for (GpuArch arch : all_archs()) {
    if (name == arch_name(arch)) return arch;
  }
  return std::nullopt;
}

std::vector<GpuArch> all_archs() { return {GpuArch::Sm80, GpuArch::Sm90a}; }

std::string arch_names() {
  std::string names;
  for (GpuArch arch : all_archs()) names += (names.empty() ? "" : ", ") + std::string(arch_name(arch));
  return names;
}

// ---------------------------------------------------------------------------------------------
// The ptxas report

const KernelResources* PtxasReport::find(std::string_view kernel) const {
  for (const KernelResources& resources : kernels) {
    if (resources.name == kernel) return &resources;
  }
  return nullptr;
}

bool PtxasReport::any_spills() const {
  for (const KernelResources& resources : kernels) {
    if (resources.spills()) return true;
  }
  return false;
}

namespace {

// The text between the first `open` after `from` and the next `close`; empty when absent.
std::string between(std::string_view line, std::string_view open, std::string_view close,
                    size_t from = 0) {
  size_t start = line.find(open, from);
  if (start == std::string_view::npos) return {};
  start += open.size();
  size_t end = line.find(close, start);
  if (end == std::string_view::npos) return {};
  return std::string(line.substr(start, end - start));
}

// The integer written just before `unit` in `line` ("1024 bytes smem" → 1024 for " bytes smem");
// nullopt when `unit` is absent or not preceded by digits.
std::optional<int64_t> number_before(std::string_view line, std::string_view unit) {
  size_t at = line.find(unit);
  if (at == std::string_view::npos) return std::nullopt;
  size_t begin = at;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == at) return std::nullopt;
  int64_t value = 0;
  for (size_t i = begin; i < at; ++i) {
    if (value > (INT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + (line[i] - '0');
  }
  return value;
}

std::string_view trim_line_end(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  return line;
}

}  // namespace

PtxasReport parse_ptxas_report(std::string_view log) {
  PtxasReport report;
  // ptxas prints, per entry function: "Compiling entry function 'NAME' for 'ARCH'", then
  // "Function properties for NAME" followed by the stack/spill line, then the "Used N registers"
  // line. Non-inlined device functions get their own "Function properties" block, which must
  // not overwrite the entry's numbers, so the stack/spill line is attributed only when the
  // properties block names the entry being compiled.
  KernelResources* entry = nullptr;
  bool properties_of_entry = false;
  size_t position = 0;
  while (position <= log.size()) {
    size_t end = log.find('\n', position);
    if (end == std::string_view::npos) end = log.size();
    std::string_view line = trim_line_end(log.substr(position, end - position));
    position = end + 1;
    if (line.rfind("ptxas", 0) != 0) continue;

    if (line.find("ptxas warning") == 0 || line.find(" (C75") != std::string_view::npos) {
      report.warnings.emplace_back(line);
    } else if (line.find("Compiling entry function '") != std::string_view::npos) {
      KernelResources resources;
      resources.name = between(line, "function '", "'");
      resources.arch = between(line, "' for '", "'");
      report.kernels.push_back(resources);
      entry = &report.kernels.back();
      properties_of_entry = false;
    } else if (line.find("Function properties for ") != std::string_view::npos) {
      std::string_view name = line.substr(line.find("Function properties for ") + 24);
      properties_of_entry = entry != nullptr && name == entry->name;
    } else if (line.find("bytes stack frame") != std::string_view::npos) {
      if (entry != nullptr && properties_of_entry) {
        entry->stack_frame_bytes = number_before(line, " bytes stack frame").value_or(0);
        entry->spill_store_bytes = number_before(line, " bytes spill stores").value_or(0);
        entry->spill_load_bytes = number_before(line, " bytes spill loads").value_or(0);
      }
      properties_of_entry = false;
    } else if (line.find("Used ") != std::string_view::npos && entry != nullptr) {
      entry->registers = static_cast<int>(number_before(line, " registers").value_or(0));
      entry->barriers = static_cast<int>(number_before(line, " barriers").value_or(0));
      entry->shared_memory_bytes = number_before(line, " bytes smem").value_or(0);
      entry->constant_memory_bytes = number_before(line, " bytes cmem[0]").value_or(0);
    }
  }
  return report;
}

std::string ptxas_report_table(const PtxasReport& report) {
  size_t name_width = 6;
  for (const KernelResources& k : report.kernels) name_width = std::max(name_width, k.name.size());
  std::ostringstream out;
  out << std::left << std::setw(static_cast<int>(name_width) + 2) << "kernel" << std::setw(8)
      << "arch" << std::right << std::setw(9) << "registers" << std::setw(14) << "spill-stores"
      << std::setw(13) << "spill-loads" << std::setw(8) << "smem" << std::setw(7) << "stack"
      << std::setw(10) << "barriers" << "\n";
  for (const KernelResources& k : report.kernels) {
    out << std::left << std::setw(static_cast<int>(name_width) + 2) << k.name << std::setw(8)
        << k.arch << std::right << std::setw(9) << k.registers << std::setw(14)
        << k.spill_store_bytes << std::setw(13) << k.spill_load_bytes << std::setw(8)
        << k.shared_memory_bytes << std::setw(7) << k.stack_frame_bytes << std::setw(10)
        << k.barriers << "\n";
  }
  for (const std::string& warning : report.warnings) out << warning << "\n";
  return out.str();
}

nlohmann::ordered_json ptxas_report_to_json(const PtxasReport& report) {
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const KernelResources& k : report.kernels) {
    kernels.push_back({{"name", k.name},
                       {"arch", k.arch},
                       {"registers", k.registers},
                       {"barriers", k.barriers},
                       {"shared_memory_bytes", k.shared_memory_bytes},
                       {"stack_frame_bytes", k.stack_frame_bytes},
                       {"spill_store_bytes", k.spill_store_bytes},
                       {"spill_load_bytes", k.spill_load_bytes},
                       {"constant_memory_bytes", k.constant_memory_bytes}});
  }
  return {{"kernels", kernels}, {"warnings", report.warnings}};
}

Result<PtxasReport> ptxas_report_from_json(const nlohmann::json& json) {
  auto invalid = [](const std::string& what) {
    return codegen_error(CodegenError::Kind::InvalidInput, "ptxas report: " + what);
  };
  if (!json.is_object() || !json.contains("kernels") || !json["kernels"].is_array()) {
    return invalid("expected an object with a \"kernels\" array");
  }
  PtxasReport report;
  for (const nlohmann::json& k : json["kernels"]) {
    if (!k.is_object() || !k.contains("name") || !k["name"].is_string()) {
      return invalid("every kernel needs a string \"name\"");
    }
    KernelResources resources;
    resources.name = k["name"].get<std::string>();
    resources.arch = k.value("arch", std::string());
    auto integer = [&](const char* key, auto& field) {
      if (!k.contains(key)) return true;
      if (!k[key].is_number_integer()) return false;
      field = k[key].get<std::remove_reference_t<decltype(field)>>();
      return true;
    };
    if (!integer("registers", resources.registers) || !integer("barriers", resources.barriers) ||
        !integer("shared_memory_bytes", resources.shared_memory_bytes) ||
        !integer("stack_frame_bytes", resources.stack_frame_bytes) ||
        !integer("spill_store_bytes", resources.spill_store_bytes) ||
        !integer("spill_load_bytes", resources.spill_load_bytes) ||
        !integer("constant_memory_bytes", resources.constant_memory_bytes)) {
      return invalid("kernel " + resources.name + " has a non-integer resource count");
    }
    report.kernels.push_back(resources);
  }
  if (json.contains("warnings") && json["warnings"].is_array()) {
    for (const nlohmann::json& warning : json["warnings"]) {
      if (warning.is_string()) report.warnings.push_back(warning.get<std::string>());
    }
  }
  return report;
}

// ---------------------------------------------------------------------------------------------
// The Hopper gate

const std::vector<std::pair<std::string, std::string>>& wgmma_serialization_codes() {
  static const std::vector<std::pair<std::string, std::string>> codes = {
      {"C7508", "setmaxnreg ignored"},
      {"C7511", "wgmma serialized"},
      {"C7515", "wgmma serialized"},
      {"C7517", "wgmma serialized"},
      {"C7520", "wgmma serialized"},
  };
  return codes;
}

namespace {

// The entry functions of a PTX module with their bodies (up to the next entry).
std::vector<std::pair<std::string, std::string_view>> ptx_entries(std::string_view ptx) {
  std::vector<std::pair<std::string, std::string_view>> entries;
  std::vector<size_t> starts;
  for (size_t at = ptx.find(".entry "); at != std::string_view::npos; at = ptx.find(".entry ", at + 7)) {
    starts.push_back(at);
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t name_begin = starts[i] + 7;
    while (name_begin < ptx.size() && ptx[name_begin] == ' ') ++name_begin;
    size_t name_end = name_begin;
    while (name_end < ptx.size() && ptx[name_end] != '(' && ptx[name_end] != ' ' &&
           ptx[name_end] != '\n') {
      ++name_end;
    }
    const size_t body_end = i + 1 < starts.size() ? starts[i + 1] : ptx.size();
    entries.emplace_back(std::string(ptx.substr(name_begin, name_end - name_begin)),
                         ptx.substr(name_end, body_end - name_end));
  }
  return entries;
}

}  // namespace

std::vector<PtxasRejection> hopper_rejections(const PtxasReport& report, std::string_view log,
                                              std::string_view ptx) {
  std::vector<PtxasRejection> rejections;
  size_t position = 0;
  while (position < log.size()) {
    size_t end = log.find('\n', position);
    if (end == std::string_view::npos) end = log.size();
    const std::string_view line = trim_line_end(log.substr(position, end - position));
    position = end + 1;
    for (const auto& [code, meaning] : wgmma_serialization_codes()) {
      if (line.find("(" + code + ")") == std::string_view::npos) continue;
      // ptxas names the function in most of these lines ("... in function 'k'", "... in the
      // function 'k'"); C7508 is printed before any function is compiled and names none, so
      // the kernel is the PTX entry that executes the instruction concerned.
      std::string kernel = between(line, "function '", "'");
      std::vector<std::string> kernels;
      if (!kernel.empty()) {
        kernels.push_back(kernel);
      } else {
        const std::string_view instruction = code == "C7508" ? "setmaxnreg" : "wgmma";
        for (const auto& [name, body] : ptx_entries(ptx)) {
          if (body.find(instruction) != std::string_view::npos) kernels.push_back(name);
        }
        if (kernels.empty()) kernels.push_back("");
      }
      for (const std::string& name : kernels) rejections.push_back({name, code, std::string(line)});
    }
  }
  // Spills reject the Hopper kernels (wgmma, setmaxnreg or bulk copies in their PTX), whose
  // register budgets are exact; the Ampere path compiled for sm_90a keeps the small spills its
  // own tests budget for. Without PTX every kernel counts as a Hopper kernel.
  const auto entries = ptx_entries(ptx);
  auto hopper_kernel = [&](const std::string& name) {
    for (const auto& [entry, body] : entries) {
      if (entry != name) continue;
      return body.find("wgmma.") != std::string_view::npos ||
             body.find("setmaxnreg") != std::string_view::npos ||
             body.find("cp.async.bulk") != std::string_view::npos;
    }
    return true;
  };
  for (const KernelResources& kernel : report.kernels) {
    if (!kernel.spills() || !hopper_kernel(kernel.name)) continue;
    rejections.push_back({kernel.name, "spill",
                          std::to_string(kernel.spill_store_bytes) + " bytes spill stores, " +
                              std::to_string(kernel.spill_load_bytes) + " bytes spill loads"});
  }
  return rejections;
}

std::string describe_rejections(const std::vector<PtxasRejection>& rejections) {
  std::string text;
  for (const PtxasRejection& rejection : rejections) {
    std::string meaning = "registers spilled";
    for (const auto& [code, what] : wgmma_serialization_codes()) {
      if (code == rejection.code) meaning = what;
    }
    text += (text.empty() ? "" : "; ") +
            (rejection.kernel.empty() ? std::string("a kernel") : "kernel " + rejection.kernel) +
            ": " + rejection.code + " (" + meaning + "): " + rejection.detail;
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// Finding the toolkit

namespace {

// $CUDA_HOME, $CUDA_PATH (when set and non-empty), then /usr/local/cuda.
std::vector<std::string> toolkit_roots() {
  std::vector<std::string> roots;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0') roots.emplace_back(value);
  }
  roots.emplace_back("/usr/local/cuda");
  return roots;
}

}  // namespace

std::optional<std::string> find_cuda_include_dir() {
  for (const std::string& root : toolkit_roots()) {
    std::filesystem::path include = std::filesystem::path(root) / "include";
    std::error_code ignored;
    if (std::filesystem::exists(include / "cuda_bf16.h", ignored)) return include.string();
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Loading libnvrtc

// The NVRTC entry points, with the C signatures of nvrtc.h (nvrtcResult is an int and
// nvrtcProgram an opaque pointer), declared here so that this file needs no toolkit to build.
struct Nvrtc::Api {
  using Program = void*;
  using GetErrorStringFn = const char* (*)(int result);
  using VersionFn = int (*)(int* major, int* minor);
  using CreateProgramFn = int (*)(Program* program, const char* source, const char* name,
                                  int header_count, const char* const* headers,
                                  const char* const* include_names);
  using DestroyProgramFn = int (*)(Program* program);
  using CompileProgramFn = int (*)(Program program, int option_count,
                                   const char* const* options);
  using GetSizeFn = int (*)(Program program, size_t* size);
  using GetBytesFn = int (*)(Program program, char* bytes);

  static constexpr int kSuccess = 0;             // NVRTC_SUCCESS
  static constexpr int kInvalidOption = 5;       // NVRTC_ERROR_INVALID_OPTION
  static constexpr int kCompilationError = 6;    // NVRTC_ERROR_COMPILATION

  GetErrorStringFn get_error_string = nullptr;
  VersionFn version = nullptr;
  CreateProgramFn create_program = nullptr;
  DestroyProgramFn destroy_program = nullptr;
  CompileProgramFn compile_program = nullptr;
  GetSizeFn get_ptx_size = nullptr;
  GetBytesFn get_ptx = nullptr;
  GetSizeFn get_cubin_size = nullptr;
  GetBytesFn get_cubin = nullptr;
  GetSizeFn get_log_size = nullptr;
  GetBytesFn get_log = nullptr;

  std::string error_text(int result) const {
    const char* text = get_error_string != nullptr ? get_error_string(result) : nullptr;
    return std::string(text != nullptr ? text : "unknown NVRTC error") + " (" +
           std::to_string(result) + ")";
  }
};

std::vector<std::string> Nvrtc::default_candidates() {
  std::vector<std::string> candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (const std::string& root : toolkit_roots()) {
    candidates.push_back((std::filesystem::path(root) / "lib64" / "libnvrtc.so").string());
  }
  return candidates;
}

Result<std::shared_ptr<const Nvrtc>> Nvrtc::load(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& candidate : candidates) {
    SharedLibrary library = SharedLibrary::open(candidate);
    if (!library.is_open()) {
      std::string why = library.open_error().empty() ? "cannot be opened" : library.open_error();
      // dlerror repeats the name first ("libx.so: cannot open shared object file: ...").
      if (why.rfind(candidate + ": ", 0) == 0) why = why.substr(candidate.size() + 2);
      tried += (tried.empty() ? "" : "; ") + candidate + " (" + why + ")";
      continue;
    }
    auto api = std::make_shared<Api>();
    library.resolve("nvrtcGetErrorString", api->get_error_string);
    library.resolve("nvrtcVersion", api->version);
    library.resolve("nvrtcCreateProgram", api->create_program);
    library.resolve("nvrtcDestroyProgram", api->destroy_program);
    library.resolve("nvrtcCompileProgram", api->compile_program);
    library.resolve("nvrtcGetPTXSize", api->get_ptx_size);
    library.resolve("nvrtcGetPTX", api->get_ptx);
    library.resolve("nvrtcGetCUBINSize", api->get_cubin_size);
    library.resolve("nvrtcGetCUBIN", api->get_cubin);
    library.resolve("nvrtcGetProgramLogSize", api->get_log_size);
    library.resolve("nvrtcGetProgramLog", api->get_log);
    if (!library.first_missing().empty()) {
      library.unload();
      tried += (tried.empty() ? "" : "; ") + candidate + " (does not export " +
               library.first_missing() + ")";
      continue;
    }
    // The handle stays open for the life of the process: compiled programs and NVRTC's own
    // builtins library (loaded by NVRTC) must not be unmapped under a concurrent compile.
    auto nvrtc = std::make_shared<Nvrtc>();
    nvrtc->library_ = candidate;
    nvrtc->api_ = api;
    return std::shared_ptr<const Nvrtc>(nvrtc);
  }
  return codegen_error(CodegenError::Kind::NvrtcNotFound,
                       "NVRTC not found: tried " + (tried.empty() ? std::string("nothing") : tried) +
                           "; install the CUDA toolkit or set CUDA_HOME");
}

const Result<std::shared_ptr<const Nvrtc>>& Nvrtc::shared() {
  static const Result<std::shared_ptr<const Nvrtc>> instance = load();
  return instance;
}

std::string Nvrtc::version() const {
  int major = 0;
  int minor = 0;
  if (api_->version(&major, &minor) != Api::kSuccess) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

Result<CompiledProgram> Nvrtc::compile(const std::string& source, const std::string& file_name,
                                       const NvrtcOptions& options) const {
  const auto start = std::chrono::steady_clock::now();
  CompiledProgram compiled;
  compiled.arch = options.arch;
  compiled.options = {std::string("--gpu-architecture=") + arch_name(options.arch), "--std=c++17",
                      "-Xptxas=-v"};
  const std::optional<std::string> include_dir = find_cuda_include_dir();
  if (include_dir) compiled.options.push_back("-I" + *include_dir);
  if (options.line_info) compiled.options.push_back("-lineinfo");
  for (const std::string& option : options.extra_options) compiled.options.push_back(option);
  std::vector<const char*> option_pointers;
  for (const std::string& option : compiled.options) option_pointers.push_back(option.c_str());

  Api::Program program = nullptr;
  int status = api_->create_program(&program, source.c_str(), file_name.c_str(), 0, nullptr,
                                    nullptr);
  if (status != Api::kSuccess) {
    return codegen_error(CodegenError::Kind::InvalidInput,
                         "NVRTC could not create a program: " + api_->error_text(status));
  }
  // Destroys the program on every path out of this function.
  struct ProgramGuard {
    const Api& api;
    Api::Program& program;
    ~ProgramGuard() { api.destroy_program(&program); }
  } guard{*api_, program};

  const int compile_status = api_->compile_program(
      program, static_cast<int>(option_pointers.size()), option_pointers.data());
  size_t log_size = 0;
  if (api_->get_log_size(program, &log_size) == Api::kSuccess && log_size > 1) {
    std::string log(log_size, '\0');
    if (api_->get_log(program, log.data()) == Api::kSuccess) {
      // The size counts the terminating NUL; NVRTC 13 also leaves NULs between the ptxas
      // messages, which would make the saved report a binary file to grep and diff.
      std::erase(log, '\0');
      compiled.log = std::move(log);
    }
  }
  if (compile_status != Api::kSuccess) {
    std::string message;
    CodegenError::Kind kind = CodegenError::Kind::Compilation;
    if (compile_status == Api::kCompilationError) {
      // The first "error" line of the log is the most useful one-line summary.
      std::istringstream lines(compiled.log);
      std::string first_error;
      for (std::string line; std::getline(lines, line);) {
        if (line.find("error") != std::string::npos) {
          first_error = line;
          break;
        }
      }
      message = "NVRTC failed to compile " + file_name + " for " + arch_name(options.arch) +
                (first_error.empty() ? std::string() : ": " + first_error);
      if (!include_dir && compiled.log.find("cuda_") != std::string::npos) {
        message += " (the CUDA include directory was not found: set CUDA_HOME)";
      }
    } else {
      kind = compile_status == Api::kInvalidOption ? CodegenError::Kind::BadOption
                                                   : CodegenError::Kind::Compilation;
      message = "NVRTC rejected the compilation of " + file_name + ": " +
                api_->error_text(compile_status);
    }
    return codegen_error(kind, message, compiled.log);
  }

  size_t size = 0;
  if (api_->get_cubin_size(program, &size) == Api::kSuccess && size > 0) {
    compiled.cubin.resize(size);
    if (api_->get_cubin(program, reinterpret_cast<char*>(compiled.cubin.data())) !=
        Api::kSuccess) {
      compiled.cubin.clear();
    }
  }
  if (api_->get_ptx_size(program, &size) == Api::kSuccess && size > 1) {
    compiled.ptx.resize(size);
    if (api_->get_ptx(program, compiled.ptx.data()) == Api::kSuccess) {
      compiled.ptx.resize(size - 1);
    } else {
      compiled.ptx.clear();
    }
  }
  if (compiled.cubin.empty()) {
    return codegen_error(CodegenError::Kind::Compilation,
                         "NVRTC compiled " + file_name + " but produced no cubin for " +
                             arch_name(options.arch),
                         compiled.log);
  }
  compiled.report = parse_ptxas_report(compiled.log);
  // wgmma that ptxas serialized, or a spill, costs a Hopper kernel most of its speed: such a
  // candidate is infeasible, and saying so here keeps every compile path (packages, the
  // runner's own NVRTC compile, the search's measurements) on one rule.
  if (options.arch == GpuArch::Sm90a && options.hopper_gate) {
    std::vector<PtxasRejection> rejections =
        hopper_rejections(compiled.report, compiled.log, compiled.ptx);
    if (!rejections.empty()) {
      return codegen_error(CodegenError::Kind::Rejected,
                           file_name + " for sm_90a: " + describe_rejections(rejections),
                           compiled.log);
    }
  }
  compiled.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

}  // namespace nautilus::codegen
