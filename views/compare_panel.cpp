#include "views/compare_panel.h"

#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <array>
#include <map>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/render.h"
#include "core/support/text_diff.h"
#include "views/code_highlighter.h"
#include "views/table_cell.h"
#include "views/task_runner.h"

namespace nautilus::views {
namespace {

QPlainTextEdit* make_diff_view(QWidget* parent) {
  auto* view = new QPlainTextEdit(parent);
  view->setReadOnly(true);
  view->setLineWrapMode(QPlainTextEdit::NoWrap);
  view->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  return view;
}

std::string decision_lines(const sched::Schedule& schedule) {
  const std::string text = sched::print_decisions(schedule.decisions, "\n");
  return text.empty() ? text : text + "\n";
}

}  // namespace

ComparePanel::ComparePanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  for (int side = 0; side < 2; ++side) {
    labels_[side] = new QLabel(this);
    labels_[side]->setWordWrap(true);
    labels_[side]->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(labels_[side]);
  }
  labels_[A]->setObjectName(QStringLiteral("compare_a"));
  labels_[B]->setObjectName(QStringLiteral("compare_b"));
  status_ = new QLabel(this);
  layout->addWidget(status_);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  auto* tabs = new QTabWidget(splitter);
  decisions_ = make_diff_view(tabs);
  decisions_->setObjectName(QStringLiteral("compare_decisions"));
  decisions_highlighter_ = new CodeHighlighter(decisions_->document(), CodeLanguage::Diff);
  tabs->addTab(decisions_, tr("Decisions"));
  auto* stage_page = new QWidget(tabs);
  auto* stage_layout = new QVBoxLayout(stage_page);
  stage_layout->setContentsMargins(0, 0, 0, 0);
  stage_ = new QComboBox(stage_page);
  for (driver::Stage stage : driver::all_stages()) {
    stage_->addItem(QString::fromLatin1(driver::stage_name(stage)), static_cast<int>(stage));
  }
  stage_->setCurrentIndex(static_cast<int>(driver::Stage::MATile));
  stage_layout->addWidget(stage_);
  stage_diff_ = make_diff_view(stage_page);
  stage_diff_->setObjectName(QStringLiteral("compare_stage_diff"));
  stage_highlighter_ = new CodeHighlighter(stage_diff_->document(), CodeLanguage::Diff);
  stage_layout->addWidget(stage_diff_);
  tabs->addTab(stage_page, tr("IR diff"));
  kernels_ = new QTableWidget(0, 7, splitter);
  kernels_->setObjectName(QStringLiteral("compare_kernels"));
  kernels_->setHorizontalHeaderLabels({tr("Kernel"), tr("A est. µs"), tr("B est. µs"), tr("A bound"),
                                       tr("B bound"), tr("A measured µs"), tr("B measured µs")});
  kernels_->verticalHeader()->hide();
  kernels_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  layout->addWidget(splitter, 1);

  worker_ = new TaskRunner(this);
  connect(stage_, &QComboBox::currentIndexChanged, this, &ComparePanel::show_stage_diff);
  show_sides();
}

void ComparePanel::set_spec(const PipelineInputs& inputs) { inputs_ = inputs; }

void ComparePanel::refresh_colors() {
  decisions_highlighter_->refresh_colors();
  stage_highlighter_->refresh_colors();
}

bool ComparePanel::busy() const { return worker_->busy(); }

void ComparePanel::set_slot(Slot slot, const sched::Schedule& schedule, const QString& origin,
                            std::vector<KernelTiming> measured) {
  Side& side = sides_[slot];
  side.set = true;
  side.schedule = schedule;
  side.origin = origin;
  side.measured = std::move(measured);
  side.compilation.reset();
  side.estimate.reset();
  compile();
}

