#include "views/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QColor>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QGuiApplication>
#include <QHelpEvent>
#include <QKeySequence>
#include <QLabel>
#include <QList>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSaveFile>
#include <QSettings>
#include <QShowEvent>
#include <QStatusBar>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextEdit>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>

#include <algorithm>

#include "core/pipeline/complete.h"
#include "views/assets.h"
#include "views/compare_panel.h"
#include "views/cuda_view.h"
#include "views/decisions_model.h"
#include "views/decisions_panel.h"
#include "views/gl/imgui_panel.h"
#include "views/gl/layout_panel.h"
#include "views/gl/pipeline_panel.h"
#include "views/graph_view.h"
#include "views/profiler_panel.h"
#include "views/search_panel.h"
#include "views/tuning_history_panel.h"
#include "views/session.h"
#include "views/shape_panel.h"
#include "views/spec_checker.h"
#include "views/spec_highlighter.h"
#include "views/stage_view.h"
#include "views/teaching_panel.h"

namespace nautilus::views {
namespace {

constexpr const char* kUntitled = "untitled.nt";
constexpr const char* kFileFilter = "Nautilus specs (*.nt);;All files (*)";
constexpr const char* kSessionFilter = "Nautilus Studio sessions (*.json);;All files (*)";
constexpr int kMaxRecentFiles = 10;

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

// Positions in the editor (UTF-16 code units) from byte offsets of its UTF-8 text and back.
int utf16_position(const QByteArray& utf8, int byte) {
  return static_cast<int>(QString::fromUtf8(utf8.left(std::clamp(byte, 0, static_cast<int>(utf8.size())))).size());
}

int utf8_offset(const QString& text, int position) {
  return static_cast<int>(text.left(std::max(0, position)).toUtf8().size());
}

// assets/schedules/<stem>.json next to an assets/specs/<stem>.nt, or "".
QString schedule_for_example(const QString& spec_path) {
  const QFileInfo info(spec_path);
  const QString candidate = QDir(info.dir().filePath(QStringLiteral("../schedules")))
                                .filePath(info.completeBaseName() + QStringLiteral(".json"));
  return QFileInfo::exists(candidate) ? QDir::cleanPath(candidate) : QString();
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks |
                 QMainWindow::AllowNestedDocks);
  editor_ = make_code_view(this);
  editor_->setObjectName(QStringLiteral("spec_editor"));
  editor_->setMinimumWidth(320);
  editor_->setTabStopDistance(editor_->fontMetrics().horizontalAdvance(QLatin1Char(' ')) * 4);
  editor_->viewport()->installEventFilter(this);
  highlighter_ = new SpecHighlighter(editor_->document());
  setCentralWidget(editor_);

  output_ = make_code_view(this);
  output_->setObjectName(QStringLiteral("diagnostics"));
  output_->setReadOnly(true);
  output_->setPlaceholderText(tr("The checked spec or its diagnostics appear here."));
  shapes_ = new ShapePanel(this);
  decisions_ = new DecisionsPanel(this);
  stage_view_ = new StageView(this);
  cuda_view_ = new CudaView(this);
  profiler_ = new ProfilerPanel(this);
  teaching_ = new TeachingPanel(stage_view_, this);
  search_ = new SearchPanel(this);
  history_ = new TuningHistoryPanel(this);
  compare_ = new ComparePanel(this);
  QWidget* layouts_widget = make_gl_panel(true);
  QWidget* pipeline_widget = make_gl_panel(false);

