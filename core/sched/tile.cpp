#include "core/sched/tile.h"

#include <algorithm>

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"
#include "core/sched/reorder.h"
#include "core/sched/split.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "tile(BLOCK, AXIS=SIZE, ...)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  std::string reason = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!reason.empty()) return ApplyResult::failure(reason);
  std::vector<TileSize> sizes;
  for (const DecisionArg& arg : decision.args) {
    if (!arg.is_int()) {
      return ApplyResult::failure(
          usage_reason(kSignature, "SIZE is an integer, got " + arg.key + "=" + arg.as_name()));
    }
    sizes.push_back({arg.key, arg.as_int()});
  }
  return tile(program, decision.target, sizes);
}

}  // namespace

ApplyResult tile(const ProgramPtr& program, std::string_view block,
                 const std::vector<TileSize>& sizes) {
  std::string reason;
  std::optional<BlockPath> path = find_block(*program, block, &reason);
  if (!path) return ApplyResult::failure(reason);

  // 1. Resolve every axis to its loop and put the axes in nest order.
  struct Axis {
    TileSize size;
    size_t depth;
  };
  std::vector<Axis> axes;
  for (const TileSize& size : sizes) {
    std::optional<size_t> depth = find_axis_loop(*path, size.axis, &reason);
    if (!depth) return ApplyResult::failure(reason);
    for (const Axis& other : axes) {
      if (other.depth == *depth) {
        return ApplyResult::failure("axes " + other.size.axis + " and " + size.axis +
                                    " of block " + std::string(block) + " are the same loop");
      }
    }
    axes.push_back({size, *depth});
  }
  std::sort(axes.begin(), axes.end(),
            [](const Axis& a, const Axis& b) { return a.depth < b.depth; });

  // 2. Split each.
  ProgramPtr current = program;
  std::vector<SplitLoops> splits;
  for (const Axis& axis : axes) {
    SplitLoops loops;
    ApplyResult result = split(current, block, axis.size.axis, axis.size.size, &loops);
    if (!result.ok()) return result;
    current = std::move(result.program);
    splits.push_back(std::move(loops));
  }

  // 3. Outer loops first across the band that the new loops span.
  path = find_block(current->body, block);
  size_t lo = path->stmts.size(), hi = 0;
  for (const SplitLoops& loops : splits) {
    for (const std::string* name : {&loops.outer, &loops.inner}) {
      const size_t depth = *path->loop_depth(*name);
      lo = std::min(lo, depth);
      hi = std::max(hi, depth);
    }
  }
  std::vector<std::string> order;
  for (const SplitLoops& loops : splits) order.push_back(loops.outer);
  for (size_t d = lo; d <= hi; ++d) {
    const For* loop = path->stmts[d]->as<For>();
    if (!loop) continue;  // reorder reports the broken band
    const std::string& name = loop->var->name;
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  return reorder(current, block, order);
}

DecisionKind tile_decision() {
  return {
      "tile",
      std::string(kSignature),
      "Tile a block's nest: split the named axes and put all tile-index loops outside.",
      "Splits the loop of every named AXIS of BLOCK by SIZE (into AXIS_o and AXIS_i, as split "
      "does) and reorders the band the new loops span: the outer loops first, in the order the "
      "axes had in the nest, then the other loops of the band in their order. Spatial outer loops "
      "enumerate output tiles (bind them to the grid with bind); a reduction's outer loop is the "
      "serial loop over its tiles. Example: tile(O_sum, m=64, n=32) on attention turns `for b / "
      "for h / for m / for d / for n` into `for b / for h / for m_o / for n_o / for m_i / for d "
      "/ for n_i`.",
      apply,
  };
}

}  // namespace nautilus::sched
