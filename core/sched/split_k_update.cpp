#include "core/sched/split_k_update.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "core/sched/buffer_rewrite.h"
#include "core/sched/decision_args.h"
#include "core/sched/finite_stand_in.h"
#include "core/sched/loop_nest.h"
#include "core/sched/region.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "split_k_update(BLOCK, AXIS, splits=S)";

double identity_of(BinaryOp op) {
  const double inf = std::numeric_limits<double>::infinity();
  return op == BinaryOp::Max ? -inf : op == BinaryOp::Min ? inf : 0.0;
}

bool same_var_indices(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const VarRef* x = a[i]->as<VarRef>();
    const VarRef* y = b[i]->as<VarRef>();
    if (!x || !y || x->var != y->var) return false;
  }
  return true;
}

bool has_reduce_var(const Block& block) {
  return std::any_of(block.iter_vars.begin(), block.iter_vars.end(),
                     [](const IterVar& iter) { return iter.kind == IterKind::Reduce; });
}

// How one state (a buffer written under the reduction loop) changes there.
struct State {
  Buffer buffer;
  Buffer part;                          // buffer[AXIS_s, ...] per split
  const BufferNode* copy_of = nullptr;  // set for `X = Y` copies of running values (Mx_prev)
  const Block* update = nullptr;        // X = X op value, a reduction
  BinaryOp op = BinaryOp::Add;
  const Block* rescale = nullptr;       // X = X * factor, repairing X when running values move
  Expr factor;
};

// The exponent of a rescale as Σ coefficient · running value + constant, where a copy Y_prev
// counts as Y: the factor is 1 when no running value moved iff every coefficient cancels.
bool cancels_when_unchanged(const Expr& expr, double scale,
                            const std::map<const BufferNode*, const BufferNode*>& copy_of,
                            std::map<std::string, double>* terms, double* constant) {
  if (const FloatImm* imm = expr->as<FloatImm>()) {
    *constant += scale * imm->value;
    return true;
  }
  if (const Cast* c = expr->as<Cast>()) {
    return is_float(c->dtype) && is_float(c->value->dtype) &&
           cancels_when_unchanged(c->value, scale, copy_of, terms, constant);
  }
  if (const Load* l = expr->as<Load>()) {
    auto source = copy_of.find(l->buffer.get());
    std::string key = source != copy_of.end() ? source->second->name : l->buffer->name;
    for (const Expr& index : l->indices) key += "," + print_expr(index);
    (*terms)[key] += scale;
    return true;
  }
  if (const Unary* u = expr->as<Unary>()) {
    return u->op == UnaryOp::Neg && cancels_when_unchanged(u->a, -scale, copy_of, terms, constant);
  }
  // A running value's finite stand-in is the value wherever the factor matters (it is finite).
  if (Expr value = finite_stand_in_value(expr)) {
    return cancels_when_unchanged(value, scale, copy_of, terms, constant);
  }
  if (const Binary* b = expr->as<Binary>()) {
    switch (b->op) {
      case BinaryOp::Add:
      case BinaryOp::Sub:
        return cancels_when_unchanged(b->a, scale, copy_of, terms, constant) &&
               cancels_when_unchanged(b->b, b->op == BinaryOp::Sub ? -scale : scale, copy_of,
                                      terms, constant);
      case BinaryOp::Mul:
        if (const FloatImm* c = b->a->as<FloatImm>()) {
          return cancels_when_unchanged(b->b, scale * c->value, copy_of, terms, constant);
        }
        if (const FloatImm* c = b->b->as<FloatImm>()) {
          return cancels_when_unchanged(b->a, scale * c->value, copy_of, terms, constant);
        }
        return false;
      case BinaryOp::Div:
        if (const FloatImm* c = b->b->as<FloatImm>(); c && c->value != 0.0) {
          return cancels_when_unchanged(b->a, scale / c->value, copy_of, terms, constant);
        }
        return false;
      default:
        return false;
    }
  }
  return false;
}

// Whether `factor` is a product of exp / exp2 of exponents that vanish when every running value
// equals its copy: then factor(a, b) · factor(b, c) = factor(a, c), so a rescale applied per
// step can equally be applied once per split.
bool is_exponential_of_differences(const Expr& factor,
                                   const std::map<const BufferNode*, const BufferNode*>& copy_of) {
  if (const Binary* b = factor->as<Binary>(); b && b->op == BinaryOp::Mul) {
    return is_exponential_of_differences(b->a, copy_of) &&
           is_exponential_of_differences(b->b, copy_of);
  }
  const Unary* u = factor->as<Unary>();
  if (!u || (u->op != UnaryOp::Exp && u->op != UnaryOp::Exp2)) return false;
  std::map<std::string, double> terms;
  double constant = 0.0;
  if (!cancels_when_unchanged(u->a, 1.0, copy_of, &terms, &constant)) return false;
  if (std::abs(constant) > 1e-12) return false;
  return std::all_of(terms.begin(), terms.end(),
                     [](const auto& term) { return std::abs(term.second) <= 1e-12; });
}

class SplitKUpdate {
 public:
  SplitKUpdate(const ProgramPtr& program, std::string_view block, std::string_view axis,
               int64_t splits)
      : program_(program), block_name_(block), axis_(axis), splits_(splits) {}

  ApplyResult run();

 private:
  bool fail(std::string reason) {
    if (reason_.empty()) reason_ = std::move(reason);
    return false;
  }
  bool find_reduction_loop();
  bool iteration_local(const Block& block) const;
  bool read_nest();
  bool hoist_inits();
  bool classify_states();
  bool order_states();
  Stmt build_partial();
  Stmt guard_infinities(const Block& block) const;
  std::optional<Stmt> build_combine();

