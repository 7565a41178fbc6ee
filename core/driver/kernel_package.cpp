#include "core/driver/kernel_package.h"

#include <algorithm>
#include <map>
#include <memory>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/matile/role_registers.h"
#include "core/spec/reference.h"

namespace nautilus::driver {
namespace {

std::string role_of(const scalar::Buffer& buffer) {
  switch (buffer->role) {
    case scalar::BufferRole::Input: return "input";
    case scalar::BufferRole::Output: return "output";
    case scalar::BufferRole::Intermediate: return "intermediate";
    case scalar::BufferRole::Workspace: return "workspace";
  }
  return "intermediate";
}

codegen::KernelArgument argument_of(const scalar::Buffer& buffer) {
  return {buffer->name, buffer->shape, buffer->dtype, role_of(buffer)};
}

// "4 bytes spill stores, 4 bytes spill loads": the kernel's spill rejection.
std::string describe_rejections_of(const std::vector<codegen::PtxasRejection>& rejections,
                                   const std::string& kernel) {
  for (const codegen::PtxasRejection& rejection : rejections) {
    if (rejection.kernel == kernel && rejection.code == "spill") return rejection.detail;
  }
  return {};
}

}  // namespace

codegen::Result<codegen::KernelPackage> build_kernel_package(
    const Compilation& compilation, const matile::ModulePtr& ma_module,
    const std::vector<codegen::GpuArch>& archs, const PackageOptions& options) {
  using codegen::CodegenError;
  if (!ma_module) {
    return codegen::codegen_error(CodegenError::Kind::Unsupported,
                                  "the pipeline did not produce MA tile IR for this spec");
  }
  if (archs.empty()) return codegen::codegen_error(CodegenError::Kind::BadOption, "no GPU arch to compile for");
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc.ok()) return nvrtc.error();
  // Emits `module` and compiles it for every arch, the Hopper gate applied here so that a spill
  // can be answered by another register split.
  struct Attempt {
    codegen::EmittedModule emitted;
    std::map<codegen::GpuArch, codegen::CompiledProgram> compiled;
    std::vector<codegen::PtxasRejection> rejections;  // sm_90a's
  };
  bool approximate_exp2 = options.approximate_exp2;
  // ptxas options every arch is compiled with; a fallback below may lower the register usage
  // level for the whole module.
  std::vector<std::string> ptxas_options;
  const auto attempt = [&](const matile::ModulePtr& module, bool approximate,
                           const std::vector<std::string>& extra_options) -> codegen::Result<Attempt> {
    codegen::EmitOptions emit_options;
    emit_options.source = compilation.file.get();
    emit_options.approximate_exp2 = approximate;
    codegen::Result<codegen::EmittedModule> emitted = codegen::emit_cuda(*module, emit_options);
    if (!emitted.ok()) {
      return codegen::codegen_error(emitted.error().kind, "cannot emit CUDA: " + emitted.error().message);
    }
    Attempt result{std::move(*emitted), {}, {}};
    for (codegen::GpuArch arch : archs) {
      codegen::NvrtcOptions nvrtc_options;
      nvrtc_options.arch = arch;
      nvrtc_options.hopper_gate = false;
      nvrtc_options.extra_options = extra_options;
      codegen::Result<codegen::CompiledProgram> compiled =
          (*nvrtc)->compile(result.emitted.source, "kernel.cu", nvrtc_options);
      // The emitter printed CUDA that NVRTC rejects: a compiler bug, reported with the log.
      if (!compiled.ok()) return compiled.error();
      if (arch == codegen::GpuArch::Sm90a) {
        result.rejections = codegen::hopper_rejections(compiled->report, compiled->log, compiled->ptx);
      }
      result.compiled.emplace(arch, std::move(*compiled));
    }
    return result;
  };
  matile::ModulePtr module = ma_module;
  codegen::Result<Attempt> built = attempt(module, approximate_exp2, ptxas_options);
  if (!built.ok()) return built.error();
  std::vector<std::string> notes;
  // A Hopper kernel that only spills is compiled again in forms that hold fewer registers where
  // ptxas is at its edge, kernel by kernel, and the first form without a rejection of that
  // kernel, and without new ones, is kept: the neighbouring register splits between its roles
  // (matile/role_registers.h says why); then ptxas at a lower register usage level, which
  // holds back the optimizations that trade registers for speed (module-wide; a kernel one
  // register past its budget usually fits without them, and its main loop keeps the SFU-only
  // exp2); then exp2 with its denormal guard (EmitOptions::approximate_exp2 says why;
  // module-wide), at the lowering's split and at the others. The guard comes last because it
  // costs a compare and two multiplies on every score of a softmax.
  const auto rejected = [](const Attempt& a, const std::string& kernel) {
    return std::any_of(a.rejections.begin(), a.rejections.end(),
                       [&](const codegen::PtxasRejection& r) { return r.kernel == kernel; });
  };
  for (size_t k = 0; k < module->kernels.size(); ++k) {
    // ptxas names the kernel by its symbol (the emitter prefixes the module's name).
    std::string kernel_name;
    for (const codegen::EmittedKernel& emitted : built->emitted.kernels) {
      if (emitted.ir_name == module->kernels[k]->name) kernel_name = emitted.symbol;
    }
    if (kernel_name.empty()) continue;
    const bool only_spills = std::all_of(built->rejections.begin(), built->rejections.end(),
                                         [&](const codegen::PtxasRejection& r) {
                                           return r.kernel != kernel_name || r.code == "spill";
                                         });
    if (!rejected(*built, kernel_name) || !only_spills) continue;
    const std::string spilled = describe_rejections_of(built->rejections, kernel_name);
    struct Form {
      matile::KernelPtr kernel;
      bool approximate;
      std::vector<std::string> ptxas_options;
      std::string note;
    };
    std::vector<Form> forms;
    const std::string guarded = std::string(kGuardedExp2Note) + " (the SFU-only exp2 spilled)";
    for (const bool approximate : {true, false}) {
      if (!approximate && !approximate_exp2) break;
      if (!approximate) forms.push_back({module->kernels[k], false, ptxas_options, guarded});
      for (int registers : matile::consumer_register_alternatives(*module->kernels[k])) {
        if (const matile::KernelPtr rebalanced = matile::with_consumer_registers(module->kernels[k], registers)) {
          forms.push_back({rebalanced, approximate && approximate_exp2, ptxas_options,
                           rebalanced->notes.back() + (approximate ? std::string() : "; " + guarded)});
        }
      }
      // ptxas's default level is 5; 3 holds back the register-hungry optimizations first, 1
      // nearly all of them. Only when no level was chosen for an earlier kernel of the module.
      if (approximate && ptxas_options.empty()) {
        for (const int level : {3, 1}) {
          forms.push_back({module->kernels[k], approximate_exp2,
                           {"-Xptxas=--register-usage-level=" + std::to_string(level)},
                           "ptxas at register usage level " + std::to_string(level) +
                               " (the default, 5, spilled)"});
        }
      }
    }
    for (const Form& form : forms) {
      auto changed = std::make_shared<matile::Module>(*module);
      changed->kernels[k] = form.kernel;
      codegen::Result<Attempt> again = attempt(changed, form.approximate, form.ptxas_options);
      if (!again.ok()) {
        // An NVRTC whose ptxas predates --register-usage-level rejects the option, not the
        // kernel: that form is not available, the others are.
        if (form.ptxas_options != ptxas_options) continue;
        return again.error();
      }
      if (rejected(*again, kernel_name) || again->rejections.size() >= built->rejections.size()) continue;
      notes.push_back("kernel " + kernel_name + ": " + form.note + ": " + spilled);
      module = changed;
      approximate_exp2 = form.approximate;
      ptxas_options = form.ptxas_options;
      built = std::move(again);
      break;
    }
  }
  if (!built->rejections.empty()) {
    return codegen::codegen_error(CodegenError::Kind::Rejected,
                                  "kernel.cu for sm_90a: " + codegen::describe_rejections(built->rejections),
                                  built->compiled.at(codegen::GpuArch::Sm90a).log);
  }
  codegen::KernelPackage package;
  package.spec_name = module->name;
  package.notes = std::move(notes);
  if (compilation.spec) {
    for (const auto& [name, value] : compilation.spec->sizes) package.sizes.emplace_back(name, value);
  }
  package.arch = archs.front();
  if (compilation.spec) {
    package.flops = spec::estimate_flops(*compilation.spec);
    package.bytes = spec::estimate_compulsory_bytes(*compilation.spec);
  }
  package.nvrtc_version = (*nvrtc)->version();
  package.source = built->emitted.source;
  for (auto& [arch, compiled] : built->compiled) {
    package.cubins[arch] = compiled.cubin;
    package.ptx[arch] = compiled.ptx;
    // The report and options of the first arch describe the package (launch.json's "arch").
    if (arch == archs.front()) {
      package.nvrtc_options = compiled.options;
      package.report = compiled.report;
      package.ptxas_log = compiled.log;
    }
  }
  for (const scalar::Buffer& buffer : module->params) package.buffers.push_back(argument_of(buffer));
  for (const scalar::Buffer& buffer : module->allocations) {
    package.buffers.push_back(argument_of(buffer));
  }
  for (const codegen::EmittedKernel& kernel : built->emitted.kernels) {
    codegen::KernelLaunch launch;
    launch.name = kernel.symbol;
    launch.grid = kernel.grid;
    launch.persistent = kernel.persistent;
    launch.block = kernel.block;
    launch.dynamic_shared_bytes = kernel.dynamic_shared_bytes;
    for (const scalar::Buffer& buffer : kernel.params) launch.arguments.push_back(argument_of(buffer));
    // sm_90a: the TMA maps follow the pointers, as the kernel declares them.
    for (const codegen::EmittedKernel::TensorMapParam& param : kernel.tensor_maps) {
      codegen::KernelArgument argument = argument_of(param.buffer);
      argument.tensor_map = codegen::tensor_map_of_plan(param.plan);
      launch.arguments.push_back(argument);
    }
    package.kernels.push_back(launch);
  }
  return package;
}

}  // namespace nautilus::driver