  QDockWidget* shapes = add_dock(tr("Shapes"), QStringLiteral("shapes"), shapes_, Qt::LeftDockWidgetArea);
  QDockWidget* decisions =
      add_dock(tr("Decisions"), QStringLiteral("decisions"), decisions_, Qt::LeftDockWidgetArea);
  QDockWidget* stages = add_dock(tr("Stages"), QStringLiteral("stages"), stage_view_, Qt::RightDockWidgetArea);
  QDockWidget* cuda = add_dock(tr("CUDA"), QStringLiteral("cuda"), cuda_view_, Qt::RightDockWidgetArea);
  QDockWidget* search = add_dock(tr("Search"), QStringLiteral("search"), search_, Qt::RightDockWidgetArea);
  QDockWidget* history =
      add_dock(tr("History"), QStringLiteral("history"), history_, Qt::RightDockWidgetArea);
  QDockWidget* compare = add_dock(tr("Compare"), QStringLiteral("compare"), compare_, Qt::RightDockWidgetArea);
  QDockWidget* diagnostics =
      add_dock(tr("Diagnostics"), QStringLiteral("diagnostics"), output_, Qt::BottomDockWidgetArea);
  QDockWidget* profiler =
      add_dock(tr("Profiler"), QStringLiteral("profiler"), profiler_, Qt::RightDockWidgetArea);
  QDockWidget* teaching =
      add_dock(tr("Teaching"), QStringLiteral("teaching"), teaching_, Qt::BottomDockWidgetArea);
  // Layouts joins the right-hand tabs (its grids need height); the pipeline's Gantt chart is wide
  // and a few rows tall, which suits the bottom strip.
  QDockWidget* layouts =
      add_dock(tr("Layouts"), QStringLiteral("layouts"), layouts_widget, Qt::RightDockWidgetArea);
  QDockWidget* pipeline =
      add_dock(tr("Pipeline"), QStringLiteral("pipeline"), pipeline_widget, Qt::BottomDockWidgetArea);
  splitDockWidget(shapes, decisions, Qt::Vertical);
  tabifyDockWidget(stages, cuda);
  tabifyDockWidget(cuda, search);
  tabifyDockWidget(search, history);
  tabifyDockWidget(history, compare);
  tabifyDockWidget(compare, profiler);
  tabifyDockWidget(profiler, layouts);
  tabifyDockWidget(diagnostics, teaching);
  tabifyDockWidget(teaching, pipeline);
  stages->raise();
  diagnostics->raise();
  resize(1600, 1000);

  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("status"));
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 0);  // busy indicator: the pipeline has no fraction to report
  progress_->setMaximumWidth(120);
  progress_->setMaximumHeight(14);
  progress_->hide();
  cancel_ = new QToolButton(this);
  cancel_->setText(tr("Cancel"));
  cancel_->setToolTip(tr("Drop the compilation in progress (Esc)"));
  cancel_->hide();
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  statusBar()->addPermanentWidget(status_);
  origin_ = new QLabel(this);
  origin_->setObjectName(QStringLiteral("schedule_origin"));
  statusBar()->addWidget(origin_, 1);
  use_best_measured_ = new QToolButton(this);
  use_best_measured_->setObjectName(QStringLiteral("offer_best_measured"));
  use_best_measured_->setText(tr("Use best measured"));
  use_best_measured_->setToolTip(tr("Compile the tuning database's fastest validated schedule of "
                                    "this spec at these sizes on the local GPU"));
  use_best_measured_->hide();
  statusBar()->addWidget(use_best_measured_);

  checker_ = new SpecChecker(this);
  pipeline_ = new PipelineRunner(this);
  connect(checker_, &SpecChecker::checked, this, &MainWindow::show_result);
  connect(editor_, &QPlainTextEdit::textChanged, this, [this] {
    schedule_check();
    schedule_compile(false);
  });
  connect(editor_->document(), &QTextDocument::modificationChanged, this,
          &QWidget::setWindowModified);
  connect(pipeline_, &PipelineRunner::started, this, [this] {
    progress_->show();
    cancel_->show();
    status_->setText(tr("compiling…"));
  });
  connect(pipeline_, &PipelineRunner::pass_finished, this,
          [this](quint64, const QString& stage, const QString& pass) {
            status_->setText(tr("compiling… %1 done (stage %2)").arg(pass, stage));
          });
  connect(pipeline_, &PipelineRunner::finished, this, &MainWindow::show_compilation);
  connect(pipeline_, &PipelineRunner::cancelled, this, [this] {
    progress_->hide();
    cancel_->hide();
    status_->setText(tr("compilation cancelled"));
  });
  connect(cancel_, &QToolButton::clicked, pipeline_, &PipelineRunner::cancel);
  connect(shapes_, &ShapePanel::overrides_changed, this, [this] { schedule_compile(true); });
  schedule_checker_ = new TaskRunner(this);
  decisions_->model()->set_async_validator(
      [this](const sched::Schedule& schedule, DecisionsModel::ValidationDone done) {
        // Applying a schedule and tiling the result is a compile of the spec: it runs on the
        // checker's worker. The MA placement and the CUDA emitter run in the background compile
        // that follows an accepted edit, whose errors the panel also shows.
        PipelineInputs inputs = current_inputs();
        inputs.schedule = schedule;
        inputs.last_stage = driver::Stage::VRTile;
        schedule_checker_->post([inputs = std::move(inputs),
                                 done = std::move(done)]() -> TaskRunner::Continuation {
          const PipelineResult result = run_pipeline(inputs);
          std::string reason;
          if (!result.compilation) {
            reason = result.error.toStdString();
          } else if (result.compilation->spec && !result.compilation->diagnostics->has_errors()) {
            // (A spec that does not check has nothing to validate the schedule against.)
            reason = !result.compilation->schedule_error.empty()
                         ? result.compilation->schedule_error
                         : result.compilation->internal_error;
          }
          return [done, reason] { done(reason); };
        });
      });
  connect(decisions_->model(), &DecisionsModel::schedule_changed, this,
          [this] { schedule_compile(true); });
  connect(decisions_->model(), &DecisionsModel::pins_changed, this, &MainWindow::sync_search_inputs);
  connect(decisions_, &DecisionsPanel::load_schedule_requested, this,
          &MainWindow::load_schedule_interactive);
  connect(search_, &SearchPanel::schedule_found, this, [this](const sched::Schedule& schedule) {
    adopt_schedule(schedule, tr("schedule from the search"));
  });
  // Measure runs candidates with the Profiler panel's runner command.
  search_->set_runner_command(profiler_->runner_command().toStdString());
  connect(profiler_, &ProfilerPanel::runner_command_changed, this,
          [this](const QString& command) { search_->set_runner_command(command.toStdString()); });
  // Every measurement, and the end of a run, shows in the History panel.
  connect(search_, &SearchPanel::measurement_recorded, history_, &TuningHistoryPanel::refresh);
  connect(search_, &SearchPanel::measure_finished, history_, &TuningHistoryPanel::refresh);
  connect(history_, &TuningHistoryPanel::schedule_chosen, this,
          [this](const sched::Schedule& schedule, const QString& origin) {
            adopt_schedule(schedule, origin);
          });
  connect(history_, &TuningHistoryPanel::refreshed, this, [this] {
    if (!offer_best_measured_) return;
    offer_best_measured_ = false;
    if (const std::optional<tune::TuningRecord> best = history_->local_best()) {
      origin_->setText(tr("the tuning database has a measured schedule of this spec: %1")
                           .arg(best_measured_origin(*best)));
      use_best_measured_->show();
    }
  });
  connect(use_best_measured_, &QToolButton::clicked, this, [this] {
    // The offer is the local GPU's best: show that device, then use its best.
    history_->show_device(QString::fromStdString(history_->local_device()));
    history_->use_best();
  });
  connect(search_, &SearchPanel::compare_requested, this,
          [this](int slot, const sched::Schedule& schedule, const QString& origin) {
            compare_->set_slot(static_cast<ComparePanel::Slot>(slot), schedule, origin);
            dock(QStringLiteral("compare"))->raise();
          });
  connect(profiler_, &ProfilerPanel::compare_requested, this,
          [this](int slot, const sched::Schedule& schedule, const QString& origin,
                 const std::vector<KernelTiming>& measured) {
            compare_->set_slot(static_cast<ComparePanel::Slot>(slot), schedule, origin, measured);
            dock(QStringLiteral("compare"))->raise();
          });
  connect(stage_view_, &StageView::status_message, this,
          [this](const QString& message) { statusBar()->showMessage(message, 4000); });

  // Provenance links between the views.
  connect(stage_view_, &StageView::statement_selected, this,
          [this](int statement, int begin, int end) { show_statement(statement, begin, end, stage_view_); });
  connect(stage_view_, &StageView::ma_op_selected, this, [this](const QString& op_text) {
    if (linking_) return;
    linking_ = true;
    cuda_view_->show_ma_op(op_text);
    linking_ = false;
  });
  // Not raised: Layouts shares the stage view's tab group, and the graph should stay in view.
  connect(stage_view_->graph_view(), &GraphView::node_selected, this, &MainWindow::show_tile_of_node);
  connect(cuda_view_, &CudaView::spec_line_selected, this, [this](int line) {
    if (linking_ || !compilation_ || !compilation_->spec) return;
    const auto& statements = compilation_->spec->program.statements;
    for (size_t i = 0; i < statements.size(); ++i) {
      if (!statements[i].range.valid) continue;
      if (static_cast<int>(compilation_->file->line_column(statements[i].range.begin).line) == line) {
        show_statement(static_cast<int>(i), -1, -1, cuda_view_);
        return;
      }
    }
  });
  connect(cuda_view_, &CudaView::ma_value_selected, this, [this](const QString& value) {
    const driver::Snapshot* shown = stage_view_->snapshot();
    if (linking_ || shown == nullptr || shown->stage != driver::Stage::MATile) return;
    GraphView* graph = stage_view_->graph_view();
    const GraphLayoutPtr& layout = graph->graph_layout();
    if (!layout) return;
    for (const LayoutNode& node : layout->nodes) {
      if (node.id.endsWith(QLatin1Char('/') + value)) {
        linking_ = true;
        graph->select_node(node.id, true);
        linking_ = false;
        return;
      }
    }
  });
  connect(editor_, &QPlainTextEdit::cursorPositionChanged, this, [this] {
    if (linking_) return;
    const int statement = statement_at(utf8_offset(editor_->toPlainText(), editor_->textCursor().position()));
    if (statement >= 0 && statement != stage_view_->selected_statement()) {
      show_statement(statement, -1, -1, editor_);
    }
  });

  build_menus();
  default_state_ = saveState();
  set_document(QString(), QString(), QString::fromLatin1(kUntitled));
  restore_layout();
}

