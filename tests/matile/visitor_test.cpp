// The MA tile IR visitor (dispatch by kind and family, loop bodies, whole-depth walks) and
// rebuilder (unchanged kernels keep their identity, renaming through the map, hooks that drop
// or replace ops, copies under a name suffix) on a small hand-built kernel.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/matile/layouts.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"

namespace nautilus::matile {
namespace {

// %x = full 2; %b = broadcast(iota 4); %acc = for i in 0..3 iter_args(%a = %x) {
//   %s = add %a, %i; yield %s }; %y = mul %acc, %x
struct SmallKernel {
  KernelPtr kernel;
  Value x, acc, y;

  SmallKernel() {
    Builder b(1);
    const RegisterLayout scalar = uniform_layout({}, b.threads());
    x = b.full(2.0, vrtile::index_scalar(), scalar, "x");
    const Value lanes = b.iota(4, uniform_layout({4}, b.threads()), "lanes");
    b.broadcast(lanes, {2, 4}, {1}, uniform_layout({2, 4}, b.threads()), "b");
    acc = b.for_loop("i", 3, {x},
                     [&](const Value& i, const std::vector<Value>& carried) -> std::vector<Value> {
                       return {b.binary(BinaryOp::Add, carried[0], i, "s")};
                     },
                     {"acc"}, {"a"})[0];
    y = b.binary(BinaryOp::Mul, acc, x, "y");
    kernel = b.finish_kernel("small", {});
  }
};

// Records which hook saw each op.
class Recorder : public Visitor {
 public:
  std::vector<std::string> seen;

 protected:
  void visit_elementwise(const Op& op) override {
    seen.push_back(std::string("elementwise ") + op_kind_name(op.kind));
  }
  void visit_register_move(const Op& op) override {
    seen.push_back(std::string("move ") + op_kind_name(op.kind));
  }
  void visit_op(const Op& op) override { seen.push_back(std::string("op ") + op_kind_name(op.kind)); }
};

TEST(MaVisitor, DispatchesByFamilyAndVisitsLoopBodiesOnce) {
  SmallKernel k;
  Recorder recorder;
  recorder.visit(*k.kernel);
  const std::vector<std::string> expected = {
      "elementwise full", "elementwise iota", "move broadcast", "op for",
      "elementwise binary", "op yield", "elementwise binary"};
  EXPECT_EQ(recorder.seen, expected);
}

// A walk that overrides one kind sees only that kind there; the rest keep their family.
class LoopCounter : public Visitor {
 public:
  int loops = 0, others = 0;

