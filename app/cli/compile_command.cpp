#include "app/cli/compile_command.h"

#include <iomanip>
#include <optional>
#include <ostream>

#include "core/codegen/package.h"
#include "core/driver/kernel_package.h"

namespace nautilus::cli {

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
    command.options.push_back({"exp2", "MODE",
                               "how exp2 is computed: approximate (default: ex2.approx.ftz on the SFU "
                               "alone; exp2f only in a kernel that would spill with it) or guarded "
                               "(exp2f everywhere, with its denormal guard; for comparisons)"});
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
                                                    std::ostream& err, int* exit_status,
                                                    const driver::PackageOptions& options) {
  codegen::Result<codegen::KernelPackage> package =
      driver::build_kernel_package(compilation, ma_module, archs, options);
  if (package.ok()) {
    *exit_status = kExitOk;
    return std::move(package).value();
  }
  const codegen::CodegenError& error = package.error();
  using Kind = codegen::CodegenError::Kind;
  if (error.kind == Kind::Compilation) {
    err << "nautilus: internal error: " << error.message << "\n" << error.log;
  } else {
    err << "nautilus: error: " << error.message << "\n";
  }
  *exit_status = error.kind == Kind::Compilation || error.kind == Kind::InvalidInput ? kExitInternal
                                                                                    : kExitFailure;
  return std::nullopt;
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
  const std::string exp2 = options.has("exp2") ? options.get("exp2") : "approximate";
  if (exp2 != "approximate" && exp2 != "guarded") {
    err << "nautilus: error: unknown --exp2 '" << exp2 << "'; expected approximate, guarded\n";
    return kExitFailure;
  }
  driver::PackageOptions package_options;
  package_options.approximate_exp2 = exp2 == "approximate";
  int status = kExitOk;
  std::optional<codegen::KernelPackage> package =
      build_package(compilation, ma_module, {*arch}, err, &status, package_options);
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
  for (const std::string& note : package->notes) out << "  note: " << note << "\n";
  if (package->report.any_spills()) {
    err << "nautilus: warning: registers spill to local memory (see " << directory
        << "/ptxas.txt)\n";
  }
  return kExitOk;
}

}  // namespace nautilus::cli
