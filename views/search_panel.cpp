#include "views/search_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMetaObject>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>

#include <QThread>

#include <algorithm>
#include <exception>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/pipeline/finish_search.h"
#include "core/tune/tuner.h"
#include "core/tune/tuning_db.h"
#include "profiler/local_executor.h"
#include "views/search_tree_model.h"
#include "views/task_runner.h"

namespace nautilus::views {
namespace {

// Forwards the search's progress and its growing tree to the panel's thread; stale generations
// are dropped there.
class ProgressForwarder : public search::SearchObserver {
 public:
  ProgressForwarder(QObject* target, std::function<void(const search::SearchProgress&)> show,
                    std::function<void(std::vector<search::SearchNode>)> show_tree)
      : target_(target), show_(std::move(show)), show_tree_(std::move(show_tree)) {}
  void on_progress(const search::SearchProgress& progress) override {
    QMetaObject::invokeMethod(target_, [show = show_, progress] { show(progress); },
                              Qt::QueuedConnection);
  }
  bool wants_tree() const override { return true; }
  void on_tree(const std::vector<search::SearchNode>& nodes) override {
    QMetaObject::invokeMethod(
        target_, [show = show_tree_, nodes]() mutable { show(std::move(nodes)); },
        Qt::QueuedConnection);
  }

