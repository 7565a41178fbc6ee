// The decisions the auto-scheduler considers at each phase, enumerated from a program's structure
// (program_facts.h), and the default completion that turns any partial schedule into a complete
// one so that it can be compiled and estimated.
//
// Phases, in order (docs/search.md explains why this order):
//
//   reduction-fusion  inline(T) of every intermediate; rolling_update(B, AXIS, tile=T) of every
//                     block with a reduce axis (then other steps T for the best one), and
//                     split_k_update(B, AXIS, splits=S) where the outputs are few
//   fusion            compute_at(P, C, L) and reverse_compute_at(C, P, L) for every producer /
//                     consumer pair of blocks in different nests and every loop L over tiles
//   tiling            one tile(B, AXIS=SIZE, ...) of the next untiled nest (then fusion again)
//   binding           bind(B, LOOP=grid.x, ...) of the outer tile loops of every tiled nest
//   masking           skip_masked(T, L) for every tensor and serial loop over tiles around it
//   launch            launch(B, warps=W, stages=S) per kernel, W in {4, 8}, S in {1, 2, 3}
//
// Every enumerated decision is only a candidate: the search applies it (apply_decision) and a
// decision that does not apply is not a child. Nothing here looks at names of blocks, tensors or
// operators; sizes come from loop extents and the reuse facts.
//
// Tile sizes of one nest (a combination of one size per chain loop) are too many to enumerate
// as a product, so `tile_plan` gives per axis the sizes worth trying and a default; the search
// tries the default, every single-axis change of it, then the combination of the best changes.
//   spatial loop that gives reuse     keep (a grid loop) or 16 ... 256
//   innermost spatial loop, no reuse  keep or 2 ... 1024 (granularity of element-wise work)
//   reduce loop in the chain          keep (whole in the CTA) or 16 ... 128
//   any other loop                    keep (tiling it brings no reuse, only less parallelism)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/search/program_facts.h"
#include "core/sched/decision.h"

