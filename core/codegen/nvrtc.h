// In-process compilation of CUDA C++ to cubin and PTX with NVRTC, and the ptxas resource report.
//
// libnvrtc is loaded at run time with dlopen (like libcuda in profiler/cuda_driver.h), never
// linked: the `nautilus` binary and the app must start on machines without the CUDA toolkit, and
// only the commands that compile CUDA report "NVRTC not found: ...". `Nvrtc::load()` tries, in
// order, the SONAMEs libnvrtc.so.13 and libnvrtc.so.12, the development name libnvrtc.so, then
// lib64/libnvrtc.so under $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.
//
// Kernels include cuda_fp16.h / cuda_bf16.h, which NVRTC does not ship; `find_cuda_include_dir`
// locates the toolkit's include directory at run time the same way ($CUDA_HOME, $CUDA_PATH,
// /usr/local/cuda) and `compile` passes it as -I.
//
// `compile` always asks ptxas for its verbose report (-Xptxas=-v) and parses it into a
// PtxasReport, so callers (tests, the tuner, the app) can check registers and spills per kernel.
// The log of a successful compilation looks like:
//   ptxas info    : Compiling entry function 'gemm' for 'sm_80'
//   ptxas info    : Function properties for gemm
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 96 registers, used 1 barriers, 16384 bytes smem, 380 bytes cmem[0]
// A compilation error returns CodegenError::Kind::Compilation with NVRTC's log, e.g.
//   kernel.cu(10): error: expected a ";"
//
// The Hopper gate. For sm_90a, `compile` also fails -- with CodegenError::Kind::Rejected, which
// callers (the search's measurements, `nautilus compile`) treat as an infeasible candidate, not
// a compiler bug -- when ptxas reports that a kernel would run far below what it was written for:
//   ptxas info : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine
//                register count at entry.               (no __launch_bounds__(T, 1))
//   ptxas info : (C7511) / (C7515) ... wgmma.mma_async instructions are serialized ...
//   ptxas info : (C7517) warpgroup.wait is injected in around line 52 by compiler to allow use
//                of registers defined by GMMA in function 'k'
// or when a Hopper kernel (one whose PTX uses wgmma, setmaxnreg or cp.async.bulk) spills
// registers at all (the Ampere path compiled for sm_90a keeps the small spills its tests budget
// for). NVRTC prints the C75xx lines without -v; they are "info" lines, and C7508 names no
// function, so the kernel is found in the PTX (the entry that executes setmaxnreg). The
// message names each kernel and warning, e.g.
//   "kernel.cu for sm_90a: kernel gemm_tma: C7517 (wgmma serialized): ptxas info : (C7517) ..."
// NvrtcOptions::hopper_gate = false keeps the old behaviour (a view that wants to show the
// report of a rejected kernel).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/codegen/result.h"

namespace nautilus::codegen {

// The GPU architectures the emitter targets. sm_90a (not plain sm_90) because wgmma and the
// other Hopper-only instructions need the "a" feature set.
enum class GpuArch { Sm80, Sm90a };
const char* arch_name(GpuArch arch);                     // "sm_80", "sm_90a"
std::optional<GpuArch> parse_arch(std::string_view name);  // inverse of arch_name
std::vector<GpuArch> all_archs();
std::string arch_names();                                // "sm_80, sm_90a" for messages

// The resources ptxas reports for one entry function (__global__).
struct KernelResources {
  std::string name;
  std::string arch;                 // as ptxas printed it, e.g. "sm_90a"
  int registers = 0;
  int barriers = 0;
  int64_t shared_memory_bytes = 0;  // static shared memory (dynamic is a launch parameter)
  int64_t stack_frame_bytes = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t constant_memory_bytes = 0;  // cmem[0]: the kernel's parameters and constants

  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
  bool operator==(const KernelResources&) const = default;
};

struct PtxasReport {
  std::vector<KernelResources> kernels;  // in the order ptxas compiled them
  // "ptxas warning : ..." lines and the "(C75xx) ..." performance lines, verbatim
  std::vector<std::string> warnings;