 private:
  QObject* target_;
  std::function<void(const search::SearchProgress&)> show_;
  std::function<void(std::vector<search::SearchNode>)> show_tree_;
};

QString decisions_text(const std::vector<sched::Decision>& decisions) {
  return QString::fromStdString(sched::print_decisions(decisions, "; "));
}

// The tuner's outcome for people: the runner's status names use underscores ("wrong_results:
// C differs ..." reads "wrong results: C differs ...").
QString readable_outcome(const std::string& outcome) {
  QString text = QString::fromStdString(outcome);
  const qsizetype colon = text.indexOf(QLatin1Char(':'));
  const qsizetype end = colon < 0 ? text.size() : colon;
  for (qsizetype i = 0; i < end; ++i) {
    if (text[i] == QLatin1Char('_')) text[i] = QLatin1Char(' ');
  }
  return text;
}

// What the measurement's worker hands back to the panel.
struct MeasureSummary {
  bool ok = false;
  QString text;
};

}  // namespace

SearchPanel::SearchPanel(QWidget* parent) : QWidget(parent) {
  runner_ = new TaskRunner(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* bar = new QHBoxLayout();
  search_ = new QPushButton(tr("Search"), this);
  search_->setObjectName(QStringLiteral("search"));
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setEnabled(false);
  beam_ = new QSpinBox(this);
  beam_->setRange(1, 32);
  beam_->setValue(3);
  beam_->setPrefix(tr("beam "));
  device_ = new QComboBox(this);
  device_->addItem(QStringLiteral("H100 (cost model)"), QStringLiteral("h100"));
  device_->addItem(QStringLiteral("A100 (cost model)"), QStringLiteral("a100"));
  pipeline_solver_ = new QCheckBox(tr("pipeline solver"), this);
  pipeline_solver_->setChecked(true);
  pipeline_solver_->setToolTip(tr("Complete the chosen schedule's software pipelines with the Z3 "
                                  "pipeline solver (ring depth, consumer warpgroups), as nautilus "
                                  "schedule does"));
  register_check_ = new QCheckBox(tr("register check"), this);
  register_check_->setChecked(true);
  register_check_->setToolTip(tr("Compile the chosen schedule with NVRTC (no GPU needed) and, when "
                                 "ptxas spills its registers, use the best-ranked leaf that does "
                                 "not, as nautilus schedule does"));
  progress_ = new QLabel(tr("Search for a schedule of the current spec."), this);
  progress_->setObjectName(QStringLiteral("search_progress"));
  progress_->setWordWrap(true);
  for (QWidget* widget : std::initializer_list<QWidget*>{search_, cancel_, beam_, device_, register_check_,
                                                            pipeline_solver_}) {
    bar->addWidget(widget);
  }
  bar->addWidget(progress_, 1);
  layout->addLayout(bar);

  auto* constraints_bar = new QHBoxLayout();
  constraints_ = new QLabel(this);
  constraints_->setWordWrap(true);
  constraints_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* clear = new QPushButton(tr("Clear pins and forbids"), this);
  constraints_bar->addWidget(constraints_, 1);
  constraints_bar->addWidget(clear);
  layout->addLayout(constraints_bar);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  model_ = new SearchTreeModel(this);
  tree_ = new QTreeView(splitter);
  tree_->setObjectName(QStringLiteral("search_tree"));
  tree_->setModel(model_);
  tree_->setUniformRowHeights(true);  // keeps thousands of rows fluid
  tree_->setAlternatingRowColors(true);
  tree_->header()->setSectionResizeMode(SearchTreeModel::Decision, QHeaderView::Interactive);
  tree_->setColumnWidth(SearchTreeModel::Decision, 360);
  detail_ = new QPlainTextEdit(splitter);
  detail_->setReadOnly(true);
  detail_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  detail_->setPlaceholderText(tr("Select a node to see its schedule and estimate."));
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);
  layout->addWidget(splitter, 1);

  auto* actions = new QHBoxLayout();
  auto* pin = new QPushButton(tr("Pin path && search"), this);
  pin->setToolTip(tr("Keep this node's decisions and let the search complete the rest"));
  auto* forbid_button = new QPushButton(tr("Forbid && search"), this);
  forbid_button->setToolTip(tr("Never use this node's decision; search again"));
  auto* use = new QPushButton(tr("Use schedule"), this);
  use->setToolTip(tr("Compile this node's schedule (with its default completion)"));
  auto* compare_a = new QPushButton(tr("Compare as A"), this);
  auto* compare_b = new QPushButton(tr("Compare as B"), this);
  for (QPushButton* button : {pin, forbid_button, use, compare_a, compare_b}) actions->addWidget(button);
  for (int slot = 0; slot < 2; ++slot) {
    connect(slot == 0 ? compare_a : compare_b, &QPushButton::clicked, this, [this, slot] {
      const int id = selected_node();
      if (id < 0) return;
      Q_EMIT compare_requested(slot, completed_schedule(id), tr("search node %1").arg(id));
    });
  }
  actions->addStretch();
  layout->addLayout(actions);

  // Measure: the tuner on the local GPU, results into the tuning database.
  auto* measure_bar = new QHBoxLayout();
  candidates_ = new QSpinBox(this);
  candidates_->setObjectName(QStringLiteral("measure_candidates"));
  candidates_->setRange(1, 10000);
  candidates_->setValue(16);
  candidates_->setSuffix(tr(" candidates"));
  candidates_->setToolTip(tr("How many schedules to measure: the search's leaves best estimate "
                             "first, then mutations of the fastest measured ones"));
  measure_ = new QPushButton(tr("Measure"), this);
  measure_->setObjectName(QStringLiteral("measure"));
  measure_->setToolTip(tr("Time the candidates on the local GPU (validated first) and record "
                          "every result in the tuning database"));
  measure_label_ = new QLabel(this);
  measure_label_->setObjectName(QStringLiteral("measure_progress"));
  measure_label_->setWordWrap(true);
  database_label_ = new QLabel(this);
  database_label_->setObjectName(QStringLiteral("tuning_database"));
  database_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  measure_bar->addWidget(candidates_);
  measure_bar->addWidget(measure_);
  measure_bar->addWidget(measure_label_, 1);
  layout->addLayout(measure_bar);
  layout->addWidget(database_label_);
  connect(measure_, &QPushButton::clicked, this, [this] { measure(); });
  measure_runner_ = new TaskRunner(this);
  set_database_path(QString::fromStdString(tune::default_database_path()));

  connect(search_, &QPushButton::clicked, this, &SearchPanel::start);
  connect(cancel_, &QPushButton::clicked, this, &SearchPanel::cancel);
  connect(clear, &QPushButton::clicked, this, &SearchPanel::clear_constraints);
  connect(pin, &QPushButton::clicked, this, [this] { pin_path(selected_node()); });
  connect(forbid_button, &QPushButton::clicked, this, [this] { forbid(selected_node()); });
  connect(use, &QPushButton::clicked, this, [this] {
    const int id = selected_node();
    if (id >= 0) Q_EMIT schedule_found(completed_schedule(id));
  });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] {
    connect(tree_->selectionModel(), &QItemSelectionModel::currentChanged, this,
            &SearchPanel::show_node, Qt::UniqueConnection);
  });
  connect(tree_->selectionModel(), &QItemSelectionModel::currentChanged, this,
          &SearchPanel::show_node);
  update_constraints_label();
}

