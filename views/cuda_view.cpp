#include "views/cuda_view.h"

#include <QColor>
#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QList>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextEdit>
#include <QVBoxLayout>

#include <algorithm>

#include "views/code_highlighter.h"
#include "views/snapshot_text.h"
#include "views/table_cell.h"
#include "views/task_runner.h"

namespace nautilus::views {
namespace {

// The whole width of `line` marked in `colour` (provenance highlights in the source).
QTextEdit::ExtraSelection line_highlight(const QTextBlock& line, const QColor& colour) {
  QTextEdit::ExtraSelection selection;
  selection.cursor = QTextCursor(line);
  selection.format.setBackground(colour);
  selection.format.setProperty(QTextFormat::FullWidthSelection, true);
  return selection;
}

}  // namespace

CudaView::CudaView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* bar = new QHBoxLayout();
  bar->addWidget(new QLabel(tr("ptxas for"), this));
  arch_ = new QComboBox(this);
  arch_->setObjectName(QStringLiteral("cuda_arch"));
  for (codegen::GpuArch arch : codegen::all_archs()) {
    arch_->addItem(QString::fromLatin1(codegen::arch_name(arch)), static_cast<int>(arch));
  }
  bar->addWidget(arch_);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("ptxas_status"));
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  bar->addWidget(status_, 1);
  layout->addLayout(bar);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  source_ = new QPlainTextEdit(splitter);
  source_->setObjectName(QStringLiteral("cuda_source"));
  source_->setReadOnly(true);
  source_->setLineWrapMode(QPlainTextEdit::NoWrap);
  source_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  source_->setPlaceholderText(tr("The generated CUDA appears here once the spec compiles."));
  highlighter_ = new CodeHighlighter(source_->document(), CodeLanguage::Cuda);
  report_ = new QTableWidget(0, 7, splitter);
  report_->setObjectName(QStringLiteral("ptxas_report"));
  report_->setHorizontalHeaderLabels({tr("Kernel"), tr("Arch"), tr("Registers"), tr("Spill stores"),
                                      tr("Spill loads"), tr("Static smem"), tr("Stack")});
  report_->verticalHeader()->hide();
  report_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  splitter->addWidget(source_);
  splitter->addWidget(report_);
  splitter->setStretchFactor(0, 4);
  splitter->setStretchFactor(1, 1);
  layout->addWidget(splitter);

  worker_ = new TaskRunner(this);
  connect(arch_, &QComboBox::currentIndexChanged, this, [this] { compile(); });
  connect(source_, &QPlainTextEdit::cursorPositionChanged, this, &CudaView::on_cursor_moved);
}

void CudaView::set_cuda(std::shared_ptr<const codegen::EmittedModule> cuda, const QString& why_not) {
  cuda_ = std::move(cuda);
  last_reported_line_ = -1;
  if (!cuda_) {
    source_->setPlainText(QString());
    source_->setPlaceholderText(why_not.isEmpty() ? tr("No CUDA for this spec.") : why_not);
    report_->setRowCount(0);
    status_->setText(why_not);
    worker_->cancel();
    return;
  }
  // Keep the reader's place when only the schedule or sizes changed.
  const bool first = source_->document()->isEmpty();
  const int scroll = source_->verticalScrollBar()->value();
  source_->setPlainText(QString::fromStdString(cuda_->source));
  if (first) {
    // A fresh source opens at its first kernel, past the shared helper functions.
    const QTextCursor kernel = source_->document()->find(QStringLiteral("__global__"));
    if (!kernel.isNull()) {
      source_->verticalScrollBar()->setValue(std::max(0, kernel.blockNumber() - 3));
    }
  } else {
    source_->verticalScrollBar()->setValue(scroll);
  }
  compile();
}

void CudaView::refresh_colors() { highlighter_->refresh_colors(); }

bool CudaView::compiling() const { return worker_->busy(); }

void CudaView::compile() {
  if (!cuda_) return;
  const auto arch = static_cast<codegen::GpuArch>(arch_->currentData().toInt());
  status_->setText(tr("compiling with NVRTC for %1…").arg(QString::fromLatin1(codegen::arch_name(arch))));
  std::shared_ptr<const codegen::EmittedModule> cuda = cuda_;
  worker_->post([this, cuda, arch]() -> TaskRunner::Continuation {
    const auto& nvrtc = codegen::Nvrtc::shared();
    if (!nvrtc.ok()) {
      const QString message = QString::fromStdString(nvrtc.error().message);
      return [this, message] {
        ptxas_ = {};
        report_->setRowCount(0);
        status_->setText(message);
        Q_EMIT compiled(false);
      };
    }
    codegen::NvrtcOptions options;
    options.arch = arch;
    codegen::Result<codegen::CompiledProgram> program =
        (*nvrtc)->compile(cuda->source, "kernel.cu", options);
    if (!program.ok()) {
      const QString message = QString::fromStdString(program.error().message);
      return [this, message] {
        ptxas_ = {};
        report_->setRowCount(0);
        status_->setText(tr("NVRTC rejected the source (a compiler bug): %1").arg(message));
        Q_EMIT compiled(false);
      };
    }
    codegen::PtxasReport report = program->report;
    const double ms = program->milliseconds;
    const QString version = QString::fromStdString((*nvrtc)->version());
    return [this, report, ms, version] {
      ptxas_ = report;
      report_->setRowCount(static_cast<int>(report.kernels.size()));
      for (int row = 0; row < static_cast<int>(report.kernels.size()); ++row) {
        const codegen::KernelResources& kernel = report.kernels[static_cast<size_t>(row)];
        report_->setItem(row, 0, table_cell(QString::fromStdString(kernel.name), false));
        report_->setItem(row, 1, table_cell(QString::fromStdString(kernel.arch), false));
        report_->setItem(row, 2, table_cell(QString::number(kernel.registers)));
        report_->setItem(row, 3, table_cell(QString::number(kernel.spill_store_bytes)));
        report_->setItem(row, 4, table_cell(QString::number(kernel.spill_load_bytes)));
        report_->setItem(row, 5, table_cell(QString::number(kernel.shared_memory_bytes)));
        report_->setItem(row, 6, table_cell(QString::number(kernel.stack_frame_bytes)));
        if (kernel.spills()) {
          for (int column = 3; column <= 4; ++column) {
            report_->item(row, column)->setForeground(QColor(0xd0, 0x21, 0x1c));
          }
        }
      }
      status_->setText(tr("NVRTC %1: %2 kernel(s) in %3 ms%4")
                           .arg(version)
                           .arg(report.kernels.size())
                           .arg(ms, 0, 'f', 0)
                           .arg(report.any_spills() ? tr(", registers SPILL") : tr(", no spills")));
      Q_EMIT compiled(true);
    };
  });
}

