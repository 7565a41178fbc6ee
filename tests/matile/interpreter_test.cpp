// The MA interpreter on a hand-built kernel (one warp, one 16x16x16 tile): cp.async into a
// swizzled allocation, ldmatrix (plain for A, .trans for B), mma.sync, a masked window store --
// checked against a direct f32 product; and the hazards it must report on the same kernel.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "core/matile/interpreter.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/support/rng.h"

namespace nautilus::matile {
namespace {

using scalar::BufferRole;
using scalar::MemoryScope;

struct TileKernel {
  Buffer A = scalar::make_buffer("A", {16, 16}, DType::BF16, MemoryScope::Global, BufferRole::Input);
  Buffer B = scalar::make_buffer("B", {16, 16}, DType::BF16, MemoryScope::Global, BufferRole::Input);
  Buffer C = scalar::make_buffer("C", {16, 16}, DType::F32, MemoryScope::Global, BufferRole::Output);
  TensorMap inputs;

  TileKernel() {
    SplitMix64 rng(5);
    for (const Buffer& buffer : {A, B}) {
      TensorData data{buffer->shape, buffer->dtype, {}};
      for (int i = 0; i < 256; ++i) data.values.push_back(round_to(DType::BF16, rng.uniform(-1.0, 1.0)));
      inputs[buffer->name] = data;
    }
  }

  // Options of the kernel under test: what to leave out, which ldmatrix B uses.
  struct Variant {
    bool wait = true, barrier = true, overwrite_after_read = false;
    SharedRead b_read = SharedRead::LdMatrixX4Trans;
    layout::Swizzle swizzle{3, 3, 3};
  };

  ModulePtr build(const Variant& variant) const {
    Builder b(1);
    const layout::ComposedLayout smem = row_major_shared({16, 16}, variant.swizzle);
    const int as = b.shared("As", DType::BF16, {16, 16}, smem, 1, "A");
    const int bs = b.shared("Bs", DType::BF16, {16, 16}, smem, 1, "B");
    const layout::TVLayout copy = *layout::copy_row_major_16b(16, 16, 2, 32);
    const GlobalAccess window{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {16, 16}, false};
    b.async_copy(SharedRef{as, nullptr, {0, 0}, false}, A, window, {16, 16}, copy, 8, nullptr);
    b.async_copy(SharedRef{bs, nullptr, {0, 0}, false}, B, window, {16, 16}, copy, 8, nullptr);
    b.commit_group();
    if (variant.wait) b.wait_group(0);
    if (variant.barrier) b.barrier();
    const Value a = b.shared_load(SharedRef{as, nullptr, {0, 0}, false}, SharedRead::LdMatrixX4,
                                  TileType{DType::BF16, {16, 16}}, *mma_a_layout(16, 16, 1, 1), "a");
    const Value bf = b.shared_load(SharedRef{bs, nullptr, {0, 0}, false}, variant.b_read,
                                   TileType{DType::BF16, {16, 16}}, *mma_b_layout(16, 16, 1, 1), "b");
    if (variant.overwrite_after_read) {
      b.async_copy(SharedRef{as, nullptr, {0, 0}, false}, A, window, {16, 16}, copy, 8, nullptr);
    }
    const RegisterLayout c = *mma_c_layout(16, 16, 1, 1);
    const Value zero = b.full(0.0, TileType{DType::F32, {16, 16}}, c, "zero");
    const Value d = b.mma(a, bf, zero, 1, 1, "d");
    // Rows 13.. are not stored: the window's bound.
    const GlobalAccess out{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {13, 16}, false};
    b.global_store(C, out, {}, d);
    // Rows 13..15 get zeros from a second window at offset 13 (outputs must be fully written).
    const Value rest = b.full(0.0, TileType{DType::F32, {16, 16}}, blocked_layout({16, 16}, 32), "rest");
    const Value row13 = b.full(13.0, vrtile::index_scalar(), uniform_layout({}, 32), "row13");
    const GlobalAccess tail{GlobalAccess::Form::Window, {row13, nullptr}, {0, 1}, {16, 16}, false};
    b.global_store(C, tail, {}, rest);
    return std::make_shared<const Module>(Module{"tile", "sm_80", {A, B, C}, {}, {b.finish_kernel("tile", {A, B, C})}});
  }
};

TEST(Interpreter, MmaThroughSharedMemoryMatchesADirectProduct) {
  TileKernel k;
  for (const layout::Swizzle& swizzle : {layout::Swizzle{}, layout::Swizzle{1, 3, 3}, layout::Swizzle{3, 3, 3}}) {
    TileKernel::Variant variant;
    variant.swizzle = swizzle;
    const ModulePtr module = k.build(variant);
    ASSERT_EQ(verify(*module), std::vector<std::string>{});
    const InterpretResult result = interpret(*module, k.inputs);
    ASSERT_TRUE(result.ok) << result.error;
    const std::vector<double>& a = k.inputs.at("A").values;
    const std::vector<double>& b = k.inputs.at("B").values;
    const std::vector<double>& c = result.outputs.at("C").values;
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 16; ++n) {
        float sum = 0.0f;
        for (int kk = 0; kk < 16; ++kk) {
          sum = std::fmaf(static_cast<float>(a[m * 16 + kk]), static_cast<float>(b[kk * 16 + n]), sum);
        }
        EXPECT_EQ(c[m * 16 + n], m < 13 ? sum : 0.0) << m << ", " << n;
      }
    }
    EXPECT_EQ(result.instructions.at("mma.m16n8k16"), 2u);
    EXPECT_EQ(result.instructions.at("ldmatrix.x4"), 1u);
    EXPECT_EQ(result.instructions.at("ldmatrix.x4.trans"), 1u);
    EXPECT_EQ(result.instructions.at("cp.async"), 64u);  // 2 tiles x 32 vectors
  }
}

