#include "views/tuning_history_model.h"

#include <QBrush>
#include <QColor>
#include <QDateTime>
#include <QFont>

#include <algorithm>

namespace nautilus::views {

QString record_outcome(const tune::TuningRecord& record) {
  QString text = record.status == "ok" ? QString::fromLatin1(tune::validation_name(record.validation))
                                       : QString::fromStdString(record.status);
  text.replace(QLatin1Char('_'), QLatin1Char(' '));
  text.replace(QLatin1Char('-'), QLatin1Char(' '));
  return text;
}

TuningHistoryModel::TuningHistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void TuningHistoryModel::set_records(std::vector<tune::TuningRecord> records) {
  beginResetModel();
  records_ = std::move(records);
  std::stable_sort(records_.begin(), records_.end(),
                   [](const auto& a, const auto& b) { return a.id < b.id; });
  best_so_far_.clear();
  best_row_ = -1;
  std::optional<double> best;
  for (size_t row = 0; row < records_.size(); ++row) {
    const tune::TuningRecord& record = records_[row];
    if (record.usable() && (!best || *record.median_us < *best)) {
      best = record.median_us;
      best_row_ = static_cast<int>(row);
    }
    best_so_far_.push_back(best);
  }
  endResetModel();
}

int TuningHistoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(records_.size());
}

int TuningHistoryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant TuningHistoryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= static_cast<int>(records_.size())) return {};
  const tune::TuningRecord& record = records_[static_cast<size_t>(index.row())];
  const auto microseconds = [](const std::optional<double>& us) {
    return us ? QString::number(*us, 'f', 2) : QString();
  };
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Order: return index.row() + 1;
      case Time:
        return QDateTime::fromSecsSinceEpoch(record.created_unix, Qt::UTC)
            .toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
      case Schedule: return QString::fromStdString(record.key.schedule);
      case Median: return microseconds(record.median_us);
      case Estimate: return microseconds(record.estimate_us);
      case Validation: return record_outcome(record);
      case Registers: return record.registers ? QString::number(*record.registers) : QString();
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    QString text = tr("record %1 (%2)\n%3").arg(record.id).arg(QString::fromStdString(record.source),
                                                               QString::fromStdString(record.key.schedule));
    if (!record.message.empty()) text += QLatin1Char('\n') + QString::fromStdString(record.message);
    if (record.max_relative_error) {
      text += tr("\nmax relative error %1").arg(*record.max_relative_error);
    }
    return text;
  }
  if (role == Qt::ForegroundRole && !record.usable()) return QBrush(QColor(0xd0, 0x21, 0x1c));
  if (role == Qt::FontRole && index.row() == best_row_) {
    QFont font;
    font.setBold(true);
    return font;
  }
  if (role == Qt::TextAlignmentRole &&
      (index.column() == Order || index.column() == Median || index.column() == Estimate ||
       index.column() == Registers)) {
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

QVariant TuningHistoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Order: return tr("#");
    case Time: return tr("Time (UTC)");
    case Schedule: return tr("Schedule");
    case Median: return tr("Median µs");
    case Estimate: return tr("Estimate µs");
    case Validation: return tr("Validation");
    case Registers: return tr("Registers");
    default: return {};
  }
}

}  // namespace nautilus::views
