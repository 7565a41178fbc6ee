// tilize: the VR tile IR of scheduled and unscheduled programs — its structure for attention and
// GEMM (one loop over reduction tiles carrying the running values, nothing but inputs and
// outputs in memory), golden text, equivalence with the float64 reference at sizes the tiles do
// not divide, a deliberately broken VR pass caught by eval, and the reasons a program cannot be
// tiled.
#include "core/tilize/lower_scalar.h"

#include <algorithm>
#include <functional>
#include <set>

#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/sched/decision.h"
#include "core/vrtile/printer.h"
#include "core/vrtile/verifier.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::source_path;

driver::Compilation compile_scheduled(const std::string& asset,
                                      const std::vector<std::string>& sizes,
                                      std::vector<driver::VRPass> vr_passes = {}) {
  std::string error;
  auto schedule =
      sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::VRTile;
  options.extra_vr_passes = std::move(vr_passes);
  if (schedule) options.schedule = *schedule;
  for (const std::string& text : sizes) {
    options.sizes.push_back(*spec::parse_size_override(text, &error));
  }
  auto file = SourceFile::read(source_path("assets/specs/" + asset + ".nt"), &error);
  driver::Compilation compilation = driver::compile(file, options);
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  return compilation;
}

void for_each_op(const vrtile::Region& region, const std::function<void(const vrtile::Op&)>& f) {
  for (const vrtile::OpPtr& op : region.ops) {
    f(*op);
    if (op->body) for_each_op(*op->body, f);
  }
}

std::vector<const vrtile::Op*> ops_of_kind(const vrtile::Region& region, vrtile::OpKind kind) {
  std::vector<const vrtile::Op*> out;
  for_each_op(region, [&](const vrtile::Op& op) {
    if (op.kind == kind) out.push_back(&op);
  });
  return out;
}

std::set<std::string> buffers_touched(const vrtile::Module& module) {
  std::set<std::string> names;
  for (const vrtile::KernelPtr& kernel : module.kernels) {
    for_each_op(*kernel->body, [&](const vrtile::Op& op) {
      if (op.buffer) names.insert(op.buffer->name);
    });
  }
  return names;
}

TEST(Tilize, AttentionIsOneLoopOverKeyTilesCarryingMaxSumAndAccumulator) {
  driver::Compilation compilation = compile_scheduled("attention", {});
  ASSERT_TRUE(compilation.vr_module);
  const vrtile::Module& module = *compilation.vr_module;
  ASSERT_EQ(module.kernels.size(), 1u);
  const vrtile::Kernel& kernel = *module.kernels[0];
  ASSERT_EQ(kernel.grid.size(), 3u);
  // In CUDA order, as the schedule binds them: m_o to grid.x (the CTAs of one head run side by
  // side and share K and V in L2), h to grid.y, b to grid.z.
  EXPECT_EQ(kernel.grid[0].var->name, "m_o");
  EXPECT_EQ(kernel.grid[0].extent, 32);  // 4096 / 128 query rows
  EXPECT_EQ(kernel.grid[1].extent, 16);  // h
  EXPECT_EQ(kernel.grid[2].extent, 2);   // b

  // Nothing but Q, K, V and O is ever in memory: no score matrix, no statistics.
  EXPECT_TRUE(module.allocations.empty());
  EXPECT_EQ(buffers_touched(module), (std::set<std::string>{"K", "O", "Q", "V"}));

  std::vector<const vrtile::Op*> loops;
  for (const vrtile::OpPtr& op : kernel.body->ops) {
    if (op->kind == vrtile::OpKind::For) loops.push_back(op.get());
  }
  ASSERT_EQ(loops.size(), 1u);
  const vrtile::Op& loop = *loops[0];
  EXPECT_EQ(loop.extent, 64);  // 4096 keys / 64
  ASSERT_EQ(loop.results.size(), 3u);
  EXPECT_EQ(loop.results[0]->type, (vrtile::TileType{DType::F32, {128}}));       // running max
  EXPECT_EQ(loop.results[1]->type, (vrtile::TileType{DType::F32, {128}}));       // running sum
  EXPECT_EQ(loop.results[2]->type, (vrtile::TileType{DType::F32, {128, 128}}));  // accumulator
  EXPECT_EQ(ops_of_kind(*loop.body, vrtile::OpKind::Dot).size(), 2u);  // Q·Kᵀ and P·V
  EXPECT_TRUE(ops_of_kind(*loop.body, vrtile::OpKind::Store).empty());
  EXPECT_TRUE(ops_of_kind(*loop.body, vrtile::OpKind::For).empty());
  const std::vector<const vrtile::Op*> stores = ops_of_kind(*kernel.body, vrtile::OpKind::Store);
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores[0]->buffer->name, "O");
}

