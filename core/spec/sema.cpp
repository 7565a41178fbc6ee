#include "core/spec/sema.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/spec/lexer.h"
#include "core/spec/parser.h"
#include "core/spec/printer.h"

namespace nautilus::spec {

namespace {

// ---------------------------------------------------------------------------------------------
// Saturating integer arithmetic for bounds checks: index expressions may contain any int64
// literal, and a value clamped to the int64 range is still correctly "out of bounds".

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

int64_t saturate_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kInt64Max : kInt64Min;
  return r;
}
int64_t saturate_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kInt64Max : kInt64Min;
  return r;
}
int64_t saturate_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) == (b < 0) ? kInt64Max : kInt64Min;
  return r;
}
int64_t saturate_neg(int64_t a) { return a == kInt64Min ? kInt64Max : -a; }
// Floor division and modulo by a positive divisor (index semantics).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

struct Interval {
  int64_t lo = 0;
  int64_t hi = 0;
};

// Product of dimensions, or nullopt once it passes kMaxTensorElements.
std::optional<int64_t> element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    count = saturate_mul(count, extent);
    if (count > kMaxTensorElements) return std::nullopt;
  }
  return count;
}

std::string join_shape(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t extent : shape) text += (text.empty() ? "" : " x ") + std::to_string(extent);
  return text;
}

std::string quote(const std::string& name) { return "'" + shorten_name(name) + "'"; }

// "A, B, C" for at most kListedNames names, then ", ..." when there are more.
constexpr size_t kListedNames = 20;
std::string name_list(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < kListedNames; ++i) {
    text += (i ? ", " : "") + shorten_name(names[i]);
  }
  if (names.size() > kListedNames) text += ", ...";
  return text;
}

// ---------------------------------------------------------------------------------------------

struct SizeSymbol {
  int64_t value = 0;
  bool bound = false;     // by `let` or -D
  bool valid = false;     // bound to a value in [1, kMaxTensorElements]
  bool declared = false;  // bound by `let` or written in an input's shape
  bool used = false;      // read as a size somewhere
  bool reported = false;  // "not bound" already reported
  SourceRange let_range;  // the first `let` binding, invalid when none
};

// What a statement's check accumulates while walking its expression.
struct StatementState {
  Statement* statement = nullptr;
  int index = -1;                                     // into Program::statements
  std::string quoted;                                 // 'S'
  std::unordered_map<std::string, int> scope;         // visible index variables
  std::unordered_map<std::string, int> lhs_vars;      // left-hand side names
  struct VarUse {
    bool direct = false;        // indexes a dimension by itself somewhere
    int64_t extent = 0;         // from the first direct use into a known dimension; 0 unknown
    SourceRange first_use;
    std::string first_place;    // "dimension 3 of 'K'"
    bool conflict_reported = false;
  };
  std::vector<VarUse> uses;  // like Statement::vars
  struct CompoundUse {
    const IndexExpr* index;
    int64_t extent;
    std::string place;
  };
  std::vector<CompoundUse> compound_uses;       // bounds-checked once all extents are known
  std::unordered_set<std::string> reported_free;  // names already reported in this statement
  bool too_many_vars_reported = false;
  // For the dtype of an intermediate.
  bool has_reduction = false;
  bool has_tensor = false;
  bool has_f32_tensor = false;
  bool has_f16_tensor = false;
  bool has_bf16_tensor = false;
  bool has_narrow_storage_tensor = false;  // fp8, int8 or int4: storage only, never an intermediate's type
};

// Whether an index expression is free of index variables, its value when all sizes in it are
// known, and whether it passed the affine checks (only those are bounds-checked, so that one
// mistake gives one error).
struct IndexFacts {
  bool constant = true;
  std::optional<int64_t> value;
  bool affine = true;
};

// Checks a program in three passes: collect_declarations (what any statement may refer to), one
// walk over the statements in source order (so that errors come out in that order), and finish
// (what needs the whole file). The program is moved into the Spec first and annotated in place.
class Checker {
 public:
  Checker(Program program, const std::vector<SizeOverride>& overrides,
          DiagnosticEngine& diagnostics)
      : spec_(std::make_shared<Spec>()), overrides_(overrides), diagnostics_(diagnostics) {
    spec_->file = program.file;
    if (program.file) spec_->name = std::filesystem::path(program.file->path()).stem().string();
    spec_->program = std::move(program);
  }

  SpecPtr run();

 private:
  std::vector<Statement>& statements() { return spec_->program.statements; }

  void collect_declarations();
  void check_let(const Statement& statement);
  void check_input(Statement& statement, int index);
  void check_definition(Statement& statement, int index);
  bool check_tensor_name(const Statement& statement, int index);
  void register_tensor(Statement& statement, int index, TensorRole role, DType dtype,
                       std::vector<int64_t> shape, std::vector<std::string> dim_names);
  void finish();

