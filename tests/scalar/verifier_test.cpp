// The scalar IR verifier: well-formed programs verify clean, and every check fires with a
// message naming the construct and the problem.
#include "core/scalar/verifier.h"

#include <gtest/gtest.h>

#include "tests/scalar/programs.h"

namespace nautilus::scalar {
namespace {

using namespace test_ir;

std::string joined(const std::vector<std::string>& errors) {
  std::string text;
  for (const std::string& error : errors) text += "\n  " + error;
  return text;
}

void expect_errors(const Program& program, const std::vector<std::string>& expected) {
  const std::vector<std::string> errors = verify(program);
  EXPECT_EQ(errors, expected) << "got:" << joined(errors);
}

// for i in 0..4, j in 0..8: block Y(i = i, j = j): Y[i, j] = X[i, j] * 2.0f, built from parts
// that each test replaces to break one rule.
struct Elementwise {
  Buffer X = make_buffer("X", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Input);
  Buffer Y = make_buffer("Y", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Var li = make_var("i"), lj = make_var("j"), i = make_var("i"), j = make_var("j");

  Expr value() const { return mul(at(X, {v(i), v(j)}), f32(2.0)); }
  Stmt store(Expr stored_value) const { return make_store(Y, {v(i), v(j)}, stored_value); }
  Stmt block(Stmt body, std::vector<Expr> bindings, Expr predicate = nullptr, Stmt init = nullptr,
             const std::string& name = "Y") const {
    return make_block(name, {spatial(i, 4), spatial(j, 8)}, std::move(bindings),
                      std::move(predicate), std::move(init), std::move(body));
  }
  Stmt block(Stmt body) const { return block(std::move(body), {v(li), v(lj)}); }
  Stmt loops(Stmt body) const { return nest({{li, 4}, {lj, 8}}, std::move(body)); }
  Program program(Stmt body) const { return Program{"ew", {X, Y}, {}, std::move(body)}; }
  Program program() const { return program(loops(block(store(value())))); }
};

TEST(Verifier, WellFormedProgramsVerifyClean) {
  EXPECT_EQ(joined(verify(Elementwise().program())), "");
  EXPECT_EQ(joined(verify(gemm_plain(8, 8, 8))), "");
  EXPECT_EQ(joined(verify(gemm_split_k(8, 8, 16))), "");
  EXPECT_EQ(joined(verify(gemm_reduction_outermost(8, 8, 8))), "");
  EXPECT_EQ(joined(verify(gemm_split_predicated(20, 8, 20))), "");
  EXPECT_EQ(joined(verify(softmax_program(4, 8))), "");
}

// --- variables: bound once, in scope, names not shadowed --------------------------------------

TEST(Verifier, VariableBoundTwice) {
  Elementwise e;
  Var k = make_var("k");
  Stmt first = make_for(k, 2, e.loops(e.block(e.store(e.value()))));
  Var i2 = make_var("i"), j2 = make_var("j");
  Stmt second = make_for(
      k, 2, nest({{i2, 4}, {j2, 8}},
                 make_block("Z", {spatial(make_var("i"), 4)}, {v(i2)}, nullptr, nullptr,
                            make_seq({}))));
  expect_errors(e.program(make_seq({first, second})),
                {"program body: variable k is bound twice (by loop k and by loop k)"});
}

TEST(Verifier, LoopVariableUsedInsideABlockBody) {
  Elementwise e;
  Stmt body = make_store(e.Y, {v(e.i), v(e.j)}, mul(at(e.X, {v(e.li), v(e.j)}), f32(2.0)));
  expect_errors(e.program(e.loops(e.block(body))),
                {"block Y body: store to Y: variable i (bound by loop i) is used out of its "
                 "scope"});
}

TEST(Verifier, IterationVariableUsedOutsideItsBlock) {
  Elementwise e;
  // The binding of a second block refers to the first block's iteration variable.
  Var l = make_var("l"), z = make_var("z");
  Stmt second = make_for(l, 4, make_block("Z", {spatial(z, 4)}, {v(e.i)}, nullptr, nullptr,
                                          make_seq({})));
  expect_errors(e.program(make_seq({e.loops(e.block(e.store(e.value()))), second})),
                {"block Z binding of z: variable i (bound by block Y) is used out of its scope"});
}

TEST(Verifier, VariableNeverBound) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(e.store(e.value()), {v(e.li), v(make_var("q"))}))),
                {"block Y binding of j: variable q is not bound by any enclosing loop or block"});
}

TEST(Verifier, ShadowedVariableName) {
  Elementwise e;
  Var outer = make_var("i");
  expect_errors(e.program(make_for(outer, 2, e.program().body)),
                {"program body: variable i of loop i shadows another visible variable of the "
                 "same name",
                 "block Y binding of i: variable i (bound by loop i) is used out of its scope"});
}

