// The CUDA emitter on Hopper's asynchronous ops: the hand-built warp-specialized GEMMs of
// tests/matile/hopper_kernels (two consumer roles, and the cooperative form) are emitted and
// compiled by NVRTC for sm_90a with the Hopper gate on (no wgmma serialization warning, no
// setmaxnreg ignored, no spill), and the source is checked for the instructions each MA op
// stands for; the tensor maps the emitter reports are the plan_tma_tile boxes of the maps; one
// kernel's CUDA is a golden. Without NVRTC the compile checks skip and say why.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/codegen/package.h"
#include "core/driver/kernel_package.h"
#include "core/driver/pipeline.h"
#include "tests/common/golden.h"
#include "tests/common/hopper_kernels.h"
// The hand-built kernels live with the MA tests; this binary compiles them too.

namespace nautilus::codegen {
namespace {

using matile::testing::HopperGemmShape;
using matile::testing::hopper_gemm;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The kernel's own text: everything after the prelude and the wgmma wrappers.
std::string kernel_text(const std::string& source) {
  const size_t at = source.find("// Kernel ");
  return at == std::string::npos ? source : source.substr(at);
}

class EmitHopper : public ::testing::TestWithParam<bool> {};

TEST_P(EmitHopper, HandBuiltGemmPrintsEveryHopperInstruction) {
  HopperGemmShape shape;
  shape.cooperative = GetParam();
  Result<EmittedModule> emitted = emit_cuda(*hopper_gemm(shape));
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  const std::string& cu = emitted->source;
  // Parameters: the three pointers, then the three maps as opaque grid constants.
  EXPECT_NE(cu.find("__launch_bounds__(384, 1)"), std::string::npos);
  EXPECT_NE(cu.find("struct __align__(64) tensor_map { unsigned long long words[16]; }"), std::string::npos);
  EXPECT_NE(cu.find("const __grid_constant__ tensor_map tmA,\n    const __grid_constant__ tensor_map tmB,\n"
                    "    const __grid_constant__ tensor_map tmC)"),
            std::string::npos)
      << cu;
  // mbarriers after the allocations: 3 full + 3 empty slots of 8 bytes past 90112 bytes.
  EXPECT_NE(cu.find("shared_memory + 90112"), std::string::npos);
  EXPECT_NE(cu.find("shared_memory + 90136"), std::string::npos);
  ASSERT_EQ(emitted->kernels.size(), 1u);
  EXPECT_EQ(emitted->kernels[0].dynamic_shared_bytes, 90112 + 48);
  EXPECT_EQ(count(cu, "mbarrier_init(full_addr + i * 8u, 1u)"), 1);
  EXPECT_EQ(count(cu, std::string("mbarrier_init(empty_addr + i * 8u, ") + (shape.cooperative ? "1u)" : "2u)")), 1);
  EXPECT_NE(cu.find("fence.mbarrier_init.release.cluster"), std::string::npos);
  // The producer: setmaxnreg down, the empty wait, expect_tx of both boxes, two TMA loads.
  EXPECT_NE(cu.find("setmaxnreg_dec<40>();"), std::string::npos);
  EXPECT_EQ(count(cu, "setmaxnreg_inc<232>();"), shape.cooperative ? 1 : 2);
  EXPECT_NE(cu.find("mbarrier_arrive_expect_tx(full_addr + static_cast<unsigned>(s_1) * 8u, 24576u);"),
            std::string::npos);
  EXPECT_EQ(count(cu, "  tma_load_2d("), 2);
  EXPECT_NE(cu.find("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"),
            std::string::npos);
  EXPECT_NE(cu.find("mbarrier.try_wait.parity.shared::cta.b64"), std::string::npos);
  // The consumers: wgmma m64n64k16 SS, four k16 steps per stage, commit, wait 1 / 0, fences.
  EXPECT_NE(cu.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"), std::string::npos);
  const int consumers = shape.cooperative ? 1 : 2;
  EXPECT_EQ(count(cu, "wgmma_m64n64k16_bf16_ss_00(acc0"), consumers * 2 * 4);
  // The accumulator starts as `full 0.0` read only by the wgmmas: it is never zeroed, and the
  // first k16 step of the first stage ignores it (scale-d 0); every other step accumulates.
  EXPECT_EQ(count(cu, "acc0[s] = 0.0f;"), 0);
  EXPECT_EQ(count(cu, "// not written: the wgmmas that read it start with scale-d 0"), consumers);
  EXPECT_EQ(count(cu, "ull, 0);"), consumers);
  EXPECT_EQ(count(cu, "ull, 1);"), consumers * (2 * 4 - 1));
  EXPECT_NE(cu.find("\"r\"(accumulate)"), std::string::npos);
  EXPECT_EQ(count(cu, "wgmma_fence();"), consumers);
  EXPECT_EQ(count(cu, "wgmma_commit_group();"), consumers * 2);
  EXPECT_EQ(count(cu, "wgmma_wait_group<1>();"), consumers);
  EXPECT_EQ(count(cu, "wgmma_wait_group<0>();"), consumers);
  // Accumulator registers are fenced only where a wait retires them (after the loop), never
  // between wgmmas (that would make ptxas inject warpgroup.arrive, C7519).
  // and before wgmma.fence (so the zero initialization stays above it).
  EXPECT_EQ(count(cu, "fence_register(acc0"), 2 * consumers);
  // Epilogue: stmatrix per 16 columns, proxy fence, named barrier, TMA store and its group.
  EXPECT_EQ(count(cu, "stmatrix_x4("), consumers * 4 + 1);  // + the prelude's definition
  EXPECT_EQ(count(cu, "fence_proxy_async();"), consumers);
  EXPECT_EQ(count(cu, "named_barrier_sync(1, 256);"), consumers);
  // The cooperative role's two warpgroups meet (on a barrier id the kernel leaves free) before
  // its one elected thread releases a stage: one warpgroup's wgmma.wait_group does not cover
  // the other's wgmmas.
  EXPECT_EQ(count(cu, "named_barrier_sync(15, 256);"), shape.cooperative ? 2 : 0);
  EXPECT_EQ(count(cu, "  tma_store_2d(&tmC, "), 1);
  EXPECT_NE(cu.find("if (tid == 0) bulk_commit_group();"), std::string::npos);
  EXPECT_NE(cu.find("if (tid == 0) bulk_wait_group_read<0>();"), std::string::npos);
  // No copies of in-flight accumulators: the wgmma results and the loop reuse acc0.
  EXPECT_EQ(cu.find("float acc_k"), std::string::npos);
  EXPECT_EQ(cu.find("float acc["), std::string::npos);

  // The maps the package records: plan_tma_tile's view of the maps (innermost first).
  const auto& maps = emitted->kernels[0].tensor_maps;
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].name, "tmA");
  const codegen::TensorMap a = tensor_map_of_plan(maps[0].plan);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{328, 200}));
  EXPECT_EQ(a.strides_bytes, (std::vector<int64_t>{656}));
  EXPECT_EQ(a.box, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(a.swizzle, TensorMapSwizzle::B128);
  EXPECT_EQ(maps[0].plan.boxes.size(), 1u);
  EXPECT_EQ(tensor_map_of_plan(maps[1].plan).box, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(tensor_map_of_plan(maps[2].plan).dims, (std::vector<int64_t>{104, 200}));
  EXPECT_EQ(maps[2].buffer->name, "C");
  // Each map is one TMA can encode over its buffer.
  for (const auto& param : maps) {
    const KernelArgument buffer{param.buffer->name, param.buffer->shape, param.buffer->dtype, "input"};
    EXPECT_EQ(check_tensor_map(tensor_map_of_plan(param.plan), buffer), "") << param.name;
  }
}

TEST_P(EmitHopper, HandBuiltGemmCompilesForSm90aThroughTheGate) {
  const auto& nvrtc = Nvrtc::shared();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC is not installed: " << nvrtc.error().message;
  HopperGemmShape shape;
  shape.cooperative = GetParam();
  Result<EmittedModule> emitted = emit_cuda(*hopper_gemm(shape));
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  NvrtcOptions options;
  options.arch = GpuArch::Sm90a;
  ASSERT_TRUE(options.hopper_gate);
  Result<CompiledProgram> compiled = (*nvrtc)->compile(emitted->source, "hopper_gemm.cu", options);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message << "\n" << compiled.error().log;
  for (const char* code : {"C7508", "C7511", "C7515", "C7517", "spill stores, 0"}) {
    if (std::string(code).rfind("spill", 0) == 0) {
      EXPECT_NE(compiled->log.find("0 bytes spill stores, 0 bytes spill loads"), std::string::npos) << compiled->log;
    } else {
      EXPECT_EQ(compiled->log.find(code), std::string::npos) << compiled->log;
    }
  }
  for (const std::string& needed :
       {"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned", "setmaxnreg.inc.sync.aligned.u32",
        "setmaxnreg.dec.sync.aligned.u32", "stmatrix.sync.aligned.m8n8.x4.shared.b16",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", "cp.async.bulk.wait_group.read",
        "fence.proxy.async.shared::cta", "mbarrier.arrive.expect_tx", "bar.sync"}) {
    EXPECT_NE(compiled->ptx.find(needed), std::string::npos) << needed;
  }
}

INSTANTIATE_TEST_SUITE_P(Roles, EmitHopper, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Cooperative" : "TwoConsumerRoles";
                         });