namespace nautilus::search {

enum class Phase { ReductionFusion, Fusion, Tiling, Binding, Masking, Launch, Done };
const char* phase_name(Phase phase);  // "reduction-fusion", "fusion", ...

// Whether `pattern` (a --forbid argument) matches `decision`: same kind, the same target when the
// pattern names one, and every argument the pattern gives present in `decision` with the same
// value (positional arguments by position, keyword arguments by key).
bool decision_matches(const sched::Decision& pattern, const sched::Decision& decision);
bool is_forbidden(const std::vector<sched::Decision>& forbids, const sched::Decision& decision);

// inline(T) of every intermediate; rolling_update(B, AXIS, tile=T) of every reduce axis with the
// step T closest to 64 from below, and per such decision the other steps worth trying (tried
// after the first ones, for the best of them only); split_k_update(B, AXIS, splits=2|4) when B
// has fewer than `split_k_below` outputs (too few tiles to fill the GPU otherwise) and AXIS at
// least kSplitKMinStepsPerSplit steps per split.
// split_k_update is a candidate only where every split keeps at least this many steps.
inline constexpr int64_t kSplitKMinStepsPerSplit = 256;

struct ReductionFusionCandidates {
  std::vector<sched::Decision> first;
  // (index into `first` of a rolling_update, the same decision with the other steps)
  std::vector<std::pair<size_t, std::vector<sched::Decision>>> step_variations;
};
ReductionFusionCandidates reduction_fusion_candidates(const scalar::Program& program,
                                                      const ProgramFacts& facts,
                                                      int64_t split_k_below);
// With `untiled_rows`, also reverse_compute_at at a spatial chain loop of a producer nest not
// tiled yet (the completion binds it: one CTA per row); the search asks for these only when it
// builds row kernels (a consumer chain following a rolled reduction).
std::vector<sched::Decision> fusion_candidates(const ProgramFacts& facts, bool untiled_rows = false);
std::vector<sched::Decision> masking_candidates(const ProgramFacts& facts);

// Two reductions in nests of their own whose results one untiled consumer reads, and which read
// a tensor in common (a gated MLP's gate and up projections, G = X Wg and U = X Wu, read by A =
// f(G) * U): the decisions that compute both at a tile of the consumer in one reduction loop, as
// one step of the fusion phase (each on its own leaves an untiled or duplicated reduction that
// no estimate favours):
//   tile(C, r=R, c=128), compute_at(P1, C, c_o), compute_at(P2, C, c_o), tile(P1, k=64),
//   tile(P2, k=64), compute_with(P2, P1, k_o)
// with r and c the consumer's last two loops, R 128 or 64, and k the reductions' axis (64: a
// 128-byte row of a 16-bit operand per k tile). A consumer that is itself a reduction (the down
// projection Y = sum(f) silu(G) U Wd) first has the factor of its update that reads both
// computed as an element-wise tensor C = <block>_factor (factor(BLOCK, C, AXIS), for each of its
// spatial axes), which then plays the consumer. Each list applies in order to `program`.
std::vector<std::vector<sched::Decision>> shared_operand_reduction_fusions(const scalar::ProgramPtr& program);
// tile_order(B, reverse=L) for each grid loop L over tiles that the predicate of a block inside
// a serial loop of B's nest reads (what skip_masked writes: the keys a causal query tile visits
// grow with its index), unless L is reversed already: the CTAs along L then run loops of unequal
// length, and launching the longest first leaves the shortest for the last wave. The cost model
// lists the CTAs' trips in launch order, so it ranks the two orders.
std::vector<sched::Decision> reverse_order_candidates(const ProgramFacts& facts);
// For every kernel (nest) without a launch decision in `schedule`: the five non-default launches,
// and on sm_90a (`hopper`), for a tiled nest whose reduction reads two tensors (a dot's
// operands), the warp-specialized forms: 1 or 2 consumer warpgroups with a ring of 3 or 4
// stages (the MA lowering refuses the ones whose tiles do not fit, with the reason).
std::vector<sched::Decision> launch_candidates(const ProgramFacts& facts,
                                               const sched::Schedule& schedule, bool hopper);
// One bind per nest that has no grid loop yet: its outer loops that are spatial and not inside a
// tile (the loops over tiles and the untiled loops above them), innermost to grid.x, at most
// three; the rest stay inside the CTA.
std::vector<sched::Decision> binding_decisions(const ProgramFacts& facts);
// The other raster orders of the binds above, for nests whose bound loops are all loops over
// tiles: each loop in turn to grid.x, the rest in order. Which loop runs fastest across the
// grid decides which operand tiles the CTAs of a wave share in L2 (a GEMM whose weights do not
// fit in L2 wants the CTAs of a wave on one weight tile). Pairs of (index into
// binding_decisions, the alternative bind).
std::vector<std::pair<size_t, sched::Decision>> raster_alternatives(const ProgramFacts& facts);

inline constexpr int64_t kMaxCtaSpatialElements = int64_t{1} << 20;

struct TileAxis {
  std::string axis;              // the name the tile decision uses
  std::vector<int64_t> sizes;    // 0 = keep the loop whole
  int64_t default_size = 0;
};
struct TilePlan {
  std::string block;             // the principal block of the nest
  std::vector<TileAxis> axes;    // chain order
  // The plan's point with every loop kept: the nest's outer loops bound to the grid as they are
  // (nullopt when it has none to bind).
  std::optional<sched::Decision> keep;
  std::vector<bool> spatial, reuse;  // per axis
  // Tiling this nest needs more than three loops outside the CTA (a grid has three dimensions)
  // to tile its reuse axes: it is left as lowered (one CTA per element), and neither tiled nor
  // bound. Fusion is then its way into a schedule (attention's scores S before compute_at).
  bool leave_unscheduled = false;

  std::vector<int64_t> extents;      // per axis
  // At most three loops stay outside the CTA: the kept spatial loops above the first tiled one
  // and the loops over tiles of the tiled spatial ones. And the CTA's part of the spatial axes
  // (tiles, and the kept loops below the first tiled one) holds at most
  // kMaxCtaSpatialElements: more is no tile of registers or shared memory but arrays in local
  // memory (a tile of 32 heads with 4096 queries and 4096 keys kept whole), and compiling it
  // alone takes the search minutes.
  bool valid(const std::vector<int64_t>& sizes) const;

