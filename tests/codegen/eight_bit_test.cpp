// The 8-bit tensor dtypes (fp8e4m3, fp8e5m2, int8) end to end: stores that quantize with a
// scale and saturate, dots whose operands are 8-bit tensors (widened exactly to bf16 for
// mma.sync, or converted to f32 for the CUDA-core FMA dot beside an f32 input), each stage's
// interpreter against the float64 reference, and the generated CUDA compiled by NVRTC for every
// architecture (skipped when NVRTC is not installed; the text checks still run).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/driver/pipeline.h"
#include "tests/common/golden.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::codegen {
namespace {

using testing::expect_compiles_for_every_arch;
using testing::expect_every_stage_matches;
using testing::kernels_of;

// Quantization as the spec language writes it: a store with a declared 8-bit dtype. The scales
// push part of every output beyond its type's range (|X| < 1: 600 > 448, 9e4 > 57344,
// 200 > 127), so saturation is exercised too.
constexpr const char* kQuantize = R"(let M = 37, N = 19
input X[M, N] : f32
input S[1] : f32
output Q4[i, j] : fp8e4m3 = X[i, j] * S[0] * 600
output Q5[i, j] : fp8e5m2 = X[i, j] * S[0] * 90000
output Q8[i, j] : int8 = X[i, j] * 200
output R[i, j] : bf16 = X[i, j] * 2
)";

// Dequantize and use: an fp8 matrix times an f32 input (the CUDA-core dot: an f32 input is
// never rounded to 16 bits) and an e5m2 x int8 product (both widened to bf16 for mma.sync).
constexpr const char* kFmaDot = R"(let M = 45, N = 24, K = 40
input A[M, K] : fp8e5m2
input X[K, N] : f32
output C[m, n] : bf16 = sum(k) A[m, k] * X[k, n]
)";

constexpr const char* kMixedMma = R"(let M = 64, N = 64, K = 64
input A[M, K] : fp8e5m2
input W[K, N] : int8
input S[1] : f32
output C[m, n] : f32 = (sum(k) A[m, k] * W[k, n]) * S[0]
)";

driver::Compilation compile_to_matile(const std::string& text,
                                      const std::vector<std::string>& decisions) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  return testing::compile_scheduled(std::make_shared<SourceFile>("inline.nt", text), decisions, {},
                                    options);
}

std::string emitted(const driver::Compilation& compilation) { return testing::emitted_cuda(compilation); }




TEST(EightBit, QuantizingStoresSaturateAndMatchTheReferenceAtEveryStage) {
  for (bool scheduled : {false, true}) {
    const std::vector<std::string> decisions =
        scheduled ? std::vector<std::string>{"tile(Q4, i=16, j=16)", "bind(Q4, i_o=grid.y, j_o=grid.x)"}
                  : std::vector<std::string>{};
    const driver::Compilation compilation = compile_to_matile(kQuantize, decisions);
    ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
    expect_every_stage_matches(compilation, scheduled ? "scheduled" : "unscheduled");
    const std::string source = emitted(compilation);
    const std::string kernels = kernels_of(source);
    EXPECT_NE(kernels.find("__nv_fp8_storage_t* __restrict__ Q4"), std::string::npos) << kernels;
    EXPECT_NE(kernels.find("signed char* __restrict__ Q8"), std::string::npos);
    EXPECT_NE(kernels.find("nautilus_device::float_to_fp8e4m3("), std::string::npos);
    EXPECT_NE(kernels.find("nautilus_device::float_to_fp8e5m2("), std::string::npos);
    EXPECT_NE(kernels.find("nautilus_device::float_to_int8("), std::string::npos);
    EXPECT_NE(source.find("#include <cuda_fp8.h>"), std::string::npos);
    expect_compiles_for_every_arch(source, "quantize.cu");
  }
}

