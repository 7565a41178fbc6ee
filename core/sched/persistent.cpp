// The persistent decision (persistent.h): checks the scheduler keyword and that BLOCK's nest has a
// grid loop, then sets the nest's launch attributes through update_launch_attrs (launch.h).
#include "core/sched/persistent.h"

#include <string>

#include "core/sched/decision_args.h"
#include "core/sched/launch.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature = "persistent(BLOCK, scheduler=dynamic|static)";

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  const bool has_keyword = decision.args.size() > decision.positional().size();
  const std::string shape = check_arg_shape(decision, kSignature, {0, 0, has_keyword});
  if (!shape.empty()) return ApplyResult::failure(shape);
  // The dynamic scheduler is the default: the cost model never ranks the static walk ahead of
  // it (docs/schedules.md "persistent" says why).
  bool dynamic_tiles = true;
  for (const DecisionArg& arg : decision.args) {
    if (arg.key.empty()) continue;
    if (arg.key != "scheduler") {
      return ApplyResult::failure(
          usage_reason(kSignature, "unknown keyword '" + arg.key + "'; expected scheduler"));
    }
    const std::string value = arg.is_int() ? std::to_string(arg.as_int()) : arg.as_name();
    if (value != "dynamic" && value != "static") {
      return ApplyResult::failure(usage_reason(
          kSignature, "scheduler is dynamic or static, got " + value));
    }
    dynamic_tiles = value == "dynamic";
  }
  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, decision.target, &reason);
  if (!path) return ApplyResult::failure(reason);
  bool has_grid = false;
  for (const scalar::For* loop : path->loops()) has_grid |= scalar::is_grid(loop->for_kind);
  if (!has_grid) {
    return ApplyResult::failure("persistent: the kernel of block " + decision.target +
                                " binds no loop to the grid, so it has no tiles to walk (bind a "
                                "tile loop first; its loops are " + path->loop_names() + ")");
  }
  return update_launch_attrs(program, decision.target, "persistent",
                             [&](scalar::LaunchAttrs attrs) {
                               attrs.persistent = true;
                               attrs.dynamic_tiles = dynamic_tiles;
                               return attrs;
                             });
}

}  // namespace

DecisionKind persistent_decision() {
  return {
      "persistent",
      std::string(kSignature),
      "Run the kernel that computes a block as persistent CTAs: one per SM, each walking "
      "several tiles (sm_90a, warp-specialized kernels).",
      "The kernel is launched with as many CTAs as the GPU holds at once, at most one per tile. "
      "scheduler=dynamic (the default): the CTA launched c-th computes tile c first, then each "
      "next tile it takes from a global counter (one atomic add by the producer, a tile ahead, "
      "handed to the consumers through a two-slot ring in shared memory), so tiles start in the "
      "kernel's tile order as CTAs free up, as a launch of one CTA per tile would run them; the "
      "counter lives in a workspace the launcher zeroes before every launch. scheduler=static: "
      "the CTA launched c-th computes tiles c, c + L, c + 2L, ... (L: the CTAs launched). Either "
      "walks the kernel's tile order (tile_order's bands, or the plain order). In a warp-specialized kernel "
      "the producer fills the ring with the next tile's operands while the consumers finish the "
      "current one, so the start of a CTA (mbarrier setup, the ring's first fill) is paid once "
      "per SM, not once per tile. Nothing is computed differently. Other kernels keep one CTA "
      "per tile (the lowering notes why). Example: persistent(C_sum) after warp_spec(C_sum, "
      "consumers=2, stages=4) on a GEMM 4096^3 with 128 x 256 tiles: 132 CTAs walk the 512 "
      "tiles.",
      apply,
  };
}

}  // namespace nautilus::sched
