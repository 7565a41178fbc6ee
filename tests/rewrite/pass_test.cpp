// Each rewrite on a small hand-built kernel: golden before/after text, the module still
// verifies, the output matches the input program's on random inputs (the VR interpreter on both),
// the pass returns its input pointer when it has nothing (more) to do, and provenance is kept.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/rewrite/rewrite.h"
#include "core/vrtile/printer.h"
#include "core/vrtile/verifier.h"
#include "tests/common/golden.h"
#include "tests/rewrite/check.h"

namespace nautilus::rewrite {
namespace {

using namespace vrtile;
using scalar::BufferRole;
using scalar::MemoryScope;

constexpr int64_t R = 6, C = 8;  // not powers of two: nothing lines up by accident

Buffer input(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::F32) {
  return scalar::make_buffer(name, std::move(shape), dtype, MemoryScope::Global,
                             BufferRole::Input);
}
Buffer output(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::F32) {
  return scalar::make_buffer(name, std::move(shape), dtype, MemoryScope::Global,
                             BufferRole::Output);
}

// Loads a whole 2-D buffer.
Value load_all(Builder& b, const Buffer& buffer) {
  const std::vector<int64_t>& shape = buffer->shape;
  const Value rows = b.broadcast(b.iota(shape[0], buffer->name + "_r"), shape, {0},
                                 buffer->name + "_rows");
  const Value cols = b.broadcast(b.iota(shape[1], buffer->name + "_c"), shape, {1},
                                 buffer->name + "_cols");
  return b.load(buffer, {rows, cols}, nullptr, 0.0, buffer->name + "_tile");
}

// Stores a whole rank-1 or rank-2 value.
void store_all(Builder& b, const Buffer& buffer, const Value& value) {
  const std::vector<int64_t>& shape = value->type.shape;
  if (shape.size() == 1) {
    b.store(buffer, {b.iota(shape[0], "out_i")}, value);
    return;
  }
  const Value rows = b.broadcast(b.iota(shape[0], "out_r"), shape, {0}, "out_rows");
  const Value cols = b.broadcast(b.iota(shape[1], "out_c"), shape, {1}, "out_cols");
  b.store(buffer, {rows, cols}, value);
}

ModulePtr module_of(std::vector<Buffer> params, KernelPtr kernel) {
  return std::make_shared<const Module>(Module{"m", params, {}, {std::move(kernel)}});
}

TileType f32(std::vector<int64_t> shape) { return TileType{DType::F32, std::move(shape)}; }

Provenance provenance_of(int statement) {
  Provenance p;
  p.statement = statement;
  return p;
}

// Runs `pass`, compares the golden text, checks validity, equivalence and idempotence.
ModulePtr expect_pass(const std::string& golden, const std::function<ModulePtr(const ModulePtr&)>& pass,
                      const ModulePtr& before, double tolerance = 1e-5) {
  const ModulePtr after = pass(before);
  EXPECT_NE(after, before) << golden << ": the pass changed nothing";
  EXPECT_EQ(verify(*after), std::vector<std::string>{});
  nautilus::testing::expect_golden(
      "rewrite/" + golden + ".txt",
      "before:\n" + print_module(*before) + "\nafter:\n" + print_module(*after));
  const testing::CheckResult same = testing::check_equivalent(*before, *after, tolerance);
  EXPECT_TRUE(same.ok) << same.error;
  EXPECT_EQ(pass(after), after) << golden << ": a second run changed more\n"
                                << print_module(*pass(after));
  return after;
}

// Every op of the region (new ones included) carries `statement`.
void expect_provenance(const Region& region, int statement) {
  for (const OpPtr& op : region.ops) {
    EXPECT_EQ(op->provenance.statement, statement) << print_op(*op);
    if (op->kind == OpKind::For) expect_provenance(*op->body, statement);
  }
}

TEST(DeadCode, DropsUnusedOpsAndCarriedValues) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  b.unary(UnaryOp::Exp, x, "unused");
  const Value mx0 = b.full(-INFINITY, f32({R}), "mx0");
  const Value l0 = b.full(0.0, f32({R}), "l0");
  const std::vector<Value> out = b.for_loop(
      "c", 2, {mx0, l0},
      [&](const Value&, const std::vector<Value>& carried) {
        const Value rowmax = b.reduce(ReduceOp::Max, x, 1, "rowmax");
        const Value mx1 = b.binary(BinaryOp::Max, carried[0], rowmax, "mx1");
        const Value rowsum = b.reduce(ReduceOp::Sum, x, 1, "rowsum");
        return std::vector<Value>{mx1, b.binary(BinaryOp::Add, carried[1], rowsum, "l1")};
      },
      {"mx", "l"}, {"mx_i", "l_i"});
  store_all(b, Y, out[1]);
  expect_pass("dead_code", eliminate_dead_code, module_of({X, Y}, b.finish_kernel("k", {X, Y})));
}

TEST(DeadCode, KeepsLoopsThatStore) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C});
  Builder b;
  b.grid("g", 1);
  b.for_loop("c", 1, {}, [&](const Value&, const std::vector<Value>&) {
    store_all(b, Y, load_all(b, X));
    return std::vector<Value>{};
  });
  const ModulePtr module = module_of({X, Y}, b.finish_kernel("k", {X, Y}));
  EXPECT_EQ(eliminate_dead_code(module), module);
}