TEST(Tilize, GemmIsOneMainLoopCarryingTheAccumulator) {
  driver::Compilation compilation = compile_scheduled("gemm", {});
  ASSERT_TRUE(compilation.vr_module);
  const vrtile::Module& module = *compilation.vr_module;
  ASSERT_EQ(module.kernels.size(), 1u);
  EXPECT_TRUE(module.allocations.empty());
  const std::vector<const vrtile::Op*> loops =
      ops_of_kind(*module.kernels[0]->body, vrtile::OpKind::For);
  ASSERT_EQ(loops.size(), 1u);
  EXPECT_EQ(loops[0]->extent, 64);  // K = 4096 in steps of 64
  ASSERT_EQ(loops[0]->results.size(), 1u);
  EXPECT_EQ(loops[0]->results[0]->type, (vrtile::TileType{DType::F32, {128, 128}}));
  const std::vector<const vrtile::Op*> dots = ops_of_kind(*loops[0]->body, vrtile::OpKind::Dot);
  ASSERT_EQ(dots.size(), 1u);
  // bf16 operands after narrowing: the products of bf16 values are exact in f32.
  EXPECT_EQ(dots[0]->operands[0]->type, (vrtile::TileType{DType::BF16, {128, 64}}));
  EXPECT_EQ(dots[0]->operands[1]->type, (vrtile::TileType{DType::BF16, {64, 128}}));
}

TEST(Tilize, GoldenText) {
  for (const auto& [asset, sizes] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"attention", {"B=1", "H=2", "M=200", "N=150", "D=16"}},
           {"gemm", {"M=130", "N=129", "K=40"}},
           {"softmax", {"R=5", "C=1030"}}}) {
    driver::Compilation compilation = compile_scheduled(asset, sizes);
    ASSERT_TRUE(compilation.vr_module) << asset;
    // The output of tilize itself, before the VR rewrites.
    const auto tilized = std::find_if(compilation.log.begin(), compilation.log.end(),
                                      [](const driver::Snapshot& s) { return s.pass == "tilize"; });
    ASSERT_NE(tilized, compilation.log.end());
    testing::expect_golden("tilize/" + asset + ".txt", vrtile::print_module(*tilized->vr_module));
  }
}

// Unscheduled programs tile too: one CTA per output element, every reduction a serial loop
// carrying a scalar. These are the naive kernels the runner checks against.
TEST(Tilize, UnscheduledProgramsBecomeOneKernelPerNest) {
  driver::Compilation compilation =
      testing::compile_asset("softmax", {"R=3", "C=5"}, driver::Stage::VRTile);
  ASSERT_TRUE(compilation.vr_module) << compilation.schedule_error;
  const vrtile::Module& module = *compilation.vr_module;
  EXPECT_EQ(module.kernels.size(), 4u);  // Mx, E, Y_sum, Y
  for (const vrtile::KernelPtr& kernel : module.kernels) {
    EXPECT_FALSE(kernel->grid.empty()) << kernel->name;
    for (const vrtile::Op* loop : ops_of_kind(*kernel->body, vrtile::OpKind::For)) {
      for (const vrtile::Value& carried : loop->results) {
        EXPECT_EQ(carried->type.rank(), 0) << kernel->name;
      }
    }
  }
}

class EveryAsset : public ::testing::TestWithParam<std::string> {};

