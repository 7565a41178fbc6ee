#include "views/stage_view.h"

#include <QCheckBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSet>
#include <QSizePolicy>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

#include "core/driver/render.h"
#include "views/code_highlighter.h"
#include "views/graph_view.h"
#include "views/pass_log_model.h"

namespace nautilus::views {
namespace {

QPlainTextEdit* make_code_view(QWidget* parent) {
  auto* view = new QPlainTextEdit(parent);
  view->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  view->setLineWrapMode(QPlainTextEdit::NoWrap);
  view->setReadOnly(true);
  return view;
}

QToolButton* tool_button(const QString& text, const QString& tip, QWidget* parent) {
  auto* button = new QToolButton(parent);
  button->setText(text);
  button->setToolTip(tip);
  button->setAutoRaise(true);
  return button;
}

}  // namespace

StageView::StageView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* splitter = new QSplitter(Qt::Horizontal, this);
  layout->addWidget(splitter);

  // Left: the pass log.
  auto* left = new QWidget(splitter);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  hide_unchanged_ = new QCheckBox(tr("Hide unchanged passes"), left);
  hide_unchanged_->setObjectName(QStringLiteral("hide_unchanged"));
  left_layout->addWidget(hide_unchanged_);
  model_ = new PassLogModel(this);
  table_ = new QTableView(left);
  table_->setObjectName(QStringLiteral("pass_log"));
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(PassLogModel::Summary, QHeaderView::Interactive);
  table_->horizontalHeader()->setSectionResizeMode(PassLogModel::Pass, QHeaderView::Interactive);
  table_->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
  table_->setAlternatingRowColors(true);
  table_->setWordWrap(false);
  left_layout->addWidget(table_);
  connect(hide_unchanged_, &QCheckBox::toggled, this, &StageView::set_hide_unchanged);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& index) {
            const int snapshot = model_->snapshot_index(index.row());
            if (snapshot >= 0 && snapshot != current_) select_snapshot(snapshot);
          });

  // Right: the snapshot as text, graph or diff.
  auto* right = new QWidget(splitter);
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  title_ = new QLabel(right);
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // Pass summaries are long sentences: wrap them instead of widening the dock.
  title_->setWordWrap(true);
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  right_layout->addWidget(title_);
  tabs_ = new QTabWidget(right);
  tabs_->setDocumentMode(true);
  right_layout->addWidget(tabs_);

  text_ = make_code_view(tabs_);
  text_->setObjectName(QStringLiteral("stage_text"));
  text_highlighter_ = new CodeHighlighter(text_->document(), CodeLanguage::IR);
  tabs_->addTab(text_, tr("Text"));

  auto* graph_page = new QWidget(tabs_);
  auto* graph_layout = new QVBoxLayout(graph_page);
  graph_layout->setContentsMargins(0, 0, 0, 0);
  auto* graph_bar = new QHBoxLayout();
  find_ = new QLineEdit(graph_page);
  find_->setObjectName(QStringLiteral("graph_find"));
  find_->setPlaceholderText(tr("Find node (Enter: next)"));
  find_->setClearButtonEnabled(true);
  graph_bar->addWidget(find_, 1);
  QToolButton* fit = tool_button(tr("Fit"), tr("Show the whole graph"), graph_page);
  QToolButton* zoom_in = tool_button(tr("+"), tr("Zoom in"), graph_page);
  QToolButton* zoom_out = tool_button(tr("−"), tr("Zoom out"), graph_page);
  graph_bar->addWidget(fit);
  graph_bar->addWidget(zoom_in);
  graph_bar->addWidget(zoom_out);
  graph_status_ = new QLabel(graph_page);
  graph_bar->addWidget(graph_status_);
  graph_layout->addLayout(graph_bar);
  graph_ = new GraphView(graph_page);
  graph_->setObjectName(QStringLiteral("graph_view"));
  graph_layout->addWidget(graph_);
  tabs_->addTab(graph_page, tr("Graph"));
  connect(find_, &QLineEdit::returnPressed, this, [this] { find_in_graph(find_->text()); });
  connect(fit, &QToolButton::clicked, graph_, &GraphView::fit);
  connect(zoom_in, &QToolButton::clicked, this, [this] { graph_->zoom_by(1.25); });
  connect(zoom_out, &QToolButton::clicked, this, [this] { graph_->zoom_by(0.8); });
  connect(graph_, &GraphView::node_selected, this, &StageView::on_node_selected);

  diff_ = make_code_view(tabs_);
  diff_->setObjectName(QStringLiteral("stage_diff"));
  diff_highlighter_ = new CodeHighlighter(diff_->document(), CodeLanguage::Diff);
  tabs_->addTab(diff_, tr("Diff"));
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int tab) {
    if (tab == GraphTab) request_graph();
  });

  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 3);
  splitter->setSizes({360, 700});

  layouter_ = new GraphLayouter(this);
  connect(layouter_, &GraphLayouter::started, this, [this] {
    graph_status_->setText(tr("laying out…"));
  });
  connect(layouter_, &GraphLayouter::laid_out, this,
          [this](const QString& key, GraphLayoutPtr laid_out) {
            if (key != graph_key_) return;
            shown_graph_key_ = key;
            graph_->set_layout(laid_out);
            graph_status_->setText(tr("%1 nodes, %2 ms")
                                       .arg(laid_out->nodes.size())
                                       .arg(laid_out->milliseconds, 0, 'f', 0));
            apply_statement_highlight();
            Q_EMIT graph_ready();
          });
  connect(layouter_, &GraphLayouter::failed, this, [this](const QString& key, const QString& why) {
    if (key != graph_key_) return;
    shown_graph_key_ = key;
    graph_->show_message(why);
    graph_status_->setText(why);
    Q_EMIT graph_ready();
  });
  graph_->show_message(tr("Compile a spec to see its graph."));
}

