// The fixed device helpers every generated CUDA translation unit starts with: inline-PTX
// wrappers for the instructions the MA tile IR names (cp.async with zero-fill, commit and wait,
// ldmatrix.x4[.trans], mma.sync.m16n8k16), floor division and modulo with the divisor's sign,
// bf16/f16 pair packing, and the shared-memory swizzle.
//
//   MA op                            CUDA (the op's line)         defined here as
//   cp.async.commit_group            cp_async_commit();           asm volatile("cp.async.commit_group;\n" ::);
//   cp.async.wait_group 0            cp_async_wait<0>();          asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
//   %stage = mod %n_o, %c2 : index   floor_mod(n_o, c2)           the remainder with the divisor's sign
#pragma once

#include <cstdint>

#include "core/layout/swizzle.h"

namespace nautilus::codegen {

// The prelude's text (it ends with `using namespace nautilus_device;`).
const char* cuda_prelude();

// What modules with Hopper ops (sm_90a) add after the prelude: the opaque tensor-map parameter
// type and inline-PTX wrappers for mbarriers, TMA (cp.async.bulk.tensor) loads and stores and
// their bulk groups, named barriers, the async-proxy fence, wgmma fence/commit/wait,
// setmaxnreg and stmatrix.x4. The wgmma instructions themselves depend on N and the operand
// form, so the emitter prints one wrapper per shape a module uses next to its kernels.
//
//   MA op                               CUDA                                 PTX
//   mbarrier.wait full[%s] parity %p    mbarrier_wait(full_addr + s * 8u, p); try_wait.parity spin
//   tma.load As[%s] <- tmA[%m0, %k0]    tma_load_2d(As_addr + ..., &tmA, k0, m0, bar);
//                                        cp.async.bulk.tensor.2d.shared::cluster.global.tile
//                                        .mbarrier::complete_tx::bytes
const char* cuda_hopper_prelude();

// The emitter's own model of the prelude's swizzle helper, checked against core/layout's on a
// range of offsets so that the printed formula cannot drift from the layout algebra.
int64_t device_swizzle(int64_t offset, const layout::Swizzle& s);

}  // namespace nautilus::codegen
