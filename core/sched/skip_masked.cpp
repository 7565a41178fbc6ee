#include "core/sched/skip_masked.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "core/scalar/affine.h"
#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "core/sched/decision_args.h"
#include "core/sched/finite_stand_in.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "skip_masked(MASK, LOOP)";

// What is known about a tensor that lives only within one iteration of the loop, when the mask
// is complete: a constant, a copy of a tensor that keeps its value, or nothing.
struct LocalValue {
  enum class Kind { Unknown, Constant, CopyOf } kind = Kind::Unknown;
  double constant = 0.0;
  Buffer source;
};

bool is_constant(const Expr& e, double value) {
  const auto* imm = e->as<FloatImm>();
  return imm && (imm->value == value || (std::isnan(value) && std::isnan(imm->value)));
}

bool is_infinite_constant(const Expr& e) {
  const auto* imm = e->as<FloatImm>();
  return imm && std::isinf(imm->value);
}

bool same(const Expr& a, const Expr& b) { return print_expr(a) == print_expr(b); }

// Simplifies an expression under the facts about local tensors, with the identities of the
// mask constant: max(x, -inf) = x, exp(-inf) = 0, x * 0 = 0 (x finite), exp(x - x) = 1, ...
class MaskedSimplifier : public Mutator {
 public:
  explicit MaskedSimplifier(const std::map<const BufferNode*, LocalValue>& locals)
      : locals_(locals) {}

 protected:
  Expr mutate_Load(const Load& node, const Expr& self) override {
    auto it = locals_.find(node.buffer.get());
    if (it == locals_.end()) return self;
    switch (it->second.kind) {
      case LocalValue::Kind::Constant:
        return float_imm(it->second.constant, node.buffer->dtype, node.provenance);
      case LocalValue::Kind::CopyOf:
        return load(it->second.source, node.indices, node.provenance);
      case LocalValue::Kind::Unknown: return self;
    }
    return self;
  }

  Expr mutate_Cast(const Cast& node, const Expr& self) override {
    Expr value = mutate(node.value);
    if (const auto* imm = value->as<FloatImm>(); imm && is_float(node.dtype)) {
      return float_imm(imm->value, node.dtype, node.provenance);
    }
    return value == node.value ? self : cast(node.dtype, value, node.provenance);
  }

  Expr mutate_Unary(const Unary& node, const Expr& self) override {
    Expr a = mutate(node.a);
    if (const auto* imm = a->as<FloatImm>()) {
      const double x = imm->value;
      switch (node.op) {
        case UnaryOp::Exp:
        case UnaryOp::Exp2:
          if (x == -INFINITY) return float_imm(0.0, node.dtype, node.provenance);
          if (x == 0.0) return float_imm(1.0, node.dtype, node.provenance);
          break;
        case UnaryOp::Neg: return float_imm(-x, node.dtype, node.provenance);
        default: break;
      }
    }
    return a == node.a ? self : unary(node.op, a, node.provenance);
  }

  Expr mutate_Binary(const Binary& node, const Expr& self) override {
    Expr a = mutate(node.a), b = mutate(node.b);
    if (is_float(node.dtype)) {
      const Provenance& p = node.provenance;
      switch (node.op) {
        case BinaryOp::Add:
          if (is_constant(a, 0.0)) return b;
          if (is_constant(b, 0.0)) return a;
          if (is_infinite_constant(a) && !is_infinite_constant(b)) return a;
          if (is_infinite_constant(b) && !is_infinite_constant(a)) return b;
          break;
        case BinaryOp::Sub:
          if (is_constant(b, 0.0)) return a;
          if (same(a, b) && !is_infinite_constant(a)) return float_imm(0.0, node.dtype, p);
          if (is_infinite_constant(a) && !is_infinite_constant(b)) return a;
          if (is_infinite_constant(b) && !is_infinite_constant(a)) {
            return float_imm(-b->as<FloatImm>()->value, node.dtype, p);
          }
          break;
        case BinaryOp::Mul:
          if (is_constant(a, 0.0) && !is_infinite_constant(b)) return a;
          if (is_constant(b, 0.0) && !is_infinite_constant(a)) return b;
          if (is_constant(a, 1.0)) return b;
          if (is_constant(b, 1.0)) return a;
          break;
        case BinaryOp::Div:
          if (is_constant(b, 1.0)) return a;
          if (is_constant(a, 0.0) && !is_constant(b, 0.0)) return a;
          break;
        case BinaryOp::Max:
          if (is_constant(a, -INFINITY) || same(a, b)) return b;
          if (is_constant(b, -INFINITY)) return a;
          break;
        case BinaryOp::Min:
          if (is_constant(a, INFINITY) || same(a, b)) return b;
          if (is_constant(b, INFINITY)) return a;
          break;
        default: break;
      }
    }
    return a == node.a && b == node.b ? self : binary(node.op, a, b, node.provenance);
  }

