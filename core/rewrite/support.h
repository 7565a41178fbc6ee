// Shared machinery of the VR tile rewrites: where values are defined and used, constants and
// broadcasts behind a value, and products of per-row factors. The passes rebuild kernels with
// vrtile::Rebuilder (core/vrtile/rebuilder.h), which keeps every node they did not change.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/vrtile/ir.h"
#include "core/vrtile/rebuilder.h"

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

using vrtile::keep_op;
using vrtile::NameSet;
using vrtile::Rebuilder;
using vrtile::ValueMap;
using vrtile::with_result;

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
