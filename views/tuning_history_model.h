// The tuning database's records of one spec, sizes and device as a table, in record order (the
// order they were measured: oldest first, so the chart beside it reads left to right as the
// tuner went):
//
//   #  time (UTC)        schedule                     median µs  estimate µs  validation      registers
//   1  2026-11-27 10:42  tile(C, m=64, n=64); ...     41.20      38.7         passed          64
//   2  2026-11-27 10:42  tile(C, m=128, n=64); ...               35.1         wrong results
//
// The best-so-far column of each row (`best_so_far`) is the fastest validated median among the
// rows up to it; `best_row` is the fastest validated row overall (ties: the earlier record).
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <optional>
#include <vector>

#include "core/tune/tuning_db.h"

namespace nautilus::views {

class TuningHistoryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Order, Time, Schedule, Median, Estimate, Validation, Registers, ColumnCount };

  explicit TuningHistoryModel(QObject* parent = nullptr);

  // Takes the records (any order; they are sorted by id, the database's insertion order).
  void set_records(std::vector<tune::TuningRecord> records);
  const std::vector<tune::TuningRecord>& records() const { return records_; }
  // Per row: the fastest validated median of the rows up to it (nullopt before the first).
  const std::vector<std::optional<double>>& best_so_far() const { return best_so_far_; }
  // The fastest validated row, or -1.
  int best_row() const { return best_row_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<tune::TuningRecord> records_;
  std::vector<std::optional<double>> best_so_far_;
  int best_row_ = -1;
};

// "passed", "failed", or why the record has no validation: the runner's status with spaces
// ("wrong results", "fault", "build error").
QString record_outcome(const tune::TuningRecord& record);

}  // namespace nautilus::views
