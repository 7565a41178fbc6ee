#include "views/graph_view.h"

#include <QApplication>
#include <QFileInfo>
#include <QFont>
#include <QFontDatabase>
#include <QFontMetricsF>
#include <QGraphicsItem>
#include <QGraphicsPathItem>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QImage>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QPalette>
#include <QPolygonF>
#include <QStyleOptionGraphicsItem>
#include <QSvgGenerator>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace nautilus::views {
namespace {

constexpr double kMinZoom = 0.02;
constexpr double kMaxZoom = 8.0;
constexpr double kReadableZoom = 0.7;

QColor accent() { return QColor(0xe0, 0x6c, 0x00); }
QColor selection_color() { return QColor(0x1f, 0x6f, 0xeb); }

class NodeItem : public QGraphicsItem {
 public:
  explicit NodeItem(const LayoutNode& node) : node_(node) {
    setPos(node.center);
    setData(0, node.id);
    setToolTip(node.label);
    setAcceptHoverEvents(false);
  }

  QRectF boundingRect() const override {
    return QRectF(-node_.width / 2 - 3, -node_.height / 2 - 3, node_.width + 6, node_.height + 6);
  }

  void paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) override {
    const QPalette palette = QApplication::palette();
    const QRectF box(-node_.width / 2, -node_.height / 2, node_.width, node_.height);
    QColor fill = node_.fill.isEmpty() ? palette.color(QPalette::Base) : QColor(node_.fill);
    const bool dark = palette.color(QPalette::Base).lightness() < 128;
    if (dark && !node_.fill.isEmpty()) fill = fill.darker(320);
    QPen pen(palette.color(QPalette::Text), node_.bold ? 2.0 : 1.0);
    if (highlighted) pen = QPen(accent(), 3.0);
    if (selected) pen = QPen(selection_color(), 3.5);
    painter->setPen(pen);
    painter->setBrush(fill);
    if (node_.shape == QStringLiteral("ellipse") || node_.shape == QStringLiteral("oval") ||
        node_.shape.isEmpty()) {
      painter->drawEllipse(box);
    } else if (node_.shape == QStringLiteral("box3d")) {
      painter->drawRect(box.adjusted(0, 3, -3, 0));
      painter->drawLine(box.topLeft() + QPointF(3, 0), box.topRight());
      painter->drawLine(box.topRight(), box.bottomRight() - QPointF(0, 3));
    } else {
      painter->drawRoundedRect(box, node_.shape == QStringLiteral("record") ? 2 : 4,
                               node_.shape == QStringLiteral("record") ? 2 : 4);
    }
    // Graphviz sized the node for its own font; fit the label into the box.
    // Graphviz measured the labels in a 14-point proportional font.
    QFont font = QApplication::font();
    font.setPointSizeF(11);
    const QStringList lines = node_.label.split(QLatin1Char('\n'));
    QFontMetricsF metrics(font);
    double widest = 1;
    for (const QString& line : lines) widest = std::max(widest, metrics.horizontalAdvance(line));
    const double line_height = metrics.height();
    const double scale = std::min({1.0, (box.width() - 8) / widest,
                                   (box.height() - 4) / (line_height * lines.size())});
    if (scale > 0.05) {
      painter->save();
      painter->setFont(font);
      painter->setPen(palette.color(QPalette::Text));
      painter->translate(box.center());
      painter->scale(scale, scale);
      const double total = line_height * lines.size();
      double y = -total / 2 + metrics.ascent();
      for (const QString& line : lines) {
        painter->drawText(QPointF(-metrics.horizontalAdvance(line) / 2, y), line);
        y += line_height;
      }
      painter->restore();
    }
  }

  bool selected = false;
  bool highlighted = false;

 private:
  LayoutNode node_;
};