// With and without the hand schedule, at sizes that leave partial tiles.
TEST_P(EveryAsset, MatchesReferenceScheduledAndUnscheduled) {
  const std::string asset = GetParam();
  for (bool scheduled : {false, true}) {
    driver::Compilation compilation =
        scheduled ? compile_scheduled(asset, testing::small_sizes(asset))
                  : testing::compile_asset(asset, testing::small_sizes(asset),
                                           driver::Stage::VRTile);
    ASSERT_TRUE(compilation.vr_module) << compilation.schedule_error;
    EXPECT_TRUE(vrtile::verify(*compilation.vr_module).empty());
    for (uint64_t seed : {2, 9}) {
      driver::EvalOptions options;
      options.stage = driver::Stage::VRTile;
      options.seed = seed;
      driver::EvalResult result = driver::evaluate(compilation, options);
      ASSERT_TRUE(result.ran) << result.error;
      for (const driver::OutputCheck& check : result.outputs) {
        EXPECT_TRUE(check.passed) << asset << (scheduled ? " scheduled " : " unscheduled ")
                                  << check.name << " " << check.error.max_relative_error;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Assets, EveryAsset, ::testing::ValuesIn(testing::asset_names()),
                         [](const auto& test_info) { return test_info.param; });

// Rebuilds a region with `change` applied to every op (bodies first).
vrtile::RegionPtr rewrite_region(const vrtile::RegionPtr& region,
                                 const std::function<vrtile::Op(vrtile::Op)>& change) {
  std::vector<vrtile::OpPtr> ops;
  for (const vrtile::OpPtr& op : region->ops) {
    vrtile::Op copy = *op;
    if (copy.body) copy.body = rewrite_region(copy.body, change);
    ops.push_back(vrtile::make_op(change(std::move(copy))));
  }
  return vrtile::make_region(std::move(ops));
}

driver::VRPass broken_pass(const std::string& name,
                           const std::function<vrtile::Op(vrtile::Op)>& change) {
  return {name, "deliberately wrong", [change](const vrtile::ModulePtr& module) {
            auto copy = std::make_shared<vrtile::Module>(*module);
            for (vrtile::KernelPtr& kernel : copy->kernels) {
              kernel = vrtile::make_kernel(kernel->name, kernel->params, kernel->grid,
                                           rewrite_region(kernel->body, change),
                                           kernel->provenance);
            }
            return vrtile::ModulePtr(copy);
          }};
}

TEST(Tilize, BrokenVRPassesFailEval) {
  const std::vector<driver::VRPass> broken = {
      broken_pass("swap-exp-and-exp2",
                  [](vrtile::Op op) {
                    if (op.kind == vrtile::OpKind::Unary && op.unary_op == scalar::UnaryOp::Exp) {
                      op.unary_op = scalar::UnaryOp::Exp2;
                    } else if (op.kind == vrtile::OpKind::Unary &&
                               op.unary_op == scalar::UnaryOp::Exp2) {
                      op.unary_op = scalar::UnaryOp::Exp;
                    }
                    return op;
                  }),
      broken_pass("row-sum-to-max",
                  [](vrtile::Op op) {
                    if (op.kind == vrtile::OpKind::Reduce && op.reduce_op == vrtile::ReduceOp::Sum)
                      op.reduce_op = vrtile::ReduceOp::Max;
                    return op;
                  }),
      broken_pass("dot-without-accumulator",
                  [](vrtile::Op op) {
                    if (op.kind == vrtile::OpKind::Dot && op.operands.size() == 3)
                      op.operands.pop_back();
                    return op;
                  }),
  };
  for (const driver::VRPass& pass : broken) {
    driver::Compilation compilation =
        compile_scheduled("attention", {"B=1", "H=1", "M=130", "N=150", "D=8"}, {pass});
    ASSERT_TRUE(compilation.vr_module) << pass.name;
    driver::EvalOptions options;
    options.stage = driver::Stage::VRTile;
    driver::EvalResult result = driver::evaluate(compilation, options);
    ASSERT_TRUE(result.ran) << result.error;
    EXPECT_FALSE(result.passed()) << pass.name;
  }
}

TEST(Tilize, ReasonsAProgramCannotBeTiled) {
  // A reduction block whose body does not combine with its own running value.
  const scalar::Buffer a = scalar::make_buffer("A", {4, 3}, DType::F32, scalar::MemoryScope::Global,
                                               scalar::BufferRole::Input);
  const scalar::Buffer r = scalar::make_buffer("R", {4}, DType::F32, scalar::MemoryScope::Global,
                                               scalar::BufferRole::Output);
  const scalar::Var i = scalar::make_var("i"), j = scalar::make_var("j");
  const scalar::Var ii = scalar::make_var("i"), jj = scalar::make_var("j");
  const scalar::Stmt block = scalar::make_block(
      "R", {{ii, 4, scalar::IterKind::Spatial}, {jj, 3, scalar::IterKind::Reduce}},
      {scalar::var_ref(i), scalar::var_ref(j)}, nullptr, nullptr,
      scalar::make_store(r, {scalar::var_ref(ii)},
                         scalar::load(a, {scalar::var_ref(ii), scalar::var_ref(jj)})));
  auto program = std::make_shared<scalar::Program>();
  program->name = "bad";
  program->params = {a, r};
  program->body = scalar::make_for(i, 4, scalar::make_for(j, 3, block));
  const tilize::TilizeResult result = tilize::lower_to_vrtile(*program);
  EXPECT_FALSE(result.module);
  EXPECT_EQ(result.error,
            "block R reduces with a body that is not `R = R + term` (or max / min)");
}

}  // namespace
}  // namespace nautilus
