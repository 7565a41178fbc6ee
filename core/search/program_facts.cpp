#include "core/search/program_facts.h"

#include <algorithm>
#include <set>

#include "core/scalar/visitor.h"
#include "core/sched/loop_nest.h"

namespace nautilus::search {
namespace {

using scalar::Block;
using scalar::For;
using scalar::Stmt;

// The loads and stores inside a block's init and body.
class AccessCollector : public scalar::Visitor {
 public:
  std::vector<const scalar::Load*> loads;
  std::vector<const scalar::Store*> stores;

 protected:
  void visit_Load(const scalar::Load& node) override {
    loads.push_back(&node);
    scalar::Visitor::visit_Load(node);
  }
  void visit_Store(const scalar::Store& node) override {
    stores.push_back(&node);
    scalar::Visitor::visit_Store(node);
  }
};

// Whether `expr` multiplies `var` by a constant larger than one (`n_o * 64`).
bool scales_var(const scalar::Expr& expr, const scalar::VarNode* var) {
  if (const auto* binary = expr->as<scalar::Binary>()) {
    if (binary->op == scalar::BinaryOp::Mul) {
      const auto is_var = [&](const scalar::Expr& e) {
        const auto* ref = e->as<scalar::VarRef>();
        return ref && ref->var.get() == var;
      };
      const auto is_big = [](const scalar::Expr& e) {
        const auto* imm = e->as<scalar::IntImm>();
        return imm && imm->value > 1;
      };
      if ((is_var(binary->a) && is_big(binary->b)) || (is_var(binary->b) && is_big(binary->a))) {
        return true;
      }
    }
    return scales_var(binary->a, var) || scales_var(binary->b, var);
  }
  return false;
}

bool has_scaled_var(const scalar::Expr& expr) {
  for (const scalar::VarNode* var : sched::referenced_vars(expr)) {
    if (scales_var(expr, var)) return true;
  }
  return false;
}

bool uses_any(const scalar::Expr& expr, const std::set<const scalar::VarNode*>& vars) {
  for (const scalar::VarNode* used : sched::referenced_vars(expr)) {
    if (vars.count(used)) return true;
  }
  return false;
}

// When every use in `expr` of a variable in `vars` sits under a floor division by a constant
// larger than one (`h / 8`), that constant (the smallest of them): so many consecutive values of
// the variables read the same element, and a tile of exactly that many reuses it (the key/value
// head of grouped-query attention across the query heads of its group). 0 otherwise, and when
// `expr` uses none of them.
int64_t coarsening_divisor(const scalar::Expr& expr, const std::set<const scalar::VarNode*>& vars) {
  if (!uses_any(expr, vars)) return 0;
  const auto* binary = expr->as<scalar::Binary>();
  if (!binary) return 0;
  if (binary->op == scalar::BinaryOp::FloorDiv) {
    const auto* divisor = binary->b->as<scalar::IntImm>();
    return divisor && divisor->value > 1 ? divisor->value : 0;
  }
  int64_t smallest = 0;
  for (const scalar::Expr& operand : {binary->a, binary->b}) {
    if (!uses_any(operand, vars)) continue;
    const int64_t divisor = coarsening_divisor(operand, vars);
    if (divisor == 0) return 0;
    smallest = smallest == 0 ? divisor : std::min(smallest, divisor);
  }
  return smallest;
}

struct NestWalker {
  NestFacts& nest;
  std::vector<const For*> path;

