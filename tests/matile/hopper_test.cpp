// Hopper's asynchronous machine in the MA interpreter: a warp-specialized GEMM (TMA producer,
// two wgmma consumer warpgroups, a 3-stage ring of full/empty mbarriers, an stmatrix + TMA store
// epilogue) against a float64 reference at a size that is no tile multiple, in the fixed and in
// random interleavings; each deliberately broken variant caught with its typed error; and the
// verifier's rules for roles, mbarriers, tensor maps and wgmma operands.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/codegen/emit_cuda.h"
#include "core/matile/hopper.h"
#include "core/matile/interpreter.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/support/rng.h"
#include "tests/common/hopper_kernels.h"
#include "tests/common/matile_ops.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::describe_failure;
using testing::HopperBug;
using testing::HopperGemmShape;
using testing::hopper_gemm;
using testing::hopper_gemm_inputs;

// C must equal the f32 sum in increasing k rounded to bf16 (the wgmma semantics) exactly, and
// the float64 product within bf16's rounding.
void expect_gemm_output(const HopperGemmShape& shape, const TensorMap& inputs,
                        const InterpretResult& result) {
  ASSERT_TRUE(result.ok) << describe_failure(result);
  const TensorData& a = inputs.at("A");
  const TensorData& b = inputs.at("B");
  const TensorData& c = result.outputs.at("C");
  ASSERT_EQ(c.values.size(), static_cast<size_t>(shape.m * shape.n));
  double error = 0.0, norm = 0.0;
  int64_t mismatches = 0;
  for (int64_t i = 0; i < shape.m; ++i) {
    for (int64_t j = 0; j < shape.n; ++j) {
      double reference = 0.0;
      float f32 = 0.0f;
      for (int64_t k = 0; k < shape.k; ++k) {
        const double x = a.values[static_cast<size_t>(i * shape.k + k)];
        const double y = b.values[static_cast<size_t>(j * shape.k + k)];
        reference += x * y;
        f32 = std::fmaf(static_cast<float>(x), static_cast<float>(y), f32);
      }
      const double got = c.values[static_cast<size_t>(i * shape.n + j)];
      if (got != round_to(DType::BF16, f32)) ++mismatches;
      error += (got - reference) * (got - reference);
      norm += reference * reference;
    }
  }
  EXPECT_EQ(mismatches, 0) << "elements differing from the f32 wgmma accumulation";
  EXPECT_LT(std::sqrt(error / norm), 1e-2) << "normwise error against the float64 reference";
}

TEST(Hopper, WarpSpecializedGemmMatchesTheReference) {
  const HopperGemmShape shape;
  const ModulePtr module = hopper_gemm(shape);
  ASSERT_TRUE(verify(*module).empty()) << verify(*module).front();
  const TensorMap inputs = hopper_gemm_inputs(shape, 3);
  const InterpretResult result = interpret(*module, inputs);
  expect_gemm_output(shape, inputs, result);
  // 2 x 2 CTAs, each with 6 k steps of 2 consumers x 4 wgmma.m64n64k16 and 2 boxes.
  EXPECT_EQ(result.instructions.at("wgmma.m64n64k16"), 4u * 6 * 2 * 4);
  EXPECT_EQ(result.instructions.at("tma.load"), 4u * 6 * 2);
  EXPECT_EQ(result.instructions.at("tma.store"), 4u);
  EXPECT_EQ(result.instructions.at("stmatrix.x4"), 4u * 2 * 4 * 4);
}

