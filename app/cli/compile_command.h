// `nautilus compile FILE --arch sm_80|sm_90a -o DIR`: the spec compiled through MA tile IR,
// printed as CUDA by the emitter, compiled with NVRTC and written as a kernel package
// (core/codegen/package.h) that the runner loads.
//
// The command needs only the MA module of a compilation: cli.cpp runs the pipeline (sizes,
// schedule, pins) to stage matile and hands the Compilation here. Exit status: 0 the package was
// written; 1 a user-facing failure (unknown arch, missing -o, NVRTC not installed, a kernel the
// emitter cannot print, an unwritable directory); 2 an internal error (the emitted CUDA does not
// compile: a compiler bug).
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/options.h"
#include "core/codegen/package.h"
#include "core/driver/kernel_package.h"
#include "core/driver/pipeline.h"
#include "core/matile/ir.h"

namespace nautilus::cli {

// The command's name, usage, help and options (-D, --schedule and --pin are shared with lower).
const CommandSpec& compile_command_spec(const std::vector<OptionSpec>& shared_options);

// `args` with `-o DIR` / `-oDIR` spelled `--output DIR` (the option parser knows long options).
std::vector<std::string> expand_output_flag(const std::vector<std::string>& args);

// The kernel package of a compilation's MA module, compiled by NVRTC for every arch in `archs`
// (the first is the package's main arch). On failure prints the error and sets `exit_status`
// (1 user-facing, 2 internal) and returns nullopt.
std::optional<codegen::KernelPackage> build_package(const driver::Compilation& compilation,
                                                    const matile::ModulePtr& ma_module,
                                                    const std::vector<codegen::GpuArch>& archs,
                                                    std::ostream& err, int* exit_status,
                                                    const driver::PackageOptions& options = {});

// Everything after the pipeline: checks the options, emits, compiles and writes the package.
// `ma_module` is the compilation's MA tile IR (nullptr when the pipeline did not build it).
int run_compile_command(const driver::Compilation& compilation,
                        const matile::ModulePtr& ma_module, const ParsedOptions& options,
                        std::ostream& out, std::ostream& err);

}  // namespace nautilus::cli
