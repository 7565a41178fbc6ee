#include "views/gl/layout_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "core/layout/printer.h"
#include "core/matile/layouts.h"
#include "core/support/fixed_point.h"

namespace nautilus::views {
namespace {

constexpr float kMinCell = 10.0f;
constexpr float kMaxCell = 96.0f;
constexpr ImU32 kText = IM_COL32(20, 20, 20, 255);
constexpr ImU32 kGridLine = IM_COL32(90, 90, 90, 120);
constexpr ImU32 kConflict = IM_COL32(220, 30, 30, 255);

ImVec2 add(ImVec2 a, ImVec2 b) { return ImVec2(a.x + b.x, a.y + b.y); }

// The text colour of the window (headers drawn outside the coloured cells).
ImU32 header_colour() { return ImGui::GetColorU32(ImGuiCol_Text); }

// The visible [first, last) range of `count` cells of `size` starting at `origin` along one axis.
std::pair<int64_t, int64_t> visible_range(float origin, float size, int64_t count, float clip_min,
                                          float clip_max) {
  const int64_t first = std::clamp<int64_t>(static_cast<int64_t>(std::floor((clip_min - origin) / size)), 0, count);
  const int64_t last = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((clip_max - origin) / size)), 0, count);
  return {first, last};
}

// Layout of a scrolled grid inside the current child window: cell (r, c) lies at
// cells_origin + (c * w, r * h); row and column numbers on the left and on top.
struct GridFrame {
  ImVec2 cells_origin;
  float w = 0, h = 0;
  int64_t rows = 0, cols = 0;
  std::pair<int64_t, int64_t> row_range, col_range;

  ImVec2 cell_min(int64_t r, int64_t c) const {
    return ImVec2(cells_origin.x + static_cast<float>(c) * w, cells_origin.y + static_cast<float>(r) * h);
  }
  // The cell under `point`, or false.
  bool cell_at(ImVec2 point, int64_t& r, int64_t& c) const {
    const float x = (point.x - cells_origin.x) / w, y = (point.y - cells_origin.y) / h;
    if (x < 0 || y < 0) return false;
    r = static_cast<int64_t>(y);
    c = static_cast<int64_t>(x);
    return r < rows && c < cols;
  }
};

// Reserves the grid's content in the current window and draws its row / column numbers.
GridFrame begin_grid(int64_t rows, int64_t cols, float w, float h) {
  GridFrame frame;
  frame.rows = rows;
  frame.cols = cols;
  frame.w = w;
  frame.h = h;
  const ImVec2 start = ImGui::GetCursorScreenPos();
  const float header_w = ImGui::CalcTextSize("0000").x + 8.0f;
  const float header_h = ImGui::GetTextLineHeight() + 4.0f;
  frame.cells_origin = ImVec2(start.x + header_w, start.y + header_h);
  ImGui::Dummy(ImVec2(header_w + static_cast<float>(cols) * w + 4.0f,
                      header_h + static_cast<float>(rows) * h + 4.0f));
  const ImVec2 clip_min = ImGui::GetWindowPos();
  const ImVec2 clip_max = add(clip_min, ImGui::GetWindowSize());
  frame.col_range = visible_range(frame.cells_origin.x, w, cols, clip_min.x, clip_max.x);
  frame.row_range = visible_range(frame.cells_origin.y, h, rows, clip_min.y, clip_max.y);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  char text[32];
  for (int64_t c = frame.col_range.first; c < frame.col_range.second; ++c) {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(c));
    const float tw = ImGui::CalcTextSize(text).x;
    if (tw + 2 > w && c % 8 != 0) continue;  // too narrow: every eighth column only
    draw->AddText(ImVec2(frame.cells_origin.x + static_cast<float>(c) * w + (w - tw) / 2, start.y),
                  header_colour(), text);
  }
  for (int64_t r = frame.row_range.first; r < frame.row_range.second; ++r) {
    if (ImGui::GetTextLineHeight() > h && r % 8 != 0) continue;
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(r));
    draw->AddText(ImVec2(start.x + 2, frame.cells_origin.y + static_cast<float>(r) * h +
                                          (h - ImGui::GetTextLineHeight()) / 2),
                  header_colour(), text);
  }
  return frame;
}

