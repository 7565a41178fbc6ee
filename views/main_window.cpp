#include "views/main_window.h"

#include <QAction>
#include <QCloseEvent>
#include <QColor>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHelpEvent>
#include <QKeySequence>
#include <QLabel>
#include <QList>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSaveFile>
#include <QStatusBar>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextEdit>
#include <QToolTip>

#include <algorithm>

#include "views/assets.h"
#include "views/spec_checker.h"
#include "views/spec_highlighter.h"

namespace nautilus::views {
namespace {

constexpr const char* kUntitled = "untitled.nt";
constexpr const char* kFileFilter = "Nautilus specs (*.nt);;All files (*)";

QPlainTextEdit* make_code_view(QWidget* parent) {
  auto* view = new QPlainTextEdit(parent);
  view->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  view->setLineWrapMode(QPlainTextEdit::NoWrap);
  return view;
}

QString plural(int count, const char* singular) {
  return QStringLiteral("%1 %2%3").arg(count).arg(QLatin1String(singular),
                                                  count == 1 ? QString() : QStringLiteral("s"));
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  editor_ = make_code_view(this);
  editor_->setTabStopDistance(editor_->fontMetrics().horizontalAdvance(QLatin1Char(' ')) * 4);
  editor_->viewport()->installEventFilter(this);
  highlighter_ = new SpecHighlighter(editor_->document());
  setCentralWidget(editor_);

  output_ = make_code_view(this);
  output_->setReadOnly(true);
  output_->setPlaceholderText(tr("The checked spec or its diagnostics appear here."));
  auto* dock = new QDockWidget(tr("Check"), this);
  dock->setObjectName(QStringLiteral("check_dock"));
  dock->setWidget(output_);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::BottomDockWidgetArea, dock);
  resizeDocks({dock}, {260}, Qt::Vertical);

  status_ = new QLabel(this);
  statusBar()->addPermanentWidget(status_);

  checker_ = new SpecChecker(this);
  connect(checker_, &SpecChecker::started, this, [this] { status_->setText(tr("checking…")); });
  connect(checker_, &SpecChecker::checked, this, &MainWindow::show_result);
  connect(editor_, &QPlainTextEdit::textChanged, this, &MainWindow::schedule_check);
  connect(editor_->document(), &QTextDocument::modificationChanged, this,
          &QWidget::setWindowModified);

  build_menus();
  set_document(QString(), QString(), QString::fromLatin1(kUntitled));
  resize(1100, 800);
}

MainWindow::~MainWindow() = default;

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* new_action = file->addAction(tr("&New"), this, &MainWindow::new_document);
  new_action->setShortcut(QKeySequence::New);
  QAction* open = file->addAction(tr("&Open…"), this, &MainWindow::open_interactive);
  open->setShortcut(QKeySequence::Open);
  QAction* save = file->addAction(tr("&Save"), this, &MainWindow::save_interactive);
  save->setShortcut(QKeySequence::Save);
  QAction* save_as = file->addAction(tr("Save &As…"), this, &MainWindow::save_as_interactive);
  save_as->setShortcut(QKeySequence::SaveAs);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* examples = menuBar()->addMenu(tr("&Examples"));
  const QString assets = find_assets_dir();
  if (assets.isEmpty()) {
    examples->addAction(tr("(assets directory not found; set NAUTILUS_ASSETS_DIR)"))
        ->setEnabled(false);
    return;
  }
  const QString specs = QDir(assets).filePath(QStringLiteral("specs"));
  add_examples(examples, specs);
  // Specs with deliberate mistakes show what each diagnostic looks like.
  const QString errors = QDir(specs).filePath(QStringLiteral("errors"));
  if (!list_specs(errors).isEmpty()) {
    examples->addSeparator();
    add_examples(examples->addMenu(tr("&Errors")), errors);
  }
}

void MainWindow::add_examples(QMenu* menu, const QString& directory) {
  const QStringList paths = list_specs(directory);
  if (paths.isEmpty()) {
    menu->addAction(tr("(no .nt files in %1)").arg(directory))->setEnabled(false);
  }
  for (const QString& path : paths) {
    menu->addAction(QFileInfo(path).completeBaseName(), this,
                    [this, path] { open_example_interactive(path); });
  }
}

bool MainWindow::open_file(const QString& path, QString* error) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    if (error != nullptr) *error = tr("cannot open %1: %2").arg(path, file.errorString());
    return false;
  }
  const QString text = QString::fromUtf8(file.readAll());
  const QFileInfo info(path);
  set_document(text, info.absoluteFilePath(), info.fileName());
  return true;
}

bool MainWindow::open_example(const QString& path, QString* error) {
  QString ignored;
  if (!open_file(path, error != nullptr ? error : &ignored)) return false;
  file_path_.clear();  // a copy: Save asks where to put it
  update_title();
  return true;
}

bool MainWindow::save_to(const QString& path, QString* error) {
  // QSaveFile writes to a temporary file and renames it, so a failed save (full disk, crash)
  // never leaves a truncated spec behind.
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(editor_->toPlainText().toUtf8()) < 0 ||
      !file.commit()) {
    if (error != nullptr) *error = tr("cannot save %1: %2").arg(path, file.errorString());
    return false;
  }
  const QFileInfo info(path);
  file_path_ = info.absoluteFilePath();
  document_name_ = info.fileName();
  editor_->document()->setModified(false);
  update_title();
  // Diagnostics name the document, which may have been renamed.
  schedule_check();
  return true;
}

