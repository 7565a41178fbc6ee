// Every asset spec with its hand-written schedule, at its own (realistic) sizes, through the
// whole pipeline — tilize, VR rewrites, placement (for each arch, as `nautilus compile --arch`
// lowers), the CUDA emitter — and NVRTC for sm_80 and sm_90a: every kernel gets a cubin, and
// none spills registers (the bf16 attention kernels at d = 64 and d = 128, GEMM and the rest)
// beyond its case's budget. Skips when NVRTC is not installed.
#include <gtest/gtest.h>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/driver/pipeline.h"
#include "core/sched/decision.h"
#include <cctype>

#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::codegen {
namespace {

using testing::source_path;

struct Case {
  std::string asset;
  std::vector<std::string> sizes;
  // Bytes of spill stores (and loads) allowed per kernel. Zero except for the attention
  // kernels at d = 128 on 4 warps (FlashAttention-2's shape: 32 query rows per warp): they sit at
  // the 255-register cap with 128 registers of output accumulator, and ptxas keeps a few
  // loop-invariant K/V copy addresses in local memory (24 bytes for attention and GQA),
  // reloaded once per key tile from L1. Measured on an H100 (bench/NOTES.md, 2026-11-22): this
  // shape runs in 838 us against 1022 us for the spill-free 8-warp one. Causal attention's key
  // loop is split in two (matile/split_masked.h), so its body is compiled twice and each spill
  // instruction counts once per copy: up to 352 bytes of loads on sm_80, 212 on sm_90a, while
  // at run time the kernel reloads less than before the split (ncu on the H100, B8 H16 S2048:
  // 141 MB of local loads instead of 217, 531.9 us instead of 561.6).
  int spill_budget = 0;
  // The archs the schedule is for. fp8_gemm_nt's hand schedule is Hopper's warp-specialized form
  // (128 x 256 x 128 tiles on 8-bit wgmma): on sm_80 its warp_spec becomes plain warps on
  // mma.sync, whose fp8 tiles widened in registers spill at any k step of 64 or more (an sm_80
  // schedule of an fp8 GEMM is fp8_gemm.json's 64 x 64 x 16).
  std::vector<GpuArch> archs = all_archs();
};

std::string case_name(const Case& c) {
  std::string name = c.asset;
  for (const std::string& size : c.sizes) {
    for (char ch : size) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return name;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const std::string& asset : testing::asset_names()) {
    // attention_one_statement lowers to the same fused kernel as attention (its repeated
    // score reductions are one temporary).
    const bool d128_attention = asset == "attention" || asset == "gqa_attention" ||
                                asset == "causal_attention" || asset == "attention_one_statement";
    Case c{asset, {}, asset == "causal_attention" ? 400 : d128_attention ? 160 : 0};
    if (asset == "fp8_gemm_nt") c.archs = {GpuArch::Sm90a};
    all.push_back(c);
  }
  // The head dimension the assets do not use by default.
  all.push_back({"attention", {"D=64"}});
  all.push_back({"causal_attention", {"D=64"}});
  return all;
}

class ScheduledAsset : public ::testing::TestWithParam<Case> {};

TEST_P(ScheduledAsset, CompilesForEveryArchWithoutSpills) {
  const Result<std::shared_ptr<const Nvrtc>>& nvrtc = Nvrtc::shared();
  if (!nvrtc) GTEST_SKIP() << nvrtc.error().message;
  const Case& c = GetParam();
  std::string error;
  auto schedule =
      sched::read_schedule_file(source_path("assets/schedules/" + c.asset + ".json"), &error);
  ASSERT_TRUE(schedule) << error;
  auto file = SourceFile::read(source_path("assets/specs/" + c.asset + ".nt"), &error);
  ASSERT_TRUE(file) << error;
  for (GpuArch arch : c.archs) {
    driver::CompileOptions options;
    options.schedule = *schedule;
    options.last_stage = driver::Stage::MATile;
    options.matile.arch = arch_name(arch);
    for (const std::string& size : c.sizes) {
      options.sizes.push_back(*spec::parse_size_override(size, &error));
    }
    const driver::Compilation compilation = driver::compile(file, options);
    ASSERT_TRUE(compilation.ok() && compilation.ma_module)
        << arch_name(arch) << ": " << compilation.schedule_error << compilation.internal_error;
    EmitOptions emit_options;
    emit_options.source = file.get();
    const Result<EmittedModule> emitted = emit_cuda(*compilation.ma_module, emit_options);
    ASSERT_TRUE(emitted) << emitted.error().message;
    // A warp-specialized ring is released by one lane per consumer warp, never by every thread.
    if (emitted->source.find("empty_addr") != std::string::npos) {
      EXPECT_NE(emitted->source.find("// one lane per warp"), std::string::npos) << c.asset;
      EXPECT_EQ(emitted->source.find("// every thread"), std::string::npos) << c.asset;
    }
    NvrtcOptions nvrtc_options;
    nvrtc_options.arch = arch;
    const Result<CompiledProgram> compiled =
        (*nvrtc)->compile(emitted->source, c.asset + ".cu", nvrtc_options);
    ASSERT_TRUE(compiled) << arch_name(arch) << ": " << compiled.error().message;
    EXPECT_FALSE(compiled->cubin.empty());
    ASSERT_EQ(compiled->report.kernels.size(), emitted->kernels.size()) << compiled->log;
    // Register A operands are packed above their wgmma.fence: ptxas injects no warpgroup.arrive.
    EXPECT_EQ(compiled->log.find("C7519"), std::string::npos) << c.asset << "\n" << compiled->log;
    for (const KernelResources& kernel : compiled->report.kernels) {
      EXPECT_LE(kernel.spill_store_bytes, c.spill_budget) << arch_name(arch) << " " << kernel.name;
      EXPECT_LE(kernel.spill_load_bytes, c.spill_budget) << arch_name(arch) << " " << kernel.name;
      EXPECT_LE(kernel.registers, 255) << arch_name(arch) << " " << kernel.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Assets, ScheduledAsset, ::testing::ValuesIn(cases()),
                         [](const auto& test_info) { return case_name(test_info.param); });

// FlashAttention-3's form (two consumers taking turns, softmax overlapped with the next QKᵀ):
// P·V reads P from registers, packed above the fence that opens its wgmmas, so ptxas injects no
// warpgroup.arrive between them (C7519; 28 per kernel when P was packed inside each call).
TEST(WarpSpecializedAttention, RegisterOperandsArePackedAboveTheFence) {
  const Result<std::shared_ptr<const Nvrtc>>& nvrtc = Nvrtc::shared();
  if (!nvrtc) GTEST_SKIP() << nvrtc.error().message;
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const driver::Compilation compilation = testing::compile_for_arch(
        causal ? "assets/specs/causal_attention.nt" : "assets/specs/attention.nt",
        testing::warp_spec_attention(
            {.causal = causal, .key_tile = 128, .consumers = 2, .stages = 2, .overlap = true, .pingpong = true}),
        {"B=1", "H=2", "M=1000", "N=1024", "D=64"});
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Result<EmittedModule> emitted = emit_cuda(*compilation.ma_module, {});
    ASSERT_TRUE(emitted) << emitted.error().message;
    EXPECT_NE(emitted->source.find("_packed[s] = pack2("), std::string::npos);
    for (size_t at = emitted->source.find("_rs_"); at != std::string::npos; at = emitted->source.find("_rs_", at + 1)) {
      const std::string call = emitted->source.substr(at, emitted->source.find('\n', at) - at);
      if (call.find("(float* d") != std::string::npos) continue;  // the helper's definition
      EXPECT_EQ(call.find("pack2("), std::string::npos) << call;
    }
    NvrtcOptions options;
    options.arch = GpuArch::Sm90a;
    const Result<CompiledProgram> compiled = (*nvrtc)->compile(emitted->source, "attention.cu", options);
    ASSERT_TRUE(compiled) << compiled.error().message;
    EXPECT_EQ(compiled->log.find("C7519"), std::string::npos) << compiled->log;
  }
}

}  // namespace
}  // namespace nautilus::codegen