MainWindow::~MainWindow() = default;

QDockWidget* MainWindow::add_dock(const QString& title, const QString& name, QWidget* widget,
                                  Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(name + QStringLiteral("_dock"));
  dock->setWidget(widget);
  addDockWidget(area, dock);
  docks_.push_back(dock);
  return dock;
}

QStringList MainWindow::panel_names() {
  return {QStringLiteral("diagnostics"), QStringLiteral("shapes"),   QStringLiteral("decisions"),
          QStringLiteral("stages"),      QStringLiteral("cuda"),     QStringLiteral("profiler"),
          QStringLiteral("teaching"),    QStringLiteral("search"),   QStringLiteral("history"),
          QStringLiteral("compare"),     QStringLiteral("layouts"),  QStringLiteral("pipeline")};
}

QWidget* MainWindow::make_gl_panel(bool layouts) {
  if (gl_panels_supported()) {
    if (layouts) return layout_ = new LayoutPanel(this);
    pipeline_panel_ = new PipelinePanel(this);
    // "Use in schedule" appends the solver's pipeline decision, validated like a typed one.
    pipeline_panel_->set_use_decision([this](const sched::Decision& decision) {
      DecisionsModel* model = decisions_->model();
      model->insert(model->rowCount(), QString::fromStdString(sched::print_decision(decision)));
    });
    return pipeline_panel_;
  }
  auto* label = new QLabel(
      tr("The %1 panel draws with OpenGL, which Qt's \"%2\" platform cannot show.\n"
         "Open Nautilus Studio on a display (xcb or wayland); for a screenshot without one, run "
         "nautilus-studio --screenshot under xvfb-run -a with QT_QPA_PLATFORM=xcb.")
          .arg(layouts ? tr("Layouts") : tr("Pipeline"), QGuiApplication::platformName()),
      this);
  label->setObjectName(layouts ? QStringLiteral("layouts_placeholder")
                               : QStringLiteral("pipeline_placeholder"));
  label->setWordWrap(true);
  label->setAlignment(Qt::AlignCenter);
  label->setMargin(12);
  return label;
}

void MainWindow::show_ma_module(const std::shared_ptr<const driver::Compilation>& compilation) {
  const matile::ModulePtr module = compilation ? compilation->ma_module : nullptr;
  // A compilation that stops before MA tile IR (a typo while editing) keeps the last pictures, so
  // the selection survives; the titles say they are not of the current text.
  const QString stale = module ? QString() : tr(" (last MA tile IR)");
  dock(QStringLiteral("layouts"))->setWindowTitle(tr("Layouts") + stale);
  dock(QStringLiteral("pipeline"))->setWindowTitle(tr("Pipeline") + stale);
  if (!module) return;
  if (layout_ != nullptr) {
    std::vector<std::string> statements;
    if (compilation->spec) {
      for (const spec::Statement& statement : compilation->spec->program.statements) statements.push_back(statement.name);
    }
    layout_->set_statement_names(std::move(statements));
    layout_->set_module(module);
  }
  if (pipeline_panel_ != nullptr) {
    pipeline_panel_->set_kernel_blocks(compilation->kernel_blocks, pipeline::held_ring_slots(*compilation));
    pipeline_panel_->set_module(module);
  }
}

