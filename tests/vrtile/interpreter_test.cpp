// The VR tile interpreter on small hand-built kernels: the evaluation orders ir.h fixes (dot,
// reduce, store), every op's element semantics, loops and their carried values, kernels that
// exchange an intermediate, and every error it reports instead of crashing.
#include "core/vrtile/interpreter.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/vrtile/printer.h"

namespace nautilus::vrtile {
namespace {

using scalar::BufferRole;
using scalar::MemoryScope;
using scalar::make_buffer;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Buffer input(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::F32) {
  return make_buffer(name, std::move(shape), dtype, MemoryScope::Global, BufferRole::Input);
}
Buffer output(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::F32) {
  return make_buffer(name, std::move(shape), dtype, MemoryScope::Global, BufferRole::Output);
}
Buffer intermediate(const std::string& name, std::vector<int64_t> shape) {
  return make_buffer(name, std::move(shape), DType::F32, MemoryScope::Global,
                     BufferRole::Intermediate);
}

TensorData tensor(std::vector<int64_t> shape, std::vector<double> values,
                  DType dtype = DType::F32) {
  return TensorData{std::move(shape), dtype, std::move(values)};
}

// A module of one kernel over `params` (inputs, then outputs) built by `body`.
template <typename Body>
Module one_kernel(std::vector<Buffer> params, Body body, std::vector<Buffer> allocations = {}) {
  Builder b;
  body(b);
  std::vector<Buffer> kernel_params = params;
  kernel_params.insert(kernel_params.end(), allocations.begin(), allocations.end());
  return Module{"m", params, allocations, {b.finish_kernel("k", kernel_params)}};
}

// Stores `value` (rank 1 or 2, f32) whole into `out`.
void store_all(Builder& b, const Buffer& out, const Value& value) {
  const std::vector<int64_t>& shape = value->type.shape;
  if (shape.size() == 1) {
    b.store(out, {b.iota(shape[0])}, value);
    return;
  }
  const Value rows = b.broadcast(b.iota(shape[0]), shape, {0});
  const Value cols = b.broadcast(b.iota(shape[1]), shape, {1});
  b.store(out, {rows, cols}, value);
}

// Loads all of `in` (rank 1 or 2).
Value load_all(Builder& b, const Buffer& in) {
  const std::vector<int64_t>& shape = in->shape;
  if (shape.size() == 1) return b.load(in, {b.iota(shape[0])});
  const Value rows = b.broadcast(b.iota(shape[0]), shape, {0});
  const Value cols = b.broadcast(b.iota(shape[1]), shape, {1});
  return b.load(in, {rows, cols});
}

std::vector<double> run_ok(const Module& module, const TensorMap& inputs,
                           const std::string& out = "Y") {
  const InterpretResult result = interpret(module, inputs);
  EXPECT_TRUE(result.ok) << result.error;
  return result.ok ? result.outputs.at(out).values : std::vector<double>{};
}

// ---------------------------------------------------------------------------------------------
// Evaluation orders

// With e = 2^-12, (1 + e)^2 = 1 + 2^-11 + 2^-24 is not an f32: a separate multiply would round
// it to 1 + 2^-11 and the sum with -(1 + 2^-11) would be 0; the fused step keeps the 2^-24.
TEST(Interpreter, DotIsOneFusedMultiplyAddPerStep) {
  const double e = std::ldexp(1.0, -12);
  const Buffer A = input("A", {1, 2}), B = input("B", {2, 1}), Y = output("Y", {1, 1});
  const Module module = one_kernel({A, B, Y}, [&](Builder& b) {
    store_all(b, Y, b.dot(load_all(b, A), load_all(b, B)));
  });
  const std::vector<double> y = run_ok(
      module, {{"A", tensor({1, 2}, {1, 1 + e})}, {"B", tensor({2, 1}, {-1 - 2 * e, 1 + e})}});
  EXPECT_EQ(y, std::vector<double>{std::ldexp(1.0, -24)});
}

// In increasing k, starting from the accumulator: 2^24 + 1 + 1 stays 2^24 in f32 (each +1 is
// lost), while 1 + 1 + 2^24 would be exact.
TEST(Interpreter, DotAddsFromTheAccumulatorInIncreasingK) {
  const double big = std::ldexp(1.0, 24);
  const Buffer A = input("A", {1, 3}), B = input("B", {3, 1}), Y = output("Y", {1, 1});
  const Module with_acc = one_kernel({A, B, Y}, [&](Builder& b) {
    const Value acc = b.full(big, TileType{DType::F32, {1, 1}});
    store_all(b, Y, b.dot(load_all(b, A), load_all(b, B), acc));
  });
  const TensorMap inputs = {{"A", tensor({1, 3}, {1, 1, 0})}, {"B", tensor({3, 1}, {1, 1, 1})}};
  EXPECT_EQ(run_ok(with_acc, inputs), std::vector<double>{big});
  const TensorMap reversed = {{"A", tensor({1, 3}, {1, 1, big})},
                              {"B", tensor({3, 1}, {1, 1, 1})}};
  const Module without_acc = one_kernel({A, B, Y}, [&](Builder& b) {
    store_all(b, Y, b.dot(load_all(b, A), load_all(b, B)));
  });
  EXPECT_EQ(run_ok(without_acc, reversed), std::vector<double>{big + 2});
}

TEST(Interpreter, ReduceCombinesInIndexOrderRoundingEachStep) {
  const double big = std::ldexp(1.0, 24);
  const Buffer X = input("X", {2, 3}), Y = output("Y", {2}), Z = output("Z", {3});
  const Module module = one_kernel({X, Y, Z}, [&](Builder& b) {
    const Value x = load_all(b, X);
    store_all(b, Y, b.reduce(ReduceOp::Sum, x, 1));
    store_all(b, Z, b.reduce(ReduceOp::Max, x, 0));
  });
  const InterpretResult result =
      interpret(module, {{"X", tensor({2, 3}, {big, 1, 1, 1, 1, big})}});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("Y").values, (std::vector<double>{big, big + 2}));
  EXPECT_EQ(result.outputs.at("Z").values, (std::vector<double>{big, 1, big}));
}

TEST(Interpreter, MaxAndMinIgnoreNaN) {
  const Buffer X = input("X", {3}), Y = output("Y", {3});
  const Module module = one_kernel({X, Y}, [&](Builder& b) {
    const Value x = load_all(b, X);
    const Value nan = b.full(kNaN, TileType{DType::F32, {3}});
    store_all(b, Y, b.binary(BinaryOp::Max, x, nan));
  });
  EXPECT_EQ(run_ok(module, {{"X", tensor({3}, {1, -kInf, 2})}}),
            (std::vector<double>{1, -kInf, 2}));
}

TEST(Interpreter, StoresWriteInRowMajorOrder) {
  const Buffer X = input("X", {4}), Y = output("Y", {1});
  const Module module = one_kernel({X, Y}, [&](Builder& b) {
    const Value zero = b.full(0, TileType{DType::Index, {4}});
    b.store(Y, {zero}, load_all(b, X));
  });
  EXPECT_EQ(run_ok(module, {{"X", tensor({4}, {1, 2, 3, 4})}}), std::vector<double>{4});
}

// ---------------------------------------------------------------------------------------------
// Element semantics

TEST(Interpreter, BroadcastAndPermuteMoveElements) {
  const Buffer X = input("X", {2, 3}), Y = output("Y", {3, 2}), Z = output("Z", {2, 4, 3});
  const Module module = one_kernel({X, Y, Z}, [&](Builder& b) {
    const Value x = load_all(b, X);
    store_all(b, Y, b.permute(x, {1, 0}));
    const Value wide = b.broadcast(x, {2, 4, 3}, {0, 2});
    const Value i = b.broadcast(b.iota(2), {2, 4, 3}, {0});
    const Value j = b.broadcast(b.iota(4), {2, 4, 3}, {1});
    const Value k = b.broadcast(b.iota(3), {2, 4, 3}, {2});
    b.store(Z, {i, j, k}, wide);
  });
  const InterpretResult result = interpret(module, {{"X", tensor({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("Y").values, (std::vector<double>{1, 4, 2, 5, 3, 6}));
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 3; ++k) expected.push_back(1 + 3 * i + k);
    }
  }
  EXPECT_EQ(result.outputs.at("Z").values, expected);
}

TEST(Interpreter, IndexArithmeticFloorsLikePython) {
  const Buffer Y = output("Y", {4});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    const TileType type{DType::Index, {4}};
    const Value minus_seven = b.full(-7, type);
    const Value two = b.full(2, type);
    const Value q = b.binary(BinaryOp::FloorDiv, minus_seven, two);
    const Value r = b.binary(BinaryOp::Mod, minus_seven, two);
    const Value i = b.iota(4);
    // Y = [q, r, -i + max(i, 2), abs(-7) // 2] per element i, through a select on i.
    const Value zero = b.full(0, type), one = b.full(1, type);
    const Value first = b.compare(CompareOp::EQ, i, zero);
    const Value second = b.compare(CompareOp::EQ, i, one);
    const Value third = b.binary(BinaryOp::Add, b.unary(UnaryOp::Neg, i), b.binary(BinaryOp::Max, i, two));
    const Value fourth = b.binary(BinaryOp::FloorDiv, b.unary(UnaryOp::Abs, minus_seven), two);
    const Value last = b.compare(CompareOp::EQ, i, b.full(3, type));
    const Value pick = b.select(first, q, b.select(second, r, b.select(last, fourth, third)));
    store_all(b, Y, b.cast(pick, DType::F32));
  });
  EXPECT_EQ(run_ok(module, {}), (std::vector<double>{-4, 1, 0, 3}));
}

