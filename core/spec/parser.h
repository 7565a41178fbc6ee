// Parser for the `.nt` spec language (grammar in docs/spec-language.md).
//
// The parser never stops at the first error: a statement that fails to parse is reported and
// skipped up to the next line, so every syntax error of a file is reported in one run. It never
// crashes or hangs on any byte sequence: nesting depth is bounded (kMaxNesting) and each loop
// consumes at least one token.
#pragma once

#include "core/spec/ast.h"
#include "core/support/diagnostics.h"

namespace nautilus::spec {

// Maximum nesting of parentheses, brackets and reductions in one expression.
inline constexpr int kMaxNesting = 200;

// Maximum depth of an expression tree, where every operator is one level: `a + b + c` has depth
// 3 although nothing is nested. Every later stage recurses over expression trees; this bound
// keeps their stacks small however long a line is.
inline constexpr int kMaxExpressionDepth = 1000;

// Parses a whole file. Statements with syntax errors are omitted from the result.
Program parse_program(SourceFilePtr file, DiagnosticEngine& diagnostics);

}  // namespace nautilus::spec