  bool is_common(const VarNode* var) const {
    return std::any_of(common_.begin(), common_.end(),
                       [&](const For* loop) { return loop->var.get() == var; });
  }
  const State* find_state(const BufferNode* buffer) const {
    for (const State& state : states_) {
      if (state.buffer.get() == buffer) return &state;
    }
    return nullptr;
  }
  State* state_of(const BufferNode* buffer) {
    for (State& state : states_) {
      if (state.buffer.get() == buffer) return &state;
    }
    return nullptr;
  }

  const ProgramPtr& program_;
  const std::string block_name_, axis_;
  const int64_t splits_;
  std::string reason_;

  BlockPath path_;
  size_t top_ = 0;        // index into path_.stmts of the top-level statement
  size_t loop_depth_ = 0; // index of the reduction loop
  const For* loop_ = nullptr;
  std::vector<const For*> common_;  // the loops around the reduction loop, outermost first
  std::vector<Stmt> prologue_, epilogue_;
  Stmt loop_body_;  // the reduction loop's body, inits hoisted
  std::vector<const Block*> under_;  // blocks under the reduction loop (as in the input)
  // Blocks under the loop that are no state: each step writes its own elements (a producer
  // computed at the loop, the scores of one key tile) and only the loop reads them.
  std::set<const Block*> local_blocks_;
  std::optional<BlockOrder> order_;  // the program's blocks and accesses, built by read_nest
  std::vector<State> states_;
  std::vector<size_t> combine_order_;  // indices into states_ of the states to combine
  int64_t chunk_ = 0;
  std::string split_name_;
  std::set<std::string> block_names_;
};

bool SplitKUpdate::find_reduction_loop() {
  std::optional<BlockPath> path = find_block(*program_, block_name_, &reason_);
  if (!path) return false;
  path_ = std::move(*path);
  const Block& block = path_.block();
  auto axis = std::find_if(block.iter_vars.begin(), block.iter_vars.end(),
                           [&](const IterVar& iter) { return iter.var->name == axis_; });
  if (axis == block.iter_vars.end()) {
    std::string names;
    for (const IterVar& iter : block.iter_vars) names += (names.empty() ? "" : ", ") + iter.var->name;
    return fail("block " + block_name_ + " has no axis " + axis_ + "; its axes are " + names);
  }
  if (axis->kind != IterKind::Reduce) {
    return fail("axis " + axis_ + " of block " + block_name_ +
                " is spatial; split_k_update splits a reduction axis");
  }
  const Expr& binding = block.bindings[static_cast<size_t>(axis - block.iter_vars.begin())];
  for (size_t depth = 0; depth < path_.stmts.size() && !loop_; ++depth) {
    const For* loop = path_.stmts[depth]->as<For>();
    if (loop && uses_var(binding, loop->var.get())) {
      loop_ = loop;
      loop_depth_ = depth;
    }
  }
  if (!loop_) {
    return fail("axis " + axis_ + " of block " + block_name_ + " is bound to " +
                print_expr(binding) + ", which uses no loop");
  }
  if (is_grid(loop_->for_kind)) {
    return fail("loop " + loop_->var->name + " is bound to " + for_kind_name(loop_->for_kind) +
                "; apply split_k_update before bind");
  }
  if (splits_ < 2) {
    return fail("splits must be at least 2, got " + std::to_string(splits_));
  }
  const int64_t steps = loop_->extent;
  if (splits_ > steps) {
    return fail("loop " + loop_->var->name + " has " + std::to_string(steps) +
                " steps, fewer than splits=" + std::to_string(splits_));
  }
  chunk_ = (steps + splits_ - 1) / splits_;
  if ((splits_ - 1) * chunk_ >= steps) {
    int64_t most = splits_ - 1;
    while (most > 2 && (most - 1) * ((steps + most - 1) / most) >= steps) --most;
    return fail("splits=" + std::to_string(splits_) + " of the " + std::to_string(steps) +
                " steps of loop " + loop_->var->name + " (" + std::to_string(chunk_) +
                " per split) would leave the last split empty; use splits=" +
                std::to_string(most) + " or fewer");
  }
  return true;
}

// A block whose stored element moves with the reduction loop (a spatial axis bound through the
// loop's variable) and whose tensor no block outside the loop reads: every split computes and
// consumes its own elements, so the block needs no partial copy and no combine, and its own
// init (a reduction of its own inside one step, like a score's sum over d) stays where it is.
// Example: after compute_at(S, Mx, n_o), S[b, h, n_o * 64 + n] = sum(d) Q * K is computed per
// key tile inside the loop being split.
bool SplitKUpdate::iteration_local(const Block& block) const {
  const Store* store = block.body->as<Store>();
  if (!store) return false;
  bool moves = false;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    const bool uses_loop = uses_var(block.bindings[i], loop_->var.get());
    if (block.iter_vars[i].kind == IterKind::Reduce) {
      if (uses_loop) return false;  // it reduces along the loop: a state
      continue;
    }
    if (!uses_loop) continue;
    for (const Expr& index : store->indices) {
      if (uses_var(index, block.iter_vars[i].var.get())) moves = true;
    }
  }
  if (!moves) return false;
  for (const Block* reader : order_->readers(store->buffer.get())) {
    if (!contains_block(under_, reader)) return false;
  }
  const std::vector<const Block*> writers = order_->writers(store->buffer.get());
  return writers.size() == 1 && writers.front() == &block;
}

