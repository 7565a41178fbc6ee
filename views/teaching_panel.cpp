#include "views/teaching_panel.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>

#include "views/code_highlighter.h"
#include "views/pass_log_model.h"
#include "views/snapshot_text.h"
#include "views/stage_view.h"

namespace nautilus::views {

TeachingPanel::TeachingPanel(StageView* stage_view, QWidget* parent)
    : QWidget(parent), stage_view_(stage_view) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QHBoxLayout();
  previous_ = new QPushButton(tr("◀ Previous pass"), this);
  previous_->setObjectName(QStringLiteral("teach_previous"));
  next_ = new QPushButton(tr("Next pass ▶"), this);
  next_->setObjectName(QStringLiteral("teach_next"));
  title_ = new QLabel(this);
  title_->setObjectName(QStringLiteral("teach_title"));
  title_->setTextFormat(Qt::RichText);
  title_->setWordWrap(true);
  bar->addWidget(previous_);
  bar->addWidget(next_);
  bar->addWidget(title_, 1);
  layout->addLayout(bar);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  explanation_ = new QPlainTextEdit(splitter);
  explanation_->setObjectName(QStringLiteral("teach_explanation"));
  explanation_->setReadOnly(true);
  diff_ = new QPlainTextEdit(splitter);
  diff_->setObjectName(QStringLiteral("teach_diff"));
  diff_->setReadOnly(true);
  diff_->setLineWrapMode(QPlainTextEdit::NoWrap);
  diff_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  diff_highlighter_ = new CodeHighlighter(diff_->document(), CodeLanguage::Diff);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 3);
  layout->addWidget(splitter, 1);

  connect(previous_, &QPushButton::clicked, stage_view_, &StageView::previous_pass);
  connect(next_, &QPushButton::clicked, stage_view_, &StageView::next_pass);
  connect(stage_view_, &StageView::snapshot_changed, this, &TeachingPanel::refresh);
  refresh();
}

void TeachingPanel::refresh_colors() { diff_highlighter_->refresh_colors(); }

void TeachingPanel::refresh() {
  const driver::Snapshot* snapshot = stage_view_->snapshot();
  const auto& compilation = stage_view_->compilation();
  if (snapshot == nullptr || !compilation) {
    title_->setText(tr("Open a spec to step through its lowering."));
    explanation_->clear();
    diff_->clear();
    previous_->setEnabled(false);
    next_->setEnabled(false);
    return;
  }
  const int index = stage_view_->current_snapshot();
  const int total = static_cast<int>(compilation->log.size());
  const PassLogModel* model = stage_view_->model();
  const int row = model->row_of(index);
  previous_->setEnabled(row > 0);
  next_->setEnabled(row >= 0 && row + 1 < model->rowCount());
  title_->setText(tr("Pass <b>%1</b> of %2 · stage <b>%3</b> · <tt>%4</tt> · %5 ms%6")
                      .arg(index + 1)
                      .arg(total)
                      .arg(QString::fromLatin1(driver::stage_name(snapshot->stage)),
                           QString::fromStdString(snapshot->pass).toHtmlEscaped())
                      .arg(snapshot->milliseconds, 0, 'f', 2)
                      .arg(snapshot->unchanged ? tr(" · <i>left the IR unchanged</i>") : QString()));
  QString explanation = QString::fromStdString(pass_explanation(*snapshot));
  if (!snapshot->summary.empty() && !explanation.startsWith(QString::fromStdString(snapshot->summary))) {
    explanation = QString::fromStdString(snapshot->summary) + QStringLiteral("\n\n") + explanation;
  }
  explanation_->setPlainText(explanation);
  diff_->setPlainText(stage_view_->diff_view()->toPlainText());
}

}  // namespace nautilus::views
