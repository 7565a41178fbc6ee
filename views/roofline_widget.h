// A small roofline chart (QPainter): log-log axes of arithmetic intensity (FLOP per DRAM byte)
// and achieved TFLOP/s; the device's memory roof (bandwidth × intensity) and compute roof (dense
// 16-bit tensor-core peak) as lines; one dot per timed run, the newest filled, and a hollow
// diamond per kernel for the cost model's estimate of the current compilation. Runs without
// timings or work figures are skipped; without device ceilings the chart says so.
#pragma once

#include <QString>
#include <QWidget>

#include <optional>
#include <vector>

namespace nautilus::views {

struct RooflinePoint {
  QString label;
  double intensity = 0;      // FLOP per byte
  double flops_per_s = 0;
  bool estimate = false;     // the cost model's prediction (drawn as a hollow diamond)
};

class RooflineWidget : public QWidget {
  Q_OBJECT

 public:
  explicit RooflineWidget(QWidget* parent = nullptr);

  void set_ceilings(std::optional<double> peak_flops_per_s, std::optional<double> peak_bytes_per_s,
                    const QString& device);
  void set_points(std::vector<RooflinePoint> points);
  const std::vector<RooflinePoint>& points() const { return points_; }
  QSize sizeHint() const override { return {360, 220}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  std::optional<double> peak_flops_;
  std::optional<double> peak_bytes_;
  QString device_;
  std::vector<RooflinePoint> points_;
};

}  // namespace nautilus::views
