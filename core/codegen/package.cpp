// Kernel packages on disk: launch.json (versions 1 to 3), the cubins, PTX and ptxas report.
#include "core/codegen/package.h"

#include <array>
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

nlohmann::ordered_json tensor_map_json(const TensorMap& map) {
  return {{"dims", map.dims},
          {"strides", map.strides_bytes},
          {"offset", map.offset_bytes},
          {"box", map.box},
          {"element_strides", map.element_strides},
          {"interleave", "none"},
          {"swizzle", tensor_map_swizzle_name(map.swizzle)},
          {"l2_promotion", tensor_map_l2_promotion_name(map.l2_promotion)},
          {"oob_fill", tensor_map_oob_fill_name(map.oob_fill)}};
}

nlohmann::ordered_json argument_json(const KernelArgument& argument) {
  nlohmann::ordered_json json = {{"name", argument.name},
                                 {"shape", argument.shape},
                                 {"dtype", dtype_name(argument.dtype)},
                                 {"role", argument.role}};
  if (argument.tensor_map) json["tensor_map"] = tensor_map_json(*argument.tensor_map);
  return json;
}

// An array of integers at json[key]; `where` names it in messages.
Result<std::vector<int64_t>> integers_from_json(const nlohmann::ordered_json& json, const char* key,
                                                const std::string& where,
                                                const std::string& directory) {
  if (!json.contains(key) || !json[key].is_array()) {
    return invalid(directory, where + "." + key + " is missing or not an array");
  }
  std::vector<int64_t> values;
  for (const nlohmann::ordered_json& value : json[key]) {
    if (!value.is_number_integer()) {
      return invalid(directory, where + "." + key + " has an entry that is not an integer");
    }
    values.push_back(value.get<int64_t>());
  }
  return values;
}

// One of `names` (indexed by the enumerator) at json[key], or `fallback` when absent.
template <typename Enum, size_t N>
Result<Enum> enum_from_json(const nlohmann::ordered_json& json, const char* key,
                            const std::array<Enum, N>& values, const char* (*name)(Enum),
                            Enum fallback, const std::string& where, const std::string& directory) {
  if (!json.contains(key)) return fallback;
  std::string text = json[key].is_string() ? json[key].get<std::string>() : json[key].dump();
  std::string expected;
  for (Enum value : values) {
    if (text == name(value)) return value;
    expected += (expected.empty() ? "" : ", ") + std::string(name(value));
  }
  return invalid(directory, where + "." + key + " '" + text + "' is not one of " + expected);
}

// The "tensor_map" object of the argument `buffer`.
Result<TensorMap> tensor_map_from_json(const nlohmann::ordered_json& json, const KernelArgument& buffer,
                                       const std::string& where, const std::string& directory) {
  if (!json.is_object()) return invalid(directory, where + " is not an object");
  auto box = integers_from_json(json, "box", where, directory);
  if (!box.ok()) return box.error();
  TensorMap map = row_major_tensor_map(buffer, *box);
  if (json.contains("dims") || json.contains("strides")) {
    auto dims = integers_from_json(json, "dims", where, directory);
    if (!dims.ok()) return dims.error();
    auto strides = integers_from_json(json, "strides", where, directory);
    if (!strides.ok()) return strides.error();
    map.dims = *dims;
    map.strides_bytes = *strides;
  }
  if (json.contains("offset")) {
    if (!json["offset"].is_number_integer()) return invalid(directory, where + ".offset is not an integer");
    map.offset_bytes = json["offset"].get<int64_t>();
  }
  if (json.contains("element_strides")) {
    auto element_strides = integers_from_json(json, "element_strides", where, directory);
    if (!element_strides.ok()) return element_strides.error();
    map.element_strides = *element_strides;
  } else {
    map.element_strides.assign(map.dims.size(), 1);
  }
  if (json.contains("interleave") && json["interleave"] != "none") {
    return invalid(directory, where + ".interleave " + json["interleave"].dump() +
                                  " is not supported (only \"none\")");
  }
  constexpr std::array swizzles = {TensorMapSwizzle::None, TensorMapSwizzle::B32,
                                   TensorMapSwizzle::B64, TensorMapSwizzle::B128};
  auto swizzle = enum_from_json(json, "swizzle", swizzles, tensor_map_swizzle_name,
                                TensorMapSwizzle::None, where, directory);
  if (!swizzle.ok()) return swizzle.error();
  map.swizzle = *swizzle;
  constexpr std::array promotions = {TensorMapL2Promotion::None, TensorMapL2Promotion::B64,
                                     TensorMapL2Promotion::B128, TensorMapL2Promotion::B256};
  auto promotion = enum_from_json(json, "l2_promotion", promotions, tensor_map_l2_promotion_name,
                                  TensorMapL2Promotion::None, where, directory);
  if (!promotion.ok()) return promotion.error();
  map.l2_promotion = *promotion;
  constexpr std::array fills = {TensorMapOobFill::None, TensorMapOobFill::NanRequestZeroFma};
  auto fill = enum_from_json(json, "oob_fill", fills, tensor_map_oob_fill_name,
                             TensorMapOobFill::None, where, directory);
  if (!fill.ok()) return fill.error();
  map.oob_fill = *fill;
  if (std::string why = check_tensor_map(map, buffer); !why.empty()) {
    return invalid(directory, where + " (" + buffer.name + "): TMA cannot encode it: " + why);
  }
  return map;
}

