#include "core/codegen/package.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace nautilus::codegen {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSourceFile = "kernel.cu";
constexpr const char* kLaunchFile = "launch.json";
constexpr const char* kReportText = "ptxas.txt";
constexpr const char* kReportJson = "ptxas.json";

std::string cubin_file(GpuArch arch) { return std::string("kernel.") + arch_name(arch) + ".cubin"; }
std::string ptx_file(GpuArch arch) { return std::string("kernel.") + arch_name(arch) + ".ptx"; }

CodegenError io_error(std::string message) {
  return codegen_error(CodegenError::Kind::Io, std::move(message));
}
CodegenError invalid(const std::string& directory, std::string message) {
  return codegen_error(CodegenError::Kind::InvalidInput,
                       (fs::path(directory) / kLaunchFile).string() + ": " + message);
}

// Writes `bytes` to `path` (binary), returning an error message or "".
std::string write_file(const fs::path& path, const void* bytes, size_t size) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return "cannot write " + path.string();
  file.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
  file.close();
  if (!file) return "cannot write " + path.string();
  return {};
}

Result<std::string> read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return io_error("cannot read " + path.string());
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

nlohmann::ordered_json argument_json(const KernelArgument& argument) {
  return {{"name", argument.name},
          {"shape", argument.shape},
          {"dtype", dtype_name(argument.dtype)},
          {"role", argument.role}};
}

// Reads one argument object; `where` names it in messages ("kernels[0].arguments[2]").
Result<KernelArgument> argument_from_json(const nlohmann::ordered_json& json, const std::string& where,
                                          const std::string& directory) {
  if (!json.is_object()) return invalid(directory, where + " is not an object");
  KernelArgument argument;
  if (!json.contains("name") || !json["name"].is_string()) {
    return invalid(directory, where + ".name is missing or not a string");
  }
  argument.name = json["name"].get<std::string>();
  if (!json.contains("shape") || !json["shape"].is_array()) {
    return invalid(directory, where + ".shape is missing or not an array");
  }
  for (const nlohmann::ordered_json& extent : json["shape"]) {
    if (!extent.is_number_integer() || extent.get<int64_t>() < 1) {
      return invalid(directory, where + ".shape has an extent that is not a positive integer");
    }
    argument.shape.push_back(extent.get<int64_t>());
  }
  std::string dtype = json.value("dtype", std::string());
  std::optional<DType> parsed = parse_tensor_dtype(dtype);
  if (!parsed) return invalid(directory, where + ".dtype '" + dtype + "' is not f32, f16 or bf16");
  argument.dtype = *parsed;
  argument.role = json.value("role", std::string());
  if (argument.role != "input" && argument.role != "output" && argument.role != "intermediate") {
    return invalid(directory,
                   where + ".role '" + argument.role + "' is not input, output or intermediate");
  }
  return argument;
}

Result<std::array<int64_t, 3>> dim3_from_json(const nlohmann::ordered_json& json, const std::string& where,
                                              const std::string& directory) {
  if (!json.is_array() || json.size() != 3) {
    return invalid(directory, where + " is not an array of three extents");
  }
  std::array<int64_t, 3> dims{};
  for (size_t i = 0; i < 3; ++i) {
    if (!json[i].is_number_integer() || json[i].get<int64_t>() < 1) {
      return invalid(directory, where + " has an extent that is not a positive integer");
    }
    dims[i] = json[i].get<int64_t>();
  }
  return dims;
}

}  // namespace

nlohmann::ordered_json launch_json(const KernelPackage& package) {
  nlohmann::ordered_json sizes = nlohmann::ordered_json::object();
  for (const auto& [name, value] : package.sizes) sizes[name] = value;
  nlohmann::ordered_json cubins = nlohmann::ordered_json::object();
  for (const auto& [arch, bytes] : package.cubins) cubins[arch_name(arch)] = cubin_file(arch);
  nlohmann::ordered_json ptx = nlohmann::ordered_json::object();
  for (const auto& [arch, text] : package.ptx) ptx[arch_name(arch)] = ptx_file(arch);
  nlohmann::ordered_json buffers = nlohmann::ordered_json::array();
  for (const KernelArgument& buffer : package.buffers) buffers.push_back(argument_json(buffer));
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const KernelLaunch& kernel : package.kernels) {
    nlohmann::ordered_json arguments = nlohmann::ordered_json::array();
    for (const KernelArgument& argument : kernel.arguments) {
      arguments.push_back(argument_json(argument));
    }
    kernels.push_back({{"name", kernel.name},
                       {"grid", kernel.grid},
                       {"block", kernel.block},
                       {"dynamic_shared_memory", kernel.dynamic_shared_bytes},
                       {"arguments", arguments}});
  }
  nlohmann::ordered_json launch = {{"format", kPackageFormat},
          {"version", kPackageVersion},
          {"spec", package.spec_name},
          {"sizes", sizes},
          {"arch", arch_name(package.arch)},
          {"compiler",
           {{"nautilus", package.compiler_version.empty() ? std::string(NAUTILUS_VERSION)
                                                          : package.compiler_version},
            {"nvrtc", package.nvrtc_version},
            {"options", package.nvrtc_options}}},
          {"source", kSourceFile},
          {"cubins", cubins},
          {"ptx", ptx},
          {"buffers", buffers},
          {"kernels", kernels}};
  if (package.flops > 0) launch["flops"] = package.flops;
  if (package.bytes > 0) launch["bytes"] = package.bytes;
  return launch;
}

