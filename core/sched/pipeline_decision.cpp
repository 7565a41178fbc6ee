// The pipeline decision (pipeline_decision.h): reads the ring depth and consumer count and
// writes them into the launch attributes of BLOCK's nest through update_launch_attrs (launch.h).
#include "core/sched/pipeline_decision.h"

#include <algorithm>
#include <string>

#include "core/sched/decision_args.h"
#include "core/sched/launch.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature = "pipeline(BLOCK, stages=S, consumers=C)";

struct Parsed {
  std::optional<int> stages, consumers;
  std::string error;
};

Parsed parse(const Decision& decision) {
  Parsed out;
  if (!decision.positional().empty()) {
    out.error = usage_reason(kSignature, "takes no positional arguments after the block");
    return out;
  }
  for (const DecisionArg& arg : decision.args) {
    if (arg.key != "stages" && arg.key != "consumers") {
      out.error = usage_reason(kSignature, "unknown keyword '" + arg.key + "'; expected stages or consumers");
      return out;
    }
    if (!arg.is_int()) {
      out.error = usage_reason(kSignature, arg.key + " is an integer, got " + arg.as_name());
      return out;
    }
    const int64_t value = arg.as_int();
    if (arg.key == "stages") {
      if (value < 1 || value > 8) {
        out.error = "pipeline: stages must be between 1 and 8, got " + std::to_string(value);
        return out;
      }
      out.stages = static_cast<int>(value);
    } else {
      if (value < 0 || value > 3) {
        out.error = "pipeline: consumers must be 0 to 3, got " + std::to_string(value);
        return out;
      }
      out.consumers = static_cast<int>(value);
    }
  }
  return out;
}

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  if (decision.target.empty()) return ApplyResult::failure(usage_reason(kSignature, "names no block"));
  const Parsed parsed = parse(decision);
  if (!parsed.error.empty()) return ApplyResult::failure(parsed.error);
  return update_launch_attrs(program, decision.target, "pipeline", [&](scalar::LaunchAttrs attrs) {
    if (parsed.stages) attrs.stages = *parsed.stages;
    if (parsed.consumers) {
      attrs.consumers = *parsed.consumers;
      if (attrs.consumers == 0) attrs.overlap = false;
      if (attrs.consumers < 2) attrs.pingpong = false;
    }
    return attrs;
  });
}

}  // namespace

PipelinePins pipeline_pins(const Schedule& schedule, const std::vector<std::string>& blocks) {
  PipelinePins pins;
  for (const Decision& decision : schedule.decisions) {
    if (decision.kind != "pipeline") continue;
    if (std::find(blocks.begin(), blocks.end(), decision.target) == blocks.end()) continue;
    const Parsed parsed = parse(decision);
    if (!parsed.error.empty()) continue;  // the schedule's compile reports it
    pins.present = true;
    if (parsed.stages) pins.stages = parsed.stages;
    if (parsed.consumers) pins.consumers = parsed.consumers;
  }
  return pins;
}

DecisionKind pipeline_decision() {
  return {
      "pipeline",
      std::string(kSignature),
      "The software pipeline of the kernel that computes a block, as the pipeline solver chose "
      "it: ring depth and consumer warpgroups.",
      "S buffers (1 to 8) in the ring of every operand the kernel's main loop copies into shared "
      "memory, each copy issued as far ahead as the ring allows, and C consumer warpgroups "
      "(sm_90a; 0 to 3, 0: no warp specialization). Either may be left out; `nautilus schedule` "
      "asks the pipeline solver (Z3, docs/pipeline.md) for what is left out and writes the "
      "complete decision, so a pin such as pipeline(C_sum, stages=4) is kept and the rest is "
      "solved. It refines the stages of launch and warp_spec, which it follows. Example: after "
      "warp_spec(C_sum, consumers=2, stages=4) the solver proves a GEMM tile of 128 x 256 x 64 "
      "tensor-core bound with 3 buffers and writes pipeline(C_sum, stages=3, consumers=2).",
      apply,
  };
}

}  // namespace nautilus::sched