  Expr mutate_Select(const Select& node, const Expr& self) override {
    Expr c = mutate(node.condition), t = mutate(node.if_true), f = mutate(node.if_false);
    if (same(t, f)) return t;
    // The finite stand-in of a running max (finite_stand_in.h) is the value itself: values
    // other than the mask constant are finite.
    Expr rebuilt = c == node.condition && t == node.if_true && f == node.if_false
                       ? self
                       : select(c, t, f, node.provenance);
    if (Expr value = finite_stand_in_value(rebuilt); value && !is_infinite_constant(value)) {
      return value;
    }
    return rebuilt;
  }

 private:
  const std::map<const BufferNode*, LocalValue>& locals_;
};

// Adds `condition` to the predicate of every block under the statement.
class AddCondition : public Mutator {
 public:
  explicit AddCondition(Expr condition) : condition_(std::move(condition)) {}

 protected:
  Stmt mutate_Block(const Block& node, const Stmt&) override {
    Expr predicate = node.predicate ? logical(LogicalOp::And, node.predicate, condition_)
                                    : condition_;
    return make_block(node.name, node.iter_vars, node.bindings, predicate, node.init, node.body,
                      node.provenance);
  }

 private:
  Expr condition_;
};

// The single store of a block's body, or null.
const Store* body_store(const Block& block) { return block.body->as<Store>(); }

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_arg_shape(decision, kSignature, {1, 1, false});
  if (!reason.empty()) return ApplyResult::failure(reason);
  const DecisionArg& loop = *decision.positional()[0];
  if (loop.is_int()) {
    return ApplyResult::failure(
        usage_reason(kSignature, "LOOP is a name, got " + std::to_string(loop.as_int())));
  }
  return skip_masked(program, decision.target, loop.as_name());
}

}  // namespace