// The package of a Hopper module lists the maps after the pointers, each the TensorMap of the
// emitter's TMA plan, and survives a write/read round trip (read_package checks every map).
TEST(EmitHopperPackage, TensorMapArgumentsFollowThePointers) {
  const auto& nvrtc = Nvrtc::shared();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC is not installed: " << nvrtc.error().message;
  const matile::ModulePtr module = hopper_gemm(HopperGemmShape{});
  Result<KernelPackage> package = driver::build_kernel_package(driver::Compilation{}, module, {GpuArch::Sm90a});
  ASSERT_TRUE(package.ok()) << package.error().message;
  ASSERT_EQ(package->kernels.size(), 1u);
  const std::vector<KernelArgument>& args = package->kernels[0].arguments;
  ASSERT_EQ(args.size(), 6u);
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(args[i].tensor_map) << args[i].name;
  EXPECT_EQ(args[3].name, "A");
  EXPECT_EQ(args[4].name, "B");
  EXPECT_EQ(args[5].name, "C");
  ASSERT_TRUE(args[3].tensor_map && args[4].tensor_map && args[5].tensor_map);
  EXPECT_EQ(args[3].tensor_map->box, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(args[3].tensor_map->swizzle, TensorMapSwizzle::B128);
  EXPECT_EQ(args[5].tensor_map->dims, (std::vector<int64_t>{104, 200}));
  EXPECT_EQ(package->kernels[0].dynamic_shared_bytes, 90112 + 48);
  // A spill-free build changes nothing after the lowering; notes written survive the round trip.
  EXPECT_TRUE(package->notes.empty());
  KernelPackage noted = *package;
  noted.notes = {"kernel gemm_tma: registers: producer 32, consumers 240"};
  const std::string directory = ::testing::TempDir() + "/hopper_gemm_package";
  ASSERT_TRUE(write_package(noted, directory).ok());
  Result<KernelPackage> read = read_package(directory);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->kernels[0].arguments, args);
  EXPECT_EQ(read->notes, noted.notes);
}

// The kernel text of the cooperative GEMM (one producer, one consumer role of two warpgroups).
TEST(EmitHopperGolden, CooperativeGemmKernel) {
  HopperGemmShape shape;
  shape.cooperative = true;
  Result<EmittedModule> emitted = emit_cuda(*hopper_gemm(shape));
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  testing::expect_golden("codegen/hopper_gemm_cooperative.cu", kernel_text(emitted->source));
}

}  // namespace
}  // namespace nautilus::codegen
