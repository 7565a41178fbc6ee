// Unit tests of spec checking: variables and extents, name resolution, dtypes, sizes and
// overrides, outputs, bounds, and parse_size_override.
#include "core/spec/sema.h"

#include <gtest/gtest.h>

#include "core/spec/parser.h"
#include "core/spec/printer.h"
#include "tests/spec/spec_test_support.h"

namespace nautilus::spec {
namespace {

using testing::load_source_file;
using testing::load_text;
using testing::Loaded;

const Statement& definition(const Spec& spec, const std::string& name) {
  return spec.statement(spec.tensors[spec.find_tensor(name)].statement);
}

TEST(Sema, AttentionVariablesAndShapes) {
  Loaded loaded = load_source_file("assets/specs/attention.nt");
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  const Spec& spec = *loaded.spec;
  EXPECT_EQ(spec.name, "attention");
  ASSERT_EQ(spec.tensors.size(), 8u);
  EXPECT_EQ(spec.tensors[0].name, "Q");  // declaration order
  EXPECT_EQ(spec.tensors[3].name, "S");
  EXPECT_EQ(spec.inputs, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(spec.outputs, (std::vector<int>{7}));
  EXPECT_EQ(spec.definitions.size(), 5u);

  const Statement& s = definition(spec, "S");
  ASSERT_EQ(s.vars.size(), 5u);  // spatial b h m n, then reduced d
  EXPECT_EQ(s.vars[3].name, "n");
  EXPECT_EQ(s.vars[3].extent, 4096);
  EXPECT_FALSE(s.vars[3].reduced);
  EXPECT_EQ(s.vars[4].name, "d");
  EXPECT_EQ(s.vars[4].extent, 128);
  EXPECT_TRUE(s.vars[4].reduced);
  EXPECT_EQ(spec.tensors[3].shape, (std::vector<int64_t>{2, 16, 4096, 4096}));
  EXPECT_EQ(spec.tensors[3].dim_names, (std::vector<std::string>{"b", "h", "m", "n"}));
  EXPECT_EQ(spec.tensors[0].dim_names, (std::vector<std::string>{"B", "H", "M", "D"}));

  // sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D)
  const Expr& reduce = *s.value;
  ASSERT_EQ(reduce.kind, ExprKind::Reduce);
  EXPECT_EQ(reduce.reduce_vars[0].var, 4);
  const Expr& division = *reduce.operands[0];
  const Expr& q = *division.operands[0]->operands[0];
  EXPECT_EQ(q.tensor, spec.find_tensor("Q"));
  EXPECT_EQ(q.indices[3]->name_kind, NameKind::IndexVar);
  EXPECT_EQ(q.indices[3]->var, 4);
  const Expr& sqrt_d = *division.operands[1];
  EXPECT_EQ(sqrt_d.func, Func::Sqrt);
  EXPECT_EQ(sqrt_d.operands[0]->name_kind, NameKind::SizeSymbol);
  EXPECT_EQ(sqrt_d.operands[0]->size_value, 128);
}

TEST(Sema, IndexVariablesAsValuesAndSizesInIndices) {
  Loaded loaded = load_text(
      "let M = 8, N = 8, G = 2\n"
      "input X[M, N] : f32\n"
      "input Y[4] : f32\n"
      "output A[m, n] = X[m, n] + (m - n) + Y[n / G]\n");
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  const Expr& value = *loaded.spec->statement(3).value;
  const Expr& difference = *value.operands[0]->operands[1];
  EXPECT_EQ(difference.operands[0]->name_kind, NameKind::IndexVar);
  EXPECT_EQ(difference.operands[0]->var, 0);
  const IndexExpr& index = *value.operands[1]->indices[0];
  EXPECT_EQ(index.rhs->name_kind, NameKind::SizeSymbol);
  EXPECT_EQ(index.rhs->size_value, 2);
}

DType dtype_of(const std::string& value, const std::string& inputs = "") {
  Loaded loaded = load_text(
      "input A[4] : bf16\ninput B[4] : bf16\ninput H[4] : f16\ninput F[4] : f32\n" + inputs +
      "T[i] = " + value + "\noutput Y[i] = T[i]\n");
  EXPECT_TRUE(loaded.spec) << value << ": " << loaded.first_error();
  if (!loaded.spec) return DType::Bool;
  return loaded.spec->tensors[loaded.spec->find_tensor("T")].dtype;
}

TEST(Sema, IntermediateDtypes) {
  EXPECT_EQ(dtype_of("A[i] * B[i] + 1"), DType::BF16);       // all bf16
  EXPECT_EQ(dtype_of("exp(H[i])"), DType::F16);              // all f16
  EXPECT_EQ(dtype_of("A[i] + H[i]"), DType::F32);            // mixed narrow types
  EXPECT_EQ(dtype_of("A[i] + F[i]"), DType::F32);            // an f32 operand
  EXPECT_EQ(dtype_of("A[i] + sum(j) B[j]"), DType::F32);     // a reduction
}

TEST(Sema, DeclaredAndOutputDtypes) {
  Loaded loaded = load_text(
      "input A[4] : bf16\n"
      "T[i] : f16 = A[i] + 1\n"
      "output Y[i] = T[i] * A[i]\n"
      "output Z[i] : bf16 = A[i]\n");
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  const Spec& spec = *loaded.spec;
  EXPECT_EQ(spec.tensors[spec.find_tensor("T")].dtype, DType::F16);
  EXPECT_EQ(spec.tensors[spec.find_tensor("Y")].dtype, DType::F32);  // outputs default to f32
  EXPECT_EQ(spec.tensors[spec.find_tensor("Z")].dtype, DType::BF16);
  EXPECT_EQ(spec.outputs.size(), 2u);
  EXPECT_EQ(spec.tensors[spec.find_tensor("T")].role, TensorRole::Intermediate);
}

TEST(Sema, ExpressionDtypes) {
  Loaded loaded = load_text(
      "input A[4] : bf16\ninput H[4] : f16\n"
      "output Y[i] = A[i] * 2 + (1 - 3) + (sum(j) H[j]) + A[i] * H[i]\n");
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  // ((((A * 2) + (1 - 3)) + sum) + A * H)
  const Expr& value = *loaded.spec->statement(2).value;
  const Expr& a_plus_constant = *value.operands[0]->operands[0];
  const Expr& a_times_two = *a_plus_constant.operands[0];
  EXPECT_EQ(a_times_two.dtype, DType::BF16);  // the literal adopts A's type
  EXPECT_FALSE(a_times_two.weak_type);
  EXPECT_TRUE(a_times_two.operands[1]->weak_type);
  const Expr& constant = *a_plus_constant.operands[1];
  EXPECT_TRUE(constant.weak_type);  // all-constant subexpressions stay weak
  EXPECT_EQ(a_plus_constant.dtype, DType::BF16);
  const Expr& reduce = *value.operands[0]->operands[1];
  EXPECT_EQ(reduce.dtype, DType::F32);
  EXPECT_EQ(value.operands[0]->dtype, DType::F32);
  EXPECT_EQ(value.operands[1]->dtype, DType::F32);  // bf16 * f16
}

// 8-bit tensors are storage only: arithmetic on them is f32, and an intermediate computed from
// them alone is f32 unless it declares a dtype (the explicit conversion where it is stored).
TEST(Sema, EightBitTypesComputeInF32AndConvertWhereDeclared) {
  const std::string inputs =
      "input E[4] : fp8e4m3\ninput R[4] : fp8e5m2\ninput W[4] : int8\ninput S[1] : f32\n";
  EXPECT_EQ(dtype_of("E[i] * E[i]", inputs), DType::F32);
  EXPECT_EQ(dtype_of("-W[i]", inputs), DType::F32);
  EXPECT_EQ(dtype_of("E[i] * R[i]", inputs), DType::F32);
  EXPECT_EQ(dtype_of("W[i] * A[i]", inputs), DType::F32);  // int8 weight times bf16
  Loaded loaded = load_text(inputs +
                            "input X[4] : f32\n"
                            "Q[i] : fp8e4m3 = X[i] * S[0]\n"
                            "output Y[i] : fp8e5m2 = sum(j) Q[j] * E[i]\n"
                            "output Z[i] : int8 = W[i] * 2\n");
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  const Spec& spec = *loaded.spec;
  EXPECT_EQ(spec.tensors[spec.find_tensor("Q")].dtype, DType::F8E4M3);
  EXPECT_EQ(spec.tensors[spec.find_tensor("Y")].dtype, DType::F8E5M2);
  EXPECT_EQ(spec.tensors[spec.find_tensor("Z")].dtype, DType::I8);
  const Expr& doubled = *spec.statement(spec.tensors[spec.find_tensor("Z")].statement).value;
  EXPECT_EQ(doubled.dtype, DType::F32);
  EXPECT_FALSE(doubled.weak_type);
}

TEST(Sema, LastDefinitionIsTheOutputWithoutTheKeyword) {
  Loaded loaded = load_text("input X[4] : f32\nA[i] = X[i]\nB[i] = A[i] * 2\n");
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  EXPECT_EQ(loaded.spec->outputs, (std::vector<int>{2}));
  EXPECT_EQ(loaded.spec->tensors[1].role, TensorRole::Intermediate);
}

TEST(Sema, SizesAndOverrides) {
  const std::string text =
      "let M = 64, N = 32\n"
      "input X[M, N, K] : f32\n"
      "output Y[m, n] = sum(k) X[m, n, k] / sqrt(D)\n";
  Loaded loaded = load_text(text, {{"D", 4}, {"M", 8}, {"K", 2}});
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  using Sizes = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(loaded.spec->sizes, (Sizes{{"M", 8}, {"N", 32}, {"D", 4}, {"K", 2}}));
  EXPECT_EQ(loaded.spec->tensors[0].shape, (std::vector<int64_t>{8, 32, 2}));

  Loaded unbound = load_text(text);
  EXPECT_EQ(unbound.headlines(),
            (std::vector<std::string>{
                "2:15: error: size 'K' is not bound; bind it with `let` or -D K=VALUE",
                "3:43: error: size 'D' is not bound; bind it with `let` or -D D=VALUE"}));

  Loaded unknown = load_text(text, {{"D", 4}, {"K", 2}, {"m", 3}});
  EXPECT_EQ(unknown.headlines(),
            (std::vector<std::string>{
                "error: -D m=3: the spec has no size symbol 'm'; its sizes are D, K, M, N"}));

  Loaded too_large = load_text(text, {{"D", 4}, {"K", int64_t{1} << 41}});
  EXPECT_EQ(too_large.headlines(),
            (std::vector<std::string>{"error: -D K=2199023255552: size 'K' is too large (the "
                                      "limit is 1099511627776)"}));
}

TEST(Sema, ParseSizeOverride) {
  std::string error;
  std::optional<SizeOverride> parsed = parse_size_override("M=8192", &error);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->name, "M");
  EXPECT_EQ(parsed->value, 8192);
  EXPECT_TRUE(parse_size_override("_k2=1", &error));

  auto error_of = [](std::string_view text) {
    std::string message;
    EXPECT_FALSE(parse_size_override(text, &message)) << text;
    return message;
  };
  EXPECT_EQ(error_of("M"), "expected NAME=VALUE, got 'M'");
  EXPECT_EQ(error_of("2M=4"), "expected NAME=VALUE with NAME a size name, got '2M=4'");
  EXPECT_EQ(error_of("=4"), "expected NAME=VALUE with NAME a size name, got '=4'");
  EXPECT_EQ(error_of("M=0"), "the value of 'M' must be a positive integer, got '0'");
  EXPECT_EQ(error_of("M=-4"), "the value of 'M' must be a positive integer, got '-4'");
  EXPECT_EQ(error_of("M=4k"), "the value of 'M' must be a positive integer, got '4k'");
  EXPECT_EQ(error_of("M="), "the value of 'M' must be a positive integer, got ''");
  EXPECT_EQ(error_of("M=99999999999999999999"), "the value of 'M' does not fit in 64 bits");
}

TEST(Sema, GroupedQueryIndicesAreBoundsChecked) {
  Loaded ok = load_source_file("assets/specs/gqa_attention.nt");
  ASSERT_TRUE(ok.spec) << ok.first_error();
  // With 32 query heads, h / 4 reaches 7: 8 key/value heads are enough, 4 are not.
  Loaded bad = load_source_file("assets/specs/gqa_attention.nt", {{"KH", 4}});
  EXPECT_EQ(bad.first_error(),
            "9:45: error: index 'h / 4' ranges over [0, 7], outside dimension 2 of 'K' (extent "
            "4)");
}

TEST(Sema, IntervalsOfCompoundIndices) {
  auto check = [](const std::string& index) {
    return load_text("input X[16] : f32\noutput Y[i] = X[i] + X[" + index + "]\n",
                     {}).first_error();
  };
  EXPECT_EQ(check("15 - i"), "");
  EXPECT_EQ(check("(i + 5) % 16"), "");
  EXPECT_EQ(check("i / 2 + 8"), "");
  EXPECT_EQ(check("-i + 15"), "");
  EXPECT_EQ(check("2 * i"),
            "2:24: error: index '2 * i' ranges over [0, 30], outside dimension 1 of 'X' (extent "
            "16)");
  EXPECT_EQ(check("16"), "2:24: error: index '16' ranges over [16, 16], outside dimension 1 of "
                         "'X' (extent 16)");
  EXPECT_EQ(check("i - 9223372036854775807 - 9"),
            "2:24: error: index 'i - 9223372036854775807 - 9' ranges over "
            "[-9223372036854775808, -9223372036854775801], outside dimension 1 of 'X' (extent 16)");
}

TEST(Sema, CheckProgramRefusesAProgramWithEarlierErrors) {
  auto file = std::make_shared<SourceFile>("test.nt", "input X[4] : f32\nY[i] = X[i\n");
  DiagnosticEngine diagnostics(file);
  Program program = parse_program(file, diagnostics);
  ASSERT_TRUE(diagnostics.has_errors());
  EXPECT_EQ(check_program(std::move(program), {}, diagnostics), nullptr);
}

TEST(Sema, WarningsDoNotFailTheSpec) {
  Loaded loaded = load_text("input X[4] : f32\nT[i] = X[i]\noutput Y[i] = X[i]\n");
  ASSERT_TRUE(loaded.spec);
  EXPECT_EQ(loaded.headlines(),
            (std::vector<std::string>{"2:1: warning: 'T' is computed but never used"}));
}

}  // namespace
}  // namespace nautilus::spec