  std::optional<int64_t> use_size(const std::string& name, const SourceRange& range,
                                  bool in_index, StatementState* state);
  std::optional<int64_t> size_value(const std::string& name) const;
  bool shadows_size(const std::string& name, const SourceRange& range);
  int add_var(StatementState& state, const std::string& name, const SourceRange& range,
              bool reduced);

  void check_expr(Expr& expr, StatementState& state);
  void check_access(Expr& expr, StatementState& state);
  void check_call(Expr& expr, StatementState& state);
  void check_reduce(Expr& expr, StatementState& state);
  void check_condition(Condition& condition, StatementState& state);
  IndexFacts check_index(IndexExpr& index, StatementState& state);
  bool report_tensor_as_name(const std::string& name, const SourceRange& range);
  void record_direct_use(StatementState& state, int var, int64_t extent, const SourceRange& range,
                         const std::string& place);
  std::optional<Interval> interval(const IndexExpr& index, const StatementState& state) const;
  void check_bounds(StatementState& state);

  std::shared_ptr<Spec> spec_;
  const std::vector<SizeOverride>& overrides_;
  DiagnosticEngine& diagnostics_;

  std::unordered_map<std::string, SizeSymbol> sizes_;
  std::vector<std::string> let_order_;  // names in order of their first `let`
  std::unordered_map<std::string, int> first_declaration_;  // tensor name -> statement
  std::unordered_map<std::string, int> tensor_index_;       // tensors registered so far
  std::unordered_set<std::string> size_tensor_conflicts_;   // reported once per name
  // Every tensor name read anywhere, also where the read itself is an error, so that "computed
  // but never used" is not said of a tensor read too early.
  std::unordered_set<std::string> read_names_;
  bool explicit_outputs_ = false;
  int last_definition_ = -1;
};

SpecPtr Checker::run() {
  collect_declarations();
  // Pass 2.
  for (size_t i = 0; i < statements().size(); ++i) {
    Statement& statement = statements()[i];
    switch (statement.kind) {
      case StatementKind::Let: check_let(statement); break;
      case StatementKind::Input: check_input(statement, static_cast<int>(i)); break;
      case StatementKind::Define: check_definition(statement, static_cast<int>(i)); break;
    }
  }
  finish();
  if (diagnostics_.has_errors()) return nullptr;
  return spec_;
}

// Pass 1: everything a statement may refer to regardless of order: sizes (`let` may come after
// a use), tensor names (to tell "used before its definition" from "unknown"), and which
// definitions are outputs.
void Checker::collect_declarations() {
  for (size_t i = 0; i < statements().size(); ++i) {
    const Statement& statement = statements()[i];
    for (const SizeBinding& binding : statement.sizes) {
      SizeSymbol& symbol = sizes_[binding.name];
      if (symbol.let_range.valid) continue;  // a redefinition, reported in order
      symbol.let_range = binding.name_range;
      symbol.value = binding.value;
      symbol.bound = symbol.declared = true;
      symbol.valid = binding.value >= 1 && binding.value <= kMaxTensorElements;
      let_order_.push_back(binding.name);
    }
    for (const DimensionSpec& dim : statement.dims) {
      if (!dim.symbol.empty()) sizes_[dim.symbol].declared = true;
    }
    if (statement.kind != StatementKind::Let) {
      first_declaration_.emplace(statement.name, static_cast<int>(i));
    }
    if (statement.kind == StatementKind::Define) {
      explicit_outputs_ = explicit_outputs_ || statement.is_output;
      last_definition_ = static_cast<int>(i);
    }
  }
  // -D replaces `let`; a later -D for the same name wins. Overrides naming no size symbol are
  // reported in finish(), once every use is known.
  for (const SizeOverride& override_ : overrides_) {
    SizeSymbol& symbol = sizes_[override_.name];
    symbol.value = override_.value;
    symbol.bound = true;
    symbol.valid = override_.value >= 1 && override_.value <= kMaxTensorElements;
  }
}

void Checker::check_let(const Statement& statement) {
  for (const SizeBinding& binding : statement.sizes) {
    const SizeSymbol& symbol = sizes_[binding.name];
    if (symbol.let_range != binding.name_range) {
      diagnostics_.error(binding.name_range, "size " + quote(binding.name) + " is already bound")
          .notes.push_back({symbol.let_range, quote(binding.name) + " is first bound here"});
      continue;
    }
    if (binding.value < 1) {
      diagnostics_.error(binding.value_range, "size " + quote(binding.name) +
                                                  " must be at least 1, got " +
                                                  std::to_string(binding.value));
    } else if (binding.value > kMaxTensorElements) {
      diagnostics_.error(binding.value_range,
                         "size " + quote(binding.name) + " is too large: " +
                             std::to_string(binding.value) + " (the limit is " +
                             std::to_string(kMaxTensorElements) + ")");
    }
    auto tensor = first_declaration_.find(binding.name);
    if (tensor != first_declaration_.end() && size_tensor_conflicts_.insert(binding.name).second) {
      diagnostics_.error(binding.name_range,
                         quote(binding.name) + " names both a size and a tensor")
          .notes.push_back({statements()[tensor->second].name_range,
                            "the tensor " + quote(binding.name) + " is declared here"});
    }
  }
}

