// LayoutPanel: the tiles of an MA tile kernel as pictures (Dear ImGui in a QOpenGLWidget).
//
// A combo offers the kernel's shared allocations and register values (gl::tile_choices):
//   * a register value is drawn as its thread/value grid (gl::layout_grid): one cell per element,
//     coloured by the thread (or warp, or lane) holding it and labelled `T{thread}` / `V{slot}`
//     like CuTe's print_latex pictures; replicated elements carry a `+n` mark. Hovering a cell
//     shows (row, col) -> (thread, slot), the warp and lane, and every replicated holder. A value
//     inside a warp role (a warp-specialized Hopper kernel) is drawn in its role's own thread
//     numbering; the line above the grid and the tooltip give the CTA thread and warpgroup, the
//     label says what it is to a wgmma (accumulator: S, O; A operand from registers: P) and
//     which spec statement it implements, and "warpgroup" colouring shows each consumer
//     warpgroup's 64 rows.
//   * a shared allocation is drawn as its logical tile with every element coloured by its 4-byte
//     bank after the swizzle (gl::bank_grid). A second combo picks an op's access pattern on it
//     (ldmatrix reads, cp.async writes, ...) and a slider one phase of it (warp, instruction,
//     phase): the phase's lanes are outlined and labelled, and cells whose bank must deliver
//     more than one word in that phase are outlined in red. "Without swizzle" draws the same
//     tile with the swizzle removed -- the conflicts the swizzle avoids.
// Mouse wheel scrolls, Ctrl+wheel zooms; nothing is computed per frame (the grids are rebuilt
// only when the selection changes).
//
// Integration: set_module() with the MA module of each new compilation (the selection is kept by
// kernel index and tile name when the new module has them); the select_* functions let other
// views (or tests) point the panel at a tile.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/matile/ir.h"
#include "views/gl/imgui_panel.h"
#include "views/gl/layout_model.h"

namespace nautilus::views {

class LayoutPanel : public ImGuiPanel {
  Q_OBJECT

 public:
  explicit LayoutPanel(QWidget* parent = nullptr);

  // The module to draw (null clears the panel).
  void set_module(matile::ModulePtr module);
  // The spec's statement names by index (Provenance::statement), so that tiles say which
  // statement they implement ("S", "P", "O"); takes effect with the next set_module.
  void set_statement_names(std::vector<std::string> names) { statement_names_ = std::move(names); }
  const matile::ModulePtr& module() const { return module_; }

  bool select_kernel(int index);
  // A register value by name ("27", "%27") or a shared allocation by name ("K_smem").
  bool select_tile(const std::string& name);
  // For a shared allocation: the access pattern (index into access_patterns()) and its phase.
  bool select_access(int index);
  bool select_phase(int index);
  void set_show_unswizzled(bool unswizzled);
  void set_colour_by(gl::ColourBy by);
  void set_cell_size(float pixels);

  int kernel_index() const { return kernel_; }
  float cell_size() const { return cell_; }
  int phase_index() const { return phase_; }
  const std::vector<gl::TileChoice>& tiles() const { return tiles_; }
  int tile_index() const { return tile_; }
  const std::vector<gl::SharedAccessPattern>& access_patterns() const { return patterns_; }
  // What is drawn now: one of the two grids, or a reason.
  const std::optional<gl::LayoutGrid>& layout_grid() const { return layout_grid_; }
  const std::optional<gl::BankGrid>& bank_grid() const { return bank_grid_; }
  const std::string& error() const { return error_; }
  // The lines above the grid: the selected tile's layout, its role and use, and why it has
  // that layout (the rule or synthesis pin, when the module recorded them).
  const std::string& tile_text() const { return tile_text_; }

 protected:
  void draw() override;

 private:
  const matile::Kernel* kernel() const;
  void rebuild_tiles();
  void rebuild_grid();
  void draw_toolbar();
  void draw_register_grid();
  void draw_bank_grid();

  matile::ModulePtr module_;
  std::vector<std::string> statement_names_;
  int kernel_ = 0;
  std::vector<gl::TileChoice> tiles_;
  int tile_ = -1;
  std::vector<gl::SharedAccessPattern> patterns_;
  int pattern_ = 0;
  int phase_ = 0;
  int stage_ = 0;
  bool unswizzled_ = false;
  gl::ColourBy colour_by_ = gl::ColourBy::Thread;
  float cell_ = 34.0f;  // cell height in logical pixels; widths follow
  std::optional<gl::LayoutGrid> layout_grid_;
  std::optional<gl::BankGrid> bank_grid_;
  std::string error_;
  std::string tile_text_;  // one line describing the selected tile's layout
};

}  // namespace nautilus::views