void MainWindow::show_tile_of_node(const QString& node_id) {
  const driver::Snapshot* shown = stage_view_->snapshot();
  if (layout_ == nullptr || !layout_->module() || shown == nullptr ||
      shown->stage != driver::Stage::MATile) {
    return;
  }
  // The MA tile IR printer names value nodes "op:KERNEL/VALUE" and shared allocations
  // "shared:KERNEL/ALLOC" (kernel names have no '/'); ops without a result have no tile.
  const int colon = static_cast<int>(node_id.indexOf(QLatin1Char(':')));
  const QString kind = node_id.left(colon);
  if (colon < 0 || (kind != QStringLiteral("op") && kind != QStringLiteral("shared"))) return;
  const int slash = static_cast<int>(node_id.indexOf(QLatin1Char('/'), colon + 1));
  if (slash < 0) return;
  const std::string kernel = node_id.mid(colon + 1, slash - colon - 1).toStdString();
  const std::string tile = node_id.mid(slash + 1).toStdString();
  const auto& kernels = layout_->module()->kernels;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!kernels[i] || kernels[i]->name != kernel) continue;
    if (layout_->kernel_index() != static_cast<int>(i)) layout_->select_kernel(static_cast<int>(i));
    if (layout_->select_tile(tile)) {
      statusBar()->showMessage(tr("Layouts shows %1%2 of %3")
                                   .arg(kind == QStringLiteral("op") ? QStringLiteral("%") : QString(),
                                        QString::fromStdString(tile), QString::fromStdString(kernel)),
                               4000);
    }
    return;
  }
}

QDockWidget* MainWindow::dock(const QString& name) const {
  for (QDockWidget* dock : docks_) {
    if (dock->objectName() == name + QStringLiteral("_dock")) return dock;
  }
  return nullptr;
}

std::unique_ptr<QSettings> MainWindow::settings() const {
  const QString file = qEnvironmentVariable("NAUTILUS_STUDIO_SETTINGS");
  if (!file.isEmpty()) return std::make_unique<QSettings>(file, QSettings::IniFormat);
  return std::make_unique<QSettings>(QStringLiteral("Nautilus"), QStringLiteral("Nautilus Studio"));
}

void MainWindow::restore_layout() {
  const auto stored = settings();
  set_theme(parse_theme(stored->value(QStringLiteral("theme")).toString()));
  const QByteArray geometry = stored->value(QStringLiteral("geometry")).toByteArray();
  if (!geometry.isEmpty()) restoreGeometry(geometry);
  const QByteArray state = stored->value(QStringLiteral("window_state")).toByteArray();
  layout_restored_ = !state.isEmpty() && restoreState(state);
  rebuild_recent_menu();
}

void MainWindow::apply_default_dock_sizes() {
  // Dock sizes only take once the window has its size, hence on the first show.
  QDockWidget* shapes = dock(QStringLiteral("shapes"));
  QDockWidget* decisions = dock(QStringLiteral("decisions"));
  QDockWidget* stages = dock(QStringLiteral("stages"));
  QDockWidget* diagnostics = dock(QStringLiteral("diagnostics"));
  resizeDocks({shapes, decisions}, {170, 500}, Qt::Vertical);
  resizeDocks({shapes, stages}, {width() * 22 / 100, width() * 52 / 100}, Qt::Horizontal);
  resizeDocks({diagnostics}, {height() * 18 / 100}, Qt::Vertical);
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  // After the first layout pass: resizeDocks before it is measured against zero-sized docks.
  if (!shown_once_ && !layout_restored_) {
    QTimer::singleShot(0, this, &MainWindow::apply_default_dock_sizes);
  }
  shown_once_ = true;
}

void MainWindow::save_layout() {
  const auto stored = settings();
  stored->setValue(QStringLiteral("geometry"), saveGeometry());
  stored->setValue(QStringLiteral("window_state"), saveState());
  stored->setValue(QStringLiteral("theme"), theme_name(theme_));
}