SearchPanel::~SearchPanel() {
  // Stop the search, then wait for it here, while the panel is whole: the search posts its
  // progress to this object until it returns.
  stop_.request_stop();
  delete runner_;
  // The tuner stops after the candidates in flight (a runner child ends within its timeout).
  measure_stop_.request_stop();
  delete measure_runner_;
}

void SearchPanel::set_database_path(const QString& path) {
  database_path_ = path;
  database_label_->setText(path.isEmpty()
                               ? tr("Tuning database: none (set XDG_DATA_HOME or HOME)")
                               : tr("Tuning database: %1").arg(path));
}

std::string SearchPanel::device_preset() const {
  return device_->currentData().toString().toStdString();
}

search::SearchOptions SearchPanel::search_options() const {
  search::SearchOptions options;
  options.pins = extra_pins_;
  options.pins.insert(options.pins.end(), pins_.begin(), pins_.end());
  options.forbids = forbids_;
  options.beam = beam_->value();
  options.threads = 1;
  return options;
}

void SearchPanel::set_measuring(bool measuring) {
  measuring_ = measuring;
  measure_->setEnabled(!measuring);
  candidates_->setEnabled(!measuring);
  cancel_->setEnabled(measuring || running_);
}

bool SearchPanel::measure(int candidates) {
  if (measuring_) {
    measure_label_->setText(tr("A measurement is running; cancel it first."));
    return false;
  }
  if (text_.empty()) {
    measure_label_->setText(tr("Nothing to measure: the editor is empty."));
    return false;
  }
  if (database_path_.isEmpty()) {
    measure_label_->setText(tr("No tuning database: set XDG_DATA_HOME or HOME."));
    return false;
  }
  measure_stop_ = std::stop_source();
  const uint64_t generation = ++measure_generation_;
  unmatched_ = 0;
  set_measuring(true);
  measure_label_->setText(tr("measuring: searching for candidates…"));

  search::SearchInput input;
  input.file = std::make_shared<const SourceFile>(path_, text_);
  input.sizes = sizes_;
  tune::TuneOptions options;
  options.search = search_options();
  options.budget = candidates > 0 ? candidates : candidates_->value();
  options.source = "studio";
  const std::string device_name = device_preset();
  const std::string db_path = database_path_.toStdString();
  profiler::LocalExecutorOptions executor_options;
  executor_options.runner_command = runner_command_;
  executor_options.driver_library = driver_library_;
  // Builds (NVRTC) on half the cores, as many as the local executor can keep one GPU busy with.
  executor_options.jobs = std::clamp(QThread::idealThreadCount() / 2, 1, profiler::kCandidatesPerDevice);
  std::stop_token token = measure_stop_.get_token();
  measure_runner_->post([this, input, options, device_name, db_path, executor_options, token,
                         generation]() mutable -> TaskRunner::Continuation {
    MeasureSummary summary;
    try {
      const std::optional<cost::DeviceModel> device = cost::device_model_for(device_name);
      std::string error;
      std::unique_ptr<tune::TuningDatabase> db;
      if (!device) {
        summary.text = tr("unknown device %1").arg(QString::fromStdString(device_name));
      } else if (!(db = tune::TuningDatabase::open(db_path, true, &error))) {
        summary.text = QString::fromStdString(error);
      } else {
        const std::unique_ptr<cost::CostModel> model = cost::make_analytical_model(*device);
        std::unique_ptr<tune::Executor> executor =
            profiler::make_local_executor(input, options.search, *model, executor_options);
        options.should_stop = [token] { return token.stop_requested(); };
        const tune::TuneResult result = tune::run_tune(
            input, *model, *db, *executor, options, [this, generation](const tune::TuneProgress& p) {
              // Queued to the UI thread, in the order the results were recorded.
              QMetaObject::invokeMethod(
                  this,
                  [this, generation, p] {
                    if (generation != measure_generation_) return;
                    show_measurement(p.schedule, p.median_us, p.outcome, p.measured,
                                     p.budget_left, p.best_us, p.eta_seconds);
                  },
                  Qt::QueuedConnection);
            });
        summary.ok = result.ok;
        if (!result.ok) {
          summary.text = QString::fromStdString(result.error);
          if (result.measured > 0) {
            summary.text += tr(" (%1 candidates were recorded before that)").arg(result.measured);
          }
        } else {
          summary.text =
              tr("%1 measured (%2 failed), %3 already in the database, %4 duplicates skipped")
                  .arg(result.measured)
                  .arg(result.failed)
                  .arg(result.skipped)
                  .arg(result.duplicates);
          if (result.best && result.best->median_us) {
            summary.text += tr(" · best %1 µs (record %2) on %3")
                                .arg(*result.best->median_us, 0, 'f', 2)
                                .arg(result.best->id)
                                .arg(QString::fromStdString(result.key.device_name));
          }
          if (result.stopped) summary.text += tr(" · stopped");
          if (result.exhausted) summary.text += tr(" · no new candidate left");
        }
      }
    } catch (const std::exception& error) {
      summary.text = tr("internal error: %1").arg(QString::fromUtf8(error.what()));
    }
    return [this, generation, summary] {
      if (generation != measure_generation_) return;
      set_measuring(false);
      QString text = summary.text;
      if (unmatched_ > 0 && model_->nodes().empty()) {
        text += tr(" · no search tree to show them in: see History, or Search first");
      } else if (unmatched_ > 0) {
        text += tr(" · %1 measured schedules are not in this tree (mutations; see History)")
                    .arg(unmatched_);
      }
      measure_label_->setText(summary.ok ? text : tr("measurement failed: %1").arg(text));
      Q_EMIT measure_finished(summary.ok, text);
    };
  });
  return true;
}

