// Visitor and Mutator: traversal reaches every node; a mutator keeps unchanged subtrees shared
// and returns its input when nothing changed.
#include "core/scalar/visitor.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"
#include "tests/scalar/programs.h"

namespace nautilus::scalar {
namespace {

using namespace test_ir;

class NodeCounter : public Visitor {
 public:
  int loads = 0, blocks = 0, stores = 0, float_imms = 0;

 protected:
  void visit_Load(const Load& node) override {
    ++loads;
    Visitor::visit_Load(node);
  }
  void visit_Block(const Block& node) override {
    ++blocks;
    Visitor::visit_Block(node);
  }
  void visit_Store(const Store& node) override {
    ++stores;
    Visitor::visit_Store(node);
  }
  void visit_FloatImm(const FloatImm&) override { ++float_imms; }
};

TEST(Visitor, ReachesEveryNode) {
  NodeCounter counter;
  counter.visit(softmax_program(4, 8).body);
  EXPECT_EQ(counter.blocks, 4);
  EXPECT_EQ(counter.stores, 6);      // four bodies and two inits
  EXPECT_EQ(counter.loads, 8);
  EXPECT_EQ(counter.float_imms, 2);  // -inf and 0.0f, both in inits
}

TEST(Mutator, NoOpMutatorReturnsItsInput) {
  Mutator identity;
  for (const Program& program : {softmax_program(4, 8), gemm_split_predicated(20, 4, 20)}) {
    EXPECT_EQ(identity.mutate(program.body), program.body);
  }
  Expr expr = select(lt(v(make_var("i")), i64(3)), f32(1.0), f32(2.0));
  EXPECT_EQ(identity.mutate(expr), expr);
  EXPECT_EQ(identity.mutate(Expr()), nullptr);
}

// Replaces the immediate 0.0f (the init value of L) by 1.0f.
class ReplaceZero : public Mutator {
 protected:
  Expr mutate_FloatImm(const FloatImm& node, const Expr& self) override {
    return node.value == 0.0 ? float_imm(1.0, node.dtype, node.provenance) : self;
  }
};

TEST(Mutator, ChangingOneLeafRebuildsOnlyThePathToIt) {
  const Program before = softmax_program(4, 8);
  Program after = before;
  after.body = ReplaceZero().mutate(before.body);
  ASSERT_NE(after.body, before.body);

  const auto& old_nests = before.body->as<Seq>()->stmts;
  const auto& new_nests = after.body->as<Seq>()->stmts;
  ASSERT_EQ(new_nests.size(), 4u);
  EXPECT_EQ(new_nests[0], old_nests[0]);  // Mx: its init is -inf, untouched
  EXPECT_EQ(new_nests[1], old_nests[1]);
  EXPECT_NE(new_nests[2], old_nests[2]);  // L: the path for r / for c / block L / init
  EXPECT_EQ(new_nests[3], old_nests[3]);

  auto block_of = [](const Stmt& nest) {
    return nest->as<For>()->body->as<For>()->body->as<Block>();
  };
  const Block* old_block = block_of(old_nests[2]);
  const Block* new_block = block_of(new_nests[2]);
  EXPECT_NE(new_block, old_block);
  EXPECT_EQ(new_block->body, old_block->body);
  EXPECT_EQ(new_block->bindings, old_block->bindings);
  EXPECT_EQ(new_block->iter_vars[0].var, old_block->iter_vars[0].var);
  EXPECT_EQ(new_block->name, "L");
  EXPECT_EQ(new_block->provenance.statement, old_block->provenance.statement);
  const Store* init = new_block->init->as<Store>();
  EXPECT_EQ(init->indices, old_block->init->as<Store>()->indices);
  EXPECT_EQ(print_stmt(new_block->init), "L[r] = 1.0f\n");
  EXPECT_EQ(verify(after), std::vector<std::string>{});
}

// Rewrites every reference to one variable: here the binding of a block changes, so the block
// is rebuilt with the same iteration variables and everything inside it shared.
class SubstituteVar : public Mutator {
 public:
  SubstituteVar(Var from, Expr to) : from_(std::move(from)), to_(std::move(to)) {}

 protected:
  Expr mutate_VarRef(const VarRef& node, const Expr& self) override {
    return node.var == from_ ? to_ : self;
  }

 private:
  Var from_;
  Expr to_;
};

TEST(Mutator, RewritingABindingKeepsTheBlockBody) {
  const Program program = gemm_plain(8, 8, 8);
  const For* loop_m = program.body->as<For>();
  Stmt rewritten = SubstituteVar(loop_m->var, sub(i64(7), v(loop_m->var))).mutate(program.body);
  const Block* before = loop_m->body->as<For>()->body->as<For>()->body->as<Block>();
  const Block* after =
      rewritten->as<For>()->body->as<For>()->body->as<For>()->body->as<Block>();
  EXPECT_EQ(print_expr(after->bindings[0]), "7 - m");
  EXPECT_EQ(after->bindings[1], before->bindings[1]);
  EXPECT_EQ(after->init, before->init);
  EXPECT_EQ(after->body, before->body);
}

}  // namespace
}  // namespace nautilus::scalar
