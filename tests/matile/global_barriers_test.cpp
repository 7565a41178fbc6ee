// order_global_accesses (core/matile/global_barriers.h) and the MA interpreter's check behind
// it: threads of one CTA that write a global buffer and read it back need a barrier between, the
// interpreter reports a read without one, and the pass puts one there (a role's own named
// barrier inside a role). Found by tuning RMSNorm on the H100: a nested split_k_update kernel
// combined its partial sums from global memory with no barrier and read the runner's NaN poison.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/matile/global_barriers.h"
#include "core/matile/interpreter.h"
#include "core/support/tensor.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::count_ops;

using nautilus::testing::compile_for_arch;
using nautilus::testing::expect_stage_matches_reference;
using nautilus::testing::hand_schedule;

// The module before order_global_accesses ran.
ModulePtr module_before_ordering(const driver::Compilation& compilation) {
  for (const driver::Snapshot& snapshot : compilation.log) {
    if (snapshot.pass == "split-masked") return snapshot.ma_module;
  }
  return nullptr;
}

// The tuner's RMSNorm candidate: the partial sums of a split reduction, split again, combined
// in the kernel that normalizes. Its kernel stores R_sum_part with one thread layout and loads
// it back with another.
const std::vector<std::string> kNestedSplitRmsnorm = {
    "split_k_update(R_sum, h, splits=2)",
    "inline(R)",
    "tile(R_sum, t=4)",
    "reverse_compute_at(Y, R_sum, t_o)",
    "tile(R_sum_part, t=2)",
    "launch(R_sum, warps=8, stages=1)",
    "split_k_update(R_sum_part, h, splits=4)",
    "compute_at(R_sum_part, R_sum, t_o)",
    "bind(R_sum_part_part, h_s2=grid.z, h_s=grid.y, t_o=grid.x)",
};

TEST(GlobalBarriers, APartialSumReadBackByOtherThreadsGetsABarrierAndTheRaceIsReported) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/rmsnorm.nt", kNestedSplitRmsnorm, {"T=32", "H=256"}, "sm_80");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const ModulePtr before = module_before_ordering(compilation);
  ASSERT_NE(before, nullptr);
  ASSERT_NE(before, compilation.ma_module);

  // Without the barrier the interpreter names the race (on the GPU: NaN, the runner's poison).
  const TensorMap inputs = nautilus::testing::module_inputs(*before, 7);
  const InterpretResult racy = interpret(*before, inputs);
  ASSERT_FALSE(racy.ok);
  EXPECT_EQ(racy.error_kind, InterpretErrorKind::UnsynchronizedRead) << racy.error;
  EXPECT_NE(racy.error.find("of the CTA wrote with no barrier between"), std::string::npos)
      << racy.error;
  EXPECT_NE(racy.error.find("R_sum_part["), std::string::npos) << racy.error;

  // With it the kernel matches the float64 reference, and says why it has the barrier.
  const auto is_barrier = [](const Op& op) { return op.kind == OpKind::Barrier; };
  int added = 0;
  bool noted = false;
  for (size_t k = 0; k < before->kernels.size(); ++k) {
    added += count_ops(*compilation.ma_module->kernels[k]->body, is_barrier) -
             count_ops(*before->kernels[k]->body, is_barrier);
    for (const std::string& note : compilation.ma_module->kernels[k]->notes) {
      noted = noted || note.find("order the threads' accesses of R_sum_part") != std::string::npos;
    }
  }
  EXPECT_GE(added, 1);
  EXPECT_TRUE(noted);
  for (uint64_t seed : {1, 2}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed);
}

