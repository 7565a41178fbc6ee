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
// The core reports progress during the search but the tree only at the end, so the tree appears
// when the search finishes (or is cancelled).
#pragma once

#include <QString>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <stop_token>
#include <vector>

#include "core/search/search.h"
#include "core/spec/sema.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
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
  void cancel();
  bool running() const { return running_; }
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

 Q_SIGNALS:
  void finished(bool ok);
  void schedule_found(const nautilus::sched::Schedule& schedule);
  // "Compare as A/B" on a node: its schedule with its default completion (slot 0 = A, 1 = B).
  void compare_requested(int slot, const nautilus::sched::Schedule& schedule, const QString& origin);

 private:
  void show_progress(const search::SearchProgress& progress);
  void show_tree(std::vector<search::SearchNode> nodes);
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
  QLabel* progress_ = nullptr;
  QLabel* constraints_ = nullptr;
  QTreeView* tree_ = nullptr;
  QPlainTextEdit* detail_ = nullptr;
  SearchTreeModel* model_ = nullptr;

  std::stop_source stop_;  // of the search in flight
  TaskRunner* runner_ = nullptr;  // runs the searches, one at a time
};

}  // namespace nautilus::views
