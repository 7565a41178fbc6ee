// The float64 reference is the oracle of the whole compiler, so it is checked here against
// formulas written directly in the tests, independent of the spec language.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/spec/reference.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::compile_asset;

struct Evaluated {
  TensorMap inputs;
  TensorMap tensors;
};

Evaluated run_reference(const driver::Compilation& compilation, uint64_t seed) {
  Evaluated e;
  e.inputs = spec::make_random_inputs(*compilation.spec, seed);
  spec::ReferenceResult result = spec::evaluate_reference(*compilation.spec, e.inputs);
  EXPECT_TRUE(result.ok) << result.error;
  e.tensors = std::move(result.tensors);
  return e;
}

// Row-major flat index.
size_t at(const std::vector<int64_t>& shape, std::initializer_list<int64_t> index) {
  size_t flat = 0, i = 0;
  for (int64_t v : index) flat = flat * static_cast<size_t>(shape[i++]) + static_cast<size_t>(v);
  return flat;
}

// The work estimate TFLOP/s figures divide: a multiply-add per term of a sum of products.
TEST(Reference, FlopsFollowTheUsualConventions) {
  auto gemm = compile_asset("gemm", {"M=100", "N=72", "K=40"}, driver::Stage::Spec);
  ASSERT_TRUE(gemm.spec);
  EXPECT_EQ(spec::estimate_flops(*gemm.spec), 2.0 * 100 * 72 * 40);
  // bf16 A, B and C, each moved once.
  EXPECT_EQ(spec::estimate_compulsory_bytes(*gemm.spec), 2.0 * (100 * 40 + 40 * 72 + 100 * 72));

  // Attention: 4·B·H·M·N·D for the two matrix products, plus a few operations per score.
  auto attention = compile_asset("attention", {"B=2", "H=3", "M=64", "N=80", "D=128"},
                                 driver::Stage::Spec);
  ASSERT_TRUE(attention.spec);
  const double products = 4.0 * 2 * 3 * 64 * 80 * 128;
  const double flops = spec::estimate_flops(*attention.spec);
  EXPECT_GT(flops, products);
  EXPECT_LT(flops, products * 1.01);
}

TEST(Reference, RandomInputsAreSeededRoundedAndNotDegenerate) {
  auto compilation = compile_asset("gemm", {"M=8", "N=8", "K=8"}, driver::Stage::Spec);
  TensorMap a = spec::make_random_inputs(*compilation.spec, 7);
  TensorMap b = spec::make_random_inputs(*compilation.spec, 7);
  TensorMap c = spec::make_random_inputs(*compilation.spec, 8);
  EXPECT_EQ(a.at("A").values, b.at("A").values);
  EXPECT_NE(a.at("A").values, c.at("A").values);
  EXPECT_NE(a.at("A").values, a.at("B").values);
  double sum_abs = 0;
  for (double v : a.at("A").values) {
    EXPECT_EQ(v, round_to(DType::BF16, v));  // inputs are exactly representable in bf16
    EXPECT_GE(v, -1.0);
    EXPECT_LT(v, 1.0);
    sum_abs += std::fabs(v);
  }
  EXPECT_GT(sum_abs / 64, 0.2);  // uniform on [-1, 1) has mean |x| = 0.5
}

TEST(Reference, GemmMatchesTripleLoop) {
  auto compilation = compile_asset("gemm", {"M=9", "N=7", "K=13"}, driver::Stage::Spec);
  Evaluated e = run_reference(compilation, 1);
  const TensorData& A = e.inputs.at("A");
  const TensorData& B = e.inputs.at("B");
  const TensorData& C = e.tensors.at("C");
  ASSERT_EQ(C.shape, (std::vector<int64_t>{9, 7}));
  for (int64_t m = 0; m < 9; ++m) {
    for (int64_t n = 0; n < 7; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < 13; ++k) {
        acc += A.values[at(A.shape, {m, k})] * B.values[at(B.shape, {k, n})];
      }
      EXPECT_DOUBLE_EQ(C.values[at(C.shape, {m, n})], acc);
    }
  }
}

