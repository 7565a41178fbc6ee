// int4 inputs end to end (core/support/dtype.h): weights packed two to a byte along their last
// axis, read by global loads that take a run of elements as its bytes and sign-extend each
// nibble, or one element through int4_at where the run is bounds-checked; every stage's
// interpreter against the float64 reference, and the generated CUDA compiled by NVRTC for every
// architecture (skipped when NVRTC is not installed; the text checks still run). The packed
// reads themselves run on the GPU in bench/fp8_gemm.py's validation (w4 rows).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "core/driver/pipeline.h"
#include "core/matile/printer.h"
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

// The asset (assets/specs/int4_weight_gemm.nt) at `sizes` under `decisions`, to MA tile IR.
driver::Compilation compile_asset(const std::vector<std::string>& sizes, const std::vector<std::string>& decisions) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  return testing::compile_scheduled("assets/specs/int4_weight_gemm.nt", decisions, sizes, options);
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

TEST(Int4, DecodeOnTensorCoresReadsSixteenBytesOfARowAndWidensNibblePairs) {
  // One to eight activation rows on the tensor cores (the swapped product), both operands loaded
  // straight into their fragments (one stage: no copy ring): the k steps interleave (8 steps: 32 neighbouring k, 16 bytes, a lane of a row of
  // W) and each byte's two nibbles become one bf16 pair.
  for (const std::string rows : {"1", "4", "8"}) {
    SCOPED_TRACE("M=" + rows);
    const std::vector<std::string> sizes = {"M=" + rows, "N=96", "K=512", "G=128", "KG=4"};
    const driver::Compilation compilation =
        compile_asset(sizes, {"tile(Y_sum, m=" + rows + ", n=32, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
                              "bind(Y_sum, m_o=grid.y, n_o=grid.x)", "launch(Y_sum, warps=2, stages=1)"});
    ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
    for (uint64_t seed : {4, 5}) {
      testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, "interleaved int4 ");
    }
    const std::string matile = matile::print_module(*compilation.ma_module);
    EXPECT_NE(matile.find("k interleaved by 8"), std::string::npos) << matile;
    // The product of 1 to 8 rows runs swapped: W's 16 columns an instruction's rows.
    EXPECT_NE(matile.find("mma.m16n8k16.swapped "), std::string::npos) << matile;
    const std::string kernels = kernels_of(testing::emitted_cuda(compilation));
    EXPECT_NE(kernels.find("mma_m16n8k16_swapped("), std::string::npos) << kernels;
    EXPECT_NE(kernels.find("*reinterpret_cast<const uint4*>(W + "), std::string::npos) << kernels;
    EXPECT_NE(kernels.find("unpack2(int4x2_to_bf16x2(bits_"), std::string::npos) << kernels;
    EXPECT_EQ(kernels.find("nautilus_device::int4_at(W, "), std::string::npos) << kernels;
    EXPECT_EQ(kernels.find("int8_to_bf16("), std::string::npos) << kernels;
    expect_compiles_for_every_arch(testing::emitted_cuda(compilation), "int4_decode_mma_m" + rows + ".cu");
  }
}

