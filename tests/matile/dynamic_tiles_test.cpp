// The dynamic tile scheduler of persistent CTAs (`persistent(BLOCK, scheduler=dynamic)`, the
// default; Kernel::dynamic_tiles with CtaIndex / TileFetch / TileRead, ir.h): a CTA's first tile
// is its own index, every further one comes from a counter in a workspace buffer, fetched by the
// producer one tile ahead and handed to every role through a two-slot tile ring. The MA
// interpreter runs the walk on fewer CTAs than tiles (the CTAs fetch in the order it runs them),
// in several interleavings of the roles, against the float64 reference at sizes that are not
// tile multiples; it catches a ring slot read before the producer's write landed and one
// overwritten before every role read it. The emitted CUDA compiles with NVRTC for sm_90a.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "core/codegen/package.h"
#include "core/driver/evaluate.h"
#include "core/driver/kernel_package.h"
#include "core/driver/pipeline.h"
#include "core/matile/interpreter.h"
#include "core/matile/ir.h"
#include "core/matile/printer.h"
#include "core/matile/visitor.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::barrier_index;
using nautilus::testing::compile_for_arch;
using nautilus::testing::program_order;
using nautilus::testing::role_named;
using nautilus::testing::roles_op;
using nautilus::testing::without_op;
using nautilus::testing::count_kind;
using nautilus::testing::count_ops;

int ops_of(const Region& region, OpKind kind) {
  return count_ops(region, [&](const Op& op) { return op.kind == kind; });
}

std::vector<std::string> gemm_schedule(const std::string& persistent = "persistent(C_sum, scheduler=dynamic)") {
  return {"tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=3)", persistent};
}

// Causal rows take the reverse tile order (longest query tiles first), as the search does.
std::vector<std::string> attention_schedule(bool causal, bool overlap) {
  std::vector<std::string> d = nautilus::testing::warp_spec_attention({.causal = causal, .overlap = overlap});
  if (causal) d.push_back("tile_order(O_sum_acc, reverse=m_o)");
  d.push_back("persistent(O_sum_acc)");  // the default scheduler: dynamic
  return d;
}

void expect_matches_reference(const driver::Compilation& compilation, int64_t ctas, uint64_t seed) {
  driver::EvalOptions eval;
  eval.stage = driver::Stage::MATile;
  eval.seed = 11;
  const driver::EvalResult reference = driver::evaluate(compilation, eval);
  ASSERT_TRUE(reference.ran) << reference.error;
  InterpretOptions options;
  options.persistent_ctas = ctas;
  options.schedule_seed = seed;
  const InterpretResult run = interpret(*compilation.ma_module, reference.inputs, options);
  ASSERT_TRUE(run.ok) << run.error;
  if (compilation.ma_module->kernels.at(0)->dynamic_tiles) {
    ASSERT_TRUE(run.instructions.count("atom.global.add"));
    EXPECT_GE(run.instructions.at("atom.global.add"), 1u);
  }
  for (const auto& [name, expected] : reference.reference) {
    ASSERT_TRUE(run.outputs.count(name)) << name;
    const ErrorReport error = compare_tensors(run.outputs.at(name), expected);
    EXPECT_LT(error.max_relative_error, 2e-2) << name << " with " << ctas << " CTAs, seed " << seed;
  }
}

