// The VR tile verifier: one test per rule, each breaking exactly that rule in an otherwise valid
// kernel and checking that a message names the problem (and the op).
#include "core/vrtile/verifier.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/spec_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::vrtile {
namespace {

using scalar::BufferRole;
using scalar::MemoryScope;
using scalar::make_buffer;

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems) text += "  " + problem + "\n";
  return text.empty() ? "  (none)\n" : text;
}

// Passes when some message contains `fragment`.
::testing::AssertionResult Mentions(const std::vector<std::string>& problems,
                                    const std::string& fragment) {
  for (const std::string& problem : problems) {
    if (problem.find(fragment) != std::string::npos) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no message contains \"" << fragment
                                       << "\"; the messages are:\n"
                                       << joined(problems);
}

TileType f32(std::vector<int64_t> shape) { return TileType{DType::F32, std::move(shape)}; }
TileType index_type(std::vector<int64_t> shape) { return TileType{DType::Index, std::move(shape)}; }
TileType boolean(std::vector<int64_t> shape) { return TileType{DType::Bool, std::move(shape)}; }

// A valid start: kernel k(X, Y) over grid g with the [4, 8] index tiles of X and its load %x.
// Each test adds the op that breaks its rule and calls problems().
struct Base {
  Buffer X = make_buffer("X", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Input);
  Buffer Y = make_buffer("Y", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Builder b;
  Value g = b.grid("g", 2);
  Value rows = b.broadcast(b.iota(4, "r"), {4, 8}, {0}, "rows");
  Value cols = b.broadcast(b.iota(8, "c"), {4, 8}, {1}, "cols");
  Value x = b.load(X, {rows, cols}, nullptr, 0.0, "x");

  Module module(std::vector<Buffer> kernel_params = {}) {
    if (kernel_params.empty()) kernel_params = {X, Y};
    return Module{"m", {X, Y}, {}, {b.finish_kernel("k", std::move(kernel_params))}};
  }
  std::vector<std::string> problems() { return verify(module()); }
};

TEST(Verifier, ValidKernelsHaveNoProblems) {
  Base base;
  base.b.store(base.Y, {base.rows, base.cols}, base.x);
  EXPECT_EQ(base.problems(), std::vector<std::string>{});

  const driver::Compilation attention =
      testing::compile_asset("attention", {"B=1", "H=2", "M=13", "N=20", "D=4"});
  EXPECT_EQ(verify(*test_kernels::flash_attention(*attention.program, 8, 16)),
            std::vector<std::string>{});
}

// ---------------------------------------------------------------------------------------------
// SSA: definition before use, scopes, single definition, names

TEST(Verifier, OperandUsedBeforeItsDefinition) {
  Base base;
  const OpPtr later = make_unary("later", UnaryOp::Exp, base.x);
  base.b.append(make_unary("early", UnaryOp::Neg, later->results[0]));
  base.b.append(later);
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "kernel k: unary %early: operand 0 %later is used before its "
                                 "definition (by unary %later)"));
}

TEST(Verifier, ValueOfALoopBodyUsedAfterTheLoop) {
  Base base;
  Value inner;
  base.b.for_loop("i", 2, {}, [&](const Value&, const std::vector<Value>&) {
    inner = base.b.unary(UnaryOp::Exp, base.x, "inner");
    return std::vector<Value>{};
  });
  base.b.unary(UnaryOp::Neg, inner, "outer");
  EXPECT_TRUE(Mentions(base.problems(), "unary %outer: operand 0 %inner (defined by unary "
                                        "%inner) is used outside its scope"));
}

TEST(Verifier, LoopVariableUsedOutsideItsFor) {
  Base base;
  Value var;
  base.b.for_loop("i", 2, {}, [&](const Value& i, const std::vector<Value>&) {
    var = i;
    return std::vector<Value>{};
  });
  base.b.unary(UnaryOp::Neg, var, "minus_i");
  EXPECT_TRUE(Mentions(base.problems(), "operand 0 %i (defined by for i) is used outside its scope"));
}

TEST(Verifier, BlockArgumentUsedOutsideItsFor) {
  Base base;
  Value arg;
  base.b.for_loop(
      "i", 2, {base.x},
      [&](const Value&, const std::vector<Value>& carried) {
        arg = carried[0];
        return carried;
      },
      {"out"}, {"carried"});
  base.b.unary(UnaryOp::Exp, arg, "e");
  EXPECT_TRUE(Mentions(base.problems(),
                       "%carried (defined by for i (block argument)) is used outside its scope"));
}

