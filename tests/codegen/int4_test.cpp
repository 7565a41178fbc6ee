// int4 inputs end to end (core/support/dtype.h): weights packed two to a byte along their last
// axis, read by global loads that take a run of elements as its bytes and sign-extend each
// nibble, or one element through int4_at where the run is bounds-checked; every stage's
// interpreter against the float64 reference, and the generated CUDA compiled by NVRTC for every
// architecture (skipped when NVRTC is not installed; the text checks still run). The packed
// reads themselves run on the GPU in bench/fp8_gemm.py's validation (w4 rows).
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "core/driver/pipeline.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::codegen {
namespace {

using testing::expect_compiles_for_every_arch;
using testing::expect_every_stage_matches;
using testing::kernels_of;

// A decode step: one activation row times nn.Linear's int4 weights [N, K], packed along K, with
// one scale per group of 128 weights. N and K leave remainder tiles.
constexpr const char* kDecode = R"(let N = 40, K = 300, G = 128, KG = 3
input X[K] : bf16
input W[N, K] : int4
input S[KG, N] : bf16
output Y[n] : bf16 = sum(k) X[k] * W[n, k] * S[k / G, n]
)";

driver::Compilation compile_to_matile(const std::string& text, const std::vector<std::string>& decisions) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  return testing::compile_scheduled(std::make_shared<SourceFile>("inline.nt", text), decisions, {}, options);
}




TEST(Int4, DecodeReadsPackedRunsAndMatchesTheReferenceAtEveryStage) {
  const driver::Compilation compilation =
      compile_to_matile(kDecode, {"tile(Y_sum, n=16, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
                                  "bind(Y_sum, n_o=grid.x)"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  expect_every_stage_matches(compilation, "int4 decode");
  const std::string source = testing::emitted_cuda(compilation);
  const std::string kernels = kernels_of(source);
  // The buffer is the packed bytes; the register tile a signed byte an element.
  EXPECT_NE(kernels.find("const unsigned char* __restrict__ W"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("signed char W_"), std::string::npos) << kernels;
  // Whole in-bounds runs as their bytes (4 elements: one 16-bit read), each nibble
  // sign-extended from the word's top; the checked tail tile element by element.
  EXPECT_NE(kernels.find("*reinterpret_cast<const unsigned short*>(W + "), std::string::npos) << kernels;
  EXPECT_NE(kernels.find(" << 28) >> 28)"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find(" << 16) >> 28)"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("nautilus_device::int4_at(W, "), std::string::npos) << kernels;
  expect_compiles_for_every_arch(source, "int4_decode.cu");
}

TEST(Int4, UnscheduledProgramReadsOneElementAtATime) {
  // One element a thread: scalar values, each read through int4_at and widened on its own.
  const driver::Compilation compilation = compile_to_matile(kDecode, {});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  expect_every_stage_matches(compilation, "unscheduled int4");
  const std::string source = testing::emitted_cuda(compilation);
  EXPECT_NE(kernels_of(source).find("nautilus_device::int4_at(W, "), std::string::npos) << source;
  expect_compiles_for_every_arch(source, "int4_unscheduled.cu");
}

TEST(Int4, WeightGemmWidensToBf16ForTensorCoresAndNeverStagesPackedBytes) {
  const std::vector<std::string> sizes = {"M=70", "N=72", "K=140", "G=128", "KG=2"};
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  for (const std::string& arch : {"sm_80", "sm_90a"}) {
    options.matile.arch = arch;
    const driver::Compilation compilation = testing::compile_scheduled(
        "assets/specs/int4_weight_gemm.nt", {"tile(Y_sum, m=64, n=64, k=32)", "reverse_compute_at(Y, Y_sum, n_o)",
               "bind(Y_sum, m_o=grid.y, n_o=grid.x)", "launch(Y_sum, warps=4, stages=3)"},
        sizes, options);
    ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
    testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 3, arch + " ");
    const std::string kernels = kernels_of(testing::emitted_cuda(compilation));
    EXPECT_NE(kernels.find("mma_m16n8k16("), std::string::npos) << kernels;
    EXPECT_NE(kernels.find("nautilus_device::int8_to_bf16("), std::string::npos) << kernels;
    // W, packed, is never copied by cp.async (its bytes are not the tile's): it is loaded and
    // unpacked in registers.
    std::istringstream lines(kernels);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("cp_async") != std::string::npos) EXPECT_EQ(line.find("(W + "), std::string::npos) << line;
    }
    EXPECT_TRUE(kernels.find(" >> 28)") != std::string::npos ||
                kernels.find("nautilus_device::int4_at(W, ") != std::string::npos)
        << kernels;
    expect_compiles_for_every_arch(testing::emitted_cuda(compilation), "int4_gemm_" + arch + ".cu");
  }
}

}  // namespace
}  // namespace nautilus::codegen