// Draws up to two centred lines of text in a cell when they fit.
void cell_text(ImDrawList* draw, ImVec2 min, float w, float h, const char* first, const char* second) {
  const float line = ImGui::GetTextLineHeight();
  const int lines = second && line * 2 <= h - 2 ? 2 : 1;  // the first line alone when two do not fit
  if (line > h - 2) return;
  const float top = min.y + (h - line * static_cast<float>(lines)) / 2;
  for (int i = 0; i < lines; ++i) {
    const char* text = i == 0 ? first : second;
    const float tw = ImGui::CalcTextSize(text).x;
    if (tw > w - 2) return;
    draw->AddText(ImVec2(min.x + (w - tw) / 2, top + line * static_cast<float>(i)), kText, text);
  }
}

}  // namespace

LayoutPanel::LayoutPanel(QWidget* parent) : ImGuiPanel(parent) {
  setObjectName(QStringLiteral("layout_panel"));
}

const matile::Kernel* LayoutPanel::kernel() const {
  if (!module_ || kernel_ < 0 || kernel_ >= static_cast<int>(module_->kernels.size())) return nullptr;
  return module_->kernels[static_cast<size_t>(kernel_)].get();
}

void LayoutPanel::set_module(matile::ModulePtr module) {
  // Keep the selection by name across recompilations.
  std::string selected;
  if (tile_ >= 0 && tile_ < static_cast<int>(tiles_.size())) {
    const gl::TileChoice& choice = tiles_[static_cast<size_t>(tile_)];
    selected = choice.value ? choice.value->name
                            : kernel()->shared[static_cast<size_t>(choice.alloc)].name;
  }
  module_ = std::move(module);
  if (!module_ || kernel_ >= static_cast<int>(module_->kernels.size())) kernel_ = 0;
  rebuild_tiles();
  if (!selected.empty()) select_tile(selected);
  request_frames();
}

bool LayoutPanel::select_kernel(int index) {
  if (!module_ || index < 0 || index >= static_cast<int>(module_->kernels.size())) return false;
  kernel_ = index;
  rebuild_tiles();
  request_frames();
  return true;
}

bool LayoutPanel::select_tile(const std::string& name) {
  const matile::Kernel* k = kernel();
  if (!k) return false;
  const std::string bare = !name.empty() && name[0] == '%' ? name.substr(1) : name;
  for (size_t i = 0; i < tiles_.size(); ++i) {
    const gl::TileChoice& choice = tiles_[i];
    const bool match = choice.value ? choice.value->name == bare
                                    : k->shared[static_cast<size_t>(choice.alloc)].name == bare;
    if (match) {
      tile_ = static_cast<int>(i);
      pattern_ = phase_ = stage_ = 0;
      rebuild_grid();
      request_frames();
      return true;
    }
  }
  return false;
}

bool LayoutPanel::select_access(int index) {
  if (index < 0 || index >= static_cast<int>(patterns_.size())) return false;
  pattern_ = index;
  phase_ = 0;
  rebuild_grid();
  request_frames();
  return true;
}

bool LayoutPanel::select_phase(int index) {
  if (!bank_grid_ || index < 0 || index >= static_cast<int>(bank_grid_->phases.size())) return false;
  phase_ = index;
  request_frames();
  return true;
}

void LayoutPanel::set_show_unswizzled(bool unswizzled) {
  unswizzled_ = unswizzled;
  rebuild_grid();
  request_frames();
}

void LayoutPanel::set_colour_by(gl::ColourBy by) {
  colour_by_ = by;
  request_frames();
}

void LayoutPanel::set_cell_size(float pixels) {
  cell_ = std::clamp(pixels, kMinCell, kMaxCell);
  request_frames();
}