// The statements around the reduction loop: perfectly nested common loops, then the prologue,
// the loop and the epilogue as the children of the innermost common loop.
bool SplitKUpdate::read_nest() {
  top_ = path_.stmts.front()->as<Seq>() ? 1 : 0;
  const Seq* parent = nullptr;
  for (size_t depth = top_; depth < loop_depth_; ++depth) {
    const Stmt& stmt = path_.stmts[depth];
    if (const For* loop = stmt->as<For>()) {
      if (is_grid(loop->for_kind)) {
        return fail("loop " + loop->var->name + " is bound to " + for_kind_name(loop->for_kind) +
                    "; apply split_k_update before bind");
      }
      common_.push_back(loop);
    } else if (depth + 1 == loop_depth_) {
      parent = stmt->as<Seq>();
    } else {
      return fail("loop " + loop_->var->name + " is not in a perfect nest of loops with its " +
                  "top-level statement; split_k_update splits a nest as lowering or "
                  "rolling_update leaves it");
    }
  }
  if (parent) {
    const auto self = std::find(parent->stmts.begin(), parent->stmts.end(),
                                path_.stmts[loop_depth_]);
    prologue_.assign(parent->stmts.begin(), self);
    epilogue_.assign(self + 1, parent->stmts.end());
  }
  under_ = collect_blocks(path_.stmts[loop_depth_]);
  order_.emplace(program_->body);
  std::set<const BufferNode*> state_set;
  for (const Block* block : under_) {
    const BlockAccesses accesses = block_accesses(*block);
    if (accesses.writes.size() != 1) {
      return fail("block " + block->name + " writes " + std::to_string(accesses.writes.size()) +
                  " tensors; split_k_update needs one per block");
    }
    if (iteration_local(*block)) {
      local_blocks_.insert(block);
      continue;
    }
    if (state_set.insert(accesses.writes.front()).second) {
      const Buffer* buffer = program_->find_buffer(accesses.writes.front()->name);
      states_.push_back(State{*buffer, nullptr, nullptr, nullptr, BinaryOp::Add, nullptr, nullptr});
    }
  }
  for (const Block* block : under_) {
    for (const Expr& binding : block->bindings) {
      if (uses_var(binding, loop_->var.get()) && !affine_form(binding)) {
        return fail("block " + block->name + " is bound to " + print_expr(binding) +
                    ", which is not an affine function of loop " + loop_->var->name);
      }
    }
  }
  const std::string where = "loop " + loop_->var->name;
  for (const Stmt& stmt : prologue_) {
    for (const Block* block : collect_blocks(stmt)) {
      for (const BufferNode* written : block_accesses(*block).writes) {
        if (!state_set.count(written)) {
          return fail("block " + block->name + " before " + where + " writes " + written->name +
                      ", which the loop does not update; apply split_k_update before moving "
                      "other work into this nest");
        }
      }
    }
  }
  std::set<const BufferNode*> epilogue_writes;
  for (const Stmt& stmt : epilogue_) {
    for (const Block* block : collect_blocks(stmt)) {
      for (const BufferNode* written : block_accesses(*block).writes) {
        if (state_set.count(written)) {
          return fail("block " + block->name + " after " + where + " writes " + written->name +
                      ", which the loop updates; its partial results could not be merged");
        }
        epilogue_writes.insert(written);
      }
    }
  }
  for (const Block* block : under_) {
    for (const BufferNode* read : block_accesses(*block).reads) {
      if (epilogue_writes.count(read)) {
        return fail("block " + block->name + " in " + where + " reads " + read->name +
                    ", which is written after the loop");
      }
    }
  }
  return true;
}