// Reports a second declaration of a tensor name, or a tensor named like a size. Returns false
// when the statement must not register its tensor.
bool Checker::check_tensor_name(const Statement& statement, int index) {
  int first = first_declaration_.at(statement.name);
  if (first != index) {
    const Statement& previous = statements()[first];
    std::string message = previous.kind == StatementKind::Input
                              ? quote(statement.name) + " is an input and cannot be declared again"
                              : "tensor " + quote(statement.name) + " is already defined";
    diagnostics_.error(statement.name_range, message)
        .notes.push_back({previous.name_range, quote(statement.name) + " is first declared here"});
    return false;
  }
  auto size = sizes_.find(statement.name);
  if (size != sizes_.end() && size->second.declared &&
      size_tensor_conflicts_.insert(statement.name).second) {
    Diagnostic& d = diagnostics_.error(statement.name_range,
                                       quote(statement.name) + " names both a size and a tensor");
    if (size->second.let_range.valid) {
      d.notes.push_back({size->second.let_range,
                         "the size " + quote(statement.name) + " is bound here"});
    }
  }
  return true;
}

void Checker::register_tensor(Statement& statement, int index, TensorRole role, DType dtype,
                              std::vector<int64_t> shape, std::vector<std::string> dim_names) {
  Tensor tensor;
  tensor.name = statement.name;
  tensor.role = role;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.dim_names = std::move(dim_names);
  tensor.range = statement.name_range;
  tensor.statement = index;
  statement.tensor = static_cast<int>(spec_->tensors.size());
  tensor_index_[tensor.name] = statement.tensor;
  spec_->tensors.push_back(std::move(tensor));
  if (role == TensorRole::Input) spec_->inputs.push_back(statement.tensor);
  if (role == TensorRole::Output) spec_->outputs.push_back(statement.tensor);
}

// A shape whose product passes the limit is reported; its dimensions stay known.
void check_element_count(DiagnosticEngine& diagnostics, const Statement& statement,
                         const std::vector<int64_t>& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return;  // already reported
  if (element_count(shape)) return;
  diagnostics.error(statement.name_range, "tensor " + quote(statement.name) +
                                              " has more than " +
                                              std::to_string(kMaxTensorElements) +
                                              " elements (shape " + join_shape(shape) + ")");
}

void Checker::check_input(Statement& statement, int index) {
  bool registers = check_tensor_name(statement, index);
  const std::string quoted = quote(statement.name);
  if (statement.dims.size() > static_cast<size_t>(kMaxRank)) {
    diagnostics_.error(statement.name_range, quoted + " has " +
                                                 std::to_string(statement.dims.size()) +
                                                 " dimensions; at most " +
                                                 std::to_string(kMaxRank) + " are supported");
  }
  // An unknown extent stays 0, which turns off the checks that depend on it.
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
  for (size_t d = 0; d < statement.dims.size(); ++d) {
    const DimensionSpec& dim = statement.dims[d];
    int64_t extent = 0;
    if (!dim.symbol.empty()) {
      extent = use_size(dim.symbol, dim.range, false, nullptr).value_or(0);
      dim_names.push_back(dim.symbol);
    } else {
      std::string what = "dimension " + std::to_string(d + 1) + " of " + quoted;
      if (dim.literal < 1) {
        diagnostics_.error(dim.range,
                           what + " must be at least 1, got " + std::to_string(dim.literal));
      } else if (dim.literal > kMaxTensorElements) {
        diagnostics_.error(dim.range, what + " is too large: " + std::to_string(dim.literal) +
                                          " (the limit is " +
                                          std::to_string(kMaxTensorElements) + ")");
      } else {
        extent = dim.literal;
      }
      dim_names.push_back(std::to_string(dim.literal));
    }
    shape.push_back(extent);
  }
  check_element_count(diagnostics_, statement, shape);
  if (statement.dtype == DType::I4 && !shape.empty() && shape.back() % 2 != 0) {
    // int4 packs two elements a byte along the last axis (core/support/dtype.h).
    const DimensionSpec& last = statement.dims.back();
    diagnostics_.error(last.range, "the last dimension of the int4 input " + quoted + " is " +
                                       std::to_string(shape.back()) +
                                       ": int4 packs two elements a byte along it, so it must be even");
  }
  if (registers) {
    register_tensor(statement, index, TensorRole::Input, statement.dtype, std::move(shape),
                    std::move(dim_names));
  }
}

std::optional<int64_t> Checker::size_value(const std::string& name) const {
  auto it = sizes_.find(name);
  if (it == sizes_.end() || !it->second.valid) return std::nullopt;
  return it->second.value;
}