void LayoutPanel::rebuild_tiles() {
  tiles_.clear();
  tile_ = -1;
  if (const matile::Kernel* k = kernel()) {
    tiles_ = gl::tile_choices(*k, statement_names_);
    // Start on the first mma accumulator: the picture people know from CuTe.
    for (size_t i = 0; i < tiles_.size() && tile_ < 0; ++i) {
      if (tiles_[i].value && tiles_[i].value->layout.kind == matile::LayoutKind::MmaC) {
        tile_ = static_cast<int>(i);
      }
    }
    if (tile_ < 0 && !tiles_.empty()) tile_ = 0;
  }
  pattern_ = phase_ = stage_ = 0;
  rebuild_grid();
}

void LayoutPanel::rebuild_grid() {
  layout_grid_.reset();
  bank_grid_.reset();
  patterns_.clear();
  error_.clear();
  tile_text_.clear();
  const matile::Kernel* k = kernel();
  if (!k) {
    error_ = module_ ? "the module has no kernels" : "no MA tile IR yet: compile to the matile stage";
    return;
  }
  if (tile_ < 0 || tile_ >= static_cast<int>(tiles_.size())) {
    error_ = "kernel " + k->name + " has no tiles";
    return;
  }
  const gl::TileChoice& choice = tiles_[static_cast<size_t>(tile_)];
  if (choice.value) {
    tile_text_ = matile::layout_text(choice.value->layout);
    if (!choice.role.empty()) {
      // A role numbers its own threads; say where they are in the CTA.
      const int64_t threads = int64_t{4} * choice.role_warpgroups * matile::kWarpSize;
      tile_text_ += "\nrole " + choice.role + " (" + std::to_string(choice.role_warpgroups) + " warpgroup" +
                    (choice.role_warpgroups == 1 ? "" : "s") + "): its thread t is CTA thread " +
                    std::to_string(choice.first_thread) + " + t (CTA threads " + std::to_string(choice.first_thread) +
                    ".." + std::to_string(choice.first_thread + threads - 1) + "), of its warpgroup t / 128";
    }
    if (!choice.use.empty() || !choice.statement.empty()) {
      tile_text_ += "\n" + (choice.statement.empty() ? std::string() : "statement " + choice.statement) +
                    (choice.use.empty() ? std::string() : (choice.statement.empty() ? "" : ": ") + choice.use);
      if (choice.use == "wgmma accumulator") {
        tile_text_ += " (warpgroup g of the role holds rows 64g..64g+63: mma.sync's C fragment over its 4 warps)";
      } else if (!choice.use.empty()) {
        tile_text_ += " (mma.sync's A fragment per warp, 4 warps per warpgroup along M)";
      }
    }
    // Why this layout: the rule or the synthesis pin that fixed it (Kernel::layout_reasons,
    // recorded when the module was lowered with record_layout_reasons).
    auto reason = k->layout_reasons.find(choice.value->name);
    if (reason != k->layout_reasons.end()) tile_text_ += "\nwhy: " + reason->second;
    if (!k->layout_synthesis.empty()) {
      tile_text_ += "\n" + k->layout_synthesis;
    } else if (k->layout_cost_rules > 0) {
      tile_text_ += "\nlayout synthesis: the rules' layouts kept (cost " + fixed_point(k->layout_cost_rules, 0) +
                    " thread instructions; no pin priced lower)";
    }
    auto grid = gl::layout_grid(choice.value->layout, choice.value->type.shape);
    if (grid) {
      layout_grid_ = std::move(grid).value();
    } else {
      error_ = grid.error().message;
    }
    return;
  }
  matile::SharedAlloc alloc = k->shared[static_cast<size_t>(choice.alloc)];
  tile_text_ = alloc.purpose;
  if (unswizzled_) alloc.layout.swizzle = layout::Swizzle{};
  patterns_ = gl::shared_access_patterns(*k, choice.alloc);
  if (patterns_.empty()) {
    error_ = alloc.name + ": no op of the kernel has a modelled access pattern on it";
    gl::SharedAccessPattern none;  // still draw the banks
    none.access_bytes = 16;
    auto grid = gl::bank_grid(alloc, none, stage_);
    if (grid) bank_grid_ = std::move(grid).value();
    return;
  }
  pattern_ = std::clamp(pattern_, 0, static_cast<int>(patterns_.size()) - 1);
  auto grid = gl::bank_grid(alloc, patterns_[static_cast<size_t>(pattern_)], stage_);
  if (grid) {
    bank_grid_ = std::move(grid).value();
    phase_ = std::clamp(phase_, 0, std::max(0, static_cast<int>(bank_grid_->phases.size()) - 1));
  } else {
    error_ = grid.error().message;
  }
}