TEST(Interpreter, ReportsTheHazards) {
  TileKernel k;
  TileKernel::Variant no_wait;
  no_wait.wait = false;
  InterpretResult result = interpret(*k.build(no_wait), k.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("shared_load %a: thread 0 reads As element"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("before its cp.async landed"), std::string::npos) << result.error;

  TileKernel::Variant no_barrier;
  no_barrier.barrier = false;
  result = interpret(*k.build(no_barrier), k.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("without a barrier in between"), std::string::npos) << result.error;

  TileKernel::Variant overwrite;
  overwrite.overwrite_after_read = true;
  result = interpret(*k.build(overwrite), k.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("read since the last barrier"), std::string::npos) << result.error;
}

TEST(Interpreter, TheWrongLdmatrixVariantIsMisaligned) {
  // B stored [k][n] needs .trans: without it the lanes' row addresses are single columns.
  TileKernel k;
  TileKernel::Variant wrong;
  wrong.b_read = SharedRead::LdMatrixX4;
  const InterpretResult result = interpret(*k.build(wrong), k.inputs);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("is not 16-byte aligned"), std::string::npos) << result.error;
}

TEST(Interpreter, StepBudgetAndVerification) {
  TileKernel k;
  InterpretOptions tight;
  tight.max_steps = 100;
  const InterpretResult result = interpret(*k.build({}), k.inputs, tight);
  ASSERT_FALSE(result.ok);
  EXPECT_NE(result.error.find("step budget"), std::string::npos) << result.error;

  auto broken = std::make_shared<Module>(*k.build({}));
  broken->arch = "sm_75";
  const InterpretResult refused = interpret(*broken, k.inputs);
  ASSERT_FALSE(refused.ok);
  EXPECT_NE(refused.error.find("does not verify: module tile: unknown arch sm_75"), std::string::npos)
      << refused.error;
}

// An allocation on another's bytes (SharedAlloc::alias_of) shares its elements and their race
// states: a value stored through one is read through the other.
TEST(Interpreter, AnAliasSharesItsBasesElements) {
  const Buffer y = scalar::make_buffer("Y", {8, 16}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Builder b(1);
  const layout::ComposedLayout rows = row_major_shared({8, 16}, {});
  const int base = b.shared("Base", DType::F32, {8, 16}, rows, 1, "");
  const int alias = b.shared_alias(base, "Alias", DType::F32, {8, 16}, rows, "");
  EXPECT_EQ(b.shared_bytes(), 8 * 16 * 4);
  const RegisterLayout l = blocked_layout({8, 16}, 32);
  b.shared_store(SharedRef{base, nullptr, {0, 0}, false}, b.full(3.0, TileType{DType::F32, {8, 16}}, l, "x"));
  b.barrier();
  const Value read = b.shared_load(SharedRef{alias, nullptr, {0, 0}, false}, SharedRead::Scalar,
                                   TileType{DType::F32, {8, 16}}, l, "read");
  b.global_store(y, GlobalAccess{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {8, 16}, false}, {}, read);
  const Module module{"alias", "sm_80", {y}, {}, {b.finish_kernel("alias", {y})}};
  ASSERT_EQ(verify(module), std::vector<std::string>{});
  EXPECT_NE(print_kernel(*module.kernels[0]).find("aliases Base"), std::string::npos);
  const InterpretResult result = interpret(module, {});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("Y").values, std::vector<double>(8 * 16, 3.0));
}

