#include "core/matile/visitor.h"

namespace nautilus::matile {

// ---------------------------------------------------------------------------------------------
// Visitor

void Visitor::visit(const Kernel& kernel) {
  if (kernel.body) visit(*kernel.body);
}

void Visitor::visit(const Region& region) {
  for (const OpPtr& op : region.ops) {
    if (op) visit(*op);
  }
}

void Visitor::visit(const Op& op) {
  switch (op.kind) {
#define NAUTILUS_MATILE_DISPATCH(name) \
  case OpKind::name: return visit_##name(op);
    NAUTILUS_MATILE_OPS(NAUTILUS_MATILE_DISPATCH)
#undef NAUTILUS_MATILE_DISPATCH
  }
}

// Each kind's default forwards to its family; the families and the remaining kinds end in
// visit_op, which does nothing.
void Visitor::visit_Iota(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Full(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Unary(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Binary(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Compare(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Logical(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Select(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Cast(const Op& op) { visit_elementwise(op); }
void Visitor::visit_Broadcast(const Op& op) { visit_register_move(op); }
void Visitor::visit_Permute(const Op& op) { visit_register_move(op); }
void Visitor::visit_ExtractSlice(const Op& op) { visit_register_move(op); }
void Visitor::visit_ConvertLayout(const Op& op) { visit_op(op); }
void Visitor::visit_Reduce(const Op& op) { visit_op(op); }
void Visitor::visit_Mma(const Op& op) { visit_op(op); }
void Visitor::visit_FmaDot(const Op& op) { visit_op(op); }
void Visitor::visit_GlobalLoad(const Op& op) { visit_op(op); }
void Visitor::visit_GlobalStore(const Op& op) { visit_op(op); }
void Visitor::visit_AsyncCopy(const Op& op) { visit_op(op); }
void Visitor::visit_CommitGroup(const Op& op) { visit_op(op); }
void Visitor::visit_WaitGroup(const Op& op) { visit_op(op); }
void Visitor::visit_Barrier(const Op& op) { visit_op(op); }
void Visitor::visit_SharedLoad(const Op& op) { visit_op(op); }
void Visitor::visit_SharedStore(const Op& op) { visit_op(op); }
void Visitor::visit_Yield(const Op& op) { visit_op(op); }
void Visitor::visit_MBarrierInit(const Op& op) { visit_op(op); }
void Visitor::visit_MBarrierArrive(const Op& op) { visit_op(op); }
void Visitor::visit_MBarrierWait(const Op& op) { visit_op(op); }
void Visitor::visit_NamedBarrier(const Op& op) { visit_op(op); }
void Visitor::visit_FenceProxyAsync(const Op& op) { visit_op(op); }
void Visitor::visit_TmaLoad(const Op& op) { visit_op(op); }
void Visitor::visit_TmaStore(const Op& op) { visit_op(op); }
void Visitor::visit_BulkCommitGroup(const Op& op) { visit_op(op); }
void Visitor::visit_BulkWaitGroup(const Op& op) { visit_op(op); }
void Visitor::visit_WgmmaFence(const Op& op) { visit_op(op); }
void Visitor::visit_Wgmma(const Op& op) { visit_op(op); }
void Visitor::visit_WgmmaCommitGroup(const Op& op) { visit_op(op); }
void Visitor::visit_WgmmaWaitGroup(const Op& op) { visit_op(op); }
void Visitor::visit_StMatrix(const Op& op) { visit_op(op); }
void Visitor::visit_CtaIndex(const Op& op) { visit_op(op); }
void Visitor::visit_TileFetch(const Op& op) { visit_op(op); }
void Visitor::visit_TileRead(const Op& op) { visit_op(op); }

void Visitor::visit_Roles(const Op& op) {
  visit_op(op);
  for (const WarpRole& role : op.roles) {
    if (role.body) visit(*role.body);
  }
}

void Visitor::visit_For(const Op& op) {
  visit_op(op);
  if (op.body) visit(*op.body);
}

void Visitor::visit_elementwise(const Op& op) { visit_op(op); }
void Visitor::visit_register_move(const Op& op) { visit_op(op); }
void Visitor::visit_op(const Op&) {}

namespace {

class EachOp : public Visitor {
 public:
  explicit EachOp(const std::function<void(const Op&)>& callback) : callback_(callback) {}

 protected:
  void visit_op(const Op& op) override { callback_(op); }

 private:
  const std::function<void(const Op&)>& callback_;
};

class EachOpWithRegion : public Visitor {
 public:
  explicit EachOpWithRegion(const std::function<void(const Op&, const Region&)>& callback)
      : callback_(callback) {}

  using Visitor::visit;
  void visit(const Region& region) override {
    const Region* outer = region_;
    region_ = &region;
    Visitor::visit(region);
    region_ = outer;
  }

 protected:
  void visit_op(const Op& op) override { callback_(op, *region_); }

 private:
  const std::function<void(const Op&, const Region&)>& callback_;
  const Region* region_ = nullptr;
};

}  // namespace

void for_each_op(const Region& region, const std::function<void(const Op&)>& visit) {
  EachOp each(visit);
  each.visit(region);
}

void for_each_op_with_region(const Region& region,
                             const std::function<void(const Op&, const Region&)>& visit) {
  EachOpWithRegion each(visit);
  each.visit(region);
}

void for_each_defined_value(const Region& region, const std::function<void(const Value&)>& visit) {
  for_each_op(region, [&](const Op& op) {
    for (const Value& result : op.results) {
      if (result) visit(result);
    }
    if (op.loop_var) visit(op.loop_var);
    for (const Value& arg : op.block_args) {
      if (arg) visit(arg);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Rebuilder

void keep_op(const Op&, const OpPtr& renamed, Rebuilder& out) { out.emit(renamed); }

Rebuilder::Rebuilder(const Kernel& kernel) {
  for (const GridAxis& axis : kernel.grid) {
    if (axis.var) names_.insert(axis.var->name);
  }
  if (kernel.body) {
    for_each_defined_value(*kernel.body, [&](const Value& value) { names_.insert(value->name); });
  }
}

Value Rebuilder::lookup(const Value& value) const {
  if (!value) return value;
  auto found = map_.find(value.get());
  return found == map_.end() ? value : found->second;
}

std::string Rebuilder::fresh_name(const std::string& base) {
  if (names_.insert(base).second) return base;
  for (int suffix = 1;; ++suffix) {
    std::string name = base + "." + std::to_string(suffix);
    if (names_.insert(name).second) return name;
  }
}

Value Rebuilder::fresh_value(const Value& like, const std::string& suffix) {
  return make_value(fresh_name(like->name + suffix), like->type, like->layout);
}

void Rebuilder::emit(OpPtr op) { regions_.back().push_back(std::move(op)); }

KernelPtr Rebuilder::run(const KernelPtr& kernel, const Hook& hook) {
  if (!kernel || !kernel->body) return kernel;
  RegionPtr body = rebuild(kernel->body, hook);
  if (body == kernel->body) return kernel;
  Kernel copy = *kernel;
  copy.body = std::move(body);
  return std::make_shared<const Kernel>(std::move(copy));
}

RegionPtr Rebuilder::rebuild(const RegionPtr& region, const Hook& hook) {
  return rebuild_region(region, hook, nullptr);
}

OpPtr Rebuilder::rename(const OpPtr& op, const Hook& hook) { return rebuild_op(op, hook, nullptr); }

OpPtr Rebuilder::copy(const OpPtr& op, const std::string& suffix, const Hook& hook) {
  return rebuild_op(op, hook, &suffix);
}

RegionPtr Rebuilder::rebuild_region(const RegionPtr& region, const Hook& hook,
                                    const std::string* suffix) {
  if (!region) return region;
  regions_.emplace_back();
  for (const OpPtr& op : region->ops) {
    if (!op) continue;
    hook(*op, rebuild_op(op, hook, suffix), *this);
  }
  std::vector<OpPtr> ops = std::move(regions_.back());
  regions_.pop_back();
  if (ops == region->ops) return region;
  return make_region(std::move(ops));
}

OpPtr Rebuilder::rebuild_op(const OpPtr& op, const Hook& hook, const std::string* suffix) {
  bool changed = false;
  auto renamed = [&](Value& value) {
    Value mapped = lookup(value);
    changed = changed || mapped != value;
    value = std::move(mapped);
  };
  // A copy defines fresh values, in the order loop variable, block arguments, results; they
  // are in the map before the body is rebuilt, so the body's uses read them.
  auto defined = [&](Value& value) {
    if (value && suffix != nullptr) {
      Value fresh = fresh_value(value, *suffix);
      map_[value.get()] = fresh;
      value = std::move(fresh);
      changed = true;
    } else {
      renamed(value);
    }
  };
  Op out = *op;
  for (Value& v : out.operands) renamed(v);
  for (Value& v : out.access.offsets) renamed(v);
  renamed(out.shared.stage);
  renamed(out.shared_b.stage);
  renamed(out.predicate);
  renamed(out.trip_count);
  renamed(out.mbarrier.index);
  defined(out.loop_var);
  for (Value& arg : out.block_args) defined(arg);
  for (Value& result : out.results) defined(result);
  if (out.body) {
    RegionPtr body = rebuild_region(out.body, hook, suffix);
    changed = changed || body != out.body;
    out.body = std::move(body);
  }
  for (WarpRole& role : out.roles) {
    RegionPtr body = rebuild_region(role.body, hook, suffix);
    changed = changed || body != role.body;
    role.body = std::move(body);
  }
  return changed ? make_op(std::move(out)) : op;
}

}  // namespace nautilus::matile
