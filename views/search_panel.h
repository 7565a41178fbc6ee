// The search panel: runs the auto-scheduler (core/search run_search) on the current spec and
// sizes, on the panel's TaskRunner, with live progress (rounds, nodes, compiles, best estimate so
// far) and Cancel (the search's stop token: it returns what it has). The tree grows in a
// SearchTreeModel as the search hands it over (SearchObserver::on_tree), then takes the result:
// each node's decision, status, estimate, measured time and, for pruned nodes, why.
//
// From any node: "Pin path" re-runs the search with the node's decisions as pins (the search
// completes the rest), "Forbid" re-runs it with the node's decision forbidden, "Use schedule"
// hands the node's schedule plus its default completion to the window. Pins ticked in the
// Decisions panel are passed too (`set_extra_pins`). When a search finishes, `schedule_found`
// carries the chosen schedule, which the window compiles.
//
// The tree grows while the search runs (SearchObserver::on_tree): new nodes are inserted as rows,
// never by resetting the model, so a tree of thousands of nodes stays responsive
// (bench/studio/README.md measures it).
//
// Measure: the tuner (core/tune/tuner.h run_tune) with the panel's pins, forbids, beam and cost
// model, for the spec and sizes, on the local executor `nautilus tune` uses
// (profiler::make_local_executor: NVRTC, then one nautilus-runner child per candidate on CUDA
// device 0, with the profiler panel's runner command). It runs on a worker of its own; every
// result is written to the tuning database (the user's default, as the CLI's; the panel shows
// the path) and reaches the UI thread as a queued call: the tree's "measured µs" cell of the node
// with that schedule shows the time or why there is none ("wrong results", "fault: ..."), and
// `measurement_recorded` tells the History panel. Cancel is the tuner's should_stop: the
// candidates in flight finish and are recorded, no further one starts.
#pragma once

#include <QString>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <stop_token>
#include <vector>

#include "core/search/search.h"
#include "core/spec/sema.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QCheckBox;
class QSpinBox;
class QTreeView;

namespace nautilus::views {

class SearchTreeModel;
class TaskRunner;

class SearchPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SearchPanel(QWidget* parent = nullptr);
  ~SearchPanel() override;

  // What to search: the spec text (named `path`) and the size bindings.
  void set_spec(const std::string& path, const std::string& text,
                std::vector<spec::SizeOverride> sizes);
  // Pins from elsewhere (the Decisions panel's ticked decisions), applied before the panel's own.
  void set_extra_pins(std::vector<sched::Decision> pins) { extra_pins_ = std::move(pins); }

  bool start();
  // Stops the search, or the measurement after the candidates in flight.
  void cancel();
  bool running() const { return running_; }

  // Measures up to `candidates` schedules (the spin box's value when 0) with the tuner; false
  // (with the reason in the progress line) when there is nothing to measure or a run is going.
  bool measure(int candidates = 0);
  bool measuring() const { return measuring_; }
  // The tuning database measurements go to (default tune::default_database_path()).
  void set_database_path(const QString& path);
  const QString& database_path() const { return database_path_; }
  // The runner command template (the profiler panel's; empty: nautilus-runner next to the app)
  // and the CUDA driver library (empty: the system's libcuda; tests pass a stand-in).
  void set_runner_command(const std::string& command) { runner_command_ = command; }
  const std::string& runner_command() const { return runner_command_; }
  void set_driver_library(const std::string& library) { driver_library_ = library; }
  QSpinBox* candidates_box() const { return candidates_; }
  // "pipeline solver": the chosen schedule is completed by the pipeline solver on the search's
  // worker (core/pipeline/complete.h), as `nautilus schedule` does; on by default.
  QCheckBox* pipeline_solver_box() const { return pipeline_solver_; }
  // "register check": the chosen schedule is compiled with NVRTC on the worker and a spilling
  // pick replaced by the best-ranked leaf that fits (core/pipeline/finish_search.h); on by
  // default.
  QCheckBox* register_check_box() const { return register_check_; }
  // What the register check and the solver said of the last chosen schedule (one line per
  // leaf compiled and per kernel; empty when both are off).
  const std::string& pipeline_summary() const { return pipeline_summary_; }
  QLabel* database_label() const { return database_label_; }
  QLabel* measure_label() const { return measure_label_; }
  // The device preset of the cost model ("h100", "a100").
  std::string device_preset() const;
  void pin_path(int node_id);
  void forbid(int node_id);
  void clear_constraints();