void SearchPanel::show_measurement(const std::string& schedule, std::optional<double> median_us,
                                   const std::string& outcome, int measured, int budget_left,
                                   std::optional<double> best_us,
                                   std::optional<double> eta_seconds) {
  const QString readable = readable_outcome(outcome);
  if (model_->set_measurement(schedule, median_us, readable) < 0) ++unmatched_;
  QString text = tr("measuring: %1 of %2 · %3").arg(measured).arg(measured + budget_left).arg(readable);
  if (best_us) text += tr(" · best %1 µs").arg(*best_us, 0, 'f', 2);
  if (eta_seconds && budget_left > 0) text += tr(" · about %1 s left").arg(*eta_seconds, 0, 'f', 0);
  measure_label_->setText(text);
  Q_EMIT measurement_recorded(QString::fromStdString(schedule), readable);
}

void SearchPanel::set_spec(const std::string& path, const std::string& text,
                           std::vector<spec::SizeOverride> sizes) {
  path_ = path;
  text_ = text;
  sizes_ = std::move(sizes);
}

void SearchPanel::set_beam(int beam) { beam_->setValue(beam); }

int SearchPanel::selected_node() const {
  const QModelIndex index = tree_->currentIndex();
  return index.isValid() ? model_->data(index, SearchTreeModel::kNodeIdRole).toInt() : -1;
}

sched::Schedule SearchPanel::completed_schedule(int node_id) const {
  const search::SearchNode& node = model_->nodes()[static_cast<size_t>(node_id)];
  sched::Schedule schedule = node.schedule;
  for (const sched::Decision& decision : node.completion.decisions) {
    schedule.decisions.push_back(decision);
  }
  return schedule;
}