QPainterPath spline_path(const QVector<QPointF>& points) {
  QPainterPath path;
  if (points.isEmpty()) return path;
  path.moveTo(points[0]);
  for (int i = 1; i + 2 < points.size(); i += 3) {
    path.cubicTo(points[i], points[i + 1], points[i + 2]);
  }
  return path;
}

QPolygonF arrow_head(QPointF tip, QPointF from) {
  const QPointF direction = tip - from;
  const double length = std::hypot(direction.x(), direction.y());
  if (length < 1e-6) return {};
  const QPointF unit = direction / length;
  const QPointF normal(-unit.y(), unit.x());
  const double size = std::max(length, 6.0);
  const QPointF base = tip - unit * size;
  return QPolygonF({tip, base + normal * size * 0.4, base - normal * size * 0.4});
}

}  // namespace

GraphView::GraphView(QWidget* parent) : QGraphicsView(parent) {
  setScene(new QGraphicsScene(this));
  setDragMode(QGraphicsView::ScrollHandDrag);
  setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  setViewportUpdateMode(QGraphicsView::BoundingRectViewportUpdate);
}

void GraphView::show_message(const QString& message) {
  scene()->clear();
  nodes_.clear();
  layout_.reset();
  auto* text = scene()->addSimpleText(message);
  text->setBrush(palette().color(QPalette::PlaceholderText));
  scene()->setSceneRect(text->boundingRect().adjusted(-20, -20, 20, 20));
  resetTransform();
}

void GraphView::set_layout(GraphLayoutPtr layout) {
  scene()->clear();
  nodes_.clear();
  layout_ = std::move(layout);
  if (!layout_) {
    show_message(tr("No graph for this stage."));
    return;
  }
  const QColor text = palette().color(QPalette::Text);
  QColor cluster_fill = palette().color(QPalette::AlternateBase);
  for (const LayoutCluster& cluster : layout_->clusters) {
    auto* box = scene()->addRect(cluster.box, QPen(text.lighter(150), 1, Qt::DashLine),
                                 cluster_fill);
    box->setZValue(-2);
    if (!cluster.label.isEmpty()) {
      auto* label = scene()->addSimpleText(cluster.label.split(QLatin1Char('\n')).front());
      label->setBrush(palette().color(QPalette::PlaceholderText));
      label->setPos(cluster.box.topLeft() + QPointF(4, 2));
      label->setZValue(-1);
    }
  }
  for (const LayoutEdge& edge : layout_->edges) {
    QPen pen(text, 1.0, edge.dashed ? Qt::DashLine : Qt::SolidLine);
    scene()->addPath(spline_path(edge.points), pen)->setZValue(0);
    if (edge.arrow_end && !edge.points.isEmpty()) {
      scene()->addPolygon(arrow_head(*edge.arrow_end, edge.points.back()), QPen(text), text)
          ->setZValue(0);
    }
    if (edge.arrow_start && !edge.points.isEmpty()) {
      scene()->addPolygon(arrow_head(*edge.arrow_start, edge.points.front()), QPen(text), text)
          ->setZValue(0);
    }
  }
  for (const LayoutNode& node : layout_->nodes) {
    auto* item = new NodeItem(node);
    item->setZValue(1);
    scene()->addItem(item);
    nodes_.push_back(item);
  }
  scene()->setSceneRect(layout_->bounds.adjusted(-20, -20, 20, 20));
  restyle();
  show_readable();
}

void GraphView::show_readable() {
  fit();
  // A wide graph fits at a scale where no label can be read: start readable at its top-left
  // corner instead (Fit, Ctrl+0, shows the whole graph).
  if (zoom() >= kReadableZoom) return;
  resetTransform();
  scale(kReadableZoom, kReadableZoom);
  const QRectF rect = scene()->sceneRect();
  const QSizeF visible = QSizeF(viewport()->size()) / kReadableZoom;
  centerOn(rect.left() + visible.width() / 2, rect.top() + visible.height() / 2);
}

