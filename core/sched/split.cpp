#include "core/sched/split.h"

#include <algorithm>

#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "core/sched/decision_args.h"
#include "core/sched/region.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "split(BLOCK, AXIS, FACTOR)";

// Whether the overhang iterations of the split loop `x` may run `block` unguarded: its
// bindings and predicate do not use x, so every iteration of x repeats the same work (a loop
// left around a block that compute_at placed under another block's loops), and its reductions
// lie inside x (no reduce binding uses a loop enclosing x), so each repetition starts again from
// the init and writes the same values. A guard there would be no bound of anything the block
// indexes, and tilize masks a block's init and its stores after a loop only by the bounds of
// what they index.
bool repeats_without_guard(const Block& block, const VarNode* x,
                           const std::vector<const VarNode*>& enclosing) {
  for (size_t i = 0; i < block.bindings.size(); ++i) {
    if (uses_var(block.bindings[i], x)) return false;
    if (block.iter_vars[i].kind != IterKind::Reduce) continue;
    for (const VarNode* outer : enclosing) {
      if (uses_var(block.bindings[i], outer)) return false;
    }
  }
  return !block.predicate || !uses_var(block.predicate, x);
}

// Rewrites the blocks under the split loop: bindings and predicates see x_o * F + x_i for x, and
// `guard` (when not null) is added to the predicate of every block but those that only repeat
// along x (above). Block bodies are left alone: only iteration variables are visible there.
class SplitRewriter : public Mutator {
 public:
  SplitRewriter(const VarNode* split_var, std::vector<const VarNode*> enclosing,
                const VarReplacements& replacements, Expr guard)
      : split_var_(split_var),
        enclosing_(std::move(enclosing)),
        replacements_(replacements),
        guard_(std::move(guard)) {}

 protected:
  Stmt mutate_Block(const Block& node, const Stmt&) override {
    const bool guarded = guard_ && !repeats_without_guard(node, split_var_, enclosing_);
    std::vector<Expr> bindings;
    for (const Expr& binding : node.bindings) {
      bindings.push_back(simplify_index(substitute(binding, replacements_)));
    }
    Expr predicate =
        node.predicate ? simplify_index(substitute(node.predicate, replacements_)) : nullptr;
    return make_block(node.name, node.iter_vars, std::move(bindings),
                      guarded ? conjunction(std::move(predicate), guard_) : std::move(predicate),
                      node.init, node.body, node.provenance);
  }

 private:
  const VarNode* split_var_;
  std::vector<const VarNode*> enclosing_;  // the loops around the split loop
  const VarReplacements& replacements_;
  Expr guard_;
};

std::string iter_names(const Block& block) {
  std::string names;
  for (const IterVar& iter : block.iter_vars) names += (names.empty() ? "" : ", ") + iter.var->name;
  return names;
}

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  std::string reason = check_arg_shape(decision, kSignature, {2, 2, false});
  if (!reason.empty()) return ApplyResult::failure(reason);
  const std::vector<const DecisionArg*> args = decision.positional();
  if (args[0]->is_int()) {
    return ApplyResult::failure(usage_reason(kSignature, "AXIS is a name, got " +
                                                             std::to_string(args[0]->as_int())));
  }
  if (!args[1]->is_int()) {
    return ApplyResult::failure(
        usage_reason(kSignature, "FACTOR is an integer, got " + args[1]->as_name()));
  }
  return split(program, decision.target, args[0]->as_name(), args[1]->as_int());
}

}  // namespace

