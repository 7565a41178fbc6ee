// Deliberately broken MA kernels must be caught: a deleted cp.async.wait_group or bar.sync, a
// wait for the wrong group count, a shared layout with swapped strides and register layouts that
// are not the instruction's are errors; a wrong shared-memory address gives wrong numbers. And
// the lowering returns reasons for bad options and modules instead of failing hard.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/matile/interpreter.h"
#include "core/matile/layouts.h"
#include "core/matile/lower.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/spec/reference.h"
#include "tests/common/spec_test_util.h"
#include "tests/matile/matile_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_asset;
using testing::lower_or_fail;

// Rebuilds every region of `module`, replacing each op by what `edit` returns (nothing deletes
// it); For bodies are edited too.
using OpEdit = std::function<std::vector<OpPtr>(const OpPtr&)>;

RegionPtr edit_region(const Region& region, const OpEdit& edit) {
  std::vector<OpPtr> ops;
  for (const OpPtr& op : region.ops) {
    OpPtr current = op;
    if (op->kind == OpKind::For) {
      Op copy = *op;
      copy.body = edit_region(*op->body, edit);
      current = make_op(std::move(copy));
    }
    for (OpPtr& replacement : edit(current)) ops.push_back(std::move(replacement));
  }
  return make_region(std::move(ops));
}

ModulePtr edit_module(const Module& module, const OpEdit& edit,
                      const std::function<void(Kernel&)>& edit_kernel = nullptr) {
  auto out = std::make_shared<Module>(module);
  for (KernelPtr& kernel : out->kernels) {
    Kernel copy = *kernel;
    copy.body = edit_region(*kernel->body, edit);
    if (edit_kernel) edit_kernel(copy);
    kernel = std::make_shared<const Kernel>(std::move(copy));
  }
  return out;
}

struct Gemm {
  driver::Compilation compilation = compile_asset("gemm", {"M=40", "N=48", "K=64"});
  vrtile::ModulePtr vr;
  ModulePtr ma;
  TensorMap inputs;
  Gemm() {
    vr = vrtile::test_kernels::tiled_gemm(*compilation.program, 32, 32, 32);
    LowerOptions options;
    options.warps = 2;
    ma = lower_or_fail(vr, options);
    inputs = spec::make_random_inputs(*compilation.spec, 11);
  }
};

TEST(BrokenKernels, TheUnbrokenGemmRuns) {
  Gemm g;
  ASSERT_TRUE(g.ma);
  const InterpretResult result = interpret(*g.ma, g.inputs);
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("C").values, vrtile::interpret(*g.vr, g.inputs).outputs.at("C").values);
}

TEST(BrokenKernels, DeletedWaitGroupReadsACopyInFlight) {
  Gemm g;
  ASSERT_TRUE(g.ma);
  const ModulePtr broken = edit_module(*g.ma, [](const OpPtr& op) {
    return op->kind == OpKind::WaitGroup ? std::vector<OpPtr>{} : std::vector<OpPtr>{op};
  });
  EXPECT_TRUE(verify(*broken).empty());
  const InterpretResult result = interpret(*broken, g.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("before its cp.async landed (missing cp.async.wait_group)"),
            std::string::npos)
      << result.error;
  EXPECT_NE(result.error.find("kernel gemm at grid point [0, 0]"), std::string::npos) << result.error;
}

TEST(BrokenKernels, WaitingForTooFewGroupsIsCaught) {
  Gemm g;
  ASSERT_TRUE(g.ma);
  const ModulePtr broken = edit_module(*g.ma, [](const OpPtr& op) {
    if (op->kind != OpKind::WaitGroup || op->extent != 0) return std::vector<OpPtr>{op};
    Op copy = *op;
    copy.extent = 1;  // lets the group the iteration reads stay in flight
    return std::vector<OpPtr>{make_op(std::move(copy))};
  });
  const InterpretResult result = interpret(*broken, g.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("missing cp.async.wait_group"), std::string::npos) << result.error;
}

TEST(BrokenKernels, DeletedBarrierIsARace) {
  Gemm g;
  ASSERT_TRUE(g.ma);
  const ModulePtr broken = edit_module(*g.ma, [](const OpPtr& op) {
    return op->kind == OpKind::Barrier ? std::vector<OpPtr>{} : std::vector<OpPtr>{op};
  });
  const InterpretResult result = interpret(*broken, g.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("without a barrier in between"), std::string::npos) << result.error;
}