// One consumer role of two warpgroups issuing m128 wgmmas (each warpgroup its 64 rows).
TEST(Hopper, CooperativeConsumersMatchTheReference) {
  HopperGemmShape shape;
  shape.cooperative = true;
  const ModulePtr module = hopper_gemm(shape);
  ASSERT_TRUE(verify(*module).empty()) << verify(*module).front();
  const TensorMap inputs = hopper_gemm_inputs(shape, 4);
  for (uint64_t seed : {0u, 9u}) {
    InterpretOptions options;
    options.schedule_seed = seed;
    const InterpretResult result = interpret(*module, inputs, options);
    expect_gemm_output(shape, inputs, result);
    if (result.ok) {
      EXPECT_EQ(result.instructions.at("wgmma.m64n64k16"), 4u * 6 * 2 * 4);
    }
  }
}

TEST(Hopper, RandomInterleavingsGiveTheSameResult) {
  const HopperGemmShape shape{72, 40, 200, 2};
  const ModulePtr module = hopper_gemm(shape);
  const TensorMap inputs = hopper_gemm_inputs(shape, 11);
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    InterpretOptions options;
    options.schedule_seed = seed;
    expect_gemm_output(shape, inputs, interpret(*module, inputs, options));
  }
}

struct BrokenCase {
  HopperBug bug;
  InterpretErrorKind kind;
  std::string message;  // a piece of the error
};

void expect_caught(const BrokenCase& broken, uint64_t seed) {
  const HopperGemmShape shape{72, 40, 200, 2};
  const ModulePtr module = hopper_gemm(shape, broken.bug);
  InterpretOptions options;
  options.schedule_seed = seed;
  const InterpretResult result = interpret(*module, hopper_gemm_inputs(shape, 5), options);
  ASSERT_FALSE(result.ok) << "seed " << seed;
  EXPECT_EQ(result.error_kind, broken.kind) << "seed " << seed << ": " << describe_failure(result);
  EXPECT_NE(result.error.find(broken.message), std::string::npos)
      << "seed " << seed << ": " << describe_failure(result);
}

class BrokenPipeline : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPipeline, IsCaughtInEveryInterleaving) {
  for (uint64_t seed : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u}) expect_caught(GetParam(), seed);
}

INSTANTIATE_TEST_SUITE_P(
    Hopper, BrokenPipeline,
    ::testing::Values(
        BrokenCase{HopperBug::MissingExpectTx, InterpretErrorKind::TxCountMismatch,
                   "completes without expect_tx, though TMA loads complete on it"},
        BrokenCase{HopperBug::ExpectTxTooLarge, InterpretErrorKind::TxCountMismatch, "expect_tx"},
        BrokenCase{HopperBug::ExpectTxTooSmall, InterpretErrorKind::TxCountMismatch,
                   "more transaction bytes landed than expect_tx announced"},
        BrokenCase{HopperBug::WrongProducerParity, InterpretErrorKind::Deadlock,
                   "role producer waits at `mbarrier.wait empty[%s] parity %phase`"},
        BrokenCase{HopperBug::ConsumerNeverReleases, InterpretErrorKind::Deadlock,
                   "deadlock: every role waits"},
        BrokenCase{HopperBug::ProducerSkipsEmptyWait, InterpretErrorKind::StageOverwrite,
                   "the TMA load of role producer overwrites"},
        BrokenCase{HopperBug::ConsumerReleasesEarly, InterpretErrorKind::StageOverwrite,
                   "the TMA load of role producer overwrites"},
        BrokenCase{HopperBug::AccumulatorBeforeWait, InterpretErrorKind::AccumulatorBeforeWait,
                   "a wgmma result whose group no wgmma.wait_group has retired"},
        BrokenCase{HopperBug::MissingProxyFence, InterpretErrorKind::ProxyFenceMissing,
                   "without a fence.proxy.async"},
        BrokenCase{HopperBug::MissingWgmmaFence, InterpretErrorKind::WgmmaFenceMissing,
                   "was written by ordinary code after the last wgmma.fence"}),
    [](const ::testing::TestParamInfo<BrokenCase>& param) {
      return std::string(interpret_error_kind_name(param.param.kind)) + "_" +
             std::to_string(param.index);
    });

