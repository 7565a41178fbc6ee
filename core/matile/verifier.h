// Structural, type and layout checks of an MA tile module. A failure is a compiler bug (an
// internal error): the lowering's output is verified in the pipeline and in tests.
//
// Checked (ir.h states the rules):
//   - buffers as in VR tile IR; a kernel's global ops use only its params; no store to inputs.
//   - SSA: values defined once, used after their definition in the same or an enclosing region
//     (grid variables everywhere, a For's variable and block arguments in its body), names
//     non-empty and unique in a kernel.
//   - layouts: every value's layout is a valid TV layout over exactly its shape, with the
//     kernel's thread count, and every element is held by some thread; uniform scalars (grid
//     and loop variables, stages, window offsets) are index scalars, predicates bool scalars.
//   - ops: element-wise operands share the result's layout and the VR typing rules; Broadcast,
//     Permute, ExtractSlice and register ConvertLayout are register-only (each thread holds
//     what it needs); a Reduce's result layout is the slice of its operand's and its shuffle
//     masks and scratch match reduce_plan(); Mma operands are bf16/f16 of one dtype with an f32
//     accumulator, in exactly mma_a/b/c_layout of the op's warp grid, which covers the kernel's
//     warps; ldmatrix reads a 16-bit allocation into an MmaA or MmaB layout (B with an even
//     number of n atoms per warp); windows lie inside their allocations; AsyncCopy moves 16-byte
//     vectors between a buffer and an allocation of one dtype; FmaDot shapes agree.
//   - shared allocations: 128-byte aligned, non-overlapping, inside shared_bytes, each stage at
//     least the cosize of its layout, byte_size = stages * stage_elements * dtype bytes.
//   - loops: For results and block arguments have the iter_args' types and layouts; the body
//     ends with its only Yield, whose values match them.
//   - Hopper (sm_90a only): roles cover the kernel's warps with budgets that are multiples of 8
//     in 24..256 summing to <= 512 over the warpgroups, do not nest, and hold no op that waits
//     for the whole CTA (bar.sync 0, shared convert_layout, cross-warp reduce), no cp.async and
//     no mbarrier.init; inside a role, layouts have the role's thread count. mbarrier slots and
//     tensor maps exist; a map's box fits (extents <= 256, inner box within the swizzle span,
//     16-byte global pitches) and its allocation is the box laid out as tma_box_layout says,
//     every stage aligned to the swizzle atom; named barriers count whole warps with ids 1..15;
//     wgmma accumulators (and register A) are in hopper.h's layouts, A and B windows of one
//     16-bit dtype lie inside their allocations; stmatrix stores an accumulator-layout tile.
// Messages name the kernel and the op ("kernel gemm: mma %acc1: ...").
#pragma once

#include <string>
#include <vector>

#include "core/matile/ir.h"

namespace nautilus::matile {

std::vector<std::string> verify(const Module& module);

}  // namespace nautilus::matile