TEST(CommonSubexpressions, MergesRepeatedAndSwappedOps) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value m = b.broadcast(b.reduce(ReduceOp::Max, x, 1, "m"), {R, C}, {0}, "m_t");
  const Value a1 = b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, x, m, "d1"), "a1");
  const Value a2 = b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, x, m, "d2"), "a2");
  const Value s1 = b.binary(BinaryOp::Add, a1, x, "s1");
  const Value s2 = b.binary(BinaryOp::Add, x, a2, "s2");  // the same sum, operands swapped
  const Value d = b.binary(BinaryOp::Sub, s1, s2, "diff");  // 0 once merged, not before
  store_all(b, Y, b.binary(BinaryOp::Add, d, a2, "y"));
  expect_pass("common_subexpressions", eliminate_common_subexpressions,
              module_of({X, Y}, b.finish_kernel("k", {X, Y})));
}

TEST(CommonSubexpressions, DoesNotMergeNonCommutativeSwaps) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value e = b.unary(UnaryOp::Exp, x, "e");
  const Value d1 = b.binary(BinaryOp::Sub, x, e, "d1");
  const Value d2 = b.binary(BinaryOp::Sub, e, x, "d2");
  store_all(b, Y, b.binary(BinaryOp::Mul, d1, d2, "y"));
  const ModulePtr module = module_of({X, Y}, b.finish_kernel("k", {X, Y}));
  // (The iotas of the load and the store do merge.)
  const std::string after = print_module(*eliminate_common_subexpressions(module));
  EXPECT_NE(after.find("%d1 = sub %X_tile, %e"), std::string::npos) << after;
  EXPECT_NE(after.find("%d2 = sub %e, %X_tile"), std::string::npos) << after;
}

TEST(LoopInvariantHoisting, MovesInvariantsOutOfNestedLoops) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value acc0 = b.full(0.0, f32({R, C}), "acc0");
  const std::vector<Value> acc = b.for_loop(
      "i", 2, {acc0},
      [&](const Value&, const std::vector<Value>& outer) {
        return b.for_loop(
            "j", 3, {outer[0]},
            [&](const Value& j, const std::vector<Value>& inner) {
              const Value two = b.full(2.0, f32({}), "two");  // invariant in both loops
              const Value two_t = b.broadcast(two, {R, C}, {}, "two_t");
              const Value scaled = b.binary(BinaryOp::Mul, x, two_t, "scaled");  // too
              const Value jf = b.broadcast(b.cast(j, DType::F32, "jf"), {R, C}, {}, "jf_t");
              const Value step = b.binary(BinaryOp::Mul, scaled, jf, "step");  // reads j
              return std::vector<Value>{b.binary(BinaryOp::Add, inner[0], step, "acc1")};
            },
            {"acc_j"}, {"acc_ij"});
      },
      {"acc"}, {"acc_i"});
  store_all(b, Y, acc[0]);
  expect_pass("loop_invariant_hoisting", hoist_loop_invariants,
              module_of({X, Y}, b.finish_kernel("k", {X, Y})));
}

