#include "core/sched/buffer_rewrite.h"

#include "core/scalar/visitor.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

class AccessRetargeter : public Mutator {
 public:
  explicit AccessRetargeter(const RetargetMap& map) : map_(map) {}

 protected:
  Expr mutate_Load(const Load& node, const Expr& self) override {
    Expr rebuilt = Mutator::mutate_Load(node, self);
    const Load& load = *rebuilt->as<Load>();
    auto it = map_.find(load.buffer.get());
    if (it == map_.end()) return rebuilt;
    return scalar::load(it->second.to, it->second.indices(load.indices), load.provenance);
  }
  Stmt mutate_Store(const Store& node, const Stmt& self) override {
    Stmt rebuilt = Mutator::mutate_Store(node, self);
    const Store& store = *rebuilt->as<Store>();
    auto it = map_.find(store.buffer.get());
    if (it == map_.end()) return rebuilt;
    return make_store(it->second.to, it->second.indices(store.indices), store.value,
                      store.provenance);
  }

 private:
  const RetargetMap& map_;
};

class BindingSubstituter : public Mutator {
 public:
  explicit BindingSubstituter(const VarReplacements& replacements) : replacements_(replacements) {}

 protected:
  Stmt mutate_Block(const Block& node, const Stmt& self) override {
    bool changed = false;
    std::vector<Expr> bindings;
    for (const Expr& binding : node.bindings) {
      bindings.push_back(substitute(binding, replacements_));
      changed |= bindings.back() != binding;
    }
    Expr predicate = node.predicate ? substitute(node.predicate, replacements_) : nullptr;
    changed |= predicate != node.predicate;
    if (!changed) return self;
    return make_block(node.name, node.iter_vars, std::move(bindings), std::move(predicate),
                      node.init, node.body, node.provenance);
  }

 private:
  const VarReplacements& replacements_;
};

class BufferCollector : public Visitor {
 public:
  std::set<const BufferNode*> buffers;

 protected:
  void visit_Load(const Load& node) override {
    buffers.insert(node.buffer.get());
    Visitor::visit_Load(node);
  }
  void visit_Store(const Store& node) override {
    buffers.insert(node.buffer.get());
    Visitor::visit_Store(node);
  }
};

}  // namespace

Stmt retarget_accesses(const Stmt& stmt, const RetargetMap& map) {
  AccessRetargeter retargeter(map);
  return retargeter.mutate(stmt);
}

Expr retarget_accesses(const Expr& expr, const RetargetMap& map) {
  AccessRetargeter retargeter(map);
  return retargeter.mutate(expr);
}

Stmt substitute_in_bindings(const Stmt& stmt, const VarReplacements& replacements) {
  BindingSubstituter substituter(replacements);
  return substituter.mutate(stmt);
}

std::set<const BufferNode*> buffers_used(const Stmt& stmt) {
  BufferCollector collector;
  collector.visit(stmt);
  return collector.buffers;
}

std::set<std::string> buffer_names(const Program& program) {
  std::set<std::string> names;
  for (const Buffer& buffer : program.params) names.insert(buffer->name);
  for (const Buffer& buffer : program.allocations) names.insert(buffer->name);
  return names;
}

std::set<std::string> block_names(const Stmt& body) {
  std::set<std::string> names;
  for (const Block* block : collect_blocks(body)) names.insert(block->name);
  return names;
}

ProgramPtr with_body_and_buffers(const ProgramPtr& program, Stmt body,
                                 const std::vector<Buffer>& added) {
  const std::set<const BufferNode*> used = buffers_used(body);
  auto copy = std::make_shared<Program>(*program);
  copy->body = std::move(body);
  copy->allocations.clear();
  for (const Buffer& buffer : program->allocations) {
    if (used.count(buffer.get())) copy->allocations.push_back(buffer);
  }
  for (const Buffer& buffer : added) {
    if (used.count(buffer.get())) copy->allocations.push_back(buffer);
  }
  return copy;
}

std::vector<Expr> conjuncts(const Expr& predicate) {
  if (!predicate) return {};
  const Logical* logical_node = predicate->as<Logical>();
  if (!logical_node || logical_node->op != LogicalOp::And) return {predicate};
  std::vector<Expr> result = conjuncts(logical_node->a);
  for (const Expr& e : conjuncts(logical_node->b)) result.push_back(e);
  return result;
}

}  // namespace nautilus::sched