TEST(Reference, SoftmaxRowsArePositiveAndSumToOne) {
  auto compilation = compile_asset("softmax", {"R=5", "C=31"}, driver::Stage::Spec);
  for (uint64_t seed : {0, 1, 2}) {
    Evaluated e = run_reference(compilation, seed);
    const TensorData& Y = e.tensors.at("Y");
    for (int64_t r = 0; r < 5; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < 31; ++c) {
        double y = Y.values[at(Y.shape, {r, c})];
        EXPECT_GT(y, 0.0);
        sum += y;
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
  }
}

// softmax(Q Kᵀ / sqrt(D)) V written directly, with an optional causal mask and head grouping.
void expect_attention(const Evaluated& e, int64_t B, int64_t H, int64_t M, int64_t N, int64_t D,
                      bool causal, int64_t group) {
  const TensorData& Q = e.inputs.at("Q");
  const TensorData& K = e.inputs.at("K");
  const TensorData& V = e.inputs.at("V");
  const TensorData& O = e.tensors.at("O");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t m = 0; m < M; ++m) {
        std::vector<double> scores(static_cast<size_t>(N));
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) {
            s += Q.values[at(Q.shape, {b, h, m, d})] * K.values[at(K.shape, {b, h / group, n, d})];
          }
          s /= std::sqrt(static_cast<double>(D));
          if (causal && n > m) s = -std::numeric_limits<double>::infinity();
          scores[static_cast<size_t>(n)] = s;
          max_score = std::max(max_score, s);
        }
        double denominator = 0;
        for (double s : scores) denominator += std::exp(s - max_score);
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t n = 0; n < N; ++n) {
            o += std::exp(scores[static_cast<size_t>(n)] - max_score) / denominator *
                 V.values[at(V.shape, {b, h / group, n, d})];
          }
          ASSERT_NEAR(O.values[at(O.shape, {b, h, m, d})], o, 1e-12)
              << "at b=" << b << " h=" << h << " m=" << m << " d=" << d;
        }
      }
}

TEST(Reference, AttentionMatchesDirectFormula) {
  auto compilation =
      compile_asset("attention", {"B=2", "H=2", "M=5", "N=9", "D=4"}, driver::Stage::Spec);
  expect_attention(run_reference(compilation, 3), 2, 2, 5, 9, 4, false, 1);
}

TEST(Reference, CausalAttentionMasksFutureKeys) {
  auto compilation =
      compile_asset("causal_attention", {"B=1", "H=2", "M=7", "N=7", "D=4"}, driver::Stage::Spec);
  expect_attention(run_reference(compilation, 4), 1, 2, 7, 7, 4, true, 1);
}

TEST(Reference, GroupedQueryAttentionSharesKeyValueHeads) {
  auto compilation = compile_asset("gqa_attention", {"B=1", "H=8", "KH=2", "M=3", "N=6", "D=4"},
                                   driver::Stage::Spec);
  expect_attention(run_reference(compilation, 5), 1, 8, 3, 6, 4, false, 4);
}

TEST(Reference, OneStatementAttentionEqualsFiveStatementForm) {
  std::vector<std::string> sizes = {"B=1", "H=2", "M=4", "N=6", "D=4"};
  auto one = compile_asset("attention_one_statement", sizes, driver::Stage::Spec);
  Evaluated e = run_reference(one, 6);
  expect_attention(e, 1, 2, 4, 6, 4, false, 1);
}

// Inline reductions that do not depend on the enclosing reduction's variable are computed once
// per change of the variables they read, not once per term: one-statement attention at 96 × 130
// × 64 was refused before (2.8e10 operations), and the flop count follows the same rule.
TEST(Reference, InvariantInlineReductionsAreEvaluatedOncePerRow) {
  std::vector<std::string> sizes = {"B=1", "H=1", "M=96", "N=130", "D=64"};
  auto one = compile_asset("attention_one_statement", sizes, driver::Stage::Spec);
  ASSERT_TRUE(one.spec);
  EXPECT_LT(spec::estimate_reference_operations(*one.spec), 2e9);
  Evaluated e = run_reference(one, 2);
  expect_attention(e, 1, 1, 96, 130, 64, false, 1);
  auto five = compile_asset("attention", sizes, driver::Stage::Spec);
  const double products = 4.0 * 96 * 130 * 64;
  EXPECT_LT(spec::estimate_flops(*five.spec), 1.03 * products);
  // The one-statement form recomputes the scores inside each of its four reductions.
  EXPECT_LT(spec::estimate_flops(*one.spec), 4.0 * products);

  // Softmax with its normalizer inline: one sum per row.
  auto softmax = compile_asset("softmax", {"R=8", "C=1000"}, driver::Stage::Spec);
  EXPECT_LT(spec::estimate_flops(*softmax.spec), 10.0 * 8 * 1000);
}

