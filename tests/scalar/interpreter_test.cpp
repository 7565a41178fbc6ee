// The scalar IR interpreter: exact results for several loop structures of one computation,
// dtype rounding, and every error it reports instead of crashing.
#include "core/scalar/interpreter.h"

#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

#include "core/support/tensor.h"
#include "tests/scalar/programs.h"

namespace nautilus::scalar {
namespace {

using namespace test_ir;

TensorMap gemm_inputs(int64_t M, int64_t N, int64_t K) {
  return {{"A", random_tensor({M, K}, DType::F32, 1)}, {"B", random_tensor({K, N}, DType::F32, 2)}};
}

// The plain triple loop, in f32 with the same operation order as the IR (k increasing).
std::vector<double> gemm_reference(const TensorMap& inputs, int64_t M, int64_t N, int64_t K) {
  const std::vector<double>& a = inputs.at("A").values;
  const std::vector<double>& b = inputs.at("B").values;
  std::vector<double> c(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float product = static_cast<float>(a[m * K + k]) * static_cast<float>(b[k * N + n]);
        acc = acc + product;
      }
      c[m * N + n] = acc;
    }
  }
  return c;
}

void expect_gemm_exact(const Program& program, int64_t M, int64_t N, int64_t K) {
  const TensorMap inputs = gemm_inputs(M, N, K);
  InterpretResult result = interpret(program, inputs);
  ASSERT_TRUE(result.ok) << result.error;
  const TensorData& c = result.outputs.at("C");
  EXPECT_EQ(c.shape, (std::vector<int64_t>{M, N}));
  EXPECT_EQ(c.dtype, DType::F32);
  EXPECT_EQ(c.values, gemm_reference(inputs, M, N, K));
}

TEST(Interpreter, GemmMatchesTripleLoop) {
  expect_gemm_exact(gemm_plain(12, 10, 16), 12, 10, 16);
  InterpretResult result = interpret(gemm_plain(12, 10, 16), gemm_inputs(12, 10, 16));
  // One block instance and one body store per (m, n, k), plus one init store per (m, n).
  EXPECT_EQ(result.steps, 12u * 10 * 16 * 2 + 12 * 10);
}

// Splitting the reduction loop changes only the binding of k; init must still run once per
// (m, n), when ko * 8 + ki == 0.
TEST(Interpreter, GemmWithSplitReductionLoopGivesTheSameResult) {
  expect_gemm_exact(gemm_split_k(12, 10, 16), 12, 10, 16);
}

// With the reduction loop outermost every (m, n) is initialized during the first k iteration
// and accumulated in later ones: the init rule is per block instance, not per loop entry.
TEST(Interpreter, GemmWithReductionOutermostGivesTheSameResult) {
  expect_gemm_exact(gemm_reduction_outermost(12, 10, 16), 12, 10, 16);
}

// 20 is not a multiple of the tile size 8: the tail instances are masked by the predicate.
TEST(Interpreter, PredicateMasksTheTailOfASplitLoop) {
  expect_gemm_exact(gemm_split_predicated(20, 6, 20), 20, 6, 20);
  InterpretResult result = interpret(gemm_split_predicated(20, 6, 20), gemm_inputs(20, 6, 20));
  // Instances are counted whether or not their predicate holds: 3 * 3 * 6 * 8 * 8.
  EXPECT_EQ(result.steps, 3u * 3 * 6 * 8 * 8 + 20 * 6 * 20 + 20 * 6);
}

TEST(Interpreter, BindingOutsideTheIterationExtentIsAnError) {
  Gemm gemm = make_gemm_buffers(20, 6, 8);
  Var mo = make_var("mo"), mi = make_var("mi"), n = make_var("n"), k = make_var("k");
  Program program = gemm_program(
      gemm, nest({{mo, 3}, {mi, 8}, {n, 6}, {k, 8}},
                 gemm_block(gemm, add(mul(v(mo), i64(8)), v(mi)), v(n), v(k))));
  InterpretResult result = interpret(program, gemm_inputs(20, 6, 8));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "block C binds m to 20, outside its extent 20");
  EXPECT_TRUE(result.outputs.empty());
}

TEST(Interpreter, SoftmaxThroughIntermediates) {
  const int64_t R = 5, C = 7;
  TensorMap inputs = {{"X", random_tensor({R, C}, DType::F32, 3, -4.0, 4.0)}};
  InterpretResult result = interpret(softmax_program(R, C), inputs);
  ASSERT_TRUE(result.ok) << result.error;
  const std::vector<double>& x = inputs.at("X").values;
  const std::vector<double>& y = result.outputs.at("Y").values;
  ASSERT_EQ(result.intermediates.size(), 3u);
  for (int64_t r = 0; r < R; ++r) {
    double row_max = -INFINITY, row_sum = 0.0;
    for (int64_t c = 0; c < C; ++c) row_max = std::max(row_max, x[r * C + c]);
    EXPECT_EQ(result.intermediates.at("Mx").values[r], row_max);
    for (int64_t c = 0; c < C; ++c) row_sum += std::exp(x[r * C + c] - row_max);
    double y_sum = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_NEAR(y[r * C + c], std::exp(x[r * C + c] - row_max) / row_sum, 1e-6);
      y_sum += y[r * C + c];
    }
    EXPECT_NEAR(y_sum, 1.0, 1e-6);
  }
}

