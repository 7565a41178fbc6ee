// Counting and finding the ops of an MA kernel in tests: through loop bodies and warp roles.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/matile/interpreter.h"
#include "core/matile/ir.h"
#include "core/matile/visitor.h"
#include "core/support/tensor.h"

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

// Every op of the region in program order (an op before the ops of its body and roles).
inline void program_order(const matile::Region& region, std::vector<const matile::Op*>* out) {
  for (const matile::OpPtr& op : region.ops) {
    out->push_back(op.get());
    if (op->body) program_order(*op->body, out);
    for (const matile::WarpRole& role : op->roles) {
      if (role.body) program_order(*role.body, out);
    }
  }
}

// The index of the kernel's mbarrier allocation named `name`; -1 when there is none.
inline int barrier_index(const matile::Kernel& kernel, const std::string& name) {
  for (size_t i = 0; i < kernel.mbarriers.size(); ++i) {
    if (kernel.mbarriers[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

inline int count_kind(const matile::Kernel& kernel, matile::OpKind kind) {
  return count_ops(*kernel.body, [&](const matile::Op& op) { return op.kind == kind; });
}

// The kernel body's warp-roles op; nullptr when the kernel is not warp-specialized.
inline const matile::Op* roles_op(const matile::Kernel& kernel) {
  for (const matile::OpPtr& op : kernel.body->ops) {
    if (op->kind == matile::OpKind::Roles) return op.get();
  }
  return nullptr;
}

// The warp role named `name` of the kernel's roles op; nullptr when there is none.
inline const matile::WarpRole* role_named(const matile::Kernel& kernel, const std::string& name) {
  const matile::Op* roles = roles_op(kernel);
  if (!roles) return nullptr;
  for (const matile::WarpRole& role : roles->roles) {
    if (role.name == name) return &role;
  }
  return nullptr;
}

// `module` with the first op of warp role `role_name` (in its first kernel) that `drop` picks
// left out: a broken protocol for the interpreter's race and deadlock checks.
inline matile::ModulePtr without_op(const matile::ModulePtr& module, const std::string& role_name,
                                    const std::function<bool(const matile::Op&)>& drop) {
  const matile::KernelPtr& kernel = module->kernels.at(0);
  const matile::Op* roles = roles_op(*kernel);
  const matile::Region* role_body = nullptr;
  if (roles) {
    for (const matile::WarpRole& role : roles->roles) {
      if (role.name == role_name) role_body = role.body.get();
    }
  }
  const matile::Op* target = role_body ? first_op(*role_body, drop) : nullptr;
  EXPECT_TRUE(target) << "no op to drop in role " << role_name;
  matile::Rebuilder rebuilder(*kernel);
  matile::KernelPtr broken = rebuilder.run(
      kernel, [&](const matile::Op& original, const matile::OpPtr& renamed, matile::Rebuilder& out) {
        if (&original != target) out.emit(renamed);
      });
  auto out = std::make_shared<matile::Module>(*module);
  out->kernels[0] = broken;
  return out;
}

// Seeded random values for every input of `module` (input k gets seed + k).
inline TensorMap module_inputs(const matile::Module& module, uint64_t seed) {
  TensorMap inputs;
  for (const scalar::Buffer& buffer : module.params) {
    if (buffer->role == scalar::BufferRole::Input) {
      inputs[buffer->name] = random_tensor(buffer->shape, buffer->dtype, seed++);
    }
  }
  return inputs;
}

// An interpreter failure in one line: its kind, message and op.
inline std::string describe_failure(const matile::InterpretResult& result) {
  return std::string(matile::interpret_error_kind_name(result.error_kind)) + ": " + result.error +
         "\n  op: " + result.error_op;
}

}  // namespace nautilus::testing