TEST(Interpreter, TripCountStopsALoopEarly) {
  // acc = sum of 1.0 over min(extent 5, trip count) iterations, for trip counts -1, 3 and 9.
  for (const auto& [trips, expected] : std::vector<std::pair<int, double>>{{-1, 0.0}, {3, 3.0}, {9, 5.0}}) {
    const Buffer y = scalar::make_buffer("Y", {4}, DType::F32, MemoryScope::Global, BufferRole::Output);
    Builder b(1);
    const RegisterLayout l = blocked_layout({4}, 32);
    const Value trip = b.full(trips, vrtile::index_scalar(), uniform_layout({}, 32), "trip");
    const Value one = b.full(1.0, TileType{DType::F32, {4}}, l, "one");
    const Value zero = b.full(0.0, TileType{DType::F32, {4}}, l, "zero");
    const std::vector<Value> acc = b.for_loop(
        "i", 5, {zero},
        [&](const Value&, const std::vector<Value>& carried) {
          return std::vector<Value>{b.binary(BinaryOp::Add, carried[0], one, "next")};
        },
        {"acc"}, {"acc_i"}, 0, trip);
    b.global_store(y, GlobalAccess{GlobalAccess::Form::Window, {nullptr}, {0}, {4}, false}, {}, acc[0]);
    const Module module{"loop", "sm_80", {y}, {}, {b.finish_kernel("loop", {y})}};
    ASSERT_EQ(verify(module), std::vector<std::string>{});
    EXPECT_NE(print_kernel(*module.kernels[0]).find("for i in 0..5 iter_args(%acc_i = %zero) trips %trip {"),
              std::string::npos);
    const InterpretResult result = interpret(module, {});
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.outputs.at("Y").values, std::vector<double>(4, expected)) << trips;
  }
}


// Two CTAs keep their row in one global scratch buffer S[4] (no CTA index in its window): run
// one after the other the result is right, on a GPU it is not. The interpreter reports the
// second CTA's overwrite; with S indexed by the CTA (S[2, 4]) the same kernel passes.
TEST(Interpreter, CtasSharingAGlobalScratchBufferAreARace) {
  for (const bool per_cta : {false, true}) {
    const Buffer x = scalar::make_buffer("X", {2, 4}, DType::F32, MemoryScope::Global, BufferRole::Input);
    const Buffer scratch = scalar::make_buffer("S", per_cta ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{4},
                                               DType::F32, MemoryScope::Global, BufferRole::Intermediate);
    const Buffer y = scalar::make_buffer("Y", {2, 4}, DType::F32, MemoryScope::Global, BufferRole::Output);
    Builder b(1);
    const Value r = b.grid("r", 2);
    const RegisterLayout l = blocked_layout({4}, 32);
    const GlobalAccess row{GlobalAccess::Form::Window, {r, nullptr}, {-1, 0}, {2, 4}, false};
    const GlobalAccess shared_row = per_cta ? row : GlobalAccess{GlobalAccess::Form::Window, {nullptr}, {0}, {4}, false};
    const Value v = b.global_load(x, row, {}, 0.0, TileType{DType::F32, {4}}, l, "v");
    b.global_store(scratch, shared_row, {}, v);
    b.barrier();  // the threads holding copies of an element read what its first holder stored
    const Value back = b.global_load(scratch, shared_row, {}, 0.0, TileType{DType::F32, {4}}, l, "back");
    b.global_store(y, row, {}, back);
    const Module module{"scratch", "sm_80", {x, y}, {scratch}, {b.finish_kernel("scratch", {x, scratch, y})}};
    ASSERT_EQ(verify(module), std::vector<std::string>{});
    TensorMap inputs;
    inputs["X"] = TensorData{{2, 4}, DType::F32, {1, 2, 3, 4, 5, 6, 7, 8}};
    const InterpretResult result = interpret(module, inputs);
    if (per_cta) {
      ASSERT_TRUE(result.ok) << result.error;
      EXPECT_EQ(result.outputs.at("Y").values, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
    } else {
      EXPECT_FALSE(result.ok);
      EXPECT_EQ(result.error_kind, InterpretErrorKind::CrossCtaRace) << result.error;
      EXPECT_NE(result.error.find("CTA 1 writes S[0] = 5.000000 where CTA 0 of the same launch wrote "
                                  "1.000000"),
                std::string::npos)
          << result.error;
    }
  }
}

}  // namespace
}  // namespace nautilus::matile
