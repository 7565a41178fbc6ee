// Traversal and rewriting of MA tile IR.
//
// `Visitor` walks ops in program order and dispatches each on its kind to `visit_<Kind>`. The
// per-kind hooks default to the op's family, so a walk that treats a family alike overrides
// one hook instead of listing its kinds:
//   visit_elementwise     Iota Full Unary Binary Compare Logical Select Cast (is_elementwise)
//   visit_register_move   Broadcast Permute ExtractSlice (register-only data movement)
//   visit_op              every other kind, and the default of both families
// `visit_For`'s default sees the loop as an op (visit_op), then visits its body once, Yield
// included; a walk that runs a body several times or opens a scope overrides it. `visit_Roles`
// likewise sees the op, then each role's body in role order. `visit(Op)`
// is virtual so that a walk can act around every op (comments, the current op) and then call
// the base to dispatch.
//
// `Rebuilder` rebuilds a kernel bottom-up through a hook, renaming values through a map, and
// returns the *same* node (op, region, kernel) when nothing changed, so that a pass that
// changes nothing returns its input (the pass log marks it unchanged by pointer identity).
//   For every op in program order it first renames every value the op reads (used_values:
//   operands, window offsets, shared stages, the predicate, a trip count, an mbarrier slot) and
//   every value it defines (results, a For's loop variable and block arguments), then rebuilds
//   a For's body and each role's body of a Roles op (inner ops reach the hook first), and hands the original and the renamed op to the hook,
//   which emits whatever stands in its place: the op, nothing, or new ops.
//   Copying a region under a name suffix (`Rebuilder::copy`) gives every value it defines a
//   fresh value named `<name><suffix>` (made unique in the kernel), recorded in the map before
//   the op's body is rebuilt, so that uses inside and after the op read the copies:
//
//     before (suffix ".masked"):          after:
//       %acc = for n_o in 0..4 ... {        %acc.masked = for n_o.masked in 0..4 ... {
//         %s = mul %x, %n_o                   %s.masked = mul %x, %n_o.masked
//         yield %s                            yield %s.masked
//       }                                   }
#pragma once

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/matile/ir.h"

namespace nautilus::matile {

class Visitor {
 public:
  virtual ~Visitor() = default;
  // The kernel's body (nothing for a kernel without one).
  void visit(const Kernel& kernel);
  // Every op of the region in order; null ops are skipped.
  virtual void visit(const Region& region);
  // Dispatches on op.kind.
  virtual void visit(const Op& op);

 protected:
#define NAUTILUS_MATILE_VISIT_DECL(name) virtual void visit_##name(const Op& op);
  NAUTILUS_MATILE_OPS(NAUTILUS_MATILE_VISIT_DECL)
#undef NAUTILUS_MATILE_VISIT_DECL
  virtual void visit_elementwise(const Op& op);
  virtual void visit_register_move(const Op& op);
  virtual void visit_op(const Op& op);
};

// Calls `visit` on every op of `region` at every depth, a For before the ops of its body.
void for_each_op(const Region& region, const std::function<void(const Op&)>& visit);

// The same, with the region that holds each op (`region` itself or a loop body inside it).
void for_each_op_with_region(const Region& region,
                             const std::function<void(const Op& op, const Region& in)>& visit);

// Every value the region defines, nested loops included, in program order: an op's results,
// then a For's loop variable and block arguments, then what its body defines.
void for_each_defined_value(const Region& region, const std::function<void(const Value&)>& visit);

using ValueMap = std::unordered_map<const ValueNode*, Value>;

class Rebuilder {
 public:
  // Receives the op as it was (for analyses of the input kernel) and the op with every value
  // renamed and its body rebuilt. Emits its replacement into `out`.
  using Hook = std::function<void(const Op& original, const OpPtr& renamed, Rebuilder& out)>;

  // Reserves every name `kernel` gives a value (grid variables included) for fresh_name().
  explicit Rebuilder(const Kernel& kernel);

  // Returns `kernel` itself when every op came back unchanged and nothing was added.
  KernelPtr run(const KernelPtr& kernel, const Hook& hook);
  // The region rebuilt; `region` itself when nothing changed.
  RegionPtr rebuild(const RegionPtr& region, const Hook& hook);
  // `op` with every value renamed through the map and its body rebuilt; `op` itself when
  // nothing changed.
  OpPtr rename(const OpPtr& op, const Hook& hook);
  // `op` as a copy whose defined values (and those of every op in its body) are fresh values
  // named with `suffix`; the map sends the originals to the copies.
  OpPtr copy(const OpPtr& op, const std::string& suffix, const Hook& hook);

  ValueMap& map() { return map_; }
  // The value `value` stands for now (itself when not mapped; null stays null).
  Value lookup(const Value& value) const;
  // `base` if no value of the kernel has that name yet, else `base.1`, `base.2`, ...
  std::string fresh_name(const std::string& base);
  // A new value of `like`'s type and layout named fresh_name(like's name + suffix).
  Value fresh_value(const Value& like, const std::string& suffix);

  // Appends to the region being built.
  void emit(OpPtr op);

 private:
  RegionPtr rebuild_region(const RegionPtr& region, const Hook& hook, const std::string* suffix);
  OpPtr rebuild_op(const OpPtr& op, const Hook& hook, const std::string* suffix);

  std::set<std::string> names_;
  ValueMap map_;
  std::vector<std::vector<OpPtr>> regions_;
};

// The hook that emits every op as renamed (for rebuilds that only rename or copy).
void keep_op(const Op& original, const OpPtr& renamed, Rebuilder& out);

}  // namespace nautilus::matile
