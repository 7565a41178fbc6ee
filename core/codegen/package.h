// Kernel packages: everything the runner needs to launch a compiled operator, in one directory.
//
// A package is what `nautilus compile` writes and what the runner (profiler/, a separate process,
// possibly on another machine) reads. It is self-describing: the runner never re-runs the
// compiler, it only reads files.
//
//   DIR/
//     kernel.cu            the CUDA C++ the emitter printed (extern "C" kernels)
//     kernel.sm_80.cubin   one cubin per compiled arch (ELF, loadable with cuModuleLoadData)
//     kernel.sm_80.ptx     the PTX of the same compilation
//     launch.json          what to launch, in order, with which buffers (below)
//     ptxas.txt            the resource table and NVRTC's full log, for people
//     ptxas.json           the same report as data (registers, spills, smem per kernel)
//
// launch.json (format "nautilus-kernel-package", version 3):
//   {
//     "format": "nautilus-kernel-package", "version": 3,
//     "spec": "attention", "sizes": {"B": 1, "H": 2, "M": 128, ...},
//     "arch": "sm_80",                        // the arch the package was compiled for
//     "flops": 2.7e11, "bytes": 5.0e8,        // the operator's work, when known (optional)
//     "notes": ["kernel k: registers: ..."],  // what the build changed (optional)
//     "compiler": {"nautilus": "0.1.0", "nvrtc": "13.0", "options": ["--gpu-architecture=..."]},
//     "source": "kernel.cu", "cubins": {"sm_80": "kernel.sm_80.cubin"},
//     "buffers": [{"name": "Q", "shape": [1, 2, 128, 64], "dtype": "bf16", "role": "input"}, ...],
//     "kernels": [                            // launched in this order, one stream
//       {"name": "attention_O", "grid": [2, 2, 1], "block": [128, 1, 1],
//        "cluster": [2, 1, 1],                 // optional: thread-block cluster dims (version 2)
//        "persistent": true,                   // optional: grid.x is a tile count; the runner
//                                              // launches min(grid.x, SMs x CTAs per SM) CTAs
//        "dynamic_shared_memory": 24576,
//        "arguments": [{"name": "Q", "shape": [...], "dtype": "bf16", "role": "input"}, ...]}
//     ]
//   }
// Buffers are row-major and contiguous; every kernel argument is the buffer of that name
// (inputs, outputs, and intermediates the runner allocates once for all kernels), passed as a
// device pointer -- or, with "tensor_map" (version 2), as a TMA tensor map over that buffer.
// A buffer of role "workspace" (version 3) is scratch a kernel keeps for itself across its CTAs
// (the dynamic tile scheduler's counter): dtype "int8", shape [bytes]; whoever launches the
// package zeroes it before EVERY launch of a kernel that takes it (the runner with a memset in
// stream order, outside the kernel, so kernel timings do not include it):
//
//   {"name": "attention_O_tile_counter", "shape": [4], "dtype": "int8", "role": "workspace"}
//
// A tensor map argument:
//
//   {"name": "A", "shape": [100, 64], "dtype": "bf16", "role": "input",
//    "tensor_map": {"dims": [64, 100], "strides": [128], "offset": 0,   // a view, innermost first
//                   "box": [64, 32], "element_strides": [1, 1], "interleave": "none",
//                   "swizzle": "128B", "l2_promotion": "128B", "oob_fill": "none"}}
//
// The kernel declares such a parameter as a 64-byte-aligned, 128-byte `const __grid_constant__`
// struct; the runner encodes it with cuTensorMapEncodeTiled from the buffer's device address and
// passes it by value in parameter order. The element type is the buffer's dtype. "dims"
// (elements) and "strides" (bytes, of dims 1..rank-1) default to the buffer's row-major shape,
// reversed; "offset" (bytes from the buffer's start), "element_strides" (all 1), "interleave"
// (only "none"), "swizzle" ("none", "32B", "64B", "128B"), "l2_promotion" ("none", "64B", "128B",
// "256B") and "oob_fill" ("none": out-of-bounds elements read as zero, or
// "nan_request_zero_fma") are optional; write_package writes every field. read_package refuses a
// map TMA cannot encode, saying why (check_tensor_map below).
//
// Version 1 packages (no "cluster", no "tensor_map") and version 2 packages (no "workspace")
// are still read; write_package writes version 3.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/codegen/nvrtc.h"
#include "core/codegen/result.h"
#include "core/layout/tma.h"
#include "core/support/dtype.h"

namespace nautilus::codegen {

inline constexpr const char* kPackageFormat = "nautilus-kernel-package";
inline constexpr int kPackageVersion = 3;  // read_package also reads versions 1 and 2

// How TMA lays a box out in shared memory: 16-byte chunks exchanged within 32/64/128-byte rows.
// The wgmma descriptor of the same tile must name the same swizzle.
enum class TensorMapSwizzle { None, B32, B64, B128 };
// The L2 fetch granularity of TMA loads.
enum class TensorMapL2Promotion { None, B64, B128, B256 };
// What a load reads outside the tensor's dims: zeros, or (floats only) a NaN that makes a
// following FMA produce zero.
enum class TensorMapOobFill { None, NanRequestZeroFma };

const char* tensor_map_swizzle_name(TensorMapSwizzle swizzle);         // "none", "32B", ...
const char* tensor_map_l2_promotion_name(TensorMapL2Promotion promotion);  // "none", "64B", ...
const char* tensor_map_oob_fill_name(TensorMapOobFill fill);           // "none", "nan_request_zero_fma"
// The swizzle's span in bytes (32, 64, 128); 0 for None.
int tensor_map_swizzle_bytes(TensorMapSwizzle swizzle);

// A TMA tensor map (cuTensorMapEncodeTiled) over one buffer: a view of the buffer with `rank()`
// dimensions, innermost first, and the box one copy moves. Interleave is always none.
struct TensorMap {
  std::vector<int64_t> dims;             // elements per dimension, innermost first
  std::vector<int64_t> strides_bytes;    // byte strides of dims[1..rank-1]
  int64_t offset_bytes = 0;              // where the view starts, from the buffer's start
  std::vector<int64_t> box;              // elements per dimension of one copy
  std::vector<int64_t> element_strides;  // traversal step per dimension (1 = dense)
  TensorMapSwizzle swizzle = TensorMapSwizzle::None;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::None;
  TensorMapOobFill oob_fill = TensorMapOobFill::None;

