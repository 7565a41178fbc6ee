#include "core/sched/region.h"

#include <algorithm>
#include <unordered_map>

#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"

namespace nautilus::sched {

using namespace scalar;

// ---------------------------------------------------------------------------------------------
// Affine forms

namespace {

// Affine::times and Affine::plus with every product and sum checked for overflow.
bool scale(Affine* form, int64_t factor) {
  for (auto& [var, coefficient] : form->coeffs) {
    if (__builtin_mul_overflow(coefficient, factor, &coefficient)) return false;
  }
  std::erase_if(form->coeffs, [](const auto& term) { return term.second == 0; });
  form->forget_cancelled();
  return !__builtin_mul_overflow(form->constant, factor, &form->constant);
}

bool add_into(Affine* into, const Affine& other) {
  for (const auto& [var, coefficient] : other.terms()) {
    auto it = into->coeffs.find(var);
    if (it == into->coeffs.end()) {
      into->coeffs.emplace(var, coefficient);
      into->order.push_back(var);
      into->vars[var] = other.vars.at(var);
    } else if (__builtin_add_overflow(it->second, coefficient, &it->second)) {
      return false;
    }
  }
  std::erase_if(into->coeffs, [](const auto& term) { return term.second == 0; });
  into->forget_cancelled();
  return !__builtin_add_overflow(into->constant, other.constant, &into->constant);
}

}  // namespace

std::optional<Affine> affine_form(const Expr& expr) {
  if (const IntImm* imm = expr->as<IntImm>()) return Affine{{}, imm->value, {}, {}};
  if (const VarRef* ref = expr->as<VarRef>()) {
    return Affine{{{ref->var.get(), 1}}, 0, {{ref->var.get(), ref->var}}, {ref->var.get()}};
  }
  if (const Unary* unary = expr->as<Unary>()) {
    if (unary->op != UnaryOp::Neg) return std::nullopt;
    std::optional<Affine> a = affine_form(unary->a);
    if (!a || !scale(&*a, -1)) return std::nullopt;
    return a;
  }
  const Binary* node = expr->as<Binary>();
  if (!node || node->dtype != DType::Index) return std::nullopt;
  std::optional<Affine> a = affine_form(node->a), b = affine_form(node->b);
  if (!a || !b) return std::nullopt;
  switch (node->op) {
    case BinaryOp::Add:
      if (!add_into(&*a, *b)) return std::nullopt;
      return a;
    case BinaryOp::Sub:
      if (!scale(&*b, -1) || !add_into(&*a, *b)) return std::nullopt;
      return a;
    case BinaryOp::Mul:
      // Affine only when one side is a constant.
      if (a->coeffs.empty()) std::swap(a, b);
      if (!b->coeffs.empty() || !scale(&*a, b->constant)) return std::nullopt;
      return a;
    default: return std::nullopt;
  }
}

namespace {

class IndexSimplifier : public Mutator {
 public:
  Expr mutate(const Expr& expr) override {
    if (expr->dtype != DType::Index) return Mutator::mutate(expr);
    const std::optional<Affine> form = affine_form(expr);
    const bool positive =
        form && std::all_of(form->coeffs.begin(), form->coeffs.end(),
                            [](const auto& term) { return term.second > 0; });
    if (!positive) return Mutator::mutate(expr);
    Expr sum = int_imm(0);
    for (const auto& [var, coefficient] : form->terms()) {
      sum = index_add(sum, index_mul(var_ref(form->vars.at(var)), coefficient));
    }
    if (form->constant < 0 && !form->coeffs.empty()) {
      return binary(BinaryOp::Sub, sum, int_imm(-form->constant));
    }
    return index_add(sum, int_imm(form->constant));
  }

};

}  // namespace

Expr simplify_index(const Expr& expr) {
  IndexSimplifier simplifier;
  return simplifier.mutate(expr);
}

// ---------------------------------------------------------------------------------------------
// Index ranges

int64_t IndexRange::max_offset() const {
  int64_t total = 0;
  for (const auto& [loop, coefficient] : offset) total += coefficient * (loop->extent - 1);
  return total;
}

std::string IndexRange::to_string() const {
  std::string text;
  for (const auto& [loop, coefficient] : offset) {
    text += loop->var->name;
    if (coefficient != 1) text += " * " + std::to_string(coefficient);
    text += " + ";
  }
  return text + "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

std::optional<IndexRange> range_in_iteration(const Expr& binding, const BlockPath& path,
                                             size_t depth, const std::string& what,
                                             std::string* reason) {
  const std::optional<Affine> form = affine_form(binding);
  if (!form) {
    *reason = what + " is bound to " + print_expr(binding) +
              ", which is not an affine function of its loops";
    return std::nullopt;
  }
  std::unordered_map<const VarNode*, size_t> loop_depth;
  for (size_t d = 0; d < path.stmts.size(); ++d) {
    if (const For* loop = path.stmts[d]->as<For>()) loop_depth[loop->var.get()] = d;
  }
  if (form->constant < 0) {
    *reason = what + " is bound to " + print_expr(binding) + ", which has a negative constant";
    return std::nullopt;
  }
  IndexRange range;
  int64_t inner_max = 0;
  std::vector<std::pair<size_t, int64_t>> outer;  // (depth, coefficient)
  for (const auto& [var, coefficient] : form->terms()) {
    auto it = loop_depth.find(var);
    if (it == loop_depth.end()) {
      *reason = what + " is bound to " + print_expr(binding) + ", which uses " + var->name +
                ", not a loop around it";
      return std::nullopt;
    }
    if (coefficient < 0) {
      *reason = what + " is bound to " + print_expr(binding) + ", which decreases with loop " +
                var->name + "; only bindings that grow with every loop are supported";
      return std::nullopt;
    }
    if (it->second <= depth) {
      outer.emplace_back(it->second, coefficient);
    } else {
      inner_max += coefficient * (path.stmts[it->second]->as<For>()->extent - 1);
      range.looped = true;
    }
  }
  std::sort(outer.begin(), outer.end());
  for (const auto& [d, coefficient] : outer) {
    range.offset.emplace_back(path.stmts[d]->as<For>(), coefficient);
  }
  range.lo = form->constant;
  range.hi = form->constant + inner_max + 1;
  return range;
}

bool merge_ranges(IndexRange* into, const IndexRange& other) {
  if (into->offset != other.offset) return false;
  into->lo = std::min(into->lo, other.lo);
  into->hi = std::max(into->hi, other.hi);
  into->looped = into->looped || other.looped;
  return true;
}

void clip_range(IndexRange* range, int64_t extent) {
  if (!range->offset.empty()) return;
  range->lo = std::max<int64_t>(range->lo, 0);
  range->hi = std::min(range->hi, extent);
}

bool iterations_disjoint(const IndexRange& range) {
  std::vector<std::pair<int64_t, int64_t>> terms;  // (coefficient, extent)
  for (const auto& [loop, coefficient] : range.offset) {
    if (loop->extent > 1) terms.emplace_back(coefficient, loop->extent);
  }
  std::sort(terms.begin(), terms.end());
  // Two iterations that first differ (from the largest coefficient down) in term j are at least
  // c_j minus the span of the smaller terms apart; that must be at least the width.
  // Overflow means spans beyond any real extent; refusing then is safe.
  int64_t span = range.width();
  for (const auto& [coefficient, extent] : terms) {
    int64_t step = 0;
    if (coefficient < span || __builtin_mul_overflow(coefficient, extent - 1, &step) ||
        __builtin_add_overflow(span, step, &span)) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Store form

namespace {

// Appends the stores of `stmt`; false when it holds anything else (a loop inside a block).
bool collect_stores(const Stmt& stmt, std::vector<const Store*>* stores) {
  if (!stmt) return true;
  if (const Store* store = stmt->as<Store>()) {
    stores->push_back(store);
    return true;
  }
  if (const Seq* seq = stmt->as<Seq>()) {
    for (const Stmt& child : seq->stmts) {
      if (!collect_stores(child, stores)) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

std::optional<StoreIndexing> store_indexing(const Block& block, std::string* reason) {
  const std::string plain_form =
      "; compute_at and reverse_compute_at follow only blocks whose every store is "
      "X[i, j, ...] = ... with its spatial iteration variables";
  std::vector<const Store*> stores;
  if (!collect_stores(block.init, &stores) || !collect_stores(block.body, &stores) ||
      stores.empty()) {
    *reason = "block " + block.name + " runs more than stores" + plain_form;
    return std::nullopt;
  }
  size_t spatial_count = 0;
  for (const IterVar& iter : block.iter_vars) spatial_count += iter.kind == IterKind::Spatial;

  StoreIndexing indexing{stores.front()->buffer, {}};
  for (const Expr& index : stores.front()->indices) {
    const VarRef* ref = index->as<VarRef>();
    auto it = std::find_if(block.iter_vars.begin(), block.iter_vars.end(),
                           [&](const IterVar& iter) { return ref && iter.var == ref->var; });
    const size_t position = static_cast<size_t>(it - block.iter_vars.begin());
    const bool repeated = std::find(indexing.iter_of_dim.begin(), indexing.iter_of_dim.end(),
                                    position) != indexing.iter_of_dim.end();
    if (it == block.iter_vars.end() || it->kind != IterKind::Spatial || repeated) {
      *reason = "block " + block.name + " stores to " + indexing.buffer->name + " at index " +
                print_expr(index) + plain_form;
      return std::nullopt;
    }
    indexing.iter_of_dim.push_back(position);
  }
  if (indexing.iter_of_dim.size() != spatial_count) {
    *reason = "block " + block.name + " does not index " + indexing.buffer->name +
              " with every spatial iteration variable" + plain_form;
    return std::nullopt;
  }
  for (const Store* store : stores) {
    bool same = store->buffer == indexing.buffer;
    for (size_t d = 0; same && d < store->indices.size(); ++d) {
      const VarRef* ref = store->indices[d]->as<VarRef>();
      same = ref && ref->var == block.iter_vars[indexing.iter_of_dim[d]].var;
    }
    if (!same) {
      *reason = "block " + block.name + " stores to " + store->buffer->name +
                " at different indices than to " + indexing.buffer->name + plain_form;
      return std::nullopt;
    }
  }
  return indexing;
}

std::optional<size_t> iter_var_index(const Block& block, const Expr& index) {
  const VarRef* ref = index->as<VarRef>();
  for (size_t i = 0; ref && i < block.iter_vars.size(); ++i) {
    if (block.iter_vars[i].var == ref->var) return i;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// What one iteration writes and reads

std::optional<std::vector<IndexRange>> parts_written(const BlockPath& path, size_t depth,
                                                     std::string* reason) {
  const Block& block = path.block();
  const std::optional<StoreIndexing> indexing = store_indexing(block, reason);
  if (!indexing) return std::nullopt;
  const std::string at =
      "loop " + path.stmts[depth]->as<For>()->var->name + " of block " + block.name;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    if (block.iter_vars[i].kind != IterKind::Reduce) continue;
    for (size_t d = 0; d <= depth; ++d) {
      const For* outer = path.stmts[d]->as<For>();
      if (outer && uses_var(block.bindings[i], outer->var.get())) {
        *reason = "loop " + outer->var->name + " iterates reduction axis " +
                  block.iter_vars[i].var->name + " of block " + block.name + ", whose values "
                  "are final only after it";
        return std::nullopt;
      }
    }
  }
  std::vector<IndexRange> parts;
  const std::vector<int64_t>& shape = indexing->buffer->shape;
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    const size_t i = indexing->iter_of_dim[dim];
    std::optional<IndexRange> part = range_in_iteration(
        block.bindings[i], path, depth,
        "iteration variable " + block.iter_vars[i].var->name + " of block " + block.name, reason);
    if (!part) return std::nullopt;
    clip_range(&*part, shape[dim]);
    if (!iterations_disjoint(*part)) {
      *reason = "the parts of dimension " + std::to_string(dim) + " of " +
                indexing->buffer->name + " that iterations of " + at + " write overlap (" +
                part->to_string() + ")";
      return std::nullopt;
    }
    parts.push_back(std::move(*part));
  }
  return parts;
}

std::string uncovered_read(const Block& reader, const std::vector<IndexRange>& ranges,
                           const BufferNode* input, const BlockPath& writer_path, size_t depth) {
  const Block& writer = writer_path.block();
  const std::string consequence =
      "; block " + reader.name + " cannot read " + input->name + " in the same iteration";
  std::string reason;
  const std::optional<std::vector<IndexRange>> parts =
      parts_written(writer_path, depth, &reason);
  if (!parts) return reason + consequence;
  std::vector<const Load*> loads = collect_loads(reader.init, input);
  for (const Load* load : collect_loads(reader.body, input)) loads.push_back(load);
  for (const Load* load : loads) {
    for (size_t dim = 0; dim < load->indices.size(); ++dim) {
      const std::optional<size_t> i = iter_var_index(reader, load->indices[dim]);
      if (!i) {
        return "block " + reader.name + " reads " + input->name + " at index " +
               print_expr(load->indices[dim]) + ", not at an iteration variable" + consequence;
      }
      const IndexRange& read = ranges[*i];
      const IndexRange& part = (*parts)[dim];
      if (read.offset != part.offset || read.lo < part.lo || read.hi > part.hi) {
        return "block " + reader.name + " reads " + read.to_string() + " of dimension " +
               std::to_string(dim) + " of " + input->name + " in one iteration of loop " +
               writer_path.stmts[depth]->as<For>()->var->name + ", where block " + writer.name +
               " writes " + part.to_string() + consequence;
      }
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Rebuilding a block over ranges

Stmt build_region_nest(const Block& block, const std::vector<IndexRange>& ranges,
                       std::set<std::string>* taken) {
  std::vector<std::pair<Var, int64_t>> loops;  // outermost first
  std::vector<Expr> bindings;
  Expr predicate;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    const IterVar& iter = block.iter_vars[i];
    const IndexRange& range = ranges[i];
    Expr binding = int_imm(0);
    for (const auto& [loop, coefficient] : range.offset) {
      binding = index_add(binding, index_mul(var_ref(loop->var), coefficient));
    }
    if (range.width() > 1 || range.looped) {
      Var var = make_var(fresh_name(iter.var->name, taken));
      binding = index_add(binding, var_ref(var));
      loops.emplace_back(std::move(var), range.width());
    }
    binding = index_add(binding, int_imm(range.lo));
    if (range.max_offset() + range.hi > iter.extent) {
      predicate = conjunction(predicate, index_lt(binding, iter.extent));
    }
    bindings.push_back(std::move(binding));
  }
  Stmt nest = make_block(block.name, block.iter_vars, std::move(bindings), std::move(predicate),
                         block.init, block.body, block.provenance);
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
    nest = make_for(it->first, it->second, std::move(nest), block.provenance);
  }
  return nest;
}

}  // namespace nautilus::sched
