// Shared machinery of the VR tile rewrites: where values are defined and used, fresh names, and
// a region rebuilder that renames values, lets a pass replace or add ops, and keeps every node
// (op, region, kernel, module) it did not change, so that "unchanged" is pointer identity.
//
// The rebuilder walks a kernel in program order. For every op it first renames the operands
// (and, for a For, rebuilds the body — inner ops are seen first — and renames its block
// arguments and results) through `ValueMap`, then hands the renamed op to the pass's hook. The
// hook emits whatever should stand in its place: the op itself, nothing (after mapping its
// results to other values), or new ops. New ops get fresh names and the provenance the hook
// gives them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

using vrtile::BinaryOp;
using vrtile::KernelPtr;
using vrtile::ModulePtr;
using vrtile::Op;
using vrtile::OpKind;
using vrtile::OpPtr;
using vrtile::Provenance;
using vrtile::ReduceOp;
using vrtile::RegionPtr;
using vrtile::TileType;
using vrtile::UnaryOp;
using vrtile::Value;
using vrtile::ValueNode;

using ValueMap = std::unordered_map<const ValueNode*, Value>;

// Applies `rewrite_kernel` to every kernel; returns `module` itself when no kernel changed.
ModulePtr map_kernels(const ModulePtr& module,
                      const std::function<KernelPtr(const KernelPtr&)>& rewrite_kernel);

// Applies `pass` until it returns its input (at most `max_rounds` times).
ModulePtr repeat_until_unchanged(const ModulePtr& module,
                                 const std::function<ModulePtr(const ModulePtr&)>& pass,
                                 int max_rounds = 8);

// Ops without effects besides their results: everything but Store, Yield and For (a For may
// contain stores; passes that move or drop a For look into its body themselves).
bool is_pure(const Op& op);

// Whether `op` (or any op nested in it) stores into `buffer_name`.
bool stores_to(const Op& op, const std::string& buffer_name);
bool kernel_stores_to(const vrtile::Kernel& kernel, const std::string& buffer_name);

// One use of a value: the op and the operand position.
struct Use {
  const Op* op = nullptr;
  size_t operand = 0;
};

// Definitions and uses of every value of a kernel, at all nesting depths.
class KernelIndex {
 public:
  explicit KernelIndex(const vrtile::Kernel& kernel);
  // Only the ops of `region` (e.g. a For body being rewritten): uses are those in the region;
  // definitions outside it are looked up in `outer` when given.
  explicit KernelIndex(const vrtile::Region& region, const KernelIndex* outer = nullptr);

  // The op defining `value` as one of its results; nullptr for grid and loop variables and
  // block arguments.
  const Op* def(const Value& value) const;
  const std::vector<Use>& uses(const Value& value) const { return uses(value.get()); }
  const std::vector<Use>& uses(const ValueNode* value) const;
  // The For whose body directly contains `op`; nullptr at the kernel's top level.
  const Op* parent(const Op* op) const;

 private:
  void add_region(const vrtile::Region& region, const Op* parent);

  std::unordered_map<const ValueNode*, const Op*> defs_;
  std::unordered_map<const ValueNode*, std::vector<Use>> uses_;
  std::unordered_map<const Op*, const Op*> parents_;
  std::vector<Use> no_uses_;
  const KernelIndex* outer_ = nullptr;
};

// The values a For's body defines, at any depth, with its loop variable and block arguments:
// what an op must not read to be loop-invariant.
std::unordered_set<const ValueNode*> values_defined_in(const Op& loop);

// `value` is a tile every element of which is the same constant: a Full, or a Broadcast or
// Permute of one. Returns that constant.
std::optional<double> constant_of(const Value& value, const KernelIndex& index);

// A broadcast of a lower-rank value, with the source and its dims.
struct BroadcastOf {
  Value source;
  std::vector<int> dims;
};
std::optional<BroadcastOf> broadcast_of(const Value& value, const KernelIndex& index);

