#include "views/search_tree_model.h"

#include <QBrush>
#include <QColor>
#include <QFont>

#include <algorithm>
#include <functional>

namespace nautilus::views {

SearchTreeModel::SearchTreeModel(QObject* parent) : QAbstractItemModel(parent) {}

void SearchTreeModel::set_nodes(std::vector<search::SearchNode> nodes, int chosen) {
  beginResetModel();
  measured_.clear();  // another tree: its schedules were not the ones measured
  nodes_ = std::move(nodes);
  schedule_text_.assign(nodes_.size(), std::string());
  chosen_ = chosen;
  roots_.clear();
  row_in_parent_.assign(nodes_.size(), 0);
  chosen_path_.assign(nodes_.size(), false);
  const auto valid = [this](int id) { return id >= 0 && id < static_cast<int>(nodes_.size()); };
  for (const search::SearchNode& node : nodes_) {
    if (!valid(node.id)) continue;
    if (!valid(node.parent)) {
      row_in_parent_[static_cast<size_t>(node.id)] = static_cast<int>(roots_.size());
      roots_.push_back(node.id);
    }
    for (size_t row = 0; row < node.children.size(); ++row) {
      if (valid(node.children[row])) {
        row_in_parent_[static_cast<size_t>(node.children[row])] = static_cast<int>(row);
      }
    }
  }
  mark_chosen_path();
  endResetModel();
}

void SearchTreeModel::mark_chosen_path() {
  chosen_path_.assign(nodes_.size(), false);
  const auto valid = [this](int id) { return id >= 0 && id < static_cast<int>(nodes_.size()); };
  for (int id = chosen_; valid(id); id = nodes_[static_cast<size_t>(id)].parent) {
    if (chosen_path_[static_cast<size_t>(id)]) break;  // a malformed cycle
    chosen_path_[static_cast<size_t>(id)] = true;
  }
}

bool SearchTreeModel::extends(const std::vector<search::SearchNode>& nodes) const {
  if (nodes.size() < nodes_.size()) return false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const search::SearchNode& node = nodes[i];
    if (node.id != static_cast<int>(i) || node.parent >= static_cast<int>(i)) return false;
    if (i >= nodes_.size()) continue;
    const search::SearchNode& known = nodes_[i];
    if (node.parent != known.parent || node.decision.has_value() != known.decision.has_value() ||
        (node.decision && !(*node.decision == *known.decision))) {
      return false;
    }
  }
  return true;
}

void SearchTreeModel::grow(std::vector<search::SearchNode> nodes, int chosen) {
  if (!extends(nodes)) {
    set_nodes(std::move(nodes), chosen);
    return;
  }
  const std::vector<bool> was_on_path = chosen_path_;
  // Rows that change in place: status, estimate, measured time, reason.
  std::vector<int> changed;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    search::SearchNode& known = nodes_[i];
    search::SearchNode& fresh = nodes[i];
    const bool same = known.status == fresh.status && known.reason == fresh.reason &&
                      known.measured_us == fresh.measured_us &&
                      known.estimate.has_value() == fresh.estimate.has_value() &&
                      (!known.estimate || known.estimate->microseconds == fresh.estimate->microseconds);
    if (!(known.completion.decisions == fresh.completion.decisions)) schedule_text_[i].clear();
    std::vector<int> children = std::move(known.children);
    known = std::move(fresh);
    known.children = std::move(children);  // new children are inserted below, one by one
    if (!same) changed.push_back(static_cast<int>(i));
  }
  // New nodes, in id order: every parent precedes its children and each parent's children are
  // in id order, so each new node is the last row of its parent when it arrives. A run of new
  // nodes with the same parent (a node's children are made together) is one insertion: the view
  // handles one rowsInserted per run instead of one per node.
  size_t next = nodes_.size();
  while (next < nodes.size()) {
    const int parent = nodes[next].parent;
    size_t end = next + 1;
    while (end < nodes.size() && nodes[end].parent == parent) ++end;
    const bool root = parent < 0;
    const int first_row = root ? static_cast<int>(roots_.size())
                               : static_cast<int>(nodes_[static_cast<size_t>(parent)].children.size());
    beginInsertRows(root ? QModelIndex() : index_of(parent), first_row,
                    first_row + static_cast<int>(end - next) - 1);
    for (size_t i = next; i < end; ++i) {
      search::SearchNode node = std::move(nodes[i]);
      node.children.clear();
      const int id = node.id;
      if (root) {
        row_in_parent_.push_back(static_cast<int>(roots_.size()));
        roots_.push_back(id);
      } else {
        std::vector<int>& siblings = nodes_[static_cast<size_t>(parent)].children;
        row_in_parent_.push_back(static_cast<int>(siblings.size()));
        siblings.push_back(id);
      }
      chosen_path_.push_back(false);
      schedule_text_.emplace_back();
      nodes_.push_back(std::move(node));
    }
    endInsertRows();
    next = end;
  }
  chosen_ = chosen;
  mark_chosen_path();
  for (size_t i = 0; i < was_on_path.size(); ++i) {
    if (was_on_path[i] != chosen_path_[i]) changed.push_back(static_cast<int>(i));
  }
  for (int id : changed) {
    const QModelIndex first = index_of(id);
    Q_EMIT dataChanged(first, first.siblingAtColumn(ColumnCount - 1));
  }
}

