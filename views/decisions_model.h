// The current schedule as an editable list: one row per decision, in the order they apply.
//
//   pin  decision                        explanation (decision_registry() summary)
//   [x]  rolling_update(O_sum, n, tile=64)  Turns a reduction over n into ...
//   [ ]  tile(O_sum_acc, m=128)             Splits the named axes of a block ...
//
// Column Decision is editable: the new text is parsed (sched::parse_decision) and the resulting
// schedule is checked by the validator the window installs (it applies the schedule to the spec's
// scalar IR); when either fails, the edit is rejected — the schedule stays as it was and
// `edit_rejected` carries the reason ("expected ')' at column 14", "decision 2 tile(O, q=4) does
// not apply: ..."). Rows can be added, removed and moved; every accepted change emits
// `schedule_changed`.
//
// Checking a schedule compiles the spec, so the window installs an *asynchronous* validator: it
// checks the candidate on a worker thread and answers on the UI thread. A change then parses at
// once (a parse error is refused immediately), waits while `validating()`, and is applied or
// refused when the answer arrives; further changes are refused until then, so the answer always
// describes the schedule it would change. set_schedule() drops a pending answer. Pins (column Pin, checkable) are kept per decision for the search: they do
// not change the schedule.
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::views {

class DecisionsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Pin, Decision, Explanation, ColumnCount };
  // Returns "" when `schedule` applies, else the reason it does not.
  using Validator = std::function<std::string(const sched::Schedule& schedule)>;
  // Called on the UI thread with the validator's answer ("" when the schedule applies).
  using ValidationDone = std::function<void(const std::string& reason)>;
  // Starts checking `schedule` (on a worker) and calls `done` on the UI thread when it knows.
  using AsyncValidator = std::function<void(const sched::Schedule& schedule, ValidationDone done)>;

  explicit DecisionsModel(QObject* parent = nullptr);

  void set_validator(Validator validator) { validator_ = std::move(validator); }
  // Replaces the synchronous validator.
  void set_async_validator(AsyncValidator validator) { async_validator_ = std::move(validator); }
  // A change waits for the asynchronous validator's answer.
  bool validating() const { return validating_; }
  // Replaces the schedule (no validation: it comes from a file or a session) and the pins.
  void set_schedule(const sched::Schedule& schedule, const std::vector<bool>& pins = {});
  const sched::Schedule& schedule() const { return schedule_; }
  const std::vector<bool>& pins() const { return pins_; }
  const QString& last_error() const { return last_error_; }

  // Each returns false (and emits edit_rejected) when the change is refused; with an asynchronous
  // validator, true means the change was handed to it (applied or refused when it answers).
  bool replace(int row, const QString& text);
  bool insert(int row, const QString& text);
  bool remove(int row);
  bool move(int row, int to_row);
  void set_pinned(int row, bool pinned);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 Q_SIGNALS:
  void schedule_changed();
  void edit_rejected(const QString& reason);
  void pins_changed();

 private:
  // Parses `text`; on failure records and reports the reason.
  bool parse(const QString& text, sched::Decision* decision);
  // Validates `candidate`; on success it becomes the schedule.
  bool accept(const sched::Schedule& candidate, const QString& what);
  // Validates `candidate` (now or on the worker) and runs `apply` with it once it is accepted.
  bool submit(sched::Schedule candidate, const QString& what,
              std::function<void(sched::Schedule)> apply);
  void reject(const QString& reason);

  sched::Schedule schedule_;
  std::vector<bool> pins_;
  Validator validator_;
  AsyncValidator async_validator_;
  bool validating_ = false;
  uint64_t validation_ = 0;  // the newest asynchronous validation; older answers are dropped
  QString last_error_;
};

}  // namespace nautilus::views
