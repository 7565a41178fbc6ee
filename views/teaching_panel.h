// Teaching mode: walk through the lowering one pass at a time. The panel follows the stage view's
// selected pass and shows where it is ("pass 7 of 23 · stage scalar"), what the pass does (the
// decision's description from decision_registry(), with its before/after example, or the pass's
// summary from pass_registry()), how long it took, and the unified diff it made. Previous / Next
// (also Alt+Left / Alt+Right in the window) move the stage view, so text, graph and diff follow.
#pragma once

#include <QWidget>

class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace nautilus::views {

class CodeHighlighter;
class StageView;

class TeachingPanel : public QWidget {
  Q_OBJECT

 public:
  TeachingPanel(StageView* stage_view, QWidget* parent = nullptr);

  void refresh();
  void refresh_colors();
  QLabel* title() const { return title_; }
  QPlainTextEdit* explanation() const { return explanation_; }
  QPlainTextEdit* diff() const { return diff_; }

 private:
  StageView* stage_view_;
  QLabel* title_ = nullptr;
  QPlainTextEdit* explanation_ = nullptr;
  QPlainTextEdit* diff_ = nullptr;
  CodeHighlighter* diff_highlighter_ = nullptr;
  QPushButton* previous_ = nullptr;
  QPushButton* next_ = nullptr;
};

}  // namespace nautilus::views