TEST(Interpreter, CastsRoundTruncateAndTest) {
  const Buffer X = input("X", {4}), Y = output("Y", {4}, DType::BF16), Z = output("Z", {4});
  const Module module = one_kernel({X, Y, Z}, [&](Builder& b) {
    const Value x = load_all(b, X);
    store_all(b, Y, b.cast(x, DType::BF16));
    const Value truncated = b.cast(b.cast(x, DType::Index), DType::F32);
    const Value nonzero = b.cast(b.cast(x, DType::Bool), DType::F32);
    store_all(b, Z, b.binary(BinaryOp::Add, truncated, nonzero));
  });
  const InterpretResult result = interpret(module, {{"X", tensor({4}, {1.00390625, -2.75, 0, 0.5})}});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("Y").values, (std::vector<double>{1.0, -2.75, 0, 0.5}));
  EXPECT_EQ(result.outputs.at("Z").values, (std::vector<double>{2, -1, 0, 1}));
}

TEST(Interpreter, FloatOpsRoundToTheirDtype) {
  const Buffer X = input("X", {1}, DType::BF16), Y = output("Y", {1}, DType::BF16);
  const Module module = one_kernel({X, Y}, [&](Builder& b) {
    const Value x = load_all(b, X);
    const Value third = b.full(1.0 / 3.0, TileType{DType::BF16, {1}});
    store_all(b, Y, b.binary(BinaryOp::Mul, x, third));
  });
  // bf16(1/3) = 0.333984375; times 3 is 1.001953125, which rounds to bf16 1.0.
  EXPECT_EQ(run_ok(module, {{"X", tensor({1}, {3}, DType::BF16)}}), std::vector<double>{1.0});
}