void MainWindow::set_theme(Theme theme) {
  theme_ = theme;
  apply_theme(theme);
  stage_view_->refresh_colors();
  cuda_view_->refresh_colors();
  teaching_->refresh_colors();
  compare_->refresh_colors();
  // The ImGui panels take their style from the palette at their next frame.
  if (layout_ != nullptr) layout_->request_frames();
  if (pipeline_panel_ != nullptr) pipeline_panel_->request_frames();
  highlighter_->rehighlight();
}

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&New"), QKeySequence::New, this, &MainWindow::new_document);
  file->addAction(tr("&Open…"), QKeySequence::Open, this, &MainWindow::open_interactive);
  file->addAction(tr("Open &session…"), QKeySequence(tr("Ctrl+Shift+O")), this,
                  &MainWindow::open_session_interactive);
  recent_menu_ = file->addMenu(tr("Open &recent"));
  file->addSeparator();
  file->addAction(tr("&Save"), QKeySequence::Save, this, &MainWindow::save_interactive);
  file->addAction(tr("Save &As…"), QKeySequence::SaveAs, this, &MainWindow::save_as_interactive);
  file->addAction(tr("Save s&ession…"), QKeySequence(tr("Ctrl+Alt+S")), this,
                  &MainWindow::save_session_interactive);
  file->addAction(tr("&Load schedule…"), this, &MainWindow::load_schedule_interactive);
  file->addSeparator();
  file->addAction(tr("Export &graph (SVG/PNG)…"), QKeySequence(tr("Ctrl+E")), this,
                  &MainWindow::export_graph_interactive);
  file->addAction(tr("Export stage &text…"), QKeySequence(tr("Ctrl+Shift+E")), this,
                  &MainWindow::export_stage_text_interactive);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* examples = menuBar()->addMenu(tr("E&xamples"));
  const QString assets = find_assets_dir();
  if (assets.isEmpty()) {
    examples->addAction(tr("(assets directory not found; set NAUTILUS_ASSETS_DIR)"))
        ->setEnabled(false);
  } else {
    const QString specs = QDir(assets).filePath(QStringLiteral("specs"));
    add_examples(examples, specs);
    // Specs with deliberate mistakes show what each diagnostic looks like.
    const QString errors = QDir(specs).filePath(QStringLiteral("errors"));
    if (!list_specs(errors).isEmpty()) {
      examples->addSeparator();
      add_examples(examples->addMenu(tr("&Errors")), errors);
    }
  }

  QMenu* pipeline = menuBar()->addMenu(tr("&Pipeline"));
  pipeline->addAction(tr("&Compile now"), QKeySequence(tr("Ctrl+Return")), this,
                      [this] { schedule_compile(true); });
  pipeline->addAction(tr("C&ancel compilation"), QKeySequence(Qt::Key_Escape), pipeline_,
                      &PipelineRunner::cancel);
  pipeline->addSeparator();
  pipeline->addAction(tr("&Next pass"), QKeySequence(tr("Alt+Right")), stage_view_,
                      &StageView::next_pass);
  pipeline->addAction(tr("&Previous pass"), QKeySequence(tr("Alt+Left")), stage_view_,
                      &StageView::previous_pass);
  QMenu* target = pipeline->addMenu(tr("&Target"));
  auto* targets = new QActionGroup(this);
  for (const auto& [arch, text] : {std::pair<const char*, QString>{"sm_80", tr("sm_&80 (Ampere: cp.async, mma.sync)")},
                                   {"sm_90a", tr("sm_&90a (Hopper: TMA, wgmma, warp specialization)")}}) {
    QAction* action = target->addAction(text);
    action->setCheckable(true);
    action->setChecked(target_arch_ == arch);
    action->setData(QString::fromLatin1(arch));
    action->setObjectName(QStringLiteral("target_") + QString::fromLatin1(arch));
    targets->addAction(action);
    connect(action, &QAction::triggered, this, [this, arch = std::string(arch)] { set_target_arch(arch); });
    target_actions_.push_back(action);
  }
  QMenu* stages = pipeline->addMenu(tr("Show &stage"));
  int key = 1;
  for (driver::Stage stage : driver::all_stages()) {
    stages->addAction(QString::fromLatin1(driver::stage_name(stage)),
                      QKeySequence(tr("Ctrl+%1").arg(key++)), this, [this, stage] {
                        stage_view_->select_stage(stage);
                        dock(QStringLiteral("stages"))->raise();
                      });
  }
  QAction* hide_unchanged = pipeline->addAction(tr("&Hide unchanged passes"));
  hide_unchanged->setCheckable(true);
  connect(hide_unchanged, &QAction::toggled, stage_view_, &StageView::set_hide_unchanged);
  pipeline->addSeparator();
  pipeline->addAction(tr("&Search schedule"), QKeySequence(tr("Ctrl+Shift+R")), this, [this] {
    dock(QStringLiteral("search"))->raise();
    sync_search_inputs();
    search_->start();
  });
  for (int slot = 0; slot < 2; ++slot) {
    pipeline->addAction(slot == 0 ? tr("Compare current schedule as &A") : tr("Compare current schedule as &B"),
                        this, [this, slot] {
                          sync_search_inputs();
                          compare_->set_slot(static_cast<ComparePanel::Slot>(slot),
                                             decisions_->model()->schedule(), tr("current schedule"));
                          dock(QStringLiteral("compare"))->raise();
                        });
  }
  pipeline->addAction(tr("&Run on GPU"), QKeySequence(tr("Ctrl+R")), this, [this] {
    dock(QStringLiteral("profiler"))->raise();
    profiler_->run();
  });

  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->addAction(tr("&Find node…"), QKeySequence::Find, this, [this] {
    dock(QStringLiteral("stages"))->raise();
    stage_view_->show_tab(StageView::GraphTab);
    if (auto* find = stage_view_->findChild<QWidget*>(QStringLiteral("graph_find"))) find->setFocus();
  });
  view->addAction(tr("Zoom &in"), QKeySequence::ZoomIn, this,
                  [this] { stage_view_->graph_view()->zoom_by(1.25); });
  view->addAction(tr("Zoom &out"), QKeySequence::ZoomOut, this,
                  [this] { stage_view_->graph_view()->zoom_by(0.8); });
  view->addAction(tr("&Fit graph"), QKeySequence(tr("Ctrl+0")), this,
                  [this] { stage_view_->graph_view()->fit(); });
  view->addAction(tr("&Graph / text / diff"), QKeySequence(tr("Ctrl+G")), this, [this] {
    stage_view_->show_tab(static_cast<StageView::Tab>((stage_view_->current_tab() + 1) % 3));
  });
  view->addAction(tr("&Teaching mode"), QKeySequence(tr("F9")), this, [this] {
    QDockWidget* teaching = dock(QStringLiteral("teaching"));
    teaching->show();
    teaching->raise();
    stage_view_->show_tab(StageView::DiffTab);
  });
  view->addSeparator();
  QMenu* theme = view->addMenu(tr("T&heme"));
  auto* themes = new QActionGroup(this);
  for (Theme choice : {Theme::Light, Theme::Dark}) {
    QAction* action = theme->addAction(choice == Theme::Light ? tr("&Light") : tr("&Dark"));
    action->setCheckable(true);
    action->setChecked(choice == theme_);
    action->setObjectName(QStringLiteral("theme_") + theme_name(choice));
    themes->addAction(action);
    connect(action, &QAction::triggered, this, [this, choice] { set_theme(choice); });
  }
  view->addSeparator();
  QMenu* panels = view->addMenu(tr("&Panels"));
  for (QDockWidget* dock : docks_) panels->addAction(dock->toggleViewAction());
  view->addAction(tr("&Reset layout"), this, [this] {
    restoreState(default_state_);
    apply_default_dock_sizes();
  });
}