bool SearchPanel::start() {
  if (text_.empty()) {
    progress_->setText(tr("Nothing to search: the editor is empty."));
    return false;
  }
  // One search at a time: the previous one stops at its next compile; its result is stale and
  // dropped by the runner, which starts this one as soon as it returns.
  stop_.request_stop();
  stop_ = std::stop_source();
  const uint64_t generation = ++generation_;
  running_ = true;
  search_->setEnabled(false);
  cancel_->setEnabled(true);
  progress_->setText(tr("searching…"));
  // The new search's tree grows from its root as the rounds arrive.
  model_->set_nodes({}, -1);
  tree_updates_ = 0;

  search::SearchInput input;
  input.file = std::make_shared<const SourceFile>(path_, text_);
  input.sizes = sizes_;
  const search::SearchOptions options = search_options();
  const std::string device_name = device_preset();
  std::stop_token token = stop_.get_token();
  const bool complete_pipelines = pipeline_solver_->isChecked();
  const bool check_registers = register_check_->isChecked();
  runner_->post([this, input, options, device_name, token, generation, complete_pipelines,
                 check_registers]() -> TaskRunner::Continuation {
    search::SearchResult result;
    std::string pipeline_summary;
    std::string register_summary;
    try {
      const std::optional<cost::DeviceModel> device = cost::device_model_for(device_name);
      if (!device) {
        result.error = "unknown device " + device_name;
      } else {
        std::unique_ptr<cost::CostModel> model = cost::make_analytical_model(*device);
        ProgressForwarder forwarder(
            this,
            [this, generation](const search::SearchProgress& p) {
              if (generation == generation_) show_progress(p);
            },
            [this, generation](std::vector<search::SearchNode> nodes) {
              if (generation == generation_) show_tree(std::move(nodes));
            });
        result = search::run_search(input, *model, options, &forwarder, token);
        if (result.ok && !token.stop_requested()) {
          // The register check and the pipeline solver, as `nautilus schedule` runs them.
          pipeline::FinishOptions finish_options;
          finish_options.register_check = check_registers;
          finish_options.complete_pipelines = complete_pipelines;
          finish_options.completion.solve.stop = token;
          pipeline::FinishedSchedule finished = pipeline::finish_search(
              input, result, *model, search::lowering_arch(options, *model), finish_options);
          pipeline_summary = std::move(finished.report);
          register_summary = std::move(finished.register_summary);
          result.schedule = std::move(finished.schedule);
          result.estimate = std::move(finished.estimate);
        }
      }
    } catch (const std::exception& error) {
      result.ok = false;
      result.error = std::string("internal error: ") + error.what();
    }
    return [this, generation, result = std::move(result), pipeline_summary,
            register_summary]() mutable {
      if (generation != generation_) return;
      pipeline_summary_ = pipeline_summary;
      register_summary_ = register_summary;
      show_result(std::move(result));
    };
  });
  return true;
}

void SearchPanel::cancel() {
  if (measuring_) {
    measure_stop_.request_stop();
    measure_label_->setText(tr("stopping after the candidates in flight…"));
  }
  if (!running_) return;
  stop_.request_stop();
  progress_->setText(tr("cancelling…"));
}

void SearchPanel::pin_path(int node_id) {
  if (node_id < 0 || node_id >= static_cast<int>(model_->nodes().size())) return;
  pins_ = model_->nodes()[static_cast<size_t>(node_id)].schedule.decisions;
  update_constraints_label();
  start();
}

void SearchPanel::forbid(int node_id) {
  if (node_id < 0 || node_id >= static_cast<int>(model_->nodes().size())) return;
  const search::SearchNode& node = model_->nodes()[static_cast<size_t>(node_id)];
  if (!node.decision) return;
  forbids_.push_back(*node.decision);
  update_constraints_label();
  start();
}

void SearchPanel::clear_constraints() {
  pins_.clear();
  forbids_.clear();
  update_constraints_label();
}

void SearchPanel::update_constraints_label() {
  QString text;
  if (!pins_.empty()) text += tr("pins: %1").arg(decisions_text(pins_));
  if (!forbids_.empty()) {
    if (!text.isEmpty()) text += QStringLiteral("   ");
    text += tr("forbidden: %1").arg(decisions_text(forbids_));
  }
  constraints_->setText(text.isEmpty() ? tr("No pins or forbidden decisions.") : text);
}

void SearchPanel::show_progress(const search::SearchProgress& progress) {
  QString text = tr("%1 s · round %2 · %3 nodes · %4 compiles · phase %5")
                     .arg(progress.seconds, 0, 'f', 1)
                     .arg(progress.rounds)
                     .arg(progress.nodes)
                     .arg(progress.compiles)
                     .arg(QString::fromStdString(progress.phase));
  if (progress.best_us) text += tr(" · best %1 µs").arg(*progress.best_us, 0, 'f', 1);
  progress_->setText(text);
}