TEST(DynamicTiles, GemmTakesItsTilesFromTheCounterAndMatchesTheReference) {
  // 2 x 3 tiles of 128 x 128 (M, N not multiples), 5 k steps around a ring of 3.
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule(), {"M=200", "N=296", "K=320"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_TRUE(kernel.persistent);
  EXPECT_TRUE(kernel.dynamic_tiles);
  // The counter: a 4-byte workspace, a param of the kernel and a global buffer of the module.
  const Buffer& counter = kernel.params.back();
  EXPECT_EQ(counter->role, scalar::BufferRole::Workspace);
  EXPECT_EQ(counter->element_count(), 4);
  bool in_module = false;
  for (const Buffer& buffer : compilation.ma_module->allocations) in_module |= buffer == counter;
  EXPECT_TRUE(in_module);
  // The producer fetches once per tile; every role reads the ring once per tile.
  const Op* roles = roles_op(kernel);
  ASSERT_TRUE(roles);
  for (const WarpRole& role : roles->roles) {
    EXPECT_EQ(ops_of(*role.body, OpKind::TileFetch), role.name == "producer" ? 1 : 0) << role.name;
    EXPECT_EQ(ops_of(*role.body, OpKind::TileRead), 1) << role.name;
    EXPECT_EQ(ops_of(*role.body, OpKind::CtaIndex), 1) << role.name;
  }
  const std::string text = print_module(*compilation.ma_module);
  EXPECT_NE(text.find(" persistent dynamic warps"), std::string::npos) << text;
  EXPECT_NE(text.find("in tiles(6) iter_args(%tile = %first_tile"), std::string::npos) << text;
  EXPECT_NE(text.find("tile.fetch tile_ring"), std::string::npos) << text;
  for (int64_t ctas : {1, 2, 4, 6}) {
    for (uint64_t seed : {0u, 3u, 8u}) expect_matches_reference(compilation, ctas, seed);
  }
}

TEST(DynamicTiles, AttentionPlainAndCausalLongestFirstMatchTheReference) {
  struct Case {
    std::string spec;
    bool causal, overlap;
    std::vector<std::string> sizes;
  };
  const std::vector<Case> cases = {
      // 3 query tiles x 2 heads = 6 tiles on 2 or 4 CTAs; 300 and 200 are no tile multiples.
      {"assets/specs/attention.nt", false, false, {"B=1", "H=2", "M=300", "N=200", "D=64"}},
      {"assets/specs/causal_attention.nt", true, false, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      {"assets/specs/causal_attention.nt", true, true, {"B=2", "H=1", "M=300", "N=300", "D=64"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec + (c.overlap ? " overlap" : ""));
    const driver::Compilation compilation = compile_for_arch(c.spec, attention_schedule(c.causal, c.overlap), c.sizes);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    EXPECT_TRUE(kernel.dynamic_tiles);
    if (c.causal) {
      EXPECT_NE(kernel.reversed_axes, 0u);
    }
    for (int64_t ctas : {2, 4}) {
      for (uint64_t seed : {0u, 5u}) expect_matches_reference(compilation, ctas, seed);
    }
  }
}

TEST(DynamicTiles, TheProducerClaimsTheNextTileAfterIssuingThisOnesCopies) {
  // Claimed at the tile's start, the next tile would be held a whole tile ahead: on causal rows
  // a CTA busy with a long tile would keep a tile another CTA could have started.
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/causal_attention.nt", attention_schedule(true, true), {"B=1", "H=2", "M=300", "N=300", "D=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const WarpRole* producer = role_named(kernel, "producer");
  ASSERT_NE(producer, nullptr);
  std::vector<const Op*> order;
  program_order(*producer->body, &order);
  int fetch = -1, last_copy = -1;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i]->kind == OpKind::TileFetch && fetch < 0) fetch = static_cast<int>(i);
    if (order[i]->kind == OpKind::TmaLoad) last_copy = static_cast<int>(i);
  }
  ASSERT_GE(fetch, 0) << print_kernel(kernel);
  ASSERT_GE(last_copy, 0);
  EXPECT_GT(fetch, last_copy) << print_kernel(kernel);
}

InterpretResult run_broken(const driver::Compilation& compilation, const ModulePtr& broken, uint64_t seed) {
  driver::EvalOptions eval;
  eval.stage = driver::Stage::MATile;
  const driver::EvalResult reference = driver::evaluate(compilation, eval);
  InterpretOptions options;
  options.persistent_ctas = 2;
  options.schedule_seed = seed;
  return interpret(*broken, reference.inputs, options);
}

TEST(DynamicTiles, AReadBeforeTheFetchLandedIsCaught) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule(), {"M=512", "N=256", "K=128"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const int full = barrier_index(*compilation.ma_module->kernels.at(0), "tile_full");
  ASSERT_GE(full, 0);
  const ModulePtr broken = without_op(compilation.ma_module, "consumers", [&](const Op& op) {
    return op.kind == OpKind::MBarrierWait && op.mbarrier.barrier == full;
  });
  const InterpretResult result = run_broken(compilation, broken, 0);
  ASSERT_FALSE(result.ok);
  EXPECT_EQ(result.error_kind, InterpretErrorKind::UnlandedRead) << result.error;
  EXPECT_NE(result.error.find("tile_ring"), std::string::npos) << result.error;
}

