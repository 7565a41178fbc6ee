#include "core/matile/split_masked.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/matile/layouts.h"

namespace nautilus::matile {
namespace {

// An index tile as loop * var + sum(coefficient * symbol) + constant + lane, where the symbols
// are uniform index scalars defined outside the loop and every element's lane part lies in
// [lane_min, lane_max] (iota lanes; 0 for uniform values).
struct Affine {
  int64_t loop = 0;
  std::map<std::string, std::pair<Value, int64_t>> symbols;  // by name: a fixed emission order
  int64_t constant = 0;
  int64_t lane_min = 0, lane_max = 0;

  static Affine of_loop() {
    Affine a;
    a.loop = 1;
    return a;
  }
  static Affine of_constant(int64_t c) {
    Affine a;
    a.constant = c;
    return a;
  }
  static Affine of_lanes(int64_t count) {
    Affine a;
    a.lane_max = std::max<int64_t>(count - 1, 0);
    return a;
  }

  bool is_constant() const { return loop == 0 && symbols.empty() && lane_min == lane_max; }
};

Affine scaled(Affine a, int64_t k) {
  a.loop *= k;
  for (auto& [name, symbol] : a.symbols) symbol.second *= k;
  a.constant *= k;
  a.lane_min *= k;
  a.lane_max *= k;
  if (k < 0) std::swap(a.lane_min, a.lane_max);
  return a;
}

Affine sum(const Affine& a, const Affine& b) {
  Affine s = a;
  s.loop += b.loop;
  for (const auto& [name, symbol] : b.symbols) {
    auto [it, fresh] = s.symbols.try_emplace(name, symbol);
    if (!fresh) it->second.second += symbol.second;
    if (it->second.second == 0) s.symbols.erase(it);
  }
  s.constant += b.constant;
  s.lane_min += b.lane_min;
  s.lane_max += b.lane_max;
  return s;
}

bool is_index(const Value& value) { return value && value->type.dtype == DType::Index; }

// Every value's defining op in a kernel, and which values a loop's body defines.
class Definitions {
 public:
  explicit Definitions(const Region& body) { record(body); }

  const Op* op_of(const Value& value) const {
    auto it = defs_.find(value.get());
    return it == defs_.end() ? nullptr : it->second;
  }

 private:
  void record(const Region& region) {
    for (const OpPtr& op : region.ops) {
      for (const Value& result : op->results) defs_[result.get()] = op.get();
      if (op->body) record(*op->body);
    }
  }

  std::unordered_map<const ValueNode*, const Op*> defs_;
};

// Every value the region defines, nested loops included: results, loop variables, block
// arguments.
void for_each_defined(const Region& region, const std::function<void(const Value&)>& visit) {
  for (const OpPtr& op : region.ops) {
    for (const Value& result : op->results) visit(result);
    if (op->loop_var) visit(op->loop_var);
    for (const Value& arg : op->block_args) visit(arg);
    if (op->body) for_each_defined(*op->body, visit);
  }
}

// The affine form of an index value inside one loop, or nullopt.
class AffineAnalysis {
 public:
  AffineAnalysis(const Definitions& defs, const Op& loop) : defs_(defs), loop_(loop) {
    inside_.insert(loop.loop_var.get());
    for (const Value& arg : loop.block_args) inside_.insert(arg.get());
    if (loop.body) for_each_defined(*loop.body, [&](const Value& v) { inside_.insert(v.get()); });
  }

