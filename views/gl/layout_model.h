// The data behind the layout panel (layout_panel.h): thread/value grids of register tiles and
// bank grids of shared-memory tiles, computed from MA tile IR alone. Nothing here knows Qt or
// ImGui, so tests check the pictures' contents without a display.
//
// Register tiles (LayoutGrid). A value's RegisterLayout says which thread holds which element:
// thread t's slot v holds the element of column-major index tv.index(t, v) (core/matile/ir.h).
// layout_grid() inverts that map into one cell per element listing every (thread, slot) holding
// it -- CuTe's print_latex picture, where each cell reads `T{thread} V{slot}`. An mma C fragment
// over a 16x8 atom, one warp:
//
//          col 0    col 1    col 2    col 3   ...
//   row 0  T0 V0    T0 V1    T1 V0    T1 V1
//   row 1  T4 V0    T4 V1    T5 V0    T5 V1
//   ...
//   row 8  T0 V2    T0 V3    T1 V2    T1 V3
//
// Replicated elements (an mma B fragment is held by every warp along M; a row statistic by the
// four lanes of a quad) list several holders. A rank-1 tile is drawn as one column (rows =
// extent): the lowering's rank-1 tiles are per-row statistics of a rank-2 tile.
//
// Shared tiles (BankGrid). A SharedAlloc maps a logical coordinate through its swizzled layout to
// an element offset; element e of stage s lies at byte byte_offset + (s * stage_elements + e) *
// bytes, in 4-byte word byte/4 and bank word % 32. An access pattern (SharedAccessPattern) lists
// the warp instructions of one op on the allocation -- which logical element each lane's access
// starts at -- and bank_grid() has core's layout::bank_phases split every instruction into the
// phases the hardware serves and count their wavefronts (core/layout/bank_conflicts.h, the same
// count the cost model and layout synthesis use: 32 lanes for accesses of <= 4 bytes, 16 for 8 bytes, 8 for 16 bytes,
// i.e. one 8x8 matrix of an ldmatrix.x4 per phase). A phase takes as many wavefronts as the
// largest number of distinct words one bank must deliver; the cells of such a bank are the
// conflicts the panel outlines. For a 64x64 bf16 tile read by ldmatrix, row-major rows of 128
// bytes put the eight rows of a phase in the same four banks (8 wavefronts per phase); the
// lowering's Sw<3,3,3> moves each row's 16-byte chunk to a different bank group (1 wavefront).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/layout/result.h"
#include "core/matile/ir.h"

namespace nautilus::views::gl {

using layout::Result;

// ---- Register tiles ------------------------------------------------------------------------

struct TVHolder {
  int64_t thread = 0;
  int64_t slot = 0;
  bool operator==(const TVHolder&) const = default;
};

struct LayoutGrid {
  int64_t rows = 0, cols = 0;
  int64_t threads = 0, slots = 0;
  // holders[r * cols + c]: every (thread, slot) holding element (r, c), in increasing thread,
  // then slot order; empty when no thread holds the element.
  std::vector<std::vector<TVHolder>> holders;

