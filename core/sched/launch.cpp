#include "core/sched/launch.h"

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature = "launch(BLOCK, warps=W, stages=S)";

// The choice a decision states, or the reason it is malformed.
std::string read_choice(const Decision& decision, LaunchChoice* choice) {
  const std::string shape = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!shape.empty()) return shape;
  choice->block = decision.target;
  for (const DecisionArg& arg : decision.args) {
    if (arg.key != "warps" && arg.key != "stages") {
      return usage_reason(kSignature, "unknown keyword '" + arg.key + "'; expected warps or stages");
    }
    if (!arg.is_int()) {
      return usage_reason(kSignature, arg.key + " is an integer, got " + arg.as_name());
    }
    const int64_t value = arg.as_int();
    if (arg.key == "warps") {
      if (value != 1 && value != 2 && value != 4 && value != 8) {
        return "launch: warps must be 1, 2, 4 or 8, got " + std::to_string(value);
      }
      choice->warps = static_cast<int>(value);
    } else {
      if (value < 1 || value > 4) {
        return "launch: stages must be between 1 and 4, got " + std::to_string(value);
      }
      choice->stages = static_cast<int>(value);
    }
  }
  return {};
}

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  LaunchChoice choice;
  std::string reason = read_choice(decision, &choice);
  if (!reason.empty()) return ApplyResult::failure(reason);
  if (!find_block(*program, choice.block, &reason)) return ApplyResult::failure(reason);
  return ApplyResult::success(program);  // read by stage matile; the scalar IR is unchanged
}

}  // namespace

std::vector<LaunchChoice> launch_choices(const Schedule& schedule) {
  std::vector<LaunchChoice> choices;
  for (const Decision& decision : schedule.decisions) {
    if (decision.kind != "launch") continue;
    LaunchChoice choice;
    if (read_choice(decision, &choice).empty()) choices.push_back(choice);
  }
  return choices;
}

DecisionKind launch_decision() {
  return {
      "launch",
      std::string(kSignature),
      "Choose the warps per CTA and the pipeline stages of the kernel that computes a block.",
      "The kernel of BLOCK's loop nest runs with W warps (1, 2, 4 or 8; default 4) and "
      "software-pipelines the copies of its inner loop over S buffers (1 to 4; default 2). The "
      "scalar IR is unchanged; stage matile reads the choice. More warps split the CTA's tile "
      "among more threads, so fewer registers hold each thread's part. Example: "
      "launch(O_sum_acc, warps=8, stages=2) gives the attention kernel 8 warps of 16 query rows "
      "each.",
      apply,
  };
}

}  // namespace nautilus::sched
