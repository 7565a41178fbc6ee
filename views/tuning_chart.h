// The tuning history as a chart (QPainter): measured median time against record order (1, 2, ...
// as the records were measured), one dot per validated record and a red cross along the bottom
// edge for each record without a time (failed validation, fault, build error); the best-so-far
// line steps down through the fastest time up to each record; a dashed horizontal line marks the
// roofline bound of the math (core/cost/roofline.h), the time no schedule should beat.
//
//   µs
//   60 ┤ •
//   40 ┤   •   •
//   20 ┤ ──┐ •   ┐•──────     best so far
//   10 ┤- - - - - - - - -     roofline bound
//      └──┬──┬──┬──┬──┬─ record
#pragma once

#include <QString>
#include <QWidget>

#include <optional>
#include <vector>

namespace nautilus::views {

class TuningChart : public QWidget {
  Q_OBJECT

 public:
  explicit TuningChart(QWidget* parent = nullptr);

  // Per record in order: its validated median (nullopt: no time) and the best so far.
  void set_series(std::vector<std::optional<double>> medians,
                  std::vector<std::optional<double>> best_so_far);
  // The roofline bound in µs and what it says ("12.4 µs (memory: ...) on H100"); nullopt hides it.
  void set_roofline(std::optional<double> microseconds, const QString& label);
  const std::vector<std::optional<double>>& medians() const { return medians_; }
  const std::vector<std::optional<double>>& best_so_far() const { return best_so_far_; }
  std::optional<double> roofline_us() const { return roofline_us_; }
  QSize sizeHint() const override { return {420, 220}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  std::vector<std::optional<double>> medians_;
  std::vector<std::optional<double>> best_so_far_;
  std::optional<double> roofline_us_;
  QString roofline_label_;
};

}  // namespace nautilus::views