TEST(DynamicTiles, ARingSlotRefilledBeforeEveryRoleReadItIsCaught) {
  // 8 tiles on 2 CTAs: the producer, free of the operand ring for a while, would refill slot 0
  // with the third tile's fetch while the consumers still have the first tile's index to read.
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule(), {"M=512", "N=256", "K=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const int empty = barrier_index(*compilation.ma_module->kernels.at(0), "tile_empty");
  ASSERT_GE(empty, 0);
  const ModulePtr broken = without_op(compilation.ma_module, "producer", [&](const Op& op) {
    return op.kind == OpKind::MBarrierWait && op.mbarrier.barrier == empty;
  });
  bool caught = false;
  for (uint64_t seed : {0u, 1u, 2u, 3u, 4u, 5u}) {
    const InterpretResult result = run_broken(compilation, broken, seed);
    if (result.ok) continue;
    caught = true;
    EXPECT_TRUE(result.error_kind == InterpretErrorKind::StageOverwrite ||
                result.error_kind == InterpretErrorKind::ArrivalCountMismatch)
        << result.error;
  }
  EXPECT_TRUE(caught) << "no interleaving let the producer overwrite an unread ring slot";
}

TEST(DynamicTiles, TheStaticSchedulerStaysAvailable) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule("persistent(C_sum, scheduler=static)"),
              {"M=200", "N=296", "K=320"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_TRUE(kernel.persistent);
  EXPECT_FALSE(kernel.dynamic_tiles);
  EXPECT_EQ(count_kind(kernel, OpKind::TileFetch), 0);
  for (const Buffer& buffer : compilation.ma_module->allocations) {
    EXPECT_NE(buffer->role, scalar::BufferRole::Workspace) << buffer->name;
  }
  expect_matches_reference(compilation, 4, 1);
}

TEST(DynamicTiles, SchedulerArgumentErrorsSayWhatIsExpected) {
  struct Case {
    std::string decision, expected;
  };
  const std::vector<Case> cases = {
      {"persistent(C_sum, scheduler=greedy)", "scheduler is dynamic or static, got greedy"},
      {"persistent(C_sum, scheduler=2)", "scheduler is dynamic or static, got 2"},
      {"persistent(C_sum, order=dynamic)", "unknown keyword 'order'; expected scheduler"},
      {"persistent(C_sum, dynamic)", "takes 0 positional arguments after the target, got 1"},
  };
  for (const Case& c : cases) {
    const driver::Compilation compilation =
        compile_for_arch("assets/specs/gemm.nt", gemm_schedule(c.decision), {"M=256", "N=256", "K=64"},
                "sm_90a", driver::Stage::Scalar);
    EXPECT_NE(compilation.schedule_error.find(c.expected), std::string::npos)
        << c.decision << ": " << compilation.schedule_error;
    EXPECT_NE(compilation.schedule_error.find("persistent(BLOCK, scheduler=dynamic|static)"), std::string::npos)
        << compilation.schedule_error;
  }
}

TEST(DynamicTiles, TheEmittedKernelFetchesTilesAndCompilesForSm90a) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/causal_attention.nt", attention_schedule(true, true),
              {"B=1", "H=2", "M=300", "N=300", "D=64"}, "sm_90a", driver::Stage::Cuda);
  ASSERT_TRUE(compilation.cuda) << compilation.schedule_error << compilation.internal_error;
  const codegen::EmittedKernel& launch = compilation.cuda->kernels.at(0);
  EXPECT_TRUE(launch.persistent);
  EXPECT_EQ(launch.grid, (std::array<int64_t, 3>{6, 1, 1}));
  const std::string& source = compilation.cuda->source;
  EXPECT_NE(source.find("atomicAdd(reinterpret_cast<unsigned*>("), std::string::npos) << source;
  EXPECT_NE(source.find("+ gridDim.x);"), std::string::npos);
  EXPECT_NE(source.find("= static_cast<int>(blockIdx.x);"), std::string::npos);
  EXPECT_NE(source.find("< 6; ++tile_step) {  // the next tile comes from the tile ring"), std::string::npos)
      << source;
  EXPECT_EQ(source.find("tile += gridDim.x"), std::string::npos);  // no static walk
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC is not installed: " << nvrtc.error().message;
  codegen::Result<codegen::KernelPackage> package =
      driver::build_kernel_package(compilation, compilation.ma_module, {codegen::GpuArch::Sm90a});
  ASSERT_TRUE(package.ok()) << package.error().message;
  // The counter is a workspace argument of the kernel and a buffer of the package.
  const std::vector<codegen::KernelArgument>& args = package->kernels.at(0).arguments;
  bool workspace = false;
  for (const codegen::KernelArgument& arg : args) {
    if (arg.role != "workspace") continue;
    workspace = true;
    EXPECT_EQ(arg.dtype, DType::I8);
    EXPECT_EQ(arg.shape, (std::vector<int64_t>{4}));
  }
  EXPECT_TRUE(workspace);
  const std::string directory = ::testing::TempDir() + "/dynamic_tiles_package";
  ASSERT_TRUE(codegen::write_package(*package, directory).ok());
  codegen::Result<codegen::KernelPackage> read = codegen::read_package(directory);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->kernels.at(0).arguments, args);
}

}  // namespace
}  // namespace nautilus::matile
