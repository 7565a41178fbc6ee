// Text, DOT and JSON forms of MA tile IR (the `matile` stage).
//
// Text (stable, golden-tested; one op per line, nesting indents by two spaces). A kernel lists
// its register layouts once (`#L0 = ...`, numbered in order of first use) and its shared
// allocations, then its body; every register value prints its type and layout reference:
//
//   # matile IR: gemm (sm_80)
//   param A : bf16[100, 64] global input
//   ...
//
//   kernel gemm(A, B, C) grid(m_o: 2, n_o: 2) warps 4 shared_bytes 16384 {
//     #L0 = uniform (128,1):(0,1) on 1
//     #L1 = mma_c warps(4,1) (((4,8),(4,1)),((2,2),(1,8))):(((128,1),(16,512)),((64,8),(16,512))) on (64,64)
//     shared As : bf16[64, 32] Sw<2,3,3> o (64,32):(32,1) stages 2 bytes [0, 8192)  // operand a of dot %acc1
//     %acc0 = full 0.0 : f32[64, 64] #L1
//     %acc = for k_o in 0..2 iter_args(%acc_i = %acc0) pipeline 2 {
//       cp.async.wait_group 0
//       bar.sync
//       cp.async As[%stage_next][0, 0] <- A[%a_m + i0, %a_k + i1] bounds [100, 64] copy ... if %more
//       cp.async.commit_group
//       %a = ldmatrix.x4 As[%stage][0, 0] : bf16[64, 16] #L2
//       %acc1 = mma.m16n8k16 %a, %b, %acc_i warps(4, 1) : f32[64, 64] #L1
//       yield %acc1
//     }
//     global_store C[%c_m + i0, %c_n + i1] bounds [100, 80], %c
//   }
//
// Op forms (besides VR's element-wise forms `exp %x`, `add %a, %b`, `cmp lt %a, %b`,
// `select %c, %a, %b`, `cast %x`, `iota N`, `full C`, `broadcast %x, dims [..]`,
// `permute %x, order [..]`):
//   extract_slice %x, offsets [..]       convert_layout %x [via shared S]
//   reduce max %x, axis 1 [shfl [1, 2]] [via shared S]
//   mma.m16n8k16 %a, %b, %c warps(WM, WN)     fma_dot S[...], S[...]^T, %acc
//   global_load B[WINDOW or %i, ... [mask %m]] other C     global_store B[...], %v
//   cp.async S[STAGE][OFFSETS] <- B[WINDOW] bounds [..] copy TV vec N [if %p]
//   cp.async.commit_group    cp.async.wait_group N    bar.sync
//   ldmatrix.x4[.trans] S[..]    ld.shared S[..]    st.shared S[..], %v
//   for V in 0..N [iter_args(...)] [trips %t] [pipeline S] { ... }    yield [...]
// Hopper (sm_90a; the kernel lists `mbarrier NAME[COUNT] arrivals A` and
// `tensor_map NAME : BUFFER box [..] swizzle S` after its shared allocations):
//   roles { role NAME warpgroups G registers R { ... } ... }
//   mbarrier.init BAR    mbarrier.arrive[.expect_tx] BAR[%i] [tx BYTES] [count N]
//   mbarrier.wait BAR[%i] parity %p    bar.sync ID, THREADS    bar.arrive ID, THREADS
//   fence.proxy.async    tma.load S[%stage][0, 0] <- MAP[%c0, %c1] mbarrier BAR[%i] [multicast 0x3]
//   tma.store MAP[%c0, %c1] <- S[..]    cp.async.bulk.commit_group    cp.async.bulk.wait_group[.read] N
//   wgmma.fence    wgmma.m64nNk16 S[..]|%a, S[..]^T, %c k K    wgmma.commit_group    wgmma.wait_group N
//   stmatrix.x4 S[..], %v
// A window axis prints as `%offset + iK` (tile coordinate K added), `%offset`, `iK` or `0`; a
// shared reference as `S[%stage][o0, o1]` (`S[o0, o1]` for stage 0), `^T` when transposed.
//
// DOT: buffers and shared allocations are nodes; each kernel a cluster, each For body a cluster
// inside it; values are nodes "op:KERNEL/NAME"; ops without results are "op:KERNEL/KIND#I".
// Solid edges carry data (operand -> op, buffer -> load/copy, copy/store -> shared or buffer,
// shared -> load); the loop-carried edge from a yield to its block argument is dashed.
//
// JSON: {"name", "arch", "buffers", "kernels": [{"name", "params", "grid", "warps",
// "shared_bytes", "layouts": [{"id", "kind", "text", "layout" (layout/printer.h JSON)}],
// "shared": [{"name", "dtype", "shape", "layout", "stages", "stage_elements", "byte_offset",
// "byte_size", "purpose"}], ["mbarriers": [{"name", "count", "arrivals", "purpose"}],]
// ["tensor_maps": [{"name", "buffer", "box", "swizzle_bytes"}],] "body": [ops], "provenance"}]}
// (the Hopper lists only when the kernel has any). An op is {"kind", "text" (its line),
// "instruction", "results": [{"name", "dtype", "shape", "layout"}], "operands", kind fields
// ("body" for a For; "roles": [{"name", "warpgroups", "max_registers", "body"}] for Roles;
// "shared", "shared_b", "form", "k", "tensor_map", "mbarrier", "tx_bytes", ... for the Hopper
// kinds), "provenance"}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/matile/ir.h"

namespace nautilus::matile {

std::string print_module(const Module& module);
std::string print_kernel(const Kernel& kernel);
// One op's line (without nested body) with layout references taken from `kernel`'s table.
std::string print_op(const Kernel& kernel, const Op& op);
// "mma %acc1", "cp.async As", "bar.sync", "for k_o" -- for messages.
std::string op_label(const Op& op);

std::string module_to_dot(const Module& module);
nlohmann::ordered_json module_to_json(const Module& module);

}  // namespace nautilus::matile
