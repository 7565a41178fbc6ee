// The Nautilus Studio main window.
//
// The spec editor is the central widget; everything else is a dock that can be moved, floated,
// tabbed or closed, and whose arrangement (with the window geometry, the theme and the recent
// files) is restored from QSettings at the next start:
//   Diagnostics  the checked spec or its diagnostics (SpecChecker, as you type)
//   Shapes       the `-D` size bindings (ShapePanel)
//   Decisions    the schedule, editable (DecisionsPanel)
//   Stages       pass log + the selected snapshot as text, graph or diff (StageView)
//   CUDA         the emitted source and NVRTC's ptxas report (CudaView)
//   Profiler     runs through nautilus-runner, roofline, history (ProfilerPanel)
//   Teaching     one pass at a time with its explanation and diff (TeachingPanel)
//   Search       the auto-scheduler's tree, pins and forbids, live progress, Measure (SearchPanel)
//   History      the tuning database's records of the spec: table, chart, best measured
//                (TuningHistoryPanel)
//   Compare      two schedules side by side: decisions, IR diff, cost per kernel (ComparePanel)
//   Layouts      thread/value grids and swizzled bank grids of the MA tile IR (LayoutPanel)
//   Pipeline     the inner loop as a per-warp timeline (PipelinePanel)
//
// Layouts and Pipeline are Dear ImGui panels in QOpenGLWidgets. They are fed the MA tile IR
// module of every compilation that reaches it (a compilation that fails earlier leaves them on the
// last module and says so in the dock title). Where gl_panels_supported() is false (Qt's offscreen
// platform: tests and `--screenshot` without a display) a shown QOpenGLWidget would crash, so the
// docks hold a label saying why instead, and layout_panel() / pipeline_panel() are null.
//
// The pipeline runs on PipelineRunner's worker after every pause in typing, every size edit and
// every schedule change; the status bar shows a busy indicator with Cancel while it runs and the
// outcome when it ends. Only results for the current inputs are shown. An edit of the decisions is
// checked (applied to the spec and tiled) on a worker of its own before it is accepted.
//
// Provenance links: selecting a graph node highlights its spec range in the editor, the nodes of
// the same statement in the graph, and the CUDA sections of that statement; moving the cursor in
// the editor or the CUDA source selects the statement under it everywhere else. Selecting an MA
// tile IR value or shared allocation in the graph shows that tile in the Layouts panel.
//
// Where the current schedule came from (a search node, the search's choice, the tuning database's
// best measured record) is shown in the status bar's origin label. When a spec is opened and the
// tuning database has a validated measurement of it at its sizes on the local GPU, the label
// offers it with a "Use best measured" button, as `nautilus schedule` prefers it.
//
// Files: File > Open/Save work on .nt specs; sessions (.json, views/session.h) keep spec, sizes,
// schedule, pins and runs. Examples opens a copy of a shipped spec together with its schedule from
// assets/schedules when there is one (saving asks for a new path).
//
// Settings go to QSettings (organization "Nautilus", application "Nautilus Studio"), or to the INI
// file named by $NAUTILUS_STUDIO_SETTINGS (tests use this to stay away from the user's settings).
#pragma once

#include <QMainWindow>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

#include "core/driver/pipeline.h"
#include "views/pipeline_runner.h"
#include "views/spec_checker.h"
#include "views/theme.h"

class QCloseEvent;
class QDockWidget;
class QEvent;
class QLabel;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QSettings;
class QShowEvent;
class QToolButton;