void MainWindow::set_document(const QString& text, const QString& path, const QString& name) {
  file_path_ = path;
  document_name_ = name;
  editor_->setPlainText(text);  // emits textChanged -> schedule_check with the new name
  editor_->document()->setModified(false);
  update_title();
  // A freshly loaded document is checked at once: there is no typing to wait for.
  checker_->check_now();
}

void MainWindow::schedule_check() {
  checker_->set_source(document_name_, editor_->toPlainText());
}

void MainWindow::show_result(const SpecCheckResult& result) {
  output_->setPlainText(result.output);

  // Underline every located diagnostic in the editor (errors red, warnings amber, notes blue).
  QList<QTextEdit::ExtraSelection> selections;
  QTextDocument* document = editor_->document();
  for (const EditorDiagnostic& diagnostic : result.diagnostics) {
    const QTextBlock block = document->findBlockByNumber(diagnostic.line);
    if (diagnostic.line < 0 || !block.isValid()) continue;
    const int block_length = block.length() - 1;  // without the paragraph separator
    const int begin = std::min(diagnostic.column, block_length);
    const int end = std::min(begin + diagnostic.length, block_length);
    QTextCursor cursor(document);
    if (end > begin) {
      cursor.setPosition(block.position() + begin);
      cursor.setPosition(block.position() + end, QTextCursor::KeepAnchor);
    } else {
      // The diagnostic points past the end of the line (e.g. "expected ']'"): mark the line.
      cursor.setPosition(block.position());
      cursor.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
    }
    QColor color(0x1f, 0x6f, 0xc5);  // note
    if (diagnostic.severity == EditorDiagnostic::Severity::Error) {
      color = QColor(0xd0, 0x21, 0x1c);
    } else if (diagnostic.severity == EditorDiagnostic::Severity::Warning) {
      color = QColor(0xc2, 0x7c, 0x0e);
    }
    QTextEdit::ExtraSelection selection;
    selection.cursor = cursor;
    selection.format.setUnderlineStyle(QTextCharFormat::WaveUnderline);
    selection.format.setUnderlineColor(color);
    selections.append(selection);
  }
  editor_->setExtraSelections(selections);
  diagnostics_ = result.diagnostics;

  const QString elapsed = QString::number(result.elapsed_ms, 'f', 1);
  if (result.ok) {
    QString text = tr("spec ok, checked in %1 ms").arg(elapsed);
    if (result.warning_count > 0) {
      text += QStringLiteral(", ") + plural(result.warning_count, "warning");
    }
    status_->setText(text);
  } else {
    status_->setText(plural(result.error_count, "error"));
  }
  emit check_finished(result.ok);
}

void MainWindow::update_title() {
  setWindowTitle(QStringLiteral("%1[*] - Nautilus Studio").arg(document_name_));
  setWindowModified(editor_->document()->isModified());
}

void MainWindow::new_document() {
  if (!maybe_save()) return;
  set_document(QString(), QString(), QString::fromLatin1(kUntitled));
}

void MainWindow::open_interactive() {
  if (!maybe_save()) return;
  const QString start = file_path_.isEmpty() ? find_assets_dir() : QFileInfo(file_path_).path();
  const QString path = QFileDialog::getOpenFileName(this, tr("Open spec"), start, tr(kFileFilter));
  if (path.isEmpty()) return;
  QString error;
  if (!open_file(path, &error)) QMessageBox::warning(this, tr("Open spec"), error);
}

void MainWindow::open_example_interactive(const QString& path) {
  if (!maybe_save()) return;
  QString error;
  if (!open_example(path, &error)) QMessageBox::warning(this, tr("Open example"), error);
}

bool MainWindow::save_interactive() {
  if (file_path_.isEmpty()) return save_as_interactive();
  QString error;
  if (!save_to(file_path_, &error)) {
    QMessageBox::warning(this, tr("Save spec"), error);
    return false;
  }
  return true;
}

bool MainWindow::save_as_interactive() {
  const QString start =
      file_path_.isEmpty() ? QDir::current().filePath(document_name_) : file_path_;
  const QString path = QFileDialog::getSaveFileName(this, tr("Save spec"), start, tr(kFileFilter));
  if (path.isEmpty()) return false;
  QString error;
  if (!save_to(path, &error)) {
    QMessageBox::warning(this, tr("Save spec"), error);
    return false;
  }
  return true;
}

bool MainWindow::maybe_save() {
  if (!editor_->document()->isModified()) return true;
  const auto answer = QMessageBox::warning(
      this, tr("Unsaved changes"), tr("%1 has unsaved changes. Save them?").arg(document_name_),
      QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (answer == QMessageBox::Save) return save_interactive();
  return answer == QMessageBox::Discard;
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  if (watched != editor_->viewport() || event->type() != QEvent::ToolTip) {
    return QMainWindow::eventFilter(watched, event);
  }
  const auto* help = static_cast<QHelpEvent*>(event);
  const QTextCursor cursor = editor_->cursorForPosition(help->pos());
  const int line = cursor.blockNumber();
  const int column = cursor.positionInBlock();
  QStringList messages;
  for (const EditorDiagnostic& diagnostic : diagnostics_) {
    // The cursor position is between characters; accept both sides of the underlined range.
    if (diagnostic.line == line && column >= diagnostic.column &&
        column <= diagnostic.column + diagnostic.length) {
      messages << diagnostic.message;
    }
  }
  if (messages.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(help->globalPos(), messages.join(QLatin1Char('\n')), editor_);
  }
  return true;
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (maybe_save()) {
    event->accept();
  } else {
    event->ignore();
  }
}

}  // namespace nautilus::views