// A reduction with an init (a plain reduction as lowered) starts its state in the block; the
// split needs it before the loop, once per split, so it becomes a block of its own there.
bool SplitKUpdate::hoist_inits() {
  struct InitDropper : Mutator {
    const std::set<std::string>* local_names;
    Stmt mutate_Block(const Block& node, const Stmt& self) override {
      if (!node.init || local_names->count(node.name)) return self;
      return make_block(node.name, node.iter_vars, node.bindings, node.predicate, nullptr,
                        node.body, node.provenance);
    }
  } dropper;
  std::set<std::string> local_names;
  for (const Block* block : local_blocks_) local_names.insert(block->name);
  dropper.local_names = &local_names;
  loop_body_ = dropper.mutate(loop_->body);
  std::set<std::string> taken = block_names(program_->body);
  for (const Block* block : under_) {
    if (!block->init || local_blocks_.count(block)) continue;
    // The loops inside the reduction loop that iterate spatial axes only (a tiled product's
    // m_i and n_i): the init runs over them too, in copies of them before the loop.
    std::vector<const For*> inner_spatial;
    std::string unfound;
    if (std::optional<BlockPath> path = find_block(*program_, block->name, &unfound)) {
      for (const For* loop : path->loops()) {
        if (loop == loop_ || is_common(loop->var.get())) continue;
        bool reduces = false;
        for (size_t i = 0; i < block->iter_vars.size(); ++i) {
          reduces |= block->iter_vars[i].kind == IterKind::Reduce &&
                     uses_var(block->bindings[i], loop->var.get());
        }
        // Only loops the init's position depends on: any other would store it again.
        bool positions = false;
        for (size_t i = 0; i < block->iter_vars.size(); ++i) {
          positions |= block->iter_vars[i].kind != IterKind::Reduce &&
                       uses_var(block->bindings[i], loop->var.get());
        }
        if (!reduces && positions) inner_spatial.push_back(loop);
      }
    }
    const auto in_init_loops = [&](const VarNode* v) {
      return is_common(v) || std::any_of(inner_spatial.begin(), inner_spatial.end(),
                                         [&](const For* loop) { return loop->var.get() == v; });
    };
    std::vector<IterVar> iter_vars;
    std::vector<Expr> bindings;
    VarReplacements rename, copies;
    std::vector<Var> copy_vars;
    for (const For* loop : inner_spatial) {
      copy_vars.push_back(make_var(loop->var->name));
      copies[loop->var.get()] = var_ref(copy_vars.back());
    }
    for (size_t i = 0; i < block->iter_vars.size(); ++i) {
      const IterVar& iter = block->iter_vars[i];
      const std::vector<const VarNode*> vars = referenced_vars(block->bindings[i]);
      const bool inner = std::none_of(vars.begin(), vars.end(),
                                      [&](const VarNode* v) { return is_common(v); });
      if (iter.kind == IterKind::Reduce) {
        if (!inner) {
          return fail("reduction axis " + iter.var->name + " of block " + block->name +
                      " is bound to " + print_expr(block->bindings[i]) + ", which uses loops " +
                      "outside loop " + loop_->var->name);
        }
        continue;
      }
      if (!std::all_of(vars.begin(), vars.end(), in_init_loops)) {
        return fail("spatial axis " + iter.var->name + " of block " + block->name +
                    " is bound to " + print_expr(block->bindings[i]) + ", which uses loops "
                    "inside loop " + loop_->var->name + " that also iterate a reduction; its "
                    "start cannot move before the loop");
      }
      Var var = make_var(iter.var->name);
      rename[iter.var.get()] = var_ref(var);
      iter_vars.push_back({var, iter.extent, IterKind::Spatial});
      bindings.push_back(substitute(block->bindings[i], copies));
    }
    Expr predicate;
    for (const Expr& part : conjuncts(block->predicate)) {
      const std::vector<const VarNode*> vars = referenced_vars(part);
      if (std::all_of(vars.begin(), vars.end(), in_init_loops)) {
        predicate = conjunction(predicate, substitute(part, copies));
      } else if (std::any_of(vars.begin(), vars.end(), in_init_loops)) {
        return fail("the predicate " + print_expr(part) + " of block " + block->name +
                    " mixes loops outside and inside loop " + loop_->var->name);
      }
    }
    Stmt init = make_block(fresh_name(block->name + "_init", &taken), iter_vars, bindings, predicate,
                           nullptr, substitute_everywhere(block->init, rename), block->provenance);
    for (size_t k = inner_spatial.size(); k-- > 0;) {
      init = make_for(copy_vars[k], inner_spatial[k]->extent, init, inner_spatial[k]->provenance);
    }
    prologue_.push_back(init);
  }
  return true;
}

bool SplitKUpdate::classify_states() {
  const std::string where = "loop " + loop_->var->name;
  std::vector<const Block*> prologue_blocks;
  for (const Stmt& stmt : prologue_) {
    for (const Block* block : collect_blocks(stmt)) prologue_blocks.push_back(block);
  }
  auto writers_of = [&](const std::vector<const Block*>& blocks, const BufferNode* buffer) {
    std::vector<const Block*> result;
    for (const Block* block : blocks) {
      if (block_accesses(*block).writes_buffer(buffer)) result.push_back(block);
    }
    return result;
  };
  for (State& state : states_) {
    const BufferNode* buffer = state.buffer.get();
    const std::vector<const Block*> writers = writers_of(under_, buffer);
    const std::vector<const Block*> inits = writers_of(prologue_blocks, buffer);
    // A copy of a running value from before the step (rolling_update's Mx_prev).
    if (writers.size() == 1 && inits.empty() && !has_reduce_var(*writers[0])) {
      const Store* store = writers[0]->body->as<Store>();
      const Load* source = store ? store->value->as<Load>() : nullptr;
      if (source && source->buffer.get() != buffer && state_of(source->buffer.get()) &&
          same_var_indices(store->indices, source->indices)) {
        state.copy_of = source->buffer.get();
        continue;
      }
    }
    for (const Block* writer : writers) {
      std::string reason;
      if (!store_indexing(*writer, &reason)) return fail(reason);
      const Store* store = writer->body->as<Store>();
      const Binary* value = store ? store->value->as<Binary>() : nullptr;
      const Load* self = value ? value->a->as<Load>() : nullptr;
      const bool reads_self =
          self && self->buffer.get() == buffer && same_var_indices(self->indices, store->indices);
      if (has_reduce_var(*writer)) {
        if (state.update) {
          return fail("state " + buffer->name + " is updated by blocks " + state.update->name +
                      " and " + writer->name + " in " + where +
                      "; split_k_update merges one update per state");
        }
        if (!reads_self || (value->op != BinaryOp::Add && value->op != BinaryOp::Max &&
                            value->op != BinaryOp::Min)) {
          return fail("block " + writer->name + " does not update " + buffer->name +
                      " as a sum, max or min (X = X op value); its partial results could "
                      "not be merged");
        }
        state.update = writer;
        state.op = value->op;
      } else {
        if (state.rescale) {
          return fail("state " + buffer->name + " is rescaled by blocks " +
                      state.rescale->name + " and " + writer->name + " in " + where);
        }
        if (!reads_self || value->op != BinaryOp::Mul) {
          return fail("block " + writer->name + " writes state " + buffer->name +
                      " other than by a rescale X = X * factor; its partial results could "
                      "not be merged");
        }
        state.rescale = writer;
        state.factor = value->b;
      }
    }
    if (!state.update) {
      return fail("state " + buffer->name + " is only rescaled in " + where +
                  ", never updated");
    }
    if (inits.size() != 1) {
      return fail(inits.empty() ? "no block before " + where + " starts state " + buffer->name
                                : "state " + buffer->name + " is started by " +
                                      std::to_string(inits.size()) + " blocks before " + where);
    }
    const Store* start = inits[0]->body->as<Store>();
    const FloatImm* start_value = start ? start->value->as<FloatImm>() : nullptr;
    if (!start_value || start_value->value != identity_of(state.op)) {
      return fail("state " + buffer->name + " starts at " +
                  (start ? print_expr(start->value) : std::string("a statement")) +
                  " before " + where + ", not at the identity of its " +
                  binary_op_name(state.op) + "; the partial results could not be merged");
    }
  }
  std::map<const BufferNode*, const BufferNode*> copy_of;
  for (const State& state : states_) {
    if (state.copy_of) copy_of[state.buffer.get()] = state.copy_of;
  }
  std::set<const BufferNode*> sources;
  for (const auto& [copy, source] : copy_of) sources.insert(source);
  for (const State& state : states_) {
    if (state.copy_of) continue;
    const Expr& value = state.update->body->as<Store>()->value->as<Binary>()->b;
    if (state.rescale) {
      if (state.op != BinaryOp::Add) {
        return fail("state " + state.buffer->name + " is a " + binary_op_name(state.op) +
                    " with a rescale; only sums can be repaired");
      }
      for (const BufferNode* read : buffers_used(state.rescale->body)) {
        if (read != state.buffer.get() && !copy_of.count(read) && !sources.count(read)) {
          return fail("the rescale of state " + state.buffer->name + " reads " + read->name +
                      ", which is neither a running value with a copy from before the step "
                      "nor such a copy");
        }
      }
      if (!is_exponential_of_differences(state.factor, copy_of)) {
        return fail("the rescale " + print_expr(state.factor) + " of state " +
                    state.buffer->name + " is not a product of exponentials of differences "
                    "of running values and their copies; it cannot merge partial results");
      }
      continue;
    }
    for (const BufferNode* read : buffers_used(make_store(state.buffer, {}, value))) {
      if (read != state.buffer.get() && state_of(read)) {
        return fail("block " + state.update->name + " updates " + state.buffer->name +
                    " with values that read " + read->name + ", which changes along loop " +
                    loop_->var->name + ", and nothing rescales it; its partial results could "
                    "not be merged (apply rolling_update for a repaired form)");
      }
    }
  }
  // Copies serve one step; nothing outside the loop may read them.
  for (const State& state : states_) {
    if (!state.copy_of) continue;
    for (const Block* reader : order_->readers(state.buffer.get())) {
      if (!contains_block(under_, reader)) {
        return fail("block " + reader->name + " reads " + state.buffer->name +
                    " outside loop " + loop_->var->name + "; split_k_update cannot merge it");
      }
    }
  }
  return true;
}

