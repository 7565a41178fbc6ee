#include "views/shape_panel.h"

#include <QFont>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include <limits>

namespace nautilus::views {

ShapePanel::ShapePanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  empty_ = new QLabel(tr("Sizes appear once the spec checks."), this);
  empty_->setWordWrap(true);
  layout->addWidget(empty_);
  form_ = new QFormLayout();
  layout->addLayout(form_);
  auto* buttons = new QHBoxLayout();
  auto* reset = new QPushButton(tr("Reset to the spec's sizes"), this);
  reset->setObjectName(QStringLiteral("reset_sizes"));
  connect(reset, &QPushButton::clicked, this, [this] {
    if (overrides_.empty()) return;
    overrides_.clear();
    Q_EMIT overrides_changed();
  });
  buttons->addWidget(reset);
  buttons->addStretch();
  layout->addLayout(buttons);
  layout->addStretch();
}

void ShapePanel::rebuild(const std::vector<std::pair<std::string, int64_t>>& sizes) {
  while (form_->rowCount() > 0) form_->removeRow(0);
  boxes_.clear();
  names_.clear();
  for (const auto& [name, value] : sizes) {
    auto* box = new QSpinBox(this);
    box->setObjectName(QStringLiteral("size_") + QString::fromStdString(name));
    box->setRange(1, std::numeric_limits<int>::max());
    box->setAccelerated(true);
    box->setKeyboardTracking(false);  // one recompile per committed value, not per digit
    box->setValue(static_cast<int>(std::min<int64_t>(value, std::numeric_limits<int>::max())));
    const std::string key = name;
    connect(box, &QSpinBox::valueChanged, this, [this, key](int v) { value_edited(key, v); });
    form_->addRow(QStringLiteral("-D %1").arg(QString::fromStdString(name)), box);
    boxes_[name] = box;
    names_.push_back(name);
  }
  empty_->setVisible(sizes.empty());
}

void ShapePanel::show_sizes(const std::vector<std::pair<std::string, int64_t>>& sizes) {
  std::vector<std::string> names;
  for (const auto& entry : sizes) names.push_back(entry.first);
  if (names != names_) rebuild(sizes);
  // Overrides of sizes the spec no longer has are meaningless.
  for (auto it = overrides_.begin(); it != overrides_.end();) {
    it = boxes_.count(it->first) ? std::next(it) : overrides_.erase(it);
  }
  for (const auto& [name, value] : sizes) {
    QSpinBox* box = boxes_[name];
    const QSignalBlocker blocker(box);
    box->setValue(static_cast<int>(std::min<int64_t>(value, std::numeric_limits<int>::max())));
    QFont font = box->font();
    font.setBold(overrides_.count(name) > 0);
    box->setFont(font);
    box->setToolTip(overrides_.count(name) ? tr("overridden (-D %1=%2)")
                                                 .arg(QString::fromStdString(name))
                                                 .arg(value)
                                           : tr("the spec's value"));
  }
}

std::vector<spec::SizeOverride> ShapePanel::overrides() const {
  std::vector<spec::SizeOverride> out;
  for (const auto& [name, value] : overrides_) out.push_back({name, value});
  return out;
}

void ShapePanel::set_overrides(const std::vector<std::pair<std::string, int64_t>>& overrides) {
  overrides_.clear();
  for (const auto& [name, value] : overrides) overrides_[name] = value;
}

QSpinBox* ShapePanel::spin_box(const QString& name) const {
  const auto found = boxes_.find(name.toStdString());
  return found == boxes_.end() ? nullptr : found->second;
}

void ShapePanel::value_edited(const std::string& name, int value) {
  overrides_[name] = value;
  Q_EMIT overrides_changed();
}

}  // namespace nautilus::views