namespace nautilus::views {

class ComparePanel;
class CudaView;
class DecisionsPanel;
class LayoutPanel;
class PipelinePanel;
class ProfilerPanel;
class SearchPanel;
class ShapePanel;
class SpecHighlighter;
class StageView;
class TeachingPanel;
class TuningHistoryPanel;
struct Session;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Loads `path` into the editor and compiles it at once. On failure leaves the editor unchanged
  // and returns false with a one-line `error`.
  bool open_file(const QString& path, QString* error = nullptr);
  // Loads a shipped example as a new, unsaved document named after it, with its schedule from
  // assets/schedules/<name>.json when that exists.
  bool open_example(const QString& path, QString* error = nullptr);
  // Writes the editor's text to `path` atomically and makes it the current file.
  bool save_to(const QString& path, QString* error = nullptr);
  // Reads a schedule file (assets/schedules form) into the decisions panel and recompiles.
  bool load_schedule(const QString& path, QString* error = nullptr);

  // The target of the MA lowering: "sm_80" (the default) or "sm_90a" (Pipeline > Target). A
  // change recompiles; sessions keep it.
  void set_target_arch(const std::string& arch);
  const std::string& target_arch() const { return target_arch_; }

  Session current_session() const;
  bool save_session_to(const QString& path, QString* error = nullptr);
  bool open_session(const QString& path, QString* error = nullptr);

  // The file being edited; empty for a new document or an example copy.
  const QString& file_path() const { return file_path_; }
  const QString& document_name() const { return document_name_; }

  QPlainTextEdit* editor() const { return editor_; }
  QPlainTextEdit* output() const { return output_; }
  SpecChecker* checker() const { return checker_; }
  SpecHighlighter* highlighter() const { return highlighter_; }
  PipelineRunner* pipeline() const { return pipeline_; }
  StageView* stage_view() const { return stage_view_; }
  CudaView* cuda_view() const { return cuda_view_; }
  DecisionsPanel* decisions_panel() const { return decisions_; }
  ProfilerPanel* profiler_panel() const { return profiler_; }
  ShapePanel* shape_panel() const { return shapes_; }
  TeachingPanel* teaching_panel() const { return teaching_; }
  SearchPanel* search_panel() const { return search_; }
  TuningHistoryPanel* history_panel() const { return history_; }
  // Where the current schedule came from, or the offer of a best measured one.
  QLabel* schedule_origin_label() const { return origin_; }
  // Shown beside the origin label while a best measured schedule is offered.
  QToolButton* use_best_measured_button() const { return use_best_measured_; }
  // The tuning database of Measure and History (default: the CLI's, tune::default_database_path)
  // and the CUDA driver library that names the local GPU and runs candidates ("" the system's).
  void set_tuning_database(const QString& path);
  void set_cuda_driver(const std::string& library);
  ComparePanel* compare_panel() const { return compare_; }
  // The Dear ImGui panels; null where gl_panels_supported() is false (the docks hold a label).
  LayoutPanel* layout_panel() const { return layout_; }
  PipelinePanel* pipeline_panel() const { return pipeline_panel_; }
  const std::shared_ptr<const driver::Compilation>& compilation() const { return compilation_; }
  QLabel* status_label() const { return status_; }

  // The dock of a panel by name: "diagnostics", "shapes", "decisions", "stages", "cuda",
  // "profiler", "teaching", "search", "compare", "layouts", "pipeline"; nullptr for others.
  QDockWidget* dock(const QString& name) const;
  static QStringList panel_names();

  void set_theme(Theme theme);
  Theme theme() const { return theme_; }
  QStringList recent_files() const;

  // Exports the graph shown in the stage view (.svg or .png by extension) / the selected stage's
  // text.
  bool export_graph(const QString& path, QString* error = nullptr);
  bool export_stage_text(const QString& path, QString* error = nullptr);

  // The spec statement (index) whose text contains byte `offset` of the editor's text, or -1.
  int statement_at(int offset) const;