TEST(LoopInvariantHoisting, LeavesLoopsOfZeroIterations) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const std::vector<Value> out = b.for_loop(
      "i", 0, {x},
      [&](const Value&, const std::vector<Value>&) {
        return std::vector<Value>{b.unary(UnaryOp::Exp, x, "e")};
      },
      {"out"}, {"carried"});
  store_all(b, Y, out[0]);
  const ModulePtr module = module_of({X, Y}, b.finish_kernel("k", {X, Y}));
  EXPECT_EQ(hoist_loop_invariants(module), module);
}

TEST(DelayedNormalization, MovesRowFactorsOutOfReduceSumAndDot) {
  const Buffer X = input("X", {R, C}), W = input("W", {C, 5}), S = output("S", {R}),
               P = output("P", {R, 5});
  Builder b;
  b.set_provenance(provenance_of(3));
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value w = load_all(b, W);
  const Value e = b.unary(UnaryOp::Exp, x, "e");
  const Value l = b.reduce(ReduceOp::Sum, e, 1, "l");
  const Value c = b.reduce(ReduceOp::Max, e, 1, "c");
  const Value l_t = b.broadcast(l, {R, C}, {0}, "l_t");
  const Value c_t = b.broadcast(c, {R, C}, {0}, "c_t");
  const Value en = b.binary(BinaryOp::Mul, b.binary(BinaryOp::Div, e, l_t, "en0"), c_t, "en");
  store_all(b, S, b.reduce(ReduceOp::Sum, en, 1, "s"));  // sum(e / l · c) = sum(e) / l · c
  store_all(b, P, b.dot(en, w, nullptr, "pw"));          // (e / l · c) W = (e W) / l · c
  const ModulePtr after = expect_pass("delayed_normalization_sums", delay_normalization,
                                      module_of({X, W, S, P}, b.finish_kernel("k", {X, W, S, P})));
  expect_provenance(*after->kernels[0]->body, 3);
}

TEST(DelayedNormalization, KeepsDivisionsAlongTheSummedAxis) {
  const Buffer X = input("X", {R, C}), S = output("S", {R});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value col = b.reduce(ReduceOp::Max, x, 0, "colmax");  // varies along axis 1
  const Value xn = b.binary(BinaryOp::Div, x, b.broadcast(col, {R, C}, {1}, "col_t"), "xn");
  store_all(b, S, b.reduce(ReduceOp::Sum, xn, 1, "s"));
  const ModulePtr module = module_of({X, S}, b.finish_kernel("k", {X, S}));
  EXPECT_EQ(delay_normalization(module), module);
}

// softmax(2·x) written directly: max, shift and exp of the scaled tile.
ModulePtr scaled_softmax(double scale, bool store_scaled) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C}), Z = output("Z", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value s = b.binary(BinaryOp::Mul, x,
                           b.broadcast(b.full(scale, f32({}), "c"), {R, C}, {}, "c_t"), "s");
  const Value m = b.reduce(ReduceOp::Max, s, 1, "m");
  const Value shifted = b.binary(BinaryOp::Sub, s, b.broadcast(m, {R, C}, {0}, "m_t"), "shifted");
  const Value e = b.unary(UnaryOp::Exp, shifted, "e");
  const Value l = b.reduce(ReduceOp::Sum, e, 1, "l");
  store_all(b, Y, b.binary(BinaryOp::Div, e, b.broadcast(l, {R, C}, {0}, "l_t"), "y"));
  std::vector<Buffer> params{X, Y};
  if (store_scaled) {
    store_all(b, Z, s);
    params.push_back(Z);
  }
  return module_of(params, b.finish_kernel("k", params));
}

TEST(ScaleFolding, FoldsAPositiveScaleIntoTheExponent) {
  expect_pass("scale_folding", fold_scales, scaled_softmax(2.0, false));
}