// X bf16[4] -> T bf16[4] = X + bf16(2^-8) in bf16 arithmetic -> Y f32[4] = f32(T) * 3.
TEST(Interpreter, Bf16StorageAndArithmeticRound) {
  Buffer X = make_buffer("X", {4}, DType::BF16, MemoryScope::Global, BufferRole::Input);
  Buffer Y = make_buffer("Y", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Buffer T = make_buffer("T", {4}, DType::BF16, MemoryScope::Global, BufferRole::Intermediate);
  Var l1 = make_var("i"), i1 = make_var("i"), l2 = make_var("i"), i2 = make_var("i");
  Stmt t = nest({{l1, 4}},
                make_block("T", {spatial(i1, 4)}, {v(l1)}, nullptr, nullptr,
                           make_store(T, {v(i1)}, add(at(X, {v(i1)}),
                                                      float_imm(1.0 / 256, DType::BF16)))));
  Stmt y = nest({{l2, 4}}, make_block("Y", {spatial(i2, 4)}, {v(l2)}, nullptr, nullptr,
                                      make_store(Y, {v(i2)}, mul(cast(DType::F32, at(T, {v(i2)})),
                                                                 f32(3.0)))));
  Program program{"bf16", {X, Y}, {T}, make_seq({t, y})};

  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (even: 1); 1 + 3 * 2^-8 ties to 1 + 2^-6.
  const std::vector<double> x = {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 0.1, -3.3};
  InterpretResult result = interpret(program, {{"X", TensorData{{4}, DType::F32, x}}});
  ASSERT_TRUE(result.ok) << result.error;
  std::vector<double> expected_t, expected_y;
  for (double value : x) {
    const double xr = round_to(DType::BF16, value);
    expected_t.push_back(round_to(DType::BF16, xr + 1.0 / 256));
    expected_y.push_back(round_to(DType::F32, expected_t.back() * 3.0));
  }
  EXPECT_EQ(round_to(DType::BF16, x[0]), 1.0);
  EXPECT_EQ(round_to(DType::BF16, x[1]), 1.015625);
  EXPECT_EQ(expected_t[0], 1.0);  // 1 + 2^-8 is not representable in bf16
  EXPECT_EQ(result.intermediates.at("T").values, expected_t);
  EXPECT_EQ(result.intermediates.at("T").dtype, DType::BF16);
  EXPECT_EQ(result.outputs.at("Y").values, expected_y);
}

// Y[a, b] = f32(x // d) and Z[a, b] = f32(x % d) for x in -20..20 and d in -7..7 without 0: the
// quotient rounds toward -inf, the remainder has the sign of the divisor.
TEST(Interpreter, FloorDivisionAndModuloOverAWholeDomain) {
  Buffer Y = make_buffer("Y", {41, 14}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Buffer Z = make_buffer("Z", {41, 14}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var la = make_var("a"), lb = make_var("b"), a = make_var("a"), b = make_var("b");
  Expr x = sub(v(a), i64(20));
  Expr d = select(lt(v(b), i64(7)), sub(v(b), i64(7)), sub(v(b), i64(6)));
  Stmt body = make_seq({make_store(Y, {v(a), v(b)}, cast(DType::F32, floordiv(x, d))),
                        make_store(Z, {v(a), v(b)}, cast(DType::F32, mod(x, d)))});
  Program program{"divmod", {Y, Z}, {},
                  nest({{la, 41}, {lb, 14}}, make_block("YZ", {spatial(a, 41), spatial(b, 14)},
                                                        {v(la), v(lb)}, nullptr, nullptr, body))};
  InterpretResult result = interpret(program, {});
  ASSERT_TRUE(result.ok) << result.error;
  for (int64_t ia = 0; ia < 41; ++ia) {
    for (int64_t ib = 0; ib < 14; ++ib) {
      const int64_t xv = ia - 20, dv = ib < 7 ? ib - 7 : ib - 6;
      const double q = std::floor(static_cast<double>(xv) / static_cast<double>(dv));
      EXPECT_EQ(result.outputs.at("Y").values[ia * 14 + ib], q) << xv << " // " << dv;
      EXPECT_EQ(result.outputs.at("Z").values[ia * 14 + ib], static_cast<double>(xv) - q * dv)
          << xv << " % " << dv;
    }
  }
}

// --- errors ---------------------------------------------------------------------------------

TEST(Interpreter, OutOfBoundsReadNamesBufferIndicesAndShape) {
  Gemm gemm = make_gemm_buffers(4, 4, 4);
  Var m = make_var("m"), n = make_var("n"), k = make_var("k");
  Var bm = make_var("m"), bn = make_var("n"), bk = make_var("k");
  // A[m, k + 1] runs off the end of A's last dimension when k == 3.
  Stmt block = make_block(
      "C", {spatial(bm, 4), spatial(bn, 4), reduce(bk, 4)}, {v(m), v(n), v(k)}, nullptr,
      make_store(gemm.C, {v(bm), v(bn)}, f32(0.0)),
      make_store(gemm.C, {v(bm), v(bn)},
                 add(at(gemm.C, {v(bm), v(bn)}),
                     mul(at(gemm.A, {v(bm), add(v(bk), i64(1))}), at(gemm.B, {v(bk), v(bn)})))),
      Provenance{3, {}});
  Program program = gemm_program(gemm, nest({{m, 4}, {n, 4}, {k, 4}}, block));
  InterpretResult result = interpret(program, gemm_inputs(4, 4, 4));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "block C reads A[0, 4] outside its shape [4, 4] (spec statement 3)");
}

TEST(Interpreter, OutOfBoundsWriteIsAnError) {
  Buffer Y = make_buffer("Y", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var l = make_var("i"), i = make_var("i");
  Program program{"shifted", {Y}, {},
                  nest({{l, 4}}, make_block("Y", {spatial(i, 4)}, {v(l)}, nullptr, nullptr,
                                            make_store(Y, {sub(v(i), i64(1))}, f32(1.0))))};
  InterpretResult result = interpret(program, {});
  EXPECT_EQ(result.error, "block Y writes Y[-1] outside its shape [4]");
}

// S f32[1, 4] gets only S[0, 0..2]; block P then reads S[0, 3].
TEST(Interpreter, ReadBeforeWriteIsAnError) {
  Buffer S = make_buffer("S", {1, 4}, DType::F32, MemoryScope::Global, BufferRole::Intermediate);
  Buffer P = make_buffer("P", {1, 4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var l1 = make_var("n"), n1 = make_var("n"), l2 = make_var("n"), n2 = make_var("n");
  Stmt s = nest({{l1, 3}}, make_block("S", {spatial(n1, 4)}, {v(l1)}, nullptr, nullptr,
                                      make_store(S, {i64(0), v(n1)}, f32(2.0))));
  Stmt p = nest({{l2, 4}}, make_block("P", {spatial(n2, 4)}, {v(l2)}, nullptr, nullptr,
                                      make_store(P, {i64(0), v(n2)}, at(S, {i64(0), v(n2)}))));
  Program program{"partial", {P}, {S}, make_seq({s, p})};
  InterpretResult result = interpret(program, {});
  EXPECT_EQ(result.error, "block P reads S[0, 3] before it was written");
}

TEST(Interpreter, OutputNeverWrittenIsAnError) {
  Buffer Y = make_buffer("Y", {2, 3}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var l = make_var("j"), j = make_var("j");
  Program program{"half", {Y}, {},
                  nest({{l, 3}}, make_block("Y", {spatial(j, 3)}, {v(l)}, nullptr, nullptr,
                                            make_store(Y, {i64(0), v(j)}, f32(1.0))))};
  EXPECT_EQ(interpret(program, {}).error, "output Y[1, 0] was never written");
}

TEST(Interpreter, InputsAreChecked) {
  const Program program = gemm_plain(4, 4, 4);
  TensorMap inputs = gemm_inputs(4, 4, 4);

  TensorMap missing = inputs;
  missing.erase("B");
  EXPECT_EQ(interpret(program, missing).error, "missing input B");

  TensorMap unknown = inputs;
  unknown["Q"] = random_tensor({4}, DType::F32, 5);
  EXPECT_EQ(interpret(program, unknown).error,
            "Q is not an input of program gemm (its inputs are A, B)");

  TensorMap output_given = inputs;
  output_given["C"] = random_tensor({4, 4}, DType::F32, 5);
  EXPECT_EQ(interpret(program, output_given).error,
            "C is not an input of program gemm (its inputs are A, B)");

  TensorMap wrong_shape = inputs;
  wrong_shape["A"] = random_tensor({4, 5}, DType::F32, 5);
  EXPECT_EQ(interpret(program, wrong_shape).error,
            "input A has shape [4, 5]; program gemm expects [4, 4]");

  TensorMap wrong_count = inputs;
  wrong_count["A"].values.pop_back();
  EXPECT_EQ(interpret(program, wrong_count).error,
            "input A has 15 values; its shape [4, 4] has 16 elements");
}

TEST(Interpreter, StepBudget) {
  const Program program = gemm_plain(4, 4, 4);  // 64 instances + 64 + 16 stores = 144 steps
  InterpretResult over = interpret(program, gemm_inputs(4, 4, 4), {.max_steps = 143});
  EXPECT_FALSE(over.ok);
  EXPECT_EQ(over.error, "block C exceeds the step budget of 143 block instances and stores");
  InterpretResult exact = interpret(program, gemm_inputs(4, 4, 4), {.max_steps = 144});
  EXPECT_TRUE(exact.ok) << exact.error;
  EXPECT_EQ(exact.steps, 144u);
  EXPECT_TRUE(interpret(program, gemm_inputs(4, 4, 4), {.max_steps = 0}).ok);
}

TEST(Interpreter, IndexDivisionByZeroIsAnError) {
  Buffer Y = make_buffer("Y", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var l = make_var("i"), i = make_var("i");
  Program program{"div0", {Y}, {},
                  nest({{l, 4}}, make_block("Y", {spatial(i, 4)}, {floordiv(v(l), sub(v(l), v(l)))},
                                            nullptr, nullptr, make_store(Y, {v(i)}, f32(1.0)),
                                            Provenance{1, {}}))};
  EXPECT_EQ(interpret(program, {}).error,
            "block Y divides by zero in index expression i // (i - i) (spec statement 1)");
}

TEST(Interpreter, IndexOverflowIsAnError) {
  Buffer Y = make_buffer("Y", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var l = make_var("i"), i = make_var("i");
  Expr huge = mul(i64(INT64_MAX / 2), add(v(l), i64(2)));
  Program program{"overflow", {Y}, {},
                  nest({{l, 4}}, make_block("Y", {spatial(i, 4)}, {sub(huge, huge)}, nullptr,
                                            nullptr, make_store(Y, {v(i)}, f32(1.0))))};
  EXPECT_EQ(interpret(program, {}).error,
            "block Y overflows int64 in index expression 4611686018427387903 * (i + 2)");
}

TEST(Interpreter, UnrepresentableIndexConversionIsAnError) {
  Buffer Y = make_buffer("Y", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var l = make_var("i"), i = make_var("i");
  Expr index = cast(DType::Index, float_imm(1e30, DType::F32));
  Program program{"cast", {Y}, {},
                  nest({{l, 4}}, make_block("Y", {spatial(i, 4)}, {v(l)}, nullptr, nullptr,
                                            make_store(Y, {index}, f32(1.0))))};
  EXPECT_EQ(interpret(program, {}).error,
            "block Y cannot convert 1.0000000150474662e+30 to an index in index(1e+30f)");
}

TEST(Interpreter, BuffersPastTheMemoryLimitAreRefused) {
  Buffer Y = make_buffer("Y", {1 << 20, 1 << 10}, DType::F32, MemoryScope::Global,
                         BufferRole::Output);
  Var l = make_var("i"), i = make_var("i");
  Program program{"huge", {Y}, {},
                  nest({{l, 4}}, make_block("Y", {spatial(i, 4)}, {v(l)}, nullptr, nullptr,
                                            make_store(Y, {v(i), i64(0)}, f32(1.0))))};
  EXPECT_EQ(interpret(program, {}).error,
            "buffer Y of shape [1048576, 1024] brings program huge past the interpreter's limit "
            "of 268435456 elements; bind smaller sizes");
}

TEST(Interpreter, MalformedProgramIsReportedNotRun) {
  Program program = gemm_plain(4, 4, 4);
  program.params.pop_back();  // C is no longer declared
  InterpretResult result = interpret(program, gemm_inputs(4, 4, 4));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error.rfind("program does not verify: ", 0), 0u) << result.error;
  EXPECT_EQ(result.steps, 0u);
}

// Not a benchmark; a guard against accidental slowness (map lookups per access and the like).
TEST(Interpreter, RunsMillionsOfBlockInstancesPerSecond) {
#ifndef NDEBUG
  GTEST_SKIP() << "timing is meaningful only in optimized builds";
#endif
  const int64_t M = 64, N = 64, K = 128;
  const Program program = gemm_plain(M, N, K);
  const TensorMap inputs = gemm_inputs(M, N, K);
  const auto start = std::chrono::steady_clock::now();
  InterpretResult result = interpret(program, inputs);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok) << result.error;
  const double instances_per_second = static_cast<double>(M * N * K) / seconds;
  RecordProperty("block_instances_per_second", std::to_string(instances_per_second));
  EXPECT_GT(instances_per_second, 1e6);
}

}  // namespace
}  // namespace nautilus::scalar