TEST(Verifier, TwoIterationVariablesWithOneName) {
  Elementwise e;
  Var other = make_var("i");
  Stmt block = make_block("Y", {spatial(e.i, 4), spatial(other, 8)}, {v(e.li), v(e.lj)}, nullptr,
                          nullptr, make_store(e.Y, {v(e.i), v(other)}, f32(0.0)));
  expect_errors(e.program(e.loops(block)),
                {"block Y: variable i of block Y shadows another visible variable of the same "
                 "name",
                 "block Y body: store to Y: variable i (bound by block Y) is used out of its "
                 "scope"});
}

// --- blocks ---------------------------------------------------------------------------------

TEST(Verifier, BindingsMustMatchIterationVariables) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(e.store(e.value()), {v(e.li)}))),
                {"block Y has 2 iteration variables but 1 bindings"});
}

TEST(Verifier, BindingMustBeAnIndex) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(e.store(e.value()), {v(e.li), f32(1.0)}))),
                {"block Y binding of j: 1.0f used as binding has dtype f32; it must be index"});
}

TEST(Verifier, IterationExtentMustBePositive) {
  Elementwise e;
  Stmt block = make_block("Y", {spatial(e.i, 4), spatial(e.j, 0)}, {v(e.li), v(e.lj)}, nullptr,
                          nullptr, e.store(e.value()));
  expect_errors(e.program(e.loops(block)),
                {"block Y: iteration variable j has extent 0; iteration extents must be "
                 "positive"});
}

TEST(Verifier, LoopExtentMustBePositive) {
  Elementwise e;
  expect_errors(e.program(nest({{e.li, 4}, {e.lj, -1}}, e.block(e.store(e.value())))),
                {"program body: loop j has extent -1; loop extents must be positive"});
}

TEST(Verifier, InitOnlyInBlocksWithReduceVariables) {
  Elementwise e;
  Stmt block = e.block(e.store(e.value()), {v(e.li), v(e.lj)}, nullptr, e.store(f32(0.0)));
  expect_errors(e.program(e.loops(block)),
                {"block Y: has an init statement but no reduce variable"});
}

TEST(Verifier, PredicateMustBeBool) {
  Elementwise e;
  Stmt block = e.block(e.store(e.value()), {v(e.li), v(e.lj)}, v(e.li));
  expect_errors(e.program(e.loops(block)),
                {"block Y predicate: has dtype index; predicates are bool"});
}

TEST(Verifier, BlockNamesAreUnique) {
  Elementwise e;
  Var li2 = make_var("i"), i2 = make_var("i");
  Stmt second = make_for(li2, 4, make_block("Y", {spatial(i2, 4)}, {v(li2)}, nullptr, nullptr,
                                            make_store(e.Y, {v(i2), i64(0)}, f32(0.0))));
  expect_errors(e.program(make_seq({e.program().body, second})),
                {"block Y: block name is not unique in the program"});
}

// --- buffers ----------------------------------------------------------------------------------

TEST(Verifier, BufferMustBeDeclared) {
  Elementwise e;
  Buffer Z = make_buffer("Z", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Input);
  expect_errors(e.program(e.loops(e.block(e.store(at(Z, {v(e.i), v(e.j)}))))),
                {"block Y body: store to Y: buffer Z is not declared in the program"});
}

TEST(Verifier, BufferMustBeTheDeclaredNode) {
  Elementwise e;
  Buffer stale = make_buffer("X", {4, 8}, DType::F32, MemoryScope::Global, BufferRole::Input);
  expect_errors(e.program(e.loops(e.block(e.store(at(stale, {v(e.i), v(e.j)}))))),
                {"block Y body: store to Y: refers to a buffer X that is not the one the program "
                 "declares under that name"});
}

TEST(Verifier, BufferIndexedWithItsRank) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(e.store(at(e.X, {v(e.i)}))))),
                {"block Y body: store to Y: X has rank 2 but is indexed with 1 indices"});
}

TEST(Verifier, IndicesAreIndexTyped) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(e.store(at(e.X, {v(e.i), f32(1.0)}))))),
                {"block Y body: store to Y: 1.0f used as index of X has dtype f32; it must be "
                 "index"});
}

TEST(Verifier, StoredValueHasTheBufferDtype) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(e.store(cast(DType::BF16, e.value()))))),
                {"block Y body: store to Y: value has dtype bf16 but Y holds f32 (conversions "
                 "are explicit casts)"});
}

TEST(Verifier, NoStoresIntoInputs) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(make_store(e.X, {v(e.i), v(e.j)}, f32(0.0))))),
                {"block Y body: store to X: stores into input buffer X"});
}

TEST(Verifier, BufferNamesAreUnique) {
  Elementwise e;
  Program program = e.program();
  program.allocations.push_back(
      make_buffer("X", {2}, DType::F32, MemoryScope::Shared, BufferRole::Intermediate));
  expect_errors(program, {"buffer name X is declared twice"});
}

