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

constexpr std::string_view kSignature =
    "cache_read(BLOCK, TENSOR, shared|register[, at=LOOP][, readers=all][, tail=global])";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const DecisionArg* readers = decision.find("readers");
  const DecisionArg* tail = decision.find("tail");
  std::string reason = check_arg_shape(
      decision, kSignature,
      {2, 2, decision.find("at") != nullptr || readers != nullptr || tail != nullptr});
  if (!reason.empty()) return ApplyResult::failure(reason);
  for (const DecisionArg& arg : decision.args) {
    if (arg.key.empty()) continue;
    if ((arg.key != "at" && arg.key != "readers" && arg.key != "tail") || arg.is_int()) {
      return ApplyResult::failure(
          usage_reason(kSignature, "the keywords are at=LOOP, readers=all and tail=global"));
    }
  }
  if (tail && tail->as_name() != "global") {
    return ApplyResult::failure(
        usage_reason(kSignature, "tail takes the value global, got " + tail->as_name()));
  }
  if (tail && !readers) {
    return ApplyResult::failure(usage_reason(
        kSignature, "tail=global needs readers=all: the readers read the tail from the tensor"));
  }
  if (readers && readers->as_name() != "all") {
    return ApplyResult::failure(
        usage_reason(kSignature, "readers takes the value all, got " + readers->as_name()));
  }
  const std::vector<const DecisionArg*> args = decision.positional();
  if (args[0]->is_int() || args[1]->is_int()) {
    return ApplyResult::failure(usage_reason(kSignature, "TENSOR and the scope are names"));
  }
  const std::optional<MemoryScope> scope = parse_cache_scope(args[1]->as_name());
  if (!scope) {
    return ApplyResult::failure(usage_reason(
        kSignature, "the scope is shared or register, got " + args[1]->as_name()));
  }
  if (tail && *scope != MemoryScope::Shared) {
    return ApplyResult::failure(usage_reason(
        kSignature, "tail=global keeps part of a shared copy on chip; the scope is " +
                        args[1]->as_name()));
  }
  const DecisionArg* at = decision.find("at");
  return cache_read(program, decision.target, args[0]->as_name(), *scope,
                    at ? std::optional<std::string>(at->as_name()) : std::nullopt,
                    readers != nullptr, tail != nullptr);
}

const Block* block_in_nest(const Stmt& nest) {
  Stmt current = nest;
  while (const For* loop = current->as<For>()) current = loop->body;
  return current->as<Block>();
}

}  // namespace

