#include "views/decisions_model.h"

#include <QFont>

namespace nautilus::views {
namespace {

QString explanation_of(const sched::Decision& decision) {
  const sched::DecisionKind* kind = sched::find_decision_kind(decision.kind);
  if (kind == nullptr) return QObject::tr("unknown decision kind '%1'").arg(QString::fromStdString(decision.kind));
  return QString::fromStdString(kind->summary);
}

}  // namespace

DecisionsModel::DecisionsModel(QObject* parent) : QAbstractTableModel(parent) {}

void DecisionsModel::set_schedule(const sched::Schedule& schedule, const std::vector<bool>& pins) {
  ++validation_;  // a pending answer describes the schedule being replaced
  validating_ = false;
  beginResetModel();
  schedule_ = schedule;
  pins_ = pins;
  pins_.resize(schedule_.decisions.size(), false);
  last_error_.clear();
  endResetModel();
}

bool DecisionsModel::parse(const QString& text, sched::Decision* decision) {
  sched::DecisionParseError error;
  auto parsed = sched::parse_decision(text.toStdString(), &error);
  if (!parsed) {
    reject(tr("'%1': %2").arg(text, QString::fromStdString(sched::to_string(error))));
    return false;
  }
  *decision = *parsed;
  return true;
}

bool DecisionsModel::accept(const sched::Schedule& candidate, const QString& what) {
  if (validator_) {
    const std::string reason = validator_(candidate);
    if (!reason.empty()) {
      reject(tr("%1 refused: %2").arg(what, QString::fromStdString(reason)));
      return false;
    }
  }
  last_error_.clear();
  return true;
}

bool DecisionsModel::submit(sched::Schedule candidate, const QString& what,
                            std::function<void(sched::Schedule)> apply) {
  if (validating_) {
    reject(tr("%1 refused: the previous change is still being checked").arg(what));
    return false;
  }
  if (!async_validator_) {
    if (!accept(candidate, what)) return false;
    apply(std::move(candidate));
    return true;
  }
  validating_ = true;
  const uint64_t validation = ++validation_;
  sched::Schedule checked = candidate;
  async_validator_(checked, [this, validation, what, candidate = std::move(candidate),
                             apply = std::move(apply)](const std::string& reason) mutable {
    if (validation != validation_) return;  // set_schedule() replaced the schedule meanwhile
    validating_ = false;
    if (!reason.empty()) {
      reject(tr("%1 refused: %2").arg(what, QString::fromStdString(reason)));
      return;
    }
    last_error_.clear();
    apply(std::move(candidate));
  });
  return true;
}

void DecisionsModel::reject(const QString& reason) {
  last_error_ = reason;
  Q_EMIT edit_rejected(reason);
}

bool DecisionsModel::replace(int row, const QString& text) {
  if (row < 0 || row >= rowCount()) return false;
  sched::Decision decision;
  if (!parse(text, &decision)) return false;
  sched::Schedule candidate = schedule_;
  candidate.decisions[static_cast<size_t>(row)] = decision;
  return submit(std::move(candidate), tr("edit"), [this, row](sched::Schedule accepted) {
    schedule_ = std::move(accepted);
    Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
    Q_EMIT schedule_changed();
  });
}

bool DecisionsModel::insert(int row, const QString& text) {
  row = std::clamp(row, 0, rowCount());
  sched::Decision decision;
  if (!parse(text, &decision)) return false;
  sched::Schedule candidate = schedule_;
  candidate.decisions.insert(candidate.decisions.begin() + row, decision);
  return submit(std::move(candidate), tr("new decision"), [this, row](sched::Schedule accepted) {
    beginInsertRows({}, row, row);
    schedule_ = std::move(accepted);
    pins_.insert(pins_.begin() + row, false);
    endInsertRows();
    Q_EMIT schedule_changed();
  });
}

bool DecisionsModel::remove(int row) {
  if (row < 0 || row >= rowCount()) return false;
  sched::Schedule candidate = schedule_;
  candidate.decisions.erase(candidate.decisions.begin() + row);
  return submit(std::move(candidate), tr("removing decision %1").arg(row + 1),
                [this, row](sched::Schedule accepted) {
                  beginRemoveRows({}, row, row);
                  schedule_ = std::move(accepted);
                  pins_.erase(pins_.begin() + row);
                  endRemoveRows();
                  Q_EMIT schedule_changed();
                });
}

bool DecisionsModel::move(int row, int to_row) {
  if (row < 0 || row >= rowCount() || to_row < 0 || to_row >= rowCount() || row == to_row) {
    return false;
  }
  sched::Schedule candidate = schedule_;
  const sched::Decision moved = candidate.decisions[static_cast<size_t>(row)];
  candidate.decisions.erase(candidate.decisions.begin() + row);
  candidate.decisions.insert(candidate.decisions.begin() + to_row, moved);
  return submit(std::move(candidate), tr("moving decision %1").arg(row + 1),
                [this, row, to_row](sched::Schedule accepted) {
                  // beginMoveRows takes the destination *before* the move (one past when moving
                  // down).
                  beginMoveRows({}, row, row, {}, to_row > row ? to_row + 1 : to_row);
                  schedule_ = std::move(accepted);
                  const bool pinned = pins_[static_cast<size_t>(row)];
                  pins_.erase(pins_.begin() + row);
                  pins_.insert(pins_.begin() + to_row, pinned);
                  endMoveRows();
                  Q_EMIT schedule_changed();
                });
}

void DecisionsModel::set_pinned(int row, bool pinned) {
  if (row < 0 || row >= rowCount() || pins_[static_cast<size_t>(row)] == pinned) return;
  pins_[static_cast<size_t>(row)] = pinned;
  Q_EMIT dataChanged(index(row, Pin), index(row, Pin));
  Q_EMIT pins_changed();
}

int DecisionsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(schedule_.decisions.size());
}

int DecisionsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant DecisionsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const sched::Decision& decision = schedule_.decisions[static_cast<size_t>(index.row())];
  switch (index.column()) {
    case Pin:
      if (role == Qt::CheckStateRole) {
        return pins_[static_cast<size_t>(index.row())] ? Qt::Checked : Qt::Unchecked;
      }
      if (role == Qt::ToolTipRole) return tr("Pinned decisions are kept by the search.");
      return {};
    case Decision:
      if (role == Qt::DisplayRole || role == Qt::EditRole) {
        return QString::fromStdString(sched::print_decision(decision));
      }
      if (role == Qt::FontRole) {
        QFont font(QStringLiteral("monospace"));
        font.setStyleHint(QFont::Monospace);
        return font;
      }
      if (role == Qt::ToolTipRole) {
        const sched::DecisionKind* kind = sched::find_decision_kind(decision.kind);
        return kind ? QString::fromStdString(kind->signature + "\n\n" + kind->description)
                    : explanation_of(decision);
      }
      return {};
    case Explanation:
      if (role == Qt::DisplayRole || role == Qt::ToolTipRole) return explanation_of(decision);
      return {};
    default:
      return {};
  }
}

bool DecisionsModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (!index.isValid()) return false;
  if (index.column() == Pin && role == Qt::CheckStateRole) {
    set_pinned(index.row(), value.toInt() == Qt::Checked);
    return true;
  }
  if (index.column() == Decision && role == Qt::EditRole) {
    if (value.toString() == data(index, Qt::EditRole).toString()) return true;
    return replace(index.row(), value.toString());
  }
  return false;
}

Qt::ItemFlags DecisionsModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  Qt::ItemFlags flags = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
  if (index.column() == Pin) flags |= Qt::ItemIsUserCheckable;
  if (index.column() == Decision) flags |= Qt::ItemIsEditable;
  return flags;
}

QVariant DecisionsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return section + 1;
  switch (section) {
    case Pin: return tr("Pin");
    case Decision: return tr("Decision");
    case Explanation: return tr("What it does");
    default: return {};
  }
}

}  // namespace nautilus::views