TEST(Verifier, OperandNotDefinedInTheKernel) {
  Base base;
  base.b.unary(UnaryOp::Exp, make_value("stranger", f32({4, 8})), "e");
  EXPECT_TRUE(Mentions(base.problems(), "operand 0 %stranger is not defined in kernel k"));
}

TEST(Verifier, NullOperand) {
  Base base;
  base.b.unary(UnaryOp::Exp, nullptr, "e");
  EXPECT_TRUE(Mentions(base.problems(), "unary %e: operand 0 is null"));
}

TEST(Verifier, ValueDefinedTwice) {
  Base base;
  const OpPtr op = make_unary("e", UnaryOp::Exp, base.x);
  base.b.append(op);
  base.b.append(op);
  EXPECT_TRUE(Mentions(base.problems(), "%e is defined twice (by unary %e and by unary %e)"));
}

TEST(Verifier, TwoValuesWithOneName) {
  Base base;
  base.b.append(make_unary("e", UnaryOp::Exp, base.x));
  base.b.append(make_unary("e", UnaryOp::Neg, base.x));
  EXPECT_TRUE(Mentions(base.problems(), "name %e is given to two different values"));
}

TEST(Verifier, InvalidValueName) {
  Base base;
  base.b.append(make_unary("e x", UnaryOp::Exp, base.x));
  EXPECT_TRUE(Mentions(base.problems(), "value name 'e x' is invalid"));
}

TEST(Verifier, ResultCountOfTheKind) {
  Base base;
  Op op = *make_unary("e", UnaryOp::Exp, base.x);
  op.results.push_back(make_value("extra", f32({4, 8})));
  base.b.append(make_op(op));
  EXPECT_TRUE(Mentions(base.problems(), "unary %e: has 2 results; unary has 1"));
}

// ---------------------------------------------------------------------------------------------
// Types of element-wise ops

TEST(Verifier, ElementwiseOperandsNeedEqualShapes) {
  Base base;
  const Value row = base.b.full(1.0, f32({8}), "row");
  base.b.binary(BinaryOp::Add, base.x, row, "sum");
  EXPECT_TRUE(Mentions(base.problems(), "binary %sum: operands %x : f32[4, 8] and %row : f32[8] "
                                        "differ; element-wise operands have equal types"));
}

TEST(Verifier, ElementwiseOperandsNeedEqualDtypes) {
  Base base;
  base.b.binary(BinaryOp::Mul, base.x, base.rows, "product");
  EXPECT_TRUE(Mentions(base.problems(), "operands %x : f32[4, 8] and %rows : index[4, 8] differ"));
}

TEST(Verifier, ResultTypeMustBeTheInferredOne) {
  Base base;
  Op op = *make_unary("e", UnaryOp::Exp, base.x);
  op.results[0] = make_value("e", f32({8, 4}));
  base.b.append(make_op(op));
  EXPECT_TRUE(Mentions(base.problems(), "unary %e: result has type f32[8, 4]; expected f32[4, 8]"));
}

TEST(Verifier, OpsRejectDtypesTheyDoNotTake) {
  Base base;
  base.b.binary(BinaryOp::Div, base.rows, base.cols, "index_div");
  base.b.binary(BinaryOp::Mod, base.x, base.x, "float_mod");
  base.b.unary(UnaryOp::Exp, base.rows, "index_exp");
  const Value m = base.b.compare(CompareOp::LT, base.rows, base.cols, "m");
  base.b.binary(BinaryOp::Add, m, m, "bool_add");
  base.b.compare(CompareOp::EQ, m, m, "bool_cmp");
  base.b.logical(LogicalOp::And, base.x, base.x, "float_and");
  base.b.reduce(ReduceOp::Sum, base.rows, 1, "index_sum");
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "binary %index_div: div of index; index division is floordiv"));
  EXPECT_TRUE(Mentions(problems, "binary %float_mod: mod of f32; floordiv and mod are index"));
  EXPECT_TRUE(Mentions(problems, "unary %index_exp: exp of index; needs a float operand"));
  EXPECT_TRUE(Mentions(problems, "binary %bool_add: add of bool"));
  EXPECT_TRUE(Mentions(problems, "compare %bool_cmp: compares bool tiles"));
  EXPECT_TRUE(Mentions(problems, "logical %float_and: and of f32; logical ops take bool"));
  EXPECT_TRUE(Mentions(problems, "reduce %index_sum: reduces a index tile"));
}

