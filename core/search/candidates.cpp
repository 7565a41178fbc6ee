#include "core/search/candidates.h"

#include <algorithm>
#include <set>

#include "core/search/row_on_chip.h"
#include "core/sched/launch.h"
#include "core/sched/loop_nest.h"

namespace nautilus::search {
namespace {

using sched::Decision;
using sched::DecisionArg;

DecisionArg positional(std::string name) { return DecisionArg{"", std::move(name)}; }
DecisionArg keyword(std::string key, int64_t value) { return DecisionArg{std::move(key), value}; }
DecisionArg keyword(std::string key, std::string value) {
  return DecisionArg{std::move(key), std::move(value)};
}

Decision make(std::string kind, std::string target, std::vector<DecisionArg> args) {
  return Decision{std::move(kind), std::move(target), std::move(args)};
}

int64_t pow2_ceil(int64_t value) {
  int64_t p = 1;
  while (p < value) p *= 2;
  return p;
}

// Powers of two in [lo, hi] that split `extent` (smaller than it) or cover it in one tile (the
// power of two just above it).
std::vector<int64_t> tile_sizes(int64_t extent, int64_t lo, int64_t hi) {
  std::vector<int64_t> sizes;
  for (int64_t t = lo; t <= hi; t *= 2) {
    if (t < extent || t == pow2_ceil(extent)) sizes.push_back(t);
  }
  return sizes;
}

// The rolling_update step sizes worth trying for a reduction of `extent`. Up to 2048: a row
// step of 2048 gives each of 128 threads two 16-byte runs of a bf16 row per step, twice the bytes
// in flight between the barriers of each step's cross-warp reduces (logsumexp over 50257
// columns, 2 rows per CTA: 297.6 µs against 336.0 with 1024-column steps, H100 2026-11-26).
std::vector<int64_t> reduction_steps(int64_t extent) {
  std::vector<int64_t> steps = tile_sizes(extent, 16, 2048);
  if (steps.empty()) steps.push_back(pow2_ceil(extent));
  return steps;
}

const LoopFacts* loop_facts(const NestFacts& nest, const scalar::For* loop) {
  for (const LoopFacts& facts : nest.loops) {
    if (facts.loop == loop) return &facts;
  }
  return nullptr;
}

// The innermost loop of `block`'s nest over tiles of a spatial axis (or, with `reduce`, of a
// reduce axis: a k-tile loop), never a grid loop; nullptr when there is none.
const LoopFacts* innermost_tiles_loop(const NestFacts& nest, const BlockFacts& block, bool reduce) {
  const LoopFacts* found = nullptr;
  for (const scalar::For* loop : block.loops) {
    const LoopFacts* l = loop_facts(nest, loop);
    if (l && l->tile_outer && l->spatial != reduce && !l->grid) found = l;
  }
  return found;
}

// Whether `tensor` is written as select(condition, value, constant): a mask that skip_masked can
// later turn into skipped iterations, which inlining it would hide.
bool is_masked(const scalar::Program& program, const ProgramFacts& facts, const std::string& tensor) {
  (void)program;
  for (const NestFacts& nest : facts.nests) {
    for (const BlockFacts& block : nest.blocks) {
      if (block.writes.size() != 1 || block.writes.front() != tensor) continue;
      const scalar::Stmt* body = &block.block->body;
      if (const auto* seq = (*body)->as<scalar::Seq>(); seq && seq->stmts.size() == 1) {
        body = &seq->stmts.front();
      }
      const auto* store = (*body)->as<scalar::Store>();
      if (!store) continue;
      const auto is_constant = [](const scalar::Expr& e) {
        if (const auto* neg = e->as<scalar::Unary>(); neg && neg->op == scalar::UnaryOp::Neg) {
          return neg->a->as<scalar::FloatImm>() != nullptr;
        }
        return e->as<scalar::FloatImm>() != nullptr;
      };
      const auto* select = store->value->as<scalar::Select>();
      if (select && (is_constant(select->if_false) || is_constant(select->if_true))) return true;
    }
  }
  return false;
}

void add_unique(std::vector<Decision>& out, std::set<std::string>& seen, Decision decision) {
  if (seen.insert(sched::print_decision(decision)).second) out.push_back(std::move(decision));
}

// The nest's outer loops that are spatial and not inside a tile, at most three, outermost first.
std::vector<const LoopFacts*> bindable_outer_loops(const NestFacts& nest) {
  std::vector<const LoopFacts*> outer;
  if (nest.bound || nest.principal < 0) return outer;
  for (const LoopFacts& loop : nest.chain) {
    if (!loop.spatial || loop.tile_inner || loop.grid) break;
    outer.push_back(&loop);
  }
  if (outer.size() > 3) outer.resize(3);
  return outer;
}

// bind of `loops` (outermost first): the last to grid.x, the one before to grid.y, ...
Decision bind_in_order(const NestFacts& nest, const std::vector<const LoopFacts*>& loops) {
  static const char* const kDims[] = {"grid.x", "grid.y", "grid.z"};
  std::vector<DecisionArg> args;
  for (size_t i = 0; i < loops.size(); ++i) {
    args.push_back(keyword(loops[i]->name, kDims[loops.size() - 1 - i]));
  }
  return make("bind", nest.principal_block().block->name, std::move(args));
}

// bind of the nest's outer loops that are spatial and not inside a tile, at most three.
std::optional<Decision> bind_outer_loops(const NestFacts& nest) {
  const std::vector<const LoopFacts*> outer = bindable_outer_loops(nest);
  if (outer.empty()) return std::nullopt;
  return bind_in_order(nest, outer);
}

std::optional<TilePlan> tile_plan(const NestFacts& nest) {
  if (nest.tiled || nest.bound || nest.principal < 0) return std::nullopt;
  const BlockFacts& principal = nest.principal_block();
  // Elements of one CTA step along the principal block's loops below the chain that stay
  // vector loops (not loops over tiles of a reduction, which run serially).
  int64_t inner_volume = 1;
  for (const scalar::For* loop : principal.loops) {
    const bool in_chain = std::any_of(nest.chain.begin(), nest.chain.end(),
                                      [&](const LoopFacts& l) { return l.loop == loop; });
    const LoopFacts* facts = loop_facts(nest, loop);
    if (in_chain || !facts || (facts->tile_outer && !facts->spatial)) continue;
    inner_volume *= loop->extent;
  }
  // The innermost spatial loop sets the granularity of the work; in an element-wise nest the
  // one above it too (rows x columns per CTA).
  const LoopFacts* innermost_spatial = nullptr;
  const LoopFacts* second_spatial = nullptr;
  for (const LoopFacts& loop : nest.chain) {
    if (loop.spatial && !loop.grid && loop.extent > 1) {
      second_spatial = innermost_spatial;
      innermost_spatial = &loop;
    }
  }
  if (nest.has_reduction) second_spatial = nullptr;
  // A loop with a reuse group (the query heads of a GQA group) is tiled by that group by default
  // only when no other spatial loop reuses data outright: decode (one query row per head) then
  // gets the heads of a group as the rows of its tiles. Elsewhere (prefill's query rows and keys
  // already make the two axes of its tensor-core tiles) the group tile is only a variation the
  // search tries.
  const bool full_reuse_elsewhere =
      std::any_of(nest.chain.begin(), nest.chain.end(), [](const LoopFacts& loop) {
        return loop.spatial && loop.reuse && loop.reuse_group == 0 && !loop.grid &&
               !loop.chunks_reads && loop.extent > 1;
      });
  TilePlan plan;
  plan.block = principal.block->name;
  bool any = false;
  for (const LoopFacts& loop : nest.chain) {
    TileAxis axis;
    axis.axis = axis_name(*principal.block, *loop.loop);
    axis.sizes = {0};
    std::vector<int64_t> sizes;
    if (loop.grid || loop.tile_outer || loop.tile_inner) {
      // keep only
    } else if (loop.spatial && loop.reuse && loop.extent <= 8 && pow2_ceil(loop.extent) == loop.extent) {
      // 1, 2, 4 or 8 rows (a decode step's activations): one tile of all of them keeps the
      // product a matrix product, which runs on tensor cores with the atom's rows repeated
      // (docs/matile.md rule 1); untiled, the nest is a matrix-vector product on CUDA cores.
      sizes = {loop.extent};
    } else if (loop.extent <= 1) {
      // keep only
    } else if (loop.spatial && loop.reuse_group > 1) {
      // A tile of one group reads each shared element once (larger ones would gather several).
      if (loop.extent % loop.reuse_group == 0 && loop.extent > loop.reuse_group) {
        sizes = {loop.reuse_group};
        if (!full_reuse_elsewhere) axis.default_size = loop.reuse_group;
      }
    } else if (loop.spatial && loop.reuse) {
      sizes = tile_sizes(loop.extent, 16, 256);
      // 192 rows: three consumer warpgroups of 64 on Hopper, FlashAttention-3's d 64 tile, for
      // a nest that reduces in several blocks (a softmax between two MMAs, which the third
      // warpgroup hides): d 64 attention 6-10% faster than 128 rows at S 2048-16384. Not for a
      // plain GEMM, where CUTLASS keeps two consumers: 192 x 192 took 1520 µs at 8192³ against
      // 1417 for 128 x 256 (H100, 2026-11-27), though the cost model ranked it first.
      const int reductions = static_cast<int>(std::count_if(
          nest.blocks.begin(), nest.blocks.end(), [](const BlockFacts& b) { return b.reduction; }));
      if (loop.extent > 192 && reductions >= 2) {
        sizes.insert(std::upper_bound(sizes.begin(), sizes.end(), 192), 192);
      }
      for (int64_t t : sizes) {
        if (t <= 64) axis.default_size = t;
      }
    } else if (loop.spatial && &loop == innermost_spatial) {
      sizes = tile_sizes(loop.extent, 2, 1024);
      if (inner_volume < 256) {
        for (int64_t t : sizes) {
          if (t <= 256) axis.default_size = t;
        }
      }
    } else if (loop.spatial && &loop == second_spatial) {
      sizes = tile_sizes(loop.extent, 2, 64);
    } else if (!loop.spatial) {
      sizes = tile_sizes(loop.extent, 16, 128);
      if (loop.extent > 64 && std::find(sizes.begin(), sizes.end(), 32) != sizes.end()) {
        axis.default_size = 32;
      }
    }
    axis.sizes.insert(axis.sizes.end(), sizes.begin(), sizes.end());
    any |= !sizes.empty();
    plan.axes.push_back(std::move(axis));
  }
  if (!any) return std::nullopt;
  plan.keep = bind_outer_loops(nest);
  for (size_t i = 0; i < nest.chain.size(); ++i) {
    plan.spatial.push_back(nest.chain[i].spatial);
    plan.extents.push_back(nest.chain[i].extent);
    plan.reuse.push_back(nest.chain[i].reuse);
  }
  // The defaults must leave at most three loops outside the CTA: give up tiling an axis that
  // only sets the granularity, but not one that gives reuse (the nest is then left as lowered).
  std::vector<int64_t> sizes = plan.defaults();
  while (!plan.valid(sizes)) {
    bool dropped = false;
    for (size_t i = sizes.size(); i-- > 0;) {
      if (sizes[i] > 0 && plan.spatial[i] && !plan.reuse[i]) {
        sizes[i] = 0;
        plan.axes[i].default_size = 0;
        dropped = true;
        break;
      }
    }
    if (!dropped) {
      plan.leave_unscheduled = true;
      break;
    }
  }
  return plan;
}

// The bind of a nest not bound yet; none for a nest left as lowered (see tile_plan).
std::optional<Decision> binding_decision(const NestFacts& nest) {
  if (!nest.tiled) {
    std::optional<TilePlan> plan = tile_plan(nest);
    if (plan && plan->leave_unscheduled) return std::nullopt;
  }
  return bind_outer_loops(nest);
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::ReductionFusion: return "reduction-fusion";
    case Phase::Fusion: return "fusion";
    case Phase::Tiling: return "tiling";
    case Phase::Binding: return "binding";
    case Phase::Masking: return "masking";
    case Phase::Launch: return "launch";
    case Phase::Done: return "done";
  }
  return "?";
}

bool decision_matches(const Decision& pattern, const Decision& decision) {
  if (pattern.kind != decision.kind) return false;
  if (!pattern.target.empty() && pattern.target != decision.target) return false;
  const std::vector<const DecisionArg*> given = pattern.positional();
  const std::vector<const DecisionArg*> actual = decision.positional();
  for (size_t i = 0; i < given.size(); ++i) {
    if (i >= actual.size() || !(*given[i] == *actual[i])) return false;
  }
  for (const DecisionArg& arg : pattern.args) {
    if (arg.key.empty()) continue;
    const DecisionArg* other = decision.find(arg.key);
    if (!other || !(other->value == arg.value)) return false;
  }
  return true;
}

bool is_forbidden(const std::vector<Decision>& forbids, const Decision& decision) {
  return std::any_of(forbids.begin(), forbids.end(),
                     [&](const Decision& f) { return decision_matches(f, decision); });
}

ReductionFusionCandidates reduction_fusion_candidates(const scalar::Program& program,
                                                      const ProgramFacts& facts,
                                                      int64_t split_k_below) {
  ReductionFusionCandidates out;
  std::set<std::string> seen;
  for (const scalar::Buffer& buffer : program.allocations) {
    if (is_masked(program, facts, buffer->name)) continue;
    add_unique(out.first, seen, make("inline", buffer->name, {}));
  }
  for (const NestFacts& nest : facts.nests) {
    for (const BlockFacts& block : nest.blocks) {
      int64_t outputs = 1;
      for (const scalar::IterVar& iv : block.block->iter_vars) {
        if (iv.kind == scalar::IterKind::Spatial) outputs *= iv.extent;
      }
      for (const scalar::IterVar& iv : block.block->iter_vars) {
        if (iv.kind != scalar::IterKind::Reduce) continue;
        const std::vector<int64_t> steps = reduction_steps(iv.extent);
        int64_t step = steps.front();
        for (int64_t s : steps) {
          if (s <= 64) step = s;
        }
        const auto rolling = [&](int64_t t) {
          return make("rolling_update", block.block->name,
                      {positional(iv.var->name), keyword("tile", t)});
        };
        if (!seen.insert(sched::print_decision(rolling(step))).second) continue;
        std::vector<Decision> others;
        for (int64_t s : steps) {
          if (s != step) others.push_back(rolling(s));
        }
        out.step_variations.emplace_back(out.first.size(), std::move(others));
        out.first.push_back(rolling(step));
        // Splitting a reduction pays only when its outputs give too few tiles to fill the GPU,
        // and when each split still runs a long loop: the combine rereads splits × outputs
        // partial results, which a 64-wide head-dimension sum (an attention score) never repays.
        if (outputs < split_k_below) {
          for (int64_t splits : {2, 4}) {
            if (iv.extent < kSplitKMinStepsPerSplit * splits) continue;
            add_unique(out.first, seen,
                       make("split_k_update", block.block->name,
                            {positional(iv.var->name), keyword("splits", splits)}));
          }
        }
      }
    }
  }
  return out;
}

std::vector<Decision> fusion_candidates(const ProgramFacts& facts, bool untiled_rows) {
  std::vector<Decision> out;
  std::set<std::string> seen;
  // Two independent reductions of one nest, each with a loop over tiles of its reduce axis (two
  // GEMMs computed at one tile of their consumer, tiled alike): one loop for both, so that an
  // operand they share is read once per k tile and one kernel holds both accumulators.
  // (compute_with refuses dependent pairs itself.)
  for (const NestFacts& nest : facts.nests) {
    for (size_t i = 0; i < nest.blocks.size(); ++i) {
      const BlockFacts& other = nest.blocks[i];
      const LoopFacts* k_tiles = other.reduction ? innermost_tiles_loop(nest, other, true) : nullptr;
      if (!k_tiles) continue;
      for (size_t j = i + 1; j < nest.blocks.size(); ++j) {
        const BlockFacts& block = nest.blocks[j];
        if (!block.reduction) continue;
        add_unique(out, seen,
                   make("compute_with", block.block->name, {positional(other.block->name), positional(k_tiles->name)}));
      }
    }
  }
  for (const NestFacts& from : facts.nests) {
    for (const NestFacts& to : facts.nests) {
      if (&from == &to) continue;
      for (const BlockFacts& producer : from.blocks) {
        for (const std::string& tensor : producer.writes) {
          for (const BlockFacts& consumer : to.blocks) {
            if (std::find(consumer.reads.begin(), consumer.reads.end(), tensor) ==
                consumer.reads.end()) {
              continue;
            }
            if (from.position < to.position) {
              // The producer moves into a loop over tiles of the consumer's nest ...
              for (const scalar::For* loop : consumer.loops) {
                const LoopFacts* l = loop_facts(to, loop);
                if (!l || !l->tile_outer) continue;
                add_unique(out, seen,
                           make("compute_at", producer.block->name,
                                {positional(consumer.block->name), positional(l->name)}));
              }
              // ... or the consumer into a spatial loop over tiles of the producer's, or into
              // a spatial loop bound to the grid untiled (one CTA per row: a combine over 8
              // experts per token), whose CTA then also writes the consumer's row instead of
              // leaving an f32 row for another kernel to read back.
              // A spatial loop of the chain of a producer nest not tiled yet counts as such a
              // grid loop: the completion binds it (a row's statistics, then its output, in one
              // CTA per row).
              for (const scalar::For* loop : producer.loops) {
                const LoopFacts* l = loop_facts(from, loop);
                // Only the row loop itself: the innermost chain loop of a reduction's nest (its
                // row of statistics), the one above the innermost of an element-wise nest (the
                // row a reduction takes whole). At an outer loop the CTA would hold every row
                // below it as one tile (an attention head's 16384 x 16384 scores).
                const bool untiled = !from.tiled && !from.bound && !from.chain.empty();
                const size_t chain_size = from.chain.size();
                // A reduction over the rows of an element-wise nest (a residual sum, then its
                // norm) moves into the loop over its rows: the row it reduces stays in
                // registers.
                const bool row_of_elementwise =
                    untiled_rows && untiled && !from.has_reduction && consumer.reduction &&
                    chain_size >= 2 && loop == from.chain[chain_size - 2].loop;
                const bool untiled_chain =
                    (untiled_rows && untiled && from.has_reduction &&
                     loop == from.chain.back().loop) ||
                    row_of_elementwise;
                if (!l || !(l->tile_outer || l->grid || untiled_chain) || !l->spatial) continue;
                add_unique(out, seen,
                           make("reverse_compute_at", consumer.block->name,
                                {positional(producer.block->name), positional(l->name)}));
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<std::vector<Decision>> shared_operand_reduction_fusions(const scalar::ProgramPtr& program) {
  constexpr int64_t kReduceTile = 64;
  // The consumer's tiles: 128 x 128 (two consumer warpgroups, each with two 64 x 128 f32
  // accumulators: 128 registers), or 64 x 128 where there are few rows.
  constexpr std::pair<int64_t, int64_t> kProductTiles[] = {{128, 128}, {64, 128}};
  std::vector<std::vector<Decision>> out;
  // Applies `decision` to `*state` and records it; false when it does not apply.
  const auto step = [](scalar::ProgramPtr* state, std::vector<Decision>* macro, Decision decision) {
    sched::ApplyResult applied = sched::apply_decision(*state, decision);
    if (!applied.ok()) return false;
    *state = applied.program;
    macro->push_back(std::move(decision));
    return true;
  };
  // The name of block `name`'s innermost_tiles_loop in `state`; "" when there is none.
  const auto tiles_loop = [](const scalar::ProgramPtr& state, const std::string& name, bool reduce) {
    const ProgramFacts now = analyze_program(*state);
    const NestFacts* nest = now.nest_of_block(name);
    const BlockFacts* block = nest ? nest->find_block(name) : nullptr;
    const LoopFacts* loop = block ? innermost_tiles_loop(*nest, *block, reduce) : nullptr;
    return loop ? loop->name : std::string();
  };
  // The pairs of lone reductions (the only block of their own unbound nest) whose results
  // `consumer` reads and which read a tensor in common.
  const auto producer_pairs = [](const ProgramFacts& facts, const BlockFacts& consumer) {
    const auto lone_writer = [&](const std::string& tensor) -> const BlockFacts* {
      for (const NestFacts& nest : facts.nests) {
        if (nest.blocks.size() != 1 || !nest.blocks.front().reduction || nest.bound) continue;
        const BlockFacts& block = nest.blocks.front();
        if (std::find(block.writes.begin(), block.writes.end(), tensor) != block.writes.end()) return &block;
      }
      return static_cast<const BlockFacts*>(nullptr);
    };
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < consumer.reads.size(); ++i) {
      const BlockFacts* first = lone_writer(consumer.reads[i]);
      if (!first) continue;
      for (size_t j = i + 1; j < consumer.reads.size(); ++j) {
        const BlockFacts* second = lone_writer(consumer.reads[j]);
        if (!second || second == first) continue;
        const bool shared = std::any_of(first->reads.begin(), first->reads.end(), [&](const std::string& t) {
          return std::find(second->reads.begin(), second->reads.end(), t) != second->reads.end();
        });
        if (shared) pairs.emplace_back(first->block->name, second->block->name);
      }
    }
    return pairs;
  };
  // From `state` (after `prefix`), the element-wise consumer `c` of the untiled nest tiled as
  // a product, both producers computed at its tile, tiled alike along their reduce axis and
  // merged into one loop.
  const auto fuse_at = [&](const scalar::ProgramPtr& start, const std::vector<Decision>& prefix,
                           const std::string& c, const std::string& p1, const std::string& p2) {
    const ProgramFacts facts = analyze_program(*start);
    const NestFacts* nest = facts.nest_of_block(c);
    if (!nest || nest->tiled || nest->bound || nest->chain.size() < 2) return;
    const LoopFacts& rows = nest->chain[nest->chain.size() - 2];
    const LoopFacts& columns = nest->chain.back();
    if (!rows.spatial || !columns.spatial) return;
    const BlockFacts* consumer_facts = nest->find_block(c);
    if (!consumer_facts) return;
    const scalar::Block* consumer = consumer_facts->block;
    for (const auto& [tile_rows, tile_columns] : kProductTiles) {
      if (rows.extent < tile_rows || columns.extent < tile_columns) continue;
      scalar::ProgramPtr state = start;
      std::vector<Decision> macro = prefix;
      bool ok = step(&state, &macro,
                     make("tile", c, {keyword(axis_name(*consumer, *rows.loop), tile_rows),
                                      keyword(axis_name(*consumer, *columns.loop), tile_columns)}));
      const std::string at = ok ? tiles_loop(state, c, false) : std::string();
      ok = ok && !at.empty() && step(&state, &macro, make("compute_at", p1, {positional(c), positional(at)})) &&
           step(&state, &macro, make("compute_at", p2, {positional(c), positional(at)}));
      for (const std::string& producer : {p1, p2}) {
        if (!ok) break;
        const std::optional<sched::BlockPath> path = sched::find_block(state->body, producer);
        const scalar::For* innermost = path->loops().back();
        ok = step(&state, &macro, make("tile", producer, {keyword(axis_name(path->block(), *innermost), kReduceTile)}));
      }
      const std::string k_tiles = ok ? tiles_loop(state, p1, true) : std::string();
      if (k_tiles.empty() ||
          !step(&state, &macro, make("compute_with", p2, {positional(p1), positional(k_tiles)}))) {
        continue;
      }
      out.push_back(std::move(macro));
    }
  };
  const ProgramFacts facts = analyze_program(*program);
  for (const NestFacts& nest : facts.nests) {
    if (nest.tiled || nest.bound || nest.principal < 0) continue;
    const BlockFacts& consumer = nest.principal_block();
    for (const auto& [p1, p2] : producer_pairs(facts, consumer)) {
      if (!consumer.reduction) {
        fuse_at(program, {}, consumer.block->name, p1, p2);
        continue;
      }
      // A reduction reading both (a gated MLP's down projection): the factor of its update that
      // holds them, computed first as an element-wise tensor of its own (factor).
      std::set<std::string> taken;
      for (const scalar::Buffer& buffer : program->allocations) taken.insert(buffer->name);
      for (const scalar::Buffer& buffer : program->params) taken.insert(buffer->name);
      const std::string tensor = sched::fresh_name(consumer.block->name + "_factor", &taken);
      for (const scalar::IterVar& iter : consumer.block->iter_vars) {
        if (iter.kind != scalar::IterKind::Spatial) continue;
        scalar::ProgramPtr state = program;
        std::vector<Decision> prefix;
        if (!step(&state, &prefix, make("factor", consumer.block->name, {positional(tensor), positional(iter.var->name)}))) {
          continue;
        }
        fuse_at(state, prefix, tensor, p1, p2);
      }
    }
  }
  return out;
}

std::vector<Decision> masking_candidates(const ProgramFacts& facts) {
  std::vector<Decision> out;
  std::set<std::string> seen;
  for (const NestFacts& nest : facts.nests) {
    for (const BlockFacts& block : nest.blocks) {
      for (const std::string& tensor : block.writes) {
        for (const scalar::For* loop : block.loops) {
          const LoopFacts* l = loop_facts(nest, loop);
          if (!l || l->grid || !l->tile_outer) continue;
          add_unique(out, seen, make("skip_masked", tensor, {positional(l->name)}));
        }
      }
    }
  }
  return out;
}

std::vector<Decision> reverse_order_candidates(const ProgramFacts& facts) {
  std::vector<Decision> out;
  for (const NestFacts& nest : facts.nests) {
    if (nest.principal < 0 || nest.chain.empty()) continue;
    const std::optional<scalar::LaunchAttrs>& launch = nest.chain.front().loop->launch;
    for (const LoopFacts& loop : nest.chain) {
      if (!loop.grid || !loop.tile_outer || loop.extent < 2) continue;
      if (launch && std::find(launch->reversed.begin(), launch->reversed.end(), loop.name) !=
                        launch->reversed.end()) {
        continue;
      }
      const bool bounds_a_serial_loop =
          std::any_of(nest.blocks.begin(), nest.blocks.end(), [&](const BlockFacts& block) {
            if (!block.block->predicate || !sched::uses_var(block.block->predicate, loop.loop->var.get())) {
              return false;
            }
            // ... and relates it to a serial loop around the block, whose trips then vary.
            return std::any_of(block.loops.begin(), block.loops.end(), [&](const scalar::For* l) {
              return l->for_kind == scalar::ForKind::Serial && l->var &&
                     sched::uses_var(block.block->predicate, l->var.get());
            });
          });
      if (!bounds_a_serial_loop) continue;
      out.push_back(make("tile_order", nest.principal_block().block->name,
                         {DecisionArg{"reverse", loop.name}}));
    }
  }
  return out;
}

namespace {

// The CTA tile's extent along each spatial iteration variable of the nest's principal block, in
// order: the extent inside the CTA (loops that neither iterate tiles nor are bound to the grid),
// 1 where a grid loop or a tile's outer loop covers the whole variable.
std::vector<int64_t> cta_tile_extents(const NestFacts& nest) {
  const scalar::Block& block = *nest.principal_block().block;
  std::vector<int64_t> extents;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    if (block.iter_vars[i].kind != scalar::IterKind::Spatial) continue;
    int64_t extent = 1;
    for (const scalar::VarNode* var : sched::referenced_vars(block.bindings[i])) {
      for (const LoopFacts& loop : nest.loops) {
        if (loop.loop->var.get() != var || loop.grid || loop.tile_outer) continue;
        extent *= loop.extent;
      }
    }
    extents.push_back(extent);
  }
  return extents;
}

// The rows of the output tile one CTA computes: the first of the CTA tile's extents that spans
// more than one element. The tilizer makes that axis the rows of the block's dot, and a wgmma
// consumer warpgroup takes 64 of them. 0 when no axis spans more.
int64_t tile_rows(const std::vector<int64_t>& extents) {
  for (int64_t extent : extents) {
    if (extent > 1) return extent;
  }
  return 0;
}

int64_t cta_tile_rows(const NestFacts& nest) { return tile_rows(cta_tile_extents(nest)); }

}  // namespace

std::vector<Decision> launch_candidates(const ProgramFacts& facts,
                                        const sched::Schedule& schedule, bool hopper) {
  const std::vector<sched::LaunchChoice> chosen = sched::launch_choices(schedule);
  std::vector<Decision> out;
  for (const NestFacts& nest : facts.nests) {
    // A nest has its launch when a launch or a warp_spec decision names one of its blocks: a
    // launch after a warp_spec changes nothing the warp roles do not set, and a second warp_spec
    // would replace the first, so the node would be estimated as another kernel.
    bool has_launch = false;
    for (const BlockFacts& block : nest.blocks) {
      for (const sched::LaunchChoice& choice : chosen) {
        has_launch |= choice.block == block.block->name;
      }
      for (const Decision& d : schedule.decisions) {
        has_launch |= d.kind == "warp_spec" && d.target == block.block->name;
      }
    }
    if (has_launch || nest.principal < 0) continue;
    const BlockFacts& principal = nest.principal_block();
    const std::vector<int64_t> extents = cta_tile_extents(nest);
    const int64_t rows = tile_rows(extents);
    const size_t first_launch = out.size();
    for (int warps : {4, 8}) {
      for (int stages : {1, 2, 3}) {
        if (warps == 4 && stages == 2) continue;  // the default launch
        out.push_back(make("launch", principal.block->name,
                           {keyword("warps", warps), keyword("stages", stages)}));
      }
    }
    // A tile of at most 32 rows (a decode step's heads) in a nest that reduces in several blocks
    // (a softmax between two MMAs) can give each warp its own 16 rows, one MMA row block: its
    // row maxima and sums stay in the warp (quad shuffles, no cross-warp reduction through
    // shared memory) and P's accumulator fragments feed the next MMA directly. Four warps would
    // share rows and pay a barrier per reduction. A single reduction (a GEMM, a norm) has no
    // such barriers to save.
    const auto reductions = std::count_if(nest.blocks.begin(), nest.blocks.end(),
                                          [](const BlockFacts& b) { return b.reduction; });
    if (reductions >= 2 && rows > 0 && rows <= 32 && rows % 16 == 0) {
      for (int stages : {2, 3, 4}) {
        out.push_back(make("launch", principal.block->name,
                           {keyword("warps", static_cast<int>(rows / 16)), keyword("stages", stages)}));
      }
    }
    // A matrix product of fewer than 16 rows (a decode step: one mma row block, its rows
    // repeated) over a tile of 8 or 16 columns: one n8 atom per warp. The default 4 warps need
    // 32 columns for an atom each, so a 16-column tile would fall back to CUDA-core dots, and the
    // 32-column tile gives a 4096 x 4096 weight only 128 CTAs of one warp per scheduler. 16
    // columns on 2 warps: 256 CTAs (int8 weights, M 1: 13.6 µs against 16.9, H200 2026-11-28).
    if (principal.reduction && principal.reads.size() >= 2 && extents.size() == 2 &&
        extents[0] < 16 && (extents[1] == 8 || extents[1] == 16)) {
      for (int stages : {2, 3}) {
        out.push_back(make("launch", principal.block->name,
                           {keyword("warps", static_cast<int>(extents[1] / 8)), keyword("stages", stages)}));
      }
    }
    // A matrix product of at most 16 rows (a decode step) of an 8-bit input over 32 or 64
    // columns: also as many warps as give each 4 n8 atoms (1 or 2), so that a lane reads 4 bytes
    // of a weight row at once (grouped reads; with 4 warps each would have 1 or 2 atoms, and the
    // grouped reads are refused). The 70B-class int8 decode's 64-column tile on 2 warps: 67.3 µs
    // against 95.0 on 4 (H200, 2026-11-29).
    if (principal.reduction && principal.reads_narrow_storage && extents.size() == 2 && extents[0] <= 16 &&
        (extents[1] == 32 || extents[1] == 64)) {
      for (int stages : {2, 3}) {
        out.push_back(make("launch", principal.block->name,
                           {keyword("warps", static_cast<int>(extents[1] / 32)), keyword("stages", stages)}));
      }
    }
    // A matrix product of an 8-bit input (an int8-weight or an fp8 GEMM on mma.sync) reads its
    // widened operand's bytes from shared memory element by element, or grouped where the
    // default (reads=auto) groups them (a widened int8 B read 4 or more bytes at a time). Every
    // launch above is also offered with reads=grouped, so the model prices the grouped form of
    // the other kernels too: on the H200 it made the fp8 128 x 128 x 32 tile 710.6 µs against
    // 749.3, though the 64 x 256 x 32 one 779 against 684.5.
    if (principal.reduction && principal.reads_narrow_storage) {
      const size_t last_launch = out.size();
      out.push_back(make("launch", principal.block->name,
                         {keyword("warps", 4), keyword("stages", 2), keyword("reads", std::string("grouped"))}));
      for (size_t i = first_launch; i < last_launch; ++i) {
        Decision grouped = out[i];
        grouped.args.push_back(keyword("reads", std::string("grouped")));
        out.push_back(std::move(grouped));
      }
    }
    if (hopper && nest.tiled && principal.reduction && principal.reads.size() >= 2) {
      // A consumer warpgroup takes 64 rows of the tile: a 192-row tile only takes three.
      std::vector<int> consumer_counts = {1, 2};
      if (rows == 192) consumer_counts = {3};
      for (int consumers : consumer_counts) {
        for (int stages : {2, 3, 4}) {
          out.push_back(make("warp_spec", principal.block->name,
                             {keyword("consumers", consumers), keyword("stages", stages)}));
        }
      }
    }
  }
  return out;
}

std::vector<Decision> binding_decisions(const ProgramFacts& facts) {
  std::vector<Decision> out;
  for (const NestFacts& nest : facts.nests) {
    if (std::optional<Decision> bind = binding_decision(nest)) out.push_back(std::move(*bind));
  }
  return out;
}

std::vector<std::pair<size_t, Decision>> raster_alternatives(const ProgramFacts& facts) {
  std::vector<std::pair<size_t, Decision>> out;
  size_t position = 0;
  for (const NestFacts& nest : facts.nests) {
    if (!binding_decision(nest)) continue;
    const std::vector<const LoopFacts*> outer = bindable_outer_loops(nest);
    // Only tiled loops: their order decides which operand tiles the CTAs of one wave share.
    const bool tiled = std::all_of(outer.begin(), outer.end(),
                                   [](const LoopFacts* loop) { return loop->tile_outer; });
    if (tiled) {
      for (size_t moved = 0; moved + 1 < outer.size(); ++moved) {
        std::vector<const LoopFacts*> order = outer;
        const LoopFacts* innermost = order[moved];
        order.erase(order.begin() + static_cast<std::ptrdiff_t>(moved));
        order.push_back(innermost);
        out.emplace_back(position, bind_in_order(nest, order));
      }
    }
    ++position;
  }
  return out;
}

std::optional<Decision> TilePlan::decision(const std::vector<int64_t>& sizes) const {
  std::vector<DecisionArg> args;
  for (size_t i = 0; i < axes.size() && i < sizes.size(); ++i) {
    if (sizes[i] > 0) args.push_back(keyword(axes[i].axis, sizes[i]));
  }
  if (args.empty()) return std::nullopt;
  return make("tile", block, std::move(args));
}

bool TilePlan::valid(const std::vector<int64_t>& sizes) const {
  int outer = 0;
  bool tiled = false;
  int64_t cta_elements = 1;
  for (size_t i = 0; i < sizes.size() && i < spatial.size(); ++i) {
    if (!spatial[i]) continue;
    if (sizes[i] > 0) {
      ++outer;
      tiled = true;
      cta_elements *= sizes[i];
    } else if (!tiled) {
      ++outer;
    } else if (i < extents.size()) {
      cta_elements *= extents[i];
    }
  }
  return !tiled || (outer <= 3 && cta_elements <= kMaxCtaSpatialElements);
}

std::vector<int64_t> TilePlan::defaults() const {
  std::vector<int64_t> sizes;
  for (const TileAxis& axis : axes) sizes.push_back(axis.default_size);
  return sizes;
}

std::optional<TilePlan> next_tile_plan(const ProgramFacts& facts,
                                       const std::vector<std::string>& skip) {
  std::optional<TilePlan> first, last_reduction;
  for (const NestFacts& nest : facts.nests) {
    std::optional<TilePlan> plan = tile_plan(nest);
    if (!plan || plan->leave_unscheduled) continue;
    if (std::find(skip.begin(), skip.end(), plan->block) != skip.end()) continue;
    if (!first) first = plan;
    if (nest.has_reduction) last_reduction = plan;
  }
  return last_reduction ? last_reduction : first;
}

// A block fused after a rolling reduction of its nest (a row's statistics, then the row's
// output in the same CTA: `reverse_compute_at(Y, Lse, r)`) steps over its row in the tiles the
// reduction stepped in: `tile(Y, c=T)` for each of its loops that runs the whole rolled axis
// (ceil(extent / T) == the steps of the rolling loop) and is longer than one step. Kept whole,
// the row would be one tile of tens of thousands of elements per CTA: local arrays, not
// registers. Stepped, the CTA reads the row it just reduced again: from L2 where the CTAs
// running at once fit it, from DRAM otherwise (the cost model charges the share that does not).
std::vector<Decision> row_step_tiles(const ProgramFacts& facts) {
  std::vector<Decision> out;
  for (const NestFacts& nest : facts.nests) {
    // The rolling loops over tiles of a reduce axis, as (steps, step size): the step is the
    // extent of the loop right under the loop over tiles in a reducing block's nest.
    std::vector<std::pair<int64_t, int64_t>> rolling;
    for (const BlockFacts& block : nest.blocks) {
      if (!block.reduction) continue;
      for (size_t i = 0; i + 1 < block.loops.size(); ++i) {
        const LoopFacts* outer = loop_facts(nest, block.loops[i]);
        const LoopFacts* inner = loop_facts(nest, block.loops[i + 1]);
        if (!outer || !inner || !outer->tile_outer || outer->spatial || outer->grid ||
            !inner->tile_inner) {
          continue;
        }
        const std::pair<int64_t, int64_t> found{outer->extent, inner->extent};
        if (std::find(rolling.begin(), rolling.end(), found) == rolling.end()) {
          rolling.push_back(found);
        }
      }
    }
    if (rolling.empty()) continue;
    for (const BlockFacts& block : nest.blocks) {
      if (block.reduction) continue;
      for (const scalar::For* loop : block.loops) {
        const LoopFacts* facts_of = loop_facts(nest, loop);
        if (!facts_of || facts_of->grid || facts_of->tile_outer || facts_of->tile_inner ||
            !facts_of->spatial) {
          continue;
        }
        const bool in_chain = std::any_of(nest.chain.begin(), nest.chain.end(),
                                          [&](const LoopFacts& l) { return l.loop == loop; });
        if (in_chain) continue;
        for (const auto& [steps, step] : rolling) {
          if (loop->extent > step && (loop->extent + step - 1) / step == steps) {
            out.push_back(make("tile", block.block->name,
                               {keyword(axis_name(*block.block, *loop), step)}));
            break;
          }
        }
      }
    }
  }
  return out;
}

namespace {

// The default completion, and with `rasters` its other raster orders after it.
std::vector<Completion> complete(const scalar::ProgramPtr& program,
                                 const std::vector<Decision>& forbids,
                                 const std::vector<Decision>& pending_pins, bool rasters) {
  Completion completion;
  completion.program = program;
  const auto push = [&](const Decision& decision, const scalar::ProgramPtr& next, bool pinned) {
    completion.decisions.push_back(decision);
    completion.pinned.push_back(pinned);
    completion.program = next;
  };
  const auto absorb_pins = [&] {
    while (completion.pins_applied < pending_pins.size()) {
      const Decision& pin = pending_pins[completion.pins_applied];
      sched::ApplyResult applied = sched::apply_decision(completion.program, pin);
      if (!applied.ok()) break;
      push(pin, applied.program, true);
      ++completion.pins_applied;
    }
  };
  const auto try_apply = [&](const Decision& decision) {
    if (is_forbidden(forbids, decision)) return false;
    sched::ApplyResult applied = sched::apply_decision(completion.program, decision);
    if (!applied.ok()) return false;
    push(decision, applied.program, false);
    absorb_pins();
    return true;
  };

  absorb_pins();
  std::vector<std::string> skip;
  while (true) {
    const ProgramFacts facts = analyze_program(*completion.program);
    std::optional<TilePlan> plan = next_tile_plan(facts, skip);
    if (!plan) break;
    // The default first, then each single-axis change of it.
    std::vector<std::vector<int64_t>> tries = {plan->defaults()};
    for (size_t i = 0; i < plan->axes.size(); ++i) {
      for (int64_t size : plan->axes[i].sizes) {
        if (size == plan->axes[i].default_size) continue;
        std::vector<int64_t> sizes = plan->defaults();
        sizes[i] = size;
        if (plan->valid(sizes)) tries.push_back(sizes);
      }
    }
    bool tiled = false;
    for (const std::vector<int64_t>& sizes : tries) {
      std::optional<Decision> decision = plan->decision(sizes);
      if (!decision) decision = plan->keep;  // every loop kept: the plain bind schedules it
      if (decision && try_apply(*decision)) {
        tiled = true;
        break;
      }
    }
    if (!tiled) skip.push_back(plan->block);
  }
  for (const Decision& step_tile : row_step_tiles(analyze_program(*completion.program))) {
    try_apply(step_tile);
  }
  const Completion tiled_state = completion;
  const ProgramFacts facts = analyze_program(*completion.program);
  const std::vector<Decision> binds = binding_decisions(facts);
  std::vector<Completion> out;
  const auto bind_with = [&](const std::vector<Decision>& decisions) {
    completion = tiled_state;
    for (const Decision& bind : decisions) try_apply(bind);
    out.push_back(completion);
  };
  bind_with(binds);
  if (!rasters) return out;
  // Row kernels that read their row again in a later pass: the row kept on chip instead.
  for (const std::vector<Decision>& form : row_on_chip_forms(tiled_state.program)) {
    completion = tiled_state;
    if (!std::all_of(form.begin(), form.end(), try_apply)) continue;
    for (const Decision& bind : binds) try_apply(bind);
    out.push_back(completion);
  }
  for (const auto& [position, alternative] : raster_alternatives(facts)) {
    std::vector<Decision> decisions = binds;
    decisions[position] = alternative;
    bind_with(decisions);
  }
  return out;
}

}  // namespace

Completion complete_program(const scalar::ProgramPtr& program, const std::vector<Decision>& forbids,
                            const std::vector<Decision>& pending_pins) {
  return complete(program, forbids, pending_pins, false).front();
}

bool has_192_row_tile_without_warp_spec(const Completion& completion,
                                        const sched::Schedule& schedule) {
  if (!completion.program) return false;
  const ProgramFacts facts = analyze_program(*completion.program);
  for (const NestFacts& nest : facts.nests) {
    if (nest.principal < 0 || cta_tile_rows(nest) != 192) continue;
    const auto specializes_nest = [&](const Decision& d) {
      return d.kind == "warp_spec" &&
             std::any_of(nest.blocks.begin(), nest.blocks.end(),
                         [&](const BlockFacts& b) { return b.block->name == d.target; });
    };
    const bool warp_specialized =
        std::any_of(completion.decisions.begin(), completion.decisions.end(), specializes_nest) ||
        std::any_of(schedule.decisions.begin(), schedule.decisions.end(), specializes_nest);
    if (!warp_specialized) return true;
  }
  return false;
}

namespace {

// A node's decisions followed by its completion's.
sched::Schedule schedule_with(const sched::Schedule& schedule, const Completion& completion) {
  sched::Schedule so_far = schedule;
  so_far.decisions.insert(so_far.decisions.end(), completion.decisions.begin(),
                          completion.decisions.end());
  return so_far;
}

// Appends `decision` to a completion variant where it is not forbidden and applies.
void append_if_applies(Completion& variant, const Decision& decision, const std::vector<Decision>& forbids) {
  if (is_forbidden(forbids, decision)) return;
  sched::ApplyResult applied = sched::apply_decision(variant.program, decision);
  if (!applied.ok()) return;
  variant.program = applied.program;
  variant.decisions.push_back(decision);
  variant.pinned.push_back(false);
}

}  // namespace

std::vector<Completion> warp_specialized_completions(const Completion& completion,
                                                     const sched::Schedule& schedule,
                                                     const std::vector<Decision>& forbids) {
  std::vector<Completion> out;
  if (!completion.program) return out;
  const sched::Schedule so_far = schedule_with(schedule, completion);
  const ProgramFacts facts = analyze_program(*completion.program);
  // Each kernel with the consumer warpgroups its tile rows ask for (64 rows each), the only
  // count its lowering takes: a GEMM chain whose kernels have different tile rows (a 128-row
  // projection beside a 64-row one) would compile in no form that gives every kernel the same.
  // Four stages where they fit; three, which leave room for the staged epilogue's tile beside a
  // 128 x 256 GEMM ring (measured 12% faster than four stages without it at 8192^3,
  // bench/NOTES.md); two where a tile is too large for more (attention with d 256).
  // A nest that reduces in several blocks at once (attention's rolled max, sum and P·V) also
  // with its consumers' loop overlapped: 3 or 4 stages (the consumers hold the previous
  // iteration's slot), or 2 where the ring releases K in its own iteration and V in the next
  // (lower.h rule 6), which leaves room for the staged epilogue beside a d 128 ring.
  const std::vector<std::pair<int, bool>> forms = {{4, false}, {3, false}, {2, false},
                                                   {3, true},  {4, true},  {2, true}};
  for (const auto& [stages, overlap] : forms) {
    Completion variant = completion;
    for (const Decision& candidate : launch_candidates(facts, so_far, true)) {
      if (candidate.kind != "warp_spec") continue;
      const NestFacts* nest = facts.nest_of_block(candidate.target);
      const int64_t rows = nest ? cta_tile_rows(*nest) : 0;
      if (rows != 64 && rows != 128 && rows != 192) continue;
      if (overlap && std::count_if(nest->blocks.begin(), nest->blocks.end(),
                                   [](const BlockFacts& b) { return b.reduction; }) < 2) {
        continue;
      }
      std::vector<DecisionArg> args = {keyword("consumers", static_cast<int>(rows / 64)),
                                       keyword("stages", stages)};
      if (overlap) args.push_back(keyword("overlap", 1));
      const Decision wanted = make("warp_spec", candidate.target, args);
      if (std::find(variant.decisions.begin(), variant.decisions.end(), wanted) !=
          variant.decisions.end()) {
        continue;
      }
      append_if_applies(variant, wanted, forbids);
    }
    if (variant.decisions.size() > completion.decisions.size()) out.push_back(std::move(variant));
  }
  return out;
}

std::vector<Completion> launch_lookahead_completions(const Completion& completion,
                                                     const sched::Schedule& schedule,
                                                     const std::vector<Decision>& forbids) {
  std::vector<Completion> out;
  if (!completion.program) return out;
  const sched::Schedule so_far = schedule_with(schedule, completion);
  const ProgramFacts facts = analyze_program(*completion.program);
  // The warp counts the launch phase would offer each qualifying nest (launch_candidates, which
  // skips nests that already have a launch, warp_spec or pipeline decision).
  std::map<std::string, std::set<int64_t>> warps_of;
  for (const Decision& candidate : launch_candidates(facts, so_far, false)) {
    if (candidate.kind != "launch") continue;
    const NestFacts* nest = facts.nest_of_block(candidate.target);
    if (!nest || !nest->tiled) continue;
    const BlockFacts& principal = nest->principal_block();
    if (!principal.reduction || !principal.reads_narrow_storage) continue;
    std::set<int64_t>& warps = warps_of[candidate.target];
    warps.insert(4);  // the default launch's
    for (const DecisionArg& arg : candidate.args) {
      if (arg.key == "warps") warps.insert(arg.as_int());
    }
  }
  std::set<int64_t> all_warps;
  for (const auto& [block, warps] : warps_of) all_warps.insert(warps.begin(), warps.end());
  for (int64_t warps : all_warps) {
    Completion variant = completion;
    for (const auto& [block, offered] : warps_of) {
      if (!offered.count(warps)) continue;
      append_if_applies(variant, make("launch", block, {keyword("warps", warps), keyword("stages", 3)}),
                        forbids);
    }
    if (variant.decisions.size() > completion.decisions.size()) out.push_back(std::move(variant));
  }
  return out;
}

std::vector<Completion> complete_program_rasters(const scalar::ProgramPtr& program,
                                                 const std::vector<Decision>& forbids,
                                                 const std::vector<Decision>& pending_pins) {
  return complete(program, forbids, pending_pins, true);
}

}  // namespace nautilus::search