  size_t rank() const { return dims.size(); }
  bool operator==(const TensorMap&) const = default;
};

// A global buffer as a kernel argument: a pointer to a row-major tensor, or a tensor map over it.
struct KernelArgument {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::string role;  // "input", "output", "intermediate" or "workspace"
  std::optional<TensorMap> tensor_map = std::nullopt;  // set: passed as a 128-byte tensor map

  // The buffer itself (name, shape, dtype, role), whatever the argument passes.
  bool same_buffer(const KernelArgument& other) const {
    return name == other.name && shape == other.shape && dtype == other.dtype && role == other.role;
  }
  bool operator==(const KernelArgument&) const = default;
};

// The map over the whole of `buffer` seen as row-major: dims are the shape reversed, strides
// follow from it. E.g. a bf16 [100, 64] buffer with box {64, 32} gives dims {64, 100}, strides
// {128}.
TensorMap row_major_tensor_map(const KernelArgument& buffer, std::vector<int64_t> box,
                               TensorMapSwizzle swizzle = TensorMapSwizzle::None);

// Why TMA cannot encode `map` over `buffer` (empty when it can), in the words of cuda.h's
// rules: rank 1..5; dims in [1, 2^32]; byte strides positive multiples of 16 below 2^40; a
// 16-byte-aligned start; the view inside the buffer; box extents in
// [1, 256] with an inner extent of a multiple of 16 bytes and at most the swizzle span; element
// strides in [1, 8]. E.g. "box[0] is 128 bf16 = 256 bytes, more than the 128B swizzle span".
std::string check_tensor_map(const TensorMap& map, const KernelArgument& buffer);

// The tensor map the runner encodes for a TMA plan of the emitter (layout::plan_tma_tile): the
// plan's dims, stride, box and swizzle, L2 promotion 128 B, zeros out of bounds.
TensorMap tensor_map_of_plan(const layout::TmaTilePlan& plan);

// The largest number of CTAs in a cluster that every sm_90 device can launch ("portable").
inline constexpr int64_t kMaxPortableClusterSize = 8;

struct KernelLaunch {
  std::string name;                      // the extern "C" symbol
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t dynamic_shared_bytes = 0;
  std::vector<KernelArgument> arguments;  // in parameter order
  // Thread-block cluster dims: the runner launches with cuLaunchKernelEx when set. Each must
  // divide the grid's, and their product is at most kMaxPortableClusterSize.
  std::optional<std::array<int64_t, 3>> cluster = std::nullopt;
  // Persistent CTAs: grid.x is the kernel's tile count; the runner launches
  // min(grid.x, SMs x CTAs per SM) CTAs, which walk the tiles themselves.
  bool persistent = false;
  bool operator==(const KernelLaunch&) const = default;
};

struct KernelPackage {
  std::string spec_name;
  std::vector<std::pair<std::string, int64_t>> sizes;  // in the spec's order
  GpuArch arch = GpuArch::Sm80;
  std::string compiler_version;  // the Nautilus version; launch_json writes the running one if empty
  std::string nvrtc_version;
  std::vector<std::string> nvrtc_options;
  std::string source;                                   // kernel.cu
  std::map<GpuArch, std::vector<uint8_t>> cubins;
  std::map<GpuArch, std::string> ptx;
  std::vector<KernelArgument> buffers;  // every global buffer: params, then intermediates
  std::vector<KernelLaunch> kernels;    // launch order
  PtxasReport report;
  std::string ptxas_log;
  // What the build changed after the lowering, one line each (launch.json "notes"): e.g. a
  // Hopper kernel that spilled, built again with another register split between its roles.
  std::vector<std::string> notes;
  // The work of the whole operator (spec::estimate_flops / estimate_compulsory_bytes); 0 when
  // unknown. The runner divides them by the measured time into TFLOP/s and GB/s.
  double flops = 0.0;
  double bytes = 0.0;
};

// launch.json of a package (the files it names are those write_package writes).
nlohmann::ordered_json launch_json(const KernelPackage& package);

// Writes the package into `directory` (created when missing; existing package files are
// replaced, other files are left alone).
Result<bool> write_package(const KernelPackage& package, const std::string& directory);

// Reads a package back (version 1, 2 or 3): launch.json, the source, every cubin and PTX it names,
// ptxas.json. Fails with a reason naming the file and the field when something is missing or
// malformed, or when a tensor map or cluster cannot be launched as written.
Result<KernelPackage> read_package(const std::string& directory);

}  // namespace nautilus::codegen
