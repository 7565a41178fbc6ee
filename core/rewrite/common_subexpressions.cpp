#include "core/rewrite/common_subexpressions.h"

#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

bool commutative(const Op& op) {
  switch (op.kind) {
    case OpKind::Binary:
      return op.binary_op == BinaryOp::Add || op.binary_op == BinaryOp::Mul ||
             op.binary_op == BinaryOp::Max || op.binary_op == BinaryOp::Min;
    case OpKind::Logical: return true;
    case OpKind::Compare:
      return op.compare_op == vrtile::CompareOp::EQ || op.compare_op == vrtile::CompareOp::NE;
    default: return false;
  }
}

std::string identity(const Value& value) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", static_cast<const void*>(value.get()));
  return text;
}

// Everything that determines an op's result, as text: equal keys, equal tiles.
std::string key_of(const Op& op) {
  std::string key = std::to_string(static_cast<int>(op.kind));
  key += "|" + std::to_string(static_cast<int>(op.binary_op)) + "," +
         std::to_string(static_cast<int>(op.unary_op)) + "," +
         std::to_string(static_cast<int>(op.compare_op)) + "," +
         std::to_string(static_cast<int>(op.logical_op)) + "," +
         std::to_string(static_cast<int>(op.reduce_op)) + "," + std::to_string(op.axis) + "," +
         std::to_string(op.extent) + "," + std::to_string(op.has_mask);
  char constant[40];
  std::snprintf(constant, sizeof constant, "%.17g", op.constant);
  key += std::string("|") + constant + "|";
  for (int dim : op.dims) key += std::to_string(dim) + ",";
  if (op.buffer) key += "|" + op.buffer->name;
  for (const Value& result : op.results) key += "|" + vrtile::type_text(result->type);
  std::vector<std::string> operands;
  for (const Value& operand : op.operands) operands.push_back(identity(operand));
  if (commutative(op) && operands.size() == 2 && operands[1] < operands[0]) {
    std::swap(operands[0], operands[1]);
  }
  for (const std::string& operand : operands) key += "|" + operand;
  return key;
}

KernelPtr eliminate_in_kernel(const KernelPtr& kernel) {
  struct Available {
    Value value;
    int region;
  };
  std::unordered_map<std::string, Available> available;
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    const bool mergeable =
        is_pure(original) && renamed->results.size() == 1 &&
        (original.kind != OpKind::Load || !kernel_stores_to(*kernel, original.buffer->name));
    if (!mergeable) {
      out.emit(renamed);
      return;
    }
    const std::string key = key_of(*renamed);
    auto found = available.find(key);
    if (found != available.end() && out.region_visible(found->second.region)) {
      out.map()[original.results[0].get()] = found->second.value;
      return;
    }
    available[key] = Available{renamed->results[0], out.current_region()};
    out.emit(renamed);
  });
}

}  // namespace

ModulePtr eliminate_common_subexpressions(const ModulePtr& module) {
  return map_kernels(module, eliminate_in_kernel);
}

}  // namespace nautilus::rewrite
