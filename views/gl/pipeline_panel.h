// PipelinePanel: the inner loop of an MA tile kernel as a per-warp Gantt chart (Dear ImGui in a
// QOpenGLWidget), built by core's cost::timeline_from_kernel (core/cost/timeline.h), whose bars
// are the analytical cost model's work of each op.
//
// Rows are the warps (warps running identical bars share one row, "warps 0-7", unless "Group
// identical warps" is off), then one row per shared-memory stage on which the cp.async copies fly;
// bars are the loop body's ops in program order, coloured by class (cp.async issue, wait /
// barrier, ldmatrix, mma, softmax / element-wise, reduce, global, index), over the first few
// iterations (a slider picks 1..8). The background alternates per iteration (`n_o = 0`, ...),
// the prologue before the loop is shaded, and hovering a bar shows its op, class, cycles,
// instruction count and stage. Mouse wheel scrolls, Ctrl+wheel zooms the time axis. The cycle
// costs are estimates (cost::CycleCosts, listed under the chart): the picture shows proportions
// and overlap -- stage s+1's copies in flight while the MMAs read stage s -- not measured time.
//
// Integration: set_module() with the MA module of each new compilation; select_kernel() picks
// one of its kernels (a kernel without a loop shows the reason).
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/cost/timeline.h"
#include "core/matile/ir.h"
#include "views/gl/imgui_panel.h"

namespace nautilus::views {

class PipelinePanel : public ImGuiPanel {
  Q_OBJECT

 public:
  explicit PipelinePanel(QWidget* parent = nullptr);

  void set_module(matile::ModulePtr module);
  const matile::ModulePtr& module() const { return module_; }
  bool select_kernel(int index);
  void set_iterations(int iterations);
  // Pixels per 100 cycles.
  void set_zoom(float pixels_per_100_cycles);
  // Draw warps whose bars are identical as one row (the default) or every warp on its own row.
  void set_group_identical_warps(bool group);
  // Rows drawn now (grouped warps count once).
  int shown_rows() const { return static_cast<int>(std::count(row_shown_.begin(), row_shown_.end(), true)); }

  int kernel_index() const { return kernel_; }
  float zoom() const { return zoom_; }
  const cost::PipelineTimeline& timeline() const { return timeline_; }

 protected:
  void draw() override;

 private:
  void rebuild();
  void draw_legend();
  void draw_chart();

  matile::ModulePtr module_;
  int kernel_ = 0;
  int iterations_ = 3;
  float zoom_ = 12.0f;
  cost::TimelineOptions options_;
  cost::PipelineTimeline timeline_;
  std::vector<std::pair<int, int>> bar_bands_;  // per bar: (band, bands in its row slot)
  bool group_warps_ = true;
  std::vector<bool> row_shown_;
  std::vector<std::string> row_names_;  // "warp 3", "warps 0-7", "cp.async stage 1"
  std::vector<float> row_top_;                  // per row its top (pixels below the axis), then the end
};

}  // namespace nautilus::views
