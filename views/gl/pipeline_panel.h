// PipelinePanel: the inner loop of an MA tile kernel (Dear ImGui in a QOpenGLWidget), in two
// tabs.
//
// "Simulated loop": the loop as a Gantt chart built by core's cost::timeline_from_kernel
// (core/cost/timeline.h), whose bars are the analytical cost model's work of each op. Rows are
// the warps (warps running identical bars share one row, "warps 0-7", or for a warp-specialized
// kernel "consumers (warps 4-11)", unless "Group identical warps" is off), then one row per
// shared-memory stage on which the cp.async copies or TMA boxes fly, then the tensor cores; bars
// are the loop body's ops in program order, coloured by class (cp.async / TMA, wait / barrier,
// ldmatrix, mma, softmax / element-wise, reduce, global, index), over the first few iterations
// (a slider picks 1..8). On a warp-specialized kernel each role row carries a strip of its
// phases (tensor core, softmax / element-wise, waiting) and the mbarrier and named-barrier
// hand-offs between roles are drawn as arrows: the producer's TMA landing that fills a stage
// (full), the consumers' arrival that releases it (empty), and barriers ordering one consumer
// after another (ping-pong). The background alternates per iteration (`n_o = 0`, ...), the
// prologue before the loop is shaded, and hovering a bar shows its op, class, cycles,
// instruction count and stage. The cycle costs are estimates (cost::CycleCosts, listed under
// the chart): the picture shows proportions and overlap, not measured time.
//
// "Solver": the pipeline solver's answer for the selected kernel's loop (core/pipeline, Z3):
// its status (optimal / best found / infeasible) and solve time, the ops of the loop's
// dependence graph with their solved cycle, stage and role, the modulo reservation table (units
// across, the rows of one interval down, each cell the op and stage holding it) and the per-role
// timeline of a few steady-state iterations with the rings' buffers and the hand-offs between
// roles (pipeline::modulo_table / role_timeline, core/pipeline/schedule_view.h). Each op's role
// and stage can be pinned; every change re-solves on the panel's worker thread (never on the UI
// thread; a newer request makes an older answer stale), and pins the model cannot meet show the
// solver's explanation (the minimized unsat core in words).
//
// Mouse wheel scrolls, Ctrl+wheel zooms the time axis.
//
// Integration: set_module() with the MA module of each new compilation; select_kernel() picks
// one of its kernels (a kernel without a loop shows the reason).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "core/cost/timeline.h"
#include "core/matile/ir.h"
#include "core/pipeline/graph.h"
#include "core/pipeline/schedule_view.h"
#include "core/pipeline/solver.h"
#include "core/sched/decision.h"
#include "views/gl/imgui_panel.h"

namespace nautilus::views {

class TaskRunner;

class PipelinePanel : public ImGuiPanel {
  Q_OBJECT

 public:
  explicit PipelinePanel(QWidget* parent = nullptr);
  ~PipelinePanel() override;

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
  // The row names drawn now (grouped rows under their group's name), in row order.
  const std::vector<std::string>& row_names() const { return row_names_; }

  enum class Tab { Simulation, Solver };
  void show_tab(Tab tab);
  Tab tab() const { return tab_; }

  // ---- The solver tab. Once the solver was asked for (solve(), or the tab shown), every call
  // that changes the problem posts a new solve to the worker; before that they only set it up.
  // Solves the selected kernel's loop now (and again after every module, kernel or pin change).
  void solve();
  // Pins op `op` (a graph node name) on `role` ("producer", "consumer0", "main"; "" unpins).
  void pin_role(const std::string& op, const std::string& role);
  // Pins op `op` in `stage` (-1 unpins).
  void pin_stage(const std::string& op, int stage);
  void clear_pins();
  // sm_90a: the number of consumer warpgroups (0: the solver chooses).
  void set_consumers(int consumers);
  void set_solver_time_limit(double seconds);
  // True while a solve is queued or running.
  bool solving() const;
  // The graph and answer of the newest finished solve (nullopt before any, or when the kernel
  // has no pipelined loop: solver_error() says why).
  const std::optional<pipeline::Graph>& solver_graph() const { return solver_graph_; }
  const std::optional<pipeline::Solution>& solution() const { return solution_; }
  const std::string& solver_error() const { return solver_error_; }
  const pipeline::ModuloTable& modulo_table() const { return modulo_table_; }
  const pipeline::RoleTimeline& role_timeline() const { return role_timeline_; }
  int solves_delivered() const { return solves_delivered_; }
  // Per kernel of the module, the blocks it computes (driver::Compilation::kernel_blocks): what
  // a pipeline decision for the selected kernel names.
  // `held_slots`: per kernel, the ring slots its form holds beyond the graph's
  // (pipeline::held_ring_slots).
  void set_kernel_blocks(std::vector<std::vector<std::string>> blocks, std::vector<int> held_slots = {}) {
    kernel_blocks_ = std::move(blocks);
    kernel_held_slots_ = std::move(held_slots);
  }
  // "Use in schedule": called with the pipeline decision that realizes the shown answer
  // (core/pipeline/complete.h); the studio appends it to the schedule.
  void set_use_decision(std::function<void(const sched::Decision&)> use) { use_decision_ = std::move(use); }
  // That decision for the newest answer, or nullopt with the reason (no answer yet, a kernel the
  // lowering has not warp-specialized, a block unknown).
  std::optional<sched::Decision> realizing_decision(std::string* why) const;
  // Hands realizing_decision() to the use-decision callback; false (nothing done) without one.
  bool use_solution();

 protected:
  void draw() override;

 private:
  void rebuild();
  void draw_simulation_controls();
  void draw_legend();
  void draw_chart();
  void draw_solver();
  void draw_solver_ops();
  void draw_modulo_table();
  void draw_role_timeline();
  void post_solve();

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
  std::vector<float> row_strip_;                // per row: the height of its phase strip (role rows)
  std::vector<int> shown_row_of_;               // per row: the row drawn for it (its group's first)
  std::vector<cost::RolePhase> phases_;         // warp-specialized kernels: each role row's phases
  Tab tab_ = Tab::Simulation;
  bool select_tab_ = false;  // the next frame selects tab_ (ImGui selects tabs while drawing)

  // Solver tab.
  std::unique_ptr<TaskRunner> solver_;
  std::shared_ptr<pipeline::SolveCache> solve_cache_;  // shared with the worker (thread-safe)
  std::stop_source solve_stop_;  // stops the solve in flight when a newer one replaces it
  bool solve_wanted_ = false;  // the user asked for the solver once: re-solve on changes
  std::map<std::string, std::string> role_pins_;
  std::map<std::string, int> stage_pins_;
  int consumers_ = 0;
  double time_limit_ = pipeline::SolveOptions{}.time_limit_seconds;
  std::optional<pipeline::Graph> solver_graph_;
  std::optional<pipeline::Solution> solution_;
  std::string solver_error_;
  pipeline::ModuloTable modulo_table_;
  pipeline::RoleTimeline role_timeline_;
  int solver_iterations_ = 3;
  bool modulo_by_op_ = false;  // the table's cells coloured by op instead of by role
  int solves_delivered_ = 0;
  std::vector<std::vector<std::string>> kernel_blocks_;
  std::vector<int> kernel_held_slots_;
  std::function<void(const sched::Decision&)> use_decision_;
};

}  // namespace nautilus::views
