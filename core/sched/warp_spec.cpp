// The warp_spec decision (warp_spec.h): reads the consumer count and writes it into the launch
// attributes of BLOCK's nest through update_launch_attrs (launch.h).
#include "core/sched/warp_spec.h"

#include <string>

#include "core/sched/decision_args.h"
#include "core/sched/launch.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature =
    "warp_spec(BLOCK, consumers=N, stages=S, overlap=0|1, pingpong=0|1)";

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  const std::string shape = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!shape.empty()) return ApplyResult::failure(shape);
  int consumers = -1, stages = 0;
  bool overlap = false, pingpong = false;
  for (const DecisionArg& arg : decision.args) {
    if (arg.key != "consumers" && arg.key != "stages" && arg.key != "overlap" && arg.key != "pingpong") {
      return ApplyResult::failure(usage_reason(
          kSignature, "unknown keyword '" + arg.key + "'; expected consumers, stages, overlap or pingpong"));
    }
    if (!arg.is_int()) {
      return ApplyResult::failure(
          usage_reason(kSignature, arg.key + " is an integer, got " + arg.as_name()));
    }
    if (arg.key == "consumers") {
      if (arg.as_int() < 0 || arg.as_int() > 3) {
        return ApplyResult::failure("warp_spec: consumers must be 0 to 3, got " +
                                    std::to_string(arg.as_int()));
      }
      consumers = static_cast<int>(arg.as_int());
    } else if (arg.key == "overlap") {
      if (arg.as_int() != 0 && arg.as_int() != 1) {
        return ApplyResult::failure("warp_spec: overlap is 0 or 1, got " + std::to_string(arg.as_int()));
      }
      overlap = arg.as_int() == 1;
    } else if (arg.key == "pingpong") {
      if (arg.as_int() != 0 && arg.as_int() != 1) {
        return ApplyResult::failure("warp_spec: pingpong is 0 or 1, got " + std::to_string(arg.as_int()));
      }
      pingpong = arg.as_int() == 1;
    } else {
      if (arg.as_int() < 1 || arg.as_int() > 8) {
        return ApplyResult::failure("warp_spec: stages must be between 1 and 8, got " +
                                    std::to_string(arg.as_int()));
      }
      stages = static_cast<int>(arg.as_int());
    }
  }
  if (consumers < 0) {
    return ApplyResult::failure(usage_reason(kSignature, "consumers=N is required"));
  }
  if (pingpong && consumers < 2) {
    return ApplyResult::failure(
        "warp_spec: pingpong=1 alternates the tensor-core phases of the consumer warpgroups, so it "
        "needs consumers=2 or 3; with consumers=" + std::to_string(consumers) +
        " there is no other warpgroup to take turns with");
  }
  return update_launch_attrs(program, decision.target, "warp_spec",
                             [&](scalar::LaunchAttrs attrs) {
                               attrs.consumers = consumers;
                               attrs.early_stages = 0;
                               attrs.overlap = consumers > 0 && overlap;
                               attrs.pingpong = consumers > 1 && pingpong;
                               if (stages > 0) attrs.stages = stages;
                               return attrs;
                             });
}

}  // namespace

DecisionKind warp_spec_decision() {
  return {
      "warp_spec",
      std::string(kSignature),
      "Warp-specialize the kernel that computes a block (sm_90a): a TMA producer warpgroup and "
      "N consumer warpgroups on wgmma.",
      "One producer warpgroup copies the operands of the kernel's main loop with TMA into a ring "
      "of S shared buffers (2 to 8; left out: the launch decision's stages), and N consumer "
      "warpgroups (1 to 3; 0 removes the specialization) run the rest of the kernel, with the loop's dots on "
      "warpgroup MMA (wgmma) reading those buffers; full and empty mbarriers pass each buffer "
      "between them. Each consumer warpgroup owns 64 rows of the dots' tiles, so a tile of 128 "
      "rows takes consumers=2 (192 rows: 3, the producer then keeps 32 registers so each consumer has 160). overlap=1 software-pipelines the consumers' loop by one "
      "iteration when it reads a dot's result inside the iteration (attention's scores): the "
      "last dot of iteration j (P·V) is issued in iteration j+1 right after that iteration's "
      "first (QKᵀ), so the softmax of one tile runs while the tensor cores compute; the "
      "consumers then hold the previous iteration's stage while they read the next, so it needs stages >= 3, "
      "or 2 when the ring releases the operands whose dot results the iteration reads (K) in their own "
      "iteration and the others (V) in the next. On sm_80 the kernel "
      "keeps mma.sync with 4N warps. pingpong=1 (consumers 2 or 3) makes the consumer warpgroups take "
      "turns issuing each iteration's MMAs through named barriers (each waits on its own, then "
      "passes the turn to the next; warpgroup 0 starts), so one warpgroup's softmax or epilogue "
      "runs while the other's MMAs occupy the tensor cores (FlashAttention-3's ping-pong). Example: warp_spec(C_sum, consumers=2, stages=4) on a "
      "128 x 256 tile is the GEMM mainloop of cuBLAS on the H100.",
      apply,
  };
}

}  // namespace nautilus::sched
