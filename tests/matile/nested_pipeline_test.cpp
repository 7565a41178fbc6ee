// A software-pipelined loop inside another loop of the CTA: its prologue refills the ring that
// the outer loop's previous iteration read, so every thread must be done with it first. Found
// by the differential tester's sm_90a triples (seed 20261201, triple 1277): a normalized GEMM
// whose output columns are a loop of the CTA (reverse_compute_at on n_o, n_o not bound) had its
// cp.async prologue race with the previous column tile's ldmatrix reads; the MA interpreter
// reported the overwrite. Same on sm_80.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/matile/interpreter.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_scheduled;
using nautilus::testing::expect_stage_matches_reference;

constexpr const char* kNormalizedGemm = R"(let T = 136, H = 72, N = 64
input X[T, H] : bf16
input Wn[H] : bf16
input Wp[H, N] : bf16
Xn[t, h] : bf16 = X[t, h] * rsqrt((sum(h2) X[t, h2] * X[t, h2]) / H + 0.00001) * Wn[h]
output Y[t, n] : bf16 = sum(h) Xn[t, h] * Wp[h, n] * 0.25
)";

TEST(NestedPipeline, APrologueInsideAnotherLoopWaitsForTheRingsReaders) {
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    driver::CompileOptions options;
    options.last_stage = driver::Stage::MATile;
    options.matile.arch = arch;
    const driver::Compilation compilation = compile_scheduled(
        std::make_shared<SourceFile>("inline.nt", kNormalizedGemm),
        {"inline(Xn)", "tile(Y_sum, t=32, n=32, h=64)", "compute_at(Xn_sum, Y_sum, t_o)",
         "reverse_compute_at(Y, Y_sum, n_o)", "bind(Y_sum, t_o=grid.x)",
         "launch(Y_sum, warps=4, stages=3)"},
        {}, options);
    ASSERT_TRUE(compilation.ok()) << arch << ": " << compilation.schedule_error << compilation.internal_error;
    // The CTA's loop over column tiles: a barrier comes before the ring's first copy.
    const Kernel& kernel = *compilation.ma_module->kernels.back();
    const Op* columns = nullptr;
    for (const OpPtr& op : kernel.body->ops) {
      if (op->kind == OpKind::For) columns = op.get();
    }
    ASSERT_NE(columns, nullptr) << arch;
    bool barrier_first = false;
    for (const OpPtr& op : columns->body->ops) {
      if (op->kind == OpKind::Barrier) barrier_first = true;
      if (op->kind == OpKind::AsyncCopy) break;
    }
    EXPECT_TRUE(barrier_first) << arch << ": the prologue's first copy comes before any barrier";
    for (uint64_t seed : {1, 2}) {
      expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, arch);
    }
  }
}

}  // namespace
}  // namespace nautilus::matile