TEST(Verifier, SelectConditionMustBeBool) {
  Base base;
  base.b.select(base.rows, base.x, base.x, "s");
  EXPECT_TRUE(Mentions(base.problems(),
                       "select %s: condition %rows has dtype index; select conditions are bool"));
}

TEST(Verifier, SelectConditionMustHaveTheValuesShape) {
  Base base;
  const Value c = base.b.full(1.0, boolean({4}), "c");
  base.b.select(c, base.x, base.x, "s");
  EXPECT_TRUE(Mentions(base.problems(), "select %s: condition has type bool[4] but the values "
                                        "have type f32[4, 8]"));
}

TEST(Verifier, OperandCountOfTheKind) {
  Base base;
  Op op = *make_binary("sum", BinaryOp::Add, base.x, base.x);
  op.operands.pop_back();
  base.b.append(make_op(op));
  EXPECT_TRUE(Mentions(base.problems(), "binary %sum: has 1 operands; binary takes 2 operands"));
}

// ---------------------------------------------------------------------------------------------
// Loads and stores

TEST(Verifier, IndicesMustBeIndexTiles) {
  Base base;
  base.b.load(base.X, {base.x, base.cols}, nullptr, 0.0, "v");
  EXPECT_TRUE(Mentions(base.problems(),
                       "load %v: index 0 %x has dtype f32; indices are index tiles"));
}

TEST(Verifier, IndicesShareOneShape) {
  Base base;
  const Value short_cols = base.b.iota(8, "short_cols");
  base.b.load(base.X, {base.rows, short_cols}, nullptr, 0.0, "v");
  EXPECT_TRUE(Mentions(base.problems(), "load %v: index 1 %short_cols has type index[8]; the "
                                        "indices of an access share one shape"));
}

TEST(Verifier, MaskMustBeBoolOfTheIndicesShape) {
  Base base;
  base.b.load(base.X, {base.rows, base.cols}, base.rows, 0.0, "v");
  EXPECT_TRUE(Mentions(base.problems(),
                       "load %v: mask %rows has type index[4, 8]; expected bool[4, 8]"));
}

TEST(Verifier, AccessNeedsOneIndexPerBufferAxis) {
  Base base;
  base.b.load(base.X, {base.rows}, nullptr, 0.0, "v");
  base.b.store(base.Y, {base.rows, base.cols, base.cols}, base.x);
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "load %v: X has rank 2 but is accessed with 1 indices"));
  EXPECT_TRUE(Mentions(problems, "store Y: Y has rank 2 but is accessed with 3 indices"));
}

TEST(Verifier, StoredValueHasTheBufferDtype) {
  Base base;
  const Value h = base.b.cast(base.x, DType::BF16, "h");
  base.b.store(base.Y, {base.rows, base.cols}, h);
  EXPECT_TRUE(Mentions(base.problems(), "store Y: value %h has type bf16[4, 8]; expected "
                                        "f32[4, 8]"));
}

TEST(Verifier, NothingStoresIntoAnInput) {
  Base base;
  base.b.store(base.X, {base.rows, base.cols}, base.x);
  EXPECT_TRUE(Mentions(base.problems(), "kernel k: store X: stores into input buffer X"));
}

TEST(Verifier, AccessedBuffersAreKernelParams) {
  Base base;
  base.b.store(base.Y, {base.rows, base.cols}, base.x);
  EXPECT_TRUE(Mentions(verify(base.module({base.X})), "store Y: buffer Y is not a param of kernel k"));
}

TEST(Verifier, KernelParamsAreModuleBuffers) {
  Base base;
  const Buffer other =
      make_buffer("Z", {2}, DType::F32, MemoryScope::Global, BufferRole::Intermediate);
  const Buffer impostor =
      make_buffer("Y", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Output);
  const std::vector<std::string> problems = verify(base.module({base.X, other, impostor}));
  EXPECT_TRUE(Mentions(problems, "kernel k: param Z is not a buffer of module m"));
  EXPECT_TRUE(Mentions(problems,
                       "kernel k: param Y is not the buffer the module declares under that name"));
}

// ---------------------------------------------------------------------------------------------
// Dot, reduce, broadcast, permute, iota, full

