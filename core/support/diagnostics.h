// User-facing diagnostics (bad input), as opposed to internal errors (compiler bugs).
//
// Every diagnostic points into a SourceFile and renders the way compilers users know do it:
//
//   attention.nt:9:28: error: unknown tensor 'Kx'; expected one of Q, K, V, S
//       9 | S[b, h, m, n] = sum(d) Q[b, h, m, d] * Kx[b, h, n, d]
//         |                                        ^~
//
// The engine collects every diagnostic of a run (several errors in one file are all reported)
// and stops collecting after `max_errors` errors so that binary garbage cannot flood the output.
#pragma once

#include <string>
#include <vector>

#include "core/support/source.h"

namespace nautilus {

enum class Severity { Error, Warning, Note };
const char* severity_name(Severity severity);

struct DiagnosticNote {
  SourceRange range;
  std::string message;
};

struct Diagnostic {
  Severity severity = Severity::Error;
  SourceRange range;
  std::string message;
  std::vector<DiagnosticNote> notes;
};

class DiagnosticEngine {
 public:
  explicit DiagnosticEngine(SourceFilePtr file, int max_errors = 50);

  // Adds a diagnostic; returns a reference so callers can attach notes.
  Diagnostic& report(Severity severity, SourceRange range, std::string message);
  Diagnostic& error(SourceRange range, std::string message) {
    return report(Severity::Error, range, std::move(message));
  }
  Diagnostic& warning(SourceRange range, std::string message) {
    return report(Severity::Warning, range, std::move(message));
  }

  bool has_errors() const { return error_count_ > 0; }
  int error_count() const { return error_count_; }
  // True once `max_errors` errors were reported; later errors are counted but not stored.
  bool limit_reached() const { return error_count_ >= max_errors_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  const SourceFilePtr& file() const { return file_; }

  // Renders every diagnostic (with source excerpts and carets) followed by a summary line.
  std::string render_all() const;
  std::string render(const Diagnostic& diagnostic) const;
  // "path:line:col: severity: message" without the excerpt (used by tests and tooltips).
  std::string headline(const Diagnostic& diagnostic) const;

 private:
  std::string render_excerpt(const SourceRange& range) const;

  SourceFilePtr file_;
  int max_errors_;
  int error_count_ = 0;
  Diagnostic overflow_sink_;
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace nautilus