// States in an order where each comes after the states its rescale reads (combined first).
bool SplitKUpdate::order_states() {
  std::vector<int> mark(states_.size(), 0);
  std::function<bool(size_t)> visit = [&](size_t i) {
    if (mark[i] == 2) return true;
    if (mark[i] == 1) return false;
    mark[i] = 1;
    if (states_[i].rescale) {
      for (const BufferNode* read : buffers_used(states_[i].rescale->body)) {
        const State* source = state_of(read);
        if (!source || read == states_[i].buffer.get()) continue;
        const BufferNode* running = source->copy_of ? source->copy_of : read;
        for (size_t j = 0; j < states_.size(); ++j) {
          if (states_[j].buffer.get() == running && j != i && !visit(j)) return false;
        }
      }
    }
    mark[i] = 2;
    if (!states_[i].copy_of) combine_order_.push_back(i);
    return true;
  };
  for (size_t i = 0; i < states_.size(); ++i) {
    if (!visit(i)) return fail("the rescales of the states of loop " + loop_->var->name +
                               " depend on each other in a cycle");
  }
  return true;
}

// Loads in `expr` of the buffers in `buffers`, each once (by text), in order.
std::vector<const Load*> loads_of(const Expr& expr, const std::set<const BufferNode*>& buffers) {
  struct Collector : Visitor {
    const std::set<const BufferNode*>* buffers;
    std::vector<const Load*> found;
    std::set<std::string> seen;
    void visit_Load(const Load& node) override {
      if (buffers->count(node.buffer.get()) && seen.insert(print_expr(load(node.buffer, node.indices))).second) {
        found.push_back(&node);
      }
      Visitor::visit_Load(node);
    }
  } collector;
  collector.buffers = &buffers;
  collector.visit(expr);
  return collector.found;
}