TEST(Hopper, ErrorsNameTheOpAndItsPrintedForm) {
  const HopperGemmShape shape{72, 40, 200, 2};
  const InterpretResult result =
      interpret(*hopper_gemm(shape, HopperBug::AccumulatorBeforeWait), hopper_gemm_inputs(shape, 5));
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("in role consumer0: cast %c16"), std::string::npos) << result.error;
  EXPECT_EQ(result.error_op.rfind("%c16 = cast %acc : bf16[64, 64] #L", 0), 0u) << result.error_op;
}

TEST(Hopper, RegisterBudgetOverTheLimitIsRejected) {
  const ModulePtr module = hopper_gemm(HopperGemmShape{}, HopperBug::RegisterBudgetOver);
  const std::vector<std::string> errors = verify(*module);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("register budgets sum to 520 per warpgroup thread, above the 504 the CTA "
                           "holds from its launch (3 warpgroups x 168)"),
            std::string::npos)
      << errors[0];
  const InterpretResult result = interpret(*module, hopper_gemm_inputs(HopperGemmShape{}, 1));
  EXPECT_EQ(result.error_kind, InterpretErrorKind::Malformed);
}

// The pool is the CTA's registers at launch, not 64K: beside two consumers a producer of 32
// leaves 472 for 240 + 240 of 480 (that kernel hung on the H200: setmaxnreg.inc waited forever);
// 24 + 240 + 240 = 504 fits, and four warpgroups of 128 at launch share 512.
TEST(Hopper, RegisterBudgetsShareTheCtasRegistersAtLaunch) {
  EXPECT_EQ(launch_registers_per_thread(384), 168);
  EXPECT_EQ(launch_registers_per_thread(512), 128);
  EXPECT_EQ(launch_registers_per_thread(256), 248);
  EXPECT_EQ(role_register_pool(12), 504);
  EXPECT_EQ(role_register_pool(16), 512);
  const auto roles = [](std::vector<int> budgets) {
    Op op;
    op.kind = OpKind::Roles;
    for (size_t i = 0; i < budgets.size(); ++i) {
      op.roles.push_back({i == 0 ? "producer" : "consumer" + std::to_string(i), 1, budgets[i], make_region({})});
    }
    return op;
  };
  EXPECT_TRUE(roles_error(roles({32, 240, 240}), 12).has_value());
  EXPECT_FALSE(roles_error(roles({24, 240, 240}), 12).has_value());
  EXPECT_FALSE(roles_error(roles({40, 232, 232}), 12).has_value());
  EXPECT_FALSE(roles_error(roles({32, 160, 160, 160}), 16).has_value());
  EXPECT_TRUE(roles_error(roles({40, 160, 160, 160}), 16).has_value());
}