TEST(GlobalBarriers, TheBarrierBeforeALoopThatOnlyReadsIsNotRepeatedInEveryIteration) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/rmsnorm.nt", kNestedSplitRmsnorm, {"T=32", "H=256"}, "sm_80");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  // The loop combining the two partial sums reads R_sum_part: one barrier before it, none in it.
  bool found = false;
  for (const KernelPtr& kernel : compilation.ma_module->kernels) {
    const std::vector<OpPtr>& ops = kernel->body->ops;
    for (size_t i = 1; i < ops.size(); ++i) {
      if (ops[i]->kind != OpKind::For) continue;
      const bool reads_partials =
          count_ops(*ops[i]->body, [](const Op& op) {
            return op.kind == OpKind::GlobalLoad && op.buffer->name == "R_sum_part";
          }) > 0;
      if (!reads_partials) continue;
      found = true;
      EXPECT_EQ(count_ops(*ops[i]->body, [](const Op& op) { return op.kind == OpKind::Barrier; }), 0);
      bool barrier_before = false;
      for (size_t j = i; j-- > 0 && !barrier_before;) {
        if (ops[j]->kind == OpKind::GlobalStore) break;
        barrier_before = ops[j]->kind == OpKind::Barrier;
      }
      EXPECT_TRUE(barrier_before) << "no barrier between the last store and the loop";
    }
  }
  EXPECT_TRUE(found);
}

// In a warp-specialized kernel the consumers store their tile and then read it back in another
// shape (a second tiling of the epilogue): the barrier is the consumers' named barrier, which a
// bar.sync 0 of the whole CTA would deadlock on.
TEST(GlobalBarriers, InsideARoleTheBarrierIsTheRolesNamedBarrier) {
  const std::vector<std::string> decisions = {
      "tile(C_sum, m=128, n=256, k=64)",     "warp_spec(C_sum, consumers=2, stages=3)",
      "reverse_compute_at(C, C_sum, n_o)",    "bind(C_sum, n_o=grid.y, m_o=grid.x)",
      "tile(C, m=32, n=64)",
  };
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", decisions, {"M=256", "N=512", "K=128"}, "sm_90a");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const ModulePtr before = module_before_ordering(compilation);
  ASSERT_NE(before, nullptr);
  ASSERT_EQ(compilation.ma_module->kernels.size(), 1u);
  const auto role_barrier = [](const Op& op) {
    return op.kind == OpKind::NamedBarrier && op.barrier_id >= kFirstRoleBarrierId &&
           op.barrier_threads == 256 && !op.arrive_only;
  };
  const InterpretResult racy = interpret(*before, nautilus::testing::module_inputs(*before, 3));
  ASSERT_FALSE(racy.ok);
  EXPECT_EQ(racy.error_kind, InterpretErrorKind::UnsynchronizedRead) << racy.error;
  EXPECT_GT(count_ops(*compilation.ma_module->kernels[0]->body, role_barrier),
            count_ops(*before->kernels[0]->body, role_barrier));
  EXPECT_EQ(count_ops(*compilation.ma_module->kernels[0]->body,
                      [](const Op& op) { return op.kind == OpKind::Barrier; }),
            count_ops(*before->kernels[0]->body, [](const Op& op) { return op.kind == OpKind::Barrier; }));
  for (uint64_t seed : {1, 2}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed);
}

// Kernels that read back nothing they write keep their module: the hand schedules of the
// assets get no barrier from this pass.
TEST(GlobalBarriers, KernelsThatReadBackNothingAreLeftAsTheyWere) {
  for (const std::string asset : {"gemm", "attention", "layernorm", "softmax", "gated_mlp"}) {
    for (const std::string arch : {"sm_80", "sm_90a"}) {
      const driver::Compilation compilation =
          compile_for_arch("assets/specs/" + asset + ".nt", hand_schedule(asset),
                           nautilus::testing::small_sizes(asset), arch);
      ASSERT_TRUE(compilation.ok()) << asset << " " << arch << ": " << compilation.schedule_error
                                    << compilation.internal_error;
      EXPECT_EQ(module_before_ordering(compilation), compilation.ma_module) << asset << " " << arch;
    }
  }
}

}  // namespace
}  // namespace nautilus::matile