  std::optional<Affine> of(const Value& value, int depth = 0) const {
    if (!is_index(value) || depth > 32) return std::nullopt;
    if (value == loop_.loop_var) return Affine::of_loop();
    const Op* op = defs_.op_of(value);
    const bool outside = !inside_.count(value.get());
    auto symbol = [&]() -> std::optional<Affine> {
      if (!outside || value->type.rank() != 0) return std::nullopt;
      Affine a;
      a.symbols[value->name] = {value, 1};
      return a;
    };
    if (!op) return symbol();
    switch (op->kind) {
      case OpKind::Full:
        if (op->constant != static_cast<double>(static_cast<int64_t>(op->constant))) {
          return std::nullopt;
        }
        return Affine::of_constant(static_cast<int64_t>(op->constant));
      case OpKind::Iota:
        return Affine::of_lanes(op->extent);
      case OpKind::Broadcast:
      case OpKind::Permute:
      case OpKind::ExtractSlice:  // a subset of the source's elements: its bounds still hold
      case OpKind::ConvertLayout:
        return op->operands.empty() ? std::nullopt : of(op->operands[0], depth + 1);
      case OpKind::Binary: {
        if (op->operands.size() != 2) return std::nullopt;
        const std::optional<Affine> a = of(op->operands[0], depth + 1);
        const std::optional<Affine> b = of(op->operands[1], depth + 1);
        if (a && b) {
          switch (op->binary_op) {
            case BinaryOp::Add: return sum(*a, *b);
            case BinaryOp::Sub: return sum(*a, scaled(*b, -1));
            case BinaryOp::Mul:
              if (b->is_constant()) return scaled(*a, b->constant + b->lane_min);
              if (a->is_constant()) return scaled(*b, a->constant + a->lane_min);
              break;
            default: break;
          }
        }
        return symbol();
      }
      default: return symbol();
    }
  }

 private:
  const Definitions& defs_;
  const Op& loop_;
  std::unordered_set<const ValueNode*> inside_;
};

// A comparison that holds on the whole tile exactly in the iterations var <= floor(bound /
// divisor), the bound an affine form without loop or lane part.
struct PrefixMask {
  const Op* select = nullptr;
  Affine bound;
  int64_t divisor = 1;
};

// `select(compare(a, b), x, y)` with a and b affine: the margin min(greater) - max(smaller) as a
// function of the loop variable must fall as the loop advances (a prefix of whole-tile-true
// iterations, the masked ones after it).
std::optional<PrefixMask> prefix_mask(const AffineAnalysis& affine, const Definitions& defs,
                                      const Op& select) {
  if (select.operands.size() != 3) return std::nullopt;
  // The condition may be a view of the comparison (a key-bounds mask [n] broadcast to the
  // scores' [m, n]): every element it holds is one the comparison computed.
  const Op* compare = defs.op_of(select.operands[0]);
  for (int depth = 0; compare && depth < 8; ++depth) {
    const bool view = compare->kind == OpKind::Broadcast || compare->kind == OpKind::Permute ||
                      compare->kind == OpKind::ExtractSlice ||
                      (compare->kind == OpKind::ConvertLayout && !compare->via_shared);
    if (!view || compare->operands.empty()) break;
    compare = defs.op_of(compare->operands[0]);
  }
  if (!compare || compare->kind != OpKind::Compare || compare->operands.size() != 2) {
    return std::nullopt;
  }
  if (compare->results[0]->type.rank() == 0) return std::nullopt;  // a uniform predicate
  const std::optional<Affine> a = affine.of(compare->operands[0]);
  const std::optional<Affine> b = affine.of(compare->operands[1]);
  if (!a || !b) return std::nullopt;
  // smaller <= greater - strict on every element of the tile.
  const Affine* smaller = nullptr;
  const Affine* greater = nullptr;
  int64_t strict = 0;
  switch (compare->compare_op) {
    case CompareOp::LE: smaller = &*a, greater = &*b; break;
    case CompareOp::LT: smaller = &*a, greater = &*b, strict = 1; break;
    case CompareOp::GE: smaller = &*b, greater = &*a; break;
    case CompareOp::GT: smaller = &*b, greater = &*a, strict = 1; break;
    default: return std::nullopt;
  }
  // margin = (greater - smaller) without lanes, plus the worst lane pairing.
  Affine margin = sum(*greater, scaled(*smaller, -1));
  margin.constant += greater->lane_min - smaller->lane_max - strict;
  margin.lane_min = margin.lane_max = 0;
  if (margin.loop >= 0) return std::nullopt;  // true on a suffix, or never changes
  PrefixMask mask;
  mask.select = &select;
  mask.divisor = -margin.loop;
  margin.loop = 0;
  mask.bound = margin;
  return mask;
}

// ---------------------------------------------------------------------------------------------
// Rebuilding ops with values replaced.

using ValueMap = std::unordered_map<const ValueNode*, Value>;

Value mapped(const ValueMap& map, const Value& value) {
  if (!value) return value;
  auto it = map.find(value.get());
  return it == map.end() ? value : it->second;
}

class Rewriter {
 public:
  explicit Rewriter(std::set<std::string>* names) : names_(names) {}

