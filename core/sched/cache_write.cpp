#include "core/sched/cache_write.h"

#include <algorithm>

#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "core/sched/buffer_rewrite.h"
#include "core/sched/cache_stage.h"
#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"
#include "core/sched/region.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "cache_write(BLOCK, shared|register[, at=LOOP])";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  std::string reason =
      check_arg_shape(decision, kSignature, {1, 1, decision.find("at") != nullptr});
  if (!reason.empty()) return ApplyResult::failure(reason);
  reason = check_at_keyword(decision, kSignature);
  if (!reason.empty()) return ApplyResult::failure(reason);
  const DecisionArg* scope_arg = decision.positional()[0];
  const std::optional<MemoryScope> scope =
      scope_arg->is_int() ? std::nullopt : parse_cache_scope(scope_arg->as_name());
  if (!scope) {
    return ApplyResult::failure(usage_reason(kSignature, "the scope is shared or register"));
  }
  const DecisionArg* at = decision.find("at");
  return cache_write(program, decision.target, *scope,
                     at ? std::optional<std::string>(at->as_name()) : std::nullopt);
}

// The index lists of every load of and store to `buffer` in a block.
std::vector<std::vector<Expr>> accesses_of(const Block& block, const BufferNode* buffer,
                                           bool stores_only) {
  struct Collector : Visitor {
    const BufferNode* buffer;
    bool stores_only;
    std::vector<std::vector<Expr>> found;
    void visit_Load(const Load& node) override {
      if (!stores_only && node.buffer.get() == buffer) found.push_back(node.indices);
      Visitor::visit_Load(node);
    }
    void visit_Store(const Store& node) override {
      if (node.buffer.get() == buffer) found.push_back(node.indices);
      Visitor::visit_Store(node);
    }
  } collector;
  collector.buffer = buffer;
  collector.stores_only = stores_only;
  collector.visit(block.init);
  collector.visit(block.body);
  return collector.found;
}

}  // namespace

