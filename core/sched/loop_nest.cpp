#include "core/sched/loop_nest.h"

#include <algorithm>

#include "core/scalar/visitor.h"

namespace nautilus::sched {

using namespace scalar;

// ---------------------------------------------------------------------------------------------
// Paths

std::vector<const For*> BlockPath::loops() const {
  std::vector<const For*> result;
  for (const Stmt& stmt : stmts) {
    if (const For* loop = stmt->as<For>()) result.push_back(loop);
  }
  return result;
}

std::optional<size_t> BlockPath::loop_depth(std::string_view name) const {
  for (size_t depth = 0; depth < stmts.size(); ++depth) {
    const For* loop = stmts[depth]->as<For>();
    if (loop && loop->var->name == name) return depth;
  }
  return std::nullopt;
}

std::optional<size_t> BlockPath::loop_depth(const VarNode* var) const {
  for (size_t depth = 0; depth < stmts.size(); ++depth) {
    const For* loop = stmts[depth]->as<For>();
    if (loop && loop->var.get() == var) return depth;
  }
  return std::nullopt;
}

std::string BlockPath::loop_names() const {
  std::string names;
  for (const For* loop : loops()) {
    if (!names.empty()) names += ", ";
    names += loop->var->name;
  }
  return names.empty() ? "(none)" : names;
}

namespace {

bool find_path(const Stmt& stmt, std::string_view name, std::vector<Stmt>* path) {
  if (!stmt) return false;
  path->push_back(stmt);
  switch (stmt->kind) {
    case StmtKind::Block:
      if (stmt->as<Block>()->name == name) return true;
      break;
    case StmtKind::For:
      if (find_path(stmt->as<For>()->body, name, path)) return true;
      break;
    case StmtKind::Seq:
      for (const Stmt& child : stmt->as<Seq>()->stmts) {
        if (find_path(child, name, path)) return true;
      }
      break;
    case StmtKind::Store: break;
  }
  path->pop_back();
  return false;
}

// Calls `f` on every statement of the loop structure (not inside blocks), parents first.
template <typename F>
void walk_loops(const Stmt& stmt, const F& f) {
  if (!stmt) return;
  f(stmt);
  if (const For* loop = stmt->as<For>()) {
    walk_loops(loop->body, f);
  } else if (const Seq* seq = stmt->as<Seq>()) {
    for (const Stmt& child : seq->stmts) walk_loops(child, f);
  }
}

void add_unique(std::vector<const BufferNode*>* list, const BufferNode* buffer) {
  if (std::find(list->begin(), list->end(), buffer) == list->end()) list->push_back(buffer);
}

class AccessCollector : public Visitor {
 public:
  BlockAccesses accesses;

 protected:
  void visit_Load(const Load& node) override {
    add_unique(&accesses.reads, node.buffer.get());
    Visitor::visit_Load(node);
  }
  void visit_Store(const Store& node) override {
    add_unique(&accesses.writes, node.buffer.get());
    Visitor::visit_Store(node);
  }
};

class LoadCollector : public Visitor {
 public:
  explicit LoadCollector(const BufferNode* buffer) : buffer_(buffer) {}
  std::vector<const Load*> loads;

 protected:
  void visit_Load(const Load& node) override {
    if (node.buffer.get() == buffer_) loads.push_back(&node);
    Visitor::visit_Load(node);
  }

 private:
  const BufferNode* buffer_;
};

class VarCollector : public Visitor {
 public:
  std::vector<const VarNode*> vars;

 protected:
  void visit_VarRef(const VarRef& node) override {
    if (std::find(vars.begin(), vars.end(), node.var.get()) == vars.end()) {
      vars.push_back(node.var.get());
    }
  }
};

class Substituter : public Mutator {
 public:
  explicit Substituter(const VarReplacements& replacements) : replacements_(replacements) {}

 protected:
  Expr mutate_VarRef(const VarRef& node, const Expr& self) override {
    auto it = replacements_.find(node.var.get());
    return it == replacements_.end() ? self : it->second;
  }

 private:
  const VarReplacements& replacements_;
};

// Loads of `buffer_` become `value_` at the load's indices (see inline_loads).
class LoadInliner : public Mutator {
 public:
  LoadInliner(const BufferNode* buffer, const std::vector<const VarNode*>& store_vars,
              const Expr& value)
      : buffer_(buffer), store_vars_(store_vars), value_(value) {}

 protected:
  Expr mutate_Load(const Load& node, const Expr& self) override {
    Expr rewritten = Mutator::mutate_Load(node, self);
    const Load& load = *rewritten->as<Load>();
    if (load.buffer.get() != buffer_) return rewritten;
    VarReplacements replacements;
    for (size_t d = 0; d < load.indices.size(); ++d) {
      replacements[store_vars_[d]] = load.indices[d];
    }
    return substitute(value_, replacements);
  }

