// The MA verifier: one broken construct per test, each reported with the kernel and the op.
#include "core/matile/verifier.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/matile/layouts.h"

namespace nautilus::matile {
namespace {

using scalar::BufferRole;
using scalar::MemoryScope;

Buffer out_buffer() {
  return scalar::make_buffer("Y", {8, 16}, DType::F32, MemoryScope::Global, BufferRole::Output);
}

// The first problem of a one-kernel module built by `body` (empty when it verifies).
template <typename Body>
std::string first_problem(int warps, Body&& body) {
  Builder b(warps);
  const Buffer y = out_buffer();
  body(b, y);
  Module module{"m", "sm_80", {y}, {}, {b.finish_kernel("k", {y})}};
  const std::vector<std::string> problems = verify(module);
  return problems.empty() ? "" : problems.front();
}

const GlobalAccess kWindow{GlobalAccess::Form::Window, {nullptr, nullptr}, {0, 1}, {8, 16}, false};

TEST(Verifier, AWellFormedKernel) {
  EXPECT_EQ(first_problem(1, [](Builder& b, const Buffer& y) {
              const Value x = b.full(1.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32), "x");
              b.global_store(y, kWindow, {}, b.unary(UnaryOp::Exp, x, "e"));
            }),
            "");
}

TEST(Verifier, ElementwiseOperandsShareTheResultLayout) {
  EXPECT_EQ(first_problem(1, [](Builder& b, const Buffer& y) {
              const TileType t{DType::F32, {8, 16}};
              const Value x = b.full(1.0, t, blocked_layout({8, 16}, 32), "x");
              const Value u = b.full(2.0, t, uniform_layout({8, 16}, 32), "u");
              b.global_store(y, kWindow, {}, b.binary(BinaryOp::Add, x, u, "s"));
            }),
            "kernel k: binary %s: operand %u is not in the result's layout");
}

TEST(Verifier, LayoutsMustMatchTheCta) {
  EXPECT_EQ(first_problem(2, [](Builder& b, const Buffer& y) {
              const Value x = b.full(1.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32), "x");
              b.global_store(y, kWindow, {}, x);
            }),
            "kernel k: full %x: %x layout has 32 threads, the CTA 64");
}

TEST(Verifier, BroadcastsAreRegisterOnly) {
  const std::string problem = first_problem(1, [](Builder& b, const Buffer& y) {
    // A row vector in the blocked layout of [8]: thread t holds element t % 8; the [8, 16]
    // blocked layout asks thread t for rows it does not hold.
    const Value r = b.full(1.0, TileType{DType::F32, {8}}, blocked_layout({8}, 32), "r");
    const Value t = b.broadcast(r, {8, 16}, {0}, blocked_layout({8, 16}, 32), "t");
    b.global_store(y, kWindow, {}, t);
  });
  EXPECT_NE(problem.find("kernel k: broadcast %t: not register-only: thread"), std::string::npos) << problem;
}

TEST(Verifier, ReduceResultAndMasksFollowTheLayout) {
  const std::string problem = first_problem(1, [](Builder& b, const Buffer& y) {
    const RegisterLayout l = blocked_layout({8, 16}, 32);
    const Value x = b.full(1.0, TileType{DType::F32, {8, 16}}, l, "x");
    b.reduce(ReduceOp::Sum, x, 1, *slice_layout(l, {8, 16}, 1), {1, 2}, -1, "r");
    b.global_store(y, kWindow, {}, x);
  });
  EXPECT_EQ(problem, "kernel k: reduce %r: shuffle masks differ from the layout's");
}

TEST(Verifier, LdmatrixGivesFragments) {
  const std::string problem = first_problem(1, [](Builder& b, const Buffer& y) {
    const int s = b.shared("S", DType::BF16, {16, 16}, row_major_shared({16, 16}, {}), 1, "");
    const Value v = b.shared_load(SharedRef{s, nullptr, {0, 0}, false}, SharedRead::LdMatrixX4,
                                  TileType{DType::BF16, {16, 16}}, blocked_layout({16, 16}, 32), "v");
    (void)v;
    b.global_store(y, kWindow, {}, b.full(0.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32)));
  });
  EXPECT_EQ(problem, "kernel k: shared_load %v: ldmatrix gives an mma A or B fragment tile");
}