TEST(ScaleFolding, LeavesNegativeScalesAndStoredScaledValues) {
  const ModulePtr negative = scaled_softmax(-2.0, false);
  EXPECT_EQ(fold_scales(negative), negative);  // max(−2x) ≠ −2·max(x)
  const ModulePtr stored = scaled_softmax(2.0, true);
  EXPECT_EQ(fold_scales(stored), stored);  // the scaled tile itself is needed
}

TEST(ScaleFolding, FoldsThroughTheGuardOfAFullyMaskedRow) {
  // Masked attention's guard: a row whose scores are all -inf takes 0 as its max, so that
  // exp(-inf - 0) is 0 and not NaN. `m == -inf` is the same boolean for m / c (c > 0), so the
  // compare does not stop the scale from reaching the exponent.
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value s = b.binary(BinaryOp::Mul, x, b.broadcast(b.full(0.125, f32({}), "c"), {R, C}, {}, "c_t"), "s");
  const Value m = b.reduce(ReduceOp::Max, s, 1, "m");
  const Value empty = b.compare(CompareOp::EQ, m, b.full(-INFINITY, f32({R}), "minus_inf"), "empty");
  const Value safe = b.select(empty, b.full(0.0, f32({R}), "zero"), m, "safe");
  const Value shifted = b.binary(BinaryOp::Sub, s, b.broadcast(safe, {R, C}, {0}, "safe_t"), "shifted");
  store_all(b, Y, b.unary(UnaryOp::Exp, shifted, "e"));
  const ModulePtr after = expect_pass("scale_folding_guard", fold_scales, module_of({X, Y}, b.finish_kernel("k", {X, Y})));
  for (const OpPtr& op : after->kernels[0]->body->ops) {
    EXPECT_FALSE(op->kind == OpKind::Binary && op->binary_op == BinaryOp::Mul && op->operands[0]->name == "X_tile")
        << "the score tile is no longer scaled: " << print_op(*op);
  }
}

TEST(ExpToExp2, FoldsLog2eIntoTheScaleAndDistributesOverTheRowShift) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C}), Z = output("Z", {R});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value m = b.reduce(ReduceOp::Max, x, 1, "m");
  const Value shifted = b.binary(BinaryOp::Sub, x, b.broadcast(m, {R, C}, {0}, "m_t"), "shifted");
  const Value arg = b.binary(BinaryOp::Div, shifted, b.full(3.0, f32({R, C}), "three"), "arg");
  store_all(b, Y, b.unary(UnaryOp::Exp, arg, "p"));                 // exp((x − m) / 3)
  store_all(b, Z, b.unary(UnaryOp::Exp, b.unary(UnaryOp::Neg, m, "neg_m"), "z"));  // plain exp
  expect_pass("exp_to_exp2", exp_to_exp2, module_of({X, Y, Z}, b.finish_kernel("k", {X, Y, Z})));
}

