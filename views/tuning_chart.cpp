#include "views/tuning_chart.h"

#include <QPainter>
#include <QPainterPath>
#include <QPalette>

#include <algorithm>
#include <cmath>

namespace nautilus::views {

TuningChart::TuningChart(QWidget* parent) : QWidget(parent) {
  setMinimumSize(240, 160);
  setObjectName(QStringLiteral("tuning_chart"));
}

void TuningChart::set_series(std::vector<std::optional<double>> medians,
                             std::vector<std::optional<double>> best_so_far) {
  medians_ = std::move(medians);
  best_so_far_ = std::move(best_so_far);
  update();
}

void TuningChart::set_roofline(std::optional<double> microseconds, const QString& label) {
  roofline_us_ = microseconds;
  roofline_label_ = label;
  update();
}

void TuningChart::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  const QPalette& colors = palette();
  painter.fillRect(rect(), colors.color(QPalette::Base));
  const QRectF plot = QRectF(rect()).adjusted(56, 22, -14, -30);
  painter.setPen(colors.color(QPalette::Text));
  painter.drawText(QRectF(rect()).adjusted(8, 2, -8, 0), Qt::AlignTop | Qt::AlignLeft,
                   tr("Measured time by record"));
  double y_max = 0;
  for (const std::optional<double>& median : medians_) {
    if (median) y_max = std::max(y_max, *median);
  }
  if (roofline_us_) y_max = std::max(y_max, *roofline_us_);
  if (medians_.empty() || y_max <= 0) {
    painter.setPen(colors.color(QPalette::PlaceholderText));
    painter.drawText(plot, Qt::AlignCenter | Qt::TextWordWrap,
                     medians_.empty() ? tr("No measurements of this spec, sizes and device yet: "
                                           "Measure in the Search panel, or nautilus tune.")
                                      : tr("No record has a validated time."));
    return;
  }
  // Linear axes: records 1..n left to right, 0 µs at the bottom to the first round tick at
  // least 5% above the slowest; ticks are 1, 2, 2.5 or 5 times a power of ten, at most five.
  const double top = y_max * 1.05;
  const double decade = std::pow(10.0, std::floor(std::log10(top / 5)));
  double step = 10 * decade;
  for (double nice : {1.0, 2.0, 2.5, 5.0}) {
    if (nice * decade >= top / 5) {
      step = nice * decade;
      break;
    }
  }
  const int ticks = static_cast<int>(std::ceil(top / step));
  y_max = step * ticks;
  const int count = static_cast<int>(medians_.size());
  const auto to_x = [&](int index) {
    return count == 1 ? plot.center().x()
                      : plot.left() + plot.width() * index / static_cast<double>(count - 1);
  };
  const auto to_y = [&](double us) { return plot.bottom() - us / y_max * plot.height(); };

  QColor grid = colors.color(QPalette::Text);
  grid.setAlpha(40);
  const QColor text = colors.color(QPalette::Text);
  for (int tick = 0; tick <= ticks; ++tick) {
    const double us = step * tick;
    painter.setPen(grid);
    painter.drawLine(QPointF(plot.left(), to_y(us)), QPointF(plot.right(), to_y(us)));
    painter.setPen(text);
    painter.drawText(QRectF(0, to_y(us) - 8, plot.left() - 4, 16), Qt::AlignRight | Qt::AlignVCenter,
                     QString::number(us, 'g', 3));
  }
  painter.drawText(QRectF(plot.left(), plot.bottom() + 4, plot.width(), 20), Qt::AlignCenter,
                   tr("record (1 … %1), µs up").arg(count));

  if (roofline_us_) {
    QPen dashed(QColor(0x9a, 0x5b, 0x00), 1.5, Qt::DashLine);
    painter.setPen(dashed);
    const double y = to_y(*roofline_us_);
    painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    painter.drawText(QRectF(plot.left() + 4, y - 18, plot.width() - 8, 16),
                     Qt::AlignRight | Qt::AlignBottom, tr("roofline %1").arg(roofline_label_));
  }

  // Best so far: a step line, horizontal until the next improvement.
  QPainterPath best;
  bool started = false;
  for (int i = 0; i < count && i < static_cast<int>(best_so_far_.size()); ++i) {
    if (!best_so_far_[static_cast<size_t>(i)]) continue;
    const double y = to_y(*best_so_far_[static_cast<size_t>(i)]);
    if (!started) {
      best.moveTo(to_x(i), y);
      started = true;
    } else {
      best.lineTo(to_x(i), best.currentPosition().y());
      best.lineTo(to_x(i), y);
    }
  }
  painter.setPen(QPen(QColor(0x1a, 0x7f, 0x37), 2));
  painter.drawPath(best);

  const QColor dot = colors.color(QPalette::Highlight);
  const QColor failed(0xd0, 0x21, 0x1c);
  for (int i = 0; i < count; ++i) {
    const double x = to_x(i);
    if (const std::optional<double>& median = medians_[static_cast<size_t>(i)]) {
      painter.setPen(Qt::NoPen);
      painter.setBrush(dot);
      painter.drawEllipse(QPointF(x, to_y(*median)), 3.0, 3.0);
    } else {
      painter.setPen(QPen(failed, 1.5));
      const double y = plot.bottom() - 5;
      painter.drawLine(QPointF(x - 3, y - 3), QPointF(x + 3, y + 3));
      painter.drawLine(QPointF(x - 3, y + 3), QPointF(x + 3, y - 3));
    }
  }
  painter.setPen(text);
  painter.drawText(QRectF(plot.left(), plot.top() - 18, plot.width(), 16), Qt::AlignRight,
                   tr("● measured  — best so far  ✕ no time"));
}

}  // namespace nautilus::views
