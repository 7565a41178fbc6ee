// order_global_accesses: a barrier between a thread's global write and another thread's access
// of the same elements within one CTA.
//
// Threads of one CTA see each other's global memory writes in order only across a barrier
// (__syncthreads, or a role's named barrier), exactly as for shared memory. The lowering puts
// barriers around shared memory itself; a kernel that also writes a global buffer and reads it
// back or writes it again (a split reduction's partial sums combined in the kernel that produced them, a scratch
// row written by one thread layout and read by another) needs them too, or a thread reads the
// buffer's old contents: on the GPU that is the runner's NaN poison, on the CPU the interpreter
// reports it (unsynchronized_read).
//
// The pass looks only at buffers a kernel both reads (global_load, cp.async, TMA load) and
// writes (global_store, TMA store), or writes with more than one store op (an initial value,
// then the result, perhaps from other threads); for those it inserts a barrier before a read of
// a buffer written since the last barrier, and before a write of one read or written since. Loops are
// walked with what their body leaves pending at its end, so an access in the next iteration is
// ordered too. Inside a role the barrier is the role's own named barrier (Builder::barrier).
// Conservative: it does not prove that the two accesses touch different elements or come from
// the same thread, so a kernel whose threads only read back their own writes keeps an
// unnecessary barrier (one per such access, not per element).
//
//   before:                                        after:
//     global_store R_part[i0, %t + i1], %part        global_store R_part[i0, %t + i1], %part
//     %r = global_load R_part[%h, %t + i0]           barrier
//                                                    %r = global_load R_part[%h, %t + i0]
//
// Every kernel that needs none is returned as it was (the same pointer); a kernel that gets one
// carries a note saying which buffers it orders.
#pragma once

#include "core/matile/ir.h"

namespace nautilus::matile {

ModulePtr order_global_accesses(const ModulePtr& module);

}  // namespace nautilus::matile