bool GraphView::select_node(const QString& id, bool center) {
  for (QGraphicsItem* item : nodes_) {
    if (item->data(0).toString() != id) continue;
    selected_ = id;
    restyle();
    if (center) centerOn(item);
    Q_EMIT node_selected(id);
    return true;
  }
  return false;
}

void GraphView::highlight(const QSet<QString>& ids) {
  highlighted_ = ids;
  restyle();
}

bool GraphView::find_next(const QString& text) {
  if (text.isEmpty() || nodes_.empty() || !layout_) return false;
  size_t start = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->data(0).toString() == selected_) start = i + 1;
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const size_t i = (start + k) % nodes_.size();
    const LayoutNode& node = layout_->nodes[static_cast<int>(i)];
    if (node.label.contains(text, Qt::CaseInsensitive) ||
        node.id.contains(text, Qt::CaseInsensitive)) {
      return select_node(node.id, true);
    }
  }
  return false;
}

void GraphView::restyle() {
  for (QGraphicsItem* item : nodes_) {
    auto* node = static_cast<NodeItem*>(item);
    const QString id = item->data(0).toString();
    node->selected = id == selected_;
    node->highlighted = highlighted_.contains(id);
    node->setZValue(node->selected ? 3 : node->highlighted ? 2 : 1);
    node->update();
  }
}

void GraphView::fit() {
  if (scene()->items().isEmpty()) return;
  fitInView(scene()->sceneRect(), Qt::KeepAspectRatio);
  // A huge graph fits at an unreadable scale; never go below the minimum zoom.
  if (zoom() < kMinZoom) zoom_by(kMinZoom / zoom());
}

double GraphView::zoom() const { return transform().m11(); }

void GraphView::zoom_by(double factor) {
  const double target = std::clamp(zoom() * factor, kMinZoom, kMaxZoom);
  const double applied = target / zoom();
  scale(applied, applied);
}

void GraphView::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) return;
  zoom_by(std::pow(1.2, steps));
  event->accept();
}

void GraphView::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    for (QGraphicsItem* item : items(event->position().toPoint())) {
      const QString id = item->data(0).toString();
      if (!id.isEmpty()) {
        select_node(id, false);
        break;
      }
    }
  }
  QGraphicsView::mousePressEvent(event);
}

bool GraphView::export_svg(const QString& path, QString* error) {
  const QRectF rect = scene()->sceneRect();
  QSvgGenerator generator;
  generator.setFileName(path);
  generator.setSize(rect.size().toSize());
  generator.setViewBox(QRectF(QPointF(0, 0), rect.size()));
  generator.setTitle(QStringLiteral("Nautilus Studio graph"));
  QPainter painter;
  if (!painter.begin(&generator)) {
    if (error != nullptr) *error = tr("cannot write %1").arg(path);
    return false;
  }
  painter.fillRect(QRectF(QPointF(0, 0), rect.size()), palette().color(QPalette::Base));
  scene()->render(&painter, QRectF(QPointF(0, 0), rect.size()), rect);
  painter.end();
  if (!QFileInfo(path).isFile()) {
    if (error != nullptr) *error = tr("cannot write %1").arg(path);
    return false;
  }
  return true;
}

bool GraphView::export_png(const QString& path, QString* error) {
  const QRectF rect = scene()->sceneRect();
  // Large graphs are capped at 8000 pixels on their longer side to keep the image openable.
  const double scale = std::min(2.0, 8000.0 / std::max(1.0, std::max(rect.width(), rect.height())));
  QImage image((rect.size() * scale).toSize().expandedTo(QSize(1, 1)), QImage::Format_ARGB32);
  image.fill(palette().color(QPalette::Base));
  QPainter painter(&image);
  painter.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  scene()->render(&painter, QRectF(QPointF(0, 0), QSizeF(image.size())), rect);
  painter.end();
  if (!image.save(path, "PNG")) {
    if (error != nullptr) *error = tr("cannot write %1").arg(path);
    return false;
  }
  return true;
}

}  // namespace nautilus::views