TEST(Verifier, BufferShapesAndTypes) {
  Elementwise e;
  Program program = e.program();
  program.allocations.push_back(
      make_buffer("T", {2, 0}, DType::Index, MemoryScope::Register, BufferRole::Intermediate));
  expect_errors(program,
                {"buffer T has extent 0 in dimension 1; extents must be positive",
                 "buffer T has element type index; buffers hold f16, bf16, f32 or f64"});
}

TEST(Verifier, BufferRolesMatchWhereTheyAreDeclared) {
  Elementwise e;
  Buffer extra_input = make_buffer("W", {2}, DType::F32, MemoryScope::Global, BufferRole::Input);
  Buffer param_intermediate =
      make_buffer("T", {2}, DType::F32, MemoryScope::Global, BufferRole::Intermediate);
  Buffer alloc_output = make_buffer("O", {2}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Program program = e.program();
  program.params.push_back(extra_input);
  program.params.push_back(param_intermediate);
  program.allocations.push_back(alloc_output);
  expect_errors(program,
                {"input param W follows an output; inputs come first",
                 "param T has role intermediate; params are inputs and outputs",
                 "allocation O has role output; allocations are intermediates"});
}

// --- expression types -------------------------------------------------------------------------

TEST(Verifier, ArithmeticOperandDtypesAgree) {
  Elementwise e;
  Expr mixed = add(at(e.X, {v(e.i), v(e.j)}), float_imm(1.0, DType::BF16));
  expect_errors(e.program(e.loops(e.block(e.store(mixed)))),
                {"block Y body: store to Y: operands of X[i, j] + bf16(1.0) have dtypes f32 and "
                 "bf16; arithmetic needs equal dtypes"});
}

TEST(Verifier, IndexAndFloatDivisionAreDistinct) {
  Elementwise e;
  Stmt block = e.block(e.store(floordiv(e.value(), f32(2.0))),
                       {div(v(e.li), i64(1)), v(e.lj)});
  expect_errors(e.program(e.loops(block)),
                {"block Y binding of i: div of index in i / 1; index division is floordiv",
                 "block Y body: store to Y: floordiv of f32 in X[i, j] * 2.0f // 2.0f; floordiv "
                 "and mod are index operations"});
}

TEST(Verifier, FloatFunctionsNeedFloatOperands) {
  Elementwise e;
  Stmt block = e.block(e.store(e.value()), {unary(UnaryOp::Exp, v(e.li)), v(e.lj)});
  expect_errors(e.program(e.loops(block)),
                {"block Y binding of i: exp of index in exp(i); needs a float operand"});
}

TEST(Verifier, ComparisonsLogicalOpsAndSelects) {
  Elementwise e;
  Expr bad_compare = compare(CompareOp::LT, v(e.li), f32(1.0));
  Expr bad_logical = logical(LogicalOp::And, lt(v(e.li), i64(2)), v(e.lj));
  Stmt block = e.block(e.store(select(v(e.i), e.value(), float_imm(0.0, DType::BF16))),
                       {v(e.li), v(e.lj)}, logical(LogicalOp::Or, bad_compare, bad_logical));
  expect_errors(
      e.program(e.loops(block)),
      {"block Y predicate: operands of i < 1.0f have dtypes index and f32; comparisons need "
       "equal, non-bool dtypes",
       "block Y predicate: operands of i < 2 and j have dtypes bool and index; logical operators "
       "need bool dtypes",
       "block Y body: store to Y: condition of select(i, X[i, j] * 2.0f, bf16(0.0)) has dtype "
       "index; conditions are bool",
       "block Y body: store to Y: operands of select(i, X[i, j] * 2.0f, bf16(0.0)) have dtypes "
       "f32 and bf16; select branches need equal dtypes"});
}

TEST(Verifier, FloatImmediateHasAFloatDtype) {
  Elementwise e;
  expect_errors(e.program(e.loops(e.block(e.store(add(e.value(),
                                                      float_imm(1.0, DType::Index)))))),
                {"block Y body: store to Y: float immediate index(1.0) has non-float dtype index",
                 "block Y body: store to Y: operands of X[i, j] * 2.0f + index(1.0) have dtypes "
                 "f32 and index; arithmetic needs equal dtypes"});
}

// --- null pointers are reported, not dereferenced -----------------------------------------------

TEST(Verifier, NullNodes) {
  Elementwise e;
  EXPECT_EQ(verify(e.program(nullptr)), std::vector<std::string>{"program ew has no body"});
  expect_errors(e.program(make_seq({nullptr})), {"program body: null statement"});
  expect_errors(e.program(e.loops(e.block(e.store(cast(DType::F32, nullptr))))),
                {"block Y body: store to Y: null expression"});
}

}  // namespace
}  // namespace nautilus::scalar
