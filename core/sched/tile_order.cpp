// The tile_order decision (tile_order.h): checks that BLOCK's nest has a grid.x and a grid.y
// loop, then writes the group into the nest's launch attributes through update_launch_attrs
// (launch.h).
#include "core/sched/tile_order.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/sched/decision_args.h"
#include "core/sched/launch.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature = "tile_order(BLOCK, group=G, reverse=LOOP)";

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  const std::string shape = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!shape.empty()) return ApplyResult::failure(shape);
  std::optional<int64_t> group;
  std::vector<std::string> reversed;
  for (const DecisionArg& arg : decision.args) {
    if (arg.key == "reverse") {
      if (arg.is_int()) {
        return ApplyResult::failure(
            usage_reason(kSignature, "reverse names a loop, got " + std::to_string(arg.as_int())));
      }
      reversed.push_back(arg.as_name());
      continue;
    }
    if (arg.key != "group") {
      return ApplyResult::failure(
          usage_reason(kSignature, "unknown keyword '" + arg.key + "'; expected group or reverse"));
    }
    if (!arg.is_int()) {
      return ApplyResult::failure(usage_reason(kSignature, "group is an integer, got " + arg.as_name()));
    }
    group = arg.as_int();
    if (*group < 1 || *group > scalar::kMaxTileOrderGroup) {
      return ApplyResult::failure("tile_order: group must be between 1 and " +
                                  std::to_string(scalar::kMaxTileOrderGroup) + ", got " +
                                  std::to_string(*group));
    }
  }

  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, decision.target, &reason);
  if (!path) return ApplyResult::failure(reason);
  const std::vector<const scalar::For*> loops = path->loops();
  // The groups reorder the CTAs of grid.x and grid.y; a kernel without both has nothing to group.
  bool has_x = false, has_y = false;
  for (const scalar::For* loop : loops) {
    has_x |= loop->for_kind == scalar::ForKind::GridX;
    has_y |= loop->for_kind == scalar::ForKind::GridY;
  }
  if (group && *group > 1 && (!has_x || !has_y)) {
    return ApplyResult::failure(
        "tile_order: the kernel of block " + decision.target + " binds no loop to " +
        (has_x ? "grid.y" : has_y ? "grid.x" : "grid.x or grid.y") +
        "; grouping orders the tiles of grid.x and grid.y (bind a tile loop to each first; its "
        "loops are " + path->loop_names() + ")");
  }
  // Only a loop the CTAs enumerate can be launched in reverse.
  for (const std::string& name : reversed) {
    const auto loop = std::find_if(loops.begin(), loops.end(), [&](const scalar::For* l) {
      return l->var && l->var->name == name;
    });
    if (loop == loops.end()) {
      return ApplyResult::failure("tile_order: block " + decision.target + " has no loop " +
                                  name + "; its loops are " + path->loop_names());
    }
    if (!scalar::is_grid((*loop)->for_kind)) {
      return ApplyResult::failure("tile_order: loop " + name + " of block " + decision.target +
                                  " is not bound to a grid axis; reverse orders the CTAs of a "
                                  "grid axis (bind it first)");
    }
  }
  return update_launch_attrs(program, decision.target, "tile_order",
                             [&](scalar::LaunchAttrs attrs) {
                               if (group) attrs.group = static_cast<int>(*group);
                               for (const std::string& name : reversed) {
                                 if (std::find(attrs.reversed.begin(), attrs.reversed.end(),
                                               name) == attrs.reversed.end()) {
                                   attrs.reversed.push_back(name);
                                 }
                               }
                               return attrs;
                             });
}

}  // namespace

DecisionKind tile_order_decision() {
  return {
      "tile_order",
      std::string(kSignature),
      "Launch the CTAs of the kernel that computes a block in groups of G rows of grid.y (the "
      "L2 swizzle of a tiled GEMM), or with the tiles of a grid loop from the last one down.",
      "group=G: the CTA launched L-th runs, instead of grid point (L % X, L / X), the point that "
      "walks a band of G rows of grid.y column by column: band = L / (G X), rows = min(G, Y - "
      "band G), y = band G + (L % (G X)) % rows, x = (L % (G X)) / rows (X, Y: the extents of "
      "grid.x and grid.y; the last band is short when G does not divide Y). CTAs that run at "
      "once then share the operand tiles of about G rows and W / G columns in L2 instead of "
      "reading every column's tiles in every wave. G = 1 is the plain order. reverse=LOOP: the "
      "grid loop LOOP's coordinate c becomes extent - 1 - c, so the first CTAs run its last "
      "tiles; where later tiles do more work (causal attention's query tiles see more keys), "
      "the longest start first and the last wave holds the shortest, which shortens the tail. "
      "Nothing is computed differently. Examples: tile_order(C_sum, group=8) after bind(C_sum, "
      "n_o=grid.y, m_o=grid.x) on a GEMM 8192^3 with 128 x 256 tiles: a wave of 132 CTAs reads "
      "8 column panels of B and 17 row panels of A instead of 3 of B and all 64 of A; "
      "tile_order(O_sum_acc, reverse=m_o) on causal attention: the query tiles of a head start "
      "from the last (longest) one.",
      apply,
  };
}

}  // namespace nautilus::sched
