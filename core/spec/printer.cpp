#include "core/spec/printer.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_set>

namespace nautilus::spec {

namespace {

// ---------------------------------------------------------------------------------------------
// Expressions. Parentheses are printed only where the grammar needs them: for precedence, for
// the right operand of a left-associative operator at the same level (a - (b - c)), and around
// a reduction that is followed by more of its enclosing expression, because a reduction's body
// extends as far right as possible (`(sum(n) x) * y` is not `sum(n) x * y`).

enum Precedence { kSumLevel = 1, kProductLevel = 2, kUnaryLevel = 3, kAtomLevel = 4 };

int precedence(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::Binary:
      return expr.binary_op == BinaryOp::Add || expr.binary_op == BinaryOp::Sub ? kSumLevel
                                                                                : kProductLevel;
    case ExprKind::Neg:
    case ExprKind::Reduce: return kUnaryLevel;
    default: return kAtomLevel;
  }
}

int precedence(const IndexExpr& index) {
  switch (index.kind) {
    case IndexKind::Add:
    case IndexKind::Sub: return kSumLevel;
    case IndexKind::Mul:
    case IndexKind::FloorDiv:
    case IndexKind::Mod: return kProductLevel;
    case IndexKind::Neg: return kUnaryLevel;
    default: return kAtomLevel;
  }
}

const char* index_op_text(IndexKind kind) {
  switch (kind) {
    case IndexKind::Add: return "+";
    case IndexKind::Sub: return "-";
    case IndexKind::Mul: return "*";
    case IndexKind::FloorDiv: return "/";
    case IndexKind::Mod: return "%";
    default: return "?";
  }
}

// The shortest text that reads back as the same double; "inf" for infinity.
std::string format_number(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "nan";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

void print_index_to(const IndexExpr& index, std::string& out) {
  switch (index.kind) {
    case IndexKind::Literal: out += std::to_string(index.literal); return;
    case IndexKind::Name: out += index.name; return;
    case IndexKind::Neg: {
      bool parens = precedence(*index.lhs) < kUnaryLevel || index.lhs->kind == IndexKind::Neg;
      out += '-';
      if (parens) out += '(';
      print_index_to(*index.lhs, out);
      if (parens) out += ')';
      return;
    }
    default: break;
  }
  int level = precedence(index);
  bool lhs_parens = precedence(*index.lhs) < level;
  bool rhs_parens = precedence(*index.rhs) <= level;
  if (lhs_parens) out += '(';
  print_index_to(*index.lhs, out);
  if (lhs_parens) out += ')';
  out += ' ';
  out += index_op_text(index.kind);
  out += ' ';
  if (rhs_parens) out += '(';
  print_index_to(*index.rhs, out);
  if (rhs_parens) out += ')';
}

int precedence(const Condition& condition) {
  switch (condition.kind) {
    case Condition::Kind::Or: return 1;
    case Condition::Kind::And: return 2;
    case Condition::Kind::Compare: return 3;
  }
  return 3;
}

void print_condition_to(const Condition& condition, std::string& out) {
  if (condition.kind == Condition::Kind::Compare) {
    print_index_to(*condition.lhs_index, out);
    out += ' ';
    out += compare_op_text(condition.compare);
    out += ' ';
    print_index_to(*condition.rhs_index, out);
    return;
  }
  // The parser never builds a tree that needs these parentheses; a hand-built one stays
  // unambiguous to the reader.
  int level = precedence(condition);
  bool lhs_parens = precedence(*condition.lhs) < level;
  bool rhs_parens = precedence(*condition.rhs) <= level;
  if (lhs_parens) out += '(';
  print_condition_to(*condition.lhs, out);
  if (lhs_parens) out += ')';
  out += condition.kind == Condition::Kind::And ? " and " : " or ";
  if (rhs_parens) out += '(';
  print_condition_to(*condition.rhs, out);
  if (rhs_parens) out += ')';
}

// `at_end`: nothing of the enclosing expression follows this one before a closing delimiter,
// so a reduction printed here needs no parentheses.
void print_expr_to(const Expr& expr, bool at_end, std::string& out);

void print_operand(const Expr& operand, bool parens, bool at_end, std::string& out) {
  if (parens) out += '(';
  print_expr_to(operand, at_end || parens, out);
  if (parens) out += ')';
}

void print_expr_to(const Expr& expr, bool at_end, std::string& out) {
  switch (expr.kind) {
    case ExprKind::Number: out += format_number(expr.number); return;
    case ExprKind::Name: out += expr.name; return;
    case ExprKind::Access:
      out += expr.name;
      out += '[';
      for (size_t i = 0; i < expr.indices.size(); ++i) {
        if (i > 0) out += ", ";
        print_index_to(*expr.indices[i], out);
      }
      out += ']';
      return;
    case ExprKind::Call:
      out += expr.name;
      out += '(';
      for (size_t i = 0; i < expr.operands.size(); ++i) {
        if (i > 0) out += ", ";
        print_expr_to(*expr.operands[i], true, out);
      }
      out += ')';
      return;
    case ExprKind::Select:
      out += "select(";
      print_condition_to(*expr.condition, out);
      for (const auto& operand : expr.operands) {
        out += ", ";
        print_expr_to(*operand, true, out);
      }
      out += ')';
      return;
    case ExprKind::Reduce:
      if (!at_end) out += '(';
      out += reduce_op_name(expr.reduce_op);
      out += '(';
      for (size_t i = 0; i < expr.reduce_vars.size(); ++i) {
        if (i > 0) out += ", ";
        out += expr.reduce_vars[i].name;
      }
      out += ") ";
      print_expr_to(*expr.operands[0], true, out);
      if (!at_end) out += ')';
      return;
    case ExprKind::Neg: {
      const Expr& operand = *expr.operands[0];
      out += '-';
      print_operand(operand, precedence(operand) < kUnaryLevel || operand.kind == ExprKind::Neg,
                    at_end, out);
      return;
    }
    case ExprKind::Binary: {
      const Expr& lhs = *expr.operands[0];
      const Expr& rhs = *expr.operands[1];
      int level = precedence(expr);
      print_operand(lhs, precedence(lhs) < level, false, out);
      out += ' ';
      out += binary_op_text(expr.binary_op);
      out += ' ';
      print_operand(rhs, precedence(rhs) <= level, at_end, out);
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Statements

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += separator;
    text += items[i];
  }
  return text;
}

// A statement in its canonical spelling, on one line: `input Q[B=2, 64] : bf16` or
// `output O[b, m] : bf16 = ...`.
std::string statement_text(const Spec& spec, const Statement& statement) {
  const Tensor& tensor = spec.tensors[statement.tensor];
  std::string text;
  if (statement.kind == StatementKind::Input) {
    text = "input " + tensor.name + "[";
    for (size_t d = 0; d < statement.dims.size(); ++d) {
      if (d > 0) text += ", ";
      const DimensionSpec& dim = statement.dims[d];
      text += dim.symbol.empty() ? std::to_string(dim.literal)
                                 : dim.symbol + "=" + std::to_string(tensor.shape[d]);
    }
    return text + "] : " + dtype_name(tensor.dtype);
  }
  if (tensor.role == TensorRole::Output) text = "output ";
  text += tensor.name + "[" + join(tensor.dim_names, ", ") + "] : " + dtype_name(tensor.dtype) +
          " = " + print_expr(*statement.value);
  return text;
}

std::string vars_summary(const Statement& statement) {
  std::string spatial, reduced;
  for (const Statement::Var& var : statement.vars) {
    std::string& list = var.reduced ? reduced : spatial;
    if (!list.empty()) list += ' ';
    list += var.name + ":" + std::to_string(var.extent);
  }
  std::string text = "spatial " + spatial;
  if (!reduced.empty()) text += ", reduced " + reduced;
  return text;
}

uint32_t line_of(const Spec& spec, const SourceRange& range) {
  return spec.file ? spec.file->line_column(range.begin).line : 0;
}

// Tensors a statement reads, each once, in order of first appearance.
void collect_reads(const Expr& expr, std::vector<int>& reads, std::unordered_set<int>& seen) {
  if (expr.kind == ExprKind::Access && expr.tensor >= 0 && seen.insert(expr.tensor).second) {
    reads.push_back(expr.tensor);
  }
  for (const auto& operand : expr.operands) collect_reads(*operand, reads, seen);
}

std::vector<int> reads_of(const Statement& statement) {
  std::vector<int> reads;
  std::unordered_set<int> seen;
  if (statement.value) collect_reads(*statement.value, reads, seen);
  return reads;
}

std::string shape_text(const Tensor& tensor) {
  std::vector<std::string> extents;
  for (int64_t extent : tensor.shape) extents.push_back(std::to_string(extent));
  return "[" + join(extents, ", ") + "]";
}

std::string dot_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string print_expr(const Expr& expr) {
  std::string out;
  print_expr_to(expr, true, out);
  return out;
}

std::string print_index(const IndexExpr& index) {
  std::string out;
  print_index_to(index, out);
  return out;
}

std::string print_condition(const Condition& condition) {
  std::string out;
  print_condition_to(condition, out);
  return out;
}

std::string print_spec(const Spec& spec) {
  std::ostringstream out;
  out << "# spec " << spec.name;
  if (spec.file) out << " (" << spec.file->path() << ")";
  out << "\n";
  if (!spec.sizes.empty()) {
    std::vector<std::string> bindings;
    for (const auto& [name, value] : spec.sizes) {
      bindings.push_back(name + " = " + std::to_string(value));
    }
    out << "let " << join(bindings, ", ") << "\n";
  }
  for (const Statement& statement : spec.program.statements) {
    if (statement.kind == StatementKind::Let) continue;
    out << statement_text(spec, statement) << "\n";
    if (statement.kind == StatementKind::Define) {
      out << "    # " << vars_summary(statement) << "  (line " << line_of(spec, statement.range)
          << ")\n";
    }
  }
  return out.str();
}

std::string spec_to_dot(const Spec& spec) {
  // Statement labels are cut so that long one-statement specs stay drawable; the tooltip keeps
  // the whole text.
  constexpr size_t kLabelLength = 60;
  std::ostringstream out;
  out << "digraph spec {\n";
  out << "  rankdir=TB;\n";
  out << "  node [fontname=\"Helvetica\", fontsize=11];\n";
  for (const Tensor& tensor : spec.tensors) {
    out << "  \"tensor:" << dot_escape(tensor.name) << "\" [shape=box, ";
    switch (tensor.role) {
      case TensorRole::Input: out << "style=filled, fillcolor=\"#dbeafe\", "; break;
      case TensorRole::Output: out << "style=\"filled,bold\", fillcolor=\"#dcfce7\", "; break;
      case TensorRole::Intermediate: out << "style=dashed, "; break;
    }
    out << "label=\"" << dot_escape(tensor.name) << "\\n" << shape_text(tensor) << " "
        << dtype_name(tensor.dtype) << "\\n" << tensor_role_name(tensor.role) << "\"];\n";
  }
  for (int index : spec.definitions) {
    const Statement& statement = spec.statement(index);
    const std::string& name = spec.tensors[statement.tensor].name;
    std::string text = statement_text(spec, statement);
    std::string label = name + " = " + print_expr(*statement.value);
    if (label.size() > kLabelLength) label = label.substr(0, kLabelLength - 3) + "...";
    out << "  \"stmt:" << dot_escape(name) << "\" [shape=ellipse, label=\"" << dot_escape(label)
        << "\\n" << dot_escape(vars_summary(statement)) << "\", tooltip=\"" << dot_escape(text)
        << " (line " << line_of(spec, statement.range) << ")\"];\n";
    for (int read : reads_of(statement)) {
      out << "  \"tensor:" << dot_escape(spec.tensors[read].name) << "\" -> \"stmt:"
          << dot_escape(name) << "\";\n";
    }
    out << "  \"stmt:" << dot_escape(name) << "\" -> \"tensor:" << dot_escape(name) << "\";\n";
  }
  out << "}\n";
  return out.str();
}

nlohmann::ordered_json spec_to_json(const Spec& spec) {
  nlohmann::ordered_json json;
  json["name"] = spec.name;
  json["file"] = spec.file ? spec.file->path() : "";
  // An array rather than an object: inserting into an ordered_json object searches its keys, and
  // a spec may bind very many sizes.
  json["sizes"] = nlohmann::ordered_json::array();
  for (const auto& [name, value] : spec.sizes) {
    json["sizes"].push_back({{"name", name}, {"value", value}});
  }
  json["tensors"] = nlohmann::ordered_json::array();
  for (const Tensor& tensor : spec.tensors) {
    json["tensors"].push_back({{"name", tensor.name},
                               {"role", tensor_role_name(tensor.role)},
                               {"dtype", dtype_name(tensor.dtype)},
                               {"shape", tensor.shape},
                               {"dim_names", tensor.dim_names}});
  }
  json["statements"] = nlohmann::ordered_json::array();
  for (const Statement& statement : spec.program.statements) {
    if (statement.kind == StatementKind::Let) continue;
    LineColumn position =
        spec.file ? spec.file->line_column(statement.range.begin) : LineColumn{};
    nlohmann::ordered_json entry;
    entry["name"] = statement.name;
    entry["kind"] = statement.kind == StatementKind::Input ? "input" : "define";
    entry["line"] = position.line;
    entry["column"] = position.column;
    entry["text"] = statement_text(spec, statement);
    entry["reads"] = nlohmann::ordered_json::array();
    for (int read : reads_of(statement)) entry["reads"].push_back(spec.tensors[read].name);
    entry["vars"] = nlohmann::ordered_json::array();
    for (const Statement::Var& var : statement.vars) {
      entry["vars"].push_back({{"name", var.name},
                               {"extent", var.extent},
                               {"role", var.reduced ? "reduced" : "spatial"}});
    }
    json["statements"].push_back(std::move(entry));
  }
  return json;
}

}  // namespace nautilus::spec