void StageView::set_compilation(std::shared_ptr<const driver::Compilation> compilation,
                                uint64_t generation) {
  const int previous = current_;
  compilation_ = std::move(compilation);
  generation_ = generation;
  model_->set_compilation(compilation_);
  table_->setColumnWidth(PassLogModel::Pass, 220);
  table_->setColumnWidth(PassLogModel::Summary, 420);
  current_ = -1;
  if (!compilation_ || compilation_->log.empty()) {
    text_->setPlainText(QString());
    diff_->setPlainText(QString());
    title_->setText(tr("No pass log: the spec does not compile."));
    graph_->show_message(tr("No graph: the spec does not compile."));
    return;
  }
  const int last = static_cast<int>(compilation_->log.size()) - 1;
  select_snapshot(previous < 0 ? last : std::min(previous, last));
}

const driver::Snapshot* StageView::snapshot() const {
  if (!compilation_ || current_ < 0 || current_ >= static_cast<int>(compilation_->log.size())) {
    return nullptr;
  }
  return &compilation_->log[static_cast<size_t>(current_)];
}

bool StageView::select_snapshot(int index) {
  if (!compilation_ || compilation_->log.empty()) return false;
  index = std::clamp(index, 0, static_cast<int>(compilation_->log.size()) - 1);
  current_ = index;
  const int row = model_->row_of(index);
  if (row >= 0 && table_->currentIndex().row() != row) {
    table_->selectRow(row);
    table_->scrollTo(model_->index(row, 0));
  }
  show_current();
  Q_EMIT snapshot_changed(current_);
  return true;
}

void StageView::next_pass() {
  if (!compilation_) return;
  const int row = model_->row_of(current_);
  const int next = model_->snapshot_index(row + 1);
  if (next >= 0) select_snapshot(next);
}

void StageView::previous_pass() {
  if (!compilation_) return;
  const int row = model_->row_of(current_);
  const int previous = model_->snapshot_index(row - 1);
  if (previous >= 0) select_snapshot(previous);
}

bool StageView::select_stage(driver::Stage stage) {
  if (!compilation_) return false;
  // The last pass of the stage: its finished IR.
  for (size_t i = compilation_->log.size(); i-- > 0;) {
    if (compilation_->log[i].stage == stage) return select_snapshot(static_cast<int>(i));
  }
  return false;
}

void StageView::show_tab(Tab tab) { tabs_->setCurrentIndex(tab); }

StageView::Tab StageView::current_tab() const { return static_cast<Tab>(tabs_->currentIndex()); }

void StageView::set_hide_unchanged(bool hide) {
  if (hide_unchanged_->isChecked() != hide) hide_unchanged_->setChecked(hide);
  model_->set_hide_unchanged(hide);
  const int row = model_->row_of(current_);
  if (row >= 0) {
    table_->selectRow(row);
  } else if (model_->rowCount() > 0) {
    // The shown pass was hidden: move to the nearest visible one before it.
    int index = current_;
    while (index > 0 && model_->row_of(index) < 0) --index;
    select_snapshot(index);
  }
}