// ---------------------------------------------------------------------------------------------
// Loops, masks, grids and kernels

TEST(Interpreter, ForCarriesValuesAndYieldMayPermuteThem) {
  const Buffer Y = output("Y", {2});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    const TileType type{DType::F32, {1}};
    const Value a0 = b.full(1, type), b0 = b.full(10, type);
    // Each iteration: (a, b) -> (b, a + b).
    const std::vector<Value> out =
        b.for_loop("i", 5, {a0, b0}, [&](const Value&, const std::vector<Value>& carried) {
          return std::vector<Value>{carried[1],
                                    b.binary(BinaryOp::Add, carried[0], carried[1])};
        });
    const Value zero = b.full(0, TileType{DType::Index, {1}});
    const Value one = b.full(1, TileType{DType::Index, {1}});
    b.store(Y, {zero}, out[0]);
    b.store(Y, {one}, out[1]);
  });
  // (1, 10) (10, 11) (11, 21) (21, 32) (32, 53) (53, 85)
  EXPECT_EQ(run_ok(module, {}), (std::vector<double>{53, 85}));
}

TEST(Interpreter, ZeroTripForGivesItsInitialValues) {
  const Buffer Y = output("Y", {3});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    const Value init = b.full(7, TileType{DType::F32, {3}});
    const std::vector<Value> out =
        b.for_loop("i", 0, {init}, [&](const Value&, const std::vector<Value>& carried) {
          return std::vector<Value>{b.binary(BinaryOp::Add, carried[0], carried[0])};
        });
    store_all(b, Y, out[0]);
  });
  const InterpretResult result = interpret(module, {});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("Y").values, (std::vector<double>{7, 7, 7}));
}