 private:
  const BufferNode* buffer_;
  const std::vector<const VarNode*>& store_vars_;
  const Expr& value_;
};

// `parent` with its child `old_child` replaced by `new_child` (a sequence element is found by
// pointer identity).
Stmt replace_child(const Stmt& parent, const Stmt& old_child, Stmt new_child) {
  if (const For* loop = parent->as<For>()) {
    return make_for(loop->var, loop->extent, std::move(new_child), loop->provenance,
                    loop->for_kind, loop->launch);
  }
  const Seq& seq = *parent->as<Seq>();
  std::vector<Stmt> stmts = seq.stmts;
  std::replace(stmts.begin(), stmts.end(), old_child, new_child);
  return make_seq(std::move(stmts), seq.provenance);
}

}  // namespace

std::optional<BlockPath> find_block(const Stmt& body, std::string_view name) {
  BlockPath path;
  if (!find_path(body, name, &path.stmts)) return std::nullopt;
  return path;
}

std::optional<BlockPath> find_block(const Program& program, std::string_view name,
                                    std::string* reason) {
  std::optional<BlockPath> path = find_block(program.body, name);
  if (!path) {
    std::string blocks;
    for (const Block* block : collect_blocks(program.body)) {
      blocks += (blocks.empty() ? "" : ", ") + block->name;
    }
    *reason = "program " + program.name + " has no block " + std::string(name) +
              "; its blocks are " + blocks;
  }
  return path;
}

std::optional<MovePlace> find_move_place(const Program& program, std::string_view moved_name,
                                         std::string_view anchor_name,
                                         std::string_view loop_name, std::string* reason) {
  std::optional<BlockPath> moved = find_block(program, moved_name, reason);
  if (!moved) return std::nullopt;
  std::optional<BlockPath> anchor = find_block(program, anchor_name, reason);
  if (!anchor) return std::nullopt;
  const Block& moved_block = moved->block();
  const Block& anchor_block = anchor->block();
  if (&moved_block == &anchor_block) {
    *reason = "block " + moved_block.name + " cannot be computed at itself";
    return std::nullopt;
  }
  const std::optional<size_t> depth = anchor->loop_depth(loop_name);
  if (!depth) {
    *reason = "block " + anchor_block.name + " has no loop " + std::string(loop_name) +
              "; its loops are " + anchor->loop_names();
    return std::nullopt;
  }
  const For* loop = anchor->stmts[*depth]->as<For>();
  std::string at = "loop " + loop->var->name + " of block " + anchor_block.name;
  return MovePlace{std::move(*moved), std::move(*anchor), *depth, loop, std::move(at)};
}

std::vector<const Block*> collect_blocks(const Stmt& stmt) {
  std::vector<const Block*> blocks;
  walk_loops(stmt, [&](const Stmt& s) {
    if (const Block* block = s->as<Block>()) blocks.push_back(block);
  });
  return blocks;
}

std::vector<const VarNode*> collect_loop_vars(const Stmt& stmt) {
  std::vector<const VarNode*> vars;
  walk_loops(stmt, [&](const Stmt& s) {
    if (const For* loop = s->as<For>()) vars.push_back(loop->var.get());
  });
  return vars;
}

bool BlockAccesses::reads_buffer(const BufferNode* buffer) const {
  return std::find(reads.begin(), reads.end(), buffer) != reads.end();
}

bool BlockAccesses::writes_buffer(const BufferNode* buffer) const {
  return std::find(writes.begin(), writes.end(), buffer) != writes.end();
}

BlockAccesses block_accesses(const Block& block) {
  AccessCollector collector;
  collector.visit(block.init);
  collector.visit(block.body);
  return std::move(collector.accesses);
}

BlockOrder::BlockOrder(const Stmt& body) : blocks_(collect_blocks(body)) {
  for (const Block* block : blocks_) accesses_.push_back(block_accesses(*block));
}

size_t BlockOrder::position(const Block* block) const {
  return static_cast<size_t>(std::find(blocks_.begin(), blocks_.end(), block) - blocks_.begin());
}

std::vector<const Block*> BlockOrder::writers(const BufferNode* buffer) const {
  std::vector<const Block*> result;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (accesses_[i].writes_buffer(buffer)) result.push_back(blocks_[i]);
  }
  return result;
}

std::vector<const Block*> BlockOrder::readers(const BufferNode* buffer) const {
  std::vector<const Block*> result;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (accesses_[i].reads_buffer(buffer) && !accesses_[i].writes_buffer(buffer)) {
      result.push_back(blocks_[i]);
    }
  }
  return result;
}

bool contains_block(const std::vector<const Block*>& blocks, const Block* block) {
  return std::find(blocks.begin(), blocks.end(), block) != blocks.end();
}

std::string block_list(const std::vector<const Block*>& blocks) {
  std::string text;
  for (size_t i = 0; i < blocks.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == blocks.size() ? " and " : ", ") + blocks[i]->name;
  }
  return text;
}

std::vector<const Load*> collect_loads(const Stmt& stmt, const BufferNode* buffer) {
  LoadCollector collector(buffer);
  collector.visit(stmt);
  return std::move(collector.loads);
}

bool uses_var(const Expr& expr, const VarNode* var) {
  const std::vector<const VarNode*> vars = referenced_vars(expr);
  return std::find(vars.begin(), vars.end(), var) != vars.end();
}

