// The hand-built VR kernels (tests/vrtile/kernels.h) lowered to MA tile IR and run by the MA
// interpreter, thread by thread through shared memory and fragment layouts, against the VR
// interpreter and the float64 reference on random inputs, at sizes that are and are not
// multiples of the tiles.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/matile/printer.h"
#include "core/rewrite/operand_narrowing.h"
#include "tests/common/spec_test_util.h"
#include "tests/matile/matile_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_asset;
using nautilus::testing::compile_text;
using testing::check_lowering;
using testing::lower_or_fail;

TEST(Gemm, MmaPathMatchesVrBitForBit) {
  const driver::Compilation compilation = compile_asset("gemm", {"M=40", "N=48", "K=40"});
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr vr = vrtile::test_kernels::tiled_gemm(*compilation.program, 32, 32, 16);
  LowerOptions options;
  options.warps = 2;
  const ModulePtr ma = lower_or_fail(vr, options);
  ASSERT_TRUE(ma);
  const testing::Comparison result = check_lowering(compilation, vr, *ma, "C", /*exact=*/true);
  EXPECT_GT(result.ma.instructions.at("mma.m16n8k16"), 0u);
  EXPECT_GT(result.ma.instructions.at("cp.async"), 0u);
}

}  // namespace
}  // namespace nautilus::matile
