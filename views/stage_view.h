// The stage view: the pass log of the latest compilation on the left, and the selected snapshot on
// the right as text (the stage's printer, highlighted), as a graph (the core's DOT laid out by
// Graphviz on the layout worker, drawn by GraphView) or as the unified diff against the snapshot
// before it.
//
// Provenance: clicking a graph node looks up the spec statement it implements (node_origins) and
// emits `statement_selected`; `show_statement` marks every node of the current graph that comes
// from a statement, so a selection made anywhere (editor, CUDA view, another stage) shows up here.
// The selected statement survives switching passes and stages.
#pragma once

#include <QString>
#include <QWidget>

#include <cstdint>
#include <memory>

#include "core/driver/pipeline.h"
#include "views/graph_layout.h"
#include "views/snapshot_text.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QTabWidget;
class QTableView;

namespace nautilus::views {

class CodeHighlighter;
class GraphView;
class PassLogModel;

class StageView : public QWidget {
  Q_OBJECT

 public:
  enum Tab { TextTab = 0, GraphTab = 1, DiffTab = 2 };

  explicit StageView(QWidget* parent = nullptr);

  // Shows a new compilation, keeping the selected pass (by position in the log) where possible.
  void set_compilation(std::shared_ptr<const driver::Compilation> compilation, uint64_t generation);
  const std::shared_ptr<const driver::Compilation>& compilation() const { return compilation_; }

  // Selects log entry `index` (clamped); returns false when there is no log.
  bool select_snapshot(int index);
  int current_snapshot() const { return current_; }
  const driver::Snapshot* snapshot() const;
  // Moves to the next / previous visible pass (teaching mode and keyboard).
  void next_pass();
  void previous_pass();
  // The last snapshot of `stage`, its finished IR (stage picker).
  bool select_stage(driver::Stage stage);

  void show_tab(Tab tab);
  Tab current_tab() const;
  void set_hide_unchanged(bool hide);
  void find_in_graph(const QString& text);
  void refresh_colors();

  // Marks the nodes (graph) that come from spec statement `statement` (-1 clears).
  void show_statement(int statement);
  int selected_statement() const { return statement_; }

  GraphView* graph_view() const { return graph_; }
  QPlainTextEdit* text_view() const { return text_; }
  QPlainTextEdit* diff_view() const { return diff_; }
  PassLogModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  GraphLayouter* layouter() const { return layouter_; }
  // True while a layout for the current snapshot is being computed.
  bool graph_pending() const;
  // The text of the current snapshot (as shown), and its DOT.
  const QString& current_text() const { return current_text_; }
  const std::string& current_dot() const { return current_dot_; }

 Q_SIGNALS:
  void snapshot_changed(int index);
  // A graph node was selected: the spec statement it implements and the byte range of the
  // construct in the spec text (begin = end = -1 when only the statement is known).
  void statement_selected(int statement, int begin, int end);
  // A node of an MA tile IR graph was selected: its label (the op's MA tile IR text).
  void ma_op_selected(const QString& op_text);
  void graph_ready();
  void status_message(const QString& message);

 private:
  void show_current();
  void request_graph();
  void on_node_selected(const QString& id);
  void apply_statement_highlight();

  std::shared_ptr<const driver::Compilation> compilation_;
  uint64_t generation_ = 0;
  int current_ = -1;
  int statement_ = -1;
  QString current_text_;
  std::string current_dot_;
  NodeOrigins origins_;
  QString graph_key_;        // key of the layout the graph should show
  QString shown_graph_key_;  // key of the layout it shows

  PassLogModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  QCheckBox* hide_unchanged_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QPlainTextEdit* text_ = nullptr;
  QPlainTextEdit* diff_ = nullptr;
  CodeHighlighter* text_highlighter_ = nullptr;
  CodeHighlighter* diff_highlighter_ = nullptr;
  GraphView* graph_ = nullptr;
  QLineEdit* find_ = nullptr;
  QLabel* graph_status_ = nullptr;
  QLabel* title_ = nullptr;
  GraphLayouter* layouter_ = nullptr;
};

}  // namespace nautilus::views