  const KernelResources* find(std::string_view kernel) const;  // nullptr when absent
  bool any_spills() const;
};

// Parses the `-Xptxas=-v` lines of an NVRTC log. Lines it does not recognize are ignored (the
// log also holds compiler warnings and timings); "Function properties" of device functions that
// are not entry points are skipped. Never fails: an empty or foreign log gives an empty report.
PtxasReport parse_ptxas_report(std::string_view log);

// The report as an aligned text table, a header and one kernel a line:
//   kernel          arch    registers  spill-stores  spill-loads  smem  stack  barriers
std::string ptxas_report_table(const PtxasReport& report);

// JSON form: {"kernels": [{"name", "arch", "registers", ...}], "warnings": [...]}, and back.
nlohmann::ordered_json ptxas_report_to_json(const PtxasReport& report);
Result<PtxasReport> ptxas_report_from_json(const nlohmann::json& json);

// Why ptxas' output makes one sm_90a kernel unusable (see "The Hopper gate" above).
struct PtxasRejection {
  std::string kernel;  // the entry function; "" when neither ptxas nor the PTX says which
  std::string code;    // "C7508", "C7511", "C7515", "C7517" or "spill"
  std::string detail;  // the ptxas line, or "96 bytes spill stores, 96 bytes spill loads"
  bool operator==(const PtxasRejection&) const = default;
};

// The ptxas codes that mean wgmma runs serialized (or setmaxnreg is ignored), with a short
// meaning for messages: {"C7508", "setmaxnreg ignored"}, ...
const std::vector<std::pair<std::string, std::string>>& wgmma_serialization_codes();

// Every reason in `log` (NVRTC's log) and `report` (parsed from it) to reject an sm_90a
// compilation: each C7508/C7511/C7515/C7517 line, attributed to the function it names or else
// to the PTX entries that use the instruction concerned (setmaxnreg for C7508, wgmma for the
// others), and each Hopper kernel (see above; every kernel when `ptx` is empty) with spill
// stores or loads. Empty: nothing to reject.
std::vector<PtxasRejection> hopper_rejections(const PtxasReport& report, std::string_view log,
                                              std::string_view ptx);

// One line for a failed gate: "kernel K: CODE (meaning): detail; kernel L: ...".
std::string describe_rejections(const std::vector<PtxasRejection>& rejections);

// The first directory among $CUDA_HOME/include, $CUDA_PATH/include and /usr/local/cuda/include
// that holds cuda_bf16.h; nullopt when none does.
std::optional<std::string> find_cuda_include_dir();

struct NvrtcOptions {
  GpuArch arch = GpuArch::Sm80;
  bool line_info = false;                   // -lineinfo: map SASS back to source lines
  // sm_90a only: fail with Kind::Rejected on wgmma serialization warnings and spills.
  bool hopper_gate = true;
  std::vector<std::string> extra_options;   // passed verbatim after the standard ones
};

struct CompiledProgram {
  GpuArch arch = GpuArch::Sm80;
  std::vector<uint8_t> cubin;
  std::string ptx;
  std::string log;          // NVRTC's full log (ptxas report included)
  PtxasReport report;
  std::vector<std::string> options;  // the options NVRTC ran with, for the package
  double milliseconds = 0.0;
};

class Nvrtc {
 public:
  // The library names and paths load() tries, in order (the environment is read each call).
  static std::vector<std::string> default_candidates();

  // Loads the first candidate that opens and exports every entry point. On failure the error
  // (kind NvrtcNotFound) reads "NVRTC not found: tried libnvrtc.so.13 (...), ...".
  static Result<std::shared_ptr<const Nvrtc>> load(
      const std::vector<std::string>& candidates = default_candidates());

  // A process-wide instance loaded once with the default candidates (the load result is cached,
  // failures too).
  static const Result<std::shared_ptr<const Nvrtc>>& shared();

  // "13.0"
  std::string version() const;
  const std::string& library() const { return library_; }

  // Compiles `source` (a translation unit named `file_name` in diagnostics) for options.arch.
  // Thread-safe: every call uses its own NVRTC program.
  Result<CompiledProgram> compile(const std::string& source, const std::string& file_name,
                                  const NvrtcOptions& options) const;

  struct Api;  // the resolved entry points (nvrtc.cpp)

 private:
  std::string library_;
  std::shared_ptr<const Api> api_;
};

}  // namespace nautilus::codegen