const std::string& SearchTreeModel::schedule_text(int node_id) const {
  std::string& text = schedule_text_[static_cast<size_t>(node_id)];
  if (text.empty()) {
    const search::SearchNode& node = nodes_[static_cast<size_t>(node_id)];
    text = sched::print_decisions(node.schedule.decisions, "; ");
    if (!node.schedule.decisions.empty() && !node.completion.decisions.empty()) text += "; ";
    text += sched::print_decisions(node.completion.decisions, "; ");
  }
  return text;
}

int SearchTreeModel::set_measurement(const std::string& wanted, std::optional<double> median_us,
                                     const QString& outcome) {
  // A scan of the nodes' cached schedule texts: the first measurement prints them (a few ms at
  // 5,000 nodes), later ones only compare (bench/studio/README.md).
  const QString text = median_us ? QString::number(*median_us, 'f', 1) : outcome;
  int found = -1;
  for (const search::SearchNode& node : nodes_) {
    if (node.schedule.decisions.empty() && node.completion.decisions.empty()) continue;
    if (schedule_text(node.id) != wanted) continue;
    // The leaf that was measured, and every inner node whose default completion is that same
    // schedule (its estimate was of this kernel too), show the outcome.
    measured_[node.id] = text;
    const QModelIndex cell = index_of(node.id).siblingAtColumn(Measured);
    Q_EMIT dataChanged(cell, cell);
    const bool leaf = node.status == search::NodeStatus::Leaf ||
                      node.status == search::NodeStatus::Chosen;
    if (found < 0 || leaf) found = node.id;
  }
  return found;
}

QString SearchTreeModel::measured_text(int node_id) const {
  if (auto found = measured_.find(node_id); found != measured_.end()) return found->second;
  if (node_id < 0 || node_id >= static_cast<int>(nodes_.size())) return {};
  const search::SearchNode& shown = nodes_[static_cast<size_t>(node_id)];
  return shown.measured_us ? QString::number(*shown.measured_us, 'f', 1) : QString();
}

const search::SearchNode* SearchTreeModel::node(const QModelIndex& index) const {
  if (!index.isValid()) return nullptr;
  const auto id = static_cast<size_t>(index.internalId());
  return id < nodes_.size() ? &nodes_[id] : nullptr;
}

QModelIndex SearchTreeModel::index_of(int node_id) const {
  if (node_id < 0 || node_id >= static_cast<int>(nodes_.size())) return {};
  return createIndex(row_in_parent_[static_cast<size_t>(node_id)], 0, static_cast<quintptr>(node_id));
}

bool SearchTreeModel::on_chosen_path(int node_id) const {
  return node_id >= 0 && node_id < static_cast<int>(chosen_path_.size()) &&
         chosen_path_[static_cast<size_t>(node_id)];
}

