// The Hopper gate of Nvrtc::compile (nvrtc.h): ptxas' wgmma serialization warnings (C7508,
// C7511, C7515, C7517, C7520) and spills in Hopper kernels make an sm_90a compile fail with
// CodegenError::Kind::Rejected, naming the kernel and the warning. The parser is checked on logs
// as NVRTC 13.0 prints them; real compiles of small kernels that trigger C7508, C7517 and
// spills check that NVRTC really prints those lines (skipped without NVRTC).
#include <gtest/gtest.h>

#include "core/codegen/nvrtc.h"

namespace nautilus::codegen {
namespace {

// Two entries, only the second using setmaxnreg (as PTX lists them).
constexpr const char* kTwoEntryPtx = R"(
.visible .entry first_ok(
	.param .u64 first_ok_param_0
)
{
	ret;
}
.visible .entry uses_setmaxnreg(
	.param .u64 uses_setmaxnreg_param_0
)
{
	setmaxnreg.dec.sync.aligned.u32 40;
	ret;
}
)";

TEST(HopperGate, C7508IsAttributedThroughThePtx) {
  const std::string log =
      "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to "
      "determine register count at entry.\n"
      "ptxas info    : Compiling entry function 'first_ok' for 'sm_90a'\n";
  const std::vector<PtxasRejection> rejections =
      hopper_rejections(parse_ptxas_report(log), log, kTwoEntryPtx);
  ASSERT_EQ(rejections.size(), 1u);
  EXPECT_EQ(rejections[0].kernel, "uses_setmaxnreg");
  EXPECT_EQ(rejections[0].code, "C7508");
  EXPECT_EQ(describe_rejections(rejections),
            "kernel uses_setmaxnreg: C7508 (setmaxnreg ignored): ptxas info    : (C7508) Potential "
            "Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.");
  // Without PTX the kernel is unknown, and the message says so rather than guessing.
  EXPECT_EQ(hopper_rejections(parse_ptxas_report(log), log, "")[0].kernel, "");
}

TEST(HopperGate, SerializationLinesNameTheirFunction) {
  const std::string log =
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to the presence of Extern calls in the function 'gemm_a'.\n"
      "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to insufficient register resources for the wgmma pipeline in the function "
      "'gemm_b'\n"
      "ptxas info    : (C7517) warpgroup.wait is injected in around line 52 by compiler to allow "
      "use of registers defined by GMMA in function 'gemm_c'\n"
      "ptxas info    : (C7999) some other note in function 'gemm_d'\n"
      "ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to program dependence on compiler-inserted WG.AR in divergent path in the "
      "function 'attention_e'\n";
  const std::vector<PtxasRejection> rejections = hopper_rejections(parse_ptxas_report(log), log, "");
  ASSERT_EQ(rejections.size(), 4u);
  EXPECT_EQ(rejections[0].kernel, "gemm_a");
  EXPECT_EQ(rejections[0].code, "C7515");
  EXPECT_EQ(rejections[1].kernel, "gemm_b");
  EXPECT_EQ(rejections[1].code, "C7511");
  EXPECT_EQ(rejections[2].kernel, "gemm_c");
  EXPECT_EQ(rejections[2].code, "C7517");
  EXPECT_EQ(rejections[3].kernel, "attention_e");
  EXPECT_EQ(rejections[3].code, "C7520");
  // The C75xx performance lines are kept with the report's warnings.
  EXPECT_EQ(parse_ptxas_report(log).warnings.size(), 4u);
}

TEST(HopperGate, SpillsRejectHopperKernelsOnly) {
  const std::string log =
      "ptxas info    : Compiling entry function 'ampere' for 'sm_90a'\n"
      "ptxas info    : Function properties for ampere\n"
      "ptxas         .     16 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers\n"
      "ptxas info    : Compiling entry function 'hopper' for 'sm_90a'\n"
      "ptxas info    : Function properties for hopper\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers\n";
  const std::string ptx =
      ".visible .entry ampere(\n)\n{\n\tmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ...;\n}\n"
      ".visible .entry hopper(\n)\n{\n\tcp.async.bulk.tensor.2d.shared::cluster.global ...;\n}\n";
  const std::vector<PtxasRejection> rejections = hopper_rejections(parse_ptxas_report(log), log, ptx);
  ASSERT_EQ(rejections.size(), 1u);
  EXPECT_EQ(rejections[0].kernel, "hopper");
  EXPECT_EQ(rejections[0].code, "spill");
  EXPECT_EQ(rejections[0].detail, "4 bytes spill stores, 8 bytes spill loads");
  // No PTX to tell: every spilling kernel counts.
  EXPECT_EQ(hopper_rejections(parse_ptxas_report(log), log, "").size(), 2u);
}

// ---- real compiles

const Nvrtc* nvrtc_or_null() {
  const auto& nvrtc = Nvrtc::shared();
  return nvrtc.ok() ? nvrtc->get() : nullptr;
}

// Warp roles with setmaxnreg but no __launch_bounds__(T, 1): ptxas ignores setmaxnreg (C7508).
constexpr const char* kSetmaxnregWithoutBounds = R"(
extern "C" __global__ void plain_store(float* x) { x[threadIdx.x] = 2.0f; }
extern "C" __global__ void roles_without_bounds(float* x) {
  if (threadIdx.x < 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  x[threadIdx.x] = 1.0f;
}
)";

// An accumulator register read between the wgmma and its wait: ptxas injects a wait (C7517).
constexpr const char* kAccumulatorTouchedInFlight = R"(
extern "C" __global__ void __launch_bounds__(128, 1)
touches_accumulator(float* out, unsigned long long a, unsigned long long b) {
  float d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  asm volatile("wgmma.fence.sync.aligned;\n");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
               "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7])
               : "l"(a), "l"(b));
  d[0] += 1.0f;
  asm volatile("wgmma.commit_group.sync.aligned;\n");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i];
}
)";