  // tile(block, axis=size, ...) for the non-zero sizes; nullopt when every size is 0.
  std::optional<sched::Decision> decision(const std::vector<int64_t>& sizes) const;
  std::vector<int64_t> defaults() const;
};

// The tile plan of the nest to tile next: the last untiled nest with a reduction, else the first
// untiled one; nests whose principal block is in `skip` and nests with nothing to tile are
// passed over. nullopt when no nest is left.
std::optional<TilePlan> next_tile_plan(const ProgramFacts& facts,
                                       const std::vector<std::string>& skip);

// `tile(B, AXIS=T)` for each block B fused after a rolling reduction of its nest whose loop runs
// the whole rolled axis in one piece (ceil(extent / T) == the rolling loop's steps, extent > T):
// the block then steps over its row in the reduction's tiles of T (the default completion
// applies them after tiling).
std::vector<sched::Decision> row_step_tiles(const ProgramFacts& facts);

// The default completion of a program: every untiled nest tiled with its plan's defaults (the
// first single-axis change when the default is forbidden or does not apply), then every tiled
// nest bound. `pending_pins` are applied in order as early as each applies (before the first
// completion decision, and after every one). Decisions that are forbidden or do not apply are
// skipped.
struct Completion {
  std::vector<sched::Decision> decisions;  // applied, in order
  std::vector<bool> pinned;                // per decision: it is one of `pending_pins`
  size_t pins_applied = 0;                 // how many of `pending_pins`
  scalar::ProgramPtr program;              // the completed program
};
Completion complete_program(const scalar::ProgramPtr& program,
                            const std::vector<sched::Decision>& forbids,
                            const std::vector<sched::Decision>& pending_pins);
// Whether a completion has a kernel whose CTA tile has 192 rows but no warp_spec: the 192-row
// tile is the form of three consumer warpgroups (64 rows each); as an mma.sync kernel it puts
// 48 rows on each of 4 warps, which spilled (document-masked attention at d 64: 255 registers,
// 168 bytes spilled). A warp_spec already in `schedule` (the node's decisions, a pin applied
// before the completion) counts as the completion's own.
bool has_192_row_tile_without_warp_spec(const Completion& completion,
                                        const sched::Schedule& schedule);

// On sm_90a, `completion` with its dot kernels warp-specialized (the warp_spec candidates of
// launch_candidates, 4 stages, for each nest whose schedule has no launch decision yet): a node
// whose tiles pay off only on wgmma (a 128 x 256 GEMM tile) is estimated with that form before
// the launch phase is reached. Empty when no nest qualifies.
std::vector<Completion> warp_specialized_completions(const Completion& completion,
                                                     const sched::Schedule& schedule,
                                                     const std::vector<sched::Decision>& forbids);
// `completion` with a 3-stage ring for each tiled product of an 8-bit input whose nest has no
// launch, warp_spec or pipeline decision yet, once per warp count the launch phase would offer it
// (`launch(B, warps=W, stages=3)`; launch_candidates): such a product runs on mma.sync with
// cp.async rings, which no warp-specialized completion deepens, and its tiles differ in the warps
// that suit them (a 16-column decode tile takes 2, a 64-column one 2 for 4-byte grouped reads).
// Judged at the default launch (4 warps, 2 stages), a wide decode tile loses to a narrow one that
// it beats once pipelined. Empty when no nest qualifies.
std::vector<Completion> launch_lookahead_completions(const Completion& completion,
                                                     const sched::Schedule& schedule,
                                                     const std::vector<sched::Decision>& forbids);
// The default completion first, then the same with each other raster order of one nest
// (raster_alternatives): a tile size is judged with the grid order that suits it (a GEMM whose
// weights exceed L2 wants its activation tiles fastest across the grid).
std::vector<Completion> complete_program_rasters(const scalar::ProgramPtr& program,
                                                 const std::vector<sched::Decision>& forbids,
                                                 const std::vector<sched::Decision>& pending_pins);

}  // namespace nautilus::search
