// Graphviz layout of the core's DOT graphs, off the UI thread.
//
// `layout_dot` parses DOT text with libcgraph (agmemread), lays it out with the "dot" engine of
// libgvc and copies out what the graph view draws: nodes (id, label, centre, size, shape, fill),
// edges (cubic Bézier control points, dashed or not, arrow ends) and clusters (label, box), in
// points with y pointing down (Graphviz's y is flipped against the bounding box). It returns a
// reason instead of a layout when the DOT does not parse.
//
// Graphviz keeps global state and is not thread-safe, so every layout runs on the single worker
// thread (a TaskRunner) of the app's one `GraphLayouter`. Layouts are cached by key (the view uses
// one key per snapshot and stage): a snapshot is immutable, so its layout never changes. Requests
// carry a generation; a result for a request that a newer one replaced is dropped, never
// delivered.
#pragma once

#include <QObject>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <QVector>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace nautilus::views {

struct LayoutNode {
  QString id;
  QString label;
  QPointF center;
  double width = 0;   // points
  double height = 0;
  QString shape;      // "box", "ellipse", "record", "box3d", ...
  QString fill;       // "#dbeafe" or empty
  bool bold = false;  // penwidth > 1
};

struct LayoutEdge {
  QString from;
  QString to;
  QVector<QPointF> points;  // 1 + 3k control points of cubic Béziers
  std::optional<QPointF> arrow_end;
  std::optional<QPointF> arrow_start;
  bool dashed = false;
};

struct LayoutCluster {
  QString label;
  QRectF box;
};

struct GraphLayout {
  QRectF bounds;
  QVector<LayoutNode> nodes;
  QVector<LayoutEdge> edges;
  QVector<LayoutCluster> clusters;
  double milliseconds = 0;  // Graphviz time
  std::thread::id thread;   // the thread that ran the layout (tests check it is not the UI's)
};
using GraphLayoutPtr = std::shared_ptr<const GraphLayout>;

// Lays out `dot`. Not thread-safe (Graphviz): call from one thread at a time.
GraphLayoutPtr layout_dot(const std::string& dot, std::string* error);

// Number of node statements in a DOT text: lines of the form `  "id" [...]` (how the core's
// printers write nodes). For tests and the "n nodes" status.
int count_dot_nodes(const std::string& dot);

class TaskRunner;

class GraphLayouter : public QObject {
  Q_OBJECT

 public:
  explicit GraphLayouter(QObject* parent = nullptr);
  GraphLayouter(const GraphLayouter&) = delete;
  GraphLayouter& operator=(const GraphLayouter&) = delete;

  // Asks for the layout of `dot` under `key`; a cached layout is delivered at once (still through
  // `laid_out`, from the event loop). Replaces any request not yet delivered.
  void request(const QString& key, const std::string& dot);
  // Drops the request in flight (its result will not be delivered).
  void cancel();
  bool busy() const { return delivered_ < generation_; }

 Q_SIGNALS:
  void started(const QString& key);
  void laid_out(const QString& key, nautilus::views::GraphLayoutPtr layout);
  void failed(const QString& key, const QString& reason);

 private:
  void deliver(uint64_t generation, const QString& key, GraphLayoutPtr layout,
               const QString& error);

  uint64_t generation_ = 0;  // UI thread
  uint64_t delivered_ = 0;   // UI thread
  std::map<QString, GraphLayoutPtr> cache_;  // UI thread
  TaskRunner* runner_ = nullptr;
};

}  // namespace nautilus::views

Q_DECLARE_METATYPE(nautilus::views::GraphLayoutPtr)
