#include "views/teaching_panel.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pass_estimate.h"
#include "core/driver/render.h"
#include "views/code_highlighter.h"
#include "views/pass_log_model.h"
#include "views/stage_view.h"
#include "views/task_runner.h"

namespace nautilus::views {

namespace {

// "934.4 µs", or why the pass has no estimate.
QString estimate_text(const driver::PassEstimate& estimate) {
  if (!estimate.estimate) {
    return QObject::tr("no estimate (%1)").arg(QString::fromStdString(estimate.reason));
  }
  if (!estimate.estimate->feasible) {
    return QObject::tr("infeasible: %1")
        .arg(QString::fromStdString(estimate.estimate->infeasible_reason));
  }
  return QObject::tr("%1 µs").arg(estimate.estimate->microseconds, 0, 'f', 1);
}

}  // namespace

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

  estimate_ = new QLabel(this);
  estimate_->setObjectName(QStringLiteral("teach_estimate"));
  estimate_->setWordWrap(true);
  layout->addWidget(estimate_);
  worker_ = new TaskRunner(this);

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

bool TeachingPanel::estimating() const { return worker_->busy(); }

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
  QString explanation = QString::fromStdString(driver::pass_explanation(*snapshot));
  if (!snapshot->summary.empty() && !explanation.startsWith(QString::fromStdString(snapshot->summary))) {
    explanation = QString::fromStdString(snapshot->summary) + QStringLiteral("\n\n") + explanation;
  }
  explanation_->setPlainText(explanation);
  diff_->setPlainText(stage_view_->diff_view()->toPlainText());
  show_estimate();
}

void TeachingPanel::show_estimate() {
  const auto& compilation = stage_view_->compilation();
  const driver::Snapshot* snapshot = stage_view_->snapshot();
  if (!compilation || snapshot == nullptr) {
    estimate_->clear();
    return;
  }
  if (compilation != cached_for_) {
    estimates_.clear();  // a new compilation: earlier entries point at freed logs' positions
    cached_for_ = compilation;
  }
  const int index = stage_view_->current_snapshot();
  if (snapshot->stage == driver::Stage::Spec) {
    estimate_->setText(tr("Cost estimate: the spec has no schedule yet."));
    return;
  }
  if (snapshot->stage != driver::Stage::Scalar) {
    // After scheduling the kernel is what it is: the finished MA tile IR's estimate.
    if (!compilation->ma_module) {
      estimate_->setText(tr("Cost estimate: no MA tile IR."));
      return;
    }
    const std::optional<cost::DeviceModel> device = cost::device_model_for("h100");
    const cost::CostEstimate estimate = cost::make_analytical_model(*device)->estimate(*compilation->ma_module);
    estimate_->setText(estimate.feasible
                           ? tr("Cost estimate of the finished kernel (H100 model): %1 µs")
                                 .arg(estimate.microseconds, 0, 'f', 1)
                           : tr("The finished kernel is infeasible: %1")
                                 .arg(QString::fromStdString(estimate.infeasible_reason)));
    return;
  }
  const int before = index - 1;
  const auto key_after = std::make_pair(compilation.get(), index);
  const auto key_before = std::make_pair(compilation.get(), before);
  const auto show = [this, key_after, key_before, before] {
    const auto after = estimates_.find(key_after);
    const auto previous = estimates_.find(key_before);
    if (after == estimates_.end()) return;
    QString text = tr("Cost estimate (H100 model, the rest scheduled by default): %1").arg(after->second);
    if (before >= 1 && previous != estimates_.end()) text += tr(" · before this pass: %1").arg(previous->second);
    estimate_->setText(text);
  };
  if (estimates_.count(key_after) && (before < 1 || estimates_.count(key_before))) {
    show();
    return;
  }
  estimate_->setText(tr("Cost estimate: compiling with the default completion…"));
  worker_->post([this, compilation, index, before, key_after, key_before, show]() -> TaskRunner::Continuation {
    const std::unique_ptr<cost::CostModel> model =
        cost::make_analytical_model(*cost::device_model_for("h100"));
    const QString after =
        estimate_text(driver::estimate_after_pass(*compilation, static_cast<size_t>(index), *model));
    const QString previous =
        before >= 1 ? estimate_text(driver::estimate_after_pass(
                          *compilation, static_cast<size_t>(before), *model))
                    : QString();
    return [this, after, previous, key_after, key_before, before, show] {
      estimates_[key_after] = after;
      if (before >= 1) estimates_[key_before] = previous;
      show();
    };
  });
}

}  // namespace nautilus::views