 protected:
  void visit_For(const Op& op) override {
    ++loops;
    Visitor::visit_For(op);
  }
  void visit_op(const Op&) override { ++others; }
};

TEST(MaVisitor, OverridingAKindKeepsTheDefaultRecursion) {
  SmallKernel k;
  LoopCounter counter;
  counter.visit(*k.kernel);
  EXPECT_EQ(counter.loops, 1);
  // Every other op reaches visit_op through its family, and the loop too (visit_For's default
  // sees it as an op before its body): full, iota, broadcast, for, add, yield, mul.
  EXPECT_EQ(counter.others, 7);
}

TEST(MaVisitor, ForEachOpAndDefinedValuesReachEveryDepthInProgramOrder) {
  SmallKernel k;
  std::vector<std::string> kinds;
  for_each_op(*k.kernel->body, [&](const Op& op) { kinds.push_back(op_kind_name(op.kind)); });
  EXPECT_EQ(kinds, (std::vector<std::string>{"full", "iota", "broadcast", "for", "binary", "yield",
                                             "binary"}));
  std::vector<std::string> names;
  for_each_defined_value(*k.kernel->body, [&](const Value& v) { names.push_back(v->name); });
  EXPECT_EQ(names, (std::vector<std::string>{"x", "lanes", "b", "acc", "i", "a", "s", "y"}));
  int in_loop_body = 0;
  for_each_op_with_region(*k.kernel->body, [&](const Op&, const Region& region) {
    if (&region != k.kernel->body.get()) ++in_loop_body;
  });
  EXPECT_EQ(in_loop_body, 2);  // the add and the yield
}

TEST(MaRebuilder, KeepsTheKernelWhenNothingChanges) {
  SmallKernel k;
  Rebuilder rebuilder(*k.kernel);
  EXPECT_EQ(rebuilder.run(k.kernel, keep_op), k.kernel);
}

TEST(MaRebuilder, RenamesUsesThroughTheMapAndSharesUntouchedOps) {
  SmallKernel k;
  Builder b(1);
  const Value seven = b.full(7.0, vrtile::index_scalar(), uniform_layout({}, b.threads()), "x");
  Rebuilder rebuilder(*k.kernel);
  rebuilder.map()[k.x.get()] = seven;
  const KernelPtr out = rebuilder.run(k.kernel, keep_op);
  ASSERT_NE(out, k.kernel);
  // The loop's init and the final multiply read the new value; the broadcast is shared.
  const Op& loop = *out->body->ops[3];
  EXPECT_EQ(loop.operands[0], seven);
  EXPECT_EQ(out->body->ops[4]->operands[1], seven);
  EXPECT_EQ(out->body->ops[2], k.kernel->body->ops[2]);
  // The loop body did not read %x: it stays the same region.
  EXPECT_EQ(loop.body, k.kernel->body->ops[3]->body);
}

TEST(MaRebuilder, HooksDropAndReplaceOps) {
  SmallKernel k;
  Rebuilder rebuilder(*k.kernel);
  // Drop the broadcast nobody reads; replace %y = mul %acc, %x by %y = add %acc, %x.
  const KernelPtr out =
      rebuilder.run(k.kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& into) {
        if (original.kind == OpKind::Broadcast) return;
        if (!original.results.empty() && original.results[0] == k.y) {
          Op add = *renamed;
          add.binary_op = BinaryOp::Add;
          into.emit(make_op(add));
          return;
        }
        into.emit(renamed);
      });
  EXPECT_TRUE(verify(Module{"m", "sm_80", {}, {}, {out}}).empty());
  EXPECT_EQ(out->body->ops.size(), 4u);
  EXPECT_EQ(out->body->ops[3]->binary_op, BinaryOp::Add);
  EXPECT_EQ(out->body->ops[3]->results[0], k.y);
  // The loop is untouched, so it is the same op.
  EXPECT_EQ(out->body->ops[2], k.kernel->body->ops[3]);
}

TEST(MaRebuilder, CopiesGiveEveryDefinedValueAFreshNameWithTheSuffix) {
  SmallKernel k;
  Rebuilder rebuilder(*k.kernel);
  EXPECT_EQ(rebuilder.fresh_name("y"), "y.1");  // the kernel's names are taken
  EXPECT_EQ(rebuilder.fresh_name("z"), "z");
  const OpPtr& loop = k.kernel->body->ops[3];
  const OpPtr copy = rebuilder.copy(loop, ".masked", keep_op);
  EXPECT_EQ(copy->loop_var->name, "i.masked");
  EXPECT_EQ(copy->block_args[0]->name, "a.masked");
  EXPECT_EQ(copy->results[0]->name, "acc.masked");
  // The body reads the copies and defines copies of its own.
  const Op& add = *copy->body->ops[0];
  EXPECT_EQ(add.operands[0], copy->block_args[0]);
  EXPECT_EQ(add.operands[1], copy->loop_var);
  EXPECT_EQ(add.results[0]->name, "s.masked");
  EXPECT_EQ(copy->body->ops[1]->operands[0], add.results[0]);
  // Values from outside keep their identity; the map sends originals to copies.
  EXPECT_EQ(copy->operands[0], k.x);
  EXPECT_EQ(rebuilder.lookup(k.acc), copy->results[0]);
  // A second copy under the same suffix gets unique names.
  rebuilder.map().clear();
  const OpPtr again = rebuilder.copy(loop, ".masked", keep_op);
  EXPECT_EQ(again->results[0]->name, "acc.masked.1");
}

}  // namespace
}  // namespace nautilus::matile