TEST(Reference, RmsNormMatchesDirectFormula) {
  auto compilation = compile_asset("rmsnorm", {"T=4", "H=10"}, driver::Stage::Spec);
  Evaluated e = run_reference(compilation, 7);
  const TensorData& X = e.inputs.at("X");
  const TensorData& W = e.inputs.at("W");
  const TensorData& Y = e.tensors.at("Y");
  for (int64_t t = 0; t < 4; ++t) {
    double squares = 0;
    for (int64_t h = 0; h < 10; ++h) squares += std::pow(X.values[at(X.shape, {t, h})], 2);
    double r = 1.0 / std::sqrt(squares / 10 + 0.00001);
    for (int64_t h = 0; h < 10; ++h) {
      EXPECT_NEAR(Y.values[at(Y.shape, {t, h})],
                  X.values[at(X.shape, {t, h})] * r * W.values[static_cast<size_t>(h)], 1e-12);
    }
  }
}

TEST(Reference, LayerNormOutputHasZeroMeanAndUnitVarianceBeforeAffine) {
  auto compilation = compile_asset("layernorm", {"T=3", "H=64"}, driver::Stage::Spec);
  Evaluated e = run_reference(compilation, 8);
  const TensorData& G = e.inputs.at("G");
  const TensorData& Bt = e.inputs.at("Bt");
  const TensorData& Y = e.tensors.at("Y");
  for (int64_t t = 0; t < 3; ++t) {
    double mean = 0, square = 0;
    for (int64_t h = 0; h < 64; ++h) {
      double normalized = (Y.values[at(Y.shape, {t, h})] - Bt.values[static_cast<size_t>(h)]) /
                          G.values[static_cast<size_t>(h)];
      mean += normalized / 64;
      square += normalized * normalized / 64;
    }
    EXPECT_NEAR(mean, 0.0, 1e-9);
    EXPECT_NEAR(square, 1.0, 1e-3);  // the 1e-5 epsilon shifts the variance slightly
  }
}

TEST(Reference, LogSumExpMatchesDirectFormula) {
  auto compilation = compile_asset("logsumexp", {"R=3", "C=17"}, driver::Stage::Spec);
  Evaluated e = run_reference(compilation, 9);
  const TensorData& X = e.inputs.at("X");
  const TensorData& L = e.tensors.at("Lse");
  for (int64_t r = 0; r < 3; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 17; ++c) sum += std::exp(X.values[at(X.shape, {r, c})]);
    EXPECT_NEAR(L.values[static_cast<size_t>(r)], std::log(sum), 1e-12);
  }
}

TEST(Reference, GatedMlpMatchesDirectFormula) {
  auto compilation = compile_asset("gated_mlp", {"T=2", "H=5", "F=6"}, driver::Stage::Spec);
  Evaluated e = run_reference(compilation, 10);
  const TensorData& X = e.inputs.at("X");
  const TensorData& Wg = e.inputs.at("Wg");
  const TensorData& Wu = e.inputs.at("Wu");
  const TensorData& Wd = e.inputs.at("Wd");
  const TensorData& Y = e.tensors.at("Y");
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t o = 0; o < 5; ++o) {
      double y = 0;
      for (int64_t f = 0; f < 6; ++f) {
        double g = 0, u = 0;
        for (int64_t h = 0; h < 5; ++h) {
          g += X.values[at(X.shape, {t, h})] * Wg.values[at(Wg.shape, {h, f})];
          u += X.values[at(X.shape, {t, h})] * Wu.values[at(Wu.shape, {h, f})];
        }
        y += g / (1 + std::exp(-g)) * u * Wd.values[at(Wd.shape, {f, o})];
      }
      EXPECT_NEAR(Y.values[at(Y.shape, {t, o})], y, 1e-12);
    }
}

TEST(Reference, RefusesSizesBeyondTheOperationBudget) {
  auto compilation = compile_asset("attention", {"B=1", "H=1", "M=256", "N=256", "D=64"},
                                   driver::Stage::Spec);
  spec::ReferenceResult result = spec::evaluate_reference(
      *compilation.spec, spec::make_random_inputs(*compilation.spec, 0), {1e6});
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("-D NAME=VALUE"), std::string::npos) << result.error;
}

}  // namespace
}  // namespace nautilus
