#include "core/matile/split_masked.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/matile/layouts.h"
#include "core/matile/visitor.h"

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
  explicit Definitions(const Region& body) {
    for_each_op(body, [&](const Op& op) {
      for (const Value& result : op.results) defs_[result.get()] = &op;
    });
  }

  const Op* op_of(const Value& value) const {
    auto it = defs_.find(value.get());
    return it == defs_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<const ValueNode*, const Op*> defs_;
};

// The affine form of an index value inside one loop, or nullopt.
class AffineAnalysis {
 public:
  AffineAnalysis(const Definitions& defs, const Op& loop) : defs_(defs), loop_(loop) {
    inside_.insert(loop.loop_var.get());
    for (const Value& arg : loop.block_args) inside_.insert(arg.get());
    if (loop.body) {
      for_each_defined_value(*loop.body, [&](const Value& v) { inside_.insert(v.get()); });
    }
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

Value mapped(const ValueMap& map, const Value& value) {
  if (!value) return value;
  auto it = map.find(value.get());
  return it == map.end() ? value : it->second;
}

bool removable_when_unused(OpKind kind) {
  return is_elementwise(kind) || kind == OpKind::Broadcast || kind == OpKind::Permute ||
         kind == OpKind::ExtractSlice;
}

void count_uses(const Region& region, std::unordered_map<const ValueNode*, int>* uses) {
  for_each_op(region, [&](const Op& op) {
    for (const Value& used : used_values(op)) ++(*uses)[used.get()];
  });
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
  explicit Splitter(const Kernel& kernel)
      : defs_(*kernel.body), rebuilder_(kernel), threads_(kernel.threads()) {}

  // `kernel` with every splittable loop split; `kernel` itself when none is.
  KernelPtr run(const KernelPtr& kernel) {
    // 1. Which loops split, outermost first: the loops inside a split loop stay whole (both
    //    halves copy them as they are).
    LoopsToSplit loops(*this);
    loops.visit(*kernel);
    if (loops.masks.empty()) return kernel;
    // 2. Each of them replaced by its two halves, in program order (no split loop encloses
    //    another, so the rebuild's inner-first order is program order among them).
    return rebuilder_.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
      auto found = loops.masks.find(&original);
      if (found == loops.masks.end()) {
        out.emit(renamed);
        return;
      }
      std::vector<OpPtr> halves;
      split(original, found->second, &halves);
      for (OpPtr& op : halves) out.emit(std::move(op));
    });
  }

 private:
  Value uniform(const std::string& name) {
    return make_value(rebuilder_.fresh_name(name), vrtile::index_scalar(),
                      uniform_layout({}, threads_));
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

  class LoopsToSplit : public Visitor {
   public:
    explicit LoopsToSplit(const Splitter& splitter) : splitter_(splitter) {}
    std::unordered_map<const Op*, std::vector<PrefixMask>> masks;

   protected:
    void visit_For(const Op& loop) override {
      if (!loop.body) return;
      std::vector<PrefixMask> found = splitter_.splitting_masks(loop);
      if (found.empty()) {
        Visitor::visit_For(loop);
      } else {
        masks.emplace(&loop, std::move(found));
      }
    }

   private:
    const Splitter& splitter_;
  };

  // The masks whose unmasked prefix the first half of `loop` runs; empty when the loop stays
  // whole.
  std::vector<PrefixMask> splitting_masks(const Op& loop) const {
    // A loop of one iteration (the first or last iteration a software-pipelined loop runs on
    // its own) stays whole: splitting it saves one iteration's mask and adds a second copy of
    // its body, and around wgmma a branch between the copies makes ptxas serialize the MMAs.
    if (loop.extent <= 1) return {};
    AffineAnalysis affine(defs_, loop);
    std::vector<PrefixMask> masks;
    for (const OpPtr& op : loop.body->ops) {
      if (op->kind != OpKind::Select) continue;
      if (std::optional<PrefixMask> mask = prefix_mask(affine, defs_, *op)) masks.push_back(*mask);
    }
    if (masks.empty()) return {};
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
      if (count <= 0) return {};
      may_stop_early = may_stop_early || count < loop.extent;
    }
    if (!may_stop_early) return {};
    return masks;
  }

  void split(const Op& loop, const std::vector<PrefixMask>& masks, std::vector<OpPtr>* out) {
    constants_.clear();  // the ones of an earlier split may not dominate this loop
    // The new scalars are held by the loop's threads: the CTA's, or a warp role's.
    threads_ = loop.loop_var->layout.threads();

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
    ValueMap& substitutions = rebuilder_.map();
    substitutions.clear();
    for (const PrefixMask& mask : masks) {  // in program order: a select of a select resolves
      substitutions[mask.select->results[0].get()] =
          mapped(substitutions, mask.select->operands[1]);
    }
    Op first = loop;
    first.trip_count = unmasked;
    first.body = without_dead_ops(rebuilder_.rebuild(
        loop.body, [&](const Op& original, const OpPtr& renamed, Rebuilder& body) {
          const bool substituted =
              !original.results.empty() && substitutions.count(original.results[0].get());
          if (!substituted) body.emit(renamed);
        }));
    for (Value& result : first.results) result = rebuilder_.fresh_value(result, ".unmasked");
    out->push_back(make_op(first));

    // The masked loop: the original body on var = unmasked + its own variable, carrying on from
    // the first loop's results and producing the original results.
    ValueMap& renames = rebuilder_.map();
    renames.clear();
    Op second = loop;
    second.operands = first.results;
    second.trip_count = masked;
    second.loop_var = rebuilder_.fresh_value(loop.loop_var, ".masked");
    for (Value& arg : second.block_args) {
      Value fresh_arg = rebuilder_.fresh_value(arg, ".masked");
      renames[arg.get()] = fresh_arg;
      arg = fresh_arg;
    }
    Op offset;
    offset.kind = OpKind::Binary;
    offset.binary_op = BinaryOp::Add;
    offset.operands = {unmasked, second.loop_var};
    offset.results = {rebuilder_.fresh_value(loop.loop_var, "")};
    offset.provenance = provenance;
    renames[loop.loop_var.get()] = offset.results[0];
    std::vector<OpPtr> masked_body = {make_op(offset)};
    for (const OpPtr& op : loop.body->ops) {
      masked_body.push_back(rebuilder_.copy(op, ".masked", keep_op));
    }
    renames.clear();
    second.body = make_region(std::move(masked_body));
    out->push_back(make_op(second));
  }

  Definitions defs_;
  Rebuilder rebuilder_;
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
    KernelPtr split = Splitter(*kernel).run(kernel);
    if (split == kernel) continue;
    kernel = split;
    any = true;
  }
  return any ? ModulePtr(result) : module;
}

}  // namespace nautilus::matile