void LayoutPanel::draw() {
  if (!module_) {
    ImGui::TextDisabled("No MA tile IR yet: the layout panel shows the tiles of the compiled kernel.");
    return;
  }
  draw_toolbar();
  if (!error_.empty()) ImGui::TextColored(ImVec4(0.85f, 0.2f, 0.2f, 1.0f), "%s", error_.c_str());
  if (layout_grid_) draw_register_grid();
  if (bank_grid_) draw_bank_grid();
}

void LayoutPanel::draw_toolbar() {
  const matile::Kernel* k = kernel();
  if (module_->kernels.size() > 1) {
    ImGui::SetNextItemWidth(160);
    if (ImGui::BeginCombo("Kernel", k ? k->name.c_str() : "")) {
      for (size_t i = 0; i < module_->kernels.size(); ++i) {
        if (ImGui::Selectable(module_->kernels[i]->name.c_str(), static_cast<int>(i) == kernel_)) {
          select_kernel(static_cast<int>(i));
        }
      }
      ImGui::EndCombo();
    }
    ImGui::SameLine();
  }
  const char* preview = tile_ >= 0 && tile_ < static_cast<int>(tiles_.size())
                            ? tiles_[static_cast<size_t>(tile_)].label.c_str()
                            : "";
  ImGui::SetNextItemWidth(std::min(520.0f, ImGui::GetContentRegionAvail().x - 60));
  if (ImGui::BeginCombo("Tile", preview)) {
    for (size_t i = 0; i < tiles_.size(); ++i) {
      if (i == k->shared.size() && i > 0) ImGui::Separator();  // shared | registers
      if (ImGui::Selectable(tiles_[i].label.c_str(), static_cast<int>(i) == tile_)) {
        tile_ = static_cast<int>(i);
        pattern_ = phase_ = stage_ = 0;
        rebuild_grid();
      }
    }
    ImGui::EndCombo();
  }
  if (layout_grid_) {
    ImGui::TextUnformatted("Colour by");
    ImGui::SameLine();
    int by = static_cast<int>(colour_by_);
    ImGui::RadioButton("thread", &by, static_cast<int>(gl::ColourBy::Thread));
    ImGui::SameLine();
    ImGui::RadioButton("warp", &by, static_cast<int>(gl::ColourBy::Warp));
    ImGui::SameLine();
    ImGui::RadioButton("lane", &by, static_cast<int>(gl::ColourBy::Lane));
    ImGui::SameLine();
    ImGui::RadioButton("warpgroup", &by, static_cast<int>(gl::ColourBy::Warpgroup));
    colour_by_ = static_cast<gl::ColourBy>(by);
    ImGui::SameLine();
  }
  if (bank_grid_) {
    const gl::TileChoice& choice = tiles_[static_cast<size_t>(tile_)];
    const matile::SharedAlloc& alloc = k->shared[static_cast<size_t>(choice.alloc)];
    if (!patterns_.empty()) {
      ImGui::SetNextItemWidth(std::min(360.0f, ImGui::GetContentRegionAvail().x * 0.5f));
      if (ImGui::BeginCombo("Access", patterns_[static_cast<size_t>(pattern_)].label.c_str())) {
        for (size_t i = 0; i < patterns_.size(); ++i) {
          if (ImGui::Selectable(patterns_[i].label.c_str(), static_cast<int>(i) == pattern_)) {
            select_access(static_cast<int>(i));
          }
        }
        ImGui::EndCombo();
      }
      ImGui::SameLine();
    }
    if (alloc.stages > 1) {
      ImGui::SetNextItemWidth(80);
      if (ImGui::SliderInt("Stage", &stage_, 0, alloc.stages - 1)) rebuild_grid();
      ImGui::SameLine();
    }
    bool unswizzled = unswizzled_;
    if (ImGui::Checkbox("Without swizzle", &unswizzled)) set_show_unswizzled(unswizzled);
    ImGui::SameLine();
  }
  ImGui::SetNextItemWidth(120);
  ImGui::SliderFloat("Zoom", &cell_, kMinCell, kMaxCell, "%.0f px");
  if (!tile_text_.empty()) ImGui::TextDisabled("%s", tile_text_.c_str());
}

