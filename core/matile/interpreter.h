// CPU interpreter for MA tile IR: runs a module thread by thread through its memory spaces and
// layouts, so that a wrong layout gives wrong numbers and a missing wait or barrier an error.
//
// Model. Kernels run in order, grid points in row-major order, and inside a grid point every op
// runs for all threads of the CTA before the next op (one legal interleaving; the hazard checks
// below do not depend on it). State:
//   registers  every value is an array of threads x slots doubles (ir.h: RegisterLayout); a
//              thread's slot holds the element its layout names. Element-wise ops work slot by
//              slot; data-movement ops go through the layouts' element mapping; Mma and
//              ldmatrix are executed *as the PTX instructions*, per warp and lane, with the
//              fragment formulas of the PTX ISA written out here independently of layouts.h --
//              operands in another layout than the instruction's are read as the instruction
//              reads them, and so give wrong numbers.
//   shared     each allocation is linear storage (stages x stage_elements) addressed through
//              its swizzled layout. Every element records its state (never written, copy in
//              flight, valid), its last writer and the barrier epoch of that write, and its
//              readers since the last barrier. ldmatrix reads each lane's 8 contiguous elements
//              from the row address, as the hardware does.
//   cp.async   a copy reads global memory when issued but writes shared memory only when the
//              issuing thread's WaitGroup retires its group; until then its elements are "in
//              flight" and reading them is an error.
// Errors (reported, never a crash): reading shared memory that was never written or whose copy
// has not landed; reading another thread's write without a Barrier between, or overwriting an
// element another thread read or wrote since the last Barrier (in shared memory, and in global
// memory between the threads of one CTA); a misaligned cp.async or ldmatrix
// address; a cp.async vector whose valid elements are not a prefix; global accesses out of
// bounds or reading unwritten intermediates; register-only movement asking a thread for an
// element it does not hold; index overflow or division by zero; running past the step budget.
// Errors name the kernel, the grid point, the op and its spec statement.
//
// Hopper roles (ir.h notes, "Hopper"). Code outside a Roles op runs as above, as one thread of
// control ("the CTA"). A Roles op forks one thread of control per role; they run interleaved,
// one op per turn in role order (or, with `schedule_seed`, in a seeded random order and random
// turn lengths), each blocking at an mbarrier wait whose phase has not completed and at a bar.sync
// whose threads have not all arrived, until every role has ended (join). Each role runs its ops
// for its own threads (registers over the role's thread count). Ordering between threads of
// control is tracked with vector clocks: mbarrier arrivals and named barriers release, waits
// acquire, and each mbarrier slot's completed phases are a clock of their own that TMA data
// carries. Shared memory records, per element, who wrote it (a role, or a TMA landing on a
// phase), each role's last read, and reads of async ops still in flight (wgmma operands until
// their wgmma.wait_group, TMA store sources until their bulk wait_group). TMA data lands when
// its phase completes (arrivals and transaction bytes both done), wgmma results exist from the
// issue on but may be used only once their group retires. The checks below hold in every
// interleaving the ordering allows, so the schedule changes which error shows first, not
// whether one does (a deadlock may of course show as a race in another interleaving).
//
// Warpgroups apart. A role of several warpgroups runs as one thread of control (its warpgroups
// in lockstep) unless it has named barriers with per-warpgroup ids (ping-pong: each warpgroup
// waits on its own barrier and arrives on the other's) or `split_warpgroups` is set: then each
// warpgroup is a thread of control of its own, with its own registers (over the role's threads,
// of which it computes its own 128) and its own clock, so barriers between warpgroups are
// executed and checked: a missing arrival is a deadlock naming the barrier and the warpgroups,
// an arrival left over when the roles end an arrival-count error, and a shared-memory access of
// one warpgroup that no barrier orders after another's a race. Ops of one elected thread (TMA
// copies, bulk groups) run in warpgroup 0; a wgmma of one warpgroup computes its 64 rows.
//
// Arithmetic follows VR tile IR: float results rounded to their dtype per op; Mma and FmaDot
// as f32 fused multiply-adds over k in increasing order; Reduce in its three fixed steps
// (ir.h), so sums may differ from VR's index-order sums in the last bits.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/matile/ir.h"
#include "core/support/tensor.h"