  SearchTreeModel* model() const { return model_; }
  QTreeView* tree() const { return tree_; }
  QLabel* progress_label() const { return progress_; }
  const std::vector<sched::Decision>& pins() const { return pins_; }
  const std::vector<sched::Decision>& forbids() const { return forbids_; }
  const search::SearchResult& result() const { return result_; }
  // Trees received from the running search so far (live updates before the result).
  int tree_updates() const { return tree_updates_; }
  void set_beam(int beam);

  // Takes a tree of the running search (public for the responsiveness benchmark, which feeds
  // synthetic growth through the same path as the search's observer).
  void show_tree(std::vector<search::SearchNode> nodes);

 Q_SIGNALS:
  void finished(bool ok);
  void schedule_found(const nautilus::sched::Schedule& schedule);
  // "Compare as A/B" on a node: its schedule with its default completion (slot 0 = A, 1 = B).
  void compare_requested(int slot, const nautilus::sched::Schedule& schedule, const QString& origin);
  // One candidate measured and written to the database: its schedule text and outcome ("12.50
  // µs", "wrong results", ...).
  void measurement_recorded(const QString& schedule, const QString& outcome);
  // The measurement ended (ok: the tuner ran to its end or was stopped; else `summary` says why).
  void measure_finished(bool ok, const QString& summary);

 private:
  void show_progress(const search::SearchProgress& progress);
  search::SearchOptions search_options() const;
  void show_measurement(const std::string& schedule, std::optional<double> median_us,
                        const std::string& outcome, int measured, int budget_left,
                        std::optional<double> best_us, std::optional<double> eta_seconds);
  void set_measuring(bool measuring);
  void show_result(search::SearchResult result);
  void show_node();
  void update_constraints_label();
  int selected_node() const;
  sched::Schedule completed_schedule(int node_id) const;

  std::string path_;
  std::string text_;
  std::vector<spec::SizeOverride> sizes_;
  std::vector<sched::Decision> extra_pins_;
  std::vector<sched::Decision> pins_;
  std::vector<sched::Decision> forbids_;
  search::SearchResult result_;
  bool running_ = false;
  uint64_t generation_ = 0;
  int tree_updates_ = 0;

  QPushButton* search_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QSpinBox* beam_ = nullptr;
  QComboBox* device_ = nullptr;
  QCheckBox* pipeline_solver_ = nullptr;
  QCheckBox* register_check_ = nullptr;
  std::string pipeline_summary_;
  std::string register_summary_;  // FinishedSchedule::register_summary of the last search
  QLabel* progress_ = nullptr;
  QLabel* constraints_ = nullptr;
  QTreeView* tree_ = nullptr;
  QPlainTextEdit* detail_ = nullptr;
  SearchTreeModel* model_ = nullptr;

  QSpinBox* candidates_ = nullptr;
  QPushButton* measure_ = nullptr;
  QLabel* database_label_ = nullptr;
  QLabel* measure_label_ = nullptr;
  QString database_path_;
  std::string runner_command_;
  std::string driver_library_;
  bool measuring_ = false;
  uint64_t measure_generation_ = 0;
  int unmatched_ = 0;  // measured schedules that are not nodes of the tree (mutations)

  std::stop_source stop_;  // of the search in flight
  std::stop_source measure_stop_;  // of the measurement in flight
  TaskRunner* runner_ = nullptr;  // runs the searches, one at a time
  TaskRunner* measure_runner_ = nullptr;  // runs the tuner
};

}  // namespace nautilus::views
