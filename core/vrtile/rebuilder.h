// Rebuilding a VR tile kernel: a region rebuilder that renames values, lets a pass replace or
// add ops, and keeps every node (op, region, kernel) it did not change, so that "unchanged" is
// pointer identity (the pass log marks a pass that changed nothing by it).
//
// The rebuilder walks a kernel in program order. For every op it first renames the operands
// (and, for a For, rebuilds the body -- inner ops are seen first -- and renames its block
// arguments and results) through `ValueMap`, then hands the renamed op to the pass's hook. The
// hook emits whatever should stand in its place: the op itself, nothing (after mapping its
// results to other values), or new ops. New ops get fresh names and the provenance the hook
// gives them.
//
//   Example (a hook that emits nothing for `%y = mul %x, %one` after mapping %y to %x):
//     before: %y = mul %x, %one           after: %z = add %x, %w
//             %z = add %y, %w
#pragma once

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/vrtile/ir.h"

namespace nautilus::vrtile {

using ValueMap = std::unordered_map<const ValueNode*, Value>;

// Every name a kernel gives a value; fresh() returns `base` if unused, else `base.1`, ...
class NameSet {
 public:
  explicit NameSet(const Kernel& kernel);
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

  explicit Rebuilder(const Kernel& kernel) : names_(kernel) {}

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

}  // namespace nautilus::vrtile