// A split that has seen only −inf so far (a causal row whose keys in this split are all masked)
// would compute exp(−inf − (−inf)) = NaN where the unsplit loop, whose first step always sees
// data, never does. The guards make such steps contribute nothing; they change no finite value:
// a rescale whose running values did not move is exactly 1, and a term measured against a
// running max of −inf is exp(−inf) = 0 for any finite data.
Stmt SplitKUpdate::guard_infinities(const Block& block) const {
  std::set<const BufferNode*> copies, sources;
  for (const State& state : states_) {
    if (state.copy_of) {
      copies.insert(state.buffer.get());
      sources.insert(state.copy_of);
    }
  }
  for (const State& state : states_) {
    if (!state.rescale) continue;
    const Store* store = block.body->as<Store>();
    const Binary* value = store ? store->value->as<Binary>() : nullptr;
    if (!value) continue;
    if (block.name == state.rescale->name) {
      Expr unchanged;
      for (const Load* copy : loads_of(value->b, copies)) {
        const Buffer& running = find_state(find_state(copy->buffer.get())->copy_of)->buffer;
        unchanged = conjunction(unchanged, compare(CompareOp::EQ, load(copy->buffer, copy->indices),
                                                   load(running, copy->indices)));
      }
      if (!unchanged) return block.body;
      return make_store(store->buffer, store->indices,
                        binary(BinaryOp::Mul, value->a,
                               select(unchanged, float_imm(1.0, value->b->dtype), value->b)),
                        store->provenance);
    }
    if (block.name == state.update->name) {
      Expr nothing_seen;
      for (const Load* running : loads_of(value->b, sources)) {
        Expr is_empty = compare(CompareOp::EQ, load(running->buffer, running->indices),
                                float_imm(-std::numeric_limits<double>::infinity(),
                                          running->dtype));
        nothing_seen = nothing_seen ? logical(LogicalOp::Or, nothing_seen, is_empty) : is_empty;
      }
      if (!nothing_seen) return block.body;
      return make_store(store->buffer, store->indices,
                        binary(value->op, value->a,
                               select(nothing_seen, float_imm(0.0, value->b->dtype), value->b)),
                        store->provenance);
    }
  }
  return block.body;
}

Stmt SplitKUpdate::build_partial() {
  Var split = make_var(split_name_);
  const Expr step = index_add(index_mul(var_ref(split), chunk_), var_ref(loop_->var));
  const Expr guard = chunk_ * splits_ > loop_->extent ? index_lt(step, loop_->extent) : nullptr;
  const VarReplacements to_global_step = {{loop_->var.get(), step}};

  // Every block gains the split as its first iteration variable and reads and writes its states
  // per split. Blocks under the loop keep their bindings, local to the split, so that the split
  // loop stays a spatial loop of every block (the grid dimension of split-K); their bodies see
  // the global position (x + c · chunk · split for a binding c · step + ...), and their
  // predicates mask by global position and cut the last split's overhanging steps.
  struct PerSplit : Mutator {
    SplitKUpdate* self;
    Var split;
    bool in_loop = false;
    const VarReplacements* to_global_step;
    Expr guard;
    Stmt mutate_Block(const Block& node, const Stmt&) override {
      Var split_iter = make_var(self->split_name_);
      std::vector<IterVar> iter_vars = {{split_iter, self->splits_, IterKind::Spatial}};
      iter_vars.insert(iter_vars.end(), node.iter_vars.begin(), node.iter_vars.end());
      std::vector<Expr> bindings = {var_ref(split)};
      bindings.insert(bindings.end(), node.bindings.begin(), node.bindings.end());
      Expr predicate = node.predicate;
      Stmt init = node.init;
      Stmt body = node.body;
      if (in_loop) {
        if (predicate) predicate = simplify_index(substitute(predicate, *to_global_step));
        predicate = conjunction(predicate, guard);
        VarReplacements to_global;
        for (size_t i = 0; i < node.iter_vars.size(); ++i) {
          const std::optional<scalar::Affine> form = affine_form(node.bindings[i]);
          for (const auto& [var, coefficient] : form ? form->terms() : scalar::Affine{}.terms()) {
            if (var != self->loop_->var.get()) continue;
            to_global[node.iter_vars[i].var.get()] =
                index_add(var_ref(node.iter_vars[i].var),
                          index_mul(var_ref(split_iter), coefficient * self->chunk_));
          }
        }
        body = substitute_everywhere(self->guard_infinities(node), to_global);
        init = substitute_everywhere(init, to_global);
      }
      RetargetMap map;
      for (const State& state : self->states_) {
        map[state.buffer.get()] = {state.part, [split_iter](const std::vector<Expr>& indices) {
                                     std::vector<Expr> result = {var_ref(split_iter)};
                                     result.insert(result.end(), indices.begin(), indices.end());
                                     return result;
                                   }};
      }
      return make_block(fresh_name(node.name + "_part", &self->block_names_), iter_vars,
                        bindings, predicate, init ? retarget_accesses(init, map) : nullptr,
                        retarget_accesses(body, map), node.provenance);
    }
  } per_split;
  per_split.self = this;
  per_split.split = split;
  per_split.to_global_step = &to_global_step;
  per_split.guard = guard;

  std::vector<Stmt> body;
  for (const Stmt& stmt : prologue_) body.push_back(per_split.mutate(stmt));
  per_split.in_loop = true;
  body.push_back(make_for(loop_->var, chunk_, per_split.mutate(loop_body_), loop_->provenance,
                          loop_->for_kind));
  // The split loop goes outside the common loops unless one of them is bound to the grid
  // already: every loop of the partial nest then stays spatial and outside any tile a later
  // decision makes of the common loops (a head tile of a decode kernel), so the splits can be
  // bound to the grid beside the tiles.
  const bool common_bound = std::any_of(common_.begin(), common_.end(), [](const For* loop) {
    return loop->for_kind != ForKind::Serial;
  });
  Stmt nest = body.size() == 1 ? body.front() : make_seq(body, loop_->provenance);
  if (common_bound) nest = make_for(split, splits_, nest, loop_->provenance);
  for (size_t i = common_.size(); i-- > 0;) {
    nest = make_for(common_[i]->var, common_[i]->extent, nest, common_[i]->provenance,
                    common_[i]->for_kind);
  }
  if (!common_bound) nest = make_for(split, splits_, nest, loop_->provenance);
  return nest;
}

