// The Nautilus Studio main window.
//
// Today it holds the spec editor (with syntax highlighting and inline diagnostics) and a dock
// with the result of checking the spec: the checked spec's canonical text, or the diagnostics.
// Checking runs on SpecChecker's worker thread after each pause in typing; the window only shows
// results for the text currently in the editor.
//
// File > Open/Save work on .nt files; Examples opens a copy of a shipped spec (saving it asks for
// a new path, so the shipped examples are never overwritten by accident).
#pragma once

#include <QMainWindow>
#include <QString>

#include <vector>

#include "views/spec_checker.h"

class QCloseEvent;
class QEvent;
class QLabel;
class QMenu;
class QPlainTextEdit;

namespace nautilus::views {

class SpecHighlighter;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Loads `path` into the editor and checks it at once. On failure leaves the editor unchanged
  // and returns false with a one-line `error`.
  bool open_file(const QString& path, QString* error = nullptr);
  // Loads a shipped example as a new, unsaved document named after it.
  bool open_example(const QString& path, QString* error = nullptr);
  // Writes the editor's text to `path` atomically and makes it the current file.
  bool save_to(const QString& path, QString* error = nullptr);

  // The file being edited; empty for a new document or an example copy.
  const QString& file_path() const { return file_path_; }
  // The name diagnostics use for the document ("attention.nt", "untitled.nt").
  const QString& document_name() const { return document_name_; }

  QPlainTextEdit* editor() const { return editor_; }
  QPlainTextEdit* output() const { return output_; }
  SpecChecker* checker() const { return checker_; }
  SpecHighlighter* highlighter() const { return highlighter_; }

 signals:
  // The output pane now shows the result of checking the editor's current text.
  void check_finished(bool ok);

 protected:
  void closeEvent(QCloseEvent* event) override;
  // Shows the message of the diagnostic under the mouse as the editor's tooltip.
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void build_menus();
  void add_examples(QMenu* menu, const QString& directory);
  void set_document(const QString& text, const QString& path, const QString& name);
  void schedule_check();
  void show_result(const SpecCheckResult& result);
  void update_title();

  // File menu actions; the interactive variants ask before discarding unsaved edits.
  void new_document();
  void open_interactive();
  void open_example_interactive(const QString& path);
  bool save_interactive();
  bool save_as_interactive();
  bool maybe_save();

  QPlainTextEdit* editor_ = nullptr;
  QPlainTextEdit* output_ = nullptr;
  QLabel* status_ = nullptr;
  SpecHighlighter* highlighter_ = nullptr;
  SpecChecker* checker_ = nullptr;
  QString file_path_;
  QString document_name_;
  // The diagnostics underlined in the editor (those of the latest delivered check).
  std::vector<EditorDiagnostic> diagnostics_;
};

}  // namespace nautilus::views
