#include "core/sched/cache_stage.h"

#include <numeric>

#include "core/sched/decision_args.h"

namespace nautilus::sched {

using namespace scalar;

std::string check_at_keyword(const Decision& decision, std::string_view signature) {
  for (const DecisionArg& arg : decision.args) {
    if (!arg.key.empty() && (arg.key != "at" || arg.is_int())) {
      return usage_reason(signature, "the only keyword is at=LOOP");
    }
  }
  return "";
}

std::optional<size_t> stage_depth(const BlockPath& path, const std::optional<std::string>& at,
                                  std::string* reason) {
  if (!at) return 0;
  const std::optional<size_t> depth = path.loop_depth(*at);
  if (!depth) {
    *reason = "block " + path.block().name + " has no loop " + *at + " around it; its loops are " +
              path.loop_names();
  }
  return depth;
}

std::optional<CachedDim> range_dim(IndexRange range, int64_t extent, const std::string& what,
                                   std::string* reason) {
  CachedDim dim;
  clip_range(&range, extent);
  if (range.lo < 0 || range.width() < 1) {
    *reason = what + " covers no element of the tensor (" + range.to_string() + ")";
    return std::nullopt;
  }
  int64_t g = 0;
  for (const auto& [loop, coefficient] : range.offset) {
    // A loop of one iteration does not move anything.
    if (loop->extent > 1) g = std::gcd(g, coefficient);
  }
  if (g > 0) {
    if (range.hi > g) {
      *reason = what + " runs over " + range.to_string() + " in one iteration, so the parts of "
                "different iterations overlap or are closer than their width; it cannot be "
                "held in a compact local buffer";
      return std::nullopt;
    }
    dim.modulus = g;
  }
  dim.range = std::move(range);
  return dim;
}

std::vector<int64_t> local_shape(const std::vector<CachedDim>& dims) {
  std::vector<int64_t> shape;
  for (const CachedDim& dim : dims) {
    if (dim.kept()) shape.push_back(dim.range.width());
  }
  if (shape.empty()) shape.push_back(1);
  return shape;
}

std::vector<Expr> local_indices(const std::vector<CachedDim>& dims,
                                const std::vector<Expr>& indices) {
  std::vector<Expr> result;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!dims[d].kept()) continue;
    Expr index = indices[d];
    if (dims[d].modulus > 0) index = binary(BinaryOp::Mod, index, int_imm(dims[d].modulus));
    if (dims[d].range.lo != 0) index = binary(BinaryOp::Sub, index, int_imm(dims[d].range.lo));
    result.push_back(index);
  }
  if (result.empty()) result.push_back(int_imm(0));
  return result;
}

std::optional<MemoryScope> parse_cache_scope(const std::string& name) {
  if (name == "shared") return MemoryScope::Shared;
  if (name == "register") return MemoryScope::Register;
  return std::nullopt;
}

std::string cache_suffix(MemoryScope scope) {
  return scope == MemoryScope::Shared ? "_shared" : scope == MemoryScope::Register ? "_reg" : "";
}

Stmt build_copy_nest(const std::string& name, const Buffer& tensor, const Buffer& local,
                     const std::vector<CachedDim>& dims, const std::vector<std::string>& iter_names,
                     bool into_local, std::set<std::string>* taken, Provenance provenance) {
  std::vector<IterVar> iter_vars;
  std::vector<Expr> bindings;
  std::vector<std::pair<Var, int64_t>> loops;
  Expr predicate;
  std::vector<Expr> indices;
  for (size_t d = 0; d < dims.size(); ++d) {
    Var iter = make_var(iter_names[d]);
    iter_vars.push_back({iter, tensor->shape[d], IterKind::Spatial});
    indices.push_back(var_ref(iter));
    if (dims[d].fixed) {
      bindings.push_back(dims[d].fixed);
      continue;
    }
    const IndexRange& range = dims[d].range;
    Expr binding = int_imm(0);
    for (const auto& [loop, coefficient] : range.offset) {
      binding = index_add(binding, index_mul(var_ref(loop->var), coefficient));
    }
    if (range.width() > 1) {
      Var var = make_var(fresh_name(iter_names[d], taken));
      binding = index_add(binding, var_ref(var));
      loops.emplace_back(std::move(var), range.width());
    }
    binding = index_add(binding, int_imm(range.lo));
    if (range.max_offset() + range.hi > tensor->shape[d]) {
      predicate = conjunction(predicate, index_lt(binding, tensor->shape[d]));
    }
    bindings.push_back(std::move(binding));
  }
  const std::vector<Expr> local_index = local_indices(dims, indices);
  Stmt body = into_local
                  ? make_store(local, local_index, load(tensor, indices, provenance), provenance)
                  : make_store(tensor, indices, load(local, local_index, provenance), provenance);
  Stmt nest = make_block(name, std::move(iter_vars), std::move(bindings), std::move(predicate),
                         nullptr, std::move(body), provenance);
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
    nest = make_for(it->first, it->second, std::move(nest), provenance);
  }
  return nest;
}

}  // namespace nautilus::sched