std::optional<Stmt> SplitKUpdate::build_combine() {
  VarReplacements to_new_common;
  std::vector<Var> new_common;
  for (const For* loop : common_) {
    new_common.push_back(make_var(loop->var->name));
    to_new_common[loop->var.get()] = var_ref(new_common.back());
  }
  std::map<const VarNode*, const For*> inner_loops;
  {
    std::function<void(const Stmt&)> walk = [&](const Stmt& stmt) {
      if (const For* loop = stmt->as<For>()) {
        inner_loops[loop->var.get()] = loop;
        walk(loop->body);
      } else if (const Seq* seq = stmt->as<Seq>()) {
        for (const Stmt& child : seq->stmts) walk(child);
      }
    };
    walk(loop_->body);
  }

  std::vector<Stmt> statements;
  for (size_t index : combine_order_) {
    const State& state = states_[index];
    const Block& update = *state.update;
    std::string reason;
    const StoreIndexing indexing = *store_indexing(update, &reason);
    // A nest of its own: only the common loops' names are in scope.
    std::set<std::string> taken;
    for (const For* loop : common_) taken.insert(loop->var->name);
    std::vector<IterVar> iter_vars;
    std::vector<Expr> bindings;
    std::vector<std::pair<Var, int64_t>> loops;  // outermost first
    std::map<size_t, Expr> new_iter;             // update's iteration variable → new one
    // The common loops, and each loop inside the reduction loop that a spatial axis runs over
    // (one loop of its extent, or a tile's inner loop beside common ones: n_o * 16 + n_i),
    // recreated for the combine.
    VarReplacements to_combine_loops = to_new_common;
    std::set<const VarNode*> spatial_loops;
    for (size_t i = 0; i < update.iter_vars.size(); ++i) {
      const IterVar& iter = update.iter_vars[i];
      if (iter.kind != IterKind::Spatial) continue;
      Var var = make_var(iter.var->name);
      iter_vars.push_back({var, iter.extent, IterKind::Spatial});
      new_iter[i] = var_ref(var);
      const Expr& binding = update.bindings[i];
      for (const VarNode* v : referenced_vars(binding)) {
        if (is_common(v) || to_combine_loops.count(v)) continue;
        auto loop = inner_loops.find(v);
        if (loop == inner_loops.end()) {
          fail("spatial axis " + iter.var->name + " of block " + update.name + " is bound to " +
               print_expr(binding) + "; split_k_update needs the loops of a spatial axis "
               "inside loop " + loop_->var->name + " to run over that axis alone");
          return std::nullopt;
        }
        spatial_loops.insert(v);
        Var loop_var = make_var(fresh_name(v->name, &taken));
        loops.emplace_back(loop_var, loop->second->extent);
        to_combine_loops[v] = var_ref(loop_var);
      }
      bindings.push_back(substitute(binding, to_combine_loops));
    }
    Expr predicate;
    for (const Expr& part : conjuncts(update.predicate)) {
      const std::vector<const VarNode*> vars = referenced_vars(part);
      if (std::all_of(vars.begin(), vars.end(),
                      [&](const VarNode* v) { return to_combine_loops.count(v) > 0; })) {
        predicate = conjunction(predicate, substitute(part, to_combine_loops));
      } else if (std::any_of(vars.begin(), vars.end(),
                             [&](const VarNode* v) { return spatial_loops.count(v) > 0; })) {
        fail("the predicate " + print_expr(part) + " of block " + update.name +
             " masks a spatial axis inside loop " + loop_->var->name +
             " together with a reduction loop; split_k_update cannot recreate it for the combine");
        return std::nullopt;
      }
    }
    Var split_iter = make_var(split_name_);
    iter_vars.push_back({split_iter, splits_, IterKind::Reduce});
    Var split_loop = make_var(fresh_name(split_name_, &taken));
    bindings.push_back(var_ref(split_loop));

    std::vector<Expr> indices;
    for (size_t position : indexing.iter_of_dim) indices.push_back(new_iter.at(position));
    std::vector<Expr> part_indices = {var_ref(split_iter)};
    part_indices.insert(part_indices.end(), indices.begin(), indices.end());
    Expr term = load(state.part, part_indices, update.provenance);
    if (state.rescale) {
      // The rescale's iteration variables index the state like the update's do.
      std::string unused;
      const StoreIndexing rescale_indexing = *store_indexing(*state.rescale, &unused);
      VarReplacements to_combine;
      for (size_t dim = 0; dim < rescale_indexing.iter_of_dim.size(); ++dim) {
        to_combine[state.rescale->iter_vars[rescale_indexing.iter_of_dim[dim]].var.get()] =
            indices[dim];
      }
      // f(prev, cur) with prev := the split's running value, cur := the combined one.
      RetargetMap copies;
      for (const State& copy : states_) {
        if (!copy.copy_of) continue;
        const State* source = state_of(copy.copy_of);
        copies[copy.buffer.get()] = {source->part,
                                     [split_iter](const std::vector<Expr>& old) {
                                       std::vector<Expr> result = {var_ref(split_iter)};
                                       result.insert(result.end(), old.begin(), old.end());
                                       return result;
                                     }};
      }
      Expr factor = retarget_accesses(substitute(state.factor, to_combine), copies);
      term = binary(BinaryOp::Mul, term, factor, update.provenance);
    }
    Stmt init = make_store(state.buffer, indices,
                           float_imm(identity_of(state.op), state.buffer->dtype),
                           update.provenance);
    Stmt body = make_store(state.buffer, indices,
                           binary(state.op, load(state.buffer, indices), term, update.provenance),
                           update.provenance);
    Stmt nest = make_block(update.name, iter_vars, bindings, predicate, init, body,
                           update.provenance);
    nest = make_for(split_loop, splits_, nest, update.provenance);
    for (size_t i = loops.size(); i-- > 0;) {
      nest = make_for(loops[i].first, loops[i].second, nest, update.provenance);
    }
    statements.push_back(nest);
  }
  for (const Stmt& stmt : epilogue_) {
    statements.push_back(substitute_in_bindings(stmt, to_new_common));
  }
  Stmt nest = statements.size() == 1 ? statements.front()
                                     : make_seq(statements, loop_->provenance);
  for (size_t i = common_.size(); i-- > 0;) {
    nest = make_for(new_common[i], common_[i]->extent, nest, common_[i]->provenance,
                    common_[i]->for_kind);
  }
  return nest;
}

