// Text, DOT and JSON forms of VR tile IR: each op's line checked inline, the FlashAttention
// kernel against golden files under tests/golden/vrtile (NAUTILUS_UPDATE_GOLDEN=1 rewrites them).
#include "core/vrtile/printer.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::vrtile {
namespace {

using scalar::BufferRole;
using scalar::MemoryScope;
using testing::expect_golden;

// The last op the builder emitted, printed.
std::string last_line(const KernelPtr& kernel) { return print_op(*kernel->body->ops.back()); }

struct Fixture {
  Buffer X = scalar::make_buffer("X", {4, 8}, DType::BF16, MemoryScope::Global, BufferRole::Input);
  Builder b;
  Value i = b.iota(8, "i");
  Value rows = b.broadcast(b.iota(4, "r"), {4, 8}, {0}, "rows");
  Value cols = b.broadcast(i, {4, 8}, {1}, "cols");
  Value x = b.full(1.5, TileType{DType::F32, {4, 8}}, "x");
};

TEST(Printer, OpLines) {
  Fixture f;
  Builder& b = f.b;
  b.compare(CompareOp::LT, f.cols, f.rows, "mask");
  EXPECT_EQ(print_op(*b.finish_kernel("k", {})->body->ops.back()),
            "%mask = cmp lt %cols, %rows : bool[4, 8]\n");

  Fixture g;
  g.b.load(g.X, {g.rows, g.cols}, nullptr, 0.0, "v");
  EXPECT_EQ(last_line(g.b.finish_kernel("k", {g.X})), "%v = load X[%rows, %cols] : bf16[4, 8]\n");

  Fixture h;
  const Value m = h.b.compare(CompareOp::GE, h.rows, h.cols, "m");
  h.b.load(h.X, {h.rows, h.cols}, m, -INFINITY, "v");
  EXPECT_EQ(last_line(h.b.finish_kernel("k", {h.X})),
            "%v = load X[%rows, %cols] mask %m other -inf : bf16[4, 8]\n");
}

TEST(Printer, EveryOpKind) {
  Fixture f;
  Builder& b = f.b;
  const Value t = b.permute(f.x, {1, 0}, "t");
  const Value d = b.dot(f.x, t, nullptr, "d");
  b.dot(f.x, t, d, "d2");
  b.reduce(ReduceOp::Min, f.x, 0, "red");
  b.unary(UnaryOp::Exp2, f.x, "e");
  b.binary(BinaryOp::FloorDiv, f.i, f.i, "q");
  const Value c = b.compare(CompareOp::NE, f.x, f.x, "c");
  b.logical(LogicalOp::Or, c, c, "o");
  b.select(c, f.x, f.x, "s");
  b.cast(f.x, DType::BF16, "h");
  b.full(3, TileType{DType::Index, {}}, "three");
  b.full(1, TileType{DType::Bool, {2}}, "yes");
  b.full(0.1, TileType{DType::BF16, {2}}, "tenth");
  const KernelPtr kernel = b.finish_kernel("k", {});
  std::string text;
  for (size_t op = 4; op < kernel->body->ops.size(); ++op) text += print_op(*kernel->body->ops[op]);
  EXPECT_EQ(text,
            "%x = full 1.5 : f32[4, 8]\n"
            "%t = permute %x, order [1, 0] : f32[8, 4]\n"
            "%d = dot %x, %t : f32[4, 4]\n"
            "%d2 = dot %x, %t, %d : f32[4, 4]\n"
            "%red = reduce min %x, axis 0 : f32[8]\n"
            "%e = exp2 %x : f32[4, 8]\n"
            "%q = floordiv %i, %i : index[8]\n"
            "%c = cmp ne %x, %x : bool[4, 8]\n"
            "%o = or %c, %c : bool[4, 8]\n"
            "%s = select %c, %x, %x : f32[4, 8]\n"
            "%h = cast %x : bf16[4, 8]\n"
            "%three = full 3 : index\n"
            "%yes = full true : bool[2]\n"
            "%tenth = full 0.100097656 : bf16[2]\n");
}

TEST(Printer, LoopsAndStores) {
  Buffer Y = scalar::make_buffer("Y", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Builder b;
  const Value zero = b.full(0.0, TileType{DType::F32, {4}}, "zero");
  const Value idx = b.iota(4, "idx");
  const std::vector<Value> sum = b.for_loop(
      "k", 3, {zero},
      [&](const Value&, const std::vector<Value>& carried) {
        return std::vector<Value>{b.binary(BinaryOp::Add, carried[0], carried[0], "next")};
      },
      {"sum"}, {"acc"});
  b.for_loop("j", 0, {}, [&](const Value&, const std::vector<Value>&) {
    b.store(Y, {idx}, sum[0]);
    return std::vector<Value>{};
  });
  const Module module{"m", {Y}, {}, {b.finish_kernel("k", {Y})}};
  EXPECT_EQ(print_module(module),
            "# vrtile IR: m\n"
            "param Y : f32[4] global output\n"
            "\n"
            "kernel k(Y) grid() {\n"
            "  %zero = full 0.0 : f32[4]\n"
            "  %idx = iota 4 : index[4]\n"
            "  %sum = for k in 0..3 iter_args(%acc = %zero) {\n"
            "    %next = add %acc, %acc : f32[4]\n"
            "    yield %next\n"
            "  }\n"
            "  for j in 0..0 {\n"
            "    store Y[%idx], %sum\n"
            "    yield\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(op_label(*module.kernels[0]->body->ops[2]), "for k");
  EXPECT_EQ(op_label(*module.kernels[0]->body->ops[0]), "full %zero");
}

TEST(Printer, NamesAreMadeUnique) {
  Builder b;
  const Value a = b.iota(2, "a");
  const Value a1 = b.iota(2, "a");
  const Value n0 = b.iota(2);
  const Value n1 = b.iota(2);
  EXPECT_EQ(a->name, "a");
  EXPECT_EQ(a1->name, "a.1");
  EXPECT_EQ(n0->name, "0");
  EXPECT_EQ(n1->name, "1");
  b.finish_kernel("k", {});
  EXPECT_EQ(b.iota(2, "a")->name, "a");  // a new kernel starts a new namespace
}

// (f) The FlashAttention kernel of correctness_test at B=1, H=2, M=13, N=20, D=4 with 8×16
// tiles: the shape the compiler produces.
ModulePtr attention_module() {
  const driver::Compilation compilation =
      testing::compile_asset("attention", {"B=1", "H=2", "M=13", "N=20", "D=4"});
  return test_kernels::flash_attention(*compilation.program, 8, 16);
}

TEST(Printer, GoldenAttentionText) {
  expect_golden("vrtile/attention.txt", print_module(*attention_module()));
}

TEST(Printer, GoldenAttentionDot) {
  expect_golden("vrtile/attention.dot", module_to_dot(*attention_module()));
}

TEST(Printer, GoldenAttentionJson) {
  expect_golden("vrtile/attention.json", module_to_json(*attention_module()).dump(2) + "\n");
}

// Online softmax: a loop carrying two tiles, then a loop that carries nothing and only stores.
TEST(Printer, GoldenSoftmaxText) {
  const driver::Compilation compilation = testing::compile_asset("softmax", {"R=7", "C=33"});
  expect_golden("vrtile/softmax.txt",
                print_module(*test_kernels::online_softmax(*compilation.program, 4, 16)));
}

}  // namespace
}  // namespace nautilus::vrtile