TEST(Verifier, DotNeedsMatchingInnerExtents) {
  Base base;
  base.b.dot(base.x, base.x, nullptr, "d");
  EXPECT_TRUE(Mentions(base.problems(), "dot %d: operands have types f32[4, 8] and f32[4, 8]; the "
                                        "K extents differ"));
}

TEST(Verifier, DotNeedsRankTwoOperandsOfOneMmaDtype) {
  Base base;
  const Value v = base.b.full(1.0, f32({8}), "v");
  base.b.dot(base.x, v, nullptr, "rank1");
  const Value w = base.b.full(1.0, TileType{DType::BF16, {8, 2}}, "w");
  base.b.dot(base.x, w, nullptr, "mixed");
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "dot %rank1: operands have types f32[4, 8] and f32[8]; dot takes "
                                 "[M, K] and [K, N] tiles"));
  EXPECT_TRUE(Mentions(problems, "dot %mixed: operands have dtypes f32 and bf16; dot takes f16, "
                                 "bf16 or f32 operands of one dtype"));
}

TEST(Verifier, DotAccumulatorIsF32OfTheResultShape) {
  Base base;
  const Value w = base.b.full(1.0, f32({8, 2}), "w");
  const Value acc = base.b.full(0.0, TileType{DType::BF16, {4, 2}}, "acc");
  base.b.dot(base.x, w, acc, "d");
  EXPECT_TRUE(Mentions(base.problems(),
                       "dot %d: accumulator %acc has type bf16[4, 2]; expected f32[4, 2]"));
}

TEST(Verifier, ReduceAxisInRange) {
  Base base;
  base.b.reduce(ReduceOp::Max, base.x, 2, "r2");
  EXPECT_TRUE(Mentions(base.problems(), "reduce %r2: axis 2 is out of range for f32[4, 8]"));
}

TEST(Verifier, BroadcastDimsAreStrictlyIncreasing) {
  Base base;
  base.b.broadcast(base.x, {8, 4}, {1, 0}, "swapped");
  EXPECT_TRUE(Mentions(base.problems(), "broadcast %swapped: dims must be strictly increasing"));
}

TEST(Verifier, BroadcastKeepsExtents) {
  Base base;
  base.b.broadcast(base.x, {4, 2, 16}, {0, 2}, "wide");
  EXPECT_TRUE(Mentions(base.problems(), "broadcast %wide: operand axis 1 of f32[4, 8] maps to "
                                        "result axis 2 of f32[4, 2, 16] with a different extent"));
}

TEST(Verifier, BroadcastHasOneDimPerOperandAxis) {
  Base base;
  base.b.broadcast(base.x, {4, 8, 2}, {0}, "short");
  base.b.broadcast(base.x, {4, 8}, {0, 2}, "outside");
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "broadcast %short: has 1 dims for an operand of rank 2"));
  EXPECT_TRUE(Mentions(problems, "broadcast %outside: dims[1] = 2 is out of range"));
}

TEST(Verifier, PermuteOrderIsAPermutation) {
  Base base;
  base.b.permute(base.x, {0, 0}, "p");
  EXPECT_TRUE(Mentions(base.problems(),
                       "permute %p: order [0, 0] is not a permutation of the axes of f32[4, 8]"));
}

TEST(Verifier, IotaExtentIsPositive) {
  Base base;
  base.b.iota(0, "empty");
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "iota %empty: has extent 0; iota extents must be positive"));
  EXPECT_TRUE(Mentions(problems, "%empty has type index[0]; tile extents must be positive"));
}

TEST(Verifier, FullConstantIsRepresentable) {
  Base base;
  base.b.full(1.5, index_type({}), "half");
  base.b.full(2.0, boolean({}), "two");
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "full %half: constant 1.5 is not an index"));
  EXPECT_TRUE(Mentions(problems, "full %two: constant 2.0 is not a bool"));
}

// ---------------------------------------------------------------------------------------------
// Loops and the grid

TEST(Verifier, YieldArityMatchesTheIterArgs) {
  Base base;
  base.b.for_loop("i", 2, {base.x}, [&](const Value&, const std::vector<Value>& carried) {
    return std::vector<Value>{carried[0], carried[0]};
  });
  EXPECT_TRUE(
      Mentions(base.problems(), "yield of for i: yields 2 values but the loop has 1 iter_args"));
}