TEST(ConstantFolding, FoldsConstantsAndDividesByReciprocals) {
  const Buffer X = input("X", {R, C}), Y = output("Y", {R, C}), Z = output("Z", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  // x / sqrt(8): the constant folds, the division becomes a multiplication.
  const Value root = b.unary(UnaryOp::Sqrt, b.full(8.0, f32({}), "eight"), "root");
  store_all(b, Y, b.binary(BinaryOp::Div, x, b.broadcast(root, {R, C}, {}, "root_t"), "y"));
  // A division by a tile that is not constant stays.
  store_all(b, Z, b.binary(BinaryOp::Div, b.full(1.0, f32({R, C}), "one"), x, "z"));
  const ModulePtr after = expect_pass(
      "constant_folding", fold_constants, module_of({X, Y, Z}, b.finish_kernel("k", {X, Y, Z})));
  int divisions = 0;
  for (const OpPtr& op : after->kernels[0]->body->ops) {
    divisions += op->kind == OpKind::Binary && op->binary_op == BinaryOp::Div;
    EXPECT_FALSE(op->kind == OpKind::Unary && op->unary_op == UnaryOp::Sqrt) << print_op(*op);
  }
  EXPECT_EQ(divisions, 1);
}

TEST(ReciprocalDivisors, DividesOncePerRowAndColumnAndKeepsOtherDivisions) {
  const Buffer X = input("X", {R, C}), Ls = input("L", {R}), Cs = input("S", {C}),
               Y = output("Y", {R, C}), Z = output("Z", {R, C}), W = output("W", {R, C});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value l = b.load(Ls, {b.iota(R, "l_i")}, nullptr, 0.0, "l");
  const Value s = b.load(Cs, {b.iota(C, "s_i")}, nullptr, 0.0, "s");
  // x / broadcast of a row value and of a column value: one reciprocal per row (column).
  store_all(b, Y, b.binary(BinaryOp::Div, x, b.broadcast(l, {R, C}, {0}, "l_t"), "y"));
  store_all(b, Z, b.binary(BinaryOp::Div, x, b.broadcast(s, {R, C}, {1}, "s_t"), "z"));
  // A division by a full tile saves nothing and stays.
  store_all(b, W, b.binary(BinaryOp::Div, b.full(2.0, f32({R, C}), "two"), x, "w"));
  const ModulePtr after = expect_pass("reciprocal_divisors", reciprocal_divisors,
                                      module_of({X, Ls, Cs, Y, Z, W}, b.finish_kernel("k", {X, Ls, Cs, Y, Z, W})));
  int tile_divisions = 0, small_divisions = 0;
  for (const OpPtr& op : after->kernels[0]->body->ops) {
    if (op->kind != OpKind::Binary || op->binary_op != BinaryOp::Div) continue;
    (op->results[0]->type.shape.size() == 2 ? tile_divisions : small_divisions) += 1;
  }
  EXPECT_EQ(tile_divisions, 1);   // w only
  EXPECT_EQ(small_divisions, 2);  // 1 / l and 1 / s
  // A constant divisor is fold-constants' (x / sqrt(8) there).
  Builder c;
  c.grid("g", 1);
  const Value cx = load_all(c, X);
  store_all(c, Y, c.binary(BinaryOp::Div, cx, c.broadcast(c.full(3.0, f32({R}), "three"), {R, C}, {0}, "t"), "y"));
  const ModulePtr constant = module_of({X, Y}, c.finish_kernel("k", {X, Y}));
  EXPECT_EQ(reciprocal_divisors(constant), constant);
}

TEST(RescaleCancellation, MergesChainedExponentialsAndDropsOnes) {
  const Buffer X = input("X", {R, C}), A = input("A", {R}), Bm = input("B", {R}),
               Cm = input("C", {R}), Y = output("Y", {R, C}), Z = output("Z", {R});
  Builder b;
  b.grid("g", 1);
  const Value x = load_all(b, X);
  const Value i = b.iota(R, "i");
  const Value a = b.load(A, {i}, nullptr, 0.0, "a");
  const Value bb = b.load(Bm, {i}, nullptr, 0.0, "bb");
  const Value cc = b.load(Cm, {i}, nullptr, 0.0, "cc");
  const Value e1 = b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, a, bb, "d1"), "e1");
  const Value e2 = b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, bb, cc, "d2"), "e2");
  // x · bcast(exp(a − b)) · bcast(exp(b − c)) · 1  →  x · bcast(exp(a − c))
  const Value t1 = b.binary(BinaryOp::Mul, x, b.broadcast(e1, {R, C}, {0}, "e1_t"), "t1");
  const Value t2 = b.binary(BinaryOp::Mul, t1, b.broadcast(e2, {R, C}, {0}, "e2_t"), "t2");
  store_all(b, Y, b.binary(BinaryOp::Mul, t2, b.full(1.0, f32({R, C}), "one"), "y"));
  // exp(a − b) / exp(c − b) → exp(a − c)
  const Value e3 = b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, cc, bb, "d3"), "e3");
  store_all(b, Z, b.binary(BinaryOp::Div, e1, e3, "z"));
  expect_pass("rescale_cancellation", cancel_rescales,
              module_of({X, A, Bm, Cm, Y, Z}, b.finish_kernel("k", {X, A, Bm, Cm, Y, Z})));
}