TEST(Interpreter, MaskedElementsAreNotAccessed) {
  const Buffer X = input("X", {3}), Y = output("Y", {3});
  const Module module = one_kernel({X, Y}, [&](Builder& b) {
    // Indices 0..7 over a buffer of 3: only the first 3 lanes are in bounds, and only they load
    // and store; the others read as `other`.
    const Value i = b.iota(8);
    const Value in_bounds = b.compare(CompareOp::LT, i, b.full(3, TileType{DType::Index, {8}}));
    const Value x = b.load(X, {i}, in_bounds, -1.0);
    const Value doubled = b.binary(BinaryOp::Add, x, x);
    b.store(Y, {i}, doubled, in_bounds);
  });
  EXPECT_EQ(run_ok(module, {{"X", tensor({3}, {1, 2, 3})}}), (std::vector<double>{2, 4, 6}));
}

TEST(Interpreter, GridPointsRunTheBodyWithTheirCoordinates) {
  const Buffer Y = output("Y", {2, 3});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    const Value i = b.grid("i", 2), j = b.grid("j", 3);
    const Value ten = b.full(10, index_scalar());
    const Value code = b.binary(BinaryOp::Add, b.binary(BinaryOp::Mul, i, ten), j);
    b.store(Y, {i, j}, b.cast(code, DType::F32));
  });
  const InterpretResult result = interpret(module, {});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("Y").values, (std::vector<double>{0, 1, 2, 10, 11, 12}));
}

TEST(Interpreter, KernelsRunInOrderAndShareIntermediates) {
  const Buffer X = input("X", {4}), Y = output("Y", {4}), T = intermediate("T", {4});
  Builder b;
  store_all(b, T, b.unary(UnaryOp::Neg, load_all(b, X)));
  const KernelPtr first = b.finish_kernel("first", {X, T});
  store_all(b, Y, b.binary(BinaryOp::Add, load_all(b, T), load_all(b, T)));
  const KernelPtr second = b.finish_kernel("second", {T, Y});
  const Module module{"m", {X, Y}, {T}, {first, second}};
  const InterpretResult result = interpret(module, {{"X", tensor({4}, {1, 2, 3, 4})}});
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.outputs.at("Y").values, (std::vector<double>{-2, -4, -6, -8}));
  EXPECT_EQ(result.intermediates.at("T").values, (std::vector<double>{-1, -2, -3, -4}));
}

// ---------------------------------------------------------------------------------------------
// (e) Errors

TEST(InterpreterErrors, LoadOutOfBounds) {
  const Buffer X = input("X", {3}), Y = output("Y", {4});
  const Module module = one_kernel({X, Y}, [&](Builder& b) {
    b.grid("g", 2);
    const Value i = b.iota(4, "i");
    b.store(Y, {i}, b.load(X, {i}, nullptr, 0.0, "x"));
  });
  const InterpretResult result = interpret(module, {{"X", tensor({3}, {1, 2, 3})}});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "kernel k at grid point (g=0): load %x reads X[3] outside its shape [3] "
                          "(tile element [3])");
  EXPECT_TRUE(result.outputs.empty());
}

TEST(InterpreterErrors, StoreOutOfBounds) {
  const Buffer Y = output("Y", {2, 2});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    const Value rows = b.broadcast(b.iota(2), {2, 3}, {0});
    const Value cols = b.broadcast(b.iota(3), {2, 3}, {1});
    b.store(Y, {rows, cols}, b.full(1, TileType{DType::F32, {2, 3}}));
  });
  const InterpretResult result = interpret(module, {});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "kernel k: store Y writes Y[0, 2] outside its shape [2, 2] (tile "
                          "element [0, 2])");
}

