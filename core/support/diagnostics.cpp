#include "core/support/diagnostics.h"

#include <algorithm>
#include <sstream>

namespace nautilus {

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

DiagnosticEngine::DiagnosticEngine(SourceFilePtr file, int max_errors)
    : file_(std::move(file)), max_errors_(std::max(1, max_errors)) {}

Diagnostic& DiagnosticEngine::report(Severity severity, SourceRange range, std::string message) {
  if (severity == Severity::Error) {
    if (error_count_ >= max_errors_) {
      ++error_count_;
      overflow_sink_ = Diagnostic{};
      return overflow_sink_;
    }
    ++error_count_;
  }
  diagnostics_.push_back(Diagnostic{severity, range, std::move(message), {}});
  return diagnostics_.back();
}

std::string DiagnosticEngine::headline(const Diagnostic& diagnostic) const {
  std::ostringstream out;
  out << file_->path();
  if (diagnostic.range.valid) {
    LineColumn lc = file_->line_column(diagnostic.range.begin);
    out << ':' << lc.line << ':' << lc.column;
  }
  out << ": " << severity_name(diagnostic.severity) << ": " << diagnostic.message;
  return out.str();
}

namespace {

// Bytes that would misalign the caret or corrupt a terminal are shown as '?'.
char printable(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (c == '\t') return ' ';
  if (u < 0x20 || u == 0x7f || u >= 0x80) return '?';
  return c;
}

}  // namespace

std::string DiagnosticEngine::render_excerpt(const SourceRange& range) const {
  if (!range.valid) return {};
  LineColumn lc = file_->line_column(range.begin);
  std::string_view line = file_->line_text(lc.line);
  // Long lines (a 10 MB line is valid input) are cut to a window around the caret.
  constexpr size_t kWindow = 100;
  size_t caret = lc.column - 1;
  size_t start = caret > kWindow / 2 ? caret - kWindow / 2 : 0;
  size_t stop = std::min(line.size(), start + kWindow);
  std::string shown;
  if (start > 0) shown += "...";
  for (size_t i = start; i < stop; ++i) shown += printable(line[i]);
  if (stop < line.size()) shown += "...";

  size_t caret_column = caret - start + (start > 0 ? 3 : 0);
  size_t same_line_end = range.end;
  LineColumn end_lc = file_->line_column(range.end > range.begin ? range.end - 1 : range.begin);
  size_t width = 1;
  if (end_lc.line == lc.line && same_line_end > range.begin) {
    width = std::min<size_t>(same_line_end - range.begin, stop > caret ? stop - caret : 1);
    width = std::max<size_t>(width, 1);
  }
  std::string gutter = std::to_string(lc.line);
  std::ostringstream out;
  out << ' ' << gutter << " | " << shown << '\n';
  out << ' ' << std::string(gutter.size(), ' ') << " | " << std::string(caret_column, ' ') << '^'
      << std::string(width - 1, '~') << '\n';
  return out.str();
}

std::string DiagnosticEngine::render(const Diagnostic& diagnostic) const {
  std::string out = headline(diagnostic) + '\n' + render_excerpt(diagnostic.range);
  for (const DiagnosticNote& note : diagnostic.notes) {
    Diagnostic as_diag{Severity::Note, note.range, note.message, {}};
    out += headline(as_diag) + '\n' + render_excerpt(note.range);
  }
  return out;
}

std::string DiagnosticEngine::render_all() const {
  std::string out;
  int warnings = 0;
  for (const Diagnostic& d : diagnostics_) {
    out += render(d);
    if (d.severity == Severity::Warning) ++warnings;
  }
  if (error_count_ > max_errors_) {
    out += file_->path() + ": note: " + std::to_string(error_count_ - max_errors_) +
           " more errors not shown (stopped after " + std::to_string(max_errors_) + ")\n";
  }
  if (error_count_ > 0 || warnings > 0) {
    std::ostringstream summary;
    summary << error_count_ << (error_count_ == 1 ? " error" : " errors");
    if (warnings > 0) summary << ", " << warnings << (warnings == 1 ? " warning" : " warnings");
    summary << " generated.\n";
    out += summary.str();
  }
  return out;
}

}  // namespace nautilus