  std::string fresh(const std::string& base) {
    if (names_->insert(base).second) return base;
    for (int n = 1;; ++n) {
      std::string name = base + "." + std::to_string(n);
      if (names_->insert(name).second) return name;
    }
  }

  Value renamed(const Value& value, const std::string& suffix) {
    return make_value(fresh(value->name + suffix), value->type, value->layout);
  }

  // `op` with every used value mapped; with `suffix` non-empty, its results (and a loop's
  // variable and block arguments) are new values named with it, recorded in `map`.
  Op rebuild(const Op& op, ValueMap& map, const std::string& suffix) {
    Op out = op;
    for (Value& v : out.operands) v = mapped(map, v);
    for (Value& v : out.access.offsets) v = mapped(map, v);
    out.shared.stage = mapped(map, out.shared.stage);
    out.shared_b.stage = mapped(map, out.shared_b.stage);
    out.predicate = mapped(map, out.predicate);
    out.trip_count = mapped(map, out.trip_count);
    if (!suffix.empty()) {
      if (out.loop_var) {
        out.loop_var = renamed(op.loop_var, suffix);
        map[op.loop_var.get()] = out.loop_var;
      }
      for (Value& arg : out.block_args) {
        Value fresh_arg = renamed(arg, suffix);
        map[arg.get()] = fresh_arg;
        arg = fresh_arg;
      }
      for (Value& result : out.results) {
        Value fresh_result = renamed(result, suffix);
        map[result.get()] = fresh_result;
        result = fresh_result;
      }
    }
    if (op.body) out.body = region(*op.body, map, suffix);
    return out;
  }

  RegionPtr region(const Region& region, ValueMap& map, const std::string& suffix) {
    std::vector<OpPtr> ops;
    for (const OpPtr& op : region.ops) ops.push_back(make_op(rebuild(*op, map, suffix)));
    return make_region(std::move(ops));
  }

 private:
  std::set<std::string>* names_;
};

bool removable_when_unused(OpKind kind) {
  return is_elementwise(kind) || kind == OpKind::Broadcast || kind == OpKind::Permute ||
         kind == OpKind::ExtractSlice;
}

void count_uses(const Region& region, std::unordered_map<const ValueNode*, int>* uses) {
  for (const OpPtr& op : region.ops) {
    for (const Value& used : used_values(*op)) ++(*uses)[used.get()];
    if (op->body) count_uses(*op->body, uses);
  }
}

// Drops register-only ops whose results nothing reads (the index arithmetic of a removed
// mask), until none is left.
RegionPtr without_dead_ops(RegionPtr region) {
  while (true) {
    std::unordered_map<const ValueNode*, int> uses;
    count_uses(*region, &uses);
    std::vector<OpPtr> kept;
    bool removed = false;
    for (const OpPtr& op : region->ops) {
      const bool dead = removable_when_unused(op->kind) && !op->results.empty() &&
                        std::none_of(op->results.begin(), op->results.end(),
                                     [&](const Value& r) { return uses.count(r.get()); });
      if (dead) {
        removed = true;
      } else {
        kept.push_back(op);
      }
    }
    if (!removed) return region;
    region = make_region(std::move(kept));
  }
}

class Splitter {
 public:
  Splitter(const Kernel& kernel, std::set<std::string>* names)
      : defs_(*kernel.body), rewriter_(names), threads_(kernel.threads()) {}

  RegionPtr region(const Region& in, bool* changed) {
    std::vector<OpPtr> ops;
    for (const OpPtr& op : in.ops) {
      if (op->kind == OpKind::For && op->body) {
        if (split(*op, &ops)) {
          *changed = true;
          continue;
        }
        Op copy = *op;
        bool inner_changed = false;
        copy.body = region(*op->body, &inner_changed);
        if (inner_changed) {
          *changed = true;
          ops.push_back(make_op(std::move(copy)));
          continue;
        }
      }
      ops.push_back(op);
    }
    return make_region(std::move(ops));
  }

