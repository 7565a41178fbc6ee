// Text, DOT and JSON forms of scalar IR. Expressions are checked inline; whole programs against
// golden files under tests/golden/scalar (NAUTILUS_UPDATE_GOLDEN=1 rewrites them).
#include "core/scalar/printer.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/common/golden.h"
#include "tests/scalar/programs.h"

namespace nautilus::scalar {
namespace {

using namespace test_ir;
using nautilus::testing::expect_golden;

struct Vars {
  Var a = make_var("a"), b = make_var("b"), c = make_var("c");
};

TEST(Printer, FloatImmediates) {
  EXPECT_EQ(print_expr(f32(0.0)), "0.0f");
  EXPECT_EQ(print_expr(f32(-0.0)), "-0.0f");
  EXPECT_EQ(print_expr(f32(1.0)), "1.0f");
  EXPECT_EQ(print_expr(f32(0.1)), "0.1f");
  EXPECT_EQ(print_expr(f32(1.0 / std::sqrt(128.0))), "0.088388346f");
  EXPECT_EQ(print_expr(f32(1e20)), "1e+20f");
  EXPECT_EQ(print_expr(f32(16777216.0)), "16777216.0f");
  EXPECT_EQ(print_expr(f32(INFINITY)), "inf");
  EXPECT_EQ(print_expr(f32(-INFINITY)), "-inf");
  EXPECT_EQ(print_expr(f32(NAN)), "nan");
  EXPECT_EQ(print_expr(f32(1e300)), "inf");  // overflows f32
  EXPECT_EQ(print_expr(float_imm(0.5, DType::BF16)), "bf16(0.5)");
  EXPECT_EQ(print_expr(float_imm(-INFINITY, DType::F16)), "f16(-inf)");
  // The value printed is the immediate's value in its dtype: 0.1 in bf16 is 0.10009765625.
  EXPECT_EQ(print_expr(float_imm(0.1, DType::BF16)), "bf16(0.100097656)");
  EXPECT_EQ(print_expr(float_imm(0.1, DType::F64)), "f64(0.1)");
}

TEST(Printer, IndexArithmetic) {
  Vars x;
  EXPECT_EQ(print_expr(add(mul(v(x.a), i64(8)), v(x.b))), "a * 8 + b");
  EXPECT_EQ(print_expr(mul(add(v(x.a), i64(1)), i64(8))), "(a + 1) * 8");
  EXPECT_EQ(print_expr(floordiv(v(x.a), i64(4))), "a // 4");
  EXPECT_EQ(print_expr(mod(add(v(x.a), v(x.b)), i64(4))), "(a + b) % 4");
  EXPECT_EQ(print_expr(sub(v(x.a), sub(v(x.b), v(x.c)))), "a - (b - c)");
  EXPECT_EQ(print_expr(sub(sub(v(x.a), v(x.b)), v(x.c))), "a - b - c");
  EXPECT_EQ(print_expr(sub(v(x.a), i64(-1))), "a - -1");
  EXPECT_EQ(print_expr(unary(UnaryOp::Neg, i64(-1))), "-(-1)");
}

TEST(Printer, FloatExpressionsUseMinimalParentheses) {
  Buffer A = make_buffer("A", {4, 4}, DType::BF16, MemoryScope::Global, BufferRole::Input);
  Vars x;
  Expr a = cast(DType::F32, at(A, {v(x.a), v(x.b)}));
  EXPECT_EQ(print_expr(a), "f32(A[a, b])");
  EXPECT_EQ(print_expr(add(a, mul(a, f32(2.0)))), "f32(A[a, b]) + f32(A[a, b]) * 2.0f");
  EXPECT_EQ(print_expr(mul(add(a, f32(1.0)), f32(2.0))), "(f32(A[a, b]) + 1.0f) * 2.0f");
  EXPECT_EQ(print_expr(add(a, add(a, a))), "f32(A[a, b]) + (f32(A[a, b]) + f32(A[a, b]))");
  EXPECT_EQ(print_expr(div(a, mul(a, a))), "f32(A[a, b]) / (f32(A[a, b]) * f32(A[a, b]))");
  EXPECT_EQ(print_expr(unary(UnaryOp::Neg, mul(a, a))), "-(f32(A[a, b]) * f32(A[a, b]))");
  EXPECT_EQ(print_expr(mul(unary(UnaryOp::Neg, a), f32(-2.0))), "-f32(A[a, b]) * -2.0f");
  EXPECT_EQ(print_expr(unary(UnaryOp::Exp, sub(a, f32(1.0)))), "exp(f32(A[a, b]) - 1.0f)");
  EXPECT_EQ(print_expr(unary(UnaryOp::Rsqrt, f32(2.0))), "rsqrt(2.0f)");
  EXPECT_EQ(print_expr(max_of(a, f32(-INFINITY))), "max(f32(A[a, b]), -inf)");
  EXPECT_EQ(print_expr(binary(BinaryOp::Min, v(x.a), v(x.b))), "min(a, b)");
  EXPECT_EQ(print_expr(cast(DType::BF16, add(a, a))), "bf16(f32(A[a, b]) + f32(A[a, b]))");
}

TEST(Printer, ConditionsAndSelect) {
  Vars x;
  Expr in_bounds = logical(LogicalOp::And, lt(v(x.a), i64(20)),
                           compare(CompareOp::GE, add(v(x.b), i64(1)), i64(0)));
  EXPECT_EQ(print_expr(in_bounds), "a < 20 and b + 1 >= 0");
  EXPECT_EQ(print_expr(logical(LogicalOp::Or, in_bounds, compare(CompareOp::NE, v(x.c), v(x.a)))),
            "a < 20 and b + 1 >= 0 or c != a");
  EXPECT_EQ(print_expr(logical(LogicalOp::And, compare(CompareOp::EQ, v(x.a), v(x.b)),
                               logical(LogicalOp::Or, lt(v(x.a), i64(1)), lt(v(x.b), i64(1))))),
            "a == b and (a < 1 or b < 1)");
  EXPECT_EQ(print_expr(select(compare(CompareOp::LE, v(x.b), v(x.a)), f32(1.0), f32(-INFINITY))),
            "select(b <= a, 1.0f, -inf)");
}

TEST(Printer, Statements) {
  EXPECT_EQ(print_stmt(gemm_plain(64, 64, 32).body),
            "for m in 0..64:\n"
            "  for n in 0..64:\n"
            "    for k in 0..32:\n"
            "      block C(m = m, n = n; reduce k = k):\n"
            "        init:\n"
            "          C[m, n] = 0.0f\n"
            "        C[m, n] = C[m, n] + A[m, k] * B[k, n]\n");
  Var mo = make_var("mo"), mi = make_var("mi");
  const Expr m = add(mul(v(mo), i64(8)), v(mi));
  const Stmt block = gemm_block(make_gemm_buffers(20, 8, 8), m, v(make_var("n")),
                                v(make_var("k")), lt(m, i64(20)));
  EXPECT_EQ(print_stmt(block, 1),
            "  block C(m = mo * 8 + mi, n = n; reduce k = k) if mo * 8 + mi < 20:\n"
            "    init:\n"
            "      C[m, n] = 0.0f\n"
            "    C[m, n] = C[m, n] + A[m, k] * B[k, n]\n");
}

TEST(Printer, ProgramTextWithSourceComments) {
  SourceFile source("softmax.nt", kSoftmaxSpec);
  expect_golden("scalar/printer_softmax.txt",
                print_program(softmax_program(4, 8, &source), &source));
}

TEST(Printer, ProgramTextWithoutSource) {
  expect_golden("scalar/printer_gemm_split_predicated.txt",
                print_program(gemm_split_predicated(20, 16, 20)));
}

TEST(Printer, Dot) {
  SourceFile source("softmax.nt", kSoftmaxSpec);
  expect_golden("scalar/printer_softmax.dot", program_to_dot(softmax_program(4, 8, &source)));
  expect_golden("scalar/printer_gemm_split_predicated.dot",
                program_to_dot(gemm_split_predicated(20, 16, 20)));
}

// Names reach DOT inside quoted ids and record labels; both escape what their syntax reserves.
TEST(Printer, DotEscapesReservedCharacters) {
  Buffer Y = make_buffer("Y\"1", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var l = make_var("i"), i = make_var("i");
  Stmt block = make_block("a|b{c}<d>\\", {spatial(i, 4)}, {v(l)}, lt(v(l), i64(3)), nullptr,
                          make_store(Y, {v(i)}, f32(1.0)));
  const std::string dot = program_to_dot(Program{"q\"p", {Y}, {}, make_for(l, 4, block)});
  EXPECT_NE(dot.find(R"(digraph "scalar:q\"p" {)"), std::string::npos) << dot;
  EXPECT_NE(dot.find(R"("buffer:Y\"1" [shape=box)"), std::string::npos) << dot;
  EXPECT_NE(dot.find(R"(label="{block a\|b\{c\}\<d\>\\|i = i (extent 4)\l|if i \< 3\l|)"
                     R"(Y\"1[i] = 1.0f\l}")"),
            std::string::npos)
      << dot;
}

TEST(Printer, Json) {
  SourceFile source("softmax.nt", kSoftmaxSpec);
  expect_golden("scalar/printer_softmax.json",
                program_to_json(softmax_program(4, 8, &source)).dump(2) + "\n");
}

TEST(Printer, JsonEncodesNonFiniteImmediatesAsStrings) {
  nlohmann::ordered_json json =
      program_to_json(Program{"p", {}, {}, make_seq({})});
  EXPECT_EQ(json.dump(), R"({"name":"p","buffers":[],"body":{"kind":"seq","stmts":[],)"
                         R"("provenance":{"statement":-1}}})");
  const SourceFile source("softmax.nt", kSoftmaxSpec);
  const nlohmann::ordered_json softmax = program_to_json(softmax_program(4, 8, &source));
  const auto& init = softmax["body"]["stmts"][0]["body"]["body"]["init"];
  EXPECT_EQ(init["value"]["value"], "-inf");
}

}  // namespace
}  // namespace nautilus::scalar
