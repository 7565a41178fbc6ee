// Every asset spec, lowered to scalar IR, reproduces the float64 reference on random inputs; and
// deliberately broken IR is caught by the same comparison.
#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::asset_names;
using testing::compile_asset;
using testing::small_sizes;

class EveryAsset : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryAsset, ScalarStageMatchesReferenceForSeveralSeeds) {
  const std::string asset = GetParam();
  ASSERT_FALSE(small_sizes(asset).empty()) << "add small sizes for new asset " << asset;
  auto compilation = compile_asset(asset, small_sizes(asset));
  ASSERT_TRUE(compilation.ok());
  for (uint64_t seed : {0, 1, 42}) {
    driver::EvalOptions options;
    options.seed = seed;
    driver::EvalResult result = driver::evaluate(compilation, options);
    ASSERT_TRUE(result.ran) << result.error;
    for (const driver::OutputCheck& check : result.outputs) {
      EXPECT_TRUE(check.passed) << asset << " seed " << seed << " output " << check.name
                                << " error " << check.error.max_relative_error;
      // Not vacuous: the output is not all zeros and the error is measured against real values.
      EXPECT_GT(check.error.max_abs_reference, 1e-3) << asset;
    }
  }
}

TEST_P(EveryAsset, LoweredScalarIrMatchesGolden) {
  const std::string asset = GetParam();
  auto compilation = compile_asset(asset, small_sizes(asset));
  ASSERT_TRUE(compilation.ok());
  testing::expect_golden("scalar/" + asset + ".txt",
                         scalar::print_program(*compilation.program, compilation.file.get()));
}

INSTANTIATE_TEST_SUITE_P(Assets, EveryAsset, ::testing::ValuesIn(asset_names()),
                         [](const auto& test_info) { return test_info.param; });

TEST(Lowering, AttentionDotMatchesGolden) {
  auto compilation = compile_asset("attention", small_sizes("attention"));
  testing::expect_golden("scalar/attention.dot", scalar::program_to_dot(*compilation.program));
}

TEST(Lowering, OneNestPerStatementPlusOnePerExtractedReduction) {
  auto attention = compile_asset("attention", small_sizes("attention"));
  // S, Mx, P, L, and O (bf16) = accumulator nest O_sum + cast nest O.
  auto* body = attention.program->body->as<scalar::Seq>();
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->stmts.size(), 6u);
  EXPECT_NE(attention.program->find_buffer("O_sum"), nullptr);
  // Intermediates are materialized in global memory.
  for (const scalar::Buffer& buffer : attention.program->allocations) {
    EXPECT_EQ(buffer->scope, scalar::MemoryScope::Global) << buffer->name;
  }
  // The one-statement form needs a temporary for each distinct nested reduction: its scores
  // (written four times), their max (twice), the denominator and the numerator.
  auto one = compile_asset("attention_one_statement", small_sizes("attention_one_statement"));
  EXPECT_EQ(one.program->allocations.size(), 4u);
}

// Rewrites applied after lowering to prove that eval notices broken IR.
enum class Breakage { ExpToExp2, MaxToMin, ShortenReductionLoop, DropInit, ScaleConstant };

class Breaker : public scalar::Mutator {
 public:
  explicit Breaker(Breakage breakage) : breakage_(breakage) {}
  bool changed = false;