  void walk(const Stmt& stmt) {
    if (const auto* seq = stmt->as<scalar::Seq>()) {
      for (const Stmt& child : seq->stmts) walk(child);
    } else if (const auto* loop = stmt->as<For>()) {
      LoopFacts facts;
      facts.loop = loop;
      facts.name = loop->var->name;
      facts.extent = loop->extent;
      facts.grid = scalar::is_grid(loop->for_kind);
      nest.loops.push_back(facts);
      path.push_back(loop);
      walk(loop->body);
      path.pop_back();
    } else if (const auto* block = stmt->as<Block>()) {
      BlockFacts facts;
      facts.block = block;
      facts.loops = path;
      AccessCollector accesses;
      if (block->init) accesses.visit(block->init);
      accesses.visit(block->body);
      std::set<std::string> written;
      for (const scalar::Store* store : accesses.stores) {
        if (written.insert(store->buffer->name).second) facts.writes.push_back(store->buffer->name);
      }
      std::set<std::string> read;
      for (const scalar::Load* load : accesses.loads) {
        if (written.count(load->buffer->name)) continue;
        if (read.insert(load->buffer->name).second) facts.reads.push_back(load->buffer->name);
        facts.reads_narrow_storage |= is_narrow_storage(load->buffer->dtype);
      }
      facts.reduction = std::any_of(block->iter_vars.begin(), block->iter_vars.end(),
                                    [](const scalar::IterVar& iv) {
                                      return iv.kind == scalar::IterKind::Reduce;
                                    });
      nest.blocks.push_back(std::move(facts));
    }
  }
};

// Fills the per-loop properties that depend on the blocks under each loop.
void classify_loops(NestFacts& nest) {
  for (LoopFacts& loop : nest.loops) {
    const scalar::VarNode* var = loop.loop->var.get();
    bool spatial = true;
    bool full_reuse = false;
    int64_t reuse_group = 0;
    for (const BlockFacts& facts : nest.blocks) {
      if (std::find(facts.loops.begin(), facts.loops.end(), loop.loop) == facts.loops.end()) continue;
      const Block& block = *facts.block;
      // The iteration variables whose binding follows this loop.
      std::set<const scalar::VarNode*> following;
      for (size_t i = 0; i < block.iter_vars.size(); ++i) {
        const scalar::Expr& binding = block.bindings[i];
        if (!sched::uses_var(binding, var)) continue;
        following.insert(block.iter_vars[i].var.get());
        if (block.iter_vars[i].kind == scalar::IterKind::Reduce) spatial = false;
        if (scales_var(binding, var)) {
          loop.tile_outer = true;
        } else if (has_scaled_var(binding)) {
          loop.tile_inner = true;
        }
      }
      if (following.empty()) continue;
      AccessCollector accesses;
      if (block.init) accesses.visit(block.init);
      accesses.visit(block.body);
      std::set<const scalar::BufferNode*> written;
      for (const scalar::Store* store : accesses.stores) written.insert(store->buffer.get());
      for (const scalar::Load* load : accesses.loads) {
        if (written.count(load->buffer.get())) continue;
        bool depends = false;
        int64_t group = 0;
        for (const scalar::Expr& index : load->indices) {
          if (const int64_t divisor = coarsening_divisor(index, following)) {
            group = group == 0 ? divisor : std::min(group, divisor);
            continue;
          }
          for (const scalar::VarNode* used : sched::referenced_vars(index)) {
            if (following.count(used)) depends = true;
          }
        }
        if (depends) {
          for (const scalar::Expr& index : load->indices) {
            for (const scalar::VarNode* v : following) {
              if (scales_var(index, v)) loop.chunks_reads = true;
            }
          }
          continue;
        }
        if (group == 0) {
          full_reuse = true;
        } else {
          reuse_group = reuse_group == 0 ? group : std::min(reuse_group, group);
        }
      }
    }
    loop.spatial = spatial;
    loop.reuse = full_reuse || reuse_group > 0;
    loop.reuse_group = full_reuse ? 0 : reuse_group;
  }
}

int choose_principal(const NestFacts& nest) {
  int best = -1;
  for (size_t i = 0; i < nest.blocks.size(); ++i) {
    const BlockFacts& candidate = nest.blocks[i];
    // Only blocks under the whole chain can name every chain loop.
    bool under_chain = true;
    for (const LoopFacts& loop : nest.chain) {
      if (std::find(candidate.loops.begin(), candidate.loops.end(), loop.loop) ==
          candidate.loops.end()) {
        under_chain = false;
      }
    }
    if (!under_chain) continue;
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const BlockFacts& current = nest.blocks[static_cast<size_t>(best)];
    const size_t vars = candidate.block->iter_vars.size();
    const size_t best_vars = current.block->iter_vars.size();
    if (vars > best_vars || (vars == best_vars && candidate.reduction >= current.reduction)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace

const LoopFacts* NestFacts::find_loop(const std::string& name) const {
  for (const LoopFacts& loop : loops) {
    if (loop.name == name) return &loop;
  }
  return nullptr;
}

const BlockFacts* NestFacts::find_block(const std::string& name) const {
  for (const BlockFacts& block : blocks) {
    if (block.block->name == name) return &block;
  }
  return nullptr;
}

const NestFacts* ProgramFacts::nest_of_block(const std::string& name) const {
  for (const NestFacts& nest : nests) {
    if (nest.find_block(name)) return &nest;
  }
  return nullptr;
}

std::vector<Stmt> top_level_statements(const scalar::Program& program) {
  if (const auto* seq = program.body->as<scalar::Seq>()) return seq->stmts;
  return {program.body};
}

ProgramFacts analyze_program(const scalar::Program& program) {
  ProgramFacts facts;
  const std::vector<Stmt> statements = top_level_statements(program);
  for (size_t position = 0; position < statements.size(); ++position) {
    NestFacts nest;
    nest.position = position;
    NestWalker walker{nest, {}};
    walker.walk(statements[position]);
    if (nest.blocks.empty()) continue;
    classify_loops(nest);
    // The chain: loops from the top while each body is exactly one loop (or the block).
    Stmt s = statements[position];
    while (const For* loop = s->as<For>()) {
      for (const LoopFacts& l : nest.loops) {
        if (l.loop == loop) nest.chain.push_back(l);
      }
      s = loop->body;
    }
    for (const BlockFacts& block : nest.blocks) nest.has_reduction |= block.reduction;
    nest.principal = choose_principal(nest);
    if (nest.principal < 0) nest.principal = 0;
    // Tiled: a chain loop steps over tiles of the principal block's own axes. A block moved in
    // by compute_at may scale a loop that is no tile of the principal (the key split of a
    // FlashDecoding partial, which positions the scores' keys), and the heads stay to be tiled.
    const scalar::Block& principal = *nest.blocks[static_cast<size_t>(nest.principal)].block;
    const auto tiles_principal = [&](const LoopFacts& loop) {
      return std::any_of(principal.bindings.begin(), principal.bindings.end(),
                         [&](const scalar::Expr& binding) {
                           return scales_var(binding, loop.loop->var.get());
                         });
    };
    for (const LoopFacts& loop : nest.chain) {
      nest.tiled |= loop.tile_outer && loop.spatial && tiles_principal(loop);
      nest.bound |= loop.grid;
    }
    nest.tiled |= nest.bound;
    facts.nests.push_back(std::move(nest));
  }
  return facts;
}

std::string axis_name(const scalar::Block& block, const scalar::For& loop) {
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    const auto* ref = block.bindings[i]->as<scalar::VarRef>();
    if (ref && ref->var == loop.var) return block.iter_vars[i].var->name;
  }
  return loop.var->name;
}

}  // namespace nautilus::search
