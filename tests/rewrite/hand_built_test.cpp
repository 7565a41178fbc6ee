// The whole pass list on the hand-built kernels of tests/vrtile (tiled GEMM, online softmax,
// FlashAttention): still within tolerance of the float64 reference on random inputs, with and
// without tails; GEMM stays bit for bit. And the check is able to fail: a deliberately wrong
// exp → exp2 (without the log2(e) factor) is caught on the same kernels.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/rewrite/rewrite.h"
#include "core/rewrite/support.h"
#include "core/vrtile/interpreter.h"
#include "core/spec/reference.h"
#include "tests/common/spec_test_util.h"
#include "tests/rewrite/check.h"
#include "tests/rewrite/naive_kernels.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::rewrite {
namespace {

using nautilus::testing::compile_asset;
using nautilus::testing::compile_text;
using nautilus::testing::f32_variant;
using testing::check_against_reference;

void expect_list_keeps_correct(const driver::Compilation& compilation,
                               const vrtile::ModulePtr& module, const std::string& output) {
  ASSERT_TRUE(check_against_reference(compilation, *module, output).ok);
  const vrtile::ModulePtr after = run_vr_rewrites(module);
  const testing::CheckResult result = check_against_reference(compilation, *after, output);
  EXPECT_TRUE(result.ok) << result.error;
}

TEST(HandBuilt, GemmStaysBitForBit) {
  for (const std::vector<std::string>& sizes :
       {std::vector<std::string>{"M=13", "N=10", "K=24"}, {"M=16", "N=16", "K=20"}}) {
    const driver::Compilation compilation = compile_asset("gemm", sizes);
    ASSERT_TRUE(compilation.ok());
    const vrtile::ModulePtr module = vrtile::test_kernels::tiled_gemm(*compilation.program, 8, 8, 8);
    const vrtile::ModulePtr after = run_vr_rewrites(module);
    const TensorMap inputs = spec::make_random_inputs(*compilation.spec, 3);
    const vrtile::InterpretResult a = vrtile::interpret(*module, inputs);
    const vrtile::InterpretResult b = vrtile::interpret(*after, inputs);
    ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
    EXPECT_EQ(a.outputs.at("C").values, b.outputs.at("C").values);
  }
}

TEST(HandBuilt, OnlineSoftmaxStaysCorrect) {
  for (const std::vector<std::string>& sizes :
       {std::vector<std::string>{"R=7", "C=33"}, {"R=8", "C=32"}}) {
    const driver::Compilation bf16 = compile_asset("softmax", sizes);
    ASSERT_TRUE(bf16.ok());
    expect_list_keeps_correct(bf16, vrtile::test_kernels::online_softmax(*bf16.program, 4, 16), "Y");
    const driver::Compilation f32 = compile_text(f32_variant("softmax"), sizes);
    ASSERT_TRUE(f32.ok());
    expect_list_keeps_correct(f32, vrtile::test_kernels::online_softmax(*f32.program, 4, 16), "Y");
  }
}

TEST(HandBuilt, FlashAttentionStaysCorrect) {
  for (const std::vector<std::string>& sizes :
       {std::vector<std::string>{"B=1", "H=2", "M=13", "N=20", "D=4"},
        {"B=1", "H=1", "M=16", "N=32", "D=8"}}) {
    const driver::Compilation bf16 = compile_asset("attention", sizes);
    ASSERT_TRUE(bf16.ok());
    expect_list_keeps_correct(bf16, vrtile::test_kernels::flash_attention(*bf16.program, 8, 16),
                              "O");
    const driver::Compilation f32 = compile_text(f32_variant("attention"), sizes);
    ASSERT_TRUE(f32.ok());
    expect_list_keeps_correct(f32, vrtile::test_kernels::flash_attention(*f32.program, 8, 16),
                              "O");
  }
}

// exp(x) → exp2(x): the rewrite with its factor forgotten.
vrtile::ModulePtr broken_exp_to_exp2(const vrtile::ModulePtr& module) {
  return map_kernels(module, [](const vrtile::KernelPtr& kernel) {
    Rebuilder rebuilder(*kernel);
    return rebuilder.run(kernel, [](const vrtile::Op&, const vrtile::OpPtr& op, Rebuilder& out) {
      if (op->kind == vrtile::OpKind::Unary && op->unary_op == vrtile::UnaryOp::Exp) {
        vrtile::Op copy = *op;
        copy.unary_op = vrtile::UnaryOp::Exp2;
        out.emit(vrtile::make_op(std::move(copy)));
        return;
      }
      out.emit(op);
    });
  });
}

TEST(HandBuilt, AWrongExp2RewriteIsCaught) {
  const driver::Compilation softmax = compile_asset("softmax", {"R=7", "C=33"});
  ASSERT_TRUE(softmax.ok());
  const vrtile::ModulePtr s = vrtile::test_kernels::online_softmax(*softmax.program, 4, 16);
  EXPECT_FALSE(check_against_reference(softmax, *broken_exp_to_exp2(s), "Y").ok);
  EXPECT_TRUE(check_against_reference(softmax, *exp_to_exp2(s), "Y").ok);

  const driver::Compilation attention =
      compile_asset("attention", {"B=1", "H=2", "M=13", "N=20", "D=4"});
  ASSERT_TRUE(attention.ok());
  const vrtile::ModulePtr naive = test_kernels::naive_attention(
      *attention.program, 8, 16, test_kernels::Normalization::AfterLoop);
  EXPECT_FALSE(check_against_reference(attention, *broken_exp_to_exp2(naive), "O").ok);
  // The same mistake after the other passes of the list is caught too.
  const vrtile::ModulePtr prepared = fold_scales(delay_normalization(naive));
  EXPECT_FALSE(check_against_reference(attention, *broken_exp_to_exp2(prepared), "O").ok);
  EXPECT_TRUE(check_against_reference(attention, *exp_to_exp2(prepared), "O").ok);
}

}  // namespace
}  // namespace nautilus::rewrite