 protected:
  scalar::Expr mutate_Unary(const scalar::Unary& node, const scalar::Expr& self) override {
    if (breakage_ == Breakage::ExpToExp2 && node.op == scalar::UnaryOp::Exp && !changed) {
      changed = true;
      return scalar::unary(scalar::UnaryOp::Exp2, node.a, node.provenance);
    }
    return Mutator::mutate_Unary(node, self);
  }
  scalar::Expr mutate_Binary(const scalar::Binary& node, const scalar::Expr& self) override {
    if (breakage_ == Breakage::MaxToMin && node.op == scalar::BinaryOp::Max && !changed) {
      changed = true;
      return scalar::binary(scalar::BinaryOp::Min, node.a, node.b, node.provenance);
    }
    return Mutator::mutate_Binary(node, self);
  }
  scalar::Expr mutate_FloatImm(const scalar::FloatImm& node, const scalar::Expr& self) override {
    if (breakage_ == Breakage::ScaleConstant && node.value == 8.0 && !changed) {  // sqrt(D), D=8
      changed = true;
      return scalar::float_imm(4.0, node.dtype, node.provenance);
    }
    return Mutator::mutate_FloatImm(node, self);
  }
  scalar::Stmt mutate_For(const scalar::For& node, const scalar::Stmt& self) override {
    // The innermost loop of the first nest is the reduction over d.
    if (breakage_ == Breakage::ShortenReductionLoop && !changed && node.body->as<scalar::Block>()) {
      changed = true;
      return scalar::make_for(node.var, node.extent - 1, node.body, node.provenance);
    }
    return Mutator::mutate_For(node, self);
  }
  scalar::Stmt mutate_Block(const scalar::Block& node, const scalar::Stmt& self) override {
    if (breakage_ == Breakage::DropInit && node.init && !changed) {
      changed = true;
      return scalar::make_block(node.name, node.iter_vars, node.bindings, node.predicate, nullptr,
                                node.body, node.provenance);
    }
    return Mutator::mutate_Block(node, self);
  }

 private:
  Breakage breakage_;
};

driver::ScalarPass breaking_pass(Breakage breakage) {
  return {"break", "deliberately wrong rewrite", [breakage](const scalar::ProgramPtr& program) {
            Breaker breaker(breakage);
            auto broken = std::make_shared<scalar::Program>(*program);
            broken->body = breaker.mutate(program->body);
            EXPECT_TRUE(breaker.changed);
            return scalar::ProgramPtr(broken);
          }};
}

class BrokenIr : public ::testing::TestWithParam<Breakage> {};

TEST_P(BrokenIr, EvalFailsAgainstReference) {
  auto compilation = compile_asset("attention", small_sizes("attention"), driver::Stage::Scalar,
                                   {breaking_pass(GetParam())});
  ASSERT_TRUE(compilation.ok());
  driver::EvalResult result = driver::evaluate(compilation, {});
  EXPECT_FALSE(result.passed());
  if (GetParam() == Breakage::DropInit) {
    // Accumulating into memory that was never initialized is caught by the interpreter itself.
    EXPECT_FALSE(result.ran);
    EXPECT_NE(result.error.find("before it was written"), std::string::npos) << result.error;
  } else {
    ASSERT_TRUE(result.ran) << result.error;
    EXPECT_GT(result.outputs[0].error.max_relative_error, result.outputs[0].tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Breakages, BrokenIr,
                         ::testing::Values(Breakage::ExpToExp2, Breakage::MaxToMin,
                                           Breakage::ShortenReductionLoop, Breakage::DropInit,
                                           Breakage::ScaleConstant));

TEST(Pipeline, LogRecordsEveryPassWithUnchangedFlag) {
  driver::ScalarPass identity{"identity", "returns its input",
                              [](const scalar::ProgramPtr& p) { return p; }};
  auto compilation =
      compile_asset("gemm", small_sizes("gemm"), driver::Stage::Scalar, {identity});
  ASSERT_EQ(compilation.log.size(), 3u);
  EXPECT_EQ(compilation.log[0].pass, "parse-and-check");
  EXPECT_EQ(compilation.log[1].pass, "lower-to-scalar");
  EXPECT_FALSE(compilation.log[1].unchanged);
  EXPECT_EQ(compilation.log[2].pass, "identity");
  EXPECT_TRUE(compilation.log[2].unchanged);
  EXPECT_EQ(compilation.final_snapshot(driver::Stage::Scalar)->program, compilation.program);
}

TEST(Pipeline, EvalRefusesHugeSizesWithAHint) {
  auto compilation = compile_asset("gemm", {"M=2048", "N=2048", "K=2048"});
  driver::EvalResult result = driver::evaluate(compilation, {});
  EXPECT_FALSE(result.ran);
  EXPECT_NE(result.error.find("bind smaller sizes with -D"), std::string::npos) << result.error;
}

}  // namespace
}  // namespace nautilus