// dot(f32(a), f32(w)) and dot(p, f32(v)) with bf16 a, w, v; the second dot's output Z is
// `z_dtype` (a bf16 Z stores a cast of the dot).
ModulePtr casted_dots(DType z_dtype = DType::BF16) {
  const Buffer A = input("A", {R, C}, DType::BF16), W = input("W", {5, C}, DType::BF16),
               V = input("V", {5, 3}, DType::BF16), Y = output("Y", {R, 5}),
               Z = output("Z", {R, 3}, z_dtype);
  Builder b;
  b.grid("g", 1);
  const Value a = b.cast(load_all(b, A), DType::F32, "af");
  const Value wt = b.permute(b.cast(load_all(b, W), DType::F32, "wf"), {1, 0}, "wt");
  const Value s = b.dot(a, wt, nullptr, "s");
  store_all(b, Y, s);
  const Value p = b.unary(UnaryOp::Tanh, s, "p");
  const Value z = b.dot(p, b.cast(load_all(b, V), DType::F32, "vf"), nullptr, "z");
  store_all(b, Z, z_dtype == DType::F32 ? z : b.cast(z, z_dtype, "z_out"));
  return module_of({A, W, V, Y, Z}, b.finish_kernel("k", {A, W, V, Y, Z}));
}

TEST(OperandNarrowing, ExactNarrowingIsBitForBit) {
  const ModulePtr before = casted_dots();
  const ModulePtr after = narrow_dot_operands(before, NarrowingMode::ExactOnly);
  ASSERT_NE(after, before);
  EXPECT_EQ(verify(*after), std::vector<std::string>{});
  // Y comes from the exact form alone: identical; Z's dot is untouched in this mode.
  const testing::CheckResult same = testing::check_equivalent(*before, *after, 0.0);
  EXPECT_TRUE(same.ok) << same.error;
}

TEST(OperandNarrowing, RoundsTheComputedOperandWithinBf16Tolerance) {
  const ModulePtr after = expect_pass(
      "operand_narrowing", [](const ModulePtr& m) { return narrow_dot_operands(m); },
      casted_dots(), tolerance(DType::BF16));
  // And it is not exact: rounding P to bf16 changes Z.
  const testing::CheckResult exact = testing::check_equivalent(*casted_dots(), *after, 1e-6);
  EXPECT_FALSE(exact.ok);
}

// An f32 output asks for f32 accuracy: the dot feeding it keeps P in f32 (only the exact form
// applies), so the result is bit for bit the same.
TEST(OperandNarrowing, KeepsTheComputedOperandOfADotFeedingAnF32Output) {
  const ModulePtr before = casted_dots(DType::F32);
  const ModulePtr after = narrow_dot_operands(before);
  ASSERT_NE(after, before);  // the exact form still applies to Y's dot
  const testing::CheckResult same = testing::check_equivalent(*before, *after, 0.0);
  EXPECT_TRUE(same.ok) << same.error;
}

// dot(a, f32(b)) with an f32 input a and a bf16 b, even into a bf16 output: the user declared a
// f32, so it is not rounded; the dot stays f32.
TEST(OperandNarrowing, NeverRoundsAnF32Input) {
  const Buffer A = input("A", {R, C}), B = input("B", {C, 3}, DType::BF16),
               Z = output("Z", {R, 3}, DType::BF16);
  Builder b;
  b.grid("g", 1);
  const Value z = b.dot(load_all(b, A), b.cast(load_all(b, B), DType::F32, "bf"), nullptr, "z");
  store_all(b, Z, b.cast(z, DType::BF16, "z_out"));
  const ModulePtr before = module_of({A, B, Z}, b.finish_kernel("k", {A, B, Z}));
  EXPECT_EQ(narrow_dot_operands(before), before);
}

