// NVRTC compilation in-process: real cubins for sm_80 and sm_90a with mma.sync inline PTX, the
// parsed ptxas report, and the typed errors (compile errors with their log, NVRTC not found).
// NVRTC is installed on development machines and in CI; elsewhere these tests skip.
#include <gtest/gtest.h>

#include "core/codegen/nvrtc.h"

namespace nautilus::codegen {
namespace {

// One warp multiplies a 16x16 bf16 A by a 16x8 bf16 B into f32 with one mma.sync, staging the
// operands through shared memory (so ptxas reports a barrier and static shared memory).
constexpr const char* kMmaKernel = R"(
#include <cuda_bf16.h>

extern "C" __global__ void mma_16x8x16(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                       float* c) {
  __shared__ __nv_bfloat16 a_tile[16 * 16];
  __shared__ __nv_bfloat16 b_tile[16 * 8];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * 16; i += 32) a_tile[i] = a[i];
  for (int i = lane; i < 16 * 8; i += 32) b_tile[i] = b[i];
  __syncthreads();
  const int group = lane / 4;
  const int pair = lane % 4;
  unsigned a_regs[4];
  unsigned b_regs[2];
  for (int r = 0; r < 4; ++r) {
    const int row = group + 8 * (r % 2);
    const int col = 2 * pair + 8 * (r / 2);
    a_regs[r] = *reinterpret_cast<const unsigned*>(&a_tile[row * 16 + col]);
  }
  for (int r = 0; r < 2; ++r) {
    const int k = 2 * pair + 8 * r;
    __nv_bfloat162 pair_b;
    pair_b.x = b_tile[k * 8 + group];
    pair_b.y = b_tile[(k + 1) * 8 + group];
    b_regs[r] = *reinterpret_cast<unsigned*>(&pair_b);
  }
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a_regs[0]), "r"(a_regs[1]), "r"(a_regs[2]), "r"(a_regs[3]), "r"(b_regs[0]),
        "r"(b_regs[1]));
  for (int i = 0; i < 4; ++i) {
    const int row = group + 8 * (i / 2);
    const int col = 2 * pair + i % 2;
    c[row * 8 + col] = d[i];
  }
}
)";

const Nvrtc* nvrtc_or_skip_reason(std::string* reason) {
  const auto& loaded = Nvrtc::shared();
  if (!loaded.ok()) {
    *reason = loaded.error().message;
    return nullptr;
  }
  return loaded.value().get();
}

#define NAUTILUS_REQUIRE_NVRTC(nvrtc)                                       \
  std::string skip_reason;                                                  \
  const Nvrtc* nvrtc = nvrtc_or_skip_reason(&skip_reason);                  \
  if (nvrtc == nullptr) GTEST_SKIP() << "skipped: " << skip_reason

class NvrtcArchTest : public testing::TestWithParam<GpuArch> {};

TEST_P(NvrtcArchTest, CompilesMmaSyncToCubinWithReport) {
  NAUTILUS_REQUIRE_NVRTC(nvrtc);
  NvrtcOptions options;
  options.arch = GetParam();
  Result<CompiledProgram> compiled = nvrtc->compile(kMmaKernel, "mma.cu", options);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message << "\n" << compiled.error().log;
  // A cubin is an ELF file.
  ASSERT_GE(compiled->cubin.size(), 4u);
  EXPECT_EQ(compiled->cubin[0], 0x7f);
  EXPECT_EQ(compiled->cubin[1], 'E');
  EXPECT_EQ(compiled->cubin[2], 'L');
  EXPECT_EQ(compiled->cubin[3], 'F');
  EXPECT_NE(compiled->ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos);
  EXPECT_NE(compiled->ptx.find(".entry mma_16x8x16"), std::string::npos);  // extern "C"

  const KernelResources* resources = compiled->report.find("mma_16x8x16");
  ASSERT_NE(resources, nullptr) << compiled->log;
  EXPECT_EQ(resources->arch, arch_name(GetParam()));
  EXPECT_GT(resources->registers, 8);
  EXPECT_LT(resources->registers, 128);
  EXPECT_EQ(resources->shared_memory_bytes, (16 * 16 + 16 * 8) * 2);
  EXPECT_EQ(resources->barriers, 1);
  EXPECT_FALSE(resources->spills());
  EXPECT_GT(compiled->milliseconds, 0.0);
  EXPECT_NE(std::find(compiled->options.begin(), compiled->options.end(),
                      std::string("--gpu-architecture=") + arch_name(GetParam())),
            compiled->options.end());
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcArchTest, testing::ValuesIn(all_archs()),
                         [](const testing::TestParamInfo<GpuArch>& param) {
                           return std::string(arch_name(param.param));
                         });

