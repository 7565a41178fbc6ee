// The CUDA-core dot (FmaDot, for what mma.sync cannot take: f32 operands, an N that is no
// multiple of 8; the router's 8 experts, which mma.sync takes as one n8 atom per warp, are
// lowered here with mma turned off, the form for comparisons): slots run in groups that share the
// k loop and their B loads, and A is read 16 bytes at a time along k where its rows allow; NVRTC
// compiles every form. tests/gpu/fma_dot_on_gpu_test.cpp runs such kernels against the
// unscheduled lowering.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/driver/pipeline.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::codegen {
namespace {

// The router's gate logits G = X Wr over 8 experts, split 16 ways along k (the schedule the
// search finds for bench/variants/router_softmax_combine.nt).
const std::vector<std::string> kRouterSchedule = {
    "rolling_update(Y_sum, e, tile=8)", "split_k_update(G, k, splits=4)",
    "split_k_update(G_part, k, splits=4)", "bind(Y_sum_acc, t=grid.x)",
    "reverse_compute_at(Y, Y_sum, t)", "compute_at(G, Mx, e_o)", "compute_at(G_part, G, e_o)",
    "tile(G_part_part, t=64)", "bind(G_part_part, k_s2=grid.z, k_s=grid.y, t_o=grid.x)"};

constexpr const char* kGemmF32 = R"(let M = 200, N = 136, K = 264
input A[M, K] : f32
input B[K, N] : f32
output C[m, n] : f32 = sum(k) A[m, k] * B[k, n]
)";

std::string emitted(const driver::Compilation& compilation) { return testing::emitted_cuda(compilation); }

void expect_compiles(const std::string& source, const std::string& name) {
  const Result<std::shared_ptr<const Nvrtc>>& nvrtc = Nvrtc::shared();
  if (!nvrtc) return;  // the text checks above still ran
  NvrtcOptions options;
  options.arch = GpuArch::Sm90a;
  const Result<CompiledProgram> compiled = (*nvrtc)->compile(source, name, options);
  EXPECT_TRUE(compiled) << name << ": " << compiled.error().message;
}

driver::CompileOptions sm90a(const std::vector<std::string>& sizes) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = "sm_90a";
  options.matile.use_mma = false;
  std::string error;
  for (const std::string& size : sizes) options.sizes.push_back(*spec::parse_size_override(size, &error));
  return options;
}

// 128 columns of k per split (H = 2048): bf16 rows of A read as uint4 (8 elements), the four
// slots of a thread in one k loop with one B column between them.
TEST(FmaDotEmit, RowsOfAAreReadSixteenBytesAtATime) {
  const std::string source = emitted(testing::compile_scheduled(
      "bench/variants/router_softmax_combine.nt", kRouterSchedule, {"T=200", "H=2048"},
      sm90a({})));
  ASSERT_FALSE(source.empty());
  EXPECT_NE(source.find("for (int k = 0; k < 128; k += 8) {"), std::string::npos) << source;
  EXPECT_NE(source.find("const uint4 a3_bits = *reinterpret_cast<const uint4*>(&G_part_part_a["),
            std::string::npos)
      << source;
  EXPECT_EQ(source.find("float b1["), std::string::npos) << "the slots share their B column";
  expect_compiles(source, "router_2048.cu");
}

// The staging of X into the dot's scratch: each thread's runs of 4 neighbouring bf16 (the
// kernel's blocked layout) go in as one 8-byte st.shared, not 4 stores of 2 bytes.
TEST(FmaDotEmit, StagedOperandsAreStoredInRunsOfEightBytes) {
  const std::string source = emitted(testing::compile_scheduled(
      "bench/variants/router_softmax_combine.nt", kRouterSchedule, {"T=200", "H=2048"},
      sm90a({})));
  ASSERT_FALSE(source.empty());
  EXPECT_NE(source.find("*reinterpret_cast<uint2*>(&G_part_part_a["), std::string::npos) << source;
  EXPECT_NE(source.find("= make_uint2(pack2(X_1[0], X_1[1]), pack2(X_1[2], X_1[3]));"), std::string::npos)
      << source;
  EXPECT_EQ(source.find("] = X_1[s];"), std::string::npos) << "no per-element store of X left";
}