 private:
  Value uniform(const std::string& name) {
    return make_value(rewriter_.fresh(name), vrtile::index_scalar(), uniform_layout({}, threads_));
  }

  // One full op per distinct constant of a split (the printed IR reads `%c64`, not `%c64.3`).
  Value constant(int64_t c, const Provenance& provenance, std::vector<OpPtr>* out) {
    if (auto it = constants_.find(c); it != constants_.end()) return it->second;
    Op op;
    op.kind = OpKind::Full;
    op.constant = static_cast<double>(c);
    op.results = {uniform(c >= 0 ? "c" + std::to_string(c) : "c_minus" + std::to_string(-c))};
    op.provenance = provenance;
    out->push_back(make_op(op));
    constants_[c] = op.results[0];
    return op.results[0];
  }

  Value binary(BinaryOp kind, const Value& a, const Value& b, const std::string& name,
               const Provenance& provenance, std::vector<OpPtr>* out) {
    Op op;
    op.kind = OpKind::Binary;
    op.binary_op = kind;
    op.operands = {a, b};
    op.results = {uniform(name)};
    op.provenance = provenance;
    out->push_back(make_op(op));
    return op.results[0];
  }

  // The iterations before the first masked one: floor(bound / divisor) + 1, at least 0.
  Value unmasked_count(const PrefixMask& mask, const std::string& loop_name,
                       const Provenance& provenance, std::vector<OpPtr>* out) {
    Value bound = constant(mask.bound.constant, provenance, out);
    for (const auto& [name, symbol] : mask.bound.symbols) {
      Value term = symbol.first;
      if (symbol.second != 1) {
        term = binary(BinaryOp::Mul, term, constant(symbol.second, provenance, out),
                      loop_name + "_term", provenance, out);
      }
      bound = binary(BinaryOp::Add, bound, term, loop_name + "_bound", provenance, out);
    }
    Value last = binary(BinaryOp::FloorDiv, bound, constant(mask.divisor, provenance, out),
                        loop_name + "_last_unmasked", provenance, out);
    Value count = binary(BinaryOp::Add, last, constant(1, provenance, out),
                         loop_name + "_unmasked_count", provenance, out);
    return binary(BinaryOp::Max, count, constant(0, provenance, out),
                  loop_name + "_unmasked_count", provenance, out);
  }