TEST(Verifier, ASwappedMmaTakesShortRowsAndTheTransposedAccumulator) {
  // One row times 16 columns on one warp: the swapped accumulator verifies; the direct one under
  // a swapped op, or a swapped op of 16 rows, is refused with what it needs.
  const auto product = [](int64_t rows, bool swapped, bool swapped_accumulator) {
    return first_problem(1, [&](Builder& b, const Buffer& y) {
      const Value a = b.full(1.0, TileType{DType::BF16, {rows, 16}}, *mma_a_layout(rows, 16, 1, 1), "a");
      const Value w = b.full(1.0, TileType{DType::BF16, {16, 16}}, *mma_b_layout(16, 16, 1, 1), "w");
      const RegisterLayout c_layout =
          swapped_accumulator ? *mma_swapped_c_layout(rows, 16, 1) : *mma_c_layout(rows, 16, 1, 1);
      const Value c = b.full(0.0, TileType{DType::F32, {rows, 16}}, c_layout, "c");
      b.mma(a, w, c, 1, 1, "d", swapped);
      (void)y;
    });
  };
  EXPECT_EQ(product(1, true, true), "");
  EXPECT_EQ(product(1, false, false), "");
  EXPECT_EQ(product(1, true, false).rfind("kernel k: mma %d: c is not in the mma C fragment layout mma_c_swapped", 0),
            0u)
      << product(1, true, false);
  EXPECT_EQ(product(16, true, false),
            "kernel k: mma %d: a swapped mma needs 1, 2, 4 or 8 rows on one warp along M, N a "
            "multiple of 16 per warp and B's columns not interleaved");
}

TEST(Verifier, SharedWindowsStayInside) {
  const std::string problem = first_problem(1, [](Builder& b, const Buffer& y) {
    const int s = b.shared("S", DType::F32, {8, 16}, row_major_shared({8, 16}, {}), 2, "");
    const Value x = b.full(1.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32), "x");
    b.shared_store(SharedRef{s, nullptr, {1, 0}, false}, x);
    b.global_store(y, kWindow, {}, x);
  });
  EXPECT_EQ(problem, "kernel k: st.shared: window reaches outside S");
}

TEST(Verifier, AnAliasLiesInsideItsBase) {
  const std::string problem = first_problem(1, [](Builder& b, const Buffer& y) {
    const int s = b.shared("S", DType::F32, {8, 16}, row_major_shared({8, 16}, {}), 1, "");
    b.shared_alias(s, "Wide", DType::F32, {16, 16}, row_major_shared({16, 16}, {}), "");
    b.global_store(y, kWindow, {}, b.full(0.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32)));
  });
  EXPECT_EQ(problem, "kernel k: shared Wide: does not lie inside S with the same element size, the allocation it aliases");
}

TEST(Verifier, ValuesAreUsedInScope) {
  const std::string problem = first_problem(1, [](Builder& b, const Buffer& y) {
    Value inner;
    b.for_loop("i", 2, {}, [&](const Value&, const std::vector<Value>&) {
      inner = b.full(1.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32), "inner");
      return std::vector<Value>{};
    });
    b.global_store(y, kWindow, {}, inner);
  });
  EXPECT_EQ(problem, "kernel k: global_store Y: %inner is used before its definition or out of scope");
}

TEST(Verifier, NoStoresIntoInputs) {
  Builder b(1);
  const Buffer x = scalar::make_buffer("X", {8, 16}, DType::F32, MemoryScope::Global, BufferRole::Input);
  const Buffer y = out_buffer();
  b.global_store(x, kWindow, {}, b.full(0.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32)));
  Module module{"m", "sm_80", {x, y}, {}, {b.finish_kernel("k", {x, y})}};
  const std::vector<std::string> problems = verify(module);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems.front(), "kernel k: global_store X: stores into an input");
}

TEST(Verifier, OnlyCpAsyncWritesAPackedInt4Allocation) {
  // An int4 allocation holds two elements a byte: a store of single elements would write half
  // bytes. A register tile of int4 goes through an int8 scratch instead.
  const std::string problem = first_problem(1, [](Builder& b, const Buffer& y) {
    const int s = b.shared("W", DType::I4, {8, 32}, row_major_shared({8, 32}, {}), 1, "");
    const Value w = b.full(1.0, TileType{DType::I4, {8, 32}}, blocked_layout({8, 32}, 32), "w");
    b.shared_store(SharedRef{s, nullptr, {0, 0}, false}, w);
    b.global_store(y, kWindow, {}, b.full(0.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32)));
  });
  EXPECT_EQ(problem,
            "kernel k: st.shared: an int4 allocation is packed two elements a byte: only cp.async writes it "
            "(whole bytes)");
  EXPECT_EQ(first_problem(1, [](Builder& b, const Buffer& y) {
              const int s = b.shared("B", DType::I8, {8, 32}, row_major_shared({8, 32}, {}), 1, "");
              const Value w = b.full(1.0, TileType{DType::I4, {8, 32}}, blocked_layout({8, 32}, 32), "w");
              b.shared_store(SharedRef{s, nullptr, {0, 0}, false}, w);
              b.global_store(y, kWindow, {}, b.full(0.0, TileType{DType::F32, {8, 16}}, blocked_layout({8, 16}, 32)));
            }),
            "");
}

}  // namespace
}  // namespace nautilus::matile
