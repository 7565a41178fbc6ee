#include "core/driver/kernel_package.h"

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
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

}  // namespace

codegen::Result<codegen::KernelPackage> build_kernel_package(
    const Compilation& compilation, const matile::ModulePtr& ma_module,
    const std::vector<codegen::GpuArch>& archs) {
  using codegen::CodegenError;
  if (!ma_module) {
    return codegen::codegen_error(CodegenError::Kind::Unsupported,
                                  "the pipeline did not produce MA tile IR for this spec");
  }
  if (archs.empty()) return codegen::codegen_error(CodegenError::Kind::BadOption, "no GPU arch to compile for");
  codegen::EmitOptions emit_options;
  emit_options.source = compilation.file.get();
  codegen::Result<codegen::EmittedModule> emitted = codegen::emit_cuda(*ma_module, emit_options);
  if (!emitted.ok()) {
    return codegen::codegen_error(emitted.error().kind, "cannot emit CUDA: " + emitted.error().message);
  }
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc.ok()) return nvrtc.error();
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
    // The emitter printed CUDA that NVRTC rejects: a compiler bug, reported with the log.
    if (!compiled.ok()) return compiled.error();
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
