#include "core/sched/factor.h"

#include <algorithm>

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "factor(BLOCK, TENSOR, AXIS)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_two_names(decision, kSignature, "TENSOR and AXIS");
  if (!reason.empty()) return ApplyResult::failure(reason);
  const std::vector<const DecisionArg*> args = decision.positional();
  return factor(program, decision.target, args[0]->as_name(), args[1]->as_name());
}

// The factors of a product tree, left to right.
void collect_factors(const Expr& expr, std::vector<Expr>* factors) {
  const Binary* product = expr->as<Binary>();
  if (product && product->op == BinaryOp::Mul) {
    collect_factors(product->a, factors);
    collect_factors(product->b, factors);
    return;
  }
  factors->push_back(expr);
}

Expr product_of(const std::vector<Expr>& factors) {
  Expr out = factors.front();
  for (size_t i = 1; i < factors.size(); ++i) out = binary(BinaryOp::Mul, out, factors[i], out->provenance);
  return out;
}

}  // namespace

ApplyResult factor(const ProgramPtr& program, std::string_view block_name, std::string_view tensor_name,
                   std::string_view axis_name) {
  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, block_name, &reason);
  if (!path) return ApplyResult::failure(reason);
  const Block& block = path->block();
  const std::string tensor(tensor_name);
  if (program->find_buffer(tensor) || find_block(program->body, tensor)) {
    return ApplyResult::failure("program " + program->name + " already has a tensor or block named " + tensor +
                                "; name the factor anew");
  }

  // 1. A reduction `B[...] = B[...] + e` and a spatial iteration variable AXIS of it.
  const bool reduces = std::any_of(block.iter_vars.begin(), block.iter_vars.end(),
                                   [](const IterVar& iter) { return iter.kind == IterKind::Reduce; });
  const Store* store = block.body->as<Store>();
  const Binary* update = store ? store->value->as<Binary>() : nullptr;
  const Load* running = update && update->op == BinaryOp::Add ? update->a->as<Load>() : nullptr;
  if (!reduces || !running || running->buffer != store->buffer) {
    return ApplyResult::failure("block " + block.name + " is not a sum `B[...] = B[...] + e`; factor takes "
                                "the factors of a sum's update");
  }
  const IterVar* axis = nullptr;
  for (const IterVar& iter : block.iter_vars) {
    if (iter.var->name == axis_name) axis = &iter;
  }
  if (!axis || axis->kind != IterKind::Spatial) {
    std::string spatial;
    for (const IterVar& iter : block.iter_vars) {
      if (iter.kind == IterKind::Spatial) spatial += (spatial.empty() ? "" : ", ") + iter.var->name;
    }
    return ApplyResult::failure("block " + block.name + " has no spatial iteration variable " +
                                std::string(axis_name) + "; its spatial ones are " + spatial);
  }

  // 2. The factors that do not depend on AXIS, and those that do.
  std::vector<Expr> factors, independent, dependent;
  collect_factors(update->b, &factors);
  for (const Expr& f : factors) (uses_var(f, axis->var.get()) ? dependent : independent).push_back(f);
  const std::string nothing = "the update of block " + block.name + " has no factor that reads a tensor "
                              "without depending on " + axis->var->name + " beside one that depends on it; "
                              "there is nothing to factor out";
  if (independent.empty() || dependent.empty()) return ApplyResult::failure(nothing);
  const Expr value = product_of(independent);

  // 3. The new tensor and its block, over the iteration variables the factor uses.
  std::vector<IterVar> iter_vars;
  std::vector<Expr> bindings, indices, at_block;
  std::vector<int64_t> shape;
  VarReplacements rename;
  std::vector<Var> loop_vars;
  for (const IterVar& iter : block.iter_vars) {
    if (!uses_var(value, iter.var.get())) continue;
    const Var fresh = make_var(iter.var->name);
    const Var loop = make_var(iter.var->name);
    iter_vars.push_back({fresh, iter.extent, IterKind::Spatial});
    bindings.push_back(var_ref(loop));
    indices.push_back(var_ref(fresh));
    at_block.push_back(var_ref(iter.var));
    shape.push_back(iter.extent);
    rename[iter.var.get()] = var_ref(fresh);
    loop_vars.push_back(loop);
  }
  const Buffer buffer = make_buffer(tensor, shape, DType::F32, MemoryScope::Global, BufferRole::Intermediate,
                                    block.provenance);
  Stmt nest = make_block(tensor, iter_vars, bindings, nullptr, nullptr,
                         make_store(buffer, indices, substitute(value, rename), block.provenance),
                         block.provenance);

  // 4. The factor reads a tensor, complete before the nest that holds BLOCK.
  const std::vector<const BufferNode*> reads = block_accesses(*nest->as<Block>()).reads;
  if (reads.empty()) return ApplyResult::failure(nothing);
  const BlockOrder order(program->body);
  const std::vector<const Block*> in_nest = collect_blocks(path->stmts.size() > 1 ? path->stmts[1] : path->stmts[0]);
  for (const BufferNode* read : reads) {
    for (const Block* writer : order.writers(read)) {
      if (contains_block(in_nest, writer) || order.position(writer) > order.position(&block)) {
        return ApplyResult::failure("block " + writer->name + " writes " + read->name + ", which the factor reads, "
                                    "in the nest of block " + block.name + " or after it; the factor "
                                    "is computed before that nest");
      }
    }
  }
  for (size_t i = loop_vars.size(); i-- > 0;) {
    nest = make_for(loop_vars[i], iter_vars[i].extent, nest, block.provenance);
  }

  // 5. BLOCK reads the factor; the new nest goes before BLOCK's.
  std::vector<Expr> rest = {load(buffer, at_block, block.provenance)};
  rest.insert(rest.end(), dependent.begin(), dependent.end());
  const Expr new_value = binary(BinaryOp::Add, update->a, product_of(rest), update->provenance);
  const Stmt new_block = make_block(block.name, block.iter_vars, block.bindings, block.predicate, block.init,
                                    make_store(store->buffer, store->indices, new_value, store->provenance),
                                    block.provenance);
  const Stmt body = replace_at(*path, path->stmts.size() - 1, new_block);
  std::vector<Stmt> top;
  if (const Seq* seq = body->as<Seq>()) {
    top = seq->stmts;
  } else {
    top = {body};
  }
  // The top-level statement that held BLOCK was rebuilt; find it again by the block.
  size_t position = 0;
  for (; position < top.size(); ++position) {
    if (find_block(top[position], block.name)) break;
  }
  top.insert(top.begin() + static_cast<std::ptrdiff_t>(position), nest);
  auto result = std::make_shared<Program>(*program);
  result->allocations.push_back(buffer);
  result->body = make_seq(std::move(top));
  return ApplyResult::success(result);
}

DecisionKind factor_decision() {
  return {
      "factor",
      std::string(kSignature),
      "Compute the factors of a sum's update that do not depend on one of its axes as a tensor of "
      "their own, once, before the sum.",
      "BLOCK's update `B[...] = B[...] + e` is read as a product of factors; those that do not "
      "depend on the spatial iteration variable AXIS become the f32 intermediate TENSOR, indexed "
      "by the iteration variables they use and written by a new block TENSOR right before "
      "BLOCK's nest, and the update reads TENSOR in their place. Example: a gated MLP's "
      "`Y_sum[t, e] += G[t, f] * sigmoid(G[t, f]) * U[t, f] * f32(Wd[f, e])`, factor(Y_sum, A, e) "
      "gives `A[t, f] = G[t, f] * sigmoid(G[t, f]) * U[t, f]` and `Y_sum[t, e] += A[t, f] * "
      "f32(Wd[f, e])`: silu(G) * U is computed once instead of once per column tile of Y.",
      apply,
  };
}

}  // namespace nautilus::sched
