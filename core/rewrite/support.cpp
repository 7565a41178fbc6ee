#include "core/rewrite/support.h"

#include <algorithm>
#include <utility>

namespace nautilus::rewrite {

ModulePtr map_kernels(const ModulePtr& module,
                      const std::function<KernelPtr(const KernelPtr&)>& rewrite_kernel) {
  if (!module) return module;
  std::vector<KernelPtr> kernels;
  bool changed = false;
  for (const KernelPtr& kernel : module->kernels) {
    KernelPtr rewritten = kernel ? rewrite_kernel(kernel) : kernel;
    changed = changed || rewritten != kernel;
    kernels.push_back(std::move(rewritten));
  }
  if (!changed) return module;
  vrtile::Module copy = *module;
  copy.kernels = std::move(kernels);
  return std::make_shared<const vrtile::Module>(std::move(copy));
}

ModulePtr repeat_until_unchanged(const ModulePtr& module,
                                 const std::function<ModulePtr(const ModulePtr&)>& pass,
                                 int max_rounds) {
  ModulePtr current = module;
  for (int round = 0; round < max_rounds; ++round) {
    ModulePtr next = pass(current);
    if (next == current) break;
    current = std::move(next);
  }
  return current;
}

bool is_pure(const Op& op) {
  return op.kind != OpKind::Store && op.kind != OpKind::Yield && op.kind != OpKind::For;
}

bool stores_to(const Op& op, const std::string& buffer_name) {
  if (op.kind == OpKind::Store) return op.buffer && op.buffer->name == buffer_name;
  if (op.kind != OpKind::For || !op.body) return false;
  for (const OpPtr& inner : op.body->ops) {
    if (inner && stores_to(*inner, buffer_name)) return true;
  }
  return false;
}

bool kernel_stores_to(const vrtile::Kernel& kernel, const std::string& buffer_name) {
  if (!kernel.body) return false;
  for (const OpPtr& op : kernel.body->ops) {
    if (op && stores_to(*op, buffer_name)) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// KernelIndex

KernelIndex::KernelIndex(const vrtile::Kernel& kernel) {
  if (kernel.body) add_region(*kernel.body, nullptr);
}

KernelIndex::KernelIndex(const vrtile::Region& region, const KernelIndex* outer)
    : outer_(outer) {
  add_region(region, nullptr);
}

void KernelIndex::add_region(const vrtile::Region& region, const Op* parent) {
  for (const OpPtr& op : region.ops) {
    if (!op) continue;
    parents_[op.get()] = parent;
    for (const Value& result : op->results) {
      if (result) defs_[result.get()] = op.get();
    }
    for (size_t i = 0; i < op->operands.size(); ++i) {
      if (op->operands[i]) uses_[op->operands[i].get()].push_back(Use{op.get(), i});
    }
    if (op->kind == OpKind::For && op->body) add_region(*op->body, op.get());
  }
}

const Op* KernelIndex::def(const Value& value) const {
  if (!value) return nullptr;
  auto found = defs_.find(value.get());
  if (found != defs_.end()) return found->second;
  return outer_ ? outer_->def(value) : nullptr;
}

const std::vector<Use>& KernelIndex::uses(const ValueNode* value) const {
  if (!value) return no_uses_;
  auto found = uses_.find(value);
  return found == uses_.end() ? no_uses_ : found->second;
}

const Op* KernelIndex::parent(const Op* op) const {
  auto found = parents_.find(op);
  return found == parents_.end() ? nullptr : found->second;
}

namespace {

void collect_defined(const Op& op, std::unordered_set<const ValueNode*>* out) {
  for (const Value& result : op.results) {
    if (result) out->insert(result.get());
  }
  if (op.kind != OpKind::For) return;
  if (op.loop_var) out->insert(op.loop_var.get());
  for (const Value& arg : op.block_args) {
    if (arg) out->insert(arg.get());
  }
  if (!op.body) return;
  for (const OpPtr& inner : op.body->ops) {
    if (inner) collect_defined(*inner, out);
  }
}

}  // namespace

std::unordered_set<const ValueNode*> values_defined_in(const Op& loop) {
  std::unordered_set<const ValueNode*> defined;
  if (loop.loop_var) defined.insert(loop.loop_var.get());
  for (const Value& arg : loop.block_args) {
    if (arg) defined.insert(arg.get());
  }
  if (loop.body) {
    for (const OpPtr& inner : loop.body->ops) {
      if (inner) collect_defined(*inner, &defined);
    }
  }
  return defined;
}

std::optional<double> constant_of(const Value& value, const KernelIndex& index) {
  const Op* op = index.def(value);
  if (!op) return std::nullopt;
  if (op->kind == OpKind::Full) return op->constant;
  if ((op->kind == OpKind::Broadcast || op->kind == OpKind::Permute) && !op->operands.empty()) {
    return constant_of(op->operands[0], index);
  }
  return std::nullopt;
}

std::optional<BroadcastOf> broadcast_of(const Value& value, const KernelIndex& index) {
  const Op* op = index.def(value);
  if (!op || op->kind != OpKind::Broadcast || op->operands.size() != 1) return std::nullopt;
  return BroadcastOf{op->operands[0], op->dims};
}

// ---------------------------------------------------------------------------------------------
// NameSet


// ---------------------------------------------------------------------------------------------
// Monomial

void Monomial::multiply(const Value& atom, int exponent) {
  if (exponent == 0) return;
  for (auto it = terms_.begin(); it != terms_.end(); ++it) {
    if (it->first == atom) {
      it->second += exponent;
      if (it->second == 0) terms_.erase(it);
      return;
    }
  }
  terms_.emplace_back(atom, exponent);
}

void Monomial::multiply(const Monomial& other, int sign) {
  for (const auto& [atom, exponent] : other.terms_) multiply(atom, sign * exponent);
}

int Monomial::exponent(const Value& atom) const {
  for (const auto& [known, exponent] : terms_) {
    if (known == atom) return exponent;
  }
  return 0;
}

Monomial factor_product(const Value& value, const KernelIndex& index) {
  Monomial result;
  const Op* op = index.def(value);
  if (op && op->kind == OpKind::Binary && op->operands.size() == 2 &&
      (op->binary_op == BinaryOp::Mul || op->binary_op == BinaryOp::Div) &&
      is_float(value->type.dtype)) {
    result.multiply(factor_product(op->operands[0], index));
    result.multiply(factor_product(op->operands[1], index),
                    op->binary_op == BinaryOp::Div ? -1 : 1);
    return result;
  }
  result.multiply(value, 1);
  return result;
}

}  // namespace nautilus::rewrite
