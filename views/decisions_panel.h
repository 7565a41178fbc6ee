// The decisions panel: the schedule the pipeline applies, as an editable list (DecisionsModel),
// with the explanation of the selected decision (its kind's description from decision_registry(),
// with the before/after example) and the reason of the last refused edit or of the compiler's
// schedule error. Buttons: add (a line edit for the new decision), remove, move up/down, load a
// schedule file (`assets/schedules/*.json` form), clear.
#pragma once

#include <QString>
#include <QWidget>

#include "core/sched/decision.h"

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QTableView;

namespace nautilus::views {

class DecisionsModel;

class DecisionsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit DecisionsPanel(QWidget* parent = nullptr);

  DecisionsModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QLineEdit* new_decision_edit() const { return new_decision_; }
  // The error line: a refused edit's reason, or the compiler's schedule error.
  QLabel* error_label() const { return error_; }

  // Shows the compiler's verdict on the current schedule ("" when it applied).
  void show_schedule_error(const QString& error);
  // Adds the text of the new-decision field after the selected row (or at the end).
  bool add_from_field();

 Q_SIGNALS:
  void load_schedule_requested();

 private:
  void show_explanation();
  void show_error(const QString& error);

  DecisionsModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  QLineEdit* new_decision_ = nullptr;
  QLabel* error_ = nullptr;
  QPlainTextEdit* explanation_ = nullptr;
};

}  // namespace nautilus::views
