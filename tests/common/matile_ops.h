// Counting and finding the ops of an MA kernel in tests: through loop bodies and warp roles.
#pragma once

#include <functional>

#include "core/matile/ir.h"

namespace nautilus::testing {

inline int count_ops(const matile::Region& region, const std::function<bool(const matile::Op&)>& wanted) {
  int count = 0;
  for (const matile::OpPtr& op : region.ops) {
    if (wanted(*op)) ++count;
    if (op->body) count += count_ops(*op->body, wanted);
    for (const matile::WarpRole& role : op->roles) {
      if (role.body) count += count_ops(*role.body, wanted);
    }
  }
  return count;
}

// The first op `wanted` picks, in program order (an op before the ops of its body and roles);
// nullptr when none.
inline const matile::Op* first_op(const matile::Region& region,
                                  const std::function<bool(const matile::Op&)>& wanted) {
  for (const matile::OpPtr& op : region.ops) {
    if (wanted(*op)) return op.get();
    if (op->body) {
      if (const matile::Op* found = first_op(*op->body, wanted)) return found;
    }
    for (const matile::WarpRole& role : op->roles) {
      if (!role.body) continue;
      if (const matile::Op* found = first_op(*role.body, wanted)) return found;
    }
  }
  return nullptr;
}

inline int count_kind(const matile::Kernel& kernel, matile::OpKind kind) {
  return count_ops(*kernel.body, [&](const matile::Op& op) { return op.kind == kind; });
}

}  // namespace nautilus::testing
