// The `.nt` spec language: syntax tree and checked spec.
//
// Parsing (parser.h) produces a `Program`: the statements as written, with source ranges.
// Checking (sema.h) resolves every name and produces a `Spec`: the program plus its tensors with
// concrete shapes, the index variables of every statement with their extents and roles, and the
// annotations below (marked "set by sema"). A `Spec` is immutable once built and is shared by
// every later stage through `SpecPtr`.
//
// Semantics (see docs/spec-language.md):
//   - Index variables on the left of `=` are spatial; variables bound by sum/max/min are reduced.
//   - A variable's extent is the extent of the dimension it directly indexes; all uses agree.
//   - In value expressions `/` is real division; inside `[...]` and conditions, index
//     expressions are affine and `/`, `%` are floor division and modulo by a positive constant.
//   - Arithmetic is done in f32; reductions accumulate in f32; an intermediate tensor without a
//     declared dtype is f32 unless all its tensor operands share a narrower dtype.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/support/dtype.h"
#include "core/support/source.h"

namespace nautilus::spec {

// ---------------------------------------------------------------------------------------------
// Index expressions (inside `[...]` and in `select` conditions).

enum class IndexKind { Literal, Name, Neg, Add, Sub, Mul, FloorDiv, Mod };

// What a name refers to once resolved (set by sema).
enum class NameKind { Unresolved, IndexVar, SizeSymbol };

struct IndexExpr {
  IndexKind kind = IndexKind::Literal;
  SourceRange range;
  int64_t literal = 0;                // Literal
  std::string name;                   // Name, as written
  std::unique_ptr<IndexExpr> lhs;     // Neg (operand), binary operators
  std::unique_ptr<IndexExpr> rhs;     // binary operators

  // Set by sema for Name: an index variable of the enclosing statement or a size symbol.
  NameKind name_kind = NameKind::Unresolved;
  int var = -1;            // index into Statement::vars when name_kind == IndexVar
  int64_t size_value = 0;  // when name_kind == SizeSymbol
};

enum class CompareOp { Less, LessEqual, Greater, GreaterEqual, Equal, NotEqual };
const char* compare_op_text(CompareOp op);

// A condition of `select`: comparisons of index expressions joined by `and` / `or`
// (`and` binds tighter than `or`).
struct Condition {
  enum class Kind { Compare, And, Or } kind = Kind::Compare;
  SourceRange range;
  CompareOp compare = CompareOp::Less;   // Compare
  std::unique_ptr<IndexExpr> lhs_index;  // Compare
  std::unique_ptr<IndexExpr> rhs_index;  // Compare
  std::unique_ptr<Condition> lhs;        // And / Or
  std::unique_ptr<Condition> rhs;        // And / Or
};

// ---------------------------------------------------------------------------------------------
// Value expressions.

enum class ExprKind {
  Number,  // 1.5, 2, inf
  Name,    // a size symbol (or index variable) used as a value: sqrt(D)
  Access,  // T[i, j + 1]
  Call,    // exp(x), max(a, b)
  Select,  // select(cond, a, b)
  Reduce,  // sum(n) body
  Neg,     // -x
  Binary,  // a + b, a - b, a * b, a / b
};

enum class BinaryOp { Add, Sub, Mul, Div };
const char* binary_op_text(BinaryOp op);

enum class ReduceOp { Sum, Max, Min };
const char* reduce_op_name(ReduceOp op);

// Elementwise functions. Max and Min take two arguments, the others one.
enum class Func { Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Tanh, Sigmoid, Abs, Max, Min };
const char* func_name(Func func);
int func_arity(Func func);
// The function called `name`, nullopt for any other name.
std::optional<Func> find_func(std::string_view name);
// "exp, exp2, log, ..., max, min": every function name, for "expected one of" messages.
std::string func_name_list();

struct ReduceVar {
  std::string name;
  SourceRange range;
  int var = -1;  // set by sema: index into Statement::vars
};

struct Expr {
  ExprKind kind = ExprKind::Number;
  SourceRange range;