std::vector<const VarNode*> referenced_vars(const Expr& expr) {
  VarCollector collector;
  collector.visit(expr);
  return std::move(collector.vars);
}

Expr substitute(const Expr& expr, const VarReplacements& replacements) {
  Substituter substituter(replacements);
  return substituter.mutate(expr);
}

Stmt substitute_everywhere(const Stmt& stmt, const VarReplacements& replacements) {
  if (!stmt) return stmt;
  Substituter substituter(replacements);
  return substituter.mutate(stmt);
}

std::vector<const VarNode*> distinct_index_vars(const std::vector<Expr>& indices) {
  std::vector<const VarNode*> vars;
  for (const Expr& index : indices) {
    const VarRef* ref = index->as<VarRef>();
    if (!ref || std::find(vars.begin(), vars.end(), ref->var.get()) != vars.end()) break;
    vars.push_back(ref->var.get());
  }
  return vars;
}

Stmt inline_loads(const Stmt& stmt, const BufferNode* buffer,
                  const std::vector<const VarNode*>& store_vars, const Expr& value) {
  LoadInliner inliner(buffer, store_vars, value);
  return inliner.mutate(stmt);
}

// ---------------------------------------------------------------------------------------------
// Rebuilding

Stmt replace_at(const BlockPath& path, size_t depth, Stmt replacement) {
  Stmt current = std::move(replacement);
  for (size_t d = depth; d > 0; --d) {
    current = replace_child(path.stmts[d - 1], path.stmts[d], current);
  }
  return current;
}

Stmt remove_at(const BlockPath& path, size_t depth) {
  // A loop whose whole body goes goes with it.
  while (depth > 0 && path.stmts[depth - 1]->kind == StmtKind::For) --depth;
  if (depth == 0) return make_seq({});
  const Seq& parent = *path.stmts[depth - 1]->as<Seq>();
  std::vector<Stmt> rest;
  for (const Stmt& child : parent.stmts) {
    if (child != path.stmts[depth]) rest.push_back(child);
  }
  if (rest.empty()) return remove_at(path, depth - 1);
  const bool is_program_body = depth - 1 == 0;
  Stmt replacement = rest.size() == 1 && !is_program_body
                         ? rest.front()
                         : make_seq(std::move(rest), parent.provenance);
  return replace_at(path, depth - 1, std::move(replacement));
}

std::vector<Stmt> loop_children(const For& loop) {
  if (const Seq* seq = loop.body->as<Seq>()) return seq->stmts;
  return {loop.body};
}

Stmt insert_into_loop(const BlockPath& path, size_t depth, size_t index, Stmt stmt) {
  const For& loop = *path.stmts[depth]->as<For>();
  std::vector<Stmt> children = loop_children(loop);
  children.insert(children.begin() + static_cast<std::ptrdiff_t>(std::min(index, children.size())),
                  std::move(stmt));
  Stmt body = make_seq(std::move(children), loop.body->provenance);
  return replace_at(path, depth,
                    make_for(loop.var, loop.extent, std::move(body), loop.provenance,
                             loop.for_kind, loop.launch));
}

std::set<std::string> names_in_scope(const BlockPath& path, size_t depth) {
  std::set<std::string> names;
  for (size_t d = 0; d < depth; ++d) {
    if (const For* loop = path.stmts[d]->as<For>()) names.insert(loop->var->name);
  }
  for (const VarNode* var : collect_loop_vars(path.stmts[depth])) names.insert(var->name);
  return names;
}

std::string fresh_name(const std::string& base, std::set<std::string>* taken) {
  std::string name = base;
  for (int suffix = 2; taken->count(name); ++suffix) name = base + std::to_string(suffix);
  taken->insert(name);
  return name;
}

ProgramPtr with_body(const ProgramPtr& program, Stmt body) {
  auto copy = std::make_shared<Program>(*program);
  copy->body = std::move(body);
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Index expressions

namespace {

std::optional<int64_t> constant_of(const Expr& expr) {
  if (const IntImm* imm = expr->as<IntImm>()) return imm->value;
  return std::nullopt;
}

}  // namespace

Expr index_add(Expr a, Expr b) {
  const std::optional<int64_t> ca = constant_of(a), cb = constant_of(b);
  int64_t sum = 0;
  if (ca && cb && !__builtin_add_overflow(*ca, *cb, &sum)) return int_imm(sum);
  if (ca == 0) return b;
  if (cb == 0) return a;
  return binary(BinaryOp::Add, std::move(a), std::move(b));
}

Expr index_mul(Expr a, int64_t factor) {
  const std::optional<int64_t> ca = constant_of(a);
  int64_t product = 0;
  if (ca && !__builtin_mul_overflow(*ca, factor, &product)) return int_imm(product);
  if (factor == 1) return a;
  return binary(BinaryOp::Mul, std::move(a), int_imm(factor));
}

Expr index_lt(Expr a, int64_t bound) {
  return compare(CompareOp::LT, std::move(a), int_imm(bound));
}

Expr conjunction(Expr a, Expr b) {
  if (!a) return b;
  if (!b) return a;
  return logical(LogicalOp::And, std::move(a), std::move(b));
}

}  // namespace nautilus::sched
