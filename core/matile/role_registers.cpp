#include "core/matile/role_registers.h"

#include <algorithm>
#include <memory>
#include <string>

#include "core/matile/hopper.h"
#include "core/matile/visitor.h"

namespace nautilus::matile {
namespace {

// The first Roles op of the kernel, at any depth; nullptr when there is none.
const Op* find_roles(const Kernel& kernel) {
  const Op* found = nullptr;
  if (!kernel.body) return nullptr;
  for_each_op(*kernel.body, [&](const Op& op) {
    if (!found && op.kind == OpKind::Roles) found = &op;
  });
  return found;
}

// What the first role keeps when every other role takes `registers`.
int first_role_registers(const Op& roles, int kernel_warps, int registers) {
  int64_t others = 0;
  for (size_t i = 1; i < roles.roles.size(); ++i) others += int64_t{roles.roles[i].warpgroups} * registers;
  return first_role_registers_left(kernel_warps, others);
}

bool legal_split(const Op& roles, int kernel_warps, int registers) {
  if (roles.roles.size() < 2 || registers < 24 || registers > 240 || registers % 8 != 0) return false;
  Op changed = roles;
  changed.roles[0].max_registers = first_role_registers(roles, kernel_warps, registers);
  for (size_t i = 1; i < changed.roles.size(); ++i) changed.roles[i].max_registers = registers;
  return changed.roles[0].max_registers >= 24 && !roles_error(changed, kernel_warps);
}

}  // namespace

std::vector<int> consumer_register_alternatives(const Kernel& kernel) {
  const Op* roles = find_roles(kernel);
  if (!roles || roles->roles.size() < 2) return {};
  const int own = roles->roles[1].max_registers;
  std::vector<int> alternatives;
  for (int step : {8, -8, 16, -16}) {
    if (legal_split(*roles, kernel.warps, own + step)) alternatives.push_back(own + step);
  }
  return alternatives;
}

KernelPtr with_consumer_registers(const KernelPtr& kernel, int registers) {
  const Op* roles = find_roles(*kernel);
  if (!roles || !legal_split(*roles, kernel->warps, registers)) return nullptr;
  const int first = first_role_registers(*roles, kernel->warps, registers);
  std::string chosen_before;
  for (size_t i = 0; i < roles->roles.size(); ++i) {
    chosen_before += (i ? " / " : "") + std::to_string(roles->roles[i].max_registers);
  }
  Rebuilder rebuilder(*kernel);
  const KernelPtr rebuilt = rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    if (&original != roles) {
      out.emit(renamed);
      return;
    }
    auto changed = std::make_shared<Op>(*renamed);
    changed->roles[0].max_registers = first;
    for (size_t i = 1; i < changed->roles.size(); ++i) changed->roles[i].max_registers = registers;
    out.emit(changed);
  });
  auto result = std::make_shared<Kernel>(*rebuilt);
  std::string note = "registers: " + roles->roles[0].name + " " + std::to_string(first);
  for (size_t i = 1; i < roles->roles.size(); ++i) note += ", " + roles->roles[i].name + " " + std::to_string(registers);
  result->notes.push_back(note + " (setmaxnreg; the lowering chose " + chosen_before +
                          ", at which ptxas spilled)");
  return result;
}

}  // namespace nautilus::matile