std::optional<size_t> find_axis_loop(const BlockPath& path, std::string_view axis,
                                     std::string* reason) {
  const Block& block = path.block();
  std::string binding_problem;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    if (block.iter_vars[i].var->name != axis) continue;
    const std::vector<const VarNode*> vars = referenced_vars(block.bindings[i]);
    if (vars.size() == 1) {
      for (size_t depth = 0; depth < path.stmts.size(); ++depth) {
        const For* loop = path.stmts[depth]->as<For>();
        if (loop && loop->var.get() == vars.front()) return depth;
      }
    }
    std::string loops;
    for (const VarNode* var : vars) loops += (loops.empty() ? "" : " and ") + var->name;
    binding_problem = "iteration variable " + std::string(axis) + " of block " + block.name +
                      " is bound to " + print_expr(block.bindings[i]) +
                      (vars.empty() ? ", which uses no loop"
                                    : ", which uses loops " + loops + "; name one of the loops");
    break;
  }
  if (std::optional<size_t> depth = path.loop_depth(axis)) return depth;
  *reason = !binding_problem.empty()
                ? binding_problem
                : "block " + block.name + " has no axis or loop " + std::string(axis) +
                      "; its axes are " + iter_names(block) + " and its loops " +
                      path.loop_names();
  return std::nullopt;
}

ApplyResult split(const ProgramPtr& program, std::string_view block_name, std::string_view axis,
                  int64_t factor, SplitLoops* loops) {
  std::string reason;
  std::optional<BlockPath> path = find_block(*program, block_name, &reason);
  if (!path) return ApplyResult::failure(reason);
  if (factor <= 0) {
    return ApplyResult::failure("split factor of axis " + std::string(axis) + " of block " +
                                std::string(block_name) + " must be positive, got " +
                                std::to_string(factor));
  }
  std::optional<size_t> depth = find_axis_loop(*path, axis, &reason);
  if (!depth) return ApplyResult::failure(reason);
  const For& loop = *path->stmts[*depth]->as<For>();
  if (is_grid(loop.for_kind)) {
    return ApplyResult::failure("loop " + loop.var->name + " is bound to " +
                                for_kind_name(loop.for_kind) + "; split loops before binding them");
  }

  std::set<std::string> taken = names_in_scope(*path, *depth);
  Var outer = make_var(fresh_name(loop.var->name + "_o", &taken));
  Var inner = make_var(fresh_name(loop.var->name + "_i", &taken));
  const int64_t outer_extent = loop.extent / factor + (loop.extent % factor != 0);
  Expr combined = index_add(index_mul(var_ref(outer), factor), var_ref(inner));
  Expr guard = loop.extent % factor != 0 ? index_lt(combined, loop.extent) : nullptr;

  const VarReplacements replacements = {{loop.var.get(), combined}};
  std::vector<const VarNode*> enclosing;
  for (size_t i = 0; i < *depth; ++i) {
    if (const For* around = path->stmts[i]->as<For>()) enclosing.push_back(around->var.get());
  }
  SplitRewriter rewriter(loop.var.get(), std::move(enclosing), replacements, guard);
  Stmt body = rewriter.mutate(loop.body);
  Stmt nest = make_for(outer, outer_extent,
                       make_for(inner, factor, std::move(body), loop.provenance), loop.provenance);
  if (loops) *loops = {outer->name, inner->name};
  return ApplyResult::success(with_body(program, replace_at(*path, *depth, std::move(nest))));
}

DecisionKind split_decision() {
  return {
      "split",
      std::string(kSignature),
      "Split the loop of an axis into an outer and an inner loop.",
      "Replaces the loop that iterates AXIS in BLOCK's nest (the one loop its binding uses, or "
      "the enclosing loop named AXIS) by AXIS_o in 0..ceil(E / FACTOR) around AXIS_i in "
      "0..FACTOR, binding AXIS = AXIS_o * FACTOR + AXIS_i in every block under it; when FACTOR "
      "does not divide the extent E those blocks get the predicate AXIS_o * FACTOR + AXIS_i < E. "
      "Example: split(C_sum, m, 5) with M = 12 turns `for m in 0..12: ... block C_sum(m = m, "
      "...)` into `for m_o in 0..3: for m_i in 0..5: ... block C_sum(m = m_o * 5 + m_i, ...) if "
      "m_o * 5 + m_i < 12`.",
      apply,
  };
}

}  // namespace nautilus::sched
