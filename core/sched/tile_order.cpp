// The tile_order decision (tile_order.h): checks that BLOCK's nest has a grid.x and a grid.y
// loop, then writes the group into the nest's launch attributes through update_launch_attrs
// (launch.h).
#include "core/sched/tile_order.h"

#include <string>

#include "core/sched/decision_args.h"
#include "core/sched/launch.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature = "tile_order(BLOCK, group=G)";

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  const std::string shape = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!shape.empty()) return ApplyResult::failure(shape);
  int64_t group = 1;  // the argument shape check guarantees the keyword
  for (const DecisionArg& arg : decision.args) {
    if (arg.key != "group") {
      return ApplyResult::failure(
          usage_reason(kSignature, "unknown keyword '" + arg.key + "'; expected group"));
    }
    if (!arg.is_int()) {
      return ApplyResult::failure(usage_reason(kSignature, "group is an integer, got " + arg.as_name()));
    }
    group = arg.as_int();
    if (group < 1 || group > scalar::kMaxTileOrderGroup) {
      return ApplyResult::failure("tile_order: group must be between 1 and " +
                                  std::to_string(scalar::kMaxTileOrderGroup) + ", got " +
                                  std::to_string(group));
    }
  }

  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, decision.target, &reason);
  if (!path) return ApplyResult::failure(reason);
  // The groups reorder the CTAs of grid.x and grid.y; a kernel without both has nothing to group.
  bool has_x = false, has_y = false;
  for (const scalar::For* loop : path->loops()) {
    has_x |= loop->for_kind == scalar::ForKind::GridX;
    has_y |= loop->for_kind == scalar::ForKind::GridY;
  }
  if (group > 1 && (!has_x || !has_y)) {
    return ApplyResult::failure(
        "tile_order: the kernel of block " + decision.target + " binds no loop to " +
        (has_x ? "grid.y" : has_y ? "grid.x" : "grid.x or grid.y") +
        "; grouping orders the tiles of grid.x and grid.y (bind a tile loop to each first; its "
        "loops are " + path->loop_names() + ")");
  }
  return update_launch_attrs(program, decision.target, "tile_order",
                             [&](scalar::LaunchAttrs attrs) {
                               attrs.group = static_cast<int>(group);
                               return attrs;
                             });
}

}  // namespace

DecisionKind tile_order_decision() {
  return {
      "tile_order",
      std::string(kSignature),
      "Launch the CTAs of the kernel that computes a block in groups of G rows of grid.y (the "
      "L2 swizzle of a tiled GEMM).",
      "The CTA launched L-th runs, instead of grid point (L % X, L / X), the point that walks a "
      "band of G rows of grid.y column by column: band = L / (G X), rows = min(G, Y - band G), "
      "y = band G + (L % (G X)) % rows, x = (L % (G X)) / rows (X, Y: the extents of grid.x and "
      "grid.y; the last band is short when G does not divide Y). CTAs that run at once then "
      "share the operand tiles of about G rows and W / G columns in L2 instead of reading every "
      "column's tiles in every wave. Nothing is computed differently; G = 1 is the plain order. "
      "Example: tile_order(C_sum, group=8) after bind(C_sum, n_o=grid.y, m_o=grid.x) on a GEMM "
      "8192^3 with 128 x 256 tiles: a wave of 132 CTAs reads 8 column panels of B and 17 row "
      "panels of A instead of 3 of B and all 64 of A.",
      apply,
  };
}

}  // namespace nautilus::sched
