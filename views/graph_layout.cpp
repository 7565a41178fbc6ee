#include "views/graph_layout.h"

#include <QMetaObject>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <chrono>
#include <cstring>

#include "views/task_runner.h"

namespace nautilus::views {
namespace {

constexpr size_t kCacheLimit = 64;

QString attribute(void* object, const char* name) {
  char* value = agget(object, const_cast<char*>(name));
  return value == nullptr ? QString() : QString::fromUtf8(value);
}

// DOT escapes in labels (\n, \l, \r end lines; a backslash before any other character keeps
// that character) and, for records, the field structure ({a|b}: each field on its own line).
QString plain_label(const QString& label, bool record) {
  QString out;
  out.reserve(label.size());
  for (qsizetype i = 0; i < label.size(); ++i) {
    const QChar c = label[i];
    if (c == QLatin1Char('\\') && i + 1 < label.size()) {
      const QChar next = label[++i];
      if (next == QLatin1Char('n') || next == QLatin1Char('l') || next == QLatin1Char('r')) {
        out += QLatin1Char('\n');
      } else {
        out += next;
      }
    } else if (record && (c == QLatin1Char('{') || c == QLatin1Char('}'))) {
      continue;
    } else if (record && c == QLatin1Char('|')) {
      out += QLatin1Char('\n');
    } else {
      out += c;
    }
  }
  while (out.endsWith(QLatin1Char('\n'))) out.chop(1);
  return out;
}

void collect_clusters(Agraph_t* graph, double top, QVector<LayoutCluster>* out) {
  for (int i = 1; i <= GD_n_cluster(graph); ++i) {
    Agraph_t* cluster = GD_clust(graph)[i];
    const boxf box = GD_bb(cluster);
    LayoutCluster item;
    item.box = QRectF(QPointF(box.LL.x, top - box.UR.y), QPointF(box.UR.x, top - box.LL.y));
    if (GD_label(cluster) != nullptr && GD_label(cluster)->text != nullptr) {
      item.label = plain_label(QString::fromUtf8(GD_label(cluster)->text), false);
    }
    out->push_back(item);
    collect_clusters(cluster, top, out);
  }
}

}  // namespace

GraphLayoutPtr layout_dot(const std::string& dot, std::string* error) {
  const auto start = std::chrono::steady_clock::now();
  Agraph_t* graph = agmemread(dot.c_str());
  if (graph == nullptr) {
    if (error != nullptr) *error = "Graphviz could not parse the graph";
    return nullptr;
  }
  GVC_t* context = gvContext();
  if (gvLayout(context, graph, "dot") != 0) {
    agclose(graph);
    gvFreeContext(context);
    if (error != nullptr) *error = "Graphviz could not lay out the graph";
    return nullptr;
  }
  auto layout = std::make_shared<GraphLayout>();
  const boxf bb = GD_bb(graph);
  const double top = bb.UR.y;  // Graphviz's y grows upwards; Qt's downwards
  layout->bounds = QRectF(QPointF(bb.LL.x, 0), QPointF(bb.UR.x, bb.UR.y - bb.LL.y));
  for (Agnode_t* node = agfstnode(graph); node != nullptr; node = agnxtnode(graph, node)) {
    LayoutNode item;
    item.id = QString::fromUtf8(agnameof(node));
    item.shape = attribute(node, "shape");
    QString label = attribute(node, "label");
    if (label.isEmpty() || label == QStringLiteral("\\N")) label = item.id;
    item.label = plain_label(label, item.shape.contains(QStringLiteral("record")));
    item.center = QPointF(ND_coord(node).x, top - ND_coord(node).y);
    item.width = ND_width(node) * 72.0;
    item.height = ND_height(node) * 72.0;
    item.fill = attribute(node, "fillcolor");
    item.bold = attribute(node, "penwidth").toDouble() > 1.0;
    layout->nodes.push_back(item);
    for (Agedge_t* edge = agfstout(graph, node); edge != nullptr; edge = agnxtout(graph, edge)) {
      LayoutEdge line;
      line.from = item.id;
      line.to = QString::fromUtf8(agnameof(aghead(edge)));
      line.dashed = attribute(edge, "style").contains(QStringLiteral("dashed"));
      const splines* spline = ED_spl(edge);
      if (spline != nullptr && spline->size > 0) {
        const bezier& curve = spline->list[0];
        for (int i = 0; i < static_cast<int>(curve.size); ++i) {
          line.points.push_back(QPointF(curve.list[i].x, top - curve.list[i].y));
        }
        if (curve.eflag != 0) line.arrow_end = QPointF(curve.ep.x, top - curve.ep.y);
        if (curve.sflag != 0) line.arrow_start = QPointF(curve.sp.x, top - curve.sp.y);
      }
      layout->edges.push_back(line);
    }
  }
  collect_clusters(graph, top, &layout->clusters);
  gvFreeLayout(context, graph);
  agclose(graph);
  gvFreeContext(context);
  layout->milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  layout->thread = std::this_thread::get_id();
  return layout;
}

int count_dot_nodes(const std::string& dot) {
  int count = 0;
  size_t start = 0;
  while (start < dot.size()) {
    size_t end = dot.find('\n', start);
    if (end == std::string::npos) end = dot.size();
    const std::string_view line(dot.data() + start, end - start);
    const size_t first = line.find_first_not_of(' ');
    // A node statement: a quoted id followed by attributes, not an edge ("a" -> "b").
    if (first != std::string_view::npos && line[first] == '"') {
      const size_t close = line.find('"', first + 1);
      if (close != std::string_view::npos) {
        const std::string_view rest = line.substr(close + 1);
        const size_t next = rest.find_first_not_of(' ');
        if (next != std::string_view::npos && rest[next] == '[') ++count;
      }
    }
    start = end + 1;
  }
  return count;
}

GraphLayouter::GraphLayouter(QObject* parent) : QObject(parent), runner_(new TaskRunner(this)) {
  qRegisterMetaType<GraphLayoutPtr>();
}

void GraphLayouter::request(const QString& key, const std::string& dot) {
  const uint64_t generation = ++generation_;
  Q_EMIT started(key);
  const auto cached = cache_.find(key);
  if (cached != cache_.end()) {
    GraphLayoutPtr layout = cached->second;
    QMetaObject::invokeMethod(
        this, [this, generation, key, layout] { deliver(generation, key, layout, {}); },
        Qt::QueuedConnection);
    return;
  }
  // The job touches no member: only layout_dot, on the runner's one thread. Its continuation
  // runs on this object's thread, and not at all once a later request or cancel made it stale.
  runner_->post([this, generation, key, dot]() -> TaskRunner::Continuation {
    std::string error;
    GraphLayoutPtr layout = layout_dot(dot, &error);
    return [this, generation, key, layout, reason = QString::fromStdString(error)] {
      deliver(generation, key, layout, reason);
    };
  });
}

void GraphLayouter::cancel() {
  delivered_ = ++generation_;
  runner_->cancel();
}

void GraphLayouter::deliver(uint64_t generation, const QString& key, GraphLayoutPtr layout,
                            const QString& error) {
  if (layout) {
    // The cache is bounded because every recompilation brings new snapshots (and keys).
    if (cache_.size() >= kCacheLimit) cache_.clear();
    cache_[key] = layout;
  }
  if (generation != generation_) return;
  delivered_ = generation;
  if (layout) {
    Q_EMIT laid_out(key, layout);
  } else {
    Q_EMIT failed(key, error);
  }
}

}  // namespace nautilus::views