  bool split(const Op& loop, std::vector<OpPtr>* out) {
    constants_.clear();  // the ones of an earlier split may not dominate this loop
    AffineAnalysis affine(defs_, loop);
    std::vector<PrefixMask> masks;
    for (const OpPtr& op : loop.body->ops) {
      if (op->kind != OpKind::Select) continue;
      if (std::optional<PrefixMask> mask = prefix_mask(affine, defs_, *op)) masks.push_back(*mask);
    }
    if (masks.empty()) return false;
    // A bound without symbols is the same in every CTA. One that covers no iteration leaves
    // the first loop empty: no split. One that covers them all masks nothing whole-tile (it
    // still goes, since it holds in the first loop); split only when some mask may stop sooner.
    bool may_stop_early = false;
    for (const PrefixMask& mask : masks) {
      if (!mask.bound.symbols.empty()) {
        may_stop_early = true;
        continue;
      }
      const int64_t b = mask.bound.constant, d = mask.divisor;
      const int64_t count = (b >= 0 ? b / d : -((-b + d - 1) / d)) + 1;
      if (count <= 0) return false;
      may_stop_early = may_stop_early || count < loop.extent;
    }
    if (!may_stop_early) return false;

    const Provenance& provenance = loop.provenance;
    const std::string name = loop.loop_var->name;
    Value unmasked;
    for (const PrefixMask& mask : masks) {
      Value count = unmasked_count(mask, name, provenance, out);
      unmasked = unmasked ? binary(BinaryOp::Min, unmasked, count, name + "_unmasked_count",
                                   provenance, out)
                          : count;
    }
    Value trips = constant(loop.extent, provenance, out);
    if (loop.trip_count) {
      trips = binary(BinaryOp::Min, trips, loop.trip_count, name + "_trips", provenance, out);
    }
    unmasked = binary(BinaryOp::Min, unmasked, trips, name + "_unmasked", provenance, out);
    Value masked = binary(BinaryOp::Sub, trips, unmasked, name + "_masked", provenance, out);

    // The unmasked loop: the original body with each mask's select replaced by its value.
    ValueMap substitutions;
    for (const PrefixMask& mask : masks) {  // in program order: a select of a select resolves
      substitutions[mask.select->results[0].get()] =
          mapped(substitutions, mask.select->operands[1]);
    }
    std::vector<OpPtr> body;
    for (const OpPtr& op : loop.body->ops) {
      if (substitutions.count(op->results.empty() ? nullptr : op->results[0].get())) continue;
      body.push_back(make_op(rewriter_.rebuild(*op, substitutions, "")));
    }
    Op first = loop;
    first.trip_count = unmasked;
    first.body = without_dead_ops(make_region(std::move(body)));
    for (Value& result : first.results) result = rewriter_.renamed(result, ".unmasked");
    out->push_back(make_op(first));

    // The masked loop: the original body on var = unmasked + its own variable, carrying on from
    // the first loop's results and producing the original results.
    ValueMap renames;
    Op second = loop;
    second.operands = first.results;
    second.trip_count = masked;
    second.loop_var = rewriter_.renamed(loop.loop_var, ".masked");
    for (Value& arg : second.block_args) {
      Value fresh_arg = rewriter_.renamed(arg, ".masked");
      renames[arg.get()] = fresh_arg;
      arg = fresh_arg;
    }
    Op offset;
    offset.kind = OpKind::Binary;
    offset.binary_op = BinaryOp::Add;
    offset.operands = {unmasked, second.loop_var};
    offset.results = {rewriter_.renamed(loop.loop_var, "")};
    offset.provenance = provenance;
    renames[loop.loop_var.get()] = offset.results[0];
    std::vector<OpPtr> masked_body = {make_op(offset)};
    for (const OpPtr& op : loop.body->ops) {
      masked_body.push_back(make_op(rewriter_.rebuild(*op, renames, ".masked")));
    }
    second.body = make_region(std::move(masked_body));
    out->push_back(make_op(second));
    return true;
  }

  Definitions defs_;
  Rewriter rewriter_;
  int64_t threads_;
  std::map<int64_t, Value> constants_;
};

}  // namespace

Value split_loop_offset(const Op& first, const Op& second) {
  if (first.kind != OpKind::For || second.kind != OpKind::For || !first.trip_count ||
      !second.body || second.body->ops.empty() || second.operands != first.results) {
    return nullptr;
  }
  const Op& offset = *second.body->ops.front();
  const bool matches = offset.kind == OpKind::Binary && offset.binary_op == BinaryOp::Add &&
                       offset.operands.size() == 2 && offset.operands[0] == first.trip_count &&
                       offset.operands[1] == second.loop_var && offset.results.size() == 1;
  return matches ? offset.results[0] : nullptr;
}

ModulePtr split_masked_loops(const ModulePtr& module) {
  if (!module) return module;
  auto result = std::make_shared<Module>(*module);
  bool any = false;
  for (KernelPtr& kernel : result->kernels) {
    if (!kernel || !kernel->body) continue;
    std::set<std::string> names;
    for (const GridAxis& axis : kernel->grid) {
      if (axis.var) names.insert(axis.var->name);
    }
    for_each_defined(*kernel->body, [&](const Value& v) { names.insert(v->name); });
    Splitter splitter(*kernel, &names);
    bool changed = false;
    RegionPtr body = splitter.region(*kernel->body, &changed);
    if (!changed) continue;
    auto copy = std::make_shared<Kernel>(*kernel);
    copy->body = body;
    kernel = copy;
    any = true;
  }
  return any ? ModulePtr(result) : module;
}

}  // namespace nautilus::matile
