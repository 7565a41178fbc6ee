// The pipeline decision (pipeline_decision.h): reads the ring depth and consumer count and
// writes them into the launch attributes of BLOCK's nest through update_launch_attrs (launch.h).
#include "core/sched/pipeline_decision.h"

#include <algorithm>
#include <string>

#include "core/sched/decision_args.h"
#include "core/sched/launch.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature =
    "pipeline(BLOCK, stages=S, early_stages=E, consumers=C, pingpong=0|1)";

struct Parsed {
  std::optional<int> stages, early_stages, consumers;
  std::optional<bool> pingpong;
  std::string error;
};

Parsed parse(const Decision& decision) {
  Parsed out;
  if (!decision.positional().empty()) {
    out.error = usage_reason(kSignature, "takes no positional arguments after the block");
    return out;
  }
  for (const DecisionArg& arg : decision.args) {
    if (arg.key != "stages" && arg.key != "early_stages" && arg.key != "consumers" && arg.key != "pingpong") {
      out.error = usage_reason(kSignature, "unknown keyword '" + arg.key +
                                               "'; expected stages, early_stages, consumers or pingpong");
      return out;
    }
    if (!arg.is_int()) {
      out.error = usage_reason(kSignature, arg.key + " is an integer, got " + arg.as_name());
      return out;
    }
    const int64_t value = arg.as_int();
    if (arg.key == "pingpong") {
      if (value != 0 && value != 1) {
        out.error = "pipeline: pingpong is 0 or 1, got " + std::to_string(value);
        return out;
      }
      out.pingpong = value == 1;
    } else if (arg.key == "stages" || arg.key == "early_stages") {
      if (value < 1 || value > 8) {
        out.error = "pipeline: " + arg.key + " must be between 1 and 8, got " + std::to_string(value);
        return out;
      }
      (arg.key == "stages" ? out.stages : out.early_stages) = static_cast<int>(value);
    } else {
      if (value < 0 || value > 3) {
        out.error = "pipeline: consumers must be 0 to 3, got " + std::to_string(value);
        return out;
      }
      out.consumers = static_cast<int>(value);
    }
  }
  if (out.pingpong.value_or(false) && out.consumers && *out.consumers < 2) {
    out.error = "pipeline: pingpong=1 alternates the consumer warpgroups' tensor-core phases, so it "
                "needs consumers=2 or 3, got " + std::to_string(*out.consumers);
  }
  return out;
}

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  if (decision.target.empty()) return ApplyResult::failure(usage_reason(kSignature, "names no block"));
  const Parsed parsed = parse(decision);
  if (!parsed.error.empty()) return ApplyResult::failure(parsed.error);
  bool no_partner = false;  // pingpong=1 on a kernel with fewer than 2 consumer warpgroups
  ApplyResult result = update_launch_attrs(program, decision.target, "pipeline", [&](scalar::LaunchAttrs attrs) {
    if (parsed.stages) attrs.stages = *parsed.stages;
    // A depth of its own for the early rings only where named: `stages` alone sets every ring.
    attrs.early_stages = parsed.early_stages.value_or(0);
    if (parsed.consumers) {
      attrs.consumers = *parsed.consumers;
      if (attrs.consumers == 0) attrs.overlap = false;
      if (attrs.consumers < 2) attrs.pingpong = false;
    }
    if (parsed.pingpong) {
      no_partner = *parsed.pingpong && attrs.consumers < 2;
      attrs.pingpong = *parsed.pingpong && !no_partner;
    }
    return attrs;
  });
  if (no_partner) {
    return ApplyResult::failure("pipeline: pingpong=1 needs 2 or 3 consumer warpgroups (consumers=C here or "
                                "in warp_spec); the kernel computing " + decision.target + " has fewer");
  }
  return result;
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
    if (parsed.early_stages) pins.early_stages = parsed.early_stages;
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
      "tensor-core bound with 3 buffers and writes pipeline(C_sum, stages=3, consumers=2). "
      "pingpong=1 (2 or 3 consumers) makes the consumer warpgroups take turns on the tensor "
      "cores, as warp_spec's pingpong=1; the solver writes it when its answer gives the 64-row "
      "halves of the tile to different consumers whose tensor-core phases alternate (attention: "
      "one half's softmax under the other's MMAs). early_stages=E gives the rings the consumers "
      "release in the iteration that reads them (attention's K beside V, docs/matile.md \"early "
      "release\") a depth of their own; the solver writes it when that ring's own life needs "
      "fewer buffers than the others', which leaves shared memory to the staged epilogue.",
      apply,
  };
}

}  // namespace nautilus::sched