TEST(BrokenKernels, OverwritingAStageStillBeingReadIsARace) {
  // Issue the next tile's copy after the mma instead of after the barrier: with one stage it
  // overwrites what other threads read in this iteration.
  Gemm g;
  LowerOptions options;
  options.warps = 2;
  options.stages = 1;
  const ModulePtr one_stage = lower_or_fail(g.vr, options);
  ASSERT_TRUE(one_stage);
  // The first barrier of the loop body protects the previous iteration's readers of the one
  // buffer; without it the next copy overwrites elements other threads just read.
  bool deleted = false;
  const ModulePtr broken = edit_module(*one_stage, [&](const OpPtr& op) {
    if (op->kind == OpKind::Barrier && !deleted) {
      deleted = true;
      return std::vector<OpPtr>{};
    }
    return std::vector<OpPtr>{op};
  });
  ASSERT_TRUE(deleted);
  const InterpretResult result = interpret(*broken, g.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("read since the last barrier (missing bar.sync)"), std::string::npos)
      << result.error;
}

TEST(BrokenKernels, SharedLayoutWithSwappedStridesIsCaught) {
  Gemm g;
  ASSERT_TRUE(g.ma);
  const ModulePtr broken = edit_module(*g.ma, [](const OpPtr& op) { return std::vector<OpPtr>{op}; },
                                       [](Kernel& kernel) {
                                         SharedAlloc& a = kernel.shared[0];
                                         // (32,32):(32,1) becomes (32,32):(1,32): column-major.
                                         a.layout.layout = layout::Layout(
                                             a.layout.layout.shape(),
                                             layout::tuple_of(1, a.shape[0]));
                                       });
  EXPECT_TRUE(verify(*broken).empty());
  const InterpretResult result = interpret(*broken, g.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("cp.async destination vector in a_smem is not contiguous"),
            std::string::npos)
      << result.error;
}

TEST(BrokenKernels, ReadingTheWrongKStepGivesWrongNumbers) {
  // The two ldmatrix reads of A swap their columns: every instruction is legal, the numbers are
  // not.
  Gemm g;
  ASSERT_TRUE(g.ma);
  const ModulePtr broken = edit_module(*g.ma, [](const OpPtr& op) {
    if (op->kind != OpKind::SharedLoad || op->results[0]->name.rfind("a_k", 0) != 0) {
      return std::vector<OpPtr>{op};
    }
    Op copy = *op;
    copy.shared.offsets[1] = 16 - copy.shared.offsets[1];
    return std::vector<OpPtr>{make_op(std::move(copy))};
  });
  const InterpretResult result = interpret(*broken, g.inputs);
  ASSERT_TRUE(result.ok) << result.error;
  const vrtile::InterpretResult expected = vrtile::interpret(*g.vr, g.inputs);
  const ErrorReport error = compare_tensors(result.outputs.at("C"), expected.outputs.at("C"));
  EXPECT_GT(error.max_relative_error, 0.05);
}

TEST(BrokenKernels, MmaAccumulatorWithASwappedStrideDoesNotVerify) {
  Buffer out = scalar::make_buffer("C", {16, 16}, DType::F32, scalar::MemoryScope::Global,
                                   scalar::BufferRole::Output);
  Builder b(1);
  RegisterLayout a = *mma_a_layout(16, 16, 1, 1);
  RegisterLayout bl = *mma_b_layout(16, 16, 1, 1);
  RegisterLayout c = *mma_c_layout(16, 16, 1, 1);
  // The C fragment's slot strides (row + 8, col + 1) swapped: (16,8) -> (8,16).
  RegisterLayout swapped = c;
  swapped.tv.layout = layout::Layout(
      c.tv.layout.shape(),
      layout::tuple_of(c.tv.layout.stride().mode(0),
                       layout::tuple_of(layout::tuple_of(8, 16), c.tv.layout.stride().mode(1).mode(1))));
  const Value av = b.full(1.0, TileType{DType::BF16, {16, 16}}, a, "a");
  const Value bv = b.full(1.0, TileType{DType::BF16, {16, 16}}, bl, "b");
  const Value cv = b.full(0.0, TileType{DType::F32, {16, 16}}, swapped, "c");
  const Value d = b.mma(av, bv, cv, 1, 1, "d");
  GlobalAccess window{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {16, 16}, false};
  b.global_store(out, window, {}, d);
  Module module{"broken", "sm_80", {out}, {}, {b.finish_kernel("k", {out})}};
  const std::vector<std::string> errors = verify(module);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.front().find("c is not in the mma C fragment layout"), std::string::npos)
      << errors.front();
}