// Reads one argument object; `where` names it in messages ("kernels[0].arguments[2]").
Result<KernelArgument> argument_from_json(const nlohmann::ordered_json& json, const std::string& where,
                                          const std::string& directory, int version) {
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
  if (!parsed) {
    return invalid(directory, where + ".dtype '" + dtype + "' is not " + tensor_dtype_list());
  }
  argument.dtype = *parsed;
  argument.role = json.value("role", std::string());
  if (argument.role != "input" && argument.role != "output" && argument.role != "intermediate" &&
      argument.role != "workspace") {
    return invalid(directory, where + ".role '" + argument.role +
                                  "' is not input, output, intermediate or workspace");
  }
  if (argument.role == "workspace") {
    if (version < 3) return invalid(directory, where + ".role workspace needs package version 3");
    if (argument.dtype != DType::I8 || argument.shape.size() != 1) {
      return invalid(directory, where + ": a workspace is bytes: dtype int8, shape [bytes]");
    }
  }
  if (json.contains("tensor_map")) {
    if (version < 2) return invalid(directory, where + ".tensor_map needs package version 2");
    auto map = tensor_map_from_json(json["tensor_map"], argument, where + ".tensor_map", directory);
    if (!map.ok()) return map.error();
    argument.tensor_map = *map;
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

const char* tensor_map_swizzle_name(TensorMapSwizzle swizzle) {
  switch (swizzle) {
    case TensorMapSwizzle::None: return "none";
    case TensorMapSwizzle::B32: return "32B";
    case TensorMapSwizzle::B64: return "64B";
    case TensorMapSwizzle::B128: return "128B";
  }
  return "unknown";
}

const char* tensor_map_l2_promotion_name(TensorMapL2Promotion promotion) {
  switch (promotion) {
    case TensorMapL2Promotion::None: return "none";
    case TensorMapL2Promotion::B64: return "64B";
    case TensorMapL2Promotion::B128: return "128B";
    case TensorMapL2Promotion::B256: return "256B";
  }
  return "unknown";
}

const char* tensor_map_oob_fill_name(TensorMapOobFill fill) {
  switch (fill) {
    case TensorMapOobFill::None: return "none";
    case TensorMapOobFill::NanRequestZeroFma: return "nan_request_zero_fma";
  }
  return "unknown";
}

int tensor_map_swizzle_bytes(TensorMapSwizzle swizzle) {
  switch (swizzle) {
    case TensorMapSwizzle::None: return 0;
    case TensorMapSwizzle::B32: return 32;
    case TensorMapSwizzle::B64: return 64;
    case TensorMapSwizzle::B128: return 128;
  }
  return 0;
}

TensorMap row_major_tensor_map(const KernelArgument& buffer, std::vector<int64_t> box,
                               TensorMapSwizzle swizzle) {
  TensorMap map;
  map.dims.assign(buffer.shape.rbegin(), buffer.shape.rend());
  int64_t stride = dtype_bytes(buffer.dtype);
  for (size_t i = 0; i + 1 < map.dims.size(); ++i) {
    stride *= map.dims[i];
    map.strides_bytes.push_back(stride);
  }
  map.box = std::move(box);
  map.element_strides.assign(map.dims.size(), 1);
  map.swizzle = swizzle;
  return map;
}

std::string check_tensor_map(const TensorMap& map, const KernelArgument& buffer) {
  const size_t rank = map.rank();
  const int64_t element = dtype_bytes(buffer.dtype);
  const std::string type = dtype_name(buffer.dtype);
  auto at = [](const char* what, size_t i) { return std::string(what) + "[" + std::to_string(i) + "]"; };
  if (rank < 1 || rank > 5) return "rank " + std::to_string(rank) + " is not in 1..5";
  if (map.strides_bytes.size() != rank - 1) {
    return "strides has " + std::to_string(map.strides_bytes.size()) + " entries; rank " +
           std::to_string(rank) + " needs " + std::to_string(rank - 1);
  }
  if (map.box.size() != rank) return "box has " + std::to_string(map.box.size()) + " entries, not the rank " + std::to_string(rank);
  if (map.element_strides.size() != rank) {
    return "element_strides has " + std::to_string(map.element_strides.size()) +
           " entries, not the rank " + std::to_string(rank);
  }
  for (size_t i = 0; i < rank; ++i) {
    if (map.dims[i] < 1 || map.dims[i] > (int64_t{1} << 32)) {
      return at("dims", i) + " = " + std::to_string(map.dims[i]) + " is not in [1, 2^32]";
    }
  }
  // Strides need not grow with the dimension (a 3-D view {64, rows, 2} of a [rows, 128] tile
  // splits its rows into two 128-byte boxes): only their alignment and range are TMA's rules.
  for (size_t i = 0; i + 1 < rank; ++i) {
    const int64_t stride = map.strides_bytes[i];
    if (stride <= 0 || stride % 16 != 0) {
      return at("strides", i) + " = " + std::to_string(stride) + " bytes is not a positive multiple of 16";
    }
    if (stride >= (int64_t{1} << 40)) return at("strides", i) + " is not below 2^40 bytes";
  }
  if (map.offset_bytes < 0 || map.offset_bytes % 16 != 0) {
    return "offset " + std::to_string(map.offset_bytes) +
           " bytes is not a non-negative multiple of 16 (TMA needs a 16-byte-aligned start)";
  }
  // The last byte the view can address must lie inside the buffer.
  int64_t end = map.offset_bytes + map.dims[0] * element;
  for (size_t i = 1; i < rank; ++i) end += (map.dims[i] - 1) * map.strides_bytes[i - 1];
  int64_t buffer_bytes = element;
  for (int64_t extent : buffer.shape) buffer_bytes *= extent;
  if (end > buffer_bytes) {
    return "the view ends at byte " + std::to_string(end) + ", past the buffer's " +
           std::to_string(buffer_bytes) + " bytes";
  }
  for (size_t i = 0; i < rank; ++i) {
    if (map.box[i] < 1 || map.box[i] > 256) {
      return at("box", i) + " = " + std::to_string(map.box[i]) + " is not in [1, 256]";
    }
    if (map.element_strides[i] < 1 || map.element_strides[i] > 8) {
      return at("element_strides", i) + " = " + std::to_string(map.element_strides[i]) +
             " is not in [1, 8]";
    }
  }
  const int64_t inner_bytes = map.box[0] * element;
  if (inner_bytes % 16 != 0) {
    return "box[0] is " + std::to_string(map.box[0]) + " " + type + " = " +
           std::to_string(inner_bytes) + " bytes, not a multiple of 16";
  }
  const int span = tensor_map_swizzle_bytes(map.swizzle);
  if (span > 0 && inner_bytes > span) {
    return "box[0] is " + std::to_string(map.box[0]) + " " + type + " = " +
           std::to_string(inner_bytes) + " bytes, more than the " +
           tensor_map_swizzle_name(map.swizzle) + " swizzle span";
  }
  return {};
}

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
    nlohmann::ordered_json entry = {{"name", kernel.name}, {"grid", kernel.grid}, {"block", kernel.block}};
    if (kernel.cluster) entry["cluster"] = *kernel.cluster;
    if (kernel.persistent) entry["persistent"] = true;
    entry["dynamic_shared_memory"] = kernel.dynamic_shared_bytes;
    entry["arguments"] = arguments;
    kernels.push_back(entry);
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
  if (!package.notes.empty()) launch["notes"] = package.notes;
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
      launch["version"].get<int>() < 1 || launch["version"].get<int>() > kPackageVersion) {
    return invalid(directory, "unsupported \"version\" (this reader knows versions 1 to " +
                                  std::to_string(kPackageVersion) + ")");
  }
  const int version = launch["version"].get<int>();

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
  if (launch.contains("notes") && launch["notes"].is_array()) {
    for (const nlohmann::ordered_json& note : launch["notes"]) {
      if (note.is_string()) package.notes.push_back(note.get<std::string>());
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
                                     directory, version);
    if (!buffer.ok()) return buffer.error();
    if (buffer->tensor_map) {
      return invalid(directory, "buffers[" + std::to_string(i) +
                                    "] has a tensor_map: only kernel arguments can be tensor maps");
    }
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
    if (json.contains("persistent")) {
      if (!json["persistent"].is_boolean()) return invalid(directory, where + ".persistent is not true or false");
      kernel.persistent = json["persistent"].get<bool>();
      if (kernel.persistent && (kernel.grid[1] != 1 || kernel.grid[2] != 1)) {
        return invalid(directory, where + ": a persistent kernel's grid is [tiles, 1, 1]");
      }
    }
    if (json.contains("cluster")) {
      if (version < 2) return invalid(directory, where + ".cluster needs package version 2");
      auto cluster = dim3_from_json(json["cluster"], where + ".cluster", directory);
      if (!cluster.ok()) return cluster.error();
      int64_t size = 1;
      for (size_t i = 0; i < 3; ++i) {
        size *= (*cluster)[i];
        if (kernel.grid[i] % (*cluster)[i] != 0) {
          return invalid(directory, where + ".cluster[" + std::to_string(i) + "] = " +
                                        std::to_string((*cluster)[i]) + " does not divide grid[" +
                                        std::to_string(i) + "] = " + std::to_string(kernel.grid[i]));
        }
      }
      if (size > kMaxPortableClusterSize) {
        return invalid(directory, where + ".cluster has " + std::to_string(size) +
                                      " CTAs, more than the portable " +
                                      std::to_string(kMaxPortableClusterSize));
      }
      kernel.cluster = *cluster;
    }
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
          json["arguments"][a], where + ".arguments[" + std::to_string(a) + "]", directory, version);
      if (!argument.ok()) return argument.error();
      bool known = false;
      for (const KernelArgument& buffer : package.buffers) known = known || buffer.same_buffer(*argument);
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