// Every name a kernel gives a value; fresh() returns `base` if unused, else `base.1`, ...
class NameSet {
 public:
  explicit NameSet(const vrtile::Kernel& kernel);
  std::string fresh(const std::string& base);
  void reserve(const std::string& name) { used_.insert(name); }

 private:
  std::set<std::string> used_;
};

// Rebuilds one kernel through a hook (see the top of this file).
class Rebuilder {
 public:
  // Receives the original op (for looking up analyses made on the input kernel) and the op with
  // operands (and body, block arguments, results) renamed. Must emit its replacement.
  using Hook = std::function<void(const Op& original, const OpPtr& renamed, Rebuilder& out)>;

  explicit Rebuilder(const vrtile::Kernel& kernel) : names_(kernel) {}

  // Returns `kernel` itself when every op came back unchanged and nothing was added.
  KernelPtr run(const KernelPtr& kernel, const Hook& hook);

  ValueMap& map() { return map_; }
  // The value `value` stands for now (itself when not mapped).
  Value lookup(const Value& value) const;
  NameSet& names() { return names_; }

  // Appends to the region being built.
  void emit(OpPtr op);
  // Opens a region of the hook's own (e.g. a For body it rebuilds); end_region() closes it and
  // returns its ops.
  void begin_region();
  std::vector<OpPtr> end_region();
  // Identifies the region being built; regions_visible() says whether a value emitted into
  // region `id` is visible here (it is when that region encloses this one).
  int current_region() const { return region_ids_.back(); }
  bool region_visible(int id) const;

  // Emit a new op with a fresh name derived from `name` and provenance `p`; return its result.
  Value full(double constant, TileType type, const std::string& name, const Provenance& p);
  Value unary(UnaryOp op, const Value& a, const std::string& name, const Provenance& p);
  Value binary(BinaryOp op, const Value& a, const Value& b, const std::string& name,
               const Provenance& p);
  Value broadcast(const Value& a, std::vector<int64_t> shape, std::vector<int> dims,
                  const std::string& name, const Provenance& p);
  Value permute(const Value& a, std::vector<int> order, const std::string& name,
                const Provenance& p);
  Value reduce(ReduceOp op, const Value& a, int axis, const std::string& name,
               const Provenance& p);
  Value dot(const Value& a, const Value& b, const Value& acc, const std::string& name,
            const Provenance& p);
  Value cast(const Value& a, DType dtype, const std::string& name, const Provenance& p);

  // `op` with operands, body, loop variable, block arguments and results renamed through the
  // map (the body rebuilt through `hook`); `op` itself when nothing changed.
  OpPtr rename(const OpPtr& op, const Hook& hook);

 private:
  RegionPtr rebuild_region(const RegionPtr& region, const Hook& hook);

  NameSet names_;
  ValueMap map_;
  std::vector<std::vector<OpPtr>> regions_;
  std::vector<int> region_ids_;
  int next_region_id_ = 0;
};

// `op` defining `result` instead of its own result value (of the same type): a pass that replaces
// the op defining a value keeps that value, so every use of it stays valid.
OpPtr with_result(const OpPtr& op, const Value& result);

// The hook that emits every op unchanged (for rebuilds that only rename).
void keep_op(const Op& original, const OpPtr& renamed, Rebuilder& out);

// Products of per-row factors, e.g. l_i · alpha / l_new is {l_i: 1, alpha: 1, l_new: -1}, kept
// in first-seen order so that rebuilt expressions print deterministically.
class Monomial {
 public:
  void multiply(const Value& atom, int exponent);
  void multiply(const Monomial& other, int sign = 1);
  int exponent(const Value& atom) const;
  bool empty() const { return terms_.empty(); }
  const std::vector<std::pair<Value, int>>& terms() const { return terms_; }

 private:
  std::vector<std::pair<Value, int>> terms_;  // no zero exponents
};

// Splits a value into a product of atoms through mul and div (the atoms are the operands that
// are not themselves a mul or div).
Monomial factor_product(const Value& value, const KernelIndex& index);

}  // namespace nautilus::rewrite