// ---- Reasons from the lowering ----------------------------------------------------------------

TEST(LoweringReasons, BadOptions) {
  Gemm g;
  LowerOptions options;
  options.warps = 3;
  EXPECT_EQ(lower_to_matile(g.vr, options).error().message,
            "lower_to_matile: warps must be 1, 2, 4 or 8, not 3");
  options = LowerOptions{};
  options.stages = 0;
  EXPECT_EQ(lower_to_matile(g.vr, options).error().message,
            "lower_to_matile: stages must be in 1..8, not 0");
  options = LowerOptions{};
  options.arch = "sm_70";
  EXPECT_EQ(lower_to_matile(g.vr, options).error().message,
            "lower_to_matile: arch must be sm_80 or sm_90a, not sm_70");
  EXPECT_EQ(lower_to_matile(nullptr).error().message, "lower_to_matile: no module");
}

TEST(LoweringReasons, AModuleThatDoesNotVerify) {
  Gemm g;
  auto broken = std::make_shared<vrtile::Module>(*g.vr);
  broken->kernels.push_back(broken->kernels.front());  // a kernel name used twice
  const layout::Result<ModulePtr> lowered = lower_to_matile(broken);
  ASSERT_FALSE(lowered.ok());
  EXPECT_NE(lowered.error().message.find("the VR module does not verify"), std::string::npos)
      << lowered.error().message;
}

// A schedule that leaves a vocabulary projection's weight untiled ([50257, 768] per CTA) is
// refused with the reason at once: no kernel holds that tile, and checking its layouts element
// by element took the search seconds per candidate.
TEST(LoweringReasons, ATileNoKernelCanHoldIsRefused) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  const driver::Compilation compilation = nautilus::testing::compile_scheduled(
      "bench/variants/lm_head_gemm.nt", {"tile(Logits_sum, t=128)", "bind(Logits_sum, t_o=grid.x)"}, {},
      options);
  EXPECT_FALSE(compilation.ma_module);
  EXPECT_NE(compilation.schedule_error.find("no kernel holds it in registers or shared memory"),
            std::string::npos)
      << compilation.schedule_error;
  // Tiled along the vocabulary too, the same program lowers.
  const driver::Compilation tiled = nautilus::testing::compile_scheduled(
      "bench/variants/lm_head_gemm.nt",
      {"tile(Logits_sum, t=128, v=128, h=64)", "bind(Logits_sum, v_o=grid.y, t_o=grid.x)"}, {}, options);
  EXPECT_TRUE(tiled.ma_module) << tiled.schedule_error;
}


TEST(LoweringReasons, CtasWritingTheSameElementsOfABufferTheyReadAreRefused) {
  // Z computed at Y's grid-bound loop p_o keeps its full [M, N] buffer: both CTAs along p_o
  // initialize and accumulate the same row of Z while the other reads it.
  const auto file = std::make_shared<SourceFile>(
      "chain.nt",
      "let M = 8, N = 3, K = 5, P = 17\n"
      "input A[M, K] : f16\n"
      "input Bm[K, N] : f16\n"
      "input C2[N, P] : f16\n"
      "Z[m, n] = sum(k) A[m, k] * Bm[k, n]\n"
      "output Y[m, p] : f16 = sum(n) Z[m, n] * C2[n, p]\n");
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  const driver::Compilation compilation = nautilus::testing::compile_scheduled(
      file, {"tile(Y_sum, p=16)", "bind(Y, m=grid.y, p=grid.x)", "reverse_compute_at(Y, Y_sum, p_o)",
             "compute_at(Z, Y_sum, p_o)"},
      {}, options);
  EXPECT_FALSE(compilation.ok());
  EXPECT_NE(compilation.schedule_error.find("the CTAs along grid axis p_o (2 of them) write the same elements "
                                            "of Z, which the kernel also reads"),
            std::string::npos)
      << compilation.schedule_error;
}

}  // namespace
}  // namespace nautilus::matile
