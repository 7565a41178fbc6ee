#include "core/sched/cache_read.h"

#include <algorithm>

#include "core/scalar/printer.h"
#include "core/sched/buffer_rewrite.h"
#include "core/sched/cache_stage.h"
#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"
#include "core/sched/region.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "cache_read(BLOCK, TENSOR, shared|register[, at=LOOP])";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  std::string reason =
      check_arg_shape(decision, kSignature, {2, 2, decision.find("at") != nullptr});
  if (!reason.empty()) return ApplyResult::failure(reason);
  reason = check_at_keyword(decision, kSignature);
  if (!reason.empty()) return ApplyResult::failure(reason);
  const std::vector<const DecisionArg*> args = decision.positional();
  if (args[0]->is_int() || args[1]->is_int()) {
    return ApplyResult::failure(usage_reason(kSignature, "TENSOR and the scope are names"));
  }
  const std::optional<MemoryScope> scope = parse_cache_scope(args[1]->as_name());
  if (!scope) {
    return ApplyResult::failure(usage_reason(
        kSignature, "the scope is shared or register, got " + args[1]->as_name()));
  }
  const DecisionArg* at = decision.find("at");
  return cache_read(program, decision.target, args[0]->as_name(), *scope,
                    at ? std::optional<std::string>(at->as_name()) : std::nullopt);
}

const Block* block_in_nest(const Stmt& nest) {
  Stmt current = nest;
  while (const For* loop = current->as<For>()) current = loop->body;
  return current->as<Block>();
}

}  // namespace

