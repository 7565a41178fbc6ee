// Teaching mode: walk through the lowering one pass at a time. The panel follows the stage view's
// selected pass and shows where it is ("pass 7 of 23 · stage scalar"), what the pass does (the
// decision's description from decision_registry(), with its before/after example, or the pass's
// summary from pass_registry()), how long it took, the unified diff it made, and what it did to
// the cost estimate. Previous / Next (also Alt+Left / Alt+Right in the window) move the stage
// view, so text, graph and diff follow.
//
// The estimate (analytical model, H100 preset) of a scheduling pass is core's
// driver::estimate_after_pass: the program after the pass with the rest scheduled by the search's
// default completion, run on the panel's worker, next to the same for the program before the pass;
// later stages show the estimate of the finished kernel. Estimates are cached per compilation.
#pragma once

#include <QString>
#include <QWidget>

#include <map>
#include <memory>
#include <utility>

#include "core/driver/pipeline.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace nautilus::views {

class CodeHighlighter;
class StageView;
class TaskRunner;

class TeachingPanel : public QWidget {
  Q_OBJECT

 public:
  TeachingPanel(StageView* stage_view, QWidget* parent = nullptr);

  void refresh();
  void refresh_colors();
  QLabel* title() const { return title_; }
  QPlainTextEdit* explanation() const { return explanation_; }
  QPlainTextEdit* diff() const { return diff_; }
  QLabel* estimate_label() const { return estimate_; }
  bool estimating() const;

 private:
  StageView* stage_view_;
  QLabel* title_ = nullptr;
  QPlainTextEdit* explanation_ = nullptr;
  QPlainTextEdit* diff_ = nullptr;
  CodeHighlighter* diff_highlighter_ = nullptr;
  QPushButton* previous_ = nullptr;
  QPushButton* next_ = nullptr;
  QLabel* estimate_ = nullptr;
  TaskRunner* worker_ = nullptr;
  void show_estimate();
  // (compilation, log index) -> estimate text
  std::map<std::pair<const driver::Compilation*, int>, QString> estimates_;
  std::shared_ptr<const driver::Compilation> cached_for_;
};

}  // namespace nautilus::views