QModelIndex SearchTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= ColumnCount) return {};
  if (!parent.isValid()) {
    if (row >= static_cast<int>(roots_.size())) return {};
    return createIndex(row, column, static_cast<quintptr>(roots_[static_cast<size_t>(row)]));
  }
  const search::SearchNode* up = node(parent);
  if (up == nullptr || row >= static_cast<int>(up->children.size())) return {};
  return createIndex(row, column, static_cast<quintptr>(up->children[static_cast<size_t>(row)]));
}

QModelIndex SearchTreeModel::parent(const QModelIndex& child) const {
  const search::SearchNode* below = node(child);
  if (below == nullptr || below->parent < 0 || below->parent >= static_cast<int>(nodes_.size())) {
    return {};
  }
  return index_of(below->parent);
}

int SearchTreeModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return static_cast<int>(roots_.size());
  if (parent.column() != 0) return 0;
  const search::SearchNode* up = node(parent);
  return up == nullptr ? 0 : static_cast<int>(up->children.size());
}

int SearchTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant SearchTreeModel::data(const QModelIndex& index, int role) const {
  const search::SearchNode* shown = node(index);
  if (shown == nullptr) return {};
  if (role == kNodeIdRole) return shown->id;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Decision:
        return shown->decision ? QString::fromStdString(sched::print_decision(*shown->decision))
                               : tr("(root)");
      case Status:
        return QString::fromLatin1(search::node_status_name(shown->status)) +
               (shown->pinned ? tr(", pinned") : QString());
      case Estimate:
        return shown->estimate ? QString::number(shown->estimate->microseconds, 'f', 1) : QString();
      case Measured: return measured_text(shown->id);
      case Phase: return QString::fromLatin1(search::phase_name(shown->phase));
      case Reason: return QString::fromStdString(shown->reason);
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    QString text;
    for (const sched::Decision& decision : shown->schedule.decisions) {
      text += QString::fromStdString(sched::print_decision(decision)) + QLatin1Char('\n');
    }
    if (!shown->completion.decisions.empty()) {
      text += tr("completed by default with:\n");
      for (const sched::Decision& decision : shown->completion.decisions) {
        text += QStringLiteral("  ") + QString::fromStdString(sched::print_decision(decision)) +
                QLatin1Char('\n');
      }
    }
    if (!shown->reason.empty()) text += QString::fromStdString(shown->reason);
    return text.trimmed();
  }
  if (role == Qt::ForegroundRole) {
    if (shown->status == search::NodeStatus::Pruned) return QBrush(QColor(0x8a, 0x8a, 0x8a));
    if (shown->status == search::NodeStatus::Failed) return QBrush(QColor(0xd0, 0x21, 0x1c));
    if (on_chosen_path(shown->id)) return QBrush(QColor(0x1a, 0x7f, 0x37));
  }
  if (role == Qt::FontRole && on_chosen_path(shown->id)) {
    QFont font;
    font.setBold(true);
    return font;
  }
  if (role == Qt::FontRole && shown->status == search::NodeStatus::Open) {
    QFont font;  // still waiting for its turn while the search runs
    font.setItalic(true);
    return font;
  }
  if (role == Qt::TextAlignmentRole && (index.column() == Estimate || index.column() == Measured)) {
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant SearchTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Decision: return tr("Decision");
    case Status: return tr("Status");
    case Estimate: return tr("Estimate µs");
    case Measured: return tr("Measured µs");
    case Phase: return tr("Phase");
    case Reason: return tr("Why pruned / failed");
    default: return {};
  }
}

QString print_tree(const QAbstractItemModel& model, const std::vector<int>& skip) {
  QString out;
  const std::function<void(const QModelIndex&, int)> walk = [&](const QModelIndex& parent,
                                                                int depth) {
    for (int row = 0; row < model.rowCount(parent); ++row) {
      QStringList cells;
      for (int column = 0; column < model.columnCount(parent); ++column) {
        if (std::find(skip.begin(), skip.end(), column) != skip.end()) continue;
        cells << model.data(model.index(row, column, parent)).toString();
      }
      out += QString(depth * 2, QLatin1Char(' ')) + cells.join(QStringLiteral(" | ")) +
             QLatin1Char('\n');
      walk(model.index(row, 0, parent), depth + 1);
    }
  };
  walk({}, 0);
  return out;
}

}  // namespace nautilus::views
