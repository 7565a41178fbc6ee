// The IR graph of one snapshot, drawn from a Graphviz layout (graph_layout.h) in a
// QGraphicsView: clusters as rounded boxes, edges as the layout's Bézier splines (dashed for
// loop-carried values), nodes in their DOT shape and fill.
//
// Interaction: the wheel zooms around the cursor, dragging pans, `fit()` shows the whole graph,
// `find_next(text)` selects and centres the next node whose label or id contains the text, and a
// click selects a node (signal `node_selected`). `highlight(ids)` marks nodes (the provenance of
// a selection elsewhere) without selecting them. The scene can be written as SVG or PNG.
#pragma once

#include <QGraphicsView>
#include <QSet>
#include <QString>

#include <vector>

#include "views/graph_layout.h"

class QGraphicsItem;

namespace nautilus::views {

class GraphView : public QGraphicsView {
  Q_OBJECT

 public:
  explicit GraphView(QWidget* parent = nullptr);

  // Replaces the scene with `layout` (nullptr: empty scene with `message` shown instead).
  void set_layout(GraphLayoutPtr layout);
  void show_message(const QString& message);
  const GraphLayoutPtr& graph_layout() const { return layout_; }

  // Number of node items in the scene.
  int node_count() const { return static_cast<int>(nodes_.size()); }
  QString selected_node() const { return selected_; }
  // Selects the node `id` (and centres it); false when there is no such node.
  bool select_node(const QString& id, bool center = true);
  // Marks `ids` as related to the current selection (drawn with an accent outline).
  void highlight(const QSet<QString>& ids);
  const QSet<QString>& highlighted() const { return highlighted_; }

  // Finds the next node after the selection whose label or id contains `text` (case-insensitive);
  // selects it and returns true, or returns false.
  bool find_next(const QString& text);

  void fit();
  // Fits the graph, or when that would make labels unreadable, shows its top-left corner at a
  // readable zoom.
  void show_readable();
  void zoom_by(double factor);
  double zoom() const;

  // Writes the whole scene; false with `error` on failure.
  bool export_svg(const QString& path, QString* error = nullptr);
  bool export_png(const QString& path, QString* error = nullptr);

 Q_SIGNALS:
  void node_selected(const QString& id);

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  void restyle();

  GraphLayoutPtr layout_;
  std::vector<QGraphicsItem*> nodes_;  // owned by the scene; data(0) is the node id
  QString selected_;
  QSet<QString> highlighted_;
};

}  // namespace nautilus::views