namespace {

// The part of `tensor` that `block` (at `path`) reads in one iteration of the loop at `depth`:
// per dimension a fixed index or a range (step 1 of cache_read); nullopt with the reason when
// the reads cannot be localized. `all_ranges` says whether every dimension is a range.
std::optional<std::vector<CachedDim>> read_part(const BlockPath& path, const Buffer& tensor,
                                                size_t depth, const std::string& where,
                                                bool* all_ranges,
                                                std::vector<std::string>* iter_names,
                                                std::string* reason) {
  const Block& block = path.block();
  std::vector<const Load*> loads = collect_loads(block.init, tensor.get());
  for (const Load* l : collect_loads(block.body, tensor.get())) loads.push_back(l);
  if (loads.empty()) {
    *reason = "block " + block.name + " does not read " + tensor->name;
    return std::nullopt;
  }
  if (block_accesses(block).writes_buffer(tensor.get())) {
    *reason = "block " + block.name + " writes " + tensor->name +
              "; cache_read localizes a tensor the block only reads "
              "(cache_write localizes what it writes)";
    return std::nullopt;
  }
  for (const Load* l : loads) {
    for (size_t d = 0; d < l->indices.size(); ++d) {
      if (print_expr(l->indices[d]) != print_expr(loads[0]->indices[d])) {
        *reason = "block " + block.name + " reads " + tensor->name + " at different indices (" +
                  print_expr(loads[0]->indices[d]) + " and " + print_expr(l->indices[d]) +
                  " in dimension " + std::to_string(d) + ")";
        return std::nullopt;
      }
    }
  }
  std::vector<CachedDim> dims;
  std::set<std::string> names_used;
  *all_ranges = true;
  VarReplacements iter_to_binding;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    iter_to_binding[block.iter_vars[i].var.get()] = block.bindings[i];
  }
  for (size_t d = 0; d < tensor->shape.size(); ++d) {
    const Expr& index = loads[0]->indices[d];
    const std::string what = "dimension " + std::to_string(d) + " of " + tensor->name;
    // An index affine in the block's iteration variables (n, or n + n_s * 24 after
    // split_k_update) is affine in the loops: its range per iteration follows.
    const Expr over_loops = simplify_index(substitute(index, iter_to_binding));
    if (affine_form(over_loops)) {
      const std::optional<size_t> i = iter_var_index(block, index);
      std::optional<IndexRange> range = range_in_iteration(
          over_loops, path, depth,
          i ? "iteration variable " + block.iter_vars[*i].var->name + " of block " + block.name
            : "index " + print_expr(index) + " of block " + block.name,
          reason);
      if (!range) return std::nullopt;
      std::optional<CachedDim> dim = range_dim(*range, tensor->shape[d], what, reason);
      if (!dim) return std::nullopt;
      dims.push_back(std::move(*dim));
      iter_names->push_back(
          fresh_name(i ? block.iter_vars[*i].var->name : "x" + std::to_string(d), &names_used));
      continue;
    }
    // Any other index must stay the same during the iteration (K[b, h / 4, n, d] at h).
    Expr fixed = substitute(index, iter_to_binding);
    for (const VarNode* var : referenced_vars(fixed)) {
      const std::optional<size_t> var_depth = path.loop_depth(var);
      if (!var_depth || *var_depth > depth) {
        *reason = "block " + block.name + " reads " + tensor->name + " at index " +
                  print_expr(index) + ", which changes in " + where +
                  " and is not an iteration variable";
        return std::nullopt;
      }
    }
    CachedDim dim;
    dim.fixed = std::move(fixed);
    dims.push_back(std::move(dim));
    *all_ranges = false;
    iter_names->push_back(fresh_name("x" + std::to_string(d), &names_used));
  }
  return dims;
}

// Whether two blocks' parts of a tensor are the same elements at the same local indices.
bool same_part(const std::vector<CachedDim>& a, const std::vector<CachedDim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (!a[d].fixed != !b[d].fixed) return false;
    if (a[d].fixed) {
      if (print_expr(a[d].fixed) != print_expr(b[d].fixed)) return false;
      continue;
    }
    if (!(a[d].range == b[d].range) || a[d].modulus != b[d].modulus) return false;
  }
  return true;
}

// "m_o * 4 + [0, 4)" per dimension, for reasons.
std::string part_text(const std::vector<CachedDim>& dims) {
  std::string text;
  for (const CachedDim& dim : dims) {
    text += (text.empty() ? "" : ", ") + (dim.fixed ? print_expr(dim.fixed) : dim.range.to_string());
  }
  return "[" + text + "]";
}

}  // namespace