// A use of `name` as a size. Unbound sizes are reported once per name; a free name inside an
// index of a definition is reported (once per statement) as a missing index variable instead,
// since that is what such a name almost always is.
std::optional<int64_t> Checker::use_size(const std::string& name, const SourceRange& range,
                                         bool in_index, StatementState* state) {
  SizeSymbol& symbol = sizes_[name];
  symbol.used = true;
  if (symbol.bound) return symbol.valid ? std::optional<int64_t>(symbol.value) : std::nullopt;
  if (!symbol.declared && in_index && state) {
    if (state->reported_free.insert(name).second) {
      diagnostics_.error(range, "index variable " + quote(name) +
                                    " is neither on the left-hand side of " + state->quoted +
                                    " nor bound by a reduction");
    }
    return std::nullopt;
  }
  if (!symbol.reported) {
    symbol.reported = true;
    diagnostics_.error(range, "size " + quote(name) + " is not bound; bind it with `let` or -D " +
                                  shorten_name(name) + "=VALUE");
  }
  return std::nullopt;
}

bool Checker::shadows_size(const std::string& name, const SourceRange& range) {
  auto it = sizes_.find(name);
  if (it == sizes_.end() || !it->second.declared) return false;
  Diagnostic& d = diagnostics_.error(range, "index variable " + quote(name) +
                                                " shadows the size " + quote(name) +
                                                "; rename one of them");
  if (it->second.let_range.valid) {
    d.notes.push_back({it->second.let_range, "the size " + quote(name) + " is bound here"});
  }
  return true;
}

int Checker::add_var(StatementState& state, const std::string& name, const SourceRange& range,
                     bool reduced) {
  std::vector<Statement::Var>& vars = state.statement->vars;
  if (vars.size() == static_cast<size_t>(kMaxStatementVars) && !state.too_many_vars_reported) {
    state.too_many_vars_reported = true;
    diagnostics_.error(range, state.quoted + " uses more than " +
                                  std::to_string(kMaxStatementVars) + " index variables");
  }
  int id = static_cast<int>(vars.size());
  vars.push_back({name, 0, reduced, range});
  state.uses.emplace_back();
  state.scope[name] = id;
  return id;
}

void Checker::check_definition(Statement& statement, int index) {
  bool registers = check_tensor_name(statement, index);
  StatementState state;
  state.statement = &statement;
  state.index = index;
  state.quoted = quote(statement.name);
  if (statement.lhs.size() > static_cast<size_t>(kMaxRank)) {
    diagnostics_.error(statement.name_range, state.quoted + " has " +
                                                 std::to_string(statement.lhs.size()) +
                                                 " dimensions; at most " +
                                                 std::to_string(kMaxRank) + " are supported");
  }

  // 1. The left-hand side declares the spatial variables.
  for (const LhsIndex& lhs : statement.lhs) {
    auto [it, inserted] = state.lhs_vars.emplace(lhs.name, -1);
    if (!inserted) {
      diagnostics_.error(lhs.range, "index variable " + quote(lhs.name) +
                                        " appears twice on the left-hand side of " + state.quoted)
          .notes.push_back({statement.vars[it->second].range, "first occurrence"});
      continue;
    }
    shadows_size(lhs.name, lhs.range);
    it->second = add_var(state, lhs.name, lhs.range, false);
  }

  // 2. The value: names, calls, reductions, extents from direct uses.
  check_expr(*statement.value, state);

  // 3. Every variable needs an extent.
  for (size_t v = 0; v < statement.vars.size(); ++v) {
    Statement::Var& var = statement.vars[v];
    if (!state.uses[v].direct) {
      diagnostics_.error(var.range, "cannot infer the extent of index variable " +
                                        quote(var.name) +
                                        ": it never indexes a dimension by itself (as in X[" +
                                        shorten_name(var.name) + "])");
    }
    var.extent = state.uses[v].extent;
  }

  // 4. Compound indices stay inside their dimensions.
  check_bounds(state);

  // 5. The defined tensor: its shape comes from the left-hand side, its dtype from the
  // declaration or the operands.
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
  for (const LhsIndex& lhs : statement.lhs) {
    int var = state.lhs_vars.at(lhs.name);
    shape.push_back(statement.vars[var].extent);
    dim_names.push_back(lhs.name);
  }
  check_element_count(diagnostics_, statement, shape);
  bool is_output = explicit_outputs_ ? statement.is_output : index == last_definition_;
  DType dtype = DType::F32;
  if (statement.has_dtype && statement.dtype == DType::I4) {
    diagnostics_.error(statement.dtype_range,
                       "int4 is an input type only (packed two elements a byte); store " + 
                       std::string(is_output ? "the output" : "the tensor") + " as int8, bf16, f16 or f32");
  }
  if (statement.has_dtype) {
    dtype = statement.dtype;
  } else if (!is_output && state.has_tensor && !state.has_reduction && !state.has_f32_tensor &&
             !state.has_narrow_storage_tensor && state.has_f16_tensor != state.has_bf16_tensor) {
    // An intermediate whose tensor operands all share one narrow dtype keeps it.
    dtype = state.has_f16_tensor ? DType::F16 : DType::BF16;
  }
  spec_->definitions.push_back(index);
  if (registers) {
    register_tensor(statement, index, is_output ? TensorRole::Output : TensorRole::Intermediate,
                    dtype, std::move(shape), std::move(dim_names));
  }
}