namespace nautilus::matile {

using nautilus::TensorData;
using nautilus::TensorMap;

// What went wrong, for callers and tests that must tell failures apart.
enum class InterpretErrorKind {
  None,
  Malformed,              // the module does not verify
  UnlandedRead,           // shared data read before its copy landed (cp.async wait, TMA phase)
  UnsynchronizedRead,     // another thread's / role's write read without a barrier between
                          // (shared memory, or global memory within a CTA)
  StageOverwrite,         // a write to shared memory another thread, role or async op still
                          // reads; in global memory, another thread's read or write in the CTA
                          // since the last barrier
  TxCountMismatch,        // an mbarrier phase whose TMA bytes differ from its expect_tx bytes
  ArrivalCountMismatch,   // over-arrival, or a phase left partly arrived when the kernel ends
  AccumulatorBeforeWait,  // a wgmma result used before the wgmma.wait_group retiring it
  WgmmaFenceMissing,      // a wgmma reading registers written since the last wgmma.fence
  ProxyFenceMissing,      // TMA store / wgmma reading st.shared data without fence.proxy.async
  AsyncInFlightAtExit,    // a role ends with wgmma or bulk groups still in flight
  Deadlock,               // every thread of control waits, or a wait that nothing can complete
  CrossCtaRace,           // a CTA reads global data another CTA of the launch wrote, or
                          // overwrites it with another value (CTAs run in no fixed order)
  OperandInFlight,        // a loop iteration ends with a wgmma in flight that reads an A
                          // fragment from registers the next iteration overwrites
  Other,                  // everything else (bounds, alignment, step budget ...)
};
const char* interpret_error_kind_name(InterpretErrorKind kind);  // "unlanded_read", ...

struct InterpretOptions {
  // Upper bound on steps (one per register slot or shared element an op touches, one per
  // multiply-add); 0 means unlimited.
  uint64_t max_steps = 2'000'000'000;
  // 0: roles take turns in order, one op each; otherwise the seed of a random interleaving.
  uint64_t schedule_seed = 0;
  // The CTAs a persistent kernel (Kernel::persistent) is launched with, at most its tiles: few,
  // so that every CTA walks several tiles and the state carried between them is exercised.
  int64_t persistent_ctas = 3;
  // Run every warpgroup of a role of several as a thread of control of its own (roles with
  // per-warpgroup named barriers always do): checks that the warpgroups need no lockstep.
  bool split_warpgroups = false;
};

struct InterpretResult {
  bool ok = false;
  std::string error;
  InterpretErrorKind error_kind = InterpretErrorKind::None;
  std::string error_op;  // the failing op's printed line (printer.h), when an op failed
  TensorMap outputs;
  TensorMap intermediates;
  uint64_t steps = 0;
  // Warp-level instructions executed, by name: "mma.m16n8k16", "ldmatrix.x4",
  // "ldmatrix.x4.trans", "cp.async" (16-byte vectors), "bar.sync", "shfl.bfly", "fma" ...;
  // Hopper: "wgmma.m64nNk16" (per warpgroup and k16 step), "tma.load" / "tma.store" (boxes),
  // "stmatrix.x4", "mbarrier.arrive[.expect_tx]", "mbarrier.try_wait", "bar.arrive" ...
  std::map<std::string, uint64_t> instructions;
};

// Input values are rounded to each buffer's dtype before use.
InterpretResult interpret(const Module& module, const TensorMap& inputs,
                          const InterpretOptions& options = {});

}  // namespace nautilus::matile
