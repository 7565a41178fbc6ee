#include "views/pass_log_model.h"

#include <QBrush>
#include <QColor>
#include <QFont>

#include <algorithm>

#include "core/driver/render.h"

namespace nautilus::views {

PassLogModel::PassLogModel(QObject* parent) : QAbstractTableModel(parent) {}

void PassLogModel::set_compilation(std::shared_ptr<const driver::Compilation> compilation) {
  beginResetModel();
  compilation_ = std::move(compilation);
  rebuild_rows();
  endResetModel();
}

void PassLogModel::set_hide_unchanged(bool hide) {
  if (hide == hide_unchanged_) return;
  beginResetModel();
  hide_unchanged_ = hide;
  rebuild_rows();
  endResetModel();
}

void PassLogModel::rebuild_rows() {
  rows_.clear();
  if (!compilation_) return;
  const auto& log = compilation_->log;
  for (size_t i = 0; i < log.size(); ++i) {
    const bool first_of_stage = i == 0 || log[i - 1].stage != log[i].stage;
    if (hide_unchanged_ && log[i].unchanged && !first_of_stage) continue;
    rows_.push_back(static_cast<int>(i));
  }
}

int PassLogModel::snapshot_index(int row) const {
  return row >= 0 && row < static_cast<int>(rows_.size()) ? rows_[static_cast<size_t>(row)] : -1;
}

int PassLogModel::row_of(int index) const {
  const auto found = std::find(rows_.begin(), rows_.end(), index);
  return found == rows_.end() ? -1 : static_cast<int>(found - rows_.begin());
}

int PassLogModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int PassLogModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant PassLogModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !compilation_ || index.row() >= static_cast<int>(rows_.size())) {
    return {};
  }
  const int log_index = rows_[static_cast<size_t>(index.row())];
  const driver::Snapshot& snapshot = compilation_->log[static_cast<size_t>(log_index)];
  if (role == kSnapshotRole) return log_index;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Index: return log_index;
      case Stage: return QString::fromLatin1(driver::stage_name(snapshot.stage));
      case Pass: return QString::fromStdString(snapshot.pass);
      case Summary: return QString::fromStdString(snapshot.summary);
      case Changed: return snapshot.unchanged ? tr("no") : tr("yes");
      case Milliseconds: return QString::number(snapshot.milliseconds, 'f', 2);
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) return QString::fromStdString(driver::pass_explanation(snapshot));
  if (role == Qt::ForegroundRole && snapshot.unchanged) return QBrush(QColor(0x8a, 0x8a, 0x8a));
  if (role == Qt::TextAlignmentRole &&
      (index.column() == Index || index.column() == Milliseconds)) {
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant PassLogModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Index: return tr("#");
    case Stage: return tr("Stage");
    case Pass: return tr("Pass");
    case Summary: return tr("Summary");
    case Changed: return tr("Changed");
    case Milliseconds: return tr("ms");
    default: return {};
  }
}

QString print_table_model(const QAbstractItemModel& model, const std::vector<int>& skip) {
  QString out;
  for (int row = 0; row < model.rowCount(); ++row) {
    QStringList cells;
    for (int column = 0; column < model.columnCount(); ++column) {
      if (std::find(skip.begin(), skip.end(), column) != skip.end()) continue;
      cells << model.data(model.index(row, column)).toString();
    }
    out += cells.join(QStringLiteral(" | ")) + QLatin1Char('\n');
  }
  return out;
}

}  // namespace nautilus::views