TEST(EightBit, Fp8TimesF32InputRunsOnCudaCores) {
  const driver::Compilation compilation =
      compile_to_matile(kFmaDot, {"tile(C_sum, m=32, n=16, k=16)",
                                  "reverse_compute_at(C, C_sum, n_o)",
                                  "bind(C_sum, m_o=grid.y, n_o=grid.x)"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  expect_every_stage_matches(compilation, "fp8 x f32");
  const std::string kernels = kernels_of(emitted(compilation));
  EXPECT_NE(kernels.find("fma dot"), std::string::npos) << kernels;
  EXPECT_EQ(kernels.find("mma_m16n8k16("), std::string::npos);
  EXPECT_NE(kernels.find("nautilus_device::fp8e5m2_to_float("), std::string::npos);
  expect_compiles_for_every_arch(emitted(compilation), "fp8_fma_dot.cu");
}

TEST(EightBit, Fp8TimesInt8WidensBothToBf16ForTensorCores) {
  const driver::Compilation compilation =
      compile_to_matile(kMixedMma, {"tile(C_sum, m=32, n=32, k=32)",
                                    "reverse_compute_at(C, C_sum, n_o)",
                                    "bind(C_sum, m_o=grid.y, n_o=grid.x)"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  // Exact widening: the f32 output keeps f32's tolerance.
  expect_every_stage_matches(compilation, "fp8 x int8");
  const std::string kernels = kernels_of(emitted(compilation));
  EXPECT_NE(kernels.find("mma_m16n8k16("), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("__float2bfloat16_rn(nautilus_device::fp8e5m2_to_float("),
            std::string::npos);
  EXPECT_NE(kernels.find("nautilus_device::int8_to_bf16("), std::string::npos);
  expect_compiles_for_every_arch(emitted(compilation), "fp8_int8_mma.cu");
}

// tests/spec/data/eight_bit_types.nt: every 8-bit dtype as an input, a stored intermediate and
// an output (quantize, requantize, dequantize per group, an fp8 sum), across several kernels.
TEST(EightBit, EveryTypeAsInputIntermediateAndOutput) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  const driver::Compilation compilation = testing::compile_scheduled(
      "tests/spec/data/eight_bit_types.nt", {}, {"M=19", "N=12", "G=5", "NG=3"}, options);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  expect_every_stage_matches(compilation, "eight_bit_types");
  expect_compiles_for_every_arch(emitted(compilation), "eight_bit_types.cu");
}

// The fp8 GEMM asset with its hand schedule: both fp8 operands widened to bf16 in registers and
// multiplied by mma.sync (sm_80; and sm_90a without warp_spec, or with B stored [K, N], which
// wgmma's 8-bit form cannot read).
TEST(EightBit, Fp8GemmAssetUsesMmaSyncOnWidenedOperands) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  const driver::Compilation compilation = testing::compile_scheduled(
      "assets/specs/fp8_gemm.nt", testing::hand_schedule("fp8_gemm"),
      {"M=130", "N=129", "K=72"}, options);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 5, "fp8_gemm ");
  const std::string kernels = kernels_of(emitted(compilation));
  EXPECT_NE(kernels.find("mma_m16n8k16("), std::string::npos);
  EXPECT_NE(kernels.find("const __nv_fp8_storage_t* __restrict__ A"), std::string::npos);
  EXPECT_NE(kernels.find("__float2bfloat16_rn(nautilus_device::fp8e4m3_to_float("),
            std::string::npos);
}

// The K-major fp8 GEMM (torch._scaled_mm's layout) with its warp-specialized hand schedule on
// sm_90a: wgmma's 8-bit form on the TMA-copied bytes, e4m3 x e4m3 and e5m2 x e4m3, compiled by
// NVRTC (whose Hopper gate refuses serialized wgmmas and spills) into PTX that holds the k32
// instruction and the bulk tensor copies.
TEST(EightBit, Fp8GemmNtCompilesToEightBitWgmmaForSm90a) {
  for (const auto& [a, ptx] : {std::pair{"fp8e4m3", "m64n256k32.f32.e4m3.e4m3"},
                               std::pair{"fp8e5m2", "m64n256k32.f32.e5m2.e4m3"}}) {
    SCOPED_TRACE(ptx);
    std::string text = testing::read_text(testing::source_path("assets/specs/fp8_gemm_nt.nt"));
    text.replace(text.find("A[M, K] : fp8e4m3"), 17, std::string("A[M, K] : ") + a);
    driver::CompileOptions options;
    options.last_stage = driver::Stage::MATile;
    options.matile.arch = "sm_90a";
    const driver::Compilation compilation =
        testing::compile_scheduled(std::make_shared<SourceFile>("fp8_gemm_nt.nt", text),
                                   testing::hand_schedule("fp8_gemm_nt"), {"M=200", "N=264", "K=400"}, options);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
    const std::string source = emitted(compilation);
    const std::string kernels = kernels_of(source);
    const std::string instruction = std::string("wgmma.mma_async.sync.aligned.") + ptx;
    EXPECT_NE(source.find(instruction + " {%0,"), std::string::npos);
    // Four k32 steps of the 128-wide k tile, no transpose operands, no widening.
    EXPECT_NE(source.find(", p, 1, 1;"), std::string::npos);
    EXPECT_EQ(kernels.find("fp8e4m3_to_float("), std::string::npos);
    const Result<std::shared_ptr<const Nvrtc>>& nvrtc = Nvrtc::shared();
    if (!nvrtc) GTEST_SKIP() << "skipped: " << nvrtc.error().message;
    NvrtcOptions nvrtc_options;
    nvrtc_options.arch = GpuArch::Sm90a;
    const Result<CompiledProgram> compiled = (*nvrtc)->compile(source, "fp8_gemm_nt.cu", nvrtc_options);
    ASSERT_TRUE(compiled) << compiled.error().message;
    EXPECT_NE(compiled->ptx.find(instruction), std::string::npos);
    EXPECT_NE(compiled->ptx.find("cp.async.bulk.tensor.2d"), std::string::npos);
    EXPECT_FALSE(compiled->report.any_spills());
  }
}

}  // namespace
}  // namespace nautilus::codegen