ApplyResult SplitKUpdate::run() {
  if (!find_reduction_loop() || !read_nest() || !hoist_inits() || !classify_states() ||
      !order_states()) {
    return ApplyResult::failure(reason_);
  }
  // Names: the split loop and iteration variable avoid every name of the nest.
  const Stmt& unit = path_.stmts[top_];
  std::set<std::string> taken;
  for (const VarNode* var : collect_loop_vars(unit)) taken.insert(var->name);
  for (const Block* block : collect_blocks(unit)) {
    for (const IterVar& iter : block->iter_vars) taken.insert(iter.var->name);
  }
  split_name_ = fresh_name(axis_ + "_s", &taken);
  block_names_ = block_names(program_->body);
  for (const Stmt& stmt : prologue_) {
    for (const Block* block : collect_blocks(stmt)) block_names_.insert(block->name);
  }

  std::set<std::string> buffers = buffer_names(*program_);
  std::vector<Buffer> added;
  for (State& state : states_) {
    std::vector<int64_t> shape = {splits_};
    shape.insert(shape.end(), state.buffer->shape.begin(), state.buffer->shape.end());
    state.part = make_buffer(fresh_name(state.buffer->name + "_part", &buffers), shape,
                             state.buffer->dtype, MemoryScope::Global, BufferRole::Intermediate,
                             state.buffer->provenance);
    added.push_back(state.part);
  }

  Stmt partial = build_partial();
  // The combine reuses the update blocks' names, which the partial blocks gave up.
  std::optional<Stmt> combine = build_combine();
  if (!combine) return ApplyResult::failure(reason_);

  std::vector<Stmt> replacement = {partial};
  if (const Seq* seq = (*combine)->as<Seq>(); seq && common_.empty()) {
    replacement.insert(replacement.end(), seq->stmts.begin(), seq->stmts.end());
  } else {
    replacement.push_back(*combine);
  }
  std::vector<Stmt> top_level;
  if (const Seq* body = program_->body->as<Seq>()) {
    for (const Stmt& stmt : body->stmts) {
      if (stmt == unit) {
        top_level.insert(top_level.end(), replacement.begin(), replacement.end());
      } else {
        top_level.push_back(stmt);
      }
    }
  } else {
    top_level = replacement;
  }
  return ApplyResult::success(with_body_and_buffers(
      program_, make_seq(top_level, program_->body->provenance), added));
}

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_arg_shape(decision, kSignature, {1, 1, true});
  if (!reason.empty()) return ApplyResult::failure(reason);
  const DecisionArg* axis = decision.positional()[0];
  if (axis->is_int()) {
    return ApplyResult::failure(
        usage_reason(kSignature, "AXIS is a name, got " + std::to_string(axis->as_int())));
  }
  for (const DecisionArg& arg : decision.args) {
    if (!arg.key.empty() && arg.key != "splits") {
      return ApplyResult::failure(usage_reason(kSignature, "unknown keyword " + arg.key + "="));
    }
  }
  const DecisionArg* splits = decision.find("splits");
  if (!splits || !splits->is_int()) {
    return ApplyResult::failure(usage_reason(kSignature, "splits= is an integer"));
  }
  return split_k_update(program, decision.target, axis->as_name(), splits->as_int());
}

}  // namespace

ApplyResult split_k_update(const ProgramPtr& program, std::string_view block,
                           std::string_view axis, int64_t splits) {
  return SplitKUpdate(program, block, axis, splits).run();
}

DecisionKind split_k_update_decision() {
  return {
      "split_k_update",
      std::string(kSignature),
      "Split a reduction into S parallel partial reductions and a combine that merges them "
      "(split-K, FlashDecoding).",
      "The loop that iterates AXIS in BLOCK's binding is divided among S splits: a new loop "
      "AXIS_s inside the loops around it runs every block of that loop (and the blocks before "
      "it that start its states) on partial buffers X_part[AXIS_s, ...], each split over "
      "ceil(steps / S) steps. A combine nest after it merges the partials of each state the way "
      "its update and rescale blocks say: a sum, max or min of values that read no other state "
      "by the same operation; a sum that rolling_update repairs with X = X * f(prev, cur) as "
      "X = sum over s of X_part[s] * f(prev := Y_part[s], cur := Y), the repair applied once per "
      "split; then the blocks after the loop (the delayed normalization). Example: after "
      "rolling_update(O_sum, n, tile=8) on attention, split_k_update(O_sum_acc, n, splits=2) "
      "gives FlashDecoding: `Mx = max(Mx, Mx_part[n_s])`, `L = L + L_part[n_s] * "
      "exp(Mx_part[n_s] - Mx)`, `O_sum_acc = O_sum_acc + O_sum_acc_part[n_s, d] * "
      "exp(Mx_part[n_s] - Mx)`, then `O_sum = O_sum_acc / L`; on gemm, split_k_update(C_sum, k, "
      "splits=4) gives split-K with `C_sum = C_sum + C_sum_part[k_s, m, n]`.",
      apply,
  };
}

}  // namespace nautilus::sched