// Rows of 33 bf16 (H = 520): runs are not aligned to 8 bytes, so the staging stores element by
// element.
TEST(FmaDotEmit, StagedOperandsOfRaggedRowsAreStoredPerElement) {
  const std::string source = emitted(testing::compile_scheduled(
      "bench/variants/router_softmax_combine.nt", kRouterSchedule, {"T=1000", "H=520"},
      sm90a({})));
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(source.find("*reinterpret_cast<uint2*>(&G_part_part_a["), std::string::npos) << source;
  EXPECT_NE(source.find("for (int s = 0; s < 33; ++s) {\n    G_part_part_a["), std::string::npos) << source;
}

// 33 columns per split (H = 520): rows of 33 bf16 are not 16-byte multiples, so A is read an
// element at a time; the slots still share the loop.
TEST(FmaDotEmit, RaggedRowsReadOneElementAtATime) {
  const std::string source = emitted(testing::compile_scheduled(
      "bench/variants/router_softmax_combine.nt", kRouterSchedule, {"T=1000", "H=520"},
      sm90a({})));
  ASSERT_FALSE(source.empty());
  EXPECT_NE(source.find("for (int k = 0; k < 33; k += 1) {"), std::string::npos) << source;
  EXPECT_EQ(source.find("a0_bits"), std::string::npos) << source;
  expect_compiles(source, "router_520.cu");
}

// Rows of A of 256 bf16 (512 bytes, H = 4096): rows whose pitch is a multiple of 128 bytes
// would start in the same banks, and the four rows a warp reads at one k would cost four
// wavefronts, so the scratch pads each row by 16 bytes (pitch 264); the padded kernel still
// matches the float64 reference in the MA interpreter. Rows of 33 bf16 (H = 520) stay unpadded.
TEST(FmaDotEmit, RowsOfAWhosePitchIsAMultipleOf128BytesArePadded) {
  const driver::Compilation padded = testing::compile_scheduled(
      "bench/variants/router_softmax_combine.nt", kRouterSchedule, {"T=72", "H=4096"}, sm90a({}));
  const std::string source = emitted(padded);
  ASSERT_FALSE(source.empty());
  EXPECT_NE(source.find("operand a of fma dot %G_part_part, rows padded by 16 bytes"), std::string::npos)
      << source;
  EXPECT_NE(source.find(") * 264 + "), std::string::npos) << source;
  EXPECT_NE(source.find("const uint4 a0_bits = *reinterpret_cast<const uint4*>(&G_part_part_a["),
            std::string::npos)
      << "the padded rows are still read 16 bytes at a time";
  testing::expect_stage_matches_reference(padded, driver::Stage::MATile, 7, "padded rows of A");
  expect_compiles(source, "router_4096.cu");

  const std::string ragged = emitted(testing::compile_scheduled(
      "bench/variants/router_softmax_combine.nt", kRouterSchedule, {"T=1000", "H=520"},
      sm90a({})));
  EXPECT_EQ(ragged.find("rows padded"), std::string::npos) << ragged;
}

// f32 operands (no mma.sync): 4 floats per vector load, 16 slots in 4 groups of 4.
TEST(FmaDotEmit, F32OperandsReadFourFloatsAndGroupSlots) {
  const std::string source = emitted(testing::compile_scheduled(
      std::make_shared<SourceFile>("gemm_f32.nt", kGemmF32),
      {"tile(C, m=64, n=32, k=32)", "bind(C, m_o=grid.y, n_o=grid.x)"}, {}, sm90a({})));
  ASSERT_FALSE(source.empty());
  EXPECT_NE(source.find("for (int g = 0; g < 4; ++g) {"), std::string::npos) << source;
  EXPECT_NE(source.find("for (int k = 0; k < 32; k += 4) {"), std::string::npos) << source;
  expect_compiles(source, "gemm_f32.cu");
}

}  // namespace
}  // namespace nautilus::codegen