  const std::vector<TVHolder>& at(int64_t row, int64_t col) const {
    return holders[static_cast<size_t>(row * cols + col)];
  }
  // The most holders any element has (1 for a layout without replication).
  int64_t max_replication() const;
};

// The grid of a register tile of `shape` (the value's TileType shape: rank 0, 1 or 2). Fails
// when the layout's tile does not have shape's element count, when an index leaves the tile, or
// for rank > 2.
Result<LayoutGrid> layout_grid(const matile::RegisterLayout& layout,
                               const std::vector<int64_t>& shape);

// ---- Shared tiles --------------------------------------------------------------------------

// One warp instruction of an access pattern: lane_starts[lane] is the logical coordinate in the
// allocation (row, col) of the first element the lane accesses; its access covers
// access_bytes / element bytes elements that are consecutive in memory. At most 32 lanes.
struct SharedInstruction {
  int warp = 0;
  std::vector<std::vector<int64_t>> lane_starts;
};

// Every warp instruction one op issues on one shared allocation.
struct SharedAccessPattern {
  std::string label;       // "ldmatrix.x4.trans V_smem[%stage][16, 0] -> %V_k1"
  std::string instruction;  // "ldmatrix.x4", "ldmatrix.x4.trans", "cp.async", "ld.shared", ...
  bool writes = false;     // cp.async and st.shared write; the others read
  int access_bytes = 0;    // per lane and instruction
  std::vector<SharedInstruction> instructions;
};

// The access patterns of every op of `kernel` (loop bodies included, program order) that touches
// allocation `alloc`: cp.async (its copy layout, one instruction per 16-byte vector of each
// thread), ldmatrix.x4 [.trans] (each warp's issues over its mma fragment, as the interpreter
// executes them), ld.shared / st.shared (one instruction per register slot). FmaDot operands and
// reduce / convert_layout scratch buffers have no pattern (their addressing is the emitter's).
std::vector<SharedAccessPattern> shared_access_patterns(const matile::Kernel& kernel, int alloc);
// The pattern of one op (as above); no instructions when the op has none.
SharedAccessPattern shared_access_pattern(const matile::Kernel& kernel, const matile::Op& op);

struct BankCell {
  int bank = 0;
  int64_t word = 0;  // 4-byte word of dynamic shared memory
};

struct PhaseLane {
  int lane = 0;
  int64_t byte_address = 0;
  std::vector<int64_t> cells;  // row-major cell indices (r * cols + c) the access covers
};

// One phase of one instruction.
struct BankPhase {
  int instruction = 0;  // index into the pattern's instructions
  int warp = 0;
  int phase = 0;        // 0-based within the instruction
  int wavefronts = 0;   // 1 when conflict-free
  std::vector<PhaseLane> lanes;
  std::vector<int> conflicting_banks;   // banks that must deliver more than one word
  std::vector<int64_t> conflict_cells;  // the touched cells in those banks (row-major, sorted)
};

struct BankGrid {
  int64_t rows = 0, cols = 0;
  int element_bytes = 0;
  int stage = 0;
  std::vector<BankCell> cells;  // row-major
  std::vector<BankPhase> phases;
  int64_t wavefronts = 0;        // over every phase
  int64_t ideal_wavefronts = 0;  // one per phase
  int64_t conflicts() const { return wavefronts - ideal_wavefronts; }
  // Phases that take more than one wavefront.
  int64_t conflicting_phases() const;
};

// The banks of every element of stage `stage` of `alloc` (rank 1 or 2; a rank-1 allocation is
// one row), and the phases of `pattern` on it. Fails on a coordinate outside the allocation, an
// access that is not contiguous in memory or not aligned, and an unsupported access width.
Result<BankGrid> bank_grid(const matile::SharedAlloc& alloc, const SharedAccessPattern& pattern,
                           int stage = 0);

// ---- What the panel offers -----------------------------------------------------------------

// A tile of a kernel the layout panel can draw: a shared allocation or a register value.
struct TileChoice {
  int alloc = -1;       // index into Kernel::shared, or -1
  matile::Value value;  // the register value, or null
  // "Q_smem  bf16[128, 64]  Sw<3,3,3> o (128,64):(64,1)", "%27  f32[128, 64]  mma_c warps(4,1)",
  // "%27  f32[128, 128]  mma_c warps(8,1)  S, wgmma accumulator, role consumers"
  std::string label;
  // Register values inside a warp role (Roles, sm_90a): the role, and the CTA thread of its
  // thread 0 (a role's layouts number its own threads from 0; ir.h).
  std::string role;
  int role_warpgroups = 0;
  int64_t first_thread = 0;
  std::string statement;  // the spec statement of the op defining it ("S", "P", "O"), when known
  // What the value is to a wgmma: "wgmma accumulator" (its result or its accumulator input),
  // "wgmma A operand from registers (RS)"; empty for anything else.
  std::string use;
};

// The kernel's shared allocations in order, then every register value of rank <= 2 in program
// order (For block arguments before the body, role bodies in role order; each value once).
// `statement_names[i]` names spec statement i (Provenance::statement); with them a value's
// label says which statement its op implements.
std::vector<TileChoice> tile_choices(const matile::Kernel& kernel,
                                     const std::vector<std::string>& statement_names = {});

// ---- Colours -------------------------------------------------------------------------------

// Colours as 0xAABBGGRR (ImGui's IM_COL32 order). Light, well separated pastels so that black
// labels stay readable: the hue steps by the golden ratio so neighbouring indices differ most.
uint32_t index_colour(int64_t index);
// Thread colouring: by thread, or by the warp / lane / warpgroup (128 threads) of the thread.
enum class ColourBy { Thread, Warp, Lane, Warpgroup };
uint32_t thread_colour(int64_t thread, ColourBy by);
// The 32 banks around the colour wheel (bank b and b+1 neighbours in hue).
uint32_t bank_colour(int bank);

}  // namespace nautilus::views::gl
