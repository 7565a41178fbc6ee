#include "views/roofline_widget.h"

#include <QPainter>
#include <QPainterPath>
#include <QPalette>
#include <QPolygonF>

#include <algorithm>
#include <cmath>

namespace nautilus::views {

RooflineWidget::RooflineWidget(QWidget* parent) : QWidget(parent) {
  setMinimumSize(240, 160);
  setObjectName(QStringLiteral("roofline"));
}

void RooflineWidget::set_ceilings(std::optional<double> peak_flops_per_s,
                                  std::optional<double> peak_bytes_per_s, const QString& device) {
  peak_flops_ = peak_flops_per_s;
  peak_bytes_ = peak_bytes_per_s;
  device_ = device;
  update();
}

void RooflineWidget::set_points(std::vector<RooflinePoint> points) {
  points_ = std::move(points);
  update();
}

void RooflineWidget::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  const QPalette& colors = palette();
  painter.fillRect(rect(), colors.color(QPalette::Base));
  const QRectF plot = QRectF(rect()).adjusted(52, 22, -14, -34);
  painter.setPen(colors.color(QPalette::Text));
  painter.drawText(QRectF(rect()).adjusted(8, 2, -8, 0), Qt::AlignTop | Qt::AlignLeft,
                   tr("Roofline %1").arg(device_.isEmpty() ? QString() : QStringLiteral("· ") + device_));
  if (!peak_flops_ || !peak_bytes_ || *peak_flops_ <= 0 || *peak_bytes_ <= 0) {
    painter.setPen(colors.color(QPalette::PlaceholderText));
    painter.drawText(plot, Qt::AlignCenter | Qt::TextWordWrap,
                     tr("No device ceilings yet: a run on a GPU reports its bandwidth and clock."));
    return;
  }
  // Axes: intensity 2^-2 .. 2^12 FLOP/B, performance from 1/1000 of peak to 2x peak (log10).
  const double x_min = std::log2(0.25), x_max = std::log2(4096.0);
  const double peak_tflops = *peak_flops_ * 1e-12;
  const double y_max = std::log10(peak_tflops * 2);
  const double y_min = std::log10(peak_tflops / 1000);
  const auto to_x = [&](double intensity) {
    return plot.left() + (std::log2(intensity) - x_min) / (x_max - x_min) * plot.width();
  };
  const auto to_y = [&](double tflops) {
    const double clamped = std::clamp(std::log10(std::max(tflops, 1e-12)), y_min, y_max);
    return plot.bottom() - (clamped - y_min) / (y_max - y_min) * plot.height();
  };
  QColor grid = colors.color(QPalette::Text);
  grid.setAlpha(40);
  painter.setPen(grid);
  for (int e = -2; e <= 12; e += 2) {
    const double x = to_x(std::pow(2.0, e));
    painter.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    painter.setPen(colors.color(QPalette::PlaceholderText));
    painter.drawText(QRectF(x - 30, plot.bottom() + 1, 60, 14), Qt::AlignCenter,
                     QString::number(std::pow(2.0, e), 'g', 4));
    painter.setPen(grid);
  }
  for (int e = static_cast<int>(std::ceil(y_min)); e <= static_cast<int>(std::floor(y_max)); ++e) {
    const double y = to_y(std::pow(10.0, e));
    painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    painter.setPen(colors.color(QPalette::PlaceholderText));
    painter.drawText(QRectF(0, y - 8, plot.left() - 4, 16), Qt::AlignRight | Qt::AlignVCenter,
                     QString::number(std::pow(10.0, e), 'g', 3));
    painter.setPen(grid);
  }
  painter.setPen(colors.color(QPalette::Text));
  painter.drawRect(plot);
  painter.drawText(QRectF(plot.left(), plot.bottom() + 15, plot.width(), 18), Qt::AlignCenter,
                   tr("FLOP per DRAM byte"));
  painter.save();
  painter.translate(12, plot.center().y());
  painter.rotate(-90);
  painter.drawText(QRectF(-60, -8, 120, 16), Qt::AlignCenter, tr("TFLOP/s"));
  painter.restore();

  // The roof: min(bandwidth * intensity, peak).
  const double bandwidth_tb = *peak_bytes_ * 1e-12;
  QPainterPath roof;
  const int steps = 64;
  for (int i = 0; i <= steps; ++i) {
    const double intensity = std::pow(2.0, x_min + (x_max - x_min) * i / steps);
    const QPointF point(to_x(intensity), to_y(std::min(bandwidth_tb * intensity, peak_tflops)));
    if (i == 0) roof.moveTo(point); else roof.lineTo(point);
  }
  painter.setPen(QPen(QColor(0xe0, 0x6c, 0x00), 2));
  painter.drawPath(roof);
  painter.drawText(QPointF(plot.right() - 150, to_y(peak_tflops) - 4),
                   tr("%1 TFLOP/s tensor").arg(peak_tflops, 0, 'f', 0));

  for (size_t i = 0; i < points_.size(); ++i) {
    const RooflinePoint& point = points_[i];
    if (point.intensity <= 0 || point.flops_per_s <= 0) continue;
    const QPointF at(to_x(point.intensity), to_y(point.flops_per_s * 1e-12));
    if (point.estimate) {
      painter.setPen(QPen(QColor(0x8e, 0x24, 0xaa), 2));
      painter.setBrush(Qt::NoBrush);
      painter.drawPolygon(QPolygonF({at + QPointF(0, -6), at + QPointF(6, 0), at + QPointF(0, 6),
                                     at + QPointF(-6, 0)}));
      painter.setPen(colors.color(QPalette::Text));
      // Labels near the right edge go to the left of their point.
      const double width = painter.fontMetrics().horizontalAdvance(point.label);
      const QPointF offset = at.x() + 8 + width > plot.right() ? QPointF(-8 - width, 14) : QPointF(8, 14);
      painter.drawText(at + offset, point.label);
      continue;
    }
    const bool newest = i + 1 == points_.size();
    painter.setPen(QPen(colors.color(QPalette::Highlight), 2));
    painter.setBrush(newest ? colors.color(QPalette::Highlight) : Qt::NoBrush);
    painter.drawEllipse(at, 4.5, 4.5);
    if (newest) {
      painter.setPen(colors.color(QPalette::Text));
      painter.drawText(at + QPointF(7, -6), point.label);
    }
  }
}

}  // namespace nautilus::views