ApplyResult cache_read(const ProgramPtr& input, std::string_view block_name,
                       std::string_view tensor_name, MemoryScope scope,
                       std::optional<std::string> at) {
  // A program body that is one statement becomes a sequence, so there is a place before it.
  const ProgramPtr program =
      input->body->as<Seq>() ? input : with_body(input, make_seq({input->body}));
  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, block_name, &reason);
  if (!path) return ApplyResult::failure(reason);
  const Block& block = path->block();
  const Buffer* tensor = program->find_buffer(std::string(tensor_name));
  if (!tensor) {
    return ApplyResult::failure("program " + program->name + " has no tensor " +
                                std::string(tensor_name));
  }
  std::vector<const Load*> loads = collect_loads(block.init, tensor->get());
  for (const Load* l : collect_loads(block.body, tensor->get())) loads.push_back(l);
  if (loads.empty()) {
    return ApplyResult::failure("block " + block.name + " does not read " + (*tensor)->name);
  }
  if (block_accesses(block).writes_buffer(tensor->get())) {
    return ApplyResult::failure("block " + block.name + " writes " + (*tensor)->name +
                                "; cache_read localizes a tensor the block only reads "
                                "(cache_write localizes what it writes)");
  }
  for (const Load* l : loads) {
    for (size_t d = 0; d < l->indices.size(); ++d) {
      if (print_expr(l->indices[d]) != print_expr(loads[0]->indices[d])) {
        return ApplyResult::failure("block " + block.name + " reads " + (*tensor)->name +
                                    " at different indices (" + print_expr(loads[0]->indices[d]) +
                                    " and " + print_expr(l->indices[d]) + " in dimension " +
                                    std::to_string(d) + ")");
      }
    }
  }
  const std::optional<size_t> stage_loop_depth = stage_depth(*path, at, &reason);
  if (!stage_loop_depth) return ApplyResult::failure(reason);
  const size_t depth = *stage_loop_depth;
  const std::string where = at ? "one iteration of loop " + *at : "block " + block.name + "'s nest";

  // 1. The part of each dimension read in one iteration.
  std::vector<CachedDim> dims;
  std::vector<std::string> iter_names;
  std::set<std::string> names_used;
  bool all_ranges = true;
  VarReplacements iter_to_binding;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    iter_to_binding[block.iter_vars[i].var.get()] = block.bindings[i];
  }
  for (size_t d = 0; d < (*tensor)->shape.size(); ++d) {
    const Expr& index = loads[0]->indices[d];
    const std::string what = "dimension " + std::to_string(d) + " of " + (*tensor)->name;
    // An index affine in the block's iteration variables (n, or n + n_s * 24 after
    // split_k_update) is affine in the loops: its range per iteration follows.
    const Expr over_loops = simplify_index(substitute(index, iter_to_binding));
    if (affine_form(over_loops)) {
      const std::optional<size_t> i = iter_var_index(block, index);
      std::optional<IndexRange> range = range_in_iteration(
          over_loops, *path, depth,
          i ? "iteration variable " + block.iter_vars[*i].var->name + " of block " + block.name
            : "index " + print_expr(index) + " of block " + block.name,
          &reason);
      if (!range) return ApplyResult::failure(reason);
      std::optional<CachedDim> dim = range_dim(*range, (*tensor)->shape[d], what, &reason);
      if (!dim) return ApplyResult::failure(reason);
      dims.push_back(std::move(*dim));
      iter_names.push_back(
          fresh_name(i ? block.iter_vars[*i].var->name : "x" + std::to_string(d), &names_used));
      continue;
    }
    // Any other index must stay the same during the iteration (K[b, h / 4, n, d] at h).
    Expr fixed = substitute(index, iter_to_binding);
    for (const VarNode* var : referenced_vars(fixed)) {
      const std::optional<size_t> var_depth = path->loop_depth(var);
      if (!var_depth || *var_depth > depth) {
        return ApplyResult::failure("block " + block.name + " reads " + (*tensor)->name +
                                    " at index " + print_expr(index) + ", which changes in " +
                                    where + " and is not an iteration variable");
      }
    }
    CachedDim dim;
    dim.fixed = std::move(fixed);
    dims.push_back(std::move(dim));
    all_ranges = false;
    iter_names.push_back(fresh_name("x" + std::to_string(d), &names_used));
  }

  // 2. The copy, and where it goes: before the statement that holds the block.
  std::set<std::string> buffers = buffer_names(*program);
  const Buffer local =
      make_buffer(fresh_name((*tensor)->name + cache_suffix(scope), &buffers),
                  local_shape(dims), (*tensor)->dtype, scope, BufferRole::Intermediate,
                  (*tensor)->provenance);
  std::set<std::string> blocks = block_names(program->body);
  std::set<std::string> loops;
  for (size_t d = 0; d <= depth; ++d) {
    if (const For* loop = path->stmts[d]->as<For>()) loops.insert(loop->var->name);
  }
  const Stmt copy = build_copy_nest(fresh_name(local->name, &blocks), *tensor, local, dims,
                                    iter_names, true, &loops, block.provenance);

  // 3. Every write of the tensor that the block's reads see happens before the copy.
  // The child of the loop's body (or of the program body) that holds the block.
  const size_t holder_depth = depth + (path->stmts[depth + 1]->as<Seq>() ? 2 : 1);
  const Stmt& holder = path->stmts[holder_depth];
  const std::vector<const Block*> in_holder = collect_blocks(holder);
  const std::vector<const Block*> in_loop = collect_blocks(path->stmts[depth]);
  const std::vector<Stmt> siblings =
      depth == 0 ? path->stmts[0]->as<Seq>()->stmts : loop_children(*path->stmts[depth]->as<For>());
  const auto child_of = [&](const Block* b) {
    size_t child = 0;
    while (!find_block(siblings[child], b->name)) ++child;
    return child;
  };
  const size_t holder_index = static_cast<size_t>(
      std::find(siblings.begin(), siblings.end(), holder) - siblings.begin());
  const BlockOrder order(program->body);
  for (const Block* writer : order.writers(tensor->get())) {
    if (contains_block(in_holder, writer)) {
      return ApplyResult::failure("block " + writer->name + " writes " + (*tensor)->name +
                                  " between the copy and block " + block.name +
                                  "; the copy would be stale");
    }
    if (depth == 0 || !contains_block(in_loop, writer)) {
      const Block* first = depth == 0 ? in_holder.front() : in_loop.front();
      if (order.position(writer) > order.position(first)) {
        return ApplyResult::failure("block " + writer->name + " writes " + (*tensor)->name +
                                    " after " + (at ? "loop " + *at : "the copy") +
                                    "; the copy would miss it");
      }
      continue;
    }
    if (child_of(writer) > holder_index) {
      return ApplyResult::failure("block " + writer->name + " writes " + (*tensor)->name +
                                  " later in loop " + *at + "; the copy would miss it");
    }
    if (!all_ranges) {
      return ApplyResult::failure("block " + writer->name + " writes " + (*tensor)->name +
                                  " in loop " + *at + ", and block " + block.name +
                                  " reads it at an index that is not an iteration variable");
    }
    std::vector<IndexRange> ranges;
    for (const CachedDim& dim : dims) ranges.push_back(dim.range);
    reason = uncovered_read(*block_in_nest(copy), ranges, tensor->get(),
                            *find_block(program->body, writer->name), depth);
    if (!reason.empty()) return ApplyResult::failure(reason);
  }

  // 4. The block reads the copy; the copy goes right before the statement holding it.
  RetargetMap map;
  map[tensor->get()] = {local, [dims](const std::vector<Expr>& indices) {
                          return local_indices(dims, indices);
                        }};
  const Stmt reader = make_block(block.name, block.iter_vars, block.bindings, block.predicate,
                                 block.init ? retarget_accesses(block.init, map) : nullptr,
                                 retarget_accesses(block.body, map), block.provenance);
  Stmt body = replace_at(*path, path->stmts.size() - 1, reader);
  if (depth == 0) {
    std::vector<Stmt> top = body->as<Seq>()->stmts;
    top.insert(top.begin() + static_cast<std::ptrdiff_t>(holder_index), copy);
    body = make_seq(std::move(top), body->provenance);
  } else {
    body = insert_into_loop(*find_block(body, block.name), depth, holder_index, copy);
  }
  return ApplyResult::success(with_body_and_buffers(program, std::move(body), {local}));
}

DecisionKind cache_read_decision() {
  return {
      "cache_read",
      std::string(kSignature),
      "Copy the part of a tensor a block reads into shared memory or registers, once per "
      "iteration of a loop, and read the copy.",
      "LOOP is a loop around BLOCK (default: the copy runs once before BLOCK's nest). The part "
      "of TENSOR that BLOCK reads in one iteration is read off its bindings; a local buffer "
      "TENSOR_shared or TENSOR_reg of that part's size (dimensions of one element dropped) is "
      "filled by a copy block inserted in LOOP's body before the statement holding BLOCK, and "
      "BLOCK's loads index it at x mod TILE (x − lo when the loop does not move the part). "
      "Writes of TENSOR must all come before the copy. Example: on gemm after tile(C_sum, m=4, "
      "n=4, k=8), cache_read(C_sum, A, shared, at=k_o) adds `for m: for k: block "
      "A_shared(m = m_o * 4 + m, k = k_o * 8 + k): A_shared[m mod 4, k mod 8] = A[m, k]` in "
      "each k_o iteration, and C_sum reads `A_shared[m mod 4, k mod 8]`.",
      apply,
  };
}

}  // namespace nautilus::sched