ApplyResult cache_write(const ProgramPtr& input, std::string_view block_name, MemoryScope scope,
                        std::optional<std::string> at) {
  const ProgramPtr program =
      input->body->as<Seq>() ? input : with_body(input, make_seq({input->body}));
  std::string reason;
  const std::optional<BlockPath> path = find_block(*program, block_name, &reason);
  if (!path) return ApplyResult::failure(reason);
  const Block& block = path->block();
  const std::optional<StoreIndexing> indexing = store_indexing(block, &reason);
  if (!indexing) return ApplyResult::failure(reason);
  const Buffer& tensor = indexing->buffer;
  const std::optional<size_t> stage_loop_depth = stage_depth(*path, at, &reason);
  if (!stage_loop_depth) return ApplyResult::failure(reason);
  const size_t depth = *stage_loop_depth;
  const size_t scope_depth = depth == 0 ? 1 : depth;
  const Stmt& scope_stmt = path->stmts[scope_depth];
  const std::string where = at ? "loop " + *at : "the nest of block " + block.name;

  // 1. Who accesses the tensor: every writer under the loop; readers may also be after it.
  const std::vector<const Block*> under = collect_blocks(scope_stmt);
  const BlockOrder order(program->body);
  for (const Block* writer : order.writers(tensor.get())) {
    if (!contains_block(under, writer)) {
      return ApplyResult::failure("block " + writer->name + " writes " + tensor->name +
                                  " outside " + where + "; cache_write needs every write of " +
                                  tensor->name + " under it");
    }
  }
  bool write_back = tensor->role == BufferRole::Output;
  for (const Block* reader : order.readers(tensor.get())) {
    write_back |= !contains_block(under, reader);
  }

  // 2. The part of each dimension that one iteration accesses, the same for every access.
  const size_t rank = tensor->shape.size();
  std::vector<std::optional<IndexRange>> parts(rank);
  std::vector<const Block*> accessors;
  auto ranges_of = [&](const Block& accessor, const std::vector<Expr>& indices)
      -> std::optional<std::vector<IndexRange>> {
    const BlockPath accessor_path = *find_block(program->body, accessor.name);
    std::vector<IndexRange> ranges;
    VarReplacements iter_to_binding;
    for (size_t i = 0; i < accessor.iter_vars.size(); ++i) {
      iter_to_binding[accessor.iter_vars[i].var.get()] = accessor.bindings[i];
    }
    for (size_t d = 0; d < rank; ++d) {
      // An index affine in the iteration variables is affine in the loops.
      const Expr over_loops = simplify_index(substitute(indices[d], iter_to_binding));
      if (!affine_form(over_loops)) {
        reason = "block " + accessor.name + " accesses " + tensor->name + " at index " +
                 print_expr(indices[d]) + ", which is not an affine function of its loops";
        return std::nullopt;
      }
      std::optional<IndexRange> range = range_in_iteration(
          over_loops, accessor_path, depth,
          "index " + print_expr(indices[d]) + " of " + tensor->name + " in block " +
              accessor.name,
          &reason);
      if (!range) return std::nullopt;
      clip_range(&*range, tensor->shape[d]);
      ranges.push_back(std::move(*range));
    }
    return ranges;
  };
  for (const Block* accessor : under) {
    const std::vector<std::vector<Expr>> accesses = accesses_of(*accessor, tensor.get(), false);
    if (accesses.empty()) continue;
    accessors.push_back(accessor);
    for (const std::vector<Expr>& indices : accesses) {
      const std::optional<std::vector<IndexRange>> ranges = ranges_of(*accessor, indices);
      if (!ranges) return ApplyResult::failure(reason);
      for (size_t d = 0; d < rank; ++d) {
        if (!parts[d]) {
          parts[d] = (*ranges)[d];
        } else if (!merge_ranges(&*parts[d], (*ranges)[d])) {
          return ApplyResult::failure(
              "blocks under " + where + " access different parts of dimension " +
              std::to_string(d) + " of " + tensor->name + " (" + parts[d]->to_string() +
              " and " + (*ranges)[d].to_string() + "); cache_write needs one part per "
              "iteration");
        }
      }
    }
  }

  // 3. Iterations own disjoint parts: every loop down to LOOP moves some dimension's part.
  std::vector<CachedDim> dims;
  for (size_t d = 0; d < rank; ++d) {
    if (!iterations_disjoint(*parts[d])) {
      return ApplyResult::failure("the parts of dimension " + std::to_string(d) + " of " +
                                  tensor->name + " that iterations of " + where +
                                  " access overlap (" + parts[d]->to_string() + ")");
    }
    std::optional<CachedDim> dim = range_dim(
        *parts[d], tensor->shape[d], "dimension " + std::to_string(d) + " of " + tensor->name,
        &reason);
    if (!dim) return ApplyResult::failure(reason);
    dims.push_back(std::move(*dim));
  }
  for (size_t d = 1; d <= depth; ++d) {
    const For* loop = path->stmts[d]->as<For>();
    if (!loop || loop->extent <= 1) continue;
    const bool moves = std::any_of(parts.begin(), parts.end(), [&](const auto& part) {
      return std::any_of(part->offset.begin(), part->offset.end(),
                         [&](const auto& term) { return term.first == loop; });
    });
    if (!moves) {
      return ApplyResult::failure(
          "the part of " + tensor->name + " accessed in one iteration of " + where +
          " does not move with loop " + loop->var->name + "; its iterations would share "
          "elements of the local buffer (place the cache inside the loop that completes them)");
    }
  }

  // 4. A write-back stores the whole part: some block must write all of it.
  const Block* covering = nullptr;
  for (const Block* accessor : accessors) {
    for (const std::vector<Expr>& indices : accesses_of(*accessor, tensor.get(), true)) {
      const std::optional<std::vector<IndexRange>> ranges = ranges_of(*accessor, indices);
      if (!ranges) return ApplyResult::failure(reason);
      bool whole = true;
      for (size_t d = 0; d < rank; ++d) {
        whole &= (*ranges)[d].offset == parts[d]->offset && (*ranges)[d].lo == parts[d]->lo &&
                 (*ranges)[d].hi == parts[d]->hi;
      }
      if (whole && !covering) covering = accessor;
    }
  }
  if (write_back && !covering) {
    return ApplyResult::failure("no block under " + where + " writes the whole part of " +
                                tensor->name + " that is cached; the write-back would store "
                                "elements never computed");
  }

  // 5. Redirect every access under the loop; append the write-back to the loop's body.
  std::set<std::string> buffers = buffer_names(*program);
  const Buffer local = make_buffer(fresh_name(tensor->name + cache_suffix(scope), &buffers),
                                   local_shape(dims), tensor->dtype, scope,
                                   BufferRole::Intermediate, tensor->provenance);
  RetargetMap map;
  map[tensor.get()] = {local, [dims](const std::vector<Expr>& indices) {
                         return local_indices(dims, indices);
                       }};
  struct Redirect : Mutator {
    const RetargetMap* map;
    Stmt mutate_Block(const Block& node, const Stmt&) override {
      return make_block(node.name, node.iter_vars, node.bindings, node.predicate,
                        node.init ? retarget_accesses(node.init, *map) : nullptr,
                        retarget_accesses(node.body, *map), node.provenance);
    }
  } redirect;
  redirect.map = &map;
  Stmt body = replace_at(*path, scope_depth, redirect.mutate(scope_stmt));
  if (write_back) {
    std::set<std::string> names_used;
    std::vector<std::string> iter_names;
    // Named after the iteration variables the covering block stores with, where it does.
    const std::vector<Expr> stored = accesses_of(*covering, tensor.get(), true).front();
    for (size_t d = 0; d < rank; ++d) {
      const std::optional<size_t> i = iter_var_index(*covering, stored[d]);
      iter_names.push_back(fresh_name(
          i ? covering->iter_vars[*i].var->name : "x" + std::to_string(d), &names_used));
    }
    std::set<std::string> loops;
    for (size_t d = 0; d <= depth; ++d) {
      if (const For* loop = path->stmts[d]->as<For>()) loops.insert(loop->var->name);
    }
    std::set<std::string> blocks = block_names(program->body);
    const Stmt store_back = build_copy_nest(fresh_name(tensor->name + "_writeback", &blocks),
                                            tensor, local, dims, iter_names, false, &loops,
                                            block.provenance);
    if (depth == 0) {
      std::vector<Stmt> top = body->as<Seq>()->stmts;
      size_t index = 0;
      while (!find_block(top[index], block.name)) ++index;
      top.insert(top.begin() + static_cast<std::ptrdiff_t>(index + 1), store_back);
      body = make_seq(std::move(top), body->provenance);
    } else {
      const BlockPath new_path = *find_block(body, block.name);
      body = insert_into_loop(new_path, depth,
                              loop_children(*new_path.stmts[depth]->as<For>()).size(),
                              store_back);
    }
  }
  return ApplyResult::success(with_body_and_buffers(program, std::move(body), {local}));
}

DecisionKind cache_write_decision() {
  return {
      "cache_write",
      std::string(kSignature),
      "Compute the tensor a block writes in shared memory or registers during each iteration "
      "of a loop, storing it back once at the end if anything else reads it.",
      "Every block under LOOP (default: BLOCK's top-level nest) that reads or writes BLOCK's "
      "tensor X uses a local buffer X_reg or X_shared of the part of X one iteration accesses "
      "instead; X must be written nowhere else, and the parts of different iterations must be "
      "disjoint (LOOP must not cut a reduction of X). A write-back block X[x] = X_reg[...] is "
      "appended to LOOP's body when X is an output or is read after LOOP; otherwise X is no "
      "longer stored at all. Example: on gemm after tile(C_sum, m=4, n=4, k=8) and "
      "reverse_compute_at(C, C_sum, n_o), cache_write(C_sum, register, at=n_o) accumulates in "
      "`C_sum_reg[m mod 4, n mod 4]`, C reads it from there, and C_sum disappears.",
      apply,
  };
}

}  // namespace nautilus::sched
