// Unit tests of the `.nt` parser: statement forms, precedence, the reduction rules, index
// expressions and conditions, error messages and recovery, and the nesting limits.
#include "core/spec/parser.h"

#include <gtest/gtest.h>

#include "core/spec/printer.h"
#include "tests/spec/spec_test_support.h"

namespace nautilus::spec {
namespace {

using testing::sexpr;

struct Parsed {
  SourceFilePtr file;
  std::unique_ptr<DiagnosticEngine> diagnostics;
  Program program;
};

Parsed parse(const std::string& text) {
  Parsed parsed;
  parsed.file = std::make_shared<SourceFile>("test.nt", text);
  parsed.diagnostics = std::make_unique<DiagnosticEngine>(parsed.file);
  parsed.program = parse_program(parsed.file, *parsed.diagnostics);
  return parsed;
}

std::vector<std::string> errors(const Parsed& parsed) {
  std::vector<std::string> out;
  for (const Diagnostic& d : parsed.diagnostics->diagnostics()) {
    out.push_back(parsed.diagnostics->headline(d).substr(std::string("test.nt:").size()));
  }
  return out;
}

// The value of a one-statement definition `Y[i] = <value>`, as an s-expression.
std::string value_of(const std::string& value) {
  Parsed parsed = parse("Y[i] = " + value + "\n");
  EXPECT_FALSE(parsed.diagnostics->has_errors()) << value << ": " << errors(parsed)[0];
  if (parsed.program.statements.size() != 1) return "<no statement>";
  return sexpr(*parsed.program.statements[0].value);
}

std::string first_error(const std::string& text) {
  Parsed parsed = parse(text);
  std::vector<std::string> all = errors(parsed);
  return all.empty() ? "<no error>" : all[0];
}

TEST(Parser, Statements) {
  Parsed parsed = parse(
      "let M = 64, N = 32\n"
      "\n"
      "input X[M, 16] : bf16   # a comment\n"
      "output Y[m, n] : f16 = X[m, n]\n"
      "Z[m] = 1\n");
  ASSERT_FALSE(parsed.diagnostics->has_errors());
  const std::vector<Statement>& s = parsed.program.statements;
  ASSERT_EQ(s.size(), 4u);

  EXPECT_EQ(s[0].kind, StatementKind::Let);
  ASSERT_EQ(s[0].sizes.size(), 2u);
  EXPECT_EQ(s[0].sizes[1].name, "N");
  EXPECT_EQ(s[0].sizes[1].value, 32);

  EXPECT_EQ(s[1].kind, StatementKind::Input);
  EXPECT_EQ(s[1].name, "X");
  ASSERT_EQ(s[1].dims.size(), 2u);
  EXPECT_EQ(s[1].dims[0].symbol, "M");
  EXPECT_EQ(s[1].dims[1].literal, 16);
  EXPECT_EQ(s[1].dtype, DType::BF16);
  EXPECT_EQ(parsed.file->slice(s[1].range), "input X[M, 16] : bf16");

  EXPECT_EQ(s[2].kind, StatementKind::Define);
  EXPECT_TRUE(s[2].is_output);
  EXPECT_TRUE(s[2].has_dtype);
  EXPECT_EQ(s[2].dtype, DType::F16);
  ASSERT_EQ(s[2].lhs.size(), 2u);
  EXPECT_EQ(s[2].lhs[1].name, "n");
  EXPECT_EQ(parsed.file->slice(s[2].name_range), "Y");

  EXPECT_FALSE(s[3].is_output);
  EXPECT_FALSE(s[3].has_dtype);
}

TEST(Parser, Precedence) {
  EXPECT_EQ(value_of("a + b * c - d / e"), "(- (+ a (* b c)) (/ d e))");
  EXPECT_EQ(value_of("a - b - c"), "(- (- a b) c)");
  EXPECT_EQ(value_of("-a * b"), "(* (neg a) b)");
  EXPECT_EQ(value_of("-(a + b)"), "(neg (+ a b))");
  EXPECT_EQ(value_of("--a"), "(neg (neg a))");
  EXPECT_EQ(value_of("2.5 * inf - 1e-05"), "(- (* 2.5 inf) 1e-05)");
}

TEST(Parser, ReductionExtendsAsFarRightAsPossible) {
  EXPECT_EQ(value_of("sum(n) P[n] * V[n] / L"), "(sum[n] (/ (* P[n] V[n]) L))");
  EXPECT_EQ(value_of("a + sum(n) x + y"), "(+ a (sum[n] (+ x y)))");
  EXPECT_EQ(value_of("(sum(n) x) + y"), "(+ (sum[n] x) y)");
  EXPECT_EQ(value_of("a * max(n, m) x"), "(* a (max[n m] x))");
  EXPECT_EQ(value_of("sum(n) max(d) X[n, d]"), "(sum[n] (max[d] X[n d]))");
  EXPECT_EQ(value_of("-sum(n) x"), "(neg (sum[n] x))");
}

TEST(Parser, ReductionOrElementwiseCall) {
  // Bare names in parentheses followed by an operand: a reduction.
  EXPECT_EQ(value_of("max(a, b) c"), "(max[a b] c)");
  EXPECT_EQ(value_of("min(n) (x)"), "(min[n] x)");
  EXPECT_EQ(value_of("max(n) select(n < 2, 1, 0)"), "(max[n] (select (< n 2) 1 0))");
  // Otherwise an elementwise call; a '-' after the parentheses is a subtraction.
  EXPECT_EQ(value_of("max(a, b) - c"), "(- (max a b) c)");
  EXPECT_EQ(value_of("max(a, b)"), "(max a b)");
  EXPECT_EQ(value_of("min(X[i], 0)"), "(min X[i] 0)");
  EXPECT_EQ(value_of("max(n)"), "(max n)");  // sema reports the arity, with a hint
}

TEST(Parser, SumNeedsABody) {
  EXPECT_EQ(first_error("Y[i] = sum(n)\n"), "1:8: error: sum needs a body: write sum(n) expr");
  EXPECT_EQ(first_error("Y[i] = sum(n, m) + 1\n"),
            "1:8: error: sum needs a body: write sum(n, m) expr");
  EXPECT_EQ(first_error("Y[i] = sum(n) -x\n"),
            "1:8: error: sum needs a body that does not start with '-': write sum(n) (-expr)");
  EXPECT_EQ(first_error("Y[i] = sum(X[i])\n"),
            "1:8: error: sum needs a body: write sum(n) expr (sum is a reduction over the index "
            "variables in parentheses, not a function)");
  EXPECT_EQ(first_error("Y[i] = sum x\n"), "1:12: error: expected '(' after 'sum', found 'x'");
}

TEST(Parser, CallsAccessesAndSelect) {
  EXPECT_EQ(value_of("exp(S[b, h] - Mx[b])"), "(exp (- S[b h] Mx[b]))");
  EXPECT_EQ(value_of("sqrt(D)"), "(sqrt D)");
  EXPECT_EQ(value_of("select(n <= m, x, -inf)"), "(select (<= n m) x (neg inf))");
  EXPECT_EQ(value_of("m - n"), "(- m n)");
}

TEST(Parser, IndexExpressions) {
  EXPECT_EQ(value_of("K[b, h / 4, n + 1, d]"), "K[b (/ h 4) (+ n 1) d]");
  EXPECT_EQ(value_of("X[(i + 1) % M, -i, 2 * i - j]"),
            "X[(% (+ i 1) M) (neg i) (- (* 2 i) j)]");
}

TEST(Parser, Conditions) {
  EXPECT_EQ(value_of("select(a < b or c == d and e != f, 1, 0)"),
            "(select (or (< a b) (and (== c d) (!= e f))) 1 0)");
  EXPECT_EQ(value_of("select(i >= 1 and i + 1 < M, 1, 0)"),
            "(select (and (>= i 1) (< (+ i 1) M)) 1 0)");
}

TEST(Parser, ExpressionRanges) {
  Parsed parsed = parse("Y[i] = exp(X[i]) + (a * b)\n");
  ASSERT_EQ(parsed.program.statements.size(), 1u);
  const Expr& value = *parsed.program.statements[0].value;
  EXPECT_EQ(parsed.file->slice(value.range), "exp(X[i]) + (a * b)");
  EXPECT_EQ(parsed.file->slice(value.operands[0]->range), "exp(X[i])");
  EXPECT_EQ(parsed.file->slice(value.operands[0]->name_range), "exp");
  EXPECT_EQ(parsed.file->slice(value.operands[1]->range), "(a * b)");
}

TEST(Parser, SyntaxErrors) {
  EXPECT_EQ(first_error("Y[i] = X[i\n"),
            "1:11: error: expected ']' to close the index list of 'X', found end of line");
  EXPECT_EQ(first_error("Y[i] = exp(x\n"),
            "1:13: error: expected ')' to close the arguments of 'exp', found end of line");
  EXPECT_EQ(first_error("Y[i] X[i]\n"),
            "1:6: error: expected '=' after the left-hand side of 'Y', found 'X'");
  EXPECT_EQ(first_error("Y[i] = X[i] *\n"),
            "1:14: error: expected an operand after '*', found end of line");
  EXPECT_EQ(first_error("Y[i] = X[i] Z[i]\n"),
            "1:13: error: expected an operator or end of line, found 'Z'");
  EXPECT_EQ(first_error("let M = 4 N = 5\n"),
            "1:11: error: expected ',' or end of line after the value of 'M', found 'N'");
  EXPECT_EQ(first_error("let M = 4.5\n"),
            "1:9: error: expected an integer value for 'M', found number '4.5'");
  EXPECT_EQ(first_error("input X[M]\n"),
            "1:11: error: expected ':' and a dtype after the shape of input 'X' (inputs must "
            "declare f32, f16, bf16, fp8e4m3, fp8e5m2, int8 or int4), found end of line");
  EXPECT_EQ(first_error("input X[M] : f64\n"),
            "1:14: error: unknown dtype 'f64'; expected one of f32, f16, bf16, fp8e4m3, fp8e5m2, "
            "int8, int4 (tensors store at most 32-bit floats; arithmetic and sums are done in f32)");
  EXPECT_EQ(first_error("input X[M] : fp8\n"),
            "1:14: error: unknown dtype 'fp8'; expected one of f32, f16, bf16, fp8e4m3, fp8e5m2, "
            "int8, int4 (write fp8e4m3 or fp8e5m2)");
  EXPECT_EQ(first_error("input X[M] : float8_e4m3fn\n"),
            "1:14: error: unknown dtype 'float8_e4m3fn'; expected one of f32, f16, bf16, "
            "fp8e4m3, fp8e5m2, int8, int4 (write fp8e4m3)");
  EXPECT_EQ(first_error("Y[i] : i32 = X[i]\n"),
            "1:8: error: unknown dtype 'i32'; expected one of f32, f16, bf16, fp8e4m3, fp8e5m2, "
            "int8, int4 (tensors store at most 32-bit floats; arithmetic and sums are done in f32)");
  EXPECT_EQ(first_error("Y[i] : = X[i]\n"),
            "1:8: error: expected a dtype (f32, f16, bf16, fp8e4m3, fp8e5m2, int8 or int4) after ':', "
            "found '='");
  EXPECT_EQ(first_error("Y = 3\n"),
            "1:3: error: expected '[' after 'Y' to list its index variables, found '='");
  EXPECT_EQ(first_error("Y[0] = 3\n"),
            "1:3: error: expected an index variable name in the left-hand side of 'Y', found "
            "number '0'");
  EXPECT_EQ(first_error("= 3\n"),
            "1:1: error: expected a statement (let, input, output or NAME[...] = ...), found '='");
  EXPECT_EQ(first_error("Y[i] = exp + 1\n"),
            "1:8: error: 'exp' is a function; expected '(' after it");
  EXPECT_EQ(first_error("let exp = 3\n"),
            "1:5: error: 'exp' is a function name and cannot name a size");
  EXPECT_EQ(first_error("Y[i] = X[i] @ 2\n"), "1:13: error: unexpected character '@'");
  EXPECT_EQ(first_error("Y[i] = select(i = 0, 1, 2)\n"),
            "1:17: error: expected a comparison operator; write '==' to test equality");
  EXPECT_EQ(first_error("Y[i] = select((i < 1), 1, 2)\n"),
            "1:18: error: a condition cannot be put in parentheses; write the comparisons "
            "joined by 'and' / 'or' ('and' binds tighter)");
  EXPECT_EQ(first_error("Y[i] = X[exp(i)]\n"),
            "1:10: error: functions are not allowed in index expressions; expected an index of "
            "'X' made of index variables, sizes and integers");
  EXPECT_EQ(first_error("Y[i] = 1e999\n"), "1:8: error: number '1e999' is too large for a float");
}

TEST(Parser, RecoversAtTheNextLineAndReportsEveryLine) {
  Parsed parsed = parse(
      "input X[4] : f32\n"
      "A[i] = X[i\n"
      "B[i] = X[i] + 1\n"
      "C[i] = (X[i]\n"
      "D[i] = X[i] @ 1 $ 2\n");
  EXPECT_EQ(errors(parsed),
            (std::vector<std::string>{
                "2:11: error: expected ']' to close the index list of 'X', found end of line",
                "4:13: error: expected ')' to close '(', found end of line",
                "5:13: error: unexpected character '@'",
                "5:17: error: unexpected character '$'",
            }));
  // The statements without errors are kept.
  ASSERT_EQ(parsed.program.statements.size(), 2u);
  EXPECT_EQ(parsed.program.statements[1].name, "B");
}

TEST(Parser, ErrorsPointToTheOpeningParenthesis) {
  Parsed parsed = parse("Y[i] = (a + b\n");
  ASSERT_EQ(parsed.diagnostics->diagnostics().size(), 1u);
  const Diagnostic& d = parsed.diagnostics->diagnostics()[0];
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(parsed.file->slice(d.notes[0].range), "(");
}

// Nesting: parentheses, accesses, calls, reductions and unary minus each add one level.
TEST(Parser, NestingLimitIsExact) {
  auto nested = [](int parens) {
    return "Y[i] = " + std::string(parens, '(') + "X[i]" + std::string(parens, ')') + "\n";
  };
  EXPECT_EQ(first_error(nested(kMaxNesting - 1)), "<no error>");  // + the access: 200 levels
  EXPECT_EQ(first_error(nested(kMaxNesting)),
            "1:208: error: expression nested too deeply (more than 200 levels)");
  EXPECT_EQ(first_error("Y[i] = " + std::string(kMaxNesting, '-') + "x\n"), "<no error>");
  EXPECT_EQ(first_error("Y[i] = " + std::string(kMaxNesting + 1, '-') + "x\n"),
            "1:208: error: expression nested too deeply (more than 200 levels)");
}

TEST(Parser, ExpressionDepthLimitIsExact) {
  // `x + x + ... + x` with k operators has depth k + 1.
  auto chain = [](int operators) {
    std::string text = "Y[i] = x";
    for (int k = 0; k < operators; ++k) text += " + x";
    return text + "\n";
  };
  EXPECT_EQ(first_error(chain(kMaxExpressionDepth - 1)), "<no error>");
  EXPECT_NE(first_error(chain(kMaxExpressionDepth)).find("error: expression too deep (more than "
                                                         "1000 levels of operators)"),
            std::string::npos);
}

}  // namespace
}  // namespace nautilus::spec