// Sets the dtype of a Call, Neg, Binary or Select from its operands: promote over the operands
// that are not weak; a node whose operands are all weak (constants) is weak itself.
void set_dtype_from_operands(Expr& expr) {
  bool any_strong = false;
  DType dtype = DType::F32;
  for (const auto& operand : expr.operands) {
    if (operand->weak_type) continue;
    dtype = any_strong ? promote(dtype, operand->dtype) : operand->dtype;
    any_strong = true;
  }
  // Arithmetic on 8-bit operands (fp8, int8) is done in f32; only a store narrows again.
  expr.dtype = any_strong && !is_narrow_storage(dtype) ? dtype : DType::F32;
  expr.weak_type = !any_strong;
}

// A tensor name written without brackets (in a value or an index) or called like a function.
// Returns true when reported.
bool Checker::report_tensor_as_name(const std::string& name, const SourceRange& range) {
  // A name that is both a size and a tensor was reported as such; it reads as the size.
  if (!first_declaration_.count(name)) return false;
  auto size = sizes_.find(name);
  if (size != sizes_.end() && size->second.declared) return false;
  diagnostics_.error(range,
                     quote(name) + " is a tensor; read it with " + shorten_name(name) + "[...]");
  return true;
}

void Checker::check_expr(Expr& expr, StatementState& state) {
  switch (expr.kind) {
    case ExprKind::Number:
      expr.weak_type = true;
      return;
    case ExprKind::Name: {
      expr.weak_type = true;
      auto var = state.scope.find(expr.name);
      if (var != state.scope.end()) {
        expr.name_kind = NameKind::IndexVar;
        expr.var = var->second;
      } else if (!report_tensor_as_name(expr.name, expr.range)) {
        expr.name_kind = NameKind::SizeSymbol;
        expr.size_value = use_size(expr.name, expr.range, false, &state).value_or(0);
      }
      return;
    }
    case ExprKind::Access: check_access(expr, state); return;
    case ExprKind::Call: check_call(expr, state); return;
    case ExprKind::Select:
      check_condition(*expr.condition, state);
      for (auto& operand : expr.operands) check_expr(*operand, state);
      set_dtype_from_operands(expr);
      return;
    case ExprKind::Reduce: check_reduce(expr, state); return;
    case ExprKind::Neg:
    case ExprKind::Binary:
      for (auto& operand : expr.operands) check_expr(*operand, state);
      set_dtype_from_operands(expr);
      return;
  }
}

void Checker::check_access(Expr& expr, StatementState& state) {
  const std::string quoted = quote(expr.name);
  const Tensor* tensor = nullptr;
  read_names_.insert(expr.name);
  auto found = tensor_index_.find(expr.name);
  if (found != tensor_index_.end()) {
    expr.tensor = found->second;
    tensor = &spec_->tensors[found->second];
  } else if (auto later = first_declaration_.find(expr.name); later != first_declaration_.end()) {
    // The first declaration of a name always registers its tensor, so it is this statement or
    // a later one.
    if (later->second == state.index) {
      diagnostics_.error(expr.name_range, quoted + " is used in its own definition; a statement "
                                                   "can only read tensors defined before it");
    } else {
      diagnostics_.error(expr.name_range, "tensor " + quoted + " is used before its definition")
          .notes.push_back({statements()[later->second].name_range,
                            quoted + " is defined here"});
    }
  } else {
    std::vector<std::string> names;
    for (size_t t = 0; t < spec_->tensors.size() && t <= kListedNames; ++t) {
      names.push_back(spec_->tensors[t].name);
    }
    std::string known = name_list(names);
    diagnostics_.error(expr.name_range,
                       "unknown tensor " + quoted +
                           (known.empty() ? "; no tensor is declared before this statement"
                                          : "; known tensors are " + known));
  }

  bool rank_ok = tensor && tensor->shape.size() == expr.indices.size();
  if (tensor && !rank_ok) {
    size_t n = expr.indices.size();
    diagnostics_.error(expr.range, quoted + " has rank " + std::to_string(tensor->shape.size()) +
                                       " but is indexed with " + std::to_string(n) +
                                       (n == 1 ? " index" : " indices"));
  }
  for (size_t d = 0; d < expr.indices.size(); ++d) {
    IndexExpr& index = *expr.indices[d];
    bool affine = check_index(index, state).affine;
    // With the tensor or its rank wrong (already reported), a variable used here still counts
    // as directly used, with an unknown extent, so that no second error follows.
    int64_t extent = rank_ok ? tensor->shape[d] : 0;
    std::string place = "dimension " + std::to_string(d + 1) + " of " + quoted;
    if (index.kind == IndexKind::Name && index.name_kind == NameKind::IndexVar) {
      record_direct_use(state, index.var, extent, index.range, place);
    } else if (extent > 0 && affine) {
      state.compound_uses.push_back({&index, extent, place});
    }
  }
  if (tensor) {
    expr.dtype = tensor->dtype;
    state.has_tensor = true;
    state.has_f32_tensor |= tensor->dtype == DType::F32;
    state.has_f16_tensor |= tensor->dtype == DType::F16;
    state.has_bf16_tensor |= tensor->dtype == DType::BF16;
    state.has_narrow_storage_tensor |= is_narrow_storage(tensor->dtype);
  }
}

