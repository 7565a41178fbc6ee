// The pass log of a compilation as a table: one row per Snapshot, in pipeline order.
//
//   #   stage    pass                    summary                              changed  ms
//   0   spec     parse-and-check         parse the .nt text and check it      yes      0.10
//   6   scalar   launch(O_sum_acc, ...)  set warps and stages of a kernel     no       0.00
//
// "Hide unchanged passes" (Compiler Explorer's option) drops the rows of passes that returned
// their input; the first snapshot of every stage always stays, since it introduces the stage.
// `snapshot_index(row)` maps a row back to the log, which the stage view reads.
#pragma once

#include <QAbstractTableModel>

#include <memory>
#include <vector>

#include "core/driver/pipeline.h"

namespace nautilus::views {

class PassLogModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Index, Stage, Pass, Summary, Changed, Milliseconds, ColumnCount };
  // Qt::UserRole on any column: the row's snapshot index (int).
  static constexpr int kSnapshotRole = Qt::UserRole;

  explicit PassLogModel(QObject* parent = nullptr);

  void set_compilation(std::shared_ptr<const driver::Compilation> compilation);
  const std::shared_ptr<const driver::Compilation>& compilation() const { return compilation_; }
  void set_hide_unchanged(bool hide);
  bool hide_unchanged() const { return hide_unchanged_; }

  // The log index of `row`, or -1.
  int snapshot_index(int row) const;
  // The row showing log entry `index`, or -1 when it is hidden or absent.
  int row_of(int index) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  void rebuild_rows();

  std::shared_ptr<const driver::Compilation> compilation_;
  bool hide_unchanged_ = false;
  std::vector<int> rows_;  // snapshot index per visible row
};

// The visible rows of `model` as text, one line each (cells joined by " | "), leaving out the
// columns in `skip`: what the golden tests compare.
QString print_table_model(const QAbstractItemModel& model, const std::vector<int>& skip = {});

}  // namespace nautilus::views