ApplyResult skip_masked(const ProgramPtr& program, std::string_view mask_block,
                        std::string_view loop_name) {
  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, mask_block, &reason);
  if (!path) return ApplyResult::failure(reason);
  const Block& mask = path->block();
  const std::optional<size_t> depth = path->loop_depth(loop_name);
  if (!depth) {
    return ApplyResult::failure("block " + mask.name + " has no loop " + std::string(loop_name) +
                                "; its loops are " + path->loop_names());
  }
  const For& loop = *path->stmts[*depth]->as<For>();
  if (loop.for_kind != ForKind::Serial) {
    return ApplyResult::failure("loop " + loop.var->name + " is bound to the grid; only serial "
                                "loops skip iterations");
  }

  // 1. The mask: X = select(condition, value, c).
  const Store* store = body_store(mask);
  const Select* select_node = store ? store->value->as<Select>() : nullptr;
  // The masked value folded to a constant (`-inf` is spelled as a negated infinity).
  const std::map<const BufferNode*, LocalValue> no_facts;
  const Expr masked_value =
      select_node ? MaskedSimplifier(no_facts).mutate(select_node->if_false) : nullptr;
  const FloatImm* masked = masked_value ? masked_value->as<FloatImm>() : nullptr;
  if (!masked) {
    return ApplyResult::failure("block " + mask.name + " does not store `select(condition, "
                                "value, constant)`; there is no mask to skip");
  }
  const BufferNode* tensor = store->buffer.get();

  // 2. Which tensors live only within one iteration: written in the loop before any read there,
  //    and read nowhere else.
  const std::vector<const Block*> body_blocks = collect_blocks(path->stmts[*depth]);
  const BlockOrder order(program->body);
  const auto under_loop = [&](const Block* block) { return contains_block(body_blocks, block); };
  const auto reduction_spans_iterations = [&](const Block& block) {
    for (size_t i = 0; i < block.iter_vars.size(); ++i) {
      if (block.iter_vars[i].kind != IterKind::Reduce) continue;
      for (size_t d = 0; d <= *depth; ++d) {
        const For* outer = path->stmts[d]->as<For>();
        if (outer && uses_var(block.bindings[i], outer->var.get())) return true;
      }
    }
    return false;
  };
  std::set<const BufferNode*> local;
  {
    std::set<const BufferNode*> written, read_first;
    for (const Block* block : body_blocks) {
      const Store* s = body_store(*block);
      if (!s) return ApplyResult::failure("block " + block->name + " is not a single store");
      const BufferNode* target = s->buffer.get();
      for (const BufferNode* input : block_accesses(*block).reads) {
        const bool self_with_init = input == target && block->init &&
                                    !reduction_spans_iterations(*block);
        if (!written.count(input) && !self_with_init) read_first.insert(input);
      }
      written.insert(target);
    }
    for (const BufferNode* buffer : written) {
      if (read_first.count(buffer) || buffer->role == BufferRole::Output) continue;
      bool read_outside = false;
      for (const Block* reader : order.blocks()) {
        if (!under_loop(reader) && block_accesses(*reader).reads_buffer(buffer)) {
          read_outside = true;
        }
      }
      if (!read_outside) local.insert(buffer);
    }
  }
  if (!local.count(tensor)) {
    return ApplyResult::failure("tensor " + tensor->name + " is read outside one iteration of " +
                                "loop " + loop.var->name + "; a skipped iteration would leave " +
                                "it unwritten");
  }

  // 3. With all of X equal to c, every block that writes a tensor outliving the iteration must
  //    store the value it already holds.
  std::map<const BufferNode*, LocalValue> facts;
  for (const Block* block : body_blocks) {
    const Store& s = *body_store(*block);
    const BufferNode* target = s.buffer.get();
    if (block == &mask) {
      facts[target] = {LocalValue::Kind::Constant, masked->value, nullptr};
      continue;
    }
    MaskedSimplifier simplifier(facts);
    const Expr value = simplifier.mutate(s.value);
    if (local.count(target)) {
      LocalValue fact;
      if (const auto* imm = value->as<FloatImm>()) {
        fact = {LocalValue::Kind::Constant, imm->value, nullptr};
      } else if (const auto* copied = value->as<Load>();
                 copied && !local.count(copied->buffer.get()) &&
                 copied->indices.size() == s.indices.size()) {
        bool same_indices = true;
        for (size_t i = 0; i < s.indices.size(); ++i) {
          same_indices &= same(copied->indices[i], s.indices[i]);
        }
        if (same_indices) fact = {LocalValue::Kind::CopyOf, 0.0, copied->buffer};
      }
      facts[target] = fact;
      continue;
    }
    const Expr unchanged = load(s.buffer, s.indices);
    if (!same(value, unchanged)) {
      return ApplyResult::failure(
          "block " + block->name + " would change " + target->name + " in an iteration where " +
          "all of " + tensor->name + " is " + print_expr(masked_value) + " (it would " +
          "store " + print_expr(value) + "), so such iterations cannot be skipped");
    }
  }

  // 4. The condition that an iteration's tile is not entirely masked: each conjunct of the
  //    mask's condition at its most favourable value over the variables that vary within the
  //    iteration (everything but the loop's own and the grid loops').
  VarReplacements bindings;
  for (size_t i = 0; i < mask.iter_vars.size(); ++i) {
    bindings[mask.iter_vars[i].var.get()] = mask.bindings[i];
  }
  std::map<const VarNode*, int64_t> extents;
  std::set<const VarNode*> kept{loop.var.get()};
  for (size_t d = 0; d < path->stmts.size(); ++d) {
    if (const For* f = path->stmts[d]->as<For>()) {
      extents[f->var.get()] = f->extent;
      if (d < *depth && is_grid(f->for_kind)) kept.insert(f->var.get());
    }
  }
  // A part of the mask's condition at its most favourable value: `condition` (null: always
  // true after dropping a conjunct that does not bound the loop), whether it involves the loop,
  // and whether it holds in the loop's first iteration for every value of the grid variables.
  struct Favourable {
    Expr condition;
    bool involves_loop = false;
    bool holds_first = true;
  };
  std::string refusal;
  // The smallest and largest value of `affine` over one iteration's tile: the variables other
  // than the kept ones at their extremes; nullopt (with the refusal) for a variable that is not
  // a loop around the mask.
  const auto tile_range = [&](const Affine& affine) -> std::optional<std::pair<Affine, Affine>> {
    Affine low, high;
    low.constant = high.constant = affine.constant;
    for (const auto& [var, c] : affine.coeffs) {
      auto extent = extents.find(var);
      if (extent == extents.end()) {
        refusal = "the mask condition of block " + mask.name + " uses " + var->name +
                  ", which is not a loop around it";
        return std::nullopt;
      }
      if (kept.count(var)) {
        for (Affine* side : {&low, &high}) {
          side->coeffs[var] = c;
          side->vars[var] = affine.vars.at(var);
        }
      } else {
        (c > 0 ? high : low).constant += c * (extent->second - 1);
      }
    }
    return std::pair{low, high};
  };
  // The largest (or smallest) value of an affine over the loops' extents, the loop's own
  // variable taken at 0 when `loop_at_zero`.
  const auto extreme = [&](const Affine& x, bool largest, bool loop_at_zero) {
    int64_t value = x.constant;
    for (const auto& [var, coeff] : x.coeffs) {
      if (loop_at_zero && var == loop.var.get()) continue;
      if ((coeff > 0) == largest) value += coeff * (extents.at(var) - 1);
    }
    return value;
  };
  // `a // c == b // c` (a document mask: a query sees the keys of its own block of c): some
  // element of the tile satisfies it where the blocks the tile's a and b reach overlap,
  // `lo(b) <= c * (hi(a) // c) + c - 1 and hi(b) >= c * (lo(a) // c)`, with the loop's variable
  // in b only (the sides are swapped when it is in a). The floor divisions are over values
  // known before the loop; tilize computes them there.
  const auto same_block_parts =
      [&](const Compare& equal) -> std::optional<std::pair<Favourable, Favourable>> {
    const auto* left = equal.a->as<Binary>();
    const auto* right = equal.b->as<Binary>();
    const auto* c_left = left ? left->b->as<IntImm>() : nullptr;
    const auto* c_right = right ? right->b->as<IntImm>() : nullptr;
    if (!c_left || !c_right || left->op != BinaryOp::FloorDiv ||
        right->op != BinaryOp::FloorDiv || c_left->value != c_right->value || c_left->value < 1) {
      return std::nullopt;
    }
    const int64_t c = c_left->value;
    std::optional<Affine> a = affine_of(left->a), b = affine_of(right->a);
    if (!a || !b) return std::nullopt;
    if (a->uses(loop.var.get())) std::swap(a, b);
    if (a->uses(loop.var.get())) {
      refusal = "the mask condition " + print_expr(equal.a) + " == " + print_expr(equal.b) +
                " of block " + mask.name + " uses loop " + loop.var->name + " on both sides";
      return std::nullopt;
    }
    const auto a_range = tile_range(*a);
    if (!a_range) return std::nullopt;
    const auto b_range = tile_range(*b);
    if (!b_range) return std::nullopt;
    const auto block_start = [&](const Affine& x) {  // c * (x // c)
      return binary(BinaryOp::Mul, int_imm(c),
                    binary(BinaryOp::FloorDiv, affine_expr(x), int_imm(c)));
    };
    // The upper part holds in the first iteration when b starts inside the first block there
    // and a is never negative; the lower part may not (the keys of the first iteration can all
    // lie before the query block).
    Favourable upper, lower;
    upper.involves_loop = lower.involves_loop = b->uses(loop.var.get());
    upper.holds_first = extreme(b_range->first, true, true) <= c - 1 &&
                        extreme(a_range->second, false, false) >= 0;
    lower.holds_first = false;
    upper.condition =
        scalar::compare(CompareOp::LE, affine_expr(b_range->first),
                        binary(BinaryOp::Add, block_start(a_range->second), int_imm(c - 1)));
    lower.condition = scalar::compare(CompareOp::GE, affine_expr(b_range->second),
                                      block_start(a_range->first));
    return std::pair{upper, lower};
  };
  std::function<std::optional<Favourable>(const Expr&)> favourable_of =
      [&](const Expr& condition) -> std::optional<Favourable> {
    if (const auto* logical_node = condition->as<Logical>()) {
      const std::optional<Favourable> a = favourable_of(logical_node->a);
      if (!a) return std::nullopt;
      const std::optional<Favourable> b = favourable_of(logical_node->b);
      if (!b) return std::nullopt;
      Favourable both;
      both.involves_loop = a->involves_loop || b->involves_loop;
      if (logical_node->op == LogicalOp::And) {
        // Some element satisfies both only if some satisfies each (a conservative keep).
        both.holds_first = a->holds_first && b->holds_first;
        both.condition = !a->condition   ? b->condition
                         : !b->condition ? a->condition
                                         : logical(LogicalOp::And, a->condition, b->condition);
      } else {
        // Some element satisfies either exactly when some satisfies one (prefix-LM's
        // `n <= m or n < P`: the key tile is at or below the diagonal, or in the prefix).
        both.holds_first = a->holds_first || b->holds_first;
        both.condition = !a->condition || !b->condition
                             ? nullptr
                             : logical(LogicalOp::Or, a->condition, b->condition);
      }
      return both;
    }
    const auto* compare = condition->as<Compare>();
    if (compare && compare->op == CompareOp::EQ) {
      if (const auto parts = same_block_parts(*compare)) {
        Favourable both;
        both.involves_loop = parts->first.involves_loop;
        both.holds_first = parts->first.holds_first && parts->second.holds_first;
        both.condition =
            logical(LogicalOp::And, parts->first.condition, parts->second.condition);
        return both;
      }
      if (!refusal.empty()) return std::nullopt;
    }
    const std::optional<Affine> a = compare ? affine_of(compare->a) : std::nullopt;
    const std::optional<Affine> b = compare ? affine_of(compare->b) : std::nullopt;
    if (!a || !b) {
      refusal = "the mask condition " + print_expr(condition) + " of block " + mask.name +
                " is not a comparison of affine indices";
      return std::nullopt;
    }
    Affine f;  // the comparison as f <= 0
    switch (compare->op) {
      case CompareOp::LE: f = a->plus(*b, -1); break;
      case CompareOp::LT: f = a->plus(*b, -1).plus(Affine{{}, 1, {}, {}}); break;
      case CompareOp::GE: f = b->plus(*a, -1); break;
      case CompareOp::GT: f = b->plus(*a, -1).plus(Affine{{}, 1, {}, {}}); break;
      default:
        refusal = "the mask condition " + print_expr(condition) + " of block " + mask.name +
                  " is an equality; only <, <=, >, >= bound tiles";
        return std::nullopt;
    }
    const auto range = tile_range(f);
    if (!range) return std::nullopt;
    const Affine& favourable = range->first;  // f at its smallest over the tile
    const int64_t first_iteration = extreme(favourable, true, true);
    Favourable result;
    result.involves_loop = favourable.uses(loop.var.get());
    result.holds_first = first_iteration <= 0;
    // favourable <= 0 written as (positive terms) <= (negative terms).
    Affine left, right;
    for (const auto& [var, c] : favourable.coeffs) {
      Affine& side = c > 0 ? left : right;
      side.coeffs[var] = c > 0 ? c : -c;
      side.vars[var] = favourable.vars.at(var);
    }
    (favourable.constant > 0 ? left : right).constant =
        favourable.constant > 0 ? favourable.constant : -favourable.constant;
    result.condition = scalar::compare(CompareOp::LE, affine_expr(left), affine_expr(right));
    return result;
  };

  // The top-level conjuncts each bound the loop on their own (tilize reads each as a start or
  // an end); one that does not involve the loop is dropped, which only keeps more iterations.
  std::vector<Expr> pending = {substitute(select_node->condition, bindings)};
  Expr keep;
  bool involves_loop = false;
  while (!pending.empty()) {
    const Expr condition = pending.back();
    pending.pop_back();
    if (const auto* both = condition->as<Logical>(); both && both->op == LogicalOp::And) {
      pending.push_back(both->a);
      pending.push_back(both->b);
      continue;
    }
    std::vector<Favourable> parts;
    const auto* equal = condition->as<Compare>();
    if (equal && equal->op == CompareOp::EQ) {
      // A block equality bounds the loop from both sides: two conjuncts for tilize.
      if (const auto both = same_block_parts(*equal)) parts = {both->first, both->second};
    }
    if (parts.empty()) {
      const std::optional<Favourable> part = favourable_of(condition);
      if (!part) return ApplyResult::failure(refusal);
      parts.push_back(*part);
    }
    for (const Favourable& part : parts) {
      if (!part.involves_loop || !part.condition) continue;
      involves_loop = true;
      Expr conjunct = part.condition;
      if (!part.holds_first) {
        // The first iteration can be entirely masked (a window's lower edge): it still runs,
        // since it runs the inits of the reductions in the loop; being masked, its body
        // changes nothing. Tilize starts the loop past the masked iterations when it has
        // hoisted those inits above the loop.
        conjunct = logical(LogicalOp::Or, conjunct,
                           scalar::compare(CompareOp::EQ, var_ref(loop.var), int_imm(0)));
      }
      keep = keep ? logical(LogicalOp::And, keep, conjunct) : conjunct;
    }
  }
  if (!involves_loop) {
    return ApplyResult::failure("the mask of block " + mask.name + " does not depend on loop " +
                                loop.var->name + "; no iteration of it is entirely masked");
  }

  // 5. Every block of the loop's body runs only where the tile is not entirely masked.
  AddCondition add(keep);
  const Stmt new_loop = add.mutate(path->stmts[*depth]);
  return ApplyResult::success(with_body(program, replace_at(*path, *depth, new_loop)));
}

DecisionKind skip_masked_decision() {
  return {
      "skip_masked",
      std::string(kSignature),
      "Skip the iterations of a loop in which a masked tensor is masked entirely.",
      "MASK stores `select(condition, value, c)` inside serial loop LOOP. The pass proves that "
      "an iteration in which all of MASK's tensor is c changes nothing that outlives it (running "
      "maxima, sums and accumulators keep their values: max(m, -inf) = m, exp(-inf) = 0, "
      "x * exp(m - m) = x), then predicates every block of LOOP's body on the tile not being "
      "entirely masked; tilize turns that condition into the loop's trip count. Values other "
      "than c are assumed finite. Example: on causal attention after rolling_update and "
      "compute_at, skip_masked(S, n_o) adds `n_o * 64 <= m_o * 128 + 127` to every block under "
      "the key-tile loop, so a query tile visits only the key tiles at or below the diagonal.",
      apply,
  };
}

}  // namespace nautilus::sched
