#include "views/decisions_panel.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "views/decisions_model.h"

namespace nautilus::views {

DecisionsPanel::DecisionsPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  model_ = new DecisionsModel(this);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  table_ = new QTableView(splitter);
  table_->setObjectName(QStringLiteral("decisions"));
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                          QAbstractItemView::AnyKeyPressed);
  table_->horizontalHeader()->setSectionResizeMode(DecisionsModel::Pin,
                                                   QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(DecisionsModel::Decision,
                                                   QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setWordWrap(false);
  explanation_ = new QPlainTextEdit(splitter);
  explanation_->setObjectName(QStringLiteral("decision_explanation"));
  explanation_->setReadOnly(true);
  explanation_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  explanation_->setPlaceholderText(tr("Select a decision to see what it does."));
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  layout->addWidget(splitter, 1);

  error_ = new QLabel(this);
  error_->setObjectName(QStringLiteral("decision_error"));
  error_->setWordWrap(true);
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_->setStyleSheet(QStringLiteral("color: #d0211c;"));
  error_->hide();
  layout->addWidget(error_);

  auto* add_row = new QHBoxLayout();
  new_decision_ = new QLineEdit(this);
  new_decision_->setObjectName(QStringLiteral("new_decision"));
  new_decision_->setPlaceholderText(tr("tile(O, m=64)  — Enter adds after the selection"));
  new_decision_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  add_row->addWidget(new_decision_, 1);
  auto* add = new QPushButton(tr("Add"), this);
  add_row->addWidget(add);
  layout->addLayout(add_row);

  auto* buttons = new QHBoxLayout();
  auto* remove = new QPushButton(tr("Remove"), this);
  auto* up = new QPushButton(tr("Up"), this);
  auto* down = new QPushButton(tr("Down"), this);
  auto* load = new QPushButton(tr("Load schedule…"), this);
  auto* clear = new QPushButton(tr("Clear"), this);
  for (QPushButton* button : {remove, up, down, load, clear}) buttons->addWidget(button);
  buttons->addStretch();
  layout->addLayout(buttons);

  const auto selected_row = [this] {
    const QModelIndex index = table_->currentIndex();
    return index.isValid() ? index.row() : -1;
  };
  connect(add, &QPushButton::clicked, this, &DecisionsPanel::add_from_field);
  connect(new_decision_, &QLineEdit::returnPressed, this, &DecisionsPanel::add_from_field);
  connect(remove, &QPushButton::clicked, this, [this, selected_row] { model_->remove(selected_row()); });
  connect(up, &QPushButton::clicked, this, [this, selected_row] {
    const int row = selected_row();
    if (model_->move(row, row - 1)) table_->selectRow(row - 1);
  });
  connect(down, &QPushButton::clicked, this, [this, selected_row] {
    const int row = selected_row();
    if (model_->move(row, row + 1)) table_->selectRow(row + 1);
  });
  connect(load, &QPushButton::clicked, this, &DecisionsPanel::load_schedule_requested);
  connect(clear, &QPushButton::clicked, this, [this] {
    model_->set_schedule({});
    Q_EMIT model_->schedule_changed();
  });
  connect(model_, &DecisionsModel::edit_rejected, this, &DecisionsPanel::show_error);
  connect(model_, &DecisionsModel::schedule_changed, this, [this] { show_error({}); });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          &DecisionsPanel::show_explanation);
  connect(model_, &QAbstractItemModel::modelReset, this, [this] {
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            &DecisionsPanel::show_explanation, Qt::UniqueConnection);
    show_explanation();
  });
}

bool DecisionsPanel::add_from_field() {
  const QString text = new_decision_->text().trimmed();
  if (text.isEmpty()) return false;
  const QModelIndex current = table_->currentIndex();
  const int row = current.isValid() ? current.row() + 1 : model_->rowCount();
  if (!model_->insert(row, text)) return false;
  new_decision_->clear();
  table_->selectRow(row);
  return true;
}

void DecisionsPanel::show_schedule_error(const QString& error) { show_error(error); }

void DecisionsPanel::show_error(const QString& error) {
  error_->setText(error);
  error_->setVisible(!error.isEmpty());
}

void DecisionsPanel::show_explanation() {
  const QModelIndex index = table_->currentIndex();
  if (!index.isValid() || index.row() >= model_->rowCount()) {
    explanation_->clear();
    return;
  }
  const sched::Decision& decision = model_->schedule().decisions[static_cast<size_t>(index.row())];
  const sched::DecisionKind* kind = sched::find_decision_kind(decision.kind);
  if (kind == nullptr) {
    explanation_->setPlainText(tr("Unknown decision kind '%1'.").arg(QString::fromStdString(decision.kind)));
    return;
  }
  explanation_->setPlainText(QString::fromStdString(sched::print_decision(decision) + "\n\n" +
                                                    kind->signature + "\n" + kind->summary +
                                                    "\n\n" + kind->description));
}

}  // namespace nautilus::views