  double number = 0.0;                              // Number (inf is +infinity)
  std::string name;                                 // Name; Access: tensor; Call: function
  SourceRange name_range;                           // Access / Call: range of the name only
  std::vector<std::unique_ptr<IndexExpr>> indices;  // Access
  std::vector<std::unique_ptr<Expr>> operands;      // Call args; Select then/else; Neg; Binary;
                                                    // Reduce body (one operand)
  std::unique_ptr<Condition> condition;             // Select
  BinaryOp binary_op = BinaryOp::Add;               // Binary
  ReduceOp reduce_op = ReduceOp::Sum;               // Reduce
  std::vector<ReduceVar> reduce_vars;               // Reduce

  // Set by sema.
  Func func = Func::Exp;             // Call
  int tensor = -1;                   // Access: index into Spec::tensors
  NameKind name_kind = NameKind::Unresolved;  // Name
  int var = -1;                      // Name resolved to an index variable
  int64_t size_value = 0;            // Name resolved to a size symbol
  DType dtype = DType::F32;          // the type of the value (see the header comment)
  bool weak_type = false;            // literals and names adopt the other operand's type
};

// ---------------------------------------------------------------------------------------------
// Statements as written.

struct SizeBinding {  // NAME = INT inside `let`
  std::string name;
  SourceRange name_range;
  int64_t value = 0;
  SourceRange value_range;
};

struct DimensionSpec {  // one entry of `input X[B, 64]`
  std::string symbol;   // empty for a literal
  int64_t literal = 0;
  SourceRange range;
};

struct LhsIndex {  // one entry of `S[b, h, m, n] = ...`
  std::string name;
  SourceRange range;
};

enum class StatementKind { Let, Input, Define };

struct Statement {
  StatementKind kind = StatementKind::Let;
  SourceRange range;  // the whole statement

  std::vector<SizeBinding> sizes;  // Let

  std::string name;                     // Input / Define: tensor name
  SourceRange name_range;
  std::vector<DimensionSpec> dims;      // Input
  bool has_dtype = false;               // Input (always) / Define (optional `: dtype`)
  DType dtype = DType::F32;
  SourceRange dtype_range;
  bool is_output = false;               // Define: `output` keyword
  std::vector<LhsIndex> lhs;            // Define
  std::unique_ptr<Expr> value;          // Define

  // Set by sema for Define: every index variable of the statement, spatial ones first in the
  // order of the left-hand side, then reduction variables in the order they are bound.
  struct Var {
    std::string name;
    int64_t extent = 0;
    bool reduced = false;
    SourceRange range;  // where it is declared (left-hand side or reduction list)
  };
  std::vector<Var> vars;
  int tensor = -1;  // Input / Define: index into Spec::tensors
};

struct Program {
  SourceFilePtr file;
  std::vector<Statement> statements;
};

// ---------------------------------------------------------------------------------------------
// The checked spec.

enum class TensorRole { Input, Intermediate, Output };
const char* tensor_role_name(TensorRole role);

struct Tensor {
  std::string name;
  TensorRole role = TensorRole::Input;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // How each dimension was written: a size symbol ("M"), a literal ("64"), or for defined
  // tensors the index variable that spans it ("m").
  std::vector<std::string> dim_names;
  SourceRange range;   // the name in its declaration
  int statement = -1;  // index into Program::statements of the declaring statement
};

struct Spec {
  SourceFilePtr file;
  std::string name;  // the file's stem, e.g. "attention"
  Program program;
  // Every size symbol with its value, in order of first binding (`let`, then -D).
  std::vector<std::pair<std::string, int64_t>> sizes;
  std::vector<Tensor> tensors;         // in order of declaration
  std::vector<int> definitions;        // indices of Define statements, in program order
  std::vector<int> inputs;             // tensor indices
  std::vector<int> outputs;            // tensor indices

  const Statement& statement(int index) const { return program.statements[index]; }
  int find_tensor(const std::string& tensor_name) const;  // -1 when absent
};

using SpecPtr = std::shared_ptr<const Spec>;

}  // namespace nautilus::spec