void StageView::find_in_graph(const QString& text) {
  if (find_->text() != text) find_->setText(text);
  if (current_tab() != GraphTab) show_tab(GraphTab);
  if (!graph_->find_next(text)) Q_EMIT status_message(tr("no node matches '%1'").arg(text));
}

void StageView::refresh_colors() {
  text_highlighter_->refresh_colors();
  diff_highlighter_->refresh_colors();
  if (graph_->graph_layout()) {
    const GraphLayoutPtr layout = graph_->graph_layout();
    const QString selected = graph_->selected_node();
    graph_->set_layout(layout);
    if (!selected.isEmpty()) graph_->select_node(selected, false);
    apply_statement_highlight();
  }
}

bool StageView::graph_pending() const {
  return !graph_key_.isEmpty() && shown_graph_key_ != graph_key_;
}

void StageView::show_current() {
  const driver::Snapshot* shown = snapshot();
  if (shown == nullptr) return;
  const SourceFile* file = compilation_->file.get();
  current_text_ = QString::fromStdString(driver::render(*shown, driver::RenderFormat::Text, file));
  text_highlighter_->set_language(shown->stage == driver::Stage::Cuda ? CodeLanguage::Cuda
                                                                      : CodeLanguage::IR);
  text_->setPlainText(current_text_);
  // The diff against the entry before it in the log (hidden passes included: a diff is always
  // between neighbours, so the unchanged flag and the diff agree).
  const std::string diff =
      driver::pass_diff(compilation_->log, static_cast<size_t>(current_), file);
  diff_->setPlainText(diff.empty() ? tr("(this pass left the IR unchanged)")
                                   : QString::fromStdString(diff));
  title_->setText(tr("<b>%1</b> · %2 · %3")
                      .arg(QString::fromStdString(shown->pass).toHtmlEscaped(),
                           QString::fromLatin1(driver::stage_name(shown->stage)),
                           QString::fromStdString(shown->summary).toHtmlEscaped()));
  current_dot_ = driver::render(*shown, driver::RenderFormat::Dot);
  origins_ = node_origins(*shown);
  graph_key_ = QStringLiteral("%1/%2").arg(generation_).arg(current_);
  if (current_dot_.empty()) {
    graph_key_.clear();
    graph_->show_message(tr("Stage %1 has no graph; see the Text tab or the CUDA panel.")
                             .arg(QString::fromLatin1(driver::stage_name(shown->stage))));
    graph_status_->clear();
    return;
  }
  if (current_tab() == GraphTab || isVisible()) request_graph();
}

void StageView::request_graph() {
  if (graph_key_.isEmpty() || shown_graph_key_ == graph_key_) return;
  layouter_->request(graph_key_, current_dot_);
}

void StageView::on_node_selected(const QString& id) {
  const auto found = origins_.find(id.toStdString());
  if (found == origins_.end() || found->second.statement < 0) {
    Q_EMIT status_message(tr("%1: no spec statement recorded").arg(id));
  } else {
    statement_ = found->second.statement;
    apply_statement_highlight();
    const SourceRange& range = found->second.range;
    Q_EMIT statement_selected(statement_, range.valid ? static_cast<int>(range.begin) : -1,
                              range.valid ? static_cast<int>(range.end) : -1);
  }
  // Last, so the op's own CUDA lines are what the CUDA view ends up marking.
  const driver::Snapshot* shown = snapshot();
  if (shown != nullptr && shown->stage == driver::Stage::MATile && graph_->graph_layout()) {
    for (const LayoutNode& node : graph_->graph_layout()->nodes) {
      if (node.id == id) Q_EMIT ma_op_selected(node.label);
    }
  }
}

void StageView::show_statement(int statement) {
  statement_ = statement;
  apply_statement_highlight();
}

void StageView::apply_statement_highlight() {
  QSet<QString> ids;
  if (statement_ >= 0) {
    for (const auto& [id, origin] : origins_) {
      if (origin.statement == statement_) ids.insert(QString::fromStdString(id));
    }
  }
  graph_->highlight(ids);
}

}  // namespace nautilus::views