TEST(Verifier, YieldTypesMatchTheIterArgs) {
  Base base;
  base.b.for_loop("i", 2, {base.x}, [&](const Value&, const std::vector<Value>&) {
    return std::vector<Value>{base.rows};
  });
  EXPECT_TRUE(Mentions(base.problems(), "yield of for i: value 0 %rows has type index[4, 8] but "
                                        "iter_arg 0 has f32[4, 8]"));
}

TEST(Verifier, ForBodyEndsWithItsOnlyYield) {
  Base base;
  const Value i = make_value("i", index_scalar());
  // A body without a yield, and one with a yield before its last op.
  base.b.append(make_for({}, i, 2, {}, {}, make_region({make_unary("e", UnaryOp::Exp, base.x)})));
  const Value j = make_value("j", index_scalar());
  base.b.append(make_for({}, j, 2, {}, {},
                         make_region({make_yield({}), make_unary("n", UnaryOp::Neg, base.x)})));
  base.b.append(make_yield({}));
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "kernel k: for i: body does not end with a yield"));
  EXPECT_TRUE(Mentions(problems, "kernel k: yield: is not the last op of the body of for j"));
  EXPECT_TRUE(Mentions(problems, "kernel k: yield: appears outside a for body"));
}

TEST(Verifier, CarriedValuesKeepTheirTypes) {
  Base base;
  const Value i = make_value("i", index_scalar());
  const Value arg = make_value("arg", f32({8}));
  Op loop = *make_for({"out"}, i, 2, {base.x}, {arg}, make_region({make_yield({arg})}));
  loop.results[0] = make_value("out", index_type({4, 8}));
  base.b.append(make_op(loop));
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "for i: block argument %arg has type f32[8] but its initial "
                                 "value has f32[4, 8]"));
  EXPECT_TRUE(Mentions(problems,
                       "for i: result %out has type index[4, 8] but its initial value has f32[4, 8]"));
}

TEST(Verifier, LoopVariableIsAnIndexScalarAndExtentNotNegative) {
  Base base;
  const Value i = make_value("i", f32({}));
  base.b.append(make_for({}, i, -1, {}, {}, make_region({make_yield({})})));
  const std::vector<std::string> problems = base.problems();
  EXPECT_TRUE(Mentions(problems, "for i: has extent -1; trip counts are not negative"));
  EXPECT_TRUE(Mentions(problems, "for i: loop variable has type f32; loop variables are index"));
}

TEST(Verifier, GridAxesArePositiveIndexScalars) {
  Base base;
  const KernelPtr kernel = base.b.finish_kernel("k", {base.X, base.Y});
  const KernelPtr broken =
      make_kernel("k", kernel->params,
                  {kernel->grid[0], GridAxis{make_value("t", f32({})), 0}}, kernel->body);
  const std::vector<std::string> problems = verify(Module{"m", {base.X, base.Y}, {}, {broken}});
  EXPECT_TRUE(Mentions(problems, "kernel k: grid axis t: has extent 0"));
  EXPECT_TRUE(Mentions(problems, "kernel k: grid axis t: variable has type f32; grid variables "
                                 "are index"));
}

// ---------------------------------------------------------------------------------------------
// Module buffers and kernels

TEST(Verifier, ModuleBuffersAndKernelNames) {
  const Buffer in = make_buffer("A", {2}, DType::F32, MemoryScope::Global, BufferRole::Input);
  const Buffer out = make_buffer("B", {2}, DType::F32, MemoryScope::Global, BufferRole::Output);
  const Buffer twin = make_buffer("A", {2}, DType::F32, MemoryScope::Global, BufferRole::Input);
  const Buffer wrong = make_buffer("C", {0}, DType::Index, MemoryScope::Global, BufferRole::Output);
  const KernelPtr empty = make_kernel("k", {}, {}, make_region({}));
  const Module module{"m", {out, in, twin}, {wrong}, {empty, empty}};
  const std::vector<std::string> problems = verify(module);
  EXPECT_TRUE(Mentions(problems, "input param A follows an output; inputs come first"));
  EXPECT_TRUE(Mentions(problems, "buffer name A is declared twice"));
  EXPECT_TRUE(Mentions(problems, "allocation C has role output; allocations are intermediates"));
  EXPECT_TRUE(Mentions(problems, "buffer C has extent 0 in dimension 0"));
  EXPECT_TRUE(Mentions(problems, "buffer C has element type index"));
  EXPECT_TRUE(Mentions(problems, "kernel name k is used twice"));
}

}  // namespace
}  // namespace nautilus::vrtile