void MainWindow::add_examples(QMenu* menu, const QString& directory) {
  const QStringList paths = list_specs(directory);
  if (paths.isEmpty()) {
    menu->addAction(tr("(no .nt files in %1)").arg(directory))->setEnabled(false);
  }
  for (const QString& path : paths) {
    QString label = QFileInfo(path).completeBaseName();
    if (!schedule_for_example(path).isEmpty()) label += tr("  (with schedule)");
    menu->addAction(label, this, [this, path] { open_example_interactive(path); });
  }
}

QStringList MainWindow::recent_files() const {
  return settings()->value(QStringLiteral("recent_files")).toStringList();
}

void MainWindow::remember_recent(const QString& path) {
  QStringList files = recent_files();
  const QString absolute = QFileInfo(path).absoluteFilePath();
  files.removeAll(absolute);
  files.prepend(absolute);
  while (files.size() > kMaxRecentFiles) files.removeLast();
  settings()->setValue(QStringLiteral("recent_files"), files);
  rebuild_recent_menu();
}

void MainWindow::rebuild_recent_menu() {
  if (recent_menu_ == nullptr) return;
  recent_menu_->clear();
  const QStringList files = recent_files();
  if (files.isEmpty()) recent_menu_->addAction(tr("(none)"))->setEnabled(false);
  for (const QString& path : files) {
    recent_menu_->addAction(path, this, [this, path] {
      if (!maybe_save()) return;
      QString error;
      const bool ok = path.endsWith(QStringLiteral(".json")) ? open_session(path, &error)
                                                              : open_file(path, &error);
      if (!ok) QMessageBox::warning(this, tr("Open recent"), error);
    });
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
  remember_recent(path);
  return true;
}

bool MainWindow::open_example(const QString& path, QString* error) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    if (error != nullptr) *error = tr("cannot open %1: %2").arg(path, file.errorString());
    return false;
  }
  sched::Schedule schedule;
  const QString schedule_path = schedule_for_example(path);
  if (!schedule_path.isEmpty()) {
    std::string reason;
    auto loaded = sched::read_schedule_file(schedule_path.toStdString(), &reason);
    if (loaded) schedule = *loaded;
  }
  decisions_->model()->set_schedule(schedule);
  shapes_->set_overrides({});
  // A copy: Save asks where to put it.
  set_document(QString::fromUtf8(file.readAll()), QString(), QFileInfo(path).fileName());
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
  remember_recent(path);
  // Diagnostics name the document, which may have been renamed.
  schedule_check();
  return true;
}

bool MainWindow::load_schedule(const QString& path, QString* error) {
  std::string reason;
  auto schedule = sched::read_schedule_file(path.toStdString(), &reason);
  if (!schedule) {
    if (error != nullptr) *error = QString::fromStdString(reason);
    return false;
  }
  decisions_->model()->set_schedule(*schedule);
  origin_->setText(tr("schedule file %1").arg(QFileInfo(path).fileName()));
  use_best_measured_->hide();
  schedule_compile(true);
  return true;
}

Session MainWindow::current_session() const {
  Session session;
  session.spec_path = file_path_.toStdString();
  session.spec_name = document_name_.toStdString();
  session.spec_text = editor_->toPlainText().toStdString();
  for (const spec::SizeOverride& size : shapes_->overrides()) {
    session.sizes.emplace_back(size.name, size.value);
  }
  session.schedule = decisions_->model()->schedule();
  session.pins = decisions_->model()->pins();
  session.runner_command = profiler_->runner_command().toStdString();
  session.arch = target_arch_;
  session.runs = profiler_->history()->records();
  return session;
}

bool MainWindow::save_session_to(const QString& path, QString* error) {
  if (!save_session(path, current_session(), error)) return false;
  remember_recent(path);
  return true;
}

bool MainWindow::open_session(const QString& path, QString* error) {
  Session session;
  if (!load_session(path, &session, error)) return false;
  decisions_->model()->set_schedule(session.schedule, session.pins);
  shapes_->set_overrides(session.sizes);
  profiler_->set_runner_command(QString::fromStdString(session.runner_command));
  profiler_->history()->set_records(session.runs);
  for (QAction* action : target_actions_) {
    action->setChecked(action->data().toString().toStdString() == session.arch);
  }
  target_arch_ = session.arch;  // set_document below recompiles
  // The spec keeps its file when that still holds the session's text; otherwise it is a copy.
  QString spec_path = QString::fromStdString(session.spec_path);
  if (!spec_path.isEmpty()) {
    QFile file(spec_path);
    if (!file.open(QIODevice::ReadOnly) ||
        file.readAll() != QByteArray::fromStdString(session.spec_text)) {
      spec_path.clear();
    }
  }
  QString name = QString::fromStdString(session.spec_name);
  if (name.isEmpty()) name = QString::fromLatin1(kUntitled);
  set_document(QString::fromStdString(session.spec_text), spec_path, name);
  remember_recent(path);
  return true;
}

void MainWindow::set_document(const QString& text, const QString& path, const QString& name) {
  file_path_ = path;
  document_name_ = name;
  provenance_begin_ = provenance_end_ = -1;
  {
    // One compile for the new document, started below, not a debounced one per signal.
    const QSignalBlocker blocker(editor_);
    editor_->setPlainText(text);
  }
  editor_->document()->setModified(false);
  update_title();
  // A freshly loaded document is checked and compiled at once: there is no typing to wait for.
  schedule_check();
  checker_->check_now();
  schedule_compile(true);
  // The History panel reads the new spec's records at once (no debounce): its refresh offers a
  // best measured schedule when the database has one.
  origin_->setText(QString());
  use_best_measured_->hide();
  offer_best_measured_ = true;
  history_->refresh();
}