void ComparePanel::compile() {
  show_sides();
  if (inputs_.text.empty()) {
    status_->setText(tr("Open a spec first."));
    return;
  }
  status_->setText(tr("compiling both schedules…"));
  PipelineInputs inputs[2] = {inputs_, inputs_};
  for (int side = 0; side < 2; ++side) {
    inputs[side].schedule = sides_[side].schedule;
    inputs[side].last_stage = driver::Stage::Cuda;
  }
  const bool set[2] = {sides_[A].set, sides_[B].set};
  worker_->post([this, a = inputs[A], b = inputs[B], set_a = set[A], set_b = set[B]]() -> TaskRunner::Continuation {
    std::shared_ptr<const driver::Compilation> compiled[2];
    std::optional<cost::CostEstimate> estimates[2];
    const std::optional<cost::DeviceModel> device = cost::device_model_for("h100");
    std::unique_ptr<cost::CostModel> model = device ? cost::make_analytical_model(*device) : nullptr;
    const PipelineInputs* sides[2] = {&a, &b};
    const bool used[2] = {set_a, set_b};
    for (int side = 0; side < 2; ++side) {
      if (!used[side]) continue;
      compiled[side] = run_pipeline(*sides[side]).compilation;
      if (model && compiled[side] && compiled[side]->ma_module) {
        estimates[side] = model->estimate(*compiled[side]->ma_module);
      }
    }
    return [this, c0 = compiled[0], c1 = compiled[1], e0 = estimates[0], e1 = estimates[1]] {
      sides_[A].compilation = c0;
      sides_[B].compilation = c1;
      sides_[A].estimate = e0;
      sides_[B].estimate = e1;
      status_->clear();
      show_sides();
      Q_EMIT compared();
    };
  });
}

void ComparePanel::show_sides() {
  for (int side = 0; side < 2; ++side) {
    const Side& shown = sides_[side];
    const QString name = side == A ? QStringLiteral("A") : QStringLiteral("B");
    if (!shown.set) {
      labels_[side]->setText(tr("<b>%1</b>: empty — set it from the search tree, a run, or the "
                                "current schedule").arg(name));
      continue;
    }
    QString text = tr("<b>%1</b> (%2): %3 decision(s)")
                       .arg(name, shown.origin.toHtmlEscaped())
                       .arg(shown.schedule.decisions.size());
    if (shown.compilation && !shown.compilation->ok()) {
      text += tr(" — <span style='color:#d0211c'>%1</span>")
                  .arg(QString::fromStdString(shown.compilation->schedule_error.empty()
                                                  ? std::string("does not compile")
                                                  : shown.compilation->schedule_error)
                           .toHtmlEscaped());
    } else if (shown.estimate && shown.estimate->feasible) {
      text += tr(" — %1 µs estimated").arg(shown.estimate->microseconds, 0, 'f', 1);
    }
    labels_[side]->setText(text);
  }
  const std::string diff = unified_diff(decision_lines(sides_[A].schedule),
                                        decision_lines(sides_[B].schedule), "A", "B", 1000);
  decisions_->setPlainText(diff.empty() ? tr("(the two schedules have the same decisions)")
                                        : QString::fromStdString(diff));
  show_stage_diff();

  // Kernels of either side, by name.
  std::map<std::string, std::array<QString, 6>> rows;
  for (int side = 0; side < 2; ++side) {
    const Side& shown = sides_[side];
    if (shown.estimate) {
      for (const cost::KernelCost& kernel : shown.estimate->kernels) {
        rows[kernel.kernel][static_cast<size_t>(side)] = QString::number(kernel.microseconds, 'f', 1);
        rows[kernel.kernel][static_cast<size_t>(2 + side)] = QString::fromStdString(kernel.bound);
      }
    }
    for (const KernelTiming& timing : shown.measured) {
      rows[timing.name][static_cast<size_t>(4 + side)] = QString::number(timing.median_us, 'f', 1);
    }
  }
  kernels_->setRowCount(static_cast<int>(rows.size()));
  int row = 0;
  for (const auto& [name, values] : rows) {
    kernels_->setItem(row, 0, table_cell(QString::fromStdString(name), false));
    for (int column = 0; column < 6; ++column) {
      kernels_->setItem(row, column + 1, table_cell(values[static_cast<size_t>(column)], column < 2 || column > 3));
    }
    ++row;
  }
}

void ComparePanel::show_stage_diff() {
  const auto stage = static_cast<driver::Stage>(stage_->currentData().toInt());
  std::string texts[2];
  for (int side = 0; side < 2; ++side) {
    const Side& shown = sides_[side];
    if (!shown.compilation) continue;
    if (const driver::Snapshot* snapshot = shown.compilation->final_snapshot(stage)) {
      texts[side] = driver::render(*snapshot, driver::RenderFormat::Text,
                                    shown.compilation->file.get());
    }
  }
  if (!sides_[A].compilation || !sides_[B].compilation) {
    stage_diff_->setPlainText(tr("Set both A and B to compare their IR."));
    return;
  }
  const std::string name = driver::stage_name(stage);
  const std::string diff = unified_diff(texts[A], texts[B], "A " + name, "B " + name);
  stage_diff_->setPlainText(diff.empty() ? tr("(identical at stage %1)").arg(QString::fromStdString(name))
                                         : QString::fromStdString(diff));
}

}  // namespace nautilus::views
