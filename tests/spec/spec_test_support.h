// Helpers shared by the spec front-end tests: load a spec from a string or from the source tree,
// read its diagnostics as "LINE:COL: severity: message" lines, and show a tree's shape.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/spec/printer.h"
#include "core/spec/sema.h"
#include "core/support/diagnostics.h"
#include "tests/common/golden.h"

namespace nautilus::spec::testing {

struct Loaded {
  SourceFilePtr file;
  std::unique_ptr<DiagnosticEngine> diagnostics;
  SpecPtr spec;

  // Every diagnostic's headline without the "path:" prefix, e.g. "3:7: error: unknown tensor".
  std::vector<std::string> headlines() const {
    std::vector<std::string> lines;
    const std::string prefix = file->path() + ":";
    for (const Diagnostic& d : diagnostics->diagnostics()) {
      std::string line = diagnostics->headline(d);
      if (line.rfind(prefix, 0) == 0) line = line.substr(prefix.size());
      if (!line.empty() && line[0] == ' ') line = line.substr(1);
      lines.push_back(line);
    }
    return lines;
  }
  std::string first_error() const {
    for (const std::string& line : headlines()) {
      if (line.find("error: ") != std::string::npos) return line;
    }
    return "";
  }
};

inline Loaded load_text(const std::string& text, const std::vector<SizeOverride>& overrides = {},
                        const std::string& path = "test.nt") {
  Loaded loaded;
  loaded.file = std::make_shared<SourceFile>(path, text);
  loaded.diagnostics = std::make_unique<DiagnosticEngine>(loaded.file);
  loaded.spec = load_spec(loaded.file, overrides, *loaded.diagnostics);
  return loaded;
}

// Loads a file of the source tree under its relative path, so that printed paths are stable.
inline Loaded load_source_file(const std::string& relative,
                               const std::vector<SizeOverride>& overrides = {}) {
  return load_text(nautilus::testing::read_text(nautilus::testing::source_path(relative)),
                   overrides, relative);
}

// The tree as an s-expression, so tests can see its shape: "(+ a (sum[n] (* x y)))".
inline std::string sexpr(const IndexExpr& index) {
  switch (index.kind) {
    case IndexKind::Literal: return std::to_string(index.literal);
    case IndexKind::Name: return index.name;
    case IndexKind::Neg: return "(neg " + sexpr(*index.lhs) + ")";
    default: break;
  }
  const char* op = index.kind == IndexKind::Add        ? "+"
                   : index.kind == IndexKind::Sub      ? "-"
                   : index.kind == IndexKind::Mul      ? "*"
                   : index.kind == IndexKind::FloorDiv ? "/"
                                                       : "%";
  return std::string("(") + op + " " + sexpr(*index.lhs) + " " + sexpr(*index.rhs) + ")";
}

inline std::string sexpr(const Condition& condition) {
  if (condition.kind == Condition::Kind::Compare) {
    return std::string("(") + compare_op_text(condition.compare) + " " +
           sexpr(*condition.lhs_index) + " " + sexpr(*condition.rhs_index) + ")";
  }
  return std::string("(") + (condition.kind == Condition::Kind::And ? "and " : "or ") +
         sexpr(*condition.lhs) + " " + sexpr(*condition.rhs) + ")";
}

inline std::string sexpr(const Expr& expr) {
  std::string out;
  switch (expr.kind) {
    case ExprKind::Number: return print_expr(expr);
    case ExprKind::Name: return expr.name;
    case ExprKind::Access:
      out = expr.name + "[";
      for (size_t i = 0; i < expr.indices.size(); ++i) {
        out += (i ? " " : "") + sexpr(*expr.indices[i]);
      }
      return out + "]";
    case ExprKind::Call:
      out = "(" + expr.name;
      for (const auto& operand : expr.operands) out += " " + sexpr(*operand);
      return out + ")";
    case ExprKind::Select:
      return "(select " + sexpr(*expr.condition) + " " + sexpr(*expr.operands[0]) + " " +
             sexpr(*expr.operands[1]) + ")";
    case ExprKind::Reduce:
      out = std::string("(") + reduce_op_name(expr.reduce_op) + "[";
      for (size_t i = 0; i < expr.reduce_vars.size(); ++i) {
        out += (i ? " " : "") + expr.reduce_vars[i].name;
      }
      return out + "] " + sexpr(*expr.operands[0]) + ")";
    case ExprKind::Neg: return "(neg " + sexpr(*expr.operands[0]) + ")";
    case ExprKind::Binary:
      return std::string("(") + binary_op_text(expr.binary_op) + " " + sexpr(*expr.operands[0]) +
             " " + sexpr(*expr.operands[1]) + ")";
  }
  return "?";
}

}  // namespace nautilus::spec::testing