 Q_SIGNALS:
  // The Diagnostics pane shows the result of checking the editor's current text.
  void check_finished(bool ok);
  // A compilation of the current inputs was delivered (ok: every stage was built).
  void pipeline_finished(bool ok);

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;
  // Shows the message of the diagnostic under the mouse as the editor's tooltip.
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QDockWidget* add_dock(const QString& title, const QString& name, QWidget* widget,
                        Qt::DockWidgetArea area);
  void build_menus();
  void add_examples(QMenu* menu, const QString& directory);
  void rebuild_recent_menu();
  void remember_recent(const QString& path);
  void set_document(const QString& text, const QString& path, const QString& name);
  void schedule_check();
  void schedule_compile(bool now);
  // Hands the current spec, sizes and pinned decisions to the search panel.
  void sync_search_inputs();
  // Makes `schedule` the current one (pins kept on the decisions it still has) and recompiles;
  // `origin` says where it came from.
  void adopt_schedule(const sched::Schedule& schedule, const QString& origin);
  PipelineInputs current_inputs() const;
  void show_result(const SpecCheckResult& result);
  void show_compilation(const PipelineResult& result);
  void update_title();
  void refresh_editor_selections();
  // Highlights spec statement `statement` (or the byte range [begin, end) when valid) in every
  // view except `origin`.
  void show_statement(int statement, int begin, int end, QObject* origin);
  // The Layouts and Pipeline docks: the ImGui panels, or a label saying why they are missing.
  QWidget* make_gl_panel(bool layouts);
  void show_ma_module(const std::shared_ptr<const driver::Compilation>& compilation);
  // Points the Layouts panel at the tile of an MA tile IR graph node ("op:KERNEL/VALUE" or
  // "shared:KERNEL/ALLOC"); other nodes leave it as it is.
  void show_tile_of_node(const QString& node_id);
  std::unique_ptr<QSettings> settings() const;
  void restore_layout();
  void apply_default_dock_sizes();
  void save_layout();

  // File menu actions; the interactive variants ask before discarding unsaved edits.
  void new_document();
  void open_interactive();
  void open_example_interactive(const QString& path);
  void open_session_interactive();
  bool save_interactive();
  bool save_as_interactive();
  void save_session_interactive();
  void load_schedule_interactive();
  void export_graph_interactive();
  void export_stage_text_interactive();
  bool maybe_save();

  QPlainTextEdit* editor_ = nullptr;
  QPlainTextEdit* output_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* origin_ = nullptr;
  QToolButton* use_best_measured_ = nullptr;
  // A document was opened: the next History refresh offers its best measured schedule.
  bool offer_best_measured_ = false;
  QProgressBar* progress_ = nullptr;
  QToolButton* cancel_ = nullptr;
  SpecHighlighter* highlighter_ = nullptr;
  SpecChecker* checker_ = nullptr;
  PipelineRunner* pipeline_ = nullptr;
  TaskRunner* schedule_checker_ = nullptr;  // checks edited schedules off the UI thread
  StageView* stage_view_ = nullptr;
  CudaView* cuda_view_ = nullptr;
  DecisionsPanel* decisions_ = nullptr;
  ProfilerPanel* profiler_ = nullptr;
  ShapePanel* shapes_ = nullptr;
  TeachingPanel* teaching_ = nullptr;
  SearchPanel* search_ = nullptr;
  TuningHistoryPanel* history_ = nullptr;
  ComparePanel* compare_ = nullptr;
  LayoutPanel* layout_ = nullptr;
  PipelinePanel* pipeline_panel_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  std::vector<QDockWidget*> docks_;
  QByteArray default_state_;
  Theme theme_ = Theme::Light;
  QString file_path_;
  QString document_name_;
  std::string target_arch_ = "sm_80";
  std::vector<QAction*> target_actions_;  // Pipeline > Target, one per arch (data: the arch)
  std::shared_ptr<const driver::Compilation> compilation_;
  // The diagnostics underlined in the editor (those of the latest delivered check).
  std::vector<EditorDiagnostic> diagnostics_;
  // The provenance range marked in the editor: [begin, end) in QString positions, or -1.
  int provenance_begin_ = -1;
  int provenance_end_ = -1;
  bool linking_ = false;
  bool layout_restored_ = false;  // QSettings had a window state
  bool shown_once_ = false;  // true while a provenance selection propagates (no feedback loops)
};

}  // namespace nautilus::views
