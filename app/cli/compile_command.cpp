#include "app/cli/compile_command.h"

#include <iomanip>
#include <optional>
#include <ostream>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/codegen/package.h"
#include "core/spec/reference.h"

namespace nautilus::cli {
namespace {

std::string role_of(const scalar::Buffer& buffer) {
  switch (buffer->role) {
    case scalar::BufferRole::Input: return "input";
    case scalar::BufferRole::Output: return "output";
    case scalar::BufferRole::Intermediate: return "intermediate";
  }
  return "intermediate";
}

codegen::KernelArgument argument_of(const scalar::Buffer& buffer) {
  return {buffer->name, buffer->shape, buffer->dtype, role_of(buffer)};
}

}  // namespace

const CommandSpec& compile_command_spec(const std::vector<OptionSpec>& shared_options) {
  static const CommandSpec spec = [&] {
    CommandSpec command{
        "compile",
        "nautilus compile FILE --arch sm_80|sm_90a -o DIR [--schedule FILE] [--pin D]... "
        "[-D NAME=VALUE]...",
        "Compiles a spec to a kernel package: CUDA source, cubin, launch.json, ptxas report.\n"
        "Runs the pipeline to MA tile IR, prints it as CUDA C++, compiles it with NVRTC (loaded\n"
        "at run time) and writes DIR/kernel.cu, DIR/kernel.ARCH.cubin, DIR/kernel.ARCH.ptx,\n"
        "DIR/launch.json, DIR/ptxas.txt and DIR/ptxas.json (see docs/codegen.md).",
        shared_options};
    command.options.push_back({"arch", "ARCH", "target GPU architecture: sm_80 or sm_90a"});
    command.options.push_back({"output", "DIR", "the package directory, also -o DIR (created when missing)"});
    return command;
  }();
  return spec;
}

std::vector<std::string> expand_output_flag(const std::vector<std::string>& args) {
  std::vector<std::string> expanded;
  for (const std::string& arg : args) {
    if (arg == "-o") {
      expanded.push_back("--output");
    } else if (arg.rfind("-o", 0) == 0 && arg.rfind("--", 0) != 0) {
      expanded.push_back("--output=" + arg.substr(2));
    } else {
      expanded.push_back(arg);
    }
  }
  return expanded;
}

std::optional<codegen::KernelPackage> build_package(const driver::Compilation& compilation,
                                                    const matile::ModulePtr& ma_module,
                                                    const std::vector<codegen::GpuArch>& archs,
                                                    std::ostream& err, int* exit_status) {
  *exit_status = kExitFailure;
  if (!ma_module) {
    err << "nautilus: error: the pipeline did not produce MA tile IR for this spec\n";
    return std::nullopt;
  }
  codegen::EmitOptions emit_options;
  emit_options.source = compilation.file.get();
  codegen::Result<codegen::EmittedModule> emitted = codegen::emit_cuda(*ma_module, emit_options);
  if (!emitted.ok()) {
    err << "nautilus: error: cannot emit CUDA: " << emitted.error().message << "\n";
    if (emitted.error().kind == codegen::CodegenError::Kind::InvalidInput) {
      *exit_status = kExitInternal;
    }
    return std::nullopt;
  }
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc.ok()) {
    err << "nautilus: error: " << nvrtc.error().message << "\n";
    return std::nullopt;
  }
  codegen::KernelPackage package;
  package.spec_name = ma_module->name;
  if (compilation.spec) {
    for (const auto& [name, value] : compilation.spec->sizes) package.sizes.emplace_back(name, value);
  }
  package.arch = archs.front();
  if (compilation.spec) {
    package.flops = spec::estimate_flops(*compilation.spec);
    package.bytes = spec::estimate_compulsory_bytes(*compilation.spec);
  }
  package.nvrtc_version = (*nvrtc)->version();
  package.source = emitted->source;
  for (codegen::GpuArch arch : archs) {
    codegen::NvrtcOptions nvrtc_options;
    nvrtc_options.arch = arch;
    codegen::Result<codegen::CompiledProgram> compiled =
        (*nvrtc)->compile(emitted->source, "kernel.cu", nvrtc_options);
    if (!compiled.ok()) {
      // The emitter printed CUDA that NVRTC rejects: a compiler bug, reported with the log.
      err << "nautilus: internal error: " << compiled.error().message << "\n"
          << compiled.error().log;
      *exit_status = kExitInternal;
      return std::nullopt;
    }
    package.cubins[arch] = compiled->cubin;
    package.ptx[arch] = compiled->ptx;
    // The report and options of the first arch describe the package (launch.json's "arch").
    if (arch == archs.front()) {
      package.nvrtc_options = compiled->options;
      package.report = compiled->report;
      package.ptxas_log = compiled->log;
    }
  }
  for (const scalar::Buffer& buffer : ma_module->params) package.buffers.push_back(argument_of(buffer));
  for (const scalar::Buffer& buffer : ma_module->allocations) {
    package.buffers.push_back(argument_of(buffer));
  }
  for (const codegen::EmittedKernel& kernel : emitted->kernels) {
    codegen::KernelLaunch launch;
    launch.name = kernel.symbol;
    launch.grid = kernel.grid;
    launch.block = kernel.block;
    launch.dynamic_shared_bytes = kernel.dynamic_shared_bytes;
    for (const scalar::Buffer& buffer : kernel.params) launch.arguments.push_back(argument_of(buffer));
    package.kernels.push_back(launch);
  }
  *exit_status = kExitOk;
  return package;
}

int run_compile_command(const driver::Compilation& compilation,
                        const matile::ModulePtr& ma_module, const ParsedOptions& options,
                        std::ostream& out, std::ostream& err) {
  const std::string arch_text = options.get("arch");
  const std::optional<codegen::GpuArch> arch = codegen::parse_arch(arch_text);
  if (!arch) {
    err << "nautilus: error: " << (arch_text.empty() ? "--arch is required" : "unknown --arch '" + arch_text + "'")
        << "; expected " << codegen::arch_names() << "\n";
    return kExitFailure;
  }
  const std::string directory = options.get("output");
  if (directory.empty()) {
    err << "nautilus: error: -o DIR is required (the package directory)\n";
    return kExitFailure;
  }
  int status = kExitOk;
  std::optional<codegen::KernelPackage> package =
      build_package(compilation, ma_module, {*arch}, err, &status);
  if (!package) return status;
  codegen::Result<bool> written = codegen::write_package(*package, directory);
  if (!written.ok()) {
    err << "nautilus: error: " << written.error().message << "\n";
    return kExitFailure;
  }

  out << "compiled " << ma_module->name << " for " << codegen::arch_name(*arch) << " with NVRTC "
      << package->nvrtc_version << ": " << package->kernels.size()
      << (package->kernels.size() == 1 ? " kernel" : " kernels") << " -> " << directory << "\n";
  for (const codegen::KernelResources& kernel : package->report.kernels) {
    out << "  " << kernel.name << ": " << kernel.registers << " registers, "
        << kernel.spill_store_bytes + kernel.spill_load_bytes << " bytes spilled, "
        << kernel.stack_frame_bytes << " bytes stack\n";
  }
  if (package->report.any_spills()) {
    err << "nautilus: warning: registers spill to local memory (see " << directory
        << "/ptxas.txt)\n";
  }
  return kExitOk;
}

}  // namespace nautilus::cli
