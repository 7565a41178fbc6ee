#include "core/sched/bind.h"

#include <algorithm>
#include <map>

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "bind(BLOCK, LOOP=grid.x|grid.y|grid.z|serial, ...)";

// Why `loop` cannot be a grid loop given the blocks under it, or "".
std::string grid_problem(const For& loop) {
  for (const Block* block : collect_blocks(loop.body)) {
    bool spatial = false;
    for (size_t i = 0; i < block->iter_vars.size(); ++i) {
      if (!uses_var(block->bindings[i], loop.var.get())) continue;
      if (block->iter_vars[i].kind == IterKind::Reduce) {
        return "loop " + loop.var->name + " iterates a reduction axis of block " + block->name +
               "; only spatial loops can be bound to the grid";
      }
      spatial = true;
    }
    if (!spatial) {
      return "block " + block->name + " does not depend on loop " + loop.var->name +
             "; bound to the grid, every CTA would compute all of it";
    }
  }
  return {};
}

// Why the grid loops of `stmt` are not all outermost or repeat a dimension, or "".
// `serial` names the innermost serial loop around `stmt` (empty at the top); `grid` holds the
// grid loops around it.
std::string structure_problem(const Stmt& stmt, const std::string& serial,
                              std::vector<const For*>* grid) {
  if (const Seq* seq = stmt->as<Seq>()) {
    for (const Stmt& child : seq->stmts) {
      std::string problem = structure_problem(child, serial, grid);
      if (!problem.empty()) return problem;
    }
    return {};
  }
  const For* loop = stmt->as<For>();
  if (!loop) return {};
  if (!is_grid(loop->for_kind)) return structure_problem(loop->body, loop->var->name, grid);
  const std::string kind = for_kind_name(loop->for_kind);
  if (!serial.empty()) {
    return "loop " + loop->var->name + " is inside serial loop " + serial +
           "; only the outermost loops of a nest can be bound to the grid (bind " + serial +
           " too, or reorder)";
  }
  for (const For* outer : *grid) {
    if (outer->for_kind == loop->for_kind) {
      return "loops " + outer->var->name + " and " + loop->var->name + " are both bound to " +
             kind;
    }
  }
  grid->push_back(loop);
  std::string problem = structure_problem(loop->body, serial, grid);
  grid->pop_back();
  return problem;
}

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  std::string reason = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!reason.empty()) return ApplyResult::failure(reason);
  std::vector<LoopBinding> bindings;
  for (const DecisionArg& arg : decision.args) {
    std::optional<ForKind> kind = arg.is_int() ? std::nullopt : parse_for_kind(arg.as_name());
    if (!kind) {
      const std::string value = arg.is_int() ? std::to_string(arg.as_int()) : arg.as_name();
      return ApplyResult::failure(usage_reason(
          kSignature, "loop " + arg.key + " cannot be bound to " + value +
                          "; the choices are grid.x, grid.y, grid.z and serial"));
    }
    bindings.push_back({arg.key, *kind});
  }
  return bind_loops(program, decision.target, bindings);
}

}  // namespace

std::optional<ForKind> parse_for_kind(std::string_view name) {
  for (ForKind kind : {ForKind::Serial, ForKind::GridX, ForKind::GridY, ForKind::GridZ}) {
    if (name == for_kind_name(kind)) return kind;
  }
  return std::nullopt;
}

ApplyResult bind_loops(const ProgramPtr& program, std::string_view block,
                       const std::vector<LoopBinding>& bindings) {
  std::string reason;
  std::optional<BlockPath> path = find_block(*program, block, &reason);
  if (!path) return ApplyResult::failure(reason);

  // 1. The new kind of each named loop (by depth on the path), skipping no-ops.
  std::map<size_t, ForKind> changes;
  std::vector<size_t> named;
  for (const LoopBinding& binding : bindings) {
    std::optional<size_t> depth = path->loop_depth(binding.loop);
    if (!depth) {
      return ApplyResult::failure("block " + path->block().name + " has no loop " +
                                  binding.loop + "; its loops are " + path->loop_names());
    }
    if (std::find(named.begin(), named.end(), *depth) != named.end()) {
      return ApplyResult::failure("loop " + binding.loop + " is bound twice");
    }
    named.push_back(*depth);
    const For& loop = *path->stmts[*depth]->as<For>();
    if (loop.for_kind != binding.kind) changes[*depth] = binding.kind;
  }
  if (changes.empty()) return ApplyResult::success(program);

  // 2. Every loop that becomes a grid loop must be spatial for the blocks under it.
  for (const auto& [depth, kind] : changes) {
    if (!is_grid(kind)) continue;
    reason = grid_problem(*path->stmts[depth]->as<For>());
    if (!reason.empty()) return ApplyResult::failure(reason);
  }

  // 3. Rebuild the path bottom-up with the new kinds.
  const size_t deepest = changes.rbegin()->first;
  Stmt current;
  for (size_t d = deepest + 1; d-- > 0;) {
    const Stmt& stmt = path->stmts[d];
    if (d == deepest) {
      current = stmt;
    } else if (const Seq* seq = stmt->as<Seq>()) {
      std::vector<Stmt> stmts = seq->stmts;
      std::replace(stmts.begin(), stmts.end(), path->stmts[d + 1], current);
      current = make_seq(std::move(stmts), seq->provenance);
      continue;
    }
    const For& loop = *stmt->as<For>();
    auto change = changes.find(d);
    current = make_for(loop.var, loop.extent, d == deepest ? loop.body : current,
                       loop.provenance, change == changes.end() ? loop.for_kind : change->second);
  }

  // 4. Grid loops stay outermost and distinct.
  std::vector<const For*> grid;
  reason = structure_problem(current, "", &grid);
  if (!reason.empty()) return ApplyResult::failure(reason);
  return ApplyResult::success(with_body(program, current));
}

DecisionKind bind_decision() {
  return {
      "bind",
      std::string(kSignature),
      "Bind loops of a block's nest to CTA grid dimensions, or back to serial loops.",
      "Sets each named LOOP of BLOCK's nest to grid.x, grid.y, grid.z or serial. A grid loop "
      "runs one CTA per iteration, so it must iterate only spatial axes of every block under it "
      "(each of which must depend on it) and must not be inside a serial loop; each grid "
      "dimension is bound once per nest. Example: after tile(O, m=4), bind(O, b=grid.z, "
      "h=grid.y, m_o=grid.x) prints the loops as `for b in 0..1 [grid.z]:`, `for h in 0..2 "
      "[grid.y]:`, `for m_o in 0..3 [grid.x]:`.",
      apply,
  };
}

}  // namespace nautilus::sched
