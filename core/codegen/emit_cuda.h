// The CUDA emitter: MA tile IR → readable CUDA C++ (one translation unit per module).
//
// Every MA kernel becomes one `extern "C" __global__` function (so the runner finds it by name
// without C++ mangling) taking one pointer per global buffer, in the kernel's parameter order.
// What each construct becomes:
//
//   register tile %x : f32[64, 64] #mma_c      float x[32];   (its slots: the per-thread array,
//                                               indexed only by unrolled constants, so it lives
//                                               in registers; a 1-slot value is a plain scalar)
//   element coordinates                        from the TV layout at compile time: per layout a
//                                               thread part computed once from threadIdx.x
//                                               (`l2_row`, `l2_col`) plus a slot part that is a
//                                               constant expression of the unrolled slot index
//   element-wise ops                           #pragma unroll loops over the slots
//   Broadcast / Permute / ExtractSlice /        register copies through a constexpr slot table
//   ConvertLayout (registers)                  (the same for every thread, checked here)
//   Reduce                                     per-thread combine, __shfl_xor_sync butterfly,
//                                               then the cross-warp step through shared scratch
//   Mma                                        mma.sync.aligned.m16n8k16 inline PTX per atom
//   SharedLoad ldmatrix / AsyncCopy            ldmatrix.x4[.trans] / cp.async.cg with zero-fill
//                                               (src-size) as inline PTX, one line per issue;
//                                               32-bit shared addresses: hoisted swizzled lane
//                                               part + stage + an XOR/immediate constant
//   GlobalLoad / GlobalStore                   per-slot accesses at a hoisted 32-bit start +
//                                               constant; bounds checked only where interval
//                                               arithmetic on the window's offsets says an index
//                                               can reach them; unmasked neighbouring pairs as
//                                               one 4- or 8-byte access
//   shared allocations                         slices of `extern __shared__` dynamic memory
//
// Each section starts with a comment naming the spec line it implements (provenance) and each
// op with its MA tile IR text, so a reader can go from CUDA back to the math. Constructs the
// emitter cannot print (a layout whose coordinates are not separable into thread and slot
// parts, register movement that would index registers dynamically) return
// CodegenError::Kind::Unsupported naming the op; a module that does not verify returns
// InvalidInput. The same source serves sm_80 and sm_90a. kernel_emitter.h says which file
// prints which construct.
//
//   Example (excerpt of a GEMM kernel):
//     // spec gemm.nt:6  output C[m, n] = sum(k) A[m, k] * B[k, n]
//     // %acc1 = mma.m16n8k16 %a0, %b0, %acc_i warps(4, 1) : f32[64, 64] #L2
//     float acc1[32];
//     ...
//     for (int ki = 0; ki < 2; ++ki) { ... mma_m16n8k16_bf16(&acc1[4 * (mi + 1 * ni)], ...
//     ldmatrix_x4(&A_k1[0], &A_k1[4], (A_smem_addr + stage * 8192u + (lane_offset_2 ^ 32u)));
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/codegen/result.h"
#include "core/layout/tma.h"
#include "core/matile/ir.h"
#include "core/support/source.h"

namespace nautilus::codegen {

struct EmitOptions {
  // The spec file, for provenance comments quoting the spec line of each section (optional).
  const SourceFile* source = nullptr;
  // exp2 on the SFU alone (exp2_approx: ex2.approx.ftz, results below 2^-126 flushed), or
  // exp2f, which guards the denormal range with a compare and two predicated multiplies. The
  // guarded form issues fewer MUFUs at once and so holds fewer registers: a package build whose
  // Hopper kernel spills tries it (driver/kernel_package.cpp). The same choice holds for
  // sigmoid: sigmoid_approx (ex2.approx.ftz and rcp.approx.ftz) or 1 / (1 + expf(-x)).
  bool approximate_exp2 = true;
};

// How to launch one emitted kernel (the package's launch.json is built from this).
struct EmittedKernel {
  std::string symbol;       // the extern "C" name
  std::string ir_name;      // the MA kernel's name
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t dynamic_shared_bytes = 0;
  std::vector<scalar::Buffer> params;  // in parameter order
  // sm_90a: the kernel's TMA tensor maps, passed after `params` in this order as 128-byte
  // `const __grid_constant__` parameters; each map over the buffer of that name.
  struct TensorMapParam {
    std::string name;       // the MA kernel's map name
    scalar::Buffer buffer;
    layout::TmaTilePlan plan;  // plan_tma_map; the runner encodes tensor_map_of_plan(plan)
  };
  std::vector<TensorMapParam> tensor_maps;
  // A persistent kernel (MA Kernel::persistent): `grid` is its tile count, and the launcher
  // launches at most as many CTAs as the device holds at once.
  bool persistent = false;
};

struct EmittedModule {
  std::string source;
  std::vector<EmittedKernel> kernels;  // launch order
};

// The boxes by which a kernel's TMA map fills its box in shared memory (the map's box laid out
// as matile::tma_box_layout says), from layout::plan_tma_tile over the map's 2-D row-major
// buffer. The emitter issues one copy per box; the package records the map it implies
// (tensor_map_of_plan, package.h).
Result<layout::TmaTilePlan> plan_tma_map(const matile::TmaMap& map);

Result<EmittedModule> emit_cuda(const matile::Module& module, const EmitOptions& options = {});

// Why emit_cuda refuses `kernel` before NVRTC sees it: a register tile holding more than eight
// times a thread's 255 registers (it would spill whatever else the kernel does, and NVRTC takes
// minutes over the spill code); nullopt when none does. The search drops complete schedules
// with such a tile (an untiled state on the way to a tiled one may have one).
std::optional<std::string> register_tile_past_the_register_file(const matile::Kernel& kernel);

// How the emitter keeps swizzled shared addresses cheap inside loops: for an access whose
// (unswizzled) element offset is a per-thread `base` plus constants (one per allocation axis),
// the swizzled offset is (swizzle(base) ^ xor_part) + add_part in every thread, so swizzle(base)
// is computed once and each access costs at most one XOR plus an immediate. The axes' constants
// are tried as the XOR part from none (all added) upwards; nullopt when no split holds for every
// base (the emitter then swizzles the whole offset in place). `swizzle` must be CuTe's
// Swizzle<B, M, S> as core/layout defines it.
struct SwizzleSplit {
  int64_t xor_part = 0;
  int64_t add_part = 0;
};
std::optional<SwizzleSplit> split_swizzled_offset(const std::function<int64_t(int64_t)>& swizzle,
                                                  const std::vector<int64_t>& bases,
                                                  const std::vector<int64_t>& axis_constants);

}  // namespace nautilus::codegen