// fp8 and int8 operands widen exactly to bf16 (or to the other operand's 16-bit type): the dot
// then reads 16-bit tiles, bit for bit the same result, into an f32 output too.
TEST(OperandNarrowing, WidensEightBitOperandsExactly) {
  struct Case {
    DType a, b, expected;
  };
  for (const Case& c : {Case{DType::F8E4M3, DType::F8E4M3, DType::BF16},
                        Case{DType::F8E5M2, DType::I8, DType::BF16},
                        Case{DType::I8, DType::F16, DType::F16}}) {
    const Buffer A = input("A", {R, C}, c.a), B = input("B", {C, 3}, c.b),
                 Z = output("Z", {R, 3}, DType::F32);
    Builder b;
    b.grid("g", 1);
    const Value z = b.dot(b.cast(load_all(b, A), DType::F32, "af"),
                          b.cast(load_all(b, B), DType::F32, "bf"), nullptr, "z");
    store_all(b, Z, z);
    const ModulePtr before = module_of({A, B, Z}, b.finish_kernel("k", {A, B, Z}));
    const ModulePtr after = narrow_dot_operands(before, NarrowingMode::ExactOnly);
    ASSERT_NE(after, before) << dtype_name(c.a) << " x " << dtype_name(c.b);
    EXPECT_EQ(verify(*after), std::vector<std::string>{});
    bool found = false;
    for (const OpPtr& op : after->kernels[0]->body->ops) {
      if (op->kind != OpKind::Dot) continue;
      found = true;
      EXPECT_EQ(op->operands[0]->type.dtype, c.expected);
      EXPECT_EQ(op->operands[1]->type.dtype, c.expected);
    }
    EXPECT_TRUE(found);
    const testing::CheckResult same = testing::check_equivalent(*before, *after, 0.0);
    EXPECT_TRUE(same.ok) << same.error;
  }
}

// Whether a dot feeds only 16-bit outputs is followed through loop-carried values and global
// intermediates: P @ V accumulated in a loop, stored to an f32 intermediate T, which a second
// kernel copies to the output Z.
TEST(OperandNarrowing, FollowsTheDotThroughLoopsAndIntermediatesToItsOutputs) {
  for (const DType z_dtype : {DType::BF16, DType::F32}) {
    const Buffer P = input("P", {R, 5}), V = input("V", {5, 3}, DType::BF16),
                 Z = output("Z", {R, 3}, z_dtype);
    const Buffer T = scalar::make_buffer("T", {R, 3}, DType::F32, MemoryScope::Global,
                                         BufferRole::Intermediate);
    Builder b;
    b.grid("g", 1);
    const Value vf = b.cast(load_all(b, V), DType::F32, "vf");
    const Value p = b.unary(UnaryOp::Exp, load_all(b, P), "p");
    const std::vector<Value> acc = b.for_loop(
        "i", 2, {b.full(0.0, f32({R, 3}), "acc0")},
        [&](const Value&, const std::vector<Value>& carried) {
          return std::vector<Value>{b.dot(p, vf, carried[0], "acc1")};
        },
        {"acc"}, {"acc_i"});
    store_all(b, T, acc[0]);
    const KernelPtr first = b.finish_kernel("k1", {P, V, T});
    const Value t = load_all(b, T);
    store_all(b, Z, z_dtype == DType::F32 ? t : b.cast(t, z_dtype, "z_out"));
    const KernelPtr second = b.finish_kernel("k2", {T, Z});
    ModulePtr before = module_of({P, V, Z}, first);
    auto module = std::make_shared<Module>(*before);
    module->allocations.push_back(T);
    module->kernels.push_back(second);
    before = module;
    const ModulePtr after = narrow_dot_operands(before);
    EXPECT_EQ(after != before, z_dtype == DType::BF16) << dtype_name(z_dtype);
  }
}

TEST(PassList, NamesAreUniqueAndEveryPassHasASummary) {
  std::vector<std::string> names;
  for (const VRPassInfo& pass : vr_rewrite_passes()) {
    EXPECT_FALSE(pass.summary.empty()) << pass.name;
    EXPECT_TRUE(pass.run) << pass.name;
    for (const std::string& seen : names) EXPECT_NE(seen, pass.name);
    names.push_back(pass.name);
  }
  EXPECT_EQ(names.front(), "fold-constants");
  EXPECT_EQ(names.back(), "cleanup");
}

}  // namespace
}  // namespace nautilus::rewrite
