// The register check: ptxas' word on the search's pick before it is printed.
//
// The cost model estimates registers per thread from the MA tile IR's live tiles; ptxas decides.
// Where they disagree the pick can spill to local memory and run at half its estimate (an FP8
// GEMM's 128 x 128 x 128 tile on mma.sync: estimated 510.7 µs, 255 registers and 1384 bytes
// spilled under NVRTC 13.0, measured 1353.7 µs on an H200, against 689.8 µs for a tile the model
// ranked lower). The check compiles the best-ranked complete leaves with NVRTC for the arch the
// search lowered for (no GPU needed) and keeps the first whose kernels neither spill nor fail
// the Hopper gate (codegen/nvrtc.h), in the search's order:
//
//   leaf 1 (estimate 509.5 µs): fp8_gemm_C 255 registers (estimated 213), 1360 bytes spilled
//   leaf 2 (estimate 598.6 µs): fp8_gemm_C 187 registers (estimated 149), no spill  <- chosen
//
// (the estimates before the register estimate learned the widened operands' byte fragments).
// When NVRTC is not installed the check says so and keeps the pick; when every leaf checked
// spills, the pick stays and the answer says so.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/search/search.h"

namespace nautilus::search {

// What ptxas reported for one schedule's package.
struct RegisterVerdict {
  enum class Status {
    Fits,         // compiled; no kernel spills
    Spills,       // compiled; some kernel spills (spill_bytes > 0)
    Rejected,     // the Hopper gate refused it (wgmma serialized or registers spilled)
    Failed,       // it does not compile to a package (the message says why)
    NoCompiler,   // NVRTC is not installed: nothing can be checked
  };
  Status status = Status::Failed;
  int64_t spill_bytes = 0;  // stores and loads, over all kernels
  std::string kernel;       // the kernel with the most registers (or the spill)
  int registers = 0;        // its registers per thread
  int estimated_registers = 0;  // the cost model's estimate for it (0: unknown)
  std::string message;      // Rejected, Failed, NoCompiler: why
  // Fits only because the package build fell back to exp2 with its denormal guard (the SFU-only
  // exp2 spilled): it runs, but every exp2 pays a compare and two multiplies.
  bool guarded_exp2 = false;
  double seconds = 0;       // compile time
  // The model's estimate of the lowered module, when a model was given.
  std::optional<cost::CostEstimate> estimate;
};

// Lowers `schedule` for `arch` and compiles its package with NVRTC for that arch alone.
// With `model`, the verdict also carries the model's estimate of the lowered module.
RegisterVerdict check_registers(const SearchInput& input, const sched::Schedule& schedule,
                                const std::string& arch, const cost::CostModel* model = nullptr);

// One line: "C 255 registers, 1384 bytes spilled" / "rejected: ..." / "does not compile: ...".
std::string describe_verdict(const RegisterVerdict& verdict);

struct RegisterCheckOptions {
  int max_leaves = 6;  // leaves compiled at most, best estimate first
  const cost::CostModel* model = nullptr;  // estimates the chosen leaf's module when given
  std::stop_token stop;
};

struct RegisterCheck {
  // The index into the leaves of the schedule to use; nullopt keeps the search's pick (nothing
  // could be checked, or every leaf checked spills).
  std::optional<size_t> chosen;
  bool pick_fits = false;          // the first leaf fits: nothing changed
  // One line when the check did not keep the first leaf as it is (another chosen, or none fits),
  // for a status line; empty otherwise.
  std::string summary;
  std::vector<std::string> lines;  // what was compiled and found, for the user
  std::vector<RegisterVerdict> verdicts;  // per leaf checked, in order
};

// The schedules the check walks: the search's pick first (it need not be the leaf with the best
// estimate), then the other complete leaves, best estimate first.
std::vector<LeafSchedule> pick_then_leaves(const SearchResult& result);

// Checks `leaves` (pick_then_leaves()) in order until one fits. A leaf that fits only with the
// guarded exp2 gives way to a later one that fits without it when that one's estimate is within
// kGuardedExp2Cost of its own; otherwise it is chosen.
// (d 64 attention at S 16384 on the H200: the persistent pick fitted only with the guarded exp2
// and ran 4385 µs; the same search without persistent CTAs, 3893 µs.)
inline constexpr double kGuardedExp2Cost = 0.10;
RegisterCheck choose_leaf_that_fits(const SearchInput& input, const std::vector<LeafSchedule>& leaves,
                                    const std::string& arch, const RegisterCheckOptions& options = {});
// The choice alone, with `verdict_of` in place of compiling each leaf (for tests).
RegisterCheck choose_leaf_by_verdicts(const std::vector<LeafSchedule>& leaves, const std::string& arch,
                                      const RegisterCheckOptions& options,
                                      const std::function<RegisterVerdict(const sched::Schedule&)>& verdict_of);

}  // namespace nautilus::search
