#include "core/sched/reorder.h"

#include <algorithm>

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "reorder(BLOCK, LOOP, LOOP, ...)";

// The reason loop `var` may not move across the blocks under it, or "" when it may.
std::string fused_loop_problem(const VarNode* var, const std::vector<const Block*>& blocks) {
  for (const Block* block : blocks) {
    for (size_t i = 0; i < block->iter_vars.size(); ++i) {
      if (block->iter_vars[i].kind == IterKind::Reduce && uses_var(block->bindings[i], var)) {
        return "loop " + var->name + " iterates reduction axis " + block->iter_vars[i].var->name +
               " of block " + block->name + "; loops around several blocks can be reordered only "
               "when they iterate spatial axes of each";
      }
    }
  }
  return {};
}

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  std::string reason = check_arg_shape(decision, kSignature, {1, SIZE_MAX, false});
  if (!reason.empty()) return ApplyResult::failure(reason);
  std::vector<std::string> loops;
  for (const DecisionArg* arg : decision.positional()) {
    if (arg->is_int()) {
      return ApplyResult::failure(
          usage_reason(kSignature, "LOOP is a name, got " + std::to_string(arg->as_int())));
    }
    loops.push_back(arg->as_name());
  }
  return reorder(program, decision.target, loops);
}

}  // namespace

ApplyResult reorder(const ProgramPtr& program, std::string_view block_name,
                    const std::vector<std::string>& loops) {
  std::string reason;
  std::optional<BlockPath> path = find_block(*program, block_name, &reason);
  if (!path) return ApplyResult::failure(reason);

  // 1. The named loops' depths, in the order given.
  std::vector<size_t> depths;
  for (const std::string& name : loops) {
    std::optional<size_t> depth = path->loop_depth(name);
    if (!depth) {
      return ApplyResult::failure("block " + path->block().name + " has no loop " + name +
                                  "; its loops are " + path->loop_names());
    }
    if (std::find(depths.begin(), depths.end(), *depth) != depths.end()) {
      return ApplyResult::failure("loop " + name + " is named twice");
    }
    depths.push_back(*depth);
  }
  if (depths.empty()) return ApplyResult::success(program);

  // 2. The band from the outermost to the innermost named loop must be a perfect nest.
  const size_t lo = *std::min_element(depths.begin(), depths.end());
  const size_t hi = *std::max_element(depths.begin(), depths.end());
  std::vector<const For*> band;
  for (size_t d = lo; d <= hi; ++d) {
    const For* loop = path->stmts[d]->as<For>();
    if (!loop) {
      return ApplyResult::failure(
          "loops " + path->stmts[lo]->as<For>()->var->name + " and " +
          path->stmts[hi]->as<For>()->var->name + " of block " + path->block().name +
          " are not perfectly nested: loop " + band.back()->var->name +
          " runs several statements");
    }
    if (is_grid(loop->for_kind)) {
      return ApplyResult::failure("loop " + loop->var->name + " is bound to " +
                                  for_kind_name(loop->for_kind) +
                                  "; reorder loops before binding them");
    }
    band.push_back(loop);
  }

  // 3. The new order: named loops take the named slots in the order given.
  std::vector<size_t> slots = depths;
  std::sort(slots.begin(), slots.end());
  std::vector<const For*> order = band;
  for (size_t k = 0; k < slots.size(); ++k) {
    order[slots[k] - lo] = path->stmts[depths[k]]->as<For>();
  }
  if (order == band) return ApplyResult::success(program);

  // 4. Legality for fused nests.
  const Stmt& innermost_body = band.back()->body;
  const std::vector<const Block*> blocks = collect_blocks(innermost_body);
  if (blocks.size() > 1) {
    for (const For* loop : band) {
      reason = fused_loop_problem(loop->var.get(), blocks);
      if (!reason.empty()) return ApplyResult::failure(reason);
    }
  }

  // 5. Rebuild the band around the unchanged innermost body.
  Stmt nest = innermost_body;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    nest = make_for((*it)->var, (*it)->extent, std::move(nest), (*it)->provenance,
                    (*it)->for_kind);
  }
  return ApplyResult::success(with_body(program, replace_at(*path, lo, std::move(nest))));
}

DecisionKind reorder_decision() {
  return {
      "reorder",
      std::string(kSignature),
      "Permute perfectly nested loops of a block's nest.",
      "The named loops of BLOCK's nest, which must be perfectly nested from the outermost to "
      "the innermost of them, take each other's places so that they appear in the order given; "
      "loops between them that are not named stay where they are. A band that encloses several "
      "blocks may only hold loops over spatial axes of each. Example: reorder(C_sum, k, m) turns "
      "gemm's `for m / for n / for k` into `for k / for n / for m`.",
      apply,
  };
}

}  // namespace nautilus::sched
