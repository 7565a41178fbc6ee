// The auto-scheduler's search tree (core/search) as a Qt tree model: one row per SearchNode under
// its parent, the root being the unscheduled program.
//
//   decision                            status    estimate µs  measured µs  phase     reason
//   (root)                              expanded  1830.2                    ...
//     rolling_update(O_sum, n, tile=64) expanded  934.4
//       compute_at(S, Mx, n_o)          chosen    934.4
//     tile(S, m=64)                     pruned    2210.0                             beam
//
// A QTreeView draws only the rows it shows, so trees of thousands of nodes stay fluid; pruned
// rows are greyed, the chosen path bold. `print_tree` prints the rows indented (golden tests).
//
// Measurements of the tuner (the search panel's Measure) arrive by schedule text: the node whose
// schedule with its completion prints as that text gets the outcome in its "measured µs" cell —
// the time, or why it has none ("wrong results", "fault: ..."). They are kept while the tree
// grows and dropped when another tree replaces it.
#pragma once

#include <QAbstractItemModel>
#include <QString>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/search/search.h"

namespace nautilus::views {

class SearchTreeModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum Column { Decision, Status, Estimate, Measured, Phase, Reason, ColumnCount };
  static constexpr int kNodeIdRole = Qt::UserRole;  // int: the SearchNode id

  explicit SearchTreeModel(QObject* parent = nullptr);

  // Replaces the tree (nodes by id, as SearchResult::nodes) and the chosen node.
  void set_nodes(std::vector<search::SearchNode> nodes, int chosen);
  // Takes a later tree of the same search (SearchObserver::on_tree while it runs, then the
  // result): inserts the new nodes as rows under their parents and updates the rows whose
  // status, estimate or reason changed, so the view keeps its expansion, selection and scroll
  // position. A tree that does not extend the current one (another search) replaces it.
  void grow(std::vector<search::SearchNode> nodes, int chosen);
  const std::vector<search::SearchNode>& nodes() const { return nodes_; }
  const search::SearchNode* node(const QModelIndex& index) const;
  QModelIndex index_of(int node_id) const;
  int chosen() const { return chosen_; }

  // Records a measurement of the node whose complete schedule (decisions, then its default
  // completion) prints as `schedule_text` (sched::print_decisions with "; "): its median time, or
  // nullopt with `outcome` saying why there is none. Returns the node's id, or -1 when no node of
  // the tree has that schedule (a mutation the tuner made beyond the search's leaves).
  int set_measurement(const std::string& schedule_text, std::optional<double> median_us,
                      const QString& outcome);
  // The measured cell's text of a node: the tuner's outcome, else the search's own measurement.
  QString measured_text(int node_id) const;
  int measured_count() const { return static_cast<int>(measured_.size()); }

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  bool on_chosen_path(int node_id) const;
  bool extends(const std::vector<search::SearchNode>& nodes) const;
  void mark_chosen_path();

  std::vector<search::SearchNode> nodes_;
  std::vector<int> row_in_parent_;  // per node id
  std::vector<int> roots_;          // ids of nodes without a parent
  // The node's schedule then completion as the tuner keys it, printed when first asked ("" until).
  const std::string& schedule_text(int node_id) const;

  std::vector<bool> chosen_path_;   // per node id
  mutable std::vector<std::string> schedule_text_;  // per node id, see schedule_text()
  int chosen_ = -1;
  // The tuner's outcomes by node id ("12.5" or why it has no time).
  std::unordered_map<int, QString> measured_;
};

// Every row, depth-first, indented two spaces per level, columns joined by " | " (leaving out
// `skip`).
QString print_tree(const QAbstractItemModel& model, const std::vector<int>& skip = {});

}  // namespace nautilus::views