void LayoutPanel::draw_register_grid() {
  const gl::LayoutGrid& grid = *layout_grid_;
  ImGui::Text("%lld x %lld elements, %lld threads x %lld slots%s", static_cast<long long>(grid.rows),
              static_cast<long long>(grid.cols), static_cast<long long>(grid.threads),
              static_cast<long long>(grid.slots),
              grid.max_replication() > 1
                  ? (", each element held up to " + std::to_string(grid.max_replication()) + " times").c_str()
                  : "");
  const ImGuiIO& io = ImGui::GetIO();
  ImGui::BeginChild("##register_grid", ImVec2(0, 0), true,
                    ImGuiWindowFlags_HorizontalScrollbar | (io.KeyCtrl ? ImGuiWindowFlags_NoScrollWithMouse : 0));
  if (io.KeyCtrl && io.MouseWheel != 0 && ImGui::IsWindowHovered()) {
    set_cell_size(cell_ * std::pow(1.15f, io.MouseWheel));
  }
  const float h = cell_, w = std::max(cell_ * 1.3f, ImGui::CalcTextSize("T000").x + 6);
  const GridFrame frame = begin_grid(grid.rows, grid.cols, w, h);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  char first[24], second[24];
  for (int64_t r = frame.row_range.first; r < frame.row_range.second; ++r) {
    for (int64_t c = frame.col_range.first; c < frame.col_range.second; ++c) {
      const auto& holders = grid.at(r, c);
      const ImVec2 min = frame.cell_min(r, c), max = add(min, ImVec2(w, h));
      if (holders.empty()) {
        draw->AddRect(min, max, kGridLine);
        continue;
      }
      draw->AddRectFilled(min, max, gl::thread_colour(holders[0].thread, colour_by_));
      draw->AddRect(min, max, kGridLine);
      std::snprintf(first, sizeof first, "T%lld", static_cast<long long>(holders[0].thread));
      std::snprintf(second, sizeof second, "V%lld", static_cast<long long>(holders[0].slot));
      cell_text(draw, min, w, h, first, second);
      if (holders.size() > 1 && h >= 20) {
        std::snprintf(first, sizeof first, "+%zu", holders.size() - 1);
        draw->AddText(ImGui::GetFont(), ImGui::GetFontSize() * 0.8f,
                      ImVec2(max.x - ImGui::CalcTextSize(first).x * 0.8f - 2, min.y + 1), kText, first);
      }
    }
  }
  int64_t r = 0, c = 0;
  if (ImGui::IsWindowHovered() && frame.cell_at(io.MousePos, r, c)) {
    const auto& holders = grid.at(r, c);
    const ImVec2 min = frame.cell_min(r, c);
    draw->AddRect(min, add(min, ImVec2(w, h)), IM_COL32(0, 0, 0, 255), 0.0f, 0, 2.0f);
    ImGui::BeginTooltip();
    ImGui::Text("element (%lld, %lld)", static_cast<long long>(r), static_cast<long long>(c));
    if (holders.empty()) ImGui::TextUnformatted("held by no thread");
    const gl::TileChoice& shown = tiles_[static_cast<size_t>(tile_)];
    for (size_t i = 0; i < holders.size() && i < 16; ++i) {
      const gl::TVHolder& h0 = holders[i];
      if (shown.role.empty()) {
        ImGui::Text("%s thread %lld slot %lld  (warp %lld, lane %lld)", i == 0 ? "->" : "  ",
                    static_cast<long long>(h0.thread), static_cast<long long>(h0.slot),
                    static_cast<long long>(h0.thread / matile::kWarpSize),
                    static_cast<long long>(h0.thread % matile::kWarpSize));
      } else {
        ImGui::Text("%s %s thread %lld slot %lld  (warpgroup %lld, warp %lld, lane %lld; CTA thread %lld)",
                    i == 0 ? "->" : "  ", shown.role.c_str(), static_cast<long long>(h0.thread),
                    static_cast<long long>(h0.slot), static_cast<long long>(h0.thread / (4 * matile::kWarpSize)),
                    static_cast<long long>(h0.thread / matile::kWarpSize),
                    static_cast<long long>(h0.thread % matile::kWarpSize),
                    static_cast<long long>(shown.first_thread + h0.thread));
      }
    }
    if (holders.size() > 16) ImGui::Text("... %zu holders in all (replicated)", holders.size());
    else if (holders.size() > 1) ImGui::Text("%zu holders (replicated)", holders.size());
    ImGui::EndTooltip();
  }
  ImGui::EndChild();
}