// The CUDA emitter prints every Hopper op of the hand-built kernels (tests/codegen/
// emit_hopper_test.cpp checks what it prints and compiles it; tests/gpu runs it).
TEST(Hopper, TheEmitterPrintsHopperOps) {
  const codegen::Result<codegen::EmittedModule> emitted =
      codegen::emit_cuda(*hopper_gemm(HopperGemmShape{}));
  ASSERT_TRUE(emitted) << emitted.error().message;
  EXPECT_NE(emitted->source.find("mbarrier_init("), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Small kernels: arrivals, named barriers and the verifier's rules

Module single_kernel_module(KernelPtr kernel, std::vector<Buffer> params, std::string arch = "sm_90a") {
  Module module;
  module.name = "m";
  module.arch = std::move(arch);
  module.params = std::move(params);
  module.kernels.push_back(std::move(kernel));
  return module;
}

Buffer output_buffer() {
  return scalar::make_buffer("out", {1}, DType::F32, scalar::MemoryScope::Global,
                             scalar::BufferRole::Output);
}

// Writes `out` so that the kernel has an output; `body` builds the rest.
InterpretResult run_small(int warps, const std::function<void(Builder&)>& body) {
  const Buffer out = output_buffer();
  Builder b(warps);
  body(b);
  const Value one = b.full(1.0, TileType{DType::F32, {1}}, uniform_layout({1}, b.threads()));
  b.global_store(out, GlobalAccess{GlobalAccess::Form::Window, {nullptr}, {0}, {1}, false}, {}, one);
  const Module module = single_kernel_module(b.finish_kernel("k", {out}), {out});
  const std::vector<std::string> errors = verify(module);
  EXPECT_TRUE(errors.empty()) << errors.front();
  return interpret(module, {});
}

// A TMA box landing outside roles: out-of-bounds rows are zeros, and the data may be read only
// after waiting for the phase it completed.
TEST(Hopper, TmaDataNeedsItsPhaseEvenOutsideRoles) {
  for (bool wait : {true, false}) {
    const Buffer in = scalar::make_buffer("in", {6, 8}, DType::BF16, scalar::MemoryScope::Global,
                                          scalar::BufferRole::Input);
    const Buffer out = scalar::make_buffer("out", {8, 8}, DType::BF16, scalar::MemoryScope::Global,
                                           scalar::BufferRole::Output);
    Builder b(4);
    const int box = b.shared("box", DType::BF16, {8, 8}, *tma_box_layout(DType::BF16, {8, 8}, 0), 1, "");
    const int map = b.tma_map("tm", in, {8, 8}, 0);
    const int bar = b.mbarrier("bar", 1, 1, "");
    const Value zero = b.full(0.0, vrtile::index_scalar(), uniform_layout({}, b.threads()));
    b.mbarrier_init(bar);
    b.mbarrier_arrive(BarrierRef{bar, nullptr}, 128);
    b.tma_load(SharedRef{box, nullptr, {0, 0}, false}, map, {zero, zero}, BarrierRef{bar, nullptr});
    if (wait) b.mbarrier_wait(BarrierRef{bar, nullptr}, zero);
    const Value tile = b.shared_load(SharedRef{box, nullptr, {0, 0}, false}, SharedRead::Scalar,
                                     TileType{DType::BF16, {8, 8}}, blocked_layout({8, 8}, b.threads()));
    b.global_store(out, GlobalAccess{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {8, 8}, false},
                   {}, tile);
    const Module module = single_kernel_module(b.finish_kernel("k", {in, out}), {in, out});
    ASSERT_TRUE(verify(module).empty()) << verify(module).front();
    TensorData data{{6, 8}, DType::BF16, {}};
    for (int i = 0; i < 48; ++i) data.values.push_back(i + 1);
    const InterpretResult result = interpret(module, {{"in", data}});
    if (wait) {
      ASSERT_TRUE(result.ok) << result.error;
      const std::vector<double>& got = result.outputs.at("out").values;
      for (int i = 0; i < 64; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], i < 48 ? i + 1 : 0) << i;
    } else {
      EXPECT_EQ(result.error_kind, InterpretErrorKind::UnlandedRead) << result.error;
      EXPECT_NE(result.error.find("landed by TMA on bar[0] phase 0, without waiting for that phase"),
                std::string::npos)
          << result.error;
    }
  }
}

// The RS form outside roles: one warpgroup, A [64, 32] loaded into registers in the wgmma A
// fragment layout, B [16, 32] (K-major) landed by TMA; d = A * B^T in f32, increasing k. With
// the fence before A's load, the wgmma reads registers written after it.
TEST(Hopper, WgmmaWithRegisterA) {
  for (bool fence_first : {false, true}) {
    const Buffer a_in = scalar::make_buffer("A", {64, 32}, DType::BF16, scalar::MemoryScope::Global,
                                            scalar::BufferRole::Input);
    const Buffer b_in = scalar::make_buffer("B", {16, 32}, DType::BF16, scalar::MemoryScope::Global,
                                            scalar::BufferRole::Input);
    const Buffer out = scalar::make_buffer("C", {64, 16}, DType::F32, scalar::MemoryScope::Global,
                                           scalar::BufferRole::Output);
    Builder b(4);
    const int bs = b.shared("Bs", DType::BF16, {16, 32}, *tma_box_layout(DType::BF16, {16, 32}, 64), 1, "");
    const int map = b.tma_map("tmB", b_in, {16, 32}, 64);
    const int bar = b.mbarrier("bar", 1, 1, "");
    const Value zero = b.full(0.0, vrtile::index_scalar(), uniform_layout({}, b.threads()));
    b.mbarrier_init(bar);
    b.mbarrier_arrive(BarrierRef{bar, nullptr}, 16 * 32 * 2);
    b.tma_load(SharedRef{bs, nullptr, {0, 0}, false}, map, {zero, zero}, BarrierRef{bar, nullptr});
    if (fence_first) b.wgmma_fence();
    const GlobalAccess window{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {64, 32}, false};
    const Value a = b.global_load(a_in, window, {}, 0.0, TileType{DType::BF16, {64, 32}},
                                  *wgmma_a_layout(64, 32, 1), "a");
    const Value c0 = b.full(0.0, TileType{DType::F32, {64, 16}}, *wgmma_accumulator_layout(64, 16, 1), "c0");
    if (!fence_first) b.wgmma_fence();
    b.mbarrier_wait(BarrierRef{bar, nullptr}, zero);
    const Value d = b.wgmma(SharedRef{}, a, SharedRef{bs, nullptr, {0, 0}, true}, 32, c0, "d");
    b.wgmma_commit_group();
    b.wgmma_wait_group(0);
    b.global_store(out, GlobalAccess{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {64, 16}, false},
                   {}, d);
    const Module module = single_kernel_module(b.finish_kernel("k", {a_in, b_in, out}), {a_in, b_in, out});
    ASSERT_TRUE(verify(module).empty()) << verify(module).front();
    const HopperGemmShape shape{64, 16, 32, 1};
    const TensorMap inputs = hopper_gemm_inputs(shape, 9);
    const InterpretResult result = interpret(module, inputs);
    if (fence_first) {
      EXPECT_EQ(result.error_kind, InterpretErrorKind::WgmmaFenceMissing) << result.error;
      continue;
    }
    ASSERT_TRUE(result.ok) << describe_failure(result);
    const std::vector<double>& got = result.outputs.at("C").values;
    for (int64_t i = 0; i < 64; ++i) {
      for (int64_t j = 0; j < 16; ++j) {
        float sum = 0.0f;
        for (int64_t k = 0; k < 32; ++k) {
          sum = std::fmaf(static_cast<float>(inputs.at("A").values[static_cast<size_t>(i * 32 + k)]),
                          static_cast<float>(inputs.at("B").values[static_cast<size_t>(j * 32 + k)]), sum);
        }
        ASSERT_EQ(got[static_cast<size_t>(i * 16 + j)], sum) << i << ", " << j;
      }
    }
    EXPECT_EQ(result.instructions.at("wgmma.m64n16k16"), 2u);
  }
}

TEST(Hopper, OverArrivalIsReported) {
  const InterpretResult result = run_small(4, [](Builder& b) {
    const int bar = b.mbarrier("bar", 1, 1, "");
    b.mbarrier_init(bar);
    b.mbarrier_arrive(BarrierRef{bar, nullptr}, 128);  // waits for 128 bytes that never come
    b.mbarrier_arrive(BarrierRef{bar, nullptr});
  });
  EXPECT_EQ(result.error_kind, InterpretErrorKind::ArrivalCountMismatch) << result.error;
  EXPECT_NE(result.error.find("only 0 arrivals pending (over-arrival)"), std::string::npos) << result.error;
}

// An arrive per warp counts one arrival for each warp: 4 complete a phase of 4 arrivals for
// 128 threads, and leave a barrier that expects one arrival per thread in a partial phase.
TEST(Hopper, ArrivePerWarpCountsWarps) {
  for (int64_t expected : {4, 128}) {
    const InterpretResult result = run_small(4, [&](Builder& b) {
      const int bar = b.mbarrier("bar", 1, expected, "");
      const Value zero = b.full(0.0, vrtile::index_scalar(), uniform_layout({}, b.threads()));
      b.mbarrier_init(bar);
      b.mbarrier_arrive_per_warp(BarrierRef{bar, nullptr}, b.threads());
      if (expected == 4) b.mbarrier_wait(BarrierRef{bar, nullptr}, zero);
    });
    if (expected == 4) {
      EXPECT_TRUE(result.ok) << result.error;
      EXPECT_EQ(result.instructions.at("mbarrier.arrive"), 1u);
    } else {
      EXPECT_EQ(result.error_kind, InterpretErrorKind::ArrivalCountMismatch) << result.error;
      EXPECT_NE(result.error.find("124 of 128 arrivals"), std::string::npos) << result.error;
    }
  }
}

TEST(Hopper, PartialPhaseAtKernelEndIsReported) {
  const InterpretResult result = run_small(4, [](Builder& b) {
    const int bar = b.mbarrier("bar", 2, 2, "");
    b.mbarrier_init(bar);
    b.mbarrier_arrive(BarrierRef{bar, nullptr});
  });
  EXPECT_EQ(result.error_kind, InterpretErrorKind::ArrivalCountMismatch) << result.error;
  EXPECT_NE(result.error.find("bar[0] in a partial phase: 0 phases completed"), std::string::npos)
      << result.error;
}

TEST(Hopper, WaitOutsideRolesThatNothingCompletesIsADeadlock) {
  const InterpretResult result = run_small(4, [](Builder& b) {
    const int bar = b.mbarrier("bar", 1, 1, "");
    b.mbarrier_init(bar);
    b.mbarrier_wait(BarrierRef{bar, nullptr},
                    b.full(0.0, vrtile::index_scalar(), uniform_layout({}, b.threads())));
  });
  EXPECT_EQ(result.error_kind, InterpretErrorKind::Deadlock) << result.error;
}

// Two roles hand a value through shared memory: ordered by a named barrier it is fine; the
// reader running first without one is an unsynchronized read.
TEST(Hopper, NamedBarrierOrdersRoles) {
  for (bool synchronized : {true, false}) {
    const InterpretResult result = run_small(8, [&](Builder& b) {
      const int box = b.shared("box", DType::F32, {4}, row_major_shared({4}, layout::Swizzle{}), 1, "");
      const auto ref = SharedRef{box, nullptr, {0}, false};
      b.roles({{"writer", 1, 128,
                [&] {
                  b.shared_store(ref, b.full(2.0, TileType{DType::F32, {4}},
                                             uniform_layout({4}, b.threads())));
                  if (synchronized) b.named_barrier(2, 256, /*arrive_only=*/true);
                }},
               {"reader", 1, 128, [&] {
                  // In the fixed schedule the writer's store comes first either way.
                  b.full(0.0, vrtile::index_scalar(), uniform_layout({}, b.threads()));
                  if (synchronized) b.named_barrier(2, 256);
                  b.shared_load(ref, SharedRead::Scalar, TileType{DType::F32, {4}},
                                uniform_layout({4}, b.threads()));
                }}});
    });
    if (synchronized) {
      EXPECT_TRUE(result.ok) << result.error;
    } else {
      EXPECT_EQ(result.error_kind, InterpretErrorKind::UnsynchronizedRead) << result.error;
      EXPECT_NE(result.error.find("written by role writer without synchronization"), std::string::npos)
          << result.error;
    }
  }
}

TEST(HopperVerifier, RejectsHopperOpsOnSm80AndBadRoles) {
  const Buffer out = output_buffer();
  Builder b(8);
  const int bar = b.mbarrier("bar", 1, 1, "");
  b.mbarrier_init(bar);
  // Builder::barrier() inside a role is the role's named barrier; a bar.sync 0 appended by hand
  // is what the verifier must refuse there.
  b.roles({{"a", 1, 100,
            [&] {
              auto sync = std::make_shared<Op>();
              sync->kind = OpKind::Barrier;
              b.append(sync);
            }},
           {"b", 2, 64, [] {}}});
  const Module module = single_kernel_module(b.finish_kernel("k", {out}), {out}, "sm_80");
  const std::vector<std::string> errors = verify(module);
  const auto has = [&](const std::string& piece) {
    for (const std::string& e : errors) {
      if (e.find(piece) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("mbarriers and tensor maps need sm_90a")) << errors.size();
  EXPECT_TRUE(has("roles: needs sm_90a"));
  EXPECT_TRUE(has("setmaxnreg 100 must be a multiple of 8"));
  EXPECT_TRUE(has("cannot run inside role a: bar.sync 0 waits for the whole CTA"));
}

TEST(HopperVerifier, ChecksTensorMapsAgainstTheirAllocations) {
  const Buffer in = scalar::make_buffer("in", {100, 100}, DType::BF16, scalar::MemoryScope::Global,
                                        scalar::BufferRole::Input);
  const Buffer out = output_buffer();
  Builder b(4);
  // Unswizzled allocation for a 128-byte swizzled map; a box past the swizzle span; a row pitch
  // of 200 bytes (not a multiple of 16).
  const int s = b.shared("s", DType::BF16, {64, 64}, row_major_shared({64, 64}, layout::Swizzle{}), 1, "");
  const int map = b.tma_map("tm", in, {64, 64}, 64);
  const int bar = b.mbarrier("bar", 1, 1, "");
  const Value zero = b.full(0.0, vrtile::index_scalar(), uniform_layout({}, b.threads()));
  b.tma_load(SharedRef{s, nullptr, {0, 0}, false}, map, {zero, zero}, BarrierRef{bar, nullptr});
  const Module module = single_kernel_module(b.finish_kernel("k", {in, out}), {in, out});
  const std::vector<std::string> errors = verify(module);
  std::string all;
  for (const std::string& e : errors) all += e + "\n";
  EXPECT_NE(all.find("the inner box (128 bytes) exceeds the 64-byte swizzle span"), std::string::npos) << all;
  EXPECT_NE(all.find("global strides must be multiples of 16 bytes"), std::string::npos) << all;
  EXPECT_NE(all.find("s is not laid out as tm lands its box"), std::string::npos) << all;
}

TEST(HopperVerifier, ChecksWgmmaOperands) {
  const Buffer out = output_buffer();
  Builder b(4);
  const int a = b.shared("a", DType::BF16, {64, 32}, row_major_shared({64, 32}, layout::Swizzle{}), 1, "");
  const int bt = b.shared("b", DType::F16, {32, 32}, row_major_shared({32, 32}, layout::Swizzle{}), 1, "");
  // An mma.sync accumulator over 2 x 2 warps is not the wgmma accumulator.
  const Value c = b.full(0.0, TileType{DType::F32, {64, 32}}, *mma_c_layout(64, 32, 2, 2));
  b.wgmma(SharedRef{a, nullptr, {0, 0}, false}, nullptr, SharedRef{bt, nullptr, {0, 0}, false}, 32, c);
  const Module module = single_kernel_module(b.finish_kernel("k", {out}), {out});
  std::string all;
  for (const std::string& e : verify(module)) all += e + "\n";
  EXPECT_NE(all.find("c is not in the wgmma accumulator layout"), std::string::npos) << all;
  EXPECT_NE(all.find("a and b must be bf16 or f16 of one dtype"), std::string::npos) << all;
}

}  // namespace
}  // namespace nautilus::matile