TEST(InterpreterErrors, ReadBeforeWrite) {
  const Buffer Y = output("Y", {4}), T = intermediate("T", {4});
  Builder b;
  const Value i = b.iota(4, "i");
  b.store(Y, {i}, b.load(T, {i}, nullptr, 0.0, "t"));
  const Module module{"m", {Y}, {T}, {b.finish_kernel("early", {Y, T})}};
  const InterpretResult result = interpret(module, {});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error,
            "kernel early: load %t reads T[0] before it was written (tile element [0])");
}

TEST(InterpreterErrors, OutputNeverWritten) {
  const Buffer Y = output("Y", {4});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    const Value i = b.iota(2);
    b.store(Y, {i}, b.full(1, TileType{DType::F32, {2}}));
  });
  const InterpretResult result = interpret(module, {});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "output Y[2] was never written");
}

TEST(InterpreterErrors, MissingUnknownAndMisshapedInputs) {
  const Buffer X = input("X", {3}), Y = output("Y", {3});
  const Module module = one_kernel({X, Y}, [&](Builder& b) { store_all(b, Y, load_all(b, X)); });
  EXPECT_EQ(interpret(module, {}).error, "missing input X");
  EXPECT_EQ(interpret(module, {{"X", tensor({3}, {1, 2, 3})}, {"W", tensor({1}, {0})}}).error,
            "W is not an input of module m (its inputs are X)");
  EXPECT_EQ(interpret(module, {{"X", tensor({4}, {1, 2, 3, 4})}}).error,
            "input X has shape [4]; module m expects [3]");
  EXPECT_EQ(interpret(module, {{"X", tensor({3}, {1, 2})}}).error,
            "input X has 2 values; its shape [3] has 3 elements");
}

TEST(InterpreterErrors, StepBudget) {
  const Buffer Y = output("Y", {1});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    const Value zero = b.full(0, TileType{DType::F32, {1}});
    b.for_loop("i", 1000, {}, [&](const Value&, const std::vector<Value>&) {
      return std::vector<Value>{};
    });
    store_all(b, Y, zero);
  });
  InterpretOptions options;
  options.max_steps = 100;
  const InterpretResult result = interpret(module, {}, options);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "kernel k: for i exceeds the step budget of 100 steps");
  EXPECT_EQ(result.steps, 101u);
  options.max_steps = 0;  // unlimited
  EXPECT_TRUE(interpret(module, {}, options).ok);
}

TEST(InterpreterErrors, IndexDivisionByZeroAndBadIndexCasts) {
  const Buffer Y = output("Y", {2});
  const Module divide = one_kernel({Y}, [&](Builder& b) {
    const Value i = b.iota(2, "i");
    store_all(b, Y, b.cast(b.binary(BinaryOp::Mod, i, i, "r"), DType::F32));
  });
  EXPECT_EQ(interpret(divide, {}).error, "kernel k: binary %r divides by zero (tile element [0])");
  const Module convert = one_kernel({Y}, [&](Builder& b) {
    const Value inf = b.full(kInf, TileType{DType::F32, {2}});
    store_all(b, Y, b.cast(b.cast(inf, DType::Index, "n"), DType::F32));
  });
  EXPECT_EQ(interpret(convert, {}).error,
            "kernel k: cast %n cannot convert inf to an index (tile element [0])");
}

TEST(InterpreterErrors, ModuleThatDoesNotVerifyIsNotRun) {
  const Buffer X = input("X", {3}), Y = output("Y", {3});
  const Module module = one_kernel({X, Y}, [&](Builder& b) {
    b.store(X, {b.iota(3)}, b.full(0, TileType{DType::F32, {3}}));
  });
  const InterpretResult result = interpret(module, {{"X", tensor({3}, {1, 2, 3})}});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "module does not verify: kernel k: store X: stores into input buffer X");
  EXPECT_EQ(result.steps, 0u);
}

TEST(InterpreterErrors, TilesTooLargeToHold) {
  const Buffer Y = output("Y", {1});
  const Module module = one_kernel({Y}, [&](Builder& b) {
    b.full(0, TileType{DType::F32, {1 << 14, 1 << 14}}, "huge");
    store_all(b, Y, b.full(0, TileType{DType::F32, {1}}));
  });
  EXPECT_EQ(interpret(module, {}).error,
            "kernel k: tile %huge of type f32[16384, 16384] is larger than the interpreter's "
            "limit of 67108864 elements");
}

}  // namespace
}  // namespace nautilus::vrtile