// 200 live floats per thread at 1024 threads (64 registers): spills. WGMMA_FENCE makes it a
// Hopper kernel.
constexpr const char* kSpilling = R"(
extern "C" __global__ void __launch_bounds__(1024, 1) spills(float* x, int n) {
  WGMMA_FENCE
  float a[200];
#pragma unroll
  for (int i = 0; i < 200; ++i) a[i] = x[i * n + threadIdx.x];
#pragma unroll
  for (int j = 0; j < 200; ++j) {
    float s = 0;
#pragma unroll
    for (int i = 0; i < 200; ++i) s += a[i] * a[(i + j) % 200];
    x[j] = s;
  }
}
)";

Result<CompiledProgram> compile_sm90a(const Nvrtc& nvrtc, const std::string& source,
                                      bool gate = true) {
  NvrtcOptions options;
  options.arch = GpuArch::Sm90a;
  options.hopper_gate = gate;
  return nvrtc.compile(source, "kernel.cu", options);
}

TEST(HopperGate, SetmaxnregWithoutLaunchBoundsIsRejected) {
  const Nvrtc* nvrtc = nvrtc_or_null();
  if (nvrtc == nullptr) GTEST_SKIP() << Nvrtc::shared().error().message;
  auto compiled = compile_sm90a(*nvrtc, kSetmaxnregWithoutBounds);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.error().kind, CodegenError::Kind::Rejected);
  EXPECT_EQ(codegen_error_kind_name(compiled.error().kind), std::string("rejected"));
  const std::string& message = compiled.error().message;
  EXPECT_EQ(message.rfind("kernel.cu for sm_90a: kernel roles_without_bounds: C7508 (setmaxnreg ignored): ", 0), 0u)
      << message;
  EXPECT_EQ(message.find("plain_store"), std::string::npos) << message;
  EXPECT_NE(compiled.error().log.find("(C7508)"), std::string::npos);

  // Without the gate the same source compiles, and the report keeps the warning.
  auto ungated = compile_sm90a(*nvrtc, kSetmaxnregWithoutBounds, false);
  ASSERT_TRUE(ungated.ok()) << ungated.error().message;
  ASSERT_EQ(ungated->report.warnings.size(), 1u);
  EXPECT_NE(ungated->report.warnings[0].find("(C7508)"), std::string::npos);
  EXPECT_EQ(ungated->options[0], "--gpu-architecture=sm_90a");
}

TEST(HopperGate, InjectedWgmmaWaitIsRejected) {
  const Nvrtc* nvrtc = nvrtc_or_null();
  if (nvrtc == nullptr) GTEST_SKIP() << Nvrtc::shared().error().message;
  auto compiled = compile_sm90a(*nvrtc, kAccumulatorTouchedInFlight);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.error().kind, CodegenError::Kind::Rejected);
  EXPECT_NE(compiled.error().message.find("kernel touches_accumulator: C7517 (wgmma serialized)"),
            std::string::npos)
      << compiled.error().message;
}

TEST(HopperGate, SpillsRejectAHopperKernelButNotAnAmpereOne) {
  const Nvrtc* nvrtc = nvrtc_or_null();
  if (nvrtc == nullptr) GTEST_SKIP() << Nvrtc::shared().error().message;
  std::string hopper = kSpilling;
  hopper.replace(hopper.find("WGMMA_FENCE"), 11, "asm volatile(\"wgmma.fence.sync.aligned;\\n\");");
  auto rejected = compile_sm90a(*nvrtc, hopper);
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().kind, CodegenError::Kind::Rejected);
  EXPECT_NE(rejected.error().message.find("kernel spills: spill (registers spilled): "),
            std::string::npos)
      << rejected.error().message;

  std::string ampere = kSpilling;
  ampere.replace(ampere.find("WGMMA_FENCE"), 11, "");
  auto accepted = compile_sm90a(*nvrtc, ampere);
  ASSERT_TRUE(accepted.ok()) << accepted.error().message;
  EXPECT_TRUE(accepted->report.any_spills());
}

}  // namespace
}  // namespace nautilus::codegen