void MainWindow::schedule_check() {
  checker_->set_source(document_name_, editor_->toPlainText());
}

PipelineInputs MainWindow::current_inputs() const {
  PipelineInputs inputs;
  inputs.path = document_name_.toStdString();
  inputs.text = editor_->toPlainText().toStdString();
  inputs.sizes = shapes_->overrides();
  inputs.schedule = decisions_->model()->schedule();
  inputs.last_stage = driver::Stage::Cuda;
  inputs.arch = target_arch_;
  return inputs;
}

void MainWindow::set_target_arch(const std::string& arch) {
  for (QAction* action : target_actions_) {
    action->setChecked(action->data().toString().toStdString() == arch);
  }
  if (arch == target_arch_) return;
  target_arch_ = arch;
  schedule_compile(true);
}

void MainWindow::adopt_schedule(const sched::Schedule& schedule, const QString& origin) {
  // Pins stay on the decisions the new schedule still has.
  const sched::Schedule& old = decisions_->model()->schedule();
  const std::vector<bool>& old_pins = decisions_->model()->pins();
  std::vector<bool> pins;
  for (const sched::Decision& decision : schedule.decisions) {
    bool pinned = false;
    for (size_t i = 0; i < old.decisions.size() && i < old_pins.size(); ++i) {
      if (old.decisions[i] == decision && old_pins[i]) pinned = true;
    }
    pins.push_back(pinned);
  }
  decisions_->model()->set_schedule(schedule, pins);
  origin_->setText(origin);
  offer_best_measured_ = false;
  use_best_measured_->hide();
  schedule_compile(true);
}

void MainWindow::set_tuning_database(const QString& path) {
  search_->set_database_path(path);
  history_->set_database_path(path);
  history_->refresh();
}

void MainWindow::set_cuda_driver(const std::string& library) {
  search_->set_driver_library(library);
  history_->set_driver_library(library);
  history_->refresh();
}

void MainWindow::sync_search_inputs() {
  const PipelineInputs inputs = current_inputs();
  search_->set_spec(inputs.path, inputs.text, inputs.sizes);
  history_->set_spec(inputs.path, inputs.text, inputs.sizes);
  history_->set_device_preset(search_->device_preset());
  compare_->set_spec(inputs);
  std::vector<sched::Decision> pinned;
  const DecisionsModel* decisions = decisions_->model();
  for (size_t i = 0; i < decisions->schedule().decisions.size() && i < decisions->pins().size(); ++i) {
    if (decisions->pins()[i]) pinned.push_back(decisions->schedule().decisions[i]);
  }
  search_->set_extra_pins(std::move(pinned));
}

void MainWindow::schedule_compile(bool now) {
  sync_search_inputs();
  const PipelineInputs inputs = current_inputs();
  pipeline_->set_inputs(inputs);
  if (now) pipeline_->run_now();
}

void MainWindow::show_result(const SpecCheckResult& result) {
  output_->setPlainText(result.output);
  diagnostics_ = result.diagnostics;
  refresh_editor_selections();
  if (!result.ok) status_->setText(plural(result.error_count, "error"));
  Q_EMIT check_finished(result.ok);
}

void MainWindow::show_compilation(const PipelineResult& result) {
  progress_->hide();
  cancel_->hide();
  compilation_ = result.compilation;
  const PipelineInputs& inputs = pipeline_->inputs();
  stage_view_->set_compilation(compilation_, result.generation);
  profiler_->set_compilation(compilation_, inputs);
  show_ma_module(compilation_);
  if (!compilation_) {
    status_->setText(result.error);
    cuda_view_->set_cuda(nullptr, result.error);
    Q_EMIT pipeline_finished(false);
    return;
  }
  if (compilation_->spec) shapes_->show_sizes(compilation_->spec->sizes);
  QString why_not;
  if (!compilation_->internal_error.empty()) {
    why_not = tr("internal error: %1").arg(QString::fromStdString(compilation_->internal_error));
  } else if (!compilation_->schedule_error.empty()) {
    why_not = QString::fromStdString(compilation_->schedule_error);
  } else if (!compilation_->spec || compilation_->diagnostics->has_errors()) {
    why_not = tr("The spec has errors (see Diagnostics).");
  }
  decisions_->show_schedule_error(
      compilation_->schedule_error.empty() ? QString() : QString::fromStdString(compilation_->schedule_error));
  cuda_view_->set_cuda(compilation_->cuda, why_not);
  const bool ok = compilation_->ok() && compilation_->cuda != nullptr;
  if (ok) {
    status_->setText(tr("compiled in %1 ms: %2 passes, %3")
                         .arg(result.elapsed_ms, 0, 'f', 0)
                         .arg(compilation_->log.size())
                         .arg(plural(static_cast<int>(compilation_->cuda->kernels.size()), "kernel")));
  } else {
    status_->setText(why_not);
  }
  if (stage_view_->selected_statement() >= 0) {
    show_statement(stage_view_->selected_statement(), -1, -1, nullptr);
  }
  Q_EMIT pipeline_finished(ok);
}

int MainWindow::statement_at(int offset) const {
  if (!compilation_ || !compilation_->spec) return -1;
  const auto& statements = compilation_->spec->program.statements;
  for (size_t i = 0; i < statements.size(); ++i) {
    const SourceRange& range = statements[i].range;
    if (range.valid && offset >= static_cast<int>(range.begin) && offset <= static_cast<int>(range.end)) {
      // Size bindings (`let`) implement no IR; only statements that define tensors count.
      if (std::find(compilation_->spec->definitions.begin(), compilation_->spec->definitions.end(),
                    static_cast<int>(i)) != compilation_->spec->definitions.end()) {
        return static_cast<int>(i);
      }
    }
  }
  return -1;
}

