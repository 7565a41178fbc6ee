// The hand-built tiled kernels of tests/vrtile/kernels.h against the float64 spec reference and
// the scalar IR interpreter, on random inputs, at sizes that are and are not multiples of the
// tiles. GEMM with bf16 inputs must match the scalar interpreter bit for bit (same k order, and
// bf16 products are exact in f32); softmax and attention reassociate (online rescaling, one
// division after the loop), so they are held to the dtype's tolerance — also in f32 variants of
// the specs, where the tolerance is tight enough to catch a wrong repair factor.
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/scalar/interpreter.h"
#include "core/spec/reference.h"
#include "core/vrtile/interpreter.h"
#include "core/vrtile/verifier.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::vrtile {
namespace {

using testing::compile_asset;
using testing::compile_text;
using testing::f32_variant;

struct Sizes {
  std::vector<std::string> bindings;
  int64_t tile_a, tile_b, tile_c;  // the kernel's tile sizes, in its builder's argument order
};

void PrintTo(const Sizes& sizes, std::ostream* out) {
  for (const std::string& binding : sizes.bindings) *out << binding << " ";
  *out << "tiles " << sizes.tile_a << ", " << sizes.tile_b << ", " << sizes.tile_c;
}

// Runs `module` and the scalar program of `compilation` on the same random inputs and checks
// the VR output against the float64 reference (within the output dtype's tolerance) and against
// the scalar interpreter (bit for bit when `exact`). Returns the VR result.
InterpretResult check_against_references(const driver::Compilation& compilation,
                                         const Module& module, const std::string& output,
                                         bool exact) {
  EXPECT_EQ(verify(module), std::vector<std::string>{});
  const TensorMap inputs = spec::make_random_inputs(*compilation.spec, 7);
  InterpretResult result = interpret(module, inputs);
  EXPECT_TRUE(result.ok) << result.error;
  if (!result.ok) return result;
  const TensorData& actual = result.outputs.at(output);

  const spec::ReferenceResult reference = spec::evaluate_reference(*compilation.spec, inputs);
  EXPECT_TRUE(reference.ok) << reference.error;
  if (reference.ok) {
    const ErrorReport error = compare_tensors(actual, reference.tensors.at(output));
    EXPECT_LE(error.max_relative_error, tolerance(actual.dtype))
        << "worst element " << error.worst_index;
    EXPECT_EQ(error.mismatched_nonfinite, 0);
  }

  const scalar::InterpretResult scalar_result = scalar::interpret(*compilation.program, inputs);
  EXPECT_TRUE(scalar_result.ok) << scalar_result.error;
  if (scalar_result.ok) {
    const TensorData& expected = scalar_result.outputs.at(output);
    EXPECT_EQ(actual.shape, expected.shape);
    EXPECT_EQ(actual.dtype, expected.dtype);
    if (exact) {
      EXPECT_EQ(actual.values, expected.values);
    } else {
      EXPECT_LE(compare_tensors(actual, expected).max_relative_error, tolerance(actual.dtype));
    }
  }
  return result;
}

// (a) Tiled GEMM: grid over 8×8 tiles of C, a For over K tiles carrying the accumulator.

class TiledGemm : public ::testing::TestWithParam<Sizes> {};

TEST_P(TiledGemm, MatchesTheScalarInterpreterExactly) {
  const Sizes& sizes = GetParam();
  const driver::Compilation compilation = compile_asset("gemm", sizes.bindings);
  ASSERT_TRUE(compilation.ok());
  const ModulePtr module = test_kernels::tiled_gemm(*compilation.program, sizes.tile_a,
                                                    sizes.tile_b, sizes.tile_c);
  check_against_references(compilation, *module, "C", /*exact=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, TiledGemm,
    ::testing::Values(Sizes{{"M=13", "N=10", "K=24"}, 8, 8, 8},   // M and N tails
                      Sizes{{"M=16", "N=16", "K=20"}, 8, 8, 8},   // a K tail
                      Sizes{{"M=16", "N=24", "K=16"}, 8, 8, 8},   // no tails: no masks at all
                      Sizes{{"M=5", "N=7", "K=9"}, 16, 8, 4}));   // tiles larger than M

TEST(TiledGemm, StepsCountTheWorkOfEveryOp) {
  const driver::Compilation compilation = compile_asset("gemm", {"M=16", "N=24", "K=16"});
  ASSERT_TRUE(compilation.ok());
  const ModulePtr module = test_kernels::tiled_gemm(*compilation.program, 8, 8, 8);
  const InterpretResult result =
      interpret(*module, spec::make_random_inputs(*compilation.spec, 1));
  ASSERT_TRUE(result.ok) << result.error;
  // Per CTA (2 × 3 of them), without tails: before the loop two index ranges (an iota, a
  // broadcast and an add of 8 elements, a full and a mul of 1: 26 each), two [8, 8] broadcasts
  // and the accumulator's full (64 each) and the k iota (8) → 252; per k step the iteration (1),
  // the k range (18), two broadcasts and two loads of 64 and the dot's 512 multiply-adds → 787;
  // after the loop a cast, two broadcasts and a store of 64 elements → 256.
  EXPECT_EQ(result.steps, 6u * (252 + 2 * 787 + 256));
}

// (b) Softmax: online max and sum over column tiles, then a second pass writing Y.

TEST(OnlineSoftmax, MatchesTheReferenceWithTails) {
  const driver::Compilation compilation = compile_asset("softmax", {"R=7", "C=33"});
  ASSERT_TRUE(compilation.ok());
  check_against_references(compilation, *test_kernels::online_softmax(*compilation.program, 4, 16),
                           "Y", /*exact=*/false);
}

TEST(OnlineSoftmax, MatchesTheReferenceWithoutTails) {
  const driver::Compilation compilation = compile_asset("softmax", {"R=8", "C=32"});
  ASSERT_TRUE(compilation.ok());
  check_against_references(compilation, *test_kernels::online_softmax(*compilation.program, 4, 8),
                           "Y", /*exact=*/false);
}

TEST(OnlineSoftmax, MatchesTheReferenceInF32) {
  const driver::Compilation compilation = compile_text(f32_variant("softmax"), {"R=7", "C=33"});
  ASSERT_TRUE(compilation.ok());
  check_against_references(compilation, *test_kernels::online_softmax(*compilation.program, 4, 16),
                           "Y", /*exact=*/false);
}

// (c) FlashAttention forward: grid (b, h, m tiles), one For over key tiles carrying max, sum and
// accumulator, delayed normalization.

class FlashAttention : public ::testing::TestWithParam<Sizes> {};

TEST_P(FlashAttention, MatchesTheReference) {
  const Sizes& sizes = GetParam();
  const driver::Compilation compilation = compile_asset("attention", sizes.bindings);
  ASSERT_TRUE(compilation.ok());
  const ModulePtr module =
      test_kernels::flash_attention(*compilation.program, sizes.tile_a, sizes.tile_b);
  check_against_references(compilation, *module, "O", /*exact=*/false);
}

TEST_P(FlashAttention, MatchesTheReferenceInF32) {
  const Sizes& sizes = GetParam();
  const driver::Compilation compilation = compile_text(f32_variant("attention"), sizes.bindings);
  ASSERT_TRUE(compilation.ok());
  const ModulePtr module =
      test_kernels::flash_attention(*compilation.program, sizes.tile_a, sizes.tile_b);
  check_against_references(compilation, *module, "O", /*exact=*/false);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, FlashAttention,
    ::testing::Values(
        Sizes{{"B=1", "H=2", "M=13", "N=20", "D=4"}, 8, 16, 0},  // the golden kernel
        Sizes{{"B=2", "H=2", "M=12", "N=20", "D=8"}, 8, 8, 0},   // M and N tails
        Sizes{{"B=1", "H=1", "M=16", "N=32", "D=8"}, 8, 16, 0},  // no tails, several key tiles
        Sizes{{"B=1", "H=1", "M=3", "N=5", "D=4"}, 4, 8, 0}));   // one tile of each

}  // namespace
}  // namespace nautilus::vrtile