TEST(Nvrtc, SyntaxErrorReturnsTheLog) {
  NAUTILUS_REQUIRE_NVRTC(nvrtc);
  Result<CompiledProgram> compiled = nvrtc->compile(
      "extern \"C\" __global__ void broken(float* x) { x[0] = 1.0f }\n", "broken.cu", {});
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.error().kind, CodegenError::Kind::Compilation);
  EXPECT_NE(compiled.error().log.find("broken.cu(1): error"), std::string::npos)
      << compiled.error().log;
  EXPECT_NE(compiled.error().message.find("broken.cu"), std::string::npos);
  EXPECT_NE(compiled.error().message.find("error"), std::string::npos);
  EXPECT_EQ(compiled.error().message.find('\n'), std::string::npos);  // one line
}

TEST(Nvrtc, BadOptionIsTyped) {
  NAUTILUS_REQUIRE_NVRTC(nvrtc);
  NvrtcOptions options;
  options.extra_options = {"--no-such-option-exists"};
  Result<CompiledProgram> compiled =
      nvrtc->compile("extern \"C\" __global__ void k() {}\n", "k.cu", options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.error().kind, CodegenError::Kind::BadOption) << compiled.error().message;
}

TEST(Nvrtc, SpillsAreVisibleInTheReport) {
  // The check "no spills" in the emitter tests must be able to fail: a kernel with far more
  // live values than the register cap does spill, and the report says so.
  NAUTILUS_REQUIRE_NVRTC(nvrtc);
  NvrtcOptions options;
  options.extra_options = {"--maxrregcount=32"};
  Result<CompiledProgram> compiled = nvrtc->compile(R"(
extern "C" __global__ void spilly(float* b) {
  float x[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) x[i] = b[i * threadIdx.x + 7];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 96; ++i) s += x[i] * x[95 - i] * b[i];
#pragma unroll
  for (int i = 0; i < 96; ++i) b[i * 3 + threadIdx.x] = x[i] * s;
}
)", "spilly.cu", options);
  ASSERT_TRUE(compiled.ok()) << compiled.error().log;
  ASSERT_NE(compiled->report.find("spilly"), nullptr);
  EXPECT_TRUE(compiled->report.any_spills()) << compiled->log;
}

TEST(Nvrtc, VersionAndIncludeDir) {
  NAUTILUS_REQUIRE_NVRTC(nvrtc);
  EXPECT_NE(nvrtc->version(), "unknown");
  EXPECT_NE(nvrtc->version().find('.'), std::string::npos);
  EXPECT_TRUE(find_cuda_include_dir().has_value());
}

TEST(NvrtcLoad, MissingLibraryIsReportedCleanly) {
  // Runs everywhere: no real NVRTC is needed to fail loading a library that does not exist.
  auto loaded = Nvrtc::load({"libnautilus-no-such-nvrtc.so.99", "/nonexistent/libnvrtc.so"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind, CodegenError::Kind::NvrtcNotFound);
  const std::string& message = loaded.error().message;
  EXPECT_EQ(message.rfind("NVRTC not found: ", 0), 0u) << message;
  EXPECT_NE(message.find("libnautilus-no-such-nvrtc.so.99"), std::string::npos);
  EXPECT_NE(message.find("/nonexistent/libnvrtc.so"), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST(NvrtcLoad, LibraryWithoutTheEntryPointsIsRejected) {
  // libm opens fine but is not NVRTC.
  auto loaded = Nvrtc::load({"libm.so.6"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find("does not export nvrtc"), std::string::npos)
      << loaded.error().message;
}

TEST(NvrtcLoad, DefaultCandidatesFollowTheEnvironment) {
  std::vector<std::string> candidates = Nvrtc::default_candidates();
  ASSERT_FALSE(candidates.empty());
  EXPECT_EQ(candidates.front(), "libnvrtc.so.13");
  EXPECT_EQ(candidates.back(), "/usr/local/cuda/lib64/libnvrtc.so");
}

}  // namespace
}  // namespace nautilus::codegen