TEST(Int4, DecodeStagesPackedWeightsThroughTheCopyRing) {
  // A weight W[N, K] read straight into mma fragments joins the loop's cp.async ring as its
  // packed bytes (32 elements a 16-byte copy, zero-filled past K = 320 and past N = 96) when the
  // tile covers all of A's rows, and is read back a lane's run of neighbouring k at a time; the
  // MA interpreter runs the copies, waits and reads (with its race checks) against the float64
  // reference.
  for (const std::string rows : {"1", "16"}) {
    SCOPED_TRACE("M=" + rows);
    const std::vector<std::string> sizes = {"M=" + rows, "N=96", "K=320", "G=128", "KG=3"};
    const driver::Compilation compilation =
        compile_asset(sizes, {"tile(Y_sum, m=" + rows + ", n=64, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
                              "bind(Y_sum, m_o=grid.y, n_o=grid.x)", "launch(Y_sum, warps=4, stages=3)"});
    ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
    for (uint64_t seed : {6, 7}) {
      testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, "staged int4 ");
    }
    const std::string matile = matile::print_module(*compilation.ma_module);
    EXPECT_NE(matile.find("shared W_smem : int4[64, 128]"), std::string::npos) << matile;
    EXPECT_NE(matile.find("cp.async W_smem["), std::string::npos) << matile;
    const std::string kernels = kernels_of(testing::emitted_cuda(compilation));
    // Byte addresses are element offsets halved; a copy past the bounds moves valid / 2 bytes.
    EXPECT_NE(kernels.find(") / 2)"), std::string::npos) << kernels;
    EXPECT_NE(kernels.find("valid / 2);"), std::string::npos) << kernels;
    // One row or sixteen (A read from its own ring stage into interleaved fragments, not by
    // ldmatrix): a lane's 32 interleaved k of a row of W, 16 bytes.
    EXPECT_NE(kernels.find("= ld_shared_v4((W_smem_addr"), std::string::npos) << kernels;
    EXPECT_EQ(kernels.find("= ld_shared_u8((W_smem_addr"), std::string::npos) << kernels;
    EXPECT_NE(matile.find("k interleaved by 8"), std::string::npos) << matile;
    if (rows == "16") EXPECT_NE(matile.find("cp.async X_smem["), std::string::npos) << matile;
    EXPECT_NE(kernels.find("unpack2(int4x2_to_bf16x2(bits_"), std::string::npos) << kernels;
    EXPECT_EQ(kernels.find("*reinterpret_cast<const uint4*>(W + "), std::string::npos) << kernels;
    // W's tile rows are 64 bytes of a longer row: its copies ask the L2 for whole 128-byte lines;
    // X's rows of 128 bf16 (256 bytes) are whole lines already.
    std::istringstream copies(kernels);
    bool w_line = false, x_plain = false;
    for (std::string line; std::getline(copies, line);) {
      w_line |= line.find("cp_async_16_line((W_smem_addr") != std::string::npos;
      x_plain |= line.find("cp_async_16((X_smem_addr") != std::string::npos;
      EXPECT_EQ(line.find("cp_async_16_line((X_smem_addr"), std::string::npos) << line;
    }
    EXPECT_TRUE(w_line) << kernels;
    EXPECT_TRUE(x_plain) << kernels;
    expect_compiles_for_every_arch(testing::emitted_cuda(compilation), "int4_staged_m" + rows + ".cu");
  }
}

TEST(Int4, WeightsManyRowBlocksReadStayRegisterLoaded) {
  // A prefill's W tiles are read by every row block of A: they are not staged (only a tile that
  // covers all of A's rows streams its W once), and the kernel still matches the reference.
  const std::vector<std::string> sizes = {"M=64", "N=96", "K=256", "G=128", "KG=2"};
  const driver::Compilation compilation =
      compile_asset(sizes, {"tile(Y_sum, m=16, n=32, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
                            "bind(Y_sum, m_o=grid.y, n_o=grid.x)", "launch(Y_sum, warps=2, stages=3)"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 8, "prefill int4 ");
  const std::string matile = matile::print_module(*compilation.ma_module);
  EXPECT_EQ(matile.find("packed int4"), std::string::npos) << matile;
  EXPECT_EQ(matile.find("cp.async W_smem["), std::string::npos) << matile;
}

// int4x2_to_bf16x2's arithmetic (the prelude), on every byte: prmt's selected bytes, the lop3
// that keeps each nibble, flips its bit 3 and writes the exponent of 128 above it, and the
// subtraction of 136 give the two's-complement nibbles.
TEST(Int4, NibblePairWideningGivesEverySignedPair) {
  const auto byte_perm = [](uint32_t a, uint32_t b, uint32_t selector) {
    const uint64_t both = (static_cast<uint64_t>(b) << 32) | a;
    uint32_t out = 0;
    for (int i = 0; i < 4; ++i) out |= static_cast<uint32_t>((both >> (8 * ((selector >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return out;
  };
  const auto bf16 = [](uint32_t bits) {
    const uint32_t word = bits << 16;
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
  };
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const uint32_t word = byte << 8;  // byte 1 of the word: nibbles 2 and 3
    const uint32_t nibbles = byte_perm(word, word >> 4, 0x5511u);
    const uint32_t biased = (nibbles & 0x000F000Fu) ^ 0x43084308u;
    const int low = static_cast<int>(byte & 0xF) - ((byte & 0x8) ? 16 : 0);
    const int high = static_cast<int>(byte >> 4) - ((byte & 0x80) ? 16 : 0);
    EXPECT_EQ(bf16(biased & 0xFFFF) - 136.0f, static_cast<float>(low)) << byte;
    EXPECT_EQ(bf16(biased >> 16) - 136.0f, static_cast<float>(high)) << byte;
  }
}

}  // namespace
}  // namespace nautilus::codegen