void Checker::record_direct_use(StatementState& state, int var, int64_t extent,
                                const SourceRange& range, const std::string& place) {
  StatementState::VarUse& use = state.uses[var];
  use.direct = true;
  if (extent == 0) return;  // a dimension whose size had an error of its own
  if (use.extent == 0) {
    use.extent = extent;
    use.first_use = range;
    use.first_place = place;
    return;
  }
  if (use.extent == extent || use.conflict_reported) return;
  use.conflict_reported = true;
  const std::string& name = state.statement->vars[var].name;
  diagnostics_.error(range, "index variable " + quote(name) + " has extent " +
                                std::to_string(extent) + " here (" + place + ") but " +
                                std::to_string(use.extent) + " in " + use.first_place)
      .notes.push_back({use.first_use, quote(name) + " has extent " +
                                               std::to_string(use.extent) + " here"});
}

void Checker::check_call(Expr& expr, StatementState& state) {
  std::optional<Func> func = find_func(expr.name);
  // `max(n)` with nothing after it was meant as a reduction: its argument is a variable name,
  // not a size, and is reported only through the hint below.
  bool reduction_like = func && func_arity(*func) == 2 && expr.operands.size() == 1 &&
                        expr.operands[0]->kind == ExprKind::Name;
  if (!reduction_like) {
    for (auto& operand : expr.operands) check_expr(*operand, state);
  }
  set_dtype_from_operands(expr);
  if (!func) {
    if (!report_tensor_as_name(expr.name, expr.name_range)) {
      diagnostics_.error(expr.name_range, "unknown function " + quote(expr.name) +
                                              "; expected one of " + func_name_list());
    }
    return;
  }
  expr.func = *func;
  int arity = func_arity(*func);
  int given = static_cast<int>(expr.operands.size());
  if (given == arity) return;
  std::string message = quote(expr.name) + " takes " + std::to_string(arity) +
                        (arity == 1 ? " argument" : " arguments") + ", got " +
                        std::to_string(given);
  if (reduction_like) {
    message += "; to reduce over " + quote(expr.operands[0]->name) + ", write " + expr.name +
               "(" + shorten_name(expr.operands[0]->name) + ") followed by the expression";
  }
  diagnostics_.error(expr.range, message);
}

void Checker::check_reduce(Expr& expr, StatementState& state) {
  state.has_reduction = true;
  std::vector<std::string> bound_here;
  // Variables bound by this reduction get ids from here on.
  const int first_bound_here = static_cast<int>(state.statement->vars.size());
  for (ReduceVar& rv : expr.reduce_vars) {
    const std::string quoted = quote(rv.name);
    auto lhs = state.lhs_vars.find(rv.name);
    auto visible = state.scope.find(rv.name);
    if (lhs != state.lhs_vars.end()) {
      diagnostics_.error(rv.range, "reduction variable " + quoted +
                                       " is also on the left-hand side of " + state.quoted)
          .notes.push_back({state.statement->vars[lhs->second].range,
                            quoted + " is a spatial variable here"});
      rv.var = lhs->second;
    } else if (visible != state.scope.end()) {
      bool same_list = visible->second >= first_bound_here;
      diagnostics_.error(rv.range, "reduction variable " + quoted +
                                       (same_list ? " is listed twice"
                                                  : " is already bound by an enclosing reduction"))
          .notes.push_back({state.statement->vars[visible->second].range, "first bound here"});
      rv.var = visible->second;
    } else {
      shadows_size(rv.name, rv.range);
      rv.var = add_var(state, rv.name, rv.range, true);
      bound_here.push_back(rv.name);
    }
  }
  check_expr(*expr.operands[0], state);
  for (const std::string& name : bound_here) state.scope.erase(name);
  expr.dtype = DType::F32;
}

void Checker::check_condition(Condition& condition, StatementState& state) {
  if (condition.kind == Condition::Kind::Compare) {
    check_index(*condition.lhs_index, state);
    check_index(*condition.rhs_index, state);
    return;
  }
  check_condition(*condition.lhs, state);
  check_condition(*condition.rhs, state);
}