void SearchPanel::show_tree(std::vector<search::SearchNode> nodes) {
  const bool first = model_->nodes().empty();
  model_->grow(std::move(nodes), -1);
  ++tree_updates_;
  if (first) tree_->expandToDepth(1);
}

void SearchPanel::show_result(search::SearchResult result) {
  running_ = false;
  search_->setEnabled(true);
  cancel_->setEnabled(measuring_);
  result_ = std::move(result);
  model_->grow(result_.nodes, result_.chosen);
  tree_->expandToDepth(1);
  if (result_.chosen >= 0) {
    const QModelIndex chosen = model_->index_of(result_.chosen);
    for (QModelIndex up = chosen; up.isValid(); up = up.parent()) tree_->expand(up);
    tree_->setCurrentIndex(chosen);
    tree_->scrollTo(chosen);
  }
  const search::SearchStats& stats = result_.stats;
  QString text = tr("%1 nodes (%2 expanded, %3 pruned, %4 leaves), %5 compiles, %6 s%7")
                     .arg(stats.nodes)
                     .arg(stats.expanded)
                     .arg(stats.pruned)
                     .arg(stats.leaves)
                     .arg(stats.compiles)
                     .arg(stats.seconds, 0, 'f', 1)
                     .arg(stats.cancelled ? tr(", cancelled") : QString());
  if (result_.ok && result_.estimate) {
    text = tr("chosen: %1 µs (%2) · ").arg(result_.estimate->microseconds, 0, 'f', 1)
               .arg(QString::fromStdString(result_.model)) + text;
  } else if (!result_.ok) {
    text = tr("no schedule: %1 · ").arg(QString::fromStdString(result_.error)) + text;
  }
  if (!pipeline_summary_.empty()) {
    // "pipeline: kernel C (...)" lines, shortened to their decisions for the status line; the
    // whole text is the tooltip.
    QStringList decided;
    for (const QString& line : QString::fromStdString(pipeline_summary_).split(QLatin1Char('\n'))) {
      const qsizetype arrow = line.indexOf(QStringLiteral("-> "));
      if (arrow >= 0) decided << line.mid(arrow + 3);
    }
    // The register check's verdict when it changed or could not keep the schedule.
    if (!register_summary_.empty()) {
      text += tr(" · registers: %1").arg(QString::fromStdString(register_summary_));
    }
    if (!decided.isEmpty()) text += tr(" · solver: %1").arg(decided.join(QStringLiteral("; ")));
  }
  progress_->setToolTip(QString::fromStdString(pipeline_summary_));
  progress_->setText(text);
  Q_EMIT finished(result_.ok);
  if (result_.ok) Q_EMIT schedule_found(result_.schedule);
}

void SearchPanel::show_node() {
  const int id = selected_node();
  if (id < 0) {
    detail_->clear();
    return;
  }
  const search::SearchNode& node = model_->nodes()[static_cast<size_t>(id)];
  QString text = tr("node %1 · %2 · phase %3\n")
                     .arg(node.id)
                     .arg(QString::fromLatin1(search::node_status_name(node.status)),
                          QString::fromLatin1(search::phase_name(node.phase)));
  if (!node.reason.empty()) text += tr("reason: %1\n").arg(QString::fromStdString(node.reason));
  text += tr("\nschedule:\n");
  for (const sched::Decision& decision : node.schedule.decisions) {
    text += QStringLiteral("  ") + QString::fromStdString(sched::print_decision(decision)) + QLatin1Char('\n');
  }
  if (!node.completion.decisions.empty()) {
    text += tr("default completion (for the estimate):\n");
    for (const sched::Decision& decision : node.completion.decisions) {
      text += QStringLiteral("  ") + QString::fromStdString(sched::print_decision(decision)) + QLatin1Char('\n');
    }
  }
  if (node.estimate) text += QStringLiteral("\n") + QString::fromStdString(cost::describe(*node.estimate));
  detail_->setPlainText(text);
}

}  // namespace nautilus::views