ApplyResult cache_read(const ProgramPtr& input, std::string_view block_name,
                       std::string_view tensor_name, MemoryScope scope,
                       std::optional<std::string> at, bool all_readers, bool tail_in_global) {
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
  if (all_readers && !at) {
    return ApplyResult::failure(usage_reason(
        kSignature, "readers=all needs at=LOOP: the readers share one copy per iteration of it"));
  }
  const std::optional<size_t> stage_loop_depth = stage_depth(*path, at, &reason);
  if (!stage_loop_depth) return ApplyResult::failure(reason);
  const size_t depth = *stage_loop_depth;
  const std::string where = at ? "one iteration of loop " + *at : "block " + block.name + "'s nest";

  // 1. The part of each dimension read in one iteration.
  bool all_ranges = true;
  std::vector<std::string> iter_names;
  const std::optional<std::vector<CachedDim>> part =
      read_part(*path, *tensor, depth, where, &all_ranges, &iter_names, &reason);
  if (!part) return ApplyResult::failure(reason);
  const std::vector<CachedDim>& dims = *part;

  // The child of the loop's body (or of the program body) that holds a block under the loop.
  const std::vector<Stmt> siblings =
      depth == 0 ? path->stmts[0]->as<Seq>()->stmts : loop_children(*path->stmts[depth]->as<For>());
  const auto child_of = [&](const Block* b) {
    size_t child = 0;
    while (!find_block(siblings[child], b->name)) ++child;
    return child;
  };

  // With readers=all, every other block under the loop that reads the tensor reads the same
  // part and shares the copy, which goes before the first of them.
  std::vector<std::string> readers = {block.name};
  size_t holder_index = child_of(&block);
  const std::vector<const Block*> in_loop = collect_blocks(path->stmts[depth]);
  if (all_readers) {
    for (const Block* other : in_loop) {
      if (other == &block || (collect_loads(other->body, tensor->get()).empty() &&
                              collect_loads(other->init, tensor->get()).empty())) {
        continue;
      }
      const std::optional<BlockPath> other_path = find_block(program->body, other->name);
      bool other_ranges = true;
      std::vector<std::string> other_names;
      const std::optional<std::vector<CachedDim>> other_part =
          read_part(*other_path, *tensor, depth, where, &other_ranges, &other_names, &reason);
      if (!other_part) return ApplyResult::failure(reason + "; readers=all shares one copy");
      if (!same_part(dims, *other_part)) {
        return ApplyResult::failure(
            "block " + other->name + " reads the part " + part_text(*other_part) + " of " +
            (*tensor)->name + " in " + where + ", block " + block.name + " the part " +
            part_text(dims) + "; readers=all shares one copy of one part");
      }
      readers.push_back(other->name);
      holder_index = std::min(holder_index, child_of(other));
    }
  }

  // 2. The copy, and where it goes: before the statement that holds the (first) reader.
  std::set<std::string> buffers = buffer_names(*program);
  Buffer local =
      make_buffer(fresh_name((*tensor)->name + cache_suffix(scope), &buffers),
                  local_shape(dims), (*tensor)->dtype, scope, BufferRole::Intermediate,
                  (*tensor)->provenance);
  if (tail_in_global) {
    BufferNode marked = *local;
    marked.tail_in_global = true;
    local = std::make_shared<const BufferNode>(std::move(marked));
  }
  std::set<std::string> blocks = block_names(program->body);
  std::set<std::string> loops;
  for (size_t d = 0; d <= depth; ++d) {
    if (const For* loop = path->stmts[d]->as<For>()) loops.insert(loop->var->name);
  }
  const Stmt copy = build_copy_nest(fresh_name(local->name, &blocks), *tensor, local, dims,
                                    iter_names, true, &loops, block.provenance);

  // 3. Every write of the tensor that the readers see happens before the copy.
  const Stmt& holder = siblings[holder_index];
  const std::vector<const Block*> in_holder = collect_blocks(holder);
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
    if (all_readers) {
      return ApplyResult::failure("block " + writer->name + " writes " + (*tensor)->name +
                                  " in loop " + *at +
                                  "; readers=all copies a tensor the loop only reads");
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

  // 4. The readers read the copy; the copy goes right before the statement holding the first.
  RetargetMap map;
  map[tensor->get()] = {local, [dims](const std::vector<Expr>& indices) {
                          return local_indices(dims, indices);
                        }};
  Stmt body = program->body;
  for (const std::string& name : readers) {
    const BlockPath reader_path = *find_block(body, name);
    const Block& r = reader_path.block();
    const Stmt reader = make_block(r.name, r.iter_vars, r.bindings, r.predicate,
                                   r.init ? retarget_accesses(r.init, map) : nullptr,
                                   retarget_accesses(r.body, map), r.provenance);
    body = replace_at(reader_path, reader_path.stmts.size() - 1, reader);
  }
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
      "each k_o iteration, and C_sum reads `A_shared[m mod 4, k mod 8]`. With readers=all "
      "(and at=LOOP) every block under LOOP that reads the same part of TENSOR reads one copy "
      "made before the first of them: cache_read(Mx, X, shared, at=r, readers=all) on a "
      "log-softmax row kernel reads each row of X from memory once for all its passes. With "
      "tail=global (shared, readers=all) the copy may exceed the CTA's shared memory: the MA "
      "lowering keeps the leading stages that fit on chip and the readers read the rest from "
      "TENSOR.",
      apply,
  };
}

}  // namespace nautilus::sched
