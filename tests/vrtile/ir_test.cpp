// VR tile IR nodes and builders: the result types the builders infer, the Load/Store operand
// helpers, op copies that keep their results, and the Builder's region and name handling.
#include "core/vrtile/ir.h"

#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace nautilus::vrtile {
namespace {

using scalar::BufferRole;
using scalar::MemoryScope;

TileType f32(std::vector<int64_t> shape) { return TileType{DType::F32, std::move(shape)}; }
TileType index_type(std::vector<int64_t> shape) { return TileType{DType::Index, std::move(shape)}; }

TEST(TileTypes, TextAndElementCount) {
  EXPECT_EQ(type_text(f32({64, 128})), "f32[64, 128]");
  EXPECT_EQ(type_text(index_scalar()), "index");
  EXPECT_EQ(type_text(TileType{DType::Bool, {4}}), "bool[4]");
  EXPECT_EQ(f32({3, 5}).element_count(), 15);
  EXPECT_EQ(f32({}).element_count(), 1);
  EXPECT_EQ(f32({int64_t{1} << 40, int64_t{1} << 40}).element_count(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(f32({2}).rank(), 1);
}

TEST(Names, OfEnums) {
  EXPECT_STREQ(op_kind_name(OpKind::Load), "load");
  EXPECT_STREQ(op_kind_name(OpKind::Broadcast), "broadcast");
  EXPECT_STREQ(op_kind_name(OpKind::For), "for");
  EXPECT_STREQ(op_kind_name(OpKind::Yield), "yield");
  EXPECT_STREQ(reduce_op_name(ReduceOp::Sum), "sum");
  EXPECT_STREQ(reduce_op_name(ReduceOp::Max), "max");
  EXPECT_STREQ(reduce_op_name(ReduceOp::Min), "min");
  EXPECT_TRUE(is_elementwise(OpKind::Select));
  EXPECT_TRUE(is_elementwise(OpKind::Cast));
  EXPECT_FALSE(is_elementwise(OpKind::Broadcast));
  EXPECT_FALSE(is_elementwise(OpKind::Dot));
}

TEST(TypeInference, OfEveryOp) {
  const Buffer X =
      scalar::make_buffer("X", {16, 16}, DType::BF16, MemoryScope::Global, BufferRole::Input);
  const Value i = make_value("i", index_type({4, 8}));
  const Value m = make_value("m", TileType{DType::Bool, {4, 8}});
  const Value a = make_value("a", f32({4, 8}));
  const Value b = make_value("b", f32({8, 2}));
  const Value s = make_value("s", f32({}));

  auto type = [](const OpPtr& op) { return op->results.at(0)->type; };
  EXPECT_EQ(type(make_load("l", X, {i, i}, m, 0.0)), (TileType{DType::BF16, {4, 8}}));
  EXPECT_EQ(type(make_dot("d", a, b, nullptr)), f32({4, 2}));
  EXPECT_EQ(type(make_dot("d", make_value("h", TileType{DType::BF16, {4, 8}}), b, nullptr)),
            f32({4, 2}));
  EXPECT_EQ(type(make_reduce("r", ReduceOp::Max, a, 1)), f32({4}));
  EXPECT_EQ(type(make_reduce("r", ReduceOp::Sum, a, 0)), f32({8}));
  EXPECT_EQ(type(make_broadcast("c", s, {4, 8}, {})), f32({4, 8}));
  EXPECT_EQ(type(make_permute("p", a, {1, 0})), f32({8, 4}));
  EXPECT_EQ(type(make_iota("n", 16)), index_type({16}));
  EXPECT_EQ(type(make_full("z", 0.0, f32({2, 2}))), f32({2, 2}));
  EXPECT_EQ(type(make_unary("e", UnaryOp::Exp, a)), f32({4, 8}));
  EXPECT_EQ(type(make_binary("q", BinaryOp::FloorDiv, i, i)), index_type({4, 8}));
  EXPECT_EQ(type(make_compare("c", CompareOp::LT, a, a)), (TileType{DType::Bool, {4, 8}}));
  EXPECT_EQ(type(make_logical("o", LogicalOp::Or, m, m)), (TileType{DType::Bool, {4, 8}}));
  EXPECT_EQ(type(make_select("v", m, a, a)), f32({4, 8}));
  EXPECT_EQ(type(make_cast("h", a, DType::BF16)), (TileType{DType::BF16, {4, 8}}));

  const Value k = make_value("k", index_scalar());
  const Value arg = make_value("arg", f32({4}));
  const OpPtr loop = make_for({"out"}, k, 3, {make_value("init", f32({4}))}, {arg},
                              make_region({make_yield({arg})}));
  ASSERT_EQ(loop->results.size(), 1u);
  EXPECT_EQ(loop->results[0]->name, "out");
  EXPECT_EQ(loop->results[0]->type, f32({4}));
  EXPECT_TRUE(make_store(X, {i, i}, a, nullptr)->results.empty());
}

// Malformed operands still give a type (the verifier reports them) instead of crashing.
TEST(TypeInference, MalformedOperandsGetABestEffortType) {
  const Value v = make_value("v", f32({8}));
  EXPECT_EQ(make_dot("d", v, nullptr, nullptr)->results[0]->type, f32({8, 1}));
  EXPECT_EQ(make_reduce("r", ReduceOp::Sum, v, 3)->results[0]->type, f32({8}));
  EXPECT_EQ(make_permute("p", v, {2})->results[0]->type, f32({1}));
  EXPECT_EQ(make_unary("u", UnaryOp::Exp, nullptr)->results[0]->type, f32({}));
  EXPECT_EQ(make_load("l", nullptr, {}, nullptr, 0.0)->results[0]->type, f32({}));
}

TEST(AccessHelpers, SplitTheOperandList) {
  const Buffer Y =
      scalar::make_buffer("Y", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Output);
  const Value i = make_value("i", index_type({4, 8}));
  const Value j = make_value("j", index_type({4, 8}));
  const Value v = make_value("v", f32({4, 8}));
  const Value m = make_value("m", TileType{DType::Bool, {4, 8}});

  const OpPtr masked = make_store(Y, {i, j}, v, m);
  EXPECT_EQ(masked->operands, (std::vector<Value>{i, j, v, m}));
  EXPECT_EQ(access_indices(*masked), (std::vector<Value>{i, j}));
  EXPECT_EQ(access_mask(*masked), m);
  EXPECT_EQ(stored_value(*masked), v);

  const OpPtr plain = make_store(Y, {i, j}, v, nullptr);
  EXPECT_EQ(access_mask(*plain), nullptr);
  EXPECT_EQ(stored_value(*plain), v);

  const OpPtr load = make_load("l", Y, {i, j}, m, -1.0);
  EXPECT_EQ(access_indices(*load), (std::vector<Value>{i, j}));
  EXPECT_EQ(access_mask(*load), m);
  EXPECT_EQ(stored_value(*load), nullptr);
  EXPECT_EQ(load->constant, -1.0);

  Op truncated = *masked;
  truncated.operands.clear();
  EXPECT_TRUE(access_indices(truncated).empty());
  EXPECT_EQ(access_mask(truncated), nullptr);
  EXPECT_EQ(stored_value(truncated), nullptr);
}

// A pass that replaces an operand copies the op: the copy keeps the result values, so their
// uses stay valid, and the original is untouched.
TEST(Ops, CopiesKeepTheirResults) {
  const Value a = make_value("a", f32({4}));
  const Value b = make_value("b", f32({4}));
  const OpPtr op = make_binary("sum", BinaryOp::Add, a, a);
  Op copy = *op;
  copy.operands[1] = b;
  const OpPtr rewritten = make_op(copy);
  EXPECT_EQ(rewritten->results[0], op->results[0]);
  EXPECT_EQ(op->operands[1], a);
  EXPECT_EQ(rewritten->operands[1], b);
}

TEST(Builder, EmitsIntoTheInnermostRegionAndClosesLoopsWithAYield) {
  Builder b;
  const Value g = b.grid("g", 4);
  const Value zero = b.full(0.0, f32({2}), "zero");
  Value inside;
  const std::vector<Value> out = b.for_loop(
      "k", 3, {zero},
      [&](const Value& k, const std::vector<Value>& carried) {
        EXPECT_EQ(k->type, index_scalar());
        EXPECT_EQ(carried[0]->type, f32({2}));
        inside = b.unary(UnaryOp::Exp, carried[0], "e");
        return std::vector<Value>{inside};
      },
      {"result"});
  const KernelPtr kernel = b.finish_kernel("k", {});
  ASSERT_EQ(kernel->grid.size(), 1u);
  EXPECT_EQ(kernel->grid[0].var, g);
  EXPECT_EQ(kernel->grid[0].extent, 4);
  ASSERT_EQ(kernel->body->ops.size(), 2u);
  const Op& loop = *kernel->body->ops[1];
  EXPECT_EQ(loop.kind, OpKind::For);
  EXPECT_EQ(loop.extent, 3);
  EXPECT_EQ(loop.operands, std::vector<Value>{zero});
  EXPECT_EQ(loop.results, out);
  EXPECT_EQ(out[0]->name, "result");
  EXPECT_EQ(loop.block_args[0]->name, "0");  // unnamed block arguments get numbers
  ASSERT_EQ(loop.body->ops.size(), 2u);
  EXPECT_EQ(loop.body->ops[0]->results[0], inside);
  EXPECT_EQ(loop.body->ops[1]->kind, OpKind::Yield);
  EXPECT_EQ(loop.body->ops[1]->operands, std::vector<Value>{inside});
}

TEST(Builder, ProvenanceAppliesToLaterOps) {
  Builder b;
  const Value first = b.iota(2, "first");
  Provenance statement;
  statement.statement = 3;
  b.set_provenance(statement);
  b.iota(2, "second");
  const KernelPtr kernel = b.finish_kernel("k", {});
  EXPECT_EQ(kernel->body->ops[0]->provenance.statement, -1);
  EXPECT_EQ(kernel->body->ops[1]->provenance.statement, 3);
  EXPECT_EQ(first->name, "first");
}

TEST(Builder, AppendReservesTheNamesOfCopiedOps) {
  Builder b;
  const Value i = make_value("i", index_scalar());
  const Value arg = make_value("acc", f32({2}));
  const Value init = b.full(0.0, f32({2}), "init");
  const OpPtr inner = make_unary("step", UnaryOp::Neg, arg);
  b.append(make_for({"out"}, i, 2, {init}, {arg}, make_region({inner, make_yield({inner->results[0]})})));
  EXPECT_EQ(b.iota(2, "step")->name, "step.1");
  EXPECT_EQ(b.iota(2, "acc")->name, "acc.1");
  EXPECT_EQ(b.iota(2, "i")->name, "i.1");
  EXPECT_EQ(b.iota(2, "out")->name, "out.1");
}

TEST(Module, FindsBuffersByName) {
  const Buffer X =
      scalar::make_buffer("X", {2}, DType::F32, MemoryScope::Global, BufferRole::Input);
  const Buffer T =
      scalar::make_buffer("T", {2}, DType::F32, MemoryScope::Global, BufferRole::Intermediate);
  const Module module{"m", {X}, {T}, {}};
  ASSERT_NE(module.find_buffer("T"), nullptr);
  EXPECT_EQ(*module.find_buffer("T"), T);
  EXPECT_EQ(*module.find_buffer("X"), X);
  EXPECT_EQ(module.find_buffer("Y"), nullptr);
}

}  // namespace
}  // namespace nautilus::vrtile
