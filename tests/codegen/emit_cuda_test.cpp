// The CUDA emitter on MA modules lowered from the hand-built VR kernels (GEMM, online softmax,
// FlashAttention at d = 64 and 128): the source compiles with NVRTC for sm_80 and sm_90a without
// register spills or stack frames, uses the instructions the MA IR names, quotes the spec, and
// returns reasons for modules it cannot print.
#include <gtest/gtest.h>

#include <regex>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/matile/layouts.h"
#include "core/matile/lower.h"
#include "tests/common/spec_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::codegen {
namespace {

using nautilus::testing::compile_asset;

struct Case {
  std::string name;
  std::string asset;
  std::vector<std::string> sizes;
  std::function<vrtile::ModulePtr(const scalar::Program&)> build;
  // NVRTC takes seconds on the large unrolled attention kernels: d = 128 is compiled for
  // sm_90a only, to keep the suite fast.
  std::vector<GpuArch> archs = all_archs();
  std::vector<std::string> ptx_instructions = {};
  int warps = 4;
};

std::vector<Case> cases() {
  return {
      {"gemm", "gemm", {"M=200", "N=136", "K=72"},
       [](const scalar::Program& p) { return vrtile::test_kernels::tiled_gemm(p, 64, 64, 32); }},
      {"softmax", "softmax", {"R=37", "C=200"},
       [](const scalar::Program& p) { return vrtile::test_kernels::online_softmax(p, 4, 64); }},
      {"attention_d64", "attention", {"B=1", "H=2", "M=200", "N=136", "D=64"},
       [](const scalar::Program& p) { return vrtile::test_kernels::flash_attention(p, 64, 64); },
       all_archs(),
       {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "ldmatrix.sync.aligned.m8n8.x4",
        "cp.async.cg.shared.global", "shfl.sync.bfly"}},
      {"attention_d128", "attention", {"B=1", "H=2", "M=200", "N=136", "D=128"},
       [](const scalar::Program& p) { return vrtile::test_kernels::flash_attention(p, 64, 32); },
       {GpuArch::Sm90a}},
  };
}

struct Lowered {
  driver::Compilation compilation;
  matile::ModulePtr module;
  std::string lowering_error;  // the MA lowering's reason when it does not lower this kernel
};

// The MA lowering (core/matile) does not place every kernel yet; those cases skip with its
// reason instead of testing the emitter on nothing.
#define NAUTILUS_REQUIRE_LOWERED(lowered)                                                   \
  if (!(lowered).module) {                                                                  \
    ASSERT_TRUE((lowered).compilation.ok());                                               \
    GTEST_SKIP() << "skipped: the MA lowering does not lower this kernel yet: "             \
                 << (lowered).lowering_error;                                               \
  }

Lowered lower_case(const Case& c) {
  Lowered lowered;
  lowered.compilation = compile_asset(c.asset, c.sizes);
  EXPECT_TRUE(lowered.compilation.ok());
  if (!lowered.compilation.ok()) return lowered;
  matile::LowerOptions options;
  options.warps = c.warps;
  auto module = matile::lower_to_matile(c.build(*lowered.compilation.program), options);
  if (module.ok()) {
    lowered.module = *module;
  } else {
    lowered.lowering_error = module.error().message;
  }
  return lowered;
}

class EmitCase : public ::testing::TestWithParam<Case> {};

TEST_P(EmitCase, CompilesWithoutSpillsOnEveryArch) {
  Lowered lowered = lower_case(GetParam());
  NAUTILUS_REQUIRE_LOWERED(lowered);
  EmitOptions options;
  options.source = lowered.compilation.file.get();
  Result<EmittedModule> emitted = emit_cuda(*lowered.module, options);
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  ASSERT_EQ(emitted->kernels.size(), lowered.module->kernels.size());
  for (const EmittedKernel& kernel : emitted->kernels) {
    EXPECT_NE(emitted->source.find("extern \"C\" __global__ void __launch_bounds__(" +
                                   std::to_string(kernel.block[0]) + ") " + kernel.symbol + "("),
              std::string::npos);
  }

  const auto& loaded = Nvrtc::shared();
  if (!loaded.ok()) GTEST_SKIP() << "skipped: " << loaded.error().message;
  for (GpuArch arch : GetParam().archs) {
    NvrtcOptions nvrtc_options;
    nvrtc_options.arch = arch;
    Result<CompiledProgram> compiled =
        (*loaded)->compile(emitted->source, GetParam().name + ".cu", nvrtc_options);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message << "\n" << compiled.error().log;
    for (const std::string& instruction : GetParam().ptx_instructions) {
      EXPECT_NE(compiled->ptx.find(instruction), std::string::npos) << instruction;
    }
    for (const EmittedKernel& kernel : emitted->kernels) {
      const KernelResources* resources = compiled->report.find(kernel.symbol);
      ASSERT_NE(resources, nullptr) << kernel.symbol << "\n" << compiled->log;
      EXPECT_FALSE(resources->spills()) << arch_name(arch) << "\n" << ptxas_report_table(compiled->report);
      // Register tiles are indexed by unrolled constants only: nothing lands on the stack.
      EXPECT_EQ(resources->stack_frame_bytes, 0)
          << arch_name(arch) << "\n" << ptxas_report_table(compiled->report);
      EXPECT_LE(resources->registers, 255);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, EmitCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

TEST(EmitCuda, AttentionUsesTheConstructsOfTheMaIr) {
  Lowered lowered = lower_case(cases()[2]);
  NAUTILUS_REQUIRE_LOWERED(lowered);
  Result<EmittedModule> emitted = emit_cuda(*lowered.module);
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  // The kernels, without the prelude of helper definitions.
  const std::string source = emitted->source.substr(emitted->source.find("extern \"C\""));
  for (const char* construct : {"mma_m16n8k16(", "ldmatrix_x4", "cp_async_16(", "cp_async_wait<",
                                "__shfl_xor_sync(", "__syncthreads();",
                                "extern __shared__ __align__(128) unsigned char shared_memory[];"}) {
    EXPECT_NE(source.find(construct), std::string::npos) << construct;
  }
}

TEST(EmitCuda, AGridPastTwoToTheThirtyOneCtasTakesItsLeadingAxesFromBlockIdxY) {
  // The unscheduled causal attention at B 2, H 16, S 8192 runs one CTA per score element:
  // 2^31 CTAs, one more than gridDim.x can hold.
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  const driver::Compilation compilation = nautilus::testing::compile_scheduled(
      "assets/specs/causal_attention.nt", {}, {"B=2", "H=16", "M=8192", "N=8192", "D=128"}, options);
  ASSERT_TRUE(compilation.ok() && compilation.ma_module) << compilation.schedule_error;
  Result<EmittedModule> emitted = emit_cuda(*compilation.ma_module);
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  const EmittedKernel& scores = emitted->kernels[0];
  EXPECT_EQ(scores.grid, (std::array<int64_t, 3>{int64_t{1} << 30, 2, 1}));
  EXPECT_NE(emitted->source.find("const int b = static_cast<int>(blockIdx.y);  // 0..1"), std::string::npos);
  EXPECT_NE(emitted->source.find("const int h = (static_cast<int>(blockIdx.x) / 67108864);  // 0..15"),
            std::string::npos);
}

// sigmoid on the SFU alone (sigmoid_approx: ex2.approx.ftz, rcp.approx.ftz) with the default
// options, the accurate form when exp2 is guarded (EmitOptions::approximate_exp2); both compile.
TEST(EmitCuda, SigmoidRunsOnTheSfuUnlessExp2IsGuarded) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  const driver::Compilation compilation = nautilus::testing::compile_scheduled(
      "assets/specs/gated_mlp.nt", {}, {"T=8", "H=16", "F=24"}, options);
  ASSERT_TRUE(compilation.ok() && compilation.ma_module) << compilation.schedule_error;
  Result<EmittedModule> fast = emit_cuda(*compilation.ma_module);
  ASSERT_TRUE(fast.ok()) << fast.error().message;
  EXPECT_NE(fast->source.find("= sigmoid_approx("), std::string::npos);
  EXPECT_EQ(fast->source.find("= 1.0f / (1.0f + expf(-"), std::string::npos);
  EmitOptions guarded;
  guarded.approximate_exp2 = false;
  Result<EmittedModule> accurate = emit_cuda(*compilation.ma_module, guarded);
  ASSERT_TRUE(accurate.ok()) << accurate.error().message;
  EXPECT_EQ(accurate->source.find("= sigmoid_approx("), std::string::npos);
  EXPECT_NE(accurate->source.find("= 1.0f / (1.0f + expf(-"), std::string::npos);
  const auto& loaded = Nvrtc::shared();
  if (!loaded.ok()) GTEST_SKIP() << "skipped: " << loaded.error().message;
  for (const EmittedModule* module : {&*fast, &*accurate}) {
    Result<CompiledProgram> compiled = (*loaded)->compile(module->source, "gated_mlp.cu", NvrtcOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.error().message << "\n" << compiled.error().log;
    if (module == &*fast) {
      EXPECT_NE(compiled->ptx.find("rcp.approx.ftz.f32"), std::string::npos);
      EXPECT_NE(compiled->ptx.find("ex2.approx.ftz.f32"), std::string::npos);
    }
  }
}

TEST(EmitCuda, LaunchConfigurationFollowsTheKernel) {
  Lowered lowered = lower_case(cases()[0]);
  NAUTILUS_REQUIRE_LOWERED(lowered);
  Result<EmittedModule> emitted = emit_cuda(*lowered.module);
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  const matile::Kernel& kernel = *lowered.module->kernels[0];
  const EmittedKernel& launch = emitted->kernels[0];
  EXPECT_EQ(launch.block[0], kernel.threads());
  EXPECT_EQ(launch.dynamic_shared_bytes, kernel.shared_bytes);
  int64_t blocks = launch.grid[0] * launch.grid[1] * launch.grid[2];
  int64_t points = 1;
  for (const auto& axis : kernel.grid) points *= axis.extent;
  EXPECT_EQ(blocks, points);
  EXPECT_EQ(points, 4 * 3);  // ceil(200 / 64) x ceil(136 / 64)
  ASSERT_EQ(launch.params.size(), kernel.params.size());
  // Inputs are const pointers, outputs are not.
  EXPECT_NE(emitted->source.find("const __nv_bfloat16* __restrict__ A"), std::string::npos);
  EXPECT_NE(emitted->source.find("  __nv_bfloat16* __restrict__ C"), std::string::npos);
  // ldmatrix row addresses multiply whole coordinates by the row stride (a regression: an
  // unparenthesized "lane_row + 16 * mi * 32" addressed the wrong rows).
  EXPECT_NE(emitted->source.find("(lane_row + 16 * mi) * "), std::string::npos);
  EXPECT_EQ(emitted->source.find("+ 16 * mi * "), std::string::npos);
  // Boundaries are masked: 200 rows and 136 columns are not tile multiples.
  EXPECT_NE(emitted->source.find("< 200"), std::string::npos);
  EXPECT_NE(emitted->source.find("< 136"), std::string::npos);
}

TEST(EmitCuda, DeterministicOutput) {
  Lowered lowered = lower_case(cases()[1]);
  NAUTILUS_REQUIRE_LOWERED(lowered);
  Result<EmittedModule> first = emit_cuda(*lowered.module);
  Result<EmittedModule> second = emit_cuda(*lowered.module);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->source, second->source);
}

// A module whose mma operand is in the wrong layout (the C fragment layout instead of A's) must
// be refused: printing it would compute garbage on the GPU.
TEST(EmitCuda, WrongFragmentLayoutIsRefused) {
  Lowered lowered = lower_case(cases()[0]);
  NAUTILUS_REQUIRE_LOWERED(lowered);
  // Rebuild the first kernel with every Mma's `a` operand swapped for its accumulator.
  std::function<matile::RegionPtr(const matile::Region&)> corrupt = [&](const matile::Region& region) {
    std::vector<matile::OpPtr> ops;
    for (const matile::OpPtr& op : region.ops) {
      matile::Op copy = *op;
      if (copy.kind == matile::OpKind::Mma) {
        copy.operands[0] = matile::make_value(copy.operands[0]->name + "_wrong",
                                              copy.operands[0]->type, copy.operands[2]->layout);
      }
      if (copy.body) copy.body = corrupt(*copy.body);
      ops.push_back(matile::make_op(copy));
    }
    return matile::make_region(ops);
  };
  auto module = std::make_shared<matile::Module>(*lowered.module);
  auto kernel = std::make_shared<matile::Kernel>(*module->kernels[0]);
  kernel->body = corrupt(*kernel->body);
  module->kernels[0] = kernel;
  Result<EmittedModule> emitted = emit_cuda(*module);
  ASSERT_FALSE(emitted.ok());
  EXPECT_EQ(emitted.error().kind, CodegenError::Kind::InvalidInput);
}

}  // namespace
}  // namespace nautilus::codegen
