// Checks the spec being edited, off the UI thread.
//
// Every edit calls `set_source`; the check starts once the text has been still for the debounce
// delay (300 ms by default), so typing never queues a check per keystroke. Checks run on one
// worker thread owned by the checker. Every edit and every check request advances a generation
// counter, and each check carries the generation it was made for; a result for an older
// generation is dropped (also when the edit that made it stale is still waiting for its debounce),
// so the window only ever shows the result for the text that is current. While the worker is
// busy, only the newest pending request is kept.
//
// `check_spec_text` is the work itself (parse + sema + print, or the rendered diagnostics) and is
// usable synchronously.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace nautilus::views {

// One diagnostic placed in the editor's coordinates.
struct EditorDiagnostic {
  enum class Severity { Error, Warning, Note };
  Severity severity = Severity::Error;
  int line = 0;    // 0-based block number; -1 when the diagnostic has no location
  int column = 0;  // 0-based, in UTF-16 code units of the line (QString indexing)
  int length = 0;  // in UTF-16 code units, at least 1 when located
  QString message;
};

struct SpecCheckResult {
  uint64_t generation = 0;
  bool ok = false;       // no errors: `output` is the checked spec's text
  QString output;        // the checked spec (printer.h), or every diagnostic rendered
  int error_count = 0;
  int warning_count = 0;
  std::vector<EditorDiagnostic> diagnostics;
  double elapsed_ms = 0;  // time spent checking, on the worker
};

// Parses and checks `text` (as if read from `path`) and renders the outcome. Never throws: a
// compiler bug surfaces as a result with an "internal error" message instead of taking down the
// window.
SpecCheckResult check_spec_text(const std::string& path, const std::string& text);

class SpecChecker : public QObject {
  Q_OBJECT

 public:
  static constexpr std::chrono::milliseconds kDefaultDebounce{300};

  explicit SpecChecker(QObject* parent = nullptr,
                       std::chrono::milliseconds debounce = kDefaultDebounce);
  // Stops the worker; waits for a check in progress to finish (checks are bounded by the spec's
  // size, as the parser and sema never loop on bad input).
  ~SpecChecker() override;

  SpecChecker(const SpecChecker&) = delete;
  SpecChecker& operator=(const SpecChecker&) = delete;

  // Records the current text and (re)starts the debounce timer. Results of earlier text that are
  // still in flight will be dropped.
  void set_source(const QString& path, const QString& text);
  // Checks the current text now, without waiting for the debounce delay.
  void check_now();

  // The current generation (0 before the first edit or request).
  uint64_t generation() const { return generation_; }
  // True from an edit or request until the result for the current text is delivered.
  bool pending() const { return delivered_generation_ < generation_; }

 Q_SIGNALS:
  // A check of `generation` was handed to the worker.
  void started(quint64 generation);
  // The result for the newest request. Stale results are never emitted.
  void checked(const nautilus::views::SpecCheckResult& result);

 private:
  struct Request {
    uint64_t generation = 0;
    std::string path;
    std::string text;
  };

  void submit();                           // UI thread
  void deliver(SpecCheckResult result);    // UI thread
  void worker_loop();                      // worker thread

  QTimer debounce_;
  QString path_;
  QString text_;
  uint64_t generation_ = 0;            // UI thread only
  uint64_t delivered_generation_ = 0;  // UI thread only

  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Request> next_;  // guarded by mutex_
  bool stopping_ = false;        // guarded by mutex_
  std::thread worker_;           // started last, after every member it uses exists
};

}  // namespace nautilus::views
