// The shape panel: the spec's size symbols (its `let` bindings) with their values, editable, as
// the `-D NAME=VALUE` bindings of the CLI. An edited size becomes an override (shown bold) that
// the pipeline compiles with; "Reset" returns to the spec's own values.
//
// The rows come from the checked spec of the latest compilation (`show_sizes`), so they follow the
// editor: adding `let K = 64` to the spec adds a row. Overrides of names the spec no longer binds
// are dropped.
#pragma once

#include <QString>
#include <QWidget>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/spec/sema.h"

class QFormLayout;
class QLabel;
class QSpinBox;

namespace nautilus::views {

class ShapePanel : public QWidget {
  Q_OBJECT

 public:
  explicit ShapePanel(QWidget* parent = nullptr);

  // The effective sizes of the latest compiled spec, in binding order.
  void show_sizes(const std::vector<std::pair<std::string, int64_t>>& sizes);
  // The user's overrides, as the pipeline takes them.
  std::vector<spec::SizeOverride> overrides() const;
  void set_overrides(const std::vector<std::pair<std::string, int64_t>>& overrides);
  QSpinBox* spin_box(const QString& name) const;

 Q_SIGNALS:
  void overrides_changed();

 private:
  void rebuild(const std::vector<std::pair<std::string, int64_t>>& sizes);
  void value_edited(const std::string& name, int value);

  QFormLayout* form_ = nullptr;
  QLabel* empty_ = nullptr;
  std::vector<std::string> names_;          // rows shown, in order
  std::map<std::string, QSpinBox*> boxes_;
  std::map<std::string, int64_t> overrides_;
};

}  // namespace nautilus::views
