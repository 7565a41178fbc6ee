// Layout synthesis (lower_layout_synthesis.cpp): the register layouts the first-wins rules give,
// improved by pinning values to the layouts their consumers want wherever the cost model prices
// the kernel lower. Checked: the row kernels whose carried statistics the rules left in a
// blocked default lose their shared-memory conversions and still match the float64 reference;
// no kernel of any asset is priced above the rules; what was pinned and what was rejected is
// said.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_scheduled;
using nautilus::testing::count_ops;
using nautilus::testing::hand_schedule;

driver::Compilation compile_asset(const std::string& asset, const std::vector<std::string>& sizes,
                                  bool synthesize, const std::string& arch = "sm_80", bool explain = false) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = arch;
  options.matile.synthesize_layouts = synthesize;
  options.matile.explain_layouts = explain;
  return compile_scheduled("assets/specs/" + asset + ".nt", hand_schedule(asset), sizes, options);
}

int shared_conversions(const driver::Compilation& compilation) {
  int count = 0;
  for (const KernelPtr& kernel : compilation.ma_module->kernels) {
    count += nautilus::testing::count_ops(
        *kernel->body, [](const Op& op) { return op.kind == OpKind::ConvertLayout && op.via_shared; });
  }
  return count;
}

TEST(LayoutSynthesis, RowStatisticsCarriedFromAConstantKeepTheReduceLayout) {
  // LayerNorm's statistics and softmax's running max and sum start from constants: the rules
  // place the loop's block argument first, in the blocked default, and every use after the loop
  // converts through shared memory. Synthesis pins the carried values to the reduce's layout.
  for (const std::string asset : {"layernorm", "softmax", "logsumexp"}) {
    SCOPED_TRACE(asset);
    const std::vector<std::string> sizes =
        asset == "layernorm" ? std::vector<std::string>{"T=5", "H=3000"} : std::vector<std::string>{"R=5", "C=3000"};
    const driver::Compilation rules = compile_asset(asset, sizes, false);
    const driver::Compilation synthesized = compile_asset(asset, sizes, true);
    ASSERT_TRUE(rules.ok()) << rules.schedule_error << rules.internal_error;
    ASSERT_TRUE(synthesized.ok()) << synthesized.schedule_error << synthesized.internal_error;
    EXPECT_GT(shared_conversions(rules), 0);
    EXPECT_EQ(shared_conversions(synthesized), 0);
    double rules_cost = 0, cost = 0;
    for (const KernelPtr& kernel : synthesized.ma_module->kernels) {
      rules_cost += kernel->layout_cost_rules;
      cost += kernel->layout_cost;
    }
    EXPECT_LT(cost, rules_cost);
    nautilus::testing::expect_stage_matches_reference(synthesized, driver::Stage::MATile, 2, asset + " ");
  }
}

TEST(LayoutSynthesis, NoKernelOfAnyAssetIsPricedAboveTheRules) {
  for (const std::string& asset : nautilus::testing::asset_names()) {
    for (const std::string arch : {"sm_80", "sm_90a"}) {
      SCOPED_TRACE(asset + " " + arch);
      const driver::Compilation compiled = compile_asset(asset, {}, true, arch);
      ASSERT_TRUE(compiled.ok()) << compiled.schedule_error << compiled.internal_error;
      double priced = 0;  // a kernel of scalars only (LayerNorm's per-row finish) costs nothing
      for (const KernelPtr& kernel : compiled.ma_module->kernels) {
        EXPECT_LE(kernel->layout_cost, kernel->layout_cost_rules) << kernel->name;
        priced += kernel->layout_cost_rules;
      }
      EXPECT_GT(priced, 0);
    }
  }
}

TEST(LayoutSynthesis, SaysWhatItPinnedAndWhatItConsidered) {
  const driver::Compilation compiled = compile_asset("layernorm", {"T=8", "H=2048"}, true, "sm_80", true);
  ASSERT_TRUE(compiled.ok()) << compiled.schedule_error << compiled.internal_error;
  bool pinned = false, considered = false, reason = false;
  for (const KernelPtr& kernel : compiled.ma_module->kernels) {
    for (const std::string& note : kernel->notes) {
      pinned |= note.find("layout synthesis: register layouts cost") != std::string::npos &&
                note.find("pinned %Mu_sum") != std::string::npos;
      considered |= note.find("layout synthesis: considered %") != std::string::npos;
      reason |= note.find("synthesis: ") != std::string::npos && note.find("instead of the rules' blocked") != std::string::npos;
    }
  }
  EXPECT_TRUE(pinned);
  EXPECT_TRUE(considered);
  EXPECT_TRUE(reason);
  // Without synthesis, nothing is pinned and no note says so.
  const driver::Compilation rules = compile_asset("layernorm", {"T=8", "H=2048"}, false, "sm_80", false);
  ASSERT_TRUE(rules.ok());
  for (const KernelPtr& kernel : rules.ma_module->kernels) {
    for (const std::string& note : kernel->notes) EXPECT_EQ(note.find("layout synthesis"), std::string::npos) << note;
    EXPECT_EQ(kernel->layout_cost, kernel->layout_cost_rules);
  }
}

}  // namespace
}  // namespace nautilus::matile