int CudaView::show_ma_op(const QString& op_text) {
  QList<QTextEdit::ExtraSelection> selections;
  const QString wanted = QStringLiteral("// ") + op_text.trimmed();
  const QColor mark = palette().color(QPalette::Base).lightness() < 128 ? QColor(0x2f, 0x3f, 0x5a)
                                                                        : QColor(0xdd, 0xea, 0xfb);
  int first = -1;
  for (QTextBlock block = source_->document()->begin(); block.isValid(); block = block.next()) {
    if (block.text().trimmed() != wanted) continue;
    // The op's comment and its code: up to the next comment, blank line or closing brace at a
    // shallower indentation.
    const int indent = static_cast<int>(block.text().indexOf(QLatin1Char('/')));
    for (QTextBlock line = block; line.isValid(); line = line.next()) {
      const QString text = line.text();
      const QString trimmed = text.trimmed();
      if (line != block && (trimmed.isEmpty() || trimmed.startsWith(QStringLiteral("//")))) break;
      const int line_indent = static_cast<int>(text.size() - text.trimmed().size());
      if (line != block && trimmed.startsWith(QLatin1Char('}')) && line_indent < indent) break;
      selections.append(line_highlight(line, mark));
    }
    if (first < 0) first = block.blockNumber();
  }
  if (first < 0) return 0;
  source_->setExtraSelections(selections);
  const QSignalBlocker blocker(source_);
  source_->setTextCursor(QTextCursor(source_->document()->findBlockByNumber(first)));
  source_->centerCursor();
  return static_cast<int>(selections.size());
}

int CudaView::spec_line_at(int block) const {
  QTextBlock text = source_->document()->findBlockByNumber(block);
  while (text.isValid()) {
    const int line = cuda_spec_line(text.text().toStdString());
    if (line > 0) return line;
    // A kernel's closing brace or a new function ends the section.
    if (text.text().startsWith(QLatin1Char('}')) && text.blockNumber() != block) return 0;
    text = text.previous();
  }
  return 0;
}

int CudaView::show_spec_line(int line) {
  QList<QTextEdit::ExtraSelection> selections;
  int first = -1;
  if (line > 0) {
    const QColor mark = palette().color(QPalette::Base).lightness() < 128 ? QColor(0x3b, 0x4a, 0x2f)
                                                                          : QColor(0xe6, 0xf4, 0xd8);
    QTextBlock block = source_->document()->begin();
    int section_line = 0;
    while (block.isValid()) {
      const std::string text = block.text().toStdString();
      const int named = cuda_spec_line(text);
      if (named > 0) section_line = named;
      if (block.text().startsWith(QLatin1Char('}'))) section_line = 0;
      if (section_line == line) {
        selections.append(line_highlight(block, mark));
        if (first < 0) first = block.blockNumber();
      }
      block = block.next();
    }
  }
  source_->setExtraSelections(selections);
  if (first >= 0) {
    QTextCursor cursor(source_->document()->findBlockByNumber(first));
    const QSignalBlocker blocker(source_);
    source_->setTextCursor(cursor);
    source_->centerCursor();
  }
  int sections = 0;
  for (QTextBlock block = source_->document()->begin(); block.isValid(); block = block.next()) {
    if (line > 0 && cuda_spec_line(block.text().toStdString()) == line) ++sections;
  }
  return sections;
}

void CudaView::on_cursor_moved() {
  const int block = source_->textCursor().blockNumber();
  const int line = spec_line_at(block);
  if (line > 0 && line != last_reported_line_) {
    last_reported_line_ = line;
    Q_EMIT spec_line_selected(line);
  }
  // The op of the line: the nearest `// %value = ...` comment at or above it.
  QTextBlock text = source_->document()->findBlockByNumber(block);
  for (int steps = 0; text.isValid() && steps < 40; ++steps, text = text.previous()) {
    const std::string value = cuda_ma_value(text.text().toStdString());
    if (!value.empty()) {
      Q_EMIT ma_value_selected(QString::fromStdString(value));
      return;
    }
  }
}

}  // namespace nautilus::views