void LayoutPanel::draw_bank_grid() {
  const gl::BankGrid& grid = *bank_grid_;
  const gl::BankPhase* phase =
      phase_ >= 0 && phase_ < static_cast<int>(grid.phases.size()) ? &grid.phases[static_cast<size_t>(phase_)] : nullptr;
  if (!grid.phases.empty()) {
    if (grid.conflicts() == 0) {
      ImGui::Text("%lld wavefronts in %lld phases: conflict-free", static_cast<long long>(grid.wavefronts),
                  static_cast<long long>(grid.phases.size()));
    } else {
      ImGui::TextColored(ImVec4(0.85f, 0.15f, 0.15f, 1.0f),
                         "%lld wavefronts where %lld are ideal: %lld of %lld phases have bank conflicts",
                         static_cast<long long>(grid.wavefronts), static_cast<long long>(grid.ideal_wavefronts),
                         static_cast<long long>(grid.conflicting_phases()),
                         static_cast<long long>(grid.phases.size()));
    }
    ImGui::SetNextItemWidth(200);
    int selected = phase_;
    if (ImGui::SliderInt("Phase", &selected, 0, static_cast<int>(grid.phases.size()) - 1)) select_phase(selected);
    ImGui::SameLine();
    if (ImGui::ArrowButton("##previous", ImGuiDir_Left)) select_phase(std::max(0, phase_ - 1));
    ImGui::SameLine();
    if (ImGui::ArrowButton("##next", ImGuiDir_Right)) {
      select_phase(std::min(static_cast<int>(grid.phases.size()) - 1, phase_ + 1));
    }
    ImGui::SameLine();
    if (ImGui::Button("Next conflict")) {
      for (size_t step = 1; step <= grid.phases.size(); ++step) {
        const size_t i = (static_cast<size_t>(phase_) + step) % grid.phases.size();
        if (grid.phases[i].wavefronts > 1) {
          select_phase(static_cast<int>(i));
          break;
        }
      }
    }
    if (phase) {
      ImGui::SameLine();
      ImGui::Text("warp %d, instruction %d, phase %d: %zu lanes, %d wavefront%s", phase->warp,
                  phase->instruction, phase->phase, phase->lanes.size(), phase->wavefronts,
                  phase->wavefronts == 1 ? "" : "s");
    }
  }
  const ImGuiIO& io = ImGui::GetIO();
  ImGui::BeginChild("##bank_grid", ImVec2(0, 0), true,
                    ImGuiWindowFlags_HorizontalScrollbar | (io.KeyCtrl ? ImGuiWindowFlags_NoScrollWithMouse : 0));
  if (io.KeyCtrl && io.MouseWheel != 0 && ImGui::IsWindowHovered()) {
    set_cell_size(cell_ * std::pow(1.15f, io.MouseWheel));
  }
  const float h = cell_, w = std::max(cell_, ImGui::CalcTextSize("b00").x + 6);
  const GridFrame frame = begin_grid(grid.rows, grid.cols, w, h);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  // The selected phase: which lane touches each cell.
  std::vector<int> lane_of(static_cast<size_t>(grid.rows * grid.cols), -1);
  if (phase) {
    for (const gl::PhaseLane& lane : phase->lanes) {
      for (int64_t cell : lane.cells) lane_of[static_cast<size_t>(cell)] = lane.lane;
    }
  }
  char first[24], second[24];
  for (int64_t r = frame.row_range.first; r < frame.row_range.second; ++r) {
    for (int64_t c = frame.col_range.first; c < frame.col_range.second; ++c) {
      const int64_t cell = r * grid.cols + c;
      const gl::BankCell& bank = grid.cells[static_cast<size_t>(cell)];
      const ImVec2 min = frame.cell_min(r, c), max = add(min, ImVec2(w, h));
      draw->AddRectFilled(min, max, gl::bank_colour(bank.bank));
      draw->AddRect(min, max, kGridLine);
      std::snprintf(first, sizeof first, "b%d", bank.bank);
      const int lane = lane_of[static_cast<size_t>(cell)];
      if (lane >= 0) std::snprintf(second, sizeof second, "L%d", lane);
      cell_text(draw, min, w, h, first, lane >= 0 ? second : nullptr);
    }
  }
  // Outlines on top of the fills: the phase's accesses, then its conflicts in red.
  if (phase) {
    for (const gl::PhaseLane& lane : phase->lanes) {
      for (int64_t cell : lane.cells) {
        const ImVec2 min = frame.cell_min(cell / grid.cols, cell % grid.cols);
        draw->AddRect(add(min, ImVec2(1, 1)), add(min, ImVec2(w - 1, h - 1)), IM_COL32(0, 0, 0, 230), 0.0f, 0, 2.0f);
      }
    }
    for (int64_t cell : phase->conflict_cells) {
      const ImVec2 min = frame.cell_min(cell / grid.cols, cell % grid.cols);
      draw->AddRect(add(min, ImVec2(1, 1)), add(min, ImVec2(w - 1, h - 1)), kConflict, 0.0f, 0, 3.0f);
    }
  }
  int64_t r = 0, c = 0;
  if (ImGui::IsWindowHovered() && frame.cell_at(io.MousePos, r, c)) {
    const int64_t cell = r * grid.cols + c;
    const gl::BankCell& bank = grid.cells[static_cast<size_t>(cell)];
    ImGui::BeginTooltip();
    ImGui::Text("element (%lld, %lld): word %lld, bank %d (stage %d)", static_cast<long long>(r),
                static_cast<long long>(c), static_cast<long long>(bank.word), bank.bank, grid.stage);
    const int lane = lane_of[static_cast<size_t>(cell)];
    if (lane >= 0) ImGui::Text("accessed by lane %d in this phase", lane);
    if (phase && std::binary_search(phase->conflict_cells.begin(), phase->conflict_cells.end(), cell)) {
      ImGui::TextColored(ImVec4(0.85f, 0.15f, 0.15f, 1.0f), "bank %d delivers several words in this phase",
                         bank.bank);
    }
    ImGui::EndTooltip();
  }
  ImGui::EndChild();
}

}  // namespace nautilus::views