void MainWindow::show_statement(int statement, int begin, int end, QObject* origin) {
  if (linking_ || !compilation_ || !compilation_->spec) return;
  const auto& statements = compilation_->spec->program.statements;
  if (statement < 0 || statement >= static_cast<int>(statements.size())) return;
  linking_ = true;
  const SourceRange& range = statements[static_cast<size_t>(statement)].range;
  // The editor's text is what was compiled (the compile of newer text replaces this one).
  const QByteArray utf8 = editor_->toPlainText().toUtf8();
  if (begin < 0 || end <= begin) {
    begin = range.valid ? static_cast<int>(range.begin) : -1;
    end = range.valid ? static_cast<int>(range.end) : -1;
  }
  if (origin != editor_ && begin >= 0) {
    provenance_begin_ = utf16_position(utf8, begin);
    provenance_end_ = utf16_position(utf8, end);
    refresh_editor_selections();
    QTextCursor cursor(editor_->document());
    cursor.setPosition(provenance_begin_);
    editor_->setTextCursor(cursor);
    editor_->ensureCursorVisible();
  } else if (origin == editor_) {
    provenance_begin_ = provenance_end_ = -1;
    refresh_editor_selections();
  }
  if (origin != stage_view_) stage_view_->show_statement(statement);
  if (origin != cuda_view_ && range.valid) {
    cuda_view_->show_spec_line(static_cast<int>(compilation_->file->line_column(range.begin).line));
  }
  statusBar()->showMessage(tr("spec statement %1: %2")
                               .arg(statement + 1)
                               .arg(QString::fromUtf8(compilation_->file->slice(range).data(),
                                                      static_cast<qsizetype>(compilation_->file->slice(range).size()))
                                        .simplified()),
                           6000);
  linking_ = false;
}

void MainWindow::refresh_editor_selections() {
  QList<QTextEdit::ExtraSelection> selections;
  QTextDocument* document = editor_->document();
  if (provenance_begin_ >= 0 && provenance_end_ > provenance_begin_) {
    QTextEdit::ExtraSelection selection;
    selection.cursor = QTextCursor(document);
    selection.cursor.setPosition(std::min(provenance_begin_, document->characterCount() - 1));
    selection.cursor.setPosition(std::min(provenance_end_, document->characterCount() - 1),
                                 QTextCursor::KeepAnchor);
    const bool dark = palette().color(QPalette::Base).lightness() < 128;
    selection.format.setBackground(dark ? QColor(0x5a, 0x45, 0x1a) : QColor(0xff, 0xe8, 0xb0));
    selections.append(selection);
  }
  // Underline every located diagnostic (errors red, warnings amber, notes blue).
  for (const EditorDiagnostic& diagnostic : diagnostics_) {
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
}

void MainWindow::update_title() {
  setWindowTitle(QStringLiteral("%1[*] - Nautilus Studio").arg(document_name_));
  setWindowModified(editor_->document()->isModified());
}

bool MainWindow::export_graph(const QString& path, QString* error) {
  GraphView* graph = stage_view_->graph_view();
  if (!graph->graph_layout()) {
    if (error != nullptr) *error = tr("no graph is shown (stage cuda has none; or it is still being laid out)");
    return false;
  }
  if (path.endsWith(QStringLiteral(".svg"), Qt::CaseInsensitive)) return graph->export_svg(path, error);
  return graph->export_png(path, error);
}

bool MainWindow::export_stage_text(const QString& path, QString* error) {
  if (stage_view_->snapshot() == nullptr) {
    if (error != nullptr) *error = tr("no stage to export: the spec does not compile");
    return false;
  }
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(stage_view_->current_text().toUtf8()) < 0 ||
      !file.commit()) {
    if (error != nullptr) *error = tr("cannot save %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

void MainWindow::new_document() {
  if (!maybe_save()) return;
  decisions_->model()->set_schedule({});
  shapes_->set_overrides({});
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

void MainWindow::open_session_interactive() {
  if (!maybe_save()) return;
  const QString path = QFileDialog::getOpenFileName(this, tr("Open session"), QString(), tr(kSessionFilter));
  if (path.isEmpty()) return;
  QString error;
  if (!open_session(path, &error)) QMessageBox::warning(this, tr("Open session"), error);
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

void MainWindow::save_session_interactive() {
  const QString start = QDir::current().filePath(QFileInfo(document_name_).completeBaseName() +
                                                 QStringLiteral(".session.json"));
  const QString path = QFileDialog::getSaveFileName(this, tr("Save session"), start, tr(kSessionFilter));
  if (path.isEmpty()) return;
  QString error;
  if (!save_session_to(path, &error)) QMessageBox::warning(this, tr("Save session"), error);
}

void MainWindow::load_schedule_interactive() {
  const QString assets = find_assets_dir();
  const QString start = assets.isEmpty() ? QString() : QDir(assets).filePath(QStringLiteral("schedules"));
  const QString path = QFileDialog::getOpenFileName(this, tr("Load schedule"), start,
                                                    tr("Schedules (*.json);;All files (*)"));
  if (path.isEmpty()) return;
  QString error;
  if (!load_schedule(path, &error)) QMessageBox::warning(this, tr("Load schedule"), error);
}

void MainWindow::export_graph_interactive() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export graph"), QString(),
                                                    tr("SVG (*.svg);;PNG (*.png)"));
  if (path.isEmpty()) return;
  QString error;
  if (!export_graph(path, &error)) QMessageBox::warning(this, tr("Export graph"), error);
}

void MainWindow::export_stage_text_interactive() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export stage text"), QString(),
                                                    tr("Text (*.txt *.cu);;All files (*)"));
  if (path.isEmpty()) return;
  QString error;
  if (!export_stage_text(path, &error)) QMessageBox::warning(this, tr("Export stage text"), error);
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
    save_layout();
    event->accept();
  } else {
    event->ignore();
  }
}

}  // namespace nautilus::views
