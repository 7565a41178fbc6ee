#include "core/vrtile/rebuilder.h"

#include <algorithm>
#include <utility>

namespace nautilus::vrtile {

namespace {

void reserve_op_names(const Op& op, std::set<std::string>* used) {
  for (const Value& result : op.results) {
    if (result) used->insert(result->name);
  }
  if (op.kind != OpKind::For) return;
  if (op.loop_var) used->insert(op.loop_var->name);
  for (const Value& arg : op.block_args) {
    if (arg) used->insert(arg->name);
  }
  if (!op.body) return;
  for (const OpPtr& inner : op.body->ops) {
    if (inner) reserve_op_names(*inner, used);
  }
}

}  // namespace

NameSet::NameSet(const Kernel& kernel) {
  for (const GridAxis& axis : kernel.grid) {
    if (axis.var) used_.insert(axis.var->name);
  }
  if (!kernel.body) return;
  for (const OpPtr& op : kernel.body->ops) {
    if (op) reserve_op_names(*op, &used_);
  }
}

std::string NameSet::fresh(const std::string& base) {
  const std::string stem = base.empty() ? std::string("t") : base;
  if (used_.insert(stem).second) return stem;
  for (int suffix = 1;; ++suffix) {
    std::string name = stem + "." + std::to_string(suffix);
    if (used_.insert(name).second) return name;
  }
}

// ---------------------------------------------------------------------------------------------
// Rebuilder

void keep_op(const Op&, const OpPtr& renamed, Rebuilder& out) { out.emit(renamed); }

Value Rebuilder::lookup(const Value& value) const {
  if (!value) return value;
  auto found = map_.find(value.get());
  return found == map_.end() ? value : found->second;
}

void Rebuilder::emit(OpPtr op) { regions_.back().push_back(std::move(op)); }

void Rebuilder::begin_region() {
  regions_.emplace_back();
  region_ids_.push_back(next_region_id_++);
}

std::vector<OpPtr> Rebuilder::end_region() {
  std::vector<OpPtr> ops = std::move(regions_.back());
  regions_.pop_back();
  region_ids_.pop_back();
  return ops;
}

OpPtr with_result(const OpPtr& op, const Value& result) {
  Op copy = *op;
  copy.results = {result};
  return make_op(std::move(copy));
}

bool Rebuilder::region_visible(int id) const {
  return std::find(region_ids_.begin(), region_ids_.end(), id) != region_ids_.end();
}

OpPtr Rebuilder::rename(const OpPtr& op, const Hook& hook) {
  bool changed = false;
  auto renamed = [&](const Value& value) {
    Value mapped = lookup(value);
    changed = changed || mapped != value;
    return mapped;
  };
  Op copy = *op;
  for (Value& operand : copy.operands) operand = renamed(operand);
  for (Value& result : copy.results) result = renamed(result);
  if (copy.kind == OpKind::For) {
    if (copy.trip_count) copy.trip_count = renamed(copy.trip_count);
    copy.loop_var = renamed(copy.loop_var);
    for (Value& arg : copy.block_args) arg = renamed(arg);
    if (copy.body) {
      RegionPtr body = rebuild_region(copy.body, hook);
      changed = changed || body != copy.body;
      copy.body = std::move(body);
    }
  }
  return changed ? make_op(std::move(copy)) : op;
}

RegionPtr Rebuilder::rebuild_region(const RegionPtr& region, const Hook& hook) {
  begin_region();
  for (const OpPtr& op : region->ops) {
    if (!op) continue;
    hook(*op, rename(op, hook), *this);
  }
  std::vector<OpPtr> ops = end_region();
  if (ops == region->ops) return region;
  return make_region(std::move(ops));
}

KernelPtr Rebuilder::run(const KernelPtr& kernel, const Hook& hook) {
  if (!kernel->body) return kernel;
  RegionPtr body = rebuild_region(kernel->body, hook);
  if (body == kernel->body) return kernel;
  Kernel copy = *kernel;
  copy.body = std::move(body);
  return std::make_shared<const Kernel>(std::move(copy));
}

Value Rebuilder::full(double constant, TileType type, const std::string& name,
                      const Provenance& p) {
  OpPtr op = make_full(names_.fresh(name), constant, std::move(type), p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

Value Rebuilder::unary(UnaryOp op_kind, const Value& a, const std::string& name,
                       const Provenance& p) {
  OpPtr op = make_unary(names_.fresh(name), op_kind, a, p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

Value Rebuilder::binary(BinaryOp op_kind, const Value& a, const Value& b,
                        const std::string& name, const Provenance& p) {
  OpPtr op = make_binary(names_.fresh(name), op_kind, a, b, p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

Value Rebuilder::broadcast(const Value& a, std::vector<int64_t> shape, std::vector<int> dims,
                           const std::string& name, const Provenance& p) {
  OpPtr op = make_broadcast(names_.fresh(name), a, std::move(shape), std::move(dims), p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

Value Rebuilder::permute(const Value& a, std::vector<int> order, const std::string& name,
                         const Provenance& p) {
  OpPtr op = make_permute(names_.fresh(name), a, std::move(order), p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

Value Rebuilder::reduce(ReduceOp op_kind, const Value& a, int axis, const std::string& name,
                        const Provenance& p) {
  OpPtr op = make_reduce(names_.fresh(name), op_kind, a, axis, p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

Value Rebuilder::dot(const Value& a, const Value& b, const Value& acc, const std::string& name,
                     const Provenance& p) {
  OpPtr op = make_dot(names_.fresh(name), a, b, acc, p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

Value Rebuilder::cast(const Value& a, DType dtype, const std::string& name,
                      const Provenance& p) {
  OpPtr op = make_cast(names_.fresh(name), a, dtype, p);
  Value result = op->results[0];
  emit(std::move(op));
  return result;
}

}  // namespace nautilus::vrtile
