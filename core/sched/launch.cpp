#include "core/sched/launch.h"

#include <map>

#include "core/scalar/printer.h"
#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

namespace {

constexpr std::string_view kSignature =
    "launch(BLOCK, warps=W, stages=S, reads=auto|elements|grouped, mma=auto|direct|swapped)";

// A keyword whose value is one of an enum's names (reads=, mma=): stores it, or says which
// names it takes.
template <typename Enum>
std::string read_named(const DecisionArg& arg, std::optional<Enum> (*from_name)(const std::string&),
                       const std::string& names, Enum* value) {
  const std::string text = arg.is_int() ? std::to_string(arg.as_int()) : arg.as_name();
  const std::optional<Enum> named = from_name(text);
  if (!named) return "launch: " + arg.key + " is " + names + ", got " + text;
  *value = *named;
  return {};
}

// The choice a decision states, or the reason it is malformed.
std::string read_choice(const Decision& decision, LaunchChoice* choice) {
  const std::string shape = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!shape.empty()) return shape;
  choice->block = decision.target;
  for (const DecisionArg& arg : decision.args) {
    if (arg.key != "warps" && arg.key != "stages" && arg.key != "reads" && arg.key != "mma") {
      return usage_reason(kSignature, "unknown keyword '" + arg.key + "'; expected warps, stages, reads or mma");
    }
    if (arg.key == "mma") {
      const std::string reason = read_named(arg, scalar::mma_form_from_name, "auto, direct or swapped", &choice->mma_form);
      if (!reason.empty()) return reason;
      continue;
    }
    if (arg.key == "reads") {
      const std::string reason =
          read_named(arg, scalar::shared_reads_from_name, "auto, elements or grouped", &choice->shared_reads);
      if (!reason.empty()) return reason;
      continue;
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
      if (value < 1 || value > 8) {
        return "launch: stages must be between 1 and 8, got " + std::to_string(value);
      }
      choice->stages = static_cast<int>(value);
    }
  }
  return {};
}

// The top-level nests of a program body (one per kernel that tilize makes).
std::vector<scalar::Stmt> top_level_nests(const scalar::Stmt& body) {
  if (const auto* seq = body->as<scalar::Seq>()) return seq->stmts;
  return {body};
}

ApplyResult apply(const scalar::ProgramPtr& program, const Decision& decision) {
  LaunchChoice choice;
  std::string reason = read_choice(decision, &choice);
  if (!reason.empty()) return ApplyResult::failure(reason);
  return update_launch_attrs(program, choice.block, "launch", [&](scalar::LaunchAttrs attrs) {
    attrs.warps = choice.warps;
    attrs.stages = choice.stages;
    attrs.shared_reads = choice.shared_reads;
    attrs.mma_form = choice.mma_form;
    return attrs;
  });
}

}  // namespace

ApplyResult update_launch_attrs(const scalar::ProgramPtr& program, const std::string& block,
                                const std::string& decision_name,
                                const std::function<scalar::LaunchAttrs(scalar::LaunchAttrs)>& update) {
  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, block, &reason);
  if (!path) return ApplyResult::failure(reason);
  // The nest's outermost loop: stmts[0] is the program body, a sequence of nests or one nest.
  const size_t nest_depth = path->stmts.front()->as<scalar::Seq>() ? 1 : 0;
  const auto* nest = nest_depth < path->stmts.size() ? path->stmts[nest_depth]->as<scalar::For>()
                                                     : nullptr;
  if (!nest) {
    return ApplyResult::failure(decision_name + ": block " + block +
                                " is not inside a loop nest, so it has no kernel to launch");
  }
  const scalar::LaunchAttrs attrs = update(nest->launch.value_or(scalar::LaunchAttrs{}));
  if (nest->launch == attrs) return ApplyResult::success(program);
  return ApplyResult::success(
      with_body(program, replace_at(*path, nest_depth, scalar::with_launch(*nest, attrs))));
}

std::vector<LaunchChoice> launch_choices(const Schedule& schedule) {
  std::vector<LaunchChoice> choices;
  for (const Decision& decision : schedule.decisions) {
    if (decision.kind != "launch") continue;
    LaunchChoice choice;
    if (read_choice(decision, &choice).empty()) choices.push_back(choice);
  }
  return choices;
}

scalar::ProgramPtr keep_launch_attrs(const scalar::ProgramPtr& before,
                                     const scalar::ProgramPtr& after) {
  if (!before || !after || before == after || !before->body || !after->body) return after;
  std::map<std::string, scalar::LaunchAttrs> attrs_of_block;
  for (const scalar::Stmt& nest : top_level_nests(before->body)) {
    const auto* loop = nest->as<scalar::For>();
    if (!loop || !loop->launch) continue;
    for (const scalar::Block* block : collect_blocks(nest)) attrs_of_block[block->name] = *loop->launch;
  }
  if (attrs_of_block.empty()) return after;
  std::vector<scalar::Stmt> nests = top_level_nests(after->body);
  bool restored = false;
  for (scalar::Stmt& nest : nests) {
    const auto* loop = nest->as<scalar::For>();
    if (!loop || loop->launch) continue;
    for (const scalar::Block* block : collect_blocks(nest)) {
      const auto found = attrs_of_block.find(block->name);
      if (found == attrs_of_block.end()) continue;
      nest = scalar::with_launch(*loop, found->second);
      restored = true;
      break;
    }
  }
  if (!restored) return after;
  const auto* seq = after->body->as<scalar::Seq>();
  return with_body(after, seq ? scalar::make_seq(std::move(nests), seq->provenance) : nests.front());
}

DecisionKind launch_decision() {
  return {
      "launch",
      std::string(kSignature),
      "Choose the warps per CTA and the pipeline stages of the kernel that computes a block.",
      "The kernel of BLOCK's loop nest runs with W warps (1, 2, 4 or 8; default 4) and "
      "software-pipelines the copies of its inner loop over S buffers (1 to 8; default 2). The "
      "choice becomes launch attributes on the nest's outermost loop, which tilize copies onto "
      "the nest's kernel and stage matile places it with. More warps split the CTA's tile "
      "among more threads, so fewer registers hold each thread's part. reads=grouped reads the "
      "register tiles the kernel loads element by element from shared memory (the widened "
      "8-bit operands of an int8-weight or fp8 GEMM on mma.sync) a lane's neighbouring elements "
      "per ld.shared at hoisted addresses, and widens int8 pairs from the words they arrive in; "
      "reads=elements one element per read; reads=auto (the default) groups them where a "
      "widened int8 operand is read 4 or more bytes at a time (docs/codegen.md). Example: "
      "launch(O_sum_acc, warps=8, stages=2) gives the attention kernel 8 warps of 16 query rows "
      "each.",
      apply,
  };
}

}  // namespace nautilus::sched
