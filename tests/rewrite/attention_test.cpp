// The rewrites on attention as a direct lowering writes it (tests/rewrite/naive_kernels.h), with
// the normalization after the loop, at every step, or in a second loop: every pass alone, every
// prefix of the pass list and the whole list keep the output within tolerance of the float64
// reference on random inputs, at sizes that are and are not tile multiples, in bf16 and f32;
// the whole list yields FlashAttention's loop (golden text and structural checks).
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/rewrite/rewrite.h"
#include "core/vrtile/printer.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"
#include "tests/rewrite/check.h"
#include "tests/rewrite/naive_kernels.h"

namespace nautilus::rewrite {
namespace {

using nautilus::testing::f32_variant;
using test_kernels::Normalization;
using testing::check_against_reference;
using testing::CheckResult;

struct Case {
  std::vector<std::string> bindings;
  int64_t BM, BN;
  Normalization normalization;
  bool f32;
};

const char* normalization_name(Normalization n) {
  switch (n) {
    case Normalization::AfterLoop: return "after_loop";
    case Normalization::EveryStep: return "every_step";
    case Normalization::SecondLoop: return "second_loop";
  }
  return "?";
}

void PrintTo(const Case& c, std::ostream* out) {
  for (const std::string& binding : c.bindings) *out << binding << " ";
  *out << "tiles " << c.BM << "x" << c.BN << " " << normalization_name(c.normalization)
       << (c.f32 ? " f32" : " bf16");
}

driver::Compilation compile(const Case& c) {
  return c.f32 ? nautilus::testing::compile_text(f32_variant("attention"), c.bindings)
               : nautilus::testing::compile_asset("attention", c.bindings);
}

class NaiveAttention : public ::testing::TestWithParam<Case> {};

TEST_P(NaiveAttention, EveryPassAloneAndEveryPrefixStayCorrect) {
  const Case& c = GetParam();
  const driver::Compilation compilation = compile(c);
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr naive =
      test_kernels::naive_attention(*compilation.program, c.BM, c.BN, c.normalization);
  const CheckResult start = check_against_reference(compilation, *naive, "O");
  ASSERT_TRUE(start.ok) << start.error;
  vrtile::ModulePtr prefix = naive;
  for (const VRPassInfo& pass : vr_rewrite_passes()) {
    const vrtile::ModulePtr alone = pass.run(naive);
    const CheckResult alone_result = check_against_reference(compilation, *alone, "O");
    EXPECT_TRUE(alone_result.ok) << pass.name << " alone: " << alone_result.error;
    prefix = pass.run(prefix);
    const CheckResult prefix_result = check_against_reference(compilation, *prefix, "O");
    EXPECT_TRUE(prefix_result.ok) << "up to " << pass.name << ": " << prefix_result.error
                                  << "\n" << vrtile::print_module(*prefix);
  }
  // A second run of the whole list finds nothing left to do.
  EXPECT_EQ(run_vr_rewrites(prefix), prefix) << vrtile::print_module(*prefix);
}

// Counts ops of `kind` (and, for unary/binary, of `unary`/`binary`) in For bodies.
int count_in_loops(const vrtile::Region& region, bool in_loop,
                   const std::function<bool(const vrtile::Op&)>& match) {
  int count = 0;
  for (const vrtile::OpPtr& op : region.ops) {
    if (in_loop && match(*op)) ++count;
    if (op->kind == vrtile::OpKind::For) count += count_in_loops(*op->body, true, match);
  }
  return count;
}

TEST_P(NaiveAttention, TheWholeListGivesFlashAttentionsLoop) {
  const Case& c = GetParam();
  const driver::Compilation compilation = compile(c);
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr after = run_vr_rewrites(
      test_kernels::naive_attention(*compilation.program, c.BM, c.BN, c.normalization));
  const vrtile::Region& body = *after->kernels[0]->body;
  auto is = [](vrtile::OpKind kind) {
    return [kind](const vrtile::Op& op) { return op.kind == kind; };
  };
  auto binary = [](vrtile::BinaryOp op_kind) {
    return [op_kind](const vrtile::Op& op) {
      return op.kind == vrtile::OpKind::Binary && op.binary_op == op_kind;
    };
  };
  auto unary = [](vrtile::UnaryOp op_kind) {
    return [op_kind](const vrtile::Op& op) {
      return op.kind == vrtile::OpKind::Unary && op.unary_op == op_kind;
    };
  };
  // No division and no exp left in any loop; exp2 for P and for the rescale (or P only).
  EXPECT_EQ(count_in_loops(body, false, binary(vrtile::BinaryOp::Div)), 0);
  EXPECT_EQ(count_in_loops(body, false, unary(vrtile::UnaryOp::Exp)), 0);
  EXPECT_GE(count_in_loops(body, false, unary(vrtile::UnaryOp::Exp2)), 1);
  // Nothing loop-invariant is rebuilt per iteration: no full and no iota in a loop.
  EXPECT_EQ(count_in_loops(body, false, is(vrtile::OpKind::Full)), 0);
  EXPECT_EQ(count_in_loops(body, false, is(vrtile::OpKind::Iota)), 0);
  // In bf16 the dots read bf16 operands only (no f32 casts feed them).
  if (!c.f32) {
    EXPECT_EQ(count_in_loops(body, false,
                             [](const vrtile::Op& op) {
                               return op.kind == vrtile::OpKind::Dot &&
                                      op.operands[0]->type.dtype == DType::F32;
                             }),
              0)
        << vrtile::print_module(*after);
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  const std::vector<std::pair<std::vector<std::string>, std::pair<int64_t, int64_t>>> sizes = {
      {{"B=1", "H=2", "M=13", "N=20", "D=4"}, {8, 16}},  // M and N tails
      {{"B=1", "H=1", "M=16", "N=32", "D=8"}, {8, 16}},  // no tails, two key tiles
      {{"B=1", "H=1", "M=3", "N=5", "D=4"}, {4, 8}},     // one tile of each
  };
  for (Normalization n :
       {Normalization::AfterLoop, Normalization::EveryStep, Normalization::SecondLoop}) {
    for (const auto& [bindings, tiles] : sizes) {
      for (bool f32 : {false, true}) all.push_back(Case{bindings, tiles.first, tiles.second, n, f32});
    }
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Cases, NaiveAttention, ::testing::ValuesIn(cases()));

// The golden text of each form before and after the whole list.
class NaiveAttentionGolden : public ::testing::TestWithParam<Normalization> {};

TEST_P(NaiveAttentionGolden, BeforeAndAfterTheWholeList) {
  const driver::Compilation compilation =
      nautilus::testing::compile_asset("attention", {"B=1", "H=2", "M=13", "N=20", "D=4"});
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr naive =
      test_kernels::naive_attention(*compilation.program, 8, 16, GetParam());
  const std::string name = normalization_name(GetParam());
  nautilus::testing::expect_golden("rewrite/attention_" + name + "_before.txt",
                                   vrtile::print_module(*naive));
  nautilus::testing::expect_golden("rewrite/attention_" + name + "_after.txt",
                                   vrtile::print_module(*run_vr_rewrites(naive)));
}

INSTANTIATE_TEST_SUITE_P(Forms, NaiveAttentionGolden,
                         ::testing::Values(Normalization::AfterLoop, Normalization::EveryStep,
                                           Normalization::SecondLoop));

}  // namespace
}  // namespace nautilus::rewrite
