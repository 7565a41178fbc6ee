#include "views/spec_checker.h"

#include <QMetaObject>

#include <algorithm>
#include <exception>
#include <memory>
#include <string_view>
#include <utility>

#include "core/spec/printer.h"
#include "core/spec/sema.h"
#include "core/support/diagnostics.h"
#include "core/support/source.h"

namespace nautilus::views {
namespace {

// Number of UTF-16 code units in a UTF-8 byte string (QString indexing of the same text).
int utf16_length(std::string_view utf8) {
  const auto size = static_cast<qsizetype>(utf8.size());
  return static_cast<int>(QString::fromUtf8(utf8.data(), size).size());
}

EditorDiagnostic::Severity editor_severity(Severity severity) {
  switch (severity) {
    case Severity::Error: return EditorDiagnostic::Severity::Error;
    case Severity::Warning: return EditorDiagnostic::Severity::Warning;
    case Severity::Note: return EditorDiagnostic::Severity::Note;
  }
  return EditorDiagnostic::Severity::Error;
}

// Converts a byte range of `file` into a line and UTF-16 columns. Diagnostics count columns in
// bytes, the editor in UTF-16 code units; they differ on lines with non-ASCII text (e.g. "Kᵀ"
// in a comment before the error).
EditorDiagnostic place(const SourceFile& file, const Diagnostic& diagnostic) {
  EditorDiagnostic placed;
  placed.severity = editor_severity(diagnostic.severity);
  placed.message = QString::fromStdString(diagnostic.message);
  if (!diagnostic.range.valid || file.line_count() == 0) {
    placed.line = -1;
    return placed;
  }
  const LineColumn begin = file.line_column(diagnostic.range.begin);
  const std::string_view line = file.line_text(begin.line);
  const size_t begin_byte = std::min<size_t>(begin.column - 1, line.size());
  // A range that spans lines is underlined to the end of its first line.
  size_t end_byte = line.size();
  if (diagnostic.range.end > diagnostic.range.begin) {
    const LineColumn end = file.line_column(diagnostic.range.end);
    if (end.line == begin.line) end_byte = std::min<size_t>(end.column - 1, line.size());
  }
  placed.line = static_cast<int>(begin.line) - 1;
  placed.column = utf16_length(line.substr(0, begin_byte));
  const size_t length_bytes = end_byte > begin_byte ? end_byte - begin_byte : 0;
  placed.length = std::max(1, utf16_length(line.substr(begin_byte, length_bytes)));
  return placed;
}

}  // namespace

SpecCheckResult check_spec_text(const std::string& path, const std::string& text) {
  const auto start = std::chrono::steady_clock::now();
  SpecCheckResult result;
  try {
    auto file = std::make_shared<const SourceFile>(path, text);
    DiagnosticEngine diagnostics(file);
    spec::SpecPtr checked = spec::load_spec(file, {}, diagnostics);
    result.ok = checked != nullptr && !diagnostics.has_errors();
    result.error_count = diagnostics.error_count();
    for (const Diagnostic& diagnostic : diagnostics.diagnostics()) {
      if (diagnostic.severity == Severity::Warning) ++result.warning_count;
      result.diagnostics.push_back(place(*file, diagnostic));
    }
    if (result.ok) {
      std::string output = spec::print_spec(*checked);
      if (!diagnostics.diagnostics().empty()) output += "\n" + diagnostics.render_all();
      result.output = QString::fromStdString(output);
    } else {
      result.output = QString::fromStdString(diagnostics.render_all());
    }
  } catch (const std::exception& error) {
    // Bad input must produce diagnostics, never exceptions; this is a compiler bug. Show it
    // rather than lose the editor's unsaved text to a crash.
    result = SpecCheckResult{};
    result.error_count = 1;
    result.output = QStringLiteral("internal error while checking the spec: %1")
                        .arg(QString::fromUtf8(error.what()));
  }
  result.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

SpecChecker::SpecChecker(QObject* parent, std::chrono::milliseconds debounce) : QObject(parent) {
  debounce_.setSingleShot(true);
  debounce_.setInterval(debounce);
  connect(&debounce_, &QTimer::timeout, this, &SpecChecker::submit);
  worker_ = std::thread(&SpecChecker::worker_loop, this);
}

SpecChecker::~SpecChecker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  worker_.join();
  // Results the worker posted but the event loop has not delivered are discarded with this
  // object (Qt removes posted events of a destroyed receiver).
}

void SpecChecker::set_source(const QString& path, const QString& text) {
  path_ = path;
  text_ = text;
  ++generation_;  // whatever is being checked now describes older text
  debounce_.start();
}

void SpecChecker::check_now() { submit(); }

void SpecChecker::submit() {
  debounce_.stop();
  ++generation_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Replaces a request the worker has not picked up yet: it is already stale.
    next_ = Request{generation_, path_.toStdString(), text_.toStdString()};
  }
  wake_.notify_one();
  Q_EMIT started(generation_);
}

void SpecChecker::deliver(SpecCheckResult result) {
  if (result.generation != generation_) {
    return;  // the text changed while this was being checked
  }
  delivered_generation_ = result.generation;
  Q_EMIT checked(result);
}

void SpecChecker::worker_loop() {
  for (;;) {
    Request request;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || next_.has_value(); });
      if (stopping_) return;
      request = std::move(*next_);
      next_.reset();
    }
    SpecCheckResult result = check_spec_text(request.path, request.text);
    result.generation = request.generation;
    // Runs deliver() on the checker's (UI) thread; `this` outlives the call because the
    // destructor joins this thread first and Qt drops events posted to a destroyed object.
    QMetaObject::invokeMethod(
        this, [this, result = std::move(result)]() mutable { deliver(std::move(result)); },
        Qt::QueuedConnection);
  }
}

}  // namespace nautilus::views
