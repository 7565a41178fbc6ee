// Text, DOT and JSON forms of MA tile IR: the lowered GEMM and FlashAttention kernels against
// golden files under tests/golden/matile (NAUTILUS_UPDATE_GOLDEN=1 rewrites them), and the
// JSON's structure.
#include "core/matile/printer.h"

#include <gtest/gtest.h>

#include "core/rewrite/operand_narrowing.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"
#include "tests/matile/matile_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_asset;
using nautilus::testing::expect_golden;
using testing::lower_or_fail;

ModulePtr lowered_gemm() {
  const driver::Compilation compilation = compile_asset("gemm", {"M=40", "N=48", "K=40"});
  EXPECT_TRUE(compilation.ok());
  LowerOptions options;
  options.warps = 2;
  return lower_or_fail(vrtile::test_kernels::tiled_gemm(*compilation.program, 32, 32, 16), options);
}

// FlashAttention with P rounded to bf16 (rewrite::narrow_dot_operands), so both dots run on
// mma.sync and S's accumulator becomes P's A fragment in registers.
ModulePtr lowered_attention() {
  const driver::Compilation compilation =
      compile_asset("attention", {"B=1", "H=1", "M=40", "N=40", "D=16"});
  EXPECT_TRUE(compilation.ok());
  const vrtile::ModulePtr vr = rewrite::narrow_dot_operands(
      vrtile::test_kernels::flash_attention(*compilation.program, 32, 16));
  LowerOptions options;
  options.warps = 2;
  return lower_or_fail(vr, options);
}

TEST(Printer, GemmGolden) {
  const ModulePtr module = lowered_gemm();
  ASSERT_TRUE(module);
  expect_golden("matile/gemm.txt", print_module(*module));
}

TEST(Printer, AttentionGoldens) {
  const ModulePtr module = lowered_attention();
  ASSERT_TRUE(module);
  expect_golden("matile/attention.txt", print_module(*module));
  expect_golden("matile/attention.dot", module_to_dot(*module));
}

TEST(Printer, JsonCarriesLayoutsAllocationsAndInstructions) {
  const ModulePtr module = lowered_gemm();
  ASSERT_TRUE(module);
  const nlohmann::ordered_json json = module_to_json(*module);
  EXPECT_EQ(json["arch"], "sm_80");
  const auto& kernel = json["kernels"][0];
  EXPECT_EQ(kernel["warps"], 2);
  ASSERT_FALSE(kernel["layouts"].empty());
  EXPECT_EQ(kernel["layouts"][0]["id"], "#L0");
  ASSERT_EQ(kernel["shared"].size(), 2u);
  EXPECT_EQ(kernel["shared"][0]["stages"], 2);
  bool saw_mma = false, saw_pipeline = false;
  for (const auto& op : kernel["body"]) {
    if (op["kind"] == "for") {
      saw_pipeline = op["pipeline_stages"] == 2;
      for (const auto& inner : op["body"]) {
        if (inner["kind"] == "mma") {
          saw_mma = true;
          EXPECT_EQ(inner["instruction"], "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
        }
      }
    }
  }
  EXPECT_TRUE(saw_mma);
  EXPECT_TRUE(saw_pipeline);
  // Each op carries its text line, so views can show it without re-printing.
  EXPECT_NE(json.dump().find("cp.async.commit_group"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::matile