// Resolves the names of an index expression and checks that it is affine: `*` has a constant
// side; `/` and `%` divide by a positive constant.
IndexFacts Checker::check_index(IndexExpr& index, StatementState& state) {
  switch (index.kind) {
    case IndexKind::Literal: return {true, index.literal, true};
    case IndexKind::Name: {
      auto var = state.scope.find(index.name);
      if (var != state.scope.end()) {
        index.name_kind = NameKind::IndexVar;
        index.var = var->second;
        return {false, std::nullopt, true};
      }
      if (report_tensor_as_name(index.name, index.range)) return {true, std::nullopt, true};
      index.name_kind = NameKind::SizeSymbol;
      std::optional<int64_t> value = use_size(index.name, index.range, true, &state);
      index.size_value = value.value_or(0);
      return {true, value, true};
    }
    case IndexKind::Neg: {
      IndexFacts operand = check_index(*index.lhs, state);
      if (operand.value) operand.value = saturate_neg(*operand.value);
      return operand;
    }
    default: break;
  }
  IndexFacts lhs = check_index(*index.lhs, state);
  IndexFacts rhs = check_index(*index.rhs, state);
  IndexFacts result{lhs.constant && rhs.constant, std::nullopt, lhs.affine && rhs.affine};
  bool both = lhs.value && rhs.value;
  switch (index.kind) {
    case IndexKind::Add:
      if (both) result.value = saturate_add(*lhs.value, *rhs.value);
      break;
    case IndexKind::Sub:
      if (both) result.value = saturate_sub(*lhs.value, *rhs.value);
      break;
    case IndexKind::Mul:
      if (!lhs.constant && !rhs.constant) {
        diagnostics_.error(index.range, "index '" + print_index(index) +
                                            "' is not affine: one side of '*' must be a "
                                            "constant (an integer or a size)");
        result.affine = false;
      }
      if (both) result.value = saturate_mul(*lhs.value, *rhs.value);
      break;
    case IndexKind::FloorDiv:
    case IndexKind::Mod: {
      const char* op = index.kind == IndexKind::FloorDiv ? "/" : "%";
      std::string prefix =
          std::string("the divisor of '") + op + "' in '" + print_index(index) +
          "' must be a positive constant (an integer or a size), ";
      if (!rhs.constant) {
        diagnostics_.error(index.rhs->range, prefix + "not '" + print_index(*index.rhs) + "'");
        result.affine = false;
      } else if (rhs.value && *rhs.value <= 0) {
        diagnostics_.error(index.rhs->range, prefix + "got " + std::to_string(*rhs.value));
        result.affine = false;
      } else if (both) {
        result.value = index.kind == IndexKind::FloorDiv ? floor_div(*lhs.value, *rhs.value)
                                                         : floor_mod(*lhs.value, *rhs.value);
      }
      break;
    }
    default: break;
  }
  return result;
}

// The values an index expression takes when every variable ranges over [0, extent) on its own
// (interval arithmetic); nullopt when an extent or size is unknown or the expression is not
// affine (both already reported).
std::optional<Interval> Checker::interval(const IndexExpr& index,
                                          const StatementState& state) const {
  switch (index.kind) {
    case IndexKind::Literal: return Interval{index.literal, index.literal};
    case IndexKind::Name: {
      if (index.name_kind == NameKind::IndexVar) {
        int64_t extent = state.statement->vars[index.var].extent;
        if (extent <= 0) return std::nullopt;
        return Interval{0, extent - 1};
      }
      if (index.name_kind != NameKind::SizeSymbol) return std::nullopt;
      std::optional<int64_t> value = size_value(index.name);
      if (!value) return std::nullopt;
      return Interval{*value, *value};
    }
    case IndexKind::Neg: {
      std::optional<Interval> operand = interval(*index.lhs, state);
      if (!operand) return std::nullopt;
      return Interval{saturate_neg(operand->hi), saturate_neg(operand->lo)};
    }
    default: break;
  }
  std::optional<Interval> a = interval(*index.lhs, state);
  std::optional<Interval> b = interval(*index.rhs, state);
  if (!a || !b) return std::nullopt;
  switch (index.kind) {
    case IndexKind::Add: return Interval{saturate_add(a->lo, b->lo), saturate_add(a->hi, b->hi)};
    case IndexKind::Sub: return Interval{saturate_sub(a->lo, b->hi), saturate_sub(a->hi, b->lo)};
    case IndexKind::Mul: {
      int64_t products[] = {saturate_mul(a->lo, b->lo), saturate_mul(a->lo, b->hi),
                            saturate_mul(a->hi, b->lo), saturate_mul(a->hi, b->hi)};
      return Interval{*std::min_element(std::begin(products), std::end(products)),
                      *std::max_element(std::begin(products), std::end(products))};
    }
    case IndexKind::FloorDiv:
    case IndexKind::Mod: {
      if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
      int64_t divisor = b->lo;
      if (index.kind == IndexKind::FloorDiv) {
        return Interval{floor_div(a->lo, divisor), floor_div(a->hi, divisor)};
      }
      // Within one period the remainders keep their order; otherwise any remainder occurs.
      if (saturate_sub(a->hi, a->lo) < divisor &&
          floor_mod(a->lo, divisor) <= floor_mod(a->hi, divisor)) {
        return Interval{floor_mod(a->lo, divisor), floor_mod(a->hi, divisor)};
      }
      return Interval{0, divisor - 1};
    }
    default: return std::nullopt;
  }
}

