// The structure of a scalar program as the auto-scheduler sees it: its top-level loop nests (each
// one kernel after tilize), the blocks in each, which loops iterate tiles, and which loops give
// data reuse when tiled. Everything the search enumerates is read off these facts, never off block,
// tensor or operator names, so a spec the search has never seen is handled like the assets.
//
//   attention after rolling_update(O_sum, n, tile=64):
//
//     nest 0  chain b, h, m, n, d     blocks S                      untiled, has a reduction
//     nest 1  chain b, h, m           blocks Mx_init ... O_sum      untiled, has a reduction;
//             loop n_o iterates tiles (n = n_o * 64 + n_i); principal block O_sum_acc
//     nest 2  chain b, h, m, d        blocks O                      untiled, elementwise
//
// The *chain* of a nest is its perfectly nested outer loops (tile and bind act on them). The
// *principal* block names the nest in tile, bind and launch decisions: the block under the chain
// with the most iteration variables (a reduction before an elementwise block, the later one on a
// tie), which for a fused nest is the block doing the most work per element.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scalar/ir.h"

namespace nautilus::search {

struct LoopFacts {
  const scalar::For* loop = nullptr;
  std::string name;
  int64_t extent = 0;
  bool grid = false;        // bound to a grid dimension
  bool spatial = false;     // iterates no reduction axis of any block under it
  bool tile_outer = false;  // a binding under it reads `loop * T` with T > 1: a loop over tiles
  bool tile_inner = false;  // a binding under it adds this loop to a loop over tiles
  // Some block under the loop reads a tensor whose indices do not depend on it: tiling the loop
  // lets one CTA reuse that data across the tile (K and V across the query rows of attention,
  // B across the rows of a GEMM).
  bool reuse = false;
  // When the only reuse comes from reads through a floor division (`K[b, h / 8, n, d]`): the
  // divisor, the one tile size that reads one element per tile (0 otherwise).
  int64_t reuse_group = 0;
  // A block under it reads at `v * T + ...` (T > 1) for an iteration variable v that follows
  // the loop: each step reads its own chunk of a tensor, as the split loop of a split-K partial
  // does (`K[b, h / 8, n + n_s * 2048, d]`). Tiling such a loop gathers separate chunks.
  bool chunks_reads = false;
};

struct BlockFacts {
  const scalar::Block* block = nullptr;
  std::vector<const scalar::For*> loops;  // enclosing loops, outermost first
  std::vector<std::string> reads;         // buffers loaded (not its own accumulator)
  std::vector<std::string> writes;        // buffers stored
  bool reduction = false;                 // has a reduce iteration variable
  bool reads_narrow_storage = false;  // loads a buffer of a narrow storage type (fp8, int8, int4)
};

struct NestFacts {
  size_t position = 0;              // index among the top-level statements
  std::vector<LoopFacts> chain;     // the perfectly nested outer loops
  std::vector<BlockFacts> blocks;   // program order
  std::vector<LoopFacts> loops;     // every loop of the nest, outermost first (pre-order)
  bool has_reduction = false;
  bool tiled = false;  // a chain loop iterates tiles (tile or split was applied)
  bool bound = false;  // a chain loop is bound to the grid
  int principal = -1;  // index into `blocks`

  const BlockFacts& principal_block() const { return blocks.at(static_cast<size_t>(principal)); }
  const LoopFacts* find_loop(const std::string& name) const;
  // The block named `name`, or nullptr.
  const BlockFacts* find_block(const std::string& name) const;
};

struct ProgramFacts {
  std::vector<NestFacts> nests;

  // The nest holding block `name`, or nullptr.
  const NestFacts* nest_of_block(const std::string& name) const;
};

ProgramFacts analyze_program(const scalar::Program& program);

// The top-level statements of a program body (a sequence's elements, or the body itself).
std::vector<scalar::Stmt> top_level_statements(const scalar::Program& program);

// The name by which `block`'s decisions refer to `loop`: the iteration variable bound to exactly
// that loop, or else the loop's own name.
std::string axis_name(const scalar::Block& block, const scalar::For& loop);

}  // namespace nautilus::search