Result<bool> write_package(const KernelPackage& package, const std::string& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error || !fs::is_directory(directory)) {
    return io_error("cannot create the package directory " + directory +
                    (error ? ": " + error.message() : std::string()));
  }
  const fs::path root(directory);
  std::vector<std::pair<fs::path, std::string>> texts = {
      {root / kSourceFile, package.source},
      {root / kLaunchFile, launch_json(package).dump(2) + "\n"},
      {root / kReportText, ptxas_report_table(package.report) + "\n" + package.ptxas_log},
      {root / kReportJson, ptxas_report_to_json(package.report).dump(2) + "\n"}};
  for (const auto& [arch, text] : package.ptx) texts.emplace_back(root / ptx_file(arch), text);
  for (const auto& [path, text] : texts) {
    std::string failure = write_file(path, text.data(), text.size());
    if (!failure.empty()) return io_error(failure);
  }
  for (const auto& [arch, bytes] : package.cubins) {
    std::string failure = write_file(root / cubin_file(arch), bytes.data(), bytes.size());
    if (!failure.empty()) return io_error(failure);
  }
  return true;
}

Result<KernelPackage> read_package(const std::string& directory) {
  const fs::path root(directory);
  Result<std::string> launch_text = read_file(root / kLaunchFile);
  if (!launch_text.ok()) return launch_text.error();
  nlohmann::ordered_json launch = nlohmann::ordered_json::parse(*launch_text, nullptr, /*allow_exceptions=*/false);
  if (launch.is_discarded()) return invalid(directory, "not valid JSON");
  if (!launch.is_object() || launch.value("format", std::string()) != kPackageFormat) {
    return invalid(directory, std::string("\"format\" is not \"") + kPackageFormat + "\"");
  }
  if (!launch.contains("version") || !launch["version"].is_number_integer() ||
      launch["version"].get<int>() != kPackageVersion) {
    return invalid(directory, "unsupported \"version\" (this reader knows version " +
                                  std::to_string(kPackageVersion) + ")");
  }

  KernelPackage package;
  package.spec_name = launch.value("spec", std::string());
  if (launch.contains("sizes") && launch["sizes"].is_object()) {
    for (const auto& [name, value] : launch["sizes"].items()) {
      if (!value.is_number_integer()) return invalid(directory, "size " + name + " is not an integer");
      package.sizes.emplace_back(name, value.get<int64_t>());
    }
  }
  std::string arch_text = launch.value("arch", std::string());
  std::optional<GpuArch> arch = parse_arch(arch_text);
  if (!arch) {
    return invalid(directory, "\"arch\" '" + arch_text + "' is not one of " + arch_names());
  }
  package.arch = *arch;
  for (auto [key, field] : {std::pair{"flops", &package.flops}, std::pair{"bytes", &package.bytes}}) {
    if (!launch.contains(key)) continue;
    if (!launch[key].is_number() || launch[key].get<double>() < 0) {
      return invalid(directory, std::string("\"") + key + "\" is not a non-negative number");
    }
    *field = launch[key].get<double>();
  }
  if (launch.contains("compiler") && launch["compiler"].is_object()) {
    const nlohmann::ordered_json& compiler = launch["compiler"];
    package.compiler_version = compiler.value("nautilus", std::string());
    package.nvrtc_version = compiler.value("nvrtc", std::string());
    if (compiler.contains("options") && compiler["options"].is_array()) {
      for (const nlohmann::ordered_json& option : compiler["options"]) {
        if (option.is_string()) package.nvrtc_options.push_back(option.get<std::string>());
      }
    }
  }

  Result<std::string> source = read_file(root / launch.value("source", std::string(kSourceFile)));
  if (!source.ok()) return source.error();
  package.source = *source;

  for (const char* key : {"cubins", "ptx"}) {
    if (!launch.contains(key)) continue;
    if (!launch[key].is_object()) return invalid(directory, std::string("\"") + key + "\" is not an object");
    for (const auto& [name, file] : launch[key].items()) {
      std::optional<GpuArch> file_arch = parse_arch(name);
      if (!file_arch || !file.is_string()) {
        return invalid(directory, std::string(key) + "." + name + " is not an arch with a file name");
      }
      Result<std::string> bytes = read_file(root / file.get<std::string>());
      if (!bytes.ok()) return bytes.error();
      if (std::string(key) == "cubins") {
        package.cubins[*file_arch] = std::vector<uint8_t>(bytes->begin(), bytes->end());
      } else {
        package.ptx[*file_arch] = *bytes;
      }
    }
  }
  if (package.cubins.count(package.arch) == 0) {
    return invalid(directory, std::string("no cubin for the package's arch ") + arch_name(package.arch));
  }

  if (!launch.contains("buffers") || !launch["buffers"].is_array()) {
    return invalid(directory, "\"buffers\" is missing or not an array");
  }
  for (size_t i = 0; i < launch["buffers"].size(); ++i) {
    auto buffer = argument_from_json(launch["buffers"][i], "buffers[" + std::to_string(i) + "]",
                                     directory);
    if (!buffer.ok()) return buffer.error();
    package.buffers.push_back(*buffer);
  }
  if (!launch.contains("kernels") || !launch["kernels"].is_array() || launch["kernels"].empty()) {
    return invalid(directory, "\"kernels\" is missing, empty or not an array");
  }
  for (size_t k = 0; k < launch["kernels"].size(); ++k) {
    const nlohmann::ordered_json& json = launch["kernels"][k];
    const std::string where = "kernels[" + std::to_string(k) + "]";
    if (!json.is_object() || !json.contains("name") || !json["name"].is_string()) {
      return invalid(directory, where + ".name is missing or not a string");
    }
    KernelLaunch kernel;
    kernel.name = json["name"].get<std::string>();
    auto grid = dim3_from_json(json.value("grid", nlohmann::ordered_json()), where + ".grid", directory);
    if (!grid.ok()) return grid.error();
    kernel.grid = *grid;
    auto block = dim3_from_json(json.value("block", nlohmann::ordered_json()), where + ".block", directory);
    if (!block.ok()) return block.error();
    kernel.block = *block;
    if (!json.contains("dynamic_shared_memory") ||
        !json["dynamic_shared_memory"].is_number_integer() ||
        json["dynamic_shared_memory"].get<int64_t>() < 0) {
      return invalid(directory, where + ".dynamic_shared_memory is not a non-negative integer");
    }
    kernel.dynamic_shared_bytes = json["dynamic_shared_memory"].get<int64_t>();
    if (!json.contains("arguments") || !json["arguments"].is_array()) {
      return invalid(directory, where + ".arguments is missing or not an array");
    }
    for (size_t a = 0; a < json["arguments"].size(); ++a) {
      auto argument = argument_from_json(
          json["arguments"][a], where + ".arguments[" + std::to_string(a) + "]", directory);
      if (!argument.ok()) return argument.error();
      bool known = false;
      for (const KernelArgument& buffer : package.buffers) known = known || buffer == *argument;
      if (!known) {
        return invalid(directory, where + ".arguments[" + std::to_string(a) + "] " +
                                      argument->name + " does not match any entry of \"buffers\"");
      }
      kernel.arguments.push_back(*argument);
    }
    package.kernels.push_back(kernel);
  }

  // The report is optional for the runner: a package without ptxas.json still launches.
  if (fs::exists(root / kReportJson)) {
    Result<std::string> report_text = read_file(root / kReportJson);
    if (!report_text.ok()) return report_text.error();
    nlohmann::json report_json = nlohmann::json::parse(*report_text, nullptr, false);
    if (report_json.is_discarded()) {
      return codegen_error(CodegenError::Kind::InvalidInput,
                           (root / kReportJson).string() + ": not valid JSON");
    }
    Result<PtxasReport> report = ptxas_report_from_json(report_json);
    if (!report.ok()) return report.error();
    package.report = *report;
  }
  return package;
}

}  // namespace nautilus::codegen