void Checker::check_bounds(StatementState& state) {
  for (const StatementState::CompoundUse& use : state.compound_uses) {
    std::optional<Interval> range = interval(*use.index, state);
    if (!range || (range->lo >= 0 && range->hi < use.extent)) continue;
    diagnostics_.error(use.index->range,
                       "index '" + print_index(*use.index) + "' ranges over [" +
                           std::to_string(range->lo) + ", " + std::to_string(range->hi) +
                           "], outside " + use.place + " (extent " +
                           std::to_string(use.extent) + ")");
  }
}

// Pass 3: what needs the whole program: overrides that name nothing, the output, unused
// definitions, and the final size table.
void Checker::finish() {
  std::unordered_set<std::string> overridden;
  for (const SizeOverride& override_ : overrides_) {
    const SizeSymbol& symbol = sizes_.at(override_.name);
    std::string prefix =
        "-D " + shorten_name(override_.name) + "=" + std::to_string(override_.value) + ": ";
    if (!symbol.declared && !symbol.used) {
      std::vector<std::string> names;
      for (const auto& [name, s] : sizes_) {
        if (s.declared || s.used) names.push_back(name);
      }
      std::sort(names.begin(), names.end());
      std::string known = name_list(names);
      diagnostics_.error(SourceRange{}, prefix + "the spec has no size symbol " +
                                            quote(override_.name) +
                                            (known.empty() ? "" : "; its sizes are " + known));
      continue;
    }
    if (override_.value > kMaxTensorElements && overridden.insert(override_.name).second) {
      diagnostics_.error(SourceRange{}, prefix + "size " + quote(override_.name) +
                                            " is too large (the limit is " +
                                            std::to_string(kMaxTensorElements) + ")");
    }
    overridden.insert(override_.name);
  }

  if (spec_->definitions.empty()) {
    diagnostics_.error(SourceRange{}, "the spec defines no output: it has no definition "
                                      "(such as `output Y[i] = X[i]`)");
  }
  for (const Tensor& tensor : spec_->tensors) {
    if (tensor.role == TensorRole::Intermediate && !read_names_.count(tensor.name)) {
      diagnostics_.warning(tensor.range, quote(tensor.name) + " is computed but never used");
    }
  }

  for (const std::string& name : let_order_) {
    spec_->sizes.emplace_back(name, sizes_.at(name).value);
  }
  for (const SizeOverride& override_ : overrides_) {
    const SizeSymbol& symbol = sizes_.at(override_.name);
    bool listed = std::any_of(spec_->sizes.begin(), spec_->sizes.end(),
                              [&](const auto& entry) { return entry.first == override_.name; });
    if (!listed && (symbol.declared || symbol.used)) {
      spec_->sizes.emplace_back(override_.name, symbol.value);
    }
  }
}

bool is_identifier(std::string_view text) {
  if (text.empty()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

}  // namespace

std::optional<SizeOverride> parse_size_override(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<SizeOverride> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  size_t equals = text.find('=');
  if (equals == std::string_view::npos) {
    return fail("expected NAME=VALUE, got '" + std::string(text) + "'");
  }
  std::string_view name = text.substr(0, equals);
  std::string_view digits = text.substr(equals + 1);
  if (!is_identifier(name)) {
    return fail("expected NAME=VALUE with NAME a size name, got '" + std::string(text) + "'");
  }
  SizeOverride result;
  result.name = std::string(name);
  auto [end, status] = std::from_chars(digits.data(), digits.data() + digits.size(), result.value);
  bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  if (!all_digits || end != digits.data() + digits.size()) {
    return fail("the value of '" + result.name + "' must be a positive integer, got '" +
                std::string(digits) + "'");
  }
  if (status != std::errc()) {
    return fail("the value of '" + result.name + "' does not fit in 64 bits");
  }
  if (result.value < 1) {
    return fail("the value of '" + result.name + "' must be a positive integer, got '" +
                std::string(digits) + "'");
  }
  return result;
}

SpecPtr check_program(Program program, const std::vector<SizeOverride>& overrides,
                      DiagnosticEngine& diagnostics) {
  return Checker(std::move(program), overrides, diagnostics).run();
}

SpecPtr load_spec(SourceFilePtr file, const std::vector<SizeOverride>& overrides,
                  DiagnosticEngine& diagnostics) {
  Program program = parse_program(std::move(file), diagnostics);
  if (diagnostics.has_errors()) return nullptr;
  return check_program(std::move(program), overrides, diagnostics);
}

}  // namespace nautilus::spec
