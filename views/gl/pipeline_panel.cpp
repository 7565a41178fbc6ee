#include "views/gl/pipeline_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <imgui.h>

#include "core/pipeline/complete.h"
#include "core/pipeline/machine.h"
#include "views/gl/layout_model.h"
#include "views/task_runner.h"

namespace nautilus::views {
namespace {

constexpr float kRowHeight = 22.0f;
constexpr float kLabelWidth = 175.0f;  // "consumers wg1 (warps 8-11)"
constexpr float kMinZoom = 0.5f;   // pixels per 100 cycles
constexpr float kMaxZoom = 400.0f;

ImU32 class_colour(cost::OpClass op_class) {
  switch (op_class) {
    case cost::OpClass::AsyncCopy: return IM_COL32(77, 182, 172, 255);
    case cost::OpClass::Wait: return IM_COL32(176, 176, 176, 255);
    case cost::OpClass::SharedLoad: return IM_COL32(100, 181, 246, 255);
    case cost::OpClass::Mma: return IM_COL32(255, 138, 101, 255);
    case cost::OpClass::ElementWise: return IM_COL32(129, 199, 132, 255);
    case cost::OpClass::Reduce: return IM_COL32(186, 104, 200, 255);
    case cost::OpClass::Global: return IM_COL32(161, 136, 127, 255);
    case cost::OpClass::Control: return IM_COL32(224, 224, 224, 255);
  }
  return IM_COL32(128, 128, 128, 255);
}

// Hand-off arrows: a stage filled (from a TMA landing), a stage released or another mbarrier
// phase (from a role's arrival), a named barrier (one role's turn after another's).
constexpr ImU32 kFilledColour = IM_COL32(0, 137, 123, 255);
constexpr ImU32 kReleasedColour = IM_COL32(230, 81, 0, 255);
constexpr ImU32 kNamedColour = IM_COL32(123, 31, 162, 255);

ImU32 phase_colour(cost::RolePhase::Kind kind) {
  switch (kind) {
    case cost::RolePhase::Kind::TensorCore: return class_colour(cost::OpClass::Mma);
    case cost::RolePhase::Kind::ElementWise: return class_colour(cost::OpClass::ElementWise);
    case cost::RolePhase::Kind::Wait: return class_colour(cost::OpClass::Wait);
    case cost::RolePhase::Kind::Copy: return class_colour(cost::OpClass::AsyncCopy);
  }
  return IM_COL32(128, 128, 128, 255);
}

// A solver role's colour in the modulo reservation table: the producer in the copies' colour,
// consumer warpgroups in distinct hues, so that the tensor core's rows show which consumer holds
// them (ping-pong).
ImU32 role_colour(const std::string& role, int index) {
  if (role == "producer") return class_colour(cost::OpClass::AsyncCopy);
  if (role == "main") return class_colour(cost::OpClass::Mma);
  constexpr ImU32 kConsumers[] = {IM_COL32(255, 183, 77, 255), IM_COL32(100, 181, 246, 255),
                                  IM_COL32(186, 104, 200, 255), IM_COL32(240, 98, 146, 255)};
  return kConsumers[static_cast<size_t>(std::max(0, index - 1)) % 4];
}

// The bar colour of a solver graph node: its class's colour in the simulated timeline.
ImU32 node_colour(pipeline::NodeKind kind) {
  switch (kind) {
    case pipeline::NodeKind::AsyncCopy:
    case pipeline::NodeKind::TmaLoad: return class_colour(cost::OpClass::AsyncCopy);
    case pipeline::NodeKind::SharedLoad:
    case pipeline::NodeKind::Exchange: return class_colour(cost::OpClass::SharedLoad);
    case pipeline::NodeKind::Mma:
    case pipeline::NodeKind::Wgmma:
    case pipeline::NodeKind::FmaDot: return class_colour(cost::OpClass::Mma);
    case pipeline::NodeKind::Elementwise: return class_colour(cost::OpClass::ElementWise);
    case pipeline::NodeKind::Memory: return class_colour(cost::OpClass::Global);
  }
  return IM_COL32(128, 128, 128, 255);
}

// A line from `from` to `to` with an arrow head at `to`.
void arrow(ImDrawList* draw, ImVec2 from, ImVec2 to, ImU32 colour) {
  draw->AddLine(from, to, colour, 1.5f);
  const float dx = to.x - from.x, dy = to.y - from.y;
  const float length = std::sqrt(dx * dx + dy * dy);
  if (length < 1.0f) return;
  const float ux = dx / length, uy = dy / length;
  const float head = 6.0f;
  draw->AddTriangleFilled(to, ImVec2(to.x - ux * head - uy * head * 0.5f, to.y - uy * head + ux * head * 0.5f),
                          ImVec2(to.x - ux * head + uy * head * 0.5f, to.y - uy * head - ux * head * 0.5f), colour);
}

void legend_box(ImDrawList* draw, ImU32 colour, const char* text, bool line = false) {
  const float box = ImGui::GetTextLineHeight();
  const ImVec2 at = ImGui::GetCursorScreenPos();
  if (line) {
    draw->AddLine(ImVec2(at.x, at.y + box / 2), ImVec2(at.x + box, at.y + box / 2), colour, 2.0f);
  } else {
    draw->AddRectFilled(at, ImVec2(at.x + box, at.y + box), colour);
  }
  ImGui::Dummy(ImVec2(box, box));
  ImGui::SameLine();
  ImGui::TextUnformatted(text);
}

// The same colour with alpha `alpha` (0..255).
ImU32 with_alpha(ImU32 colour, unsigned alpha) {
  return (colour & ~IM_COL32_A_MASK) | (static_cast<ImU32>(alpha) << IM_COL32_A_SHIFT);
}

// A tick step (cycles) giving at least `min_pixels` between ticks.
int64_t tick_step(float pixels_per_cycle, float min_pixels) {
  for (int64_t step : {10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}) {
    if (static_cast<float>(step) * pixels_per_cycle >= min_pixels) return step;
  }
  return 200000;
}

}  // namespace

PipelinePanel::PipelinePanel(QWidget* parent)
    : ImGuiPanel(parent),
      solver_(std::make_unique<TaskRunner>()),
      solve_cache_(std::make_shared<pipeline::SolveCache>()) {
  setObjectName(QStringLiteral("pipeline_panel"));
  connect(solver_.get(), &TaskRunner::busy_changed, this, [this](bool) { request_frames(); });
}

PipelinePanel::~PipelinePanel() {
  solve_stop_.request_stop();  // the worker's destructor then waits for an interrupted solve only
}

void PipelinePanel::show_tab(Tab tab) {
  tab_ = tab;
  select_tab_ = true;
  if (tab == Tab::Solver && !solve_wanted_) solve();
  request_frames();
}

void PipelinePanel::set_module(matile::ModulePtr module) {
  module_ = std::move(module);
  kernel_ = 0;
  // Start on the first kernel that has a loop.
  if (module_) {
    for (size_t i = 0; i < module_->kernels.size(); ++i) {
      if (cost::timeline_from_kernel(*module_->kernels[i], {1, {}}).error.empty()) {
        kernel_ = static_cast<int>(i);
        break;
      }
    }
  }
  rebuild();
  if (solve_wanted_) post_solve();
}

bool PipelinePanel::select_kernel(int index) {
  if (!module_ || index < 0 || index >= static_cast<int>(module_->kernels.size())) return false;
  kernel_ = index;
  rebuild();
  if (solve_wanted_) post_solve();
  return true;
}

void PipelinePanel::set_iterations(int iterations) {
  iterations_ = std::clamp(iterations, 1, 8);
  rebuild();
}

void PipelinePanel::set_group_identical_warps(bool group) {
  group_warps_ = group;
  rebuild();
}

void PipelinePanel::set_zoom(float pixels_per_100_cycles) {
  zoom_ = std::clamp(pixels_per_100_cycles, kMinZoom, kMaxZoom);
  request_frames();
}

void PipelinePanel::rebuild() {
  timeline_ = cost::PipelineTimeline{};
  if (module_ && kernel_ < static_cast<int>(module_->kernels.size())) {
    options_.iterations = iterations_;
    timeline_ = cost::timeline_from_kernel(*module_->kernels[static_cast<size_t>(kernel_)], options_);
  }
  // Bands: on copy rows, the flights of one iteration stack in program order.
  bar_bands_.assign(timeline_.bars.size(), {0, 1});
  std::map<std::pair<int, int>, std::vector<size_t>> groups;  // (row, iteration) -> bars
  for (size_t i = 0; i < timeline_.bars.size(); ++i) {
    const cost::TimelineBar& bar = timeline_.bars[i];
    if (timeline_.rows[static_cast<size_t>(bar.row)].kind == cost::TimelineRow::Kind::Copies) {
      groups[{bar.row, bar.iteration}].push_back(i);
    }
  }
  std::vector<int> bands(timeline_.rows.size(), 1);
  for (const auto& [key, members] : groups) {
    for (size_t k = 0; k < members.size(); ++k) {
      bar_bands_[members[k]] = {static_cast<int>(k), static_cast<int>(members.size())};
    }
    bands[static_cast<size_t>(key.first)] = std::max(bands[static_cast<size_t>(key.first)], static_cast<int>(members.size()));
  }
  // Warps that run identical bars share one row ("warps 0-7") unless the user asks for all.
  row_shown_.assign(timeline_.rows.size(), true);
  row_names_.clear();
  for (const cost::TimelineRow& row : timeline_.rows) row_names_.push_back(row.name);
  shown_row_of_.resize(timeline_.rows.size());
  for (size_t r = 0; r < timeline_.rows.size(); ++r) shown_row_of_[r] = static_cast<int>(r);
  if (group_warps_) {
    // Identical warps of one warpgroup of one role share a row: one row for the producer, one
    // per consumer warpgroup (without warp specialization, one row for the CTA's warps).
    std::vector<std::vector<int>> row_groups;
    for (const std::vector<int>& identical : cost::identical_warp_rows(timeline_)) {
      std::map<std::pair<std::string, int>, std::vector<int>> by_warpgroup;
      for (int r : identical) {
        const cost::TimelineRow& row = timeline_.rows[static_cast<size_t>(r)];
        by_warpgroup[{row.role, row.warpgroup}].push_back(r);
      }
      for (auto& [key, members] : by_warpgroup) row_groups.push_back(std::move(members));
    }
    for (const std::vector<int>& group : row_groups) {
      const cost::TimelineRow& first = timeline_.rows[static_cast<size_t>(group.front())];
      const bool contiguous = group.back() - group.front() + 1 == static_cast<int>(group.size());
      std::string warps = group.size() < 2 ? "warp " : "warps ";
      if (group.size() < 2) {
        warps += std::to_string(first.warp);
      } else if (contiguous) {
        warps += std::to_string(first.warp) + "-" + std::to_string(timeline_.rows[static_cast<size_t>(group.back())].warp);
      } else {
        for (size_t k = 0; k < group.size(); ++k) {
          warps += (k ? "," : "") + std::to_string(timeline_.rows[static_cast<size_t>(group[k])].warp);
        }
      }
      std::string name = warps;
      if (!first.role.empty()) {
        // "producer (warps 0-3)", "consumers wg1 (warps 8-11)" when a role has several warpgroups.
        bool several = false;
        for (const cost::TimelineRow& row : timeline_.rows) several = several || (row.role == first.role && row.warpgroup > 0);
        name = first.role + (several ? " wg" + std::to_string(first.warpgroup) : "") + " (" + warps + ")";
      }
      row_names_[static_cast<size_t>(group.front())] = name;
      for (size_t k = 1; k < group.size(); ++k) {
        row_shown_[static_cast<size_t>(group[k])] = false;
        shown_row_of_[static_cast<size_t>(group[k])] = group.front();
      }
    }
  }
  phases_ = cost::role_phases(timeline_);
  row_strip_.assign(timeline_.rows.size(), 0.0f);
  for (const cost::RolePhase& phase : phases_) row_strip_[static_cast<size_t>(phase.row)] = kRowHeight - 4;
  // Rows grow with their bands so that every flight keeps a full bar's height; hidden rows
  // take no space.
  row_top_.assign(timeline_.rows.size() + 1, 0.0f);
  for (size_t r = 0; r < timeline_.rows.size(); ++r) {
    const float height = row_shown_[r] ? 6 + row_strip_[r] + (kRowHeight - 6) * static_cast<float>(bands[r]) : 0.0f;
    row_top_[r + 1] = row_top_[r] + height;
  }
  request_frames();
}

void PipelinePanel::draw() {
  if (!module_ || module_->kernels.empty()) {
    ImGui::TextDisabled("No MA tile IR yet: the pipeline panel shows the compiled kernel's inner loop.");
    return;
  }
  if (module_->kernels.size() > 1) {
    ImGui::SetNextItemWidth(160);
    if (ImGui::BeginCombo("Kernel", module_->kernels[static_cast<size_t>(kernel_)]->name.c_str())) {
      for (size_t i = 0; i < module_->kernels.size(); ++i) {
        if (ImGui::Selectable(module_->kernels[i]->name.c_str(), static_cast<int>(i) == kernel_)) {
          select_kernel(static_cast<int>(i));
        }
      }
      ImGui::EndCombo();
    }
  }
  if (ImGui::BeginTabBar("##pipeline_tabs")) {
    const auto tab_item = [&](const char* name, Tab tab) {
      const ImGuiTabItemFlags flags = select_tab_ && tab_ == tab ? ImGuiTabItemFlags_SetSelected : 0;
      if (!ImGui::BeginTabItem(name, nullptr, flags)) return false;
      // A requested tab shows a frame after the request; until then the old one still draws.
      if (select_tab_ && tab_ == tab) {
        select_tab_ = false;
      } else if (!select_tab_ && tab_ != tab) {
        tab_ = tab;  // the user clicked it
        if (tab == Tab::Solver && !solve_wanted_) solve();
      }
      return true;
    };
    if (tab_item("Simulated loop", Tab::Simulation)) {
      if (!timeline_.error.empty()) {
        ImGui::TextUnformatted(timeline_.error.c_str());
      } else {
        draw_simulation_controls();
        draw_legend();
        draw_chart();
      }
      ImGui::EndTabItem();
    }
    if (tab_item("Solver", Tab::Solver)) {
      draw_solver();
      ImGui::EndTabItem();
    }
    if (select_tab_) request_frames();  // the requested tab shows in the next frame
    ImGui::EndTabBar();
  }
}

void PipelinePanel::draw_simulation_controls() {
  ImGui::SetNextItemWidth(110);
  int iterations = iterations_;
  if (ImGui::SliderInt("Iterations", &iterations, 1, 8)) set_iterations(iterations);
  ImGui::SameLine();
  bool group = group_warps_;
  if (ImGui::Checkbox("Group identical warps", &group)) set_group_identical_warps(group);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(180);
  ImGui::SliderFloat("Zoom", &zoom_, kMinZoom, kMaxZoom, "%.1f px/100 cyc", ImGuiSliderFlags_Logarithmic);
  ImGui::SameLine();
  ImGui::Text("kernel %s: for %s in 0..%lld%s, %d iteration%s drawn, %lld cycles",
              timeline_.kernel.c_str(), timeline_.loop_var.c_str(),
              static_cast<long long>(timeline_.loop_extent),
              timeline_.pipeline_stages > 0
                  ? (", pipeline " + std::to_string(timeline_.pipeline_stages)).c_str()
                  : "",
              timeline_.iterations, timeline_.iterations == 1 ? "" : "s",
              static_cast<long long>(timeline_.total_cycles));
}

void PipelinePanel::draw_legend() {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float box = ImGui::GetTextLineHeight();
  for (int i = 0; i < cost::kOpClassCount; ++i) {
    const auto op_class = static_cast<cost::OpClass>(i);
    const ImVec2 at = ImGui::GetCursorScreenPos();
    draw->AddRectFilled(at, ImVec2(at.x + box, at.y + box), class_colour(op_class));
    ImGui::Dummy(ImVec2(box, box));
    ImGui::SameLine();
    ImGui::TextUnformatted(cost::op_class_name(op_class));
    if (i + 1 < cost::kOpClassCount) ImGui::SameLine(0, 14);
  }
  if (!timeline_.handoffs.empty()) {
    legend_box(draw, kFilledColour, "stage filled (TMA landed)", true);
    ImGui::SameLine(0, 14);
    legend_box(draw, kReleasedColour, "released / mbarrier arrival", true);
    ImGui::SameLine(0, 14);
    legend_box(draw, kNamedColour, "named barrier (turn handed over)", true);
    ImGui::SameLine(0, 14);
    ImGui::TextDisabled("the strip above a role's bars: its phases");
  }
  const cost::CycleCosts& c = options_.costs;
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped(
      "Bars are the cost model's work of each op, per warp, at these cycles per warp instruction: "
      "mma.sync %lld, shared memory %lld per wavefront, CUDA-core %lld, SFU %lld, cp.async issue "
      "%lld per 16 B, copy landing %lld + bytes/%lld, bar.sync %lld.",
      static_cast<long long>(c.mma), static_cast<long long>(c.shared_wavefront),
      static_cast<long long>(c.alu), static_cast<long long>(c.sfu),
      static_cast<long long>(c.copy_issue), static_cast<long long>(c.copy_latency),
      static_cast<long long>(c.copy_bytes_per_cycle), static_cast<long long>(c.barrier));
  ImGui::PopStyleColor();
}

void PipelinePanel::draw_chart() {
  const ImGuiIO& io = ImGui::GetIO();
  ImGui::BeginChild("##timeline", ImVec2(0, 0), true,
                    ImGuiWindowFlags_HorizontalScrollbar | (io.KeyCtrl ? ImGuiWindowFlags_NoScrollWithMouse : 0));
  if (io.KeyCtrl && io.MouseWheel != 0 && ImGui::IsWindowHovered()) {
    set_zoom(zoom_ * std::pow(1.2f, io.MouseWheel));
  }
  const float scale = zoom_ / 100.0f;  // pixels per cycle
  const float axis_h = ImGui::GetTextLineHeight() * 2 + 6;
  const ImVec2 start = ImGui::GetCursorScreenPos();
  const float rows_h = row_top_.empty() ? 0.0f : row_top_.back();
  ImGui::Dummy(ImVec2(kLabelWidth + static_cast<float>(timeline_.total_cycles) * scale + 40, axis_h + rows_h + 4));
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 clip_min = ImGui::GetWindowPos();
  const float clip_max_x = clip_min.x + ImGui::GetWindowSize().x;
  const float x0 = start.x + kLabelWidth;  // cycle 0
  const float top = start.y + axis_h;
  auto x_of = [&](int64_t cycle) { return x0 + static_cast<float>(cycle) * scale; };
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 faint = ImGui::GetColorU32(ImGuiCol_TextDisabled);

  // Background: the prologue, then alternating iterations, with their names on the axis.
  const float bottom = top + rows_h;
  if (timeline_.loop_start > 0) {
    draw->AddRectFilled(ImVec2(x_of(0), top), ImVec2(x_of(timeline_.loop_start), bottom), IM_COL32(128, 128, 128, 40));
    draw->AddText(ImVec2(x_of(0) + 4, start.y), faint, "prologue");
  }
  for (size_t i = 0; i < timeline_.iteration_spans.size(); ++i) {
    const auto [begin, end] = timeline_.iteration_spans[i];
    draw->AddRectFilled(ImVec2(x_of(begin), top), ImVec2(x_of(end), bottom),
                        i % 2 == 0 ? IM_COL32(66, 133, 244, 28) : IM_COL32(66, 133, 244, 10));
    draw->AddLine(ImVec2(x_of(begin), start.y), ImVec2(x_of(begin), bottom), IM_COL32(66, 133, 244, 160), 1.5f);
    char name[64];
    std::snprintf(name, sizeof name, "%s = %zu", timeline_.loop_var.c_str(), i);
    draw->AddText(ImVec2(x_of(begin) + 4, start.y), text, name);
  }
  // Time axis.
  const int64_t step = tick_step(scale, 70.0f);
  const int64_t first_tick = std::max<int64_t>(0, static_cast<int64_t>((clip_min.x - x0) / scale) / step * step);
  for (int64_t t = first_tick; t <= timeline_.total_cycles && x_of(t) <= clip_max_x; t += step) {
    const float x = x_of(t);
    draw->AddLine(ImVec2(x, top - 4), ImVec2(x, bottom), IM_COL32(128, 128, 128, 60));
    char label[32];
    std::snprintf(label, sizeof label, "%lld", static_cast<long long>(t));
    draw->AddText(ImVec2(x + 2, start.y + ImGui::GetTextLineHeight() + 2), faint, label);
  }
  // Bars.
  const cost::TimelineBar* hovered = nullptr;
  for (const cost::TimelineBar& bar : timeline_.bars) {
    if (bar.end <= bar.start) continue;  // free ops and predicated-off copies take no time
    if (!row_shown_[static_cast<size_t>(bar.row)]) continue;
    const float bx0 = x_of(bar.start), bx1 = std::max(x_of(bar.end), x_of(bar.start) + 1.0f);
    if (bx1 < clip_min.x || bx0 > clip_max_x) continue;
    const cost::TimelineRow& row = timeline_.rows[static_cast<size_t>(bar.row)];
    const bool flight = row.kind == cost::TimelineRow::Kind::Copies;
    // Copies of one iteration that fly together share their stage's row, one above the other.
    const size_t index = static_cast<size_t>(&bar - timeline_.bars.data());
    const float strip = row_strip_[static_cast<size_t>(bar.row)];
    const float band = (row_top_[static_cast<size_t>(bar.row) + 1] - row_top_[static_cast<size_t>(bar.row)] - 6 - strip) /
                       static_cast<float>(std::max(1, bar_bands_[index].second));
    const float y0 = top + row_top_[static_cast<size_t>(bar.row)] + 3 + strip + band * static_cast<float>(bar_bands_[index].first);
    const float y1 = y0 + band;
    const ImU32 colour = class_colour(bar.op_class);
    draw->AddRectFilled(ImVec2(bx0, y0), ImVec2(bx1, y1), flight ? with_alpha(colour, 150) : colour);
    draw->AddRect(ImVec2(bx0, y0), ImVec2(bx1, y1), with_alpha(IM_COL32(0, 0, 0, 255), flight ? 200 : 70));
    if (bx1 - bx0 > 24 && band >= ImGui::GetTextLineHeight() - 3) {
      // The op's name, clipped to the bar (flights drop the "cp.async " every one of them has).
      const char* name = bar.label.c_str() + (flight && bar.label.rfind("cp.async ", 0) == 0 ? 9 : 0);
      draw->PushClipRect(ImVec2(bx0 + 1, y0), ImVec2(bx1 - 1, y1), true);
      draw->AddText(ImVec2(bx0 + 3, y0 + (y1 - y0 - ImGui::GetTextLineHeight()) / 2), IM_COL32(20, 20, 20, 255),
                    name);
      draw->PopClipRect();
    }
    if (ImGui::IsWindowHovered() && io.MousePos.x >= bx0 && io.MousePos.x < bx1 && io.MousePos.y >= y0 &&
        io.MousePos.y < y1) {
      hovered = &bar;
    }
  }
  // Phases of the role rows, in a strip above their bars.
  const cost::RolePhase* hovered_phase = nullptr;
  for (const cost::RolePhase& phase : phases_) {
    if (!row_shown_[static_cast<size_t>(phase.row)] || phase.end <= phase.start) continue;
    const float px0 = x_of(phase.start), px1 = std::max(x_of(phase.end), px0 + 1.0f);
    if (px1 < clip_min.x || px0 > clip_max_x) continue;
    const float y0 = top + row_top_[static_cast<size_t>(phase.row)] + 2;
    const float y1 = y0 + row_strip_[static_cast<size_t>(phase.row)] - 1;
    draw->AddRectFilled(ImVec2(px0, y0), ImVec2(px1, y1), with_alpha(phase_colour(phase.kind), 110));
    draw->AddRect(ImVec2(px0, y0), ImVec2(px1, y1), with_alpha(phase_colour(phase.kind), 255));
    if (px1 - px0 > 30) {
      draw->PushClipRect(ImVec2(px0 + 1, y0), ImVec2(px1 - 1, y1), true);
      draw->AddText(ImVec2(px0 + 3, y0 + (y1 - y0 - ImGui::GetTextLineHeight()) / 2), text, phase.label.c_str());
      draw->PopClipRect();
    }
    if (ImGui::IsWindowHovered() && io.MousePos.x >= px0 && io.MousePos.x < px1 && io.MousePos.y >= y0 &&
        io.MousePos.y < y1) {
      hovered_phase = &phase;
    }
  }
  // Hand-offs between rows: from the event that completed a phase to the waiter going on.
  auto row_middle = [&](int row) {
    const size_t shown = static_cast<size_t>(shown_row_of_[static_cast<size_t>(row)]);
    const float strip = row_strip_[shown];
    return top + row_top_[shown] + strip + (row_top_[shown + 1] - row_top_[shown] - strip) / 2;
  };
  for (const cost::TimelineHandoff& handoff : timeline_.handoffs) {
    const int from = shown_row_of_[static_cast<size_t>(handoff.from_row)];
    const int to = shown_row_of_[static_cast<size_t>(handoff.to_row)];
    if (from == to) continue;
    const ImU32 colour = handoff.named_barrier ? kNamedColour
                         : timeline_.rows[static_cast<size_t>(handoff.from_row)].kind == cost::TimelineRow::Kind::Copies
                             ? kFilledColour
                             : kReleasedColour;
    arrow(draw, ImVec2(x_of(handoff.from_cycle), row_middle(handoff.from_row)),
          ImVec2(x_of(handoff.to_cycle), row_middle(handoff.to_row)), colour);
  }
  // Row names stay at the left edge while the chart scrolls.
  const float label_x = std::max(start.x, clip_min.x);
  draw->AddRectFilled(ImVec2(label_x, top), ImVec2(label_x + kLabelWidth - 4, bottom),
                      ImGui::GetColorU32(ImGuiCol_WindowBg) | IM_COL32_A_MASK);
  for (size_t r = 0; r < timeline_.rows.size(); ++r) {
    if (!row_shown_[r]) continue;
    const float y = top + row_top_[r], row_h = row_top_[r + 1] - row_top_[r];
    draw->AddLine(ImVec2(label_x, y), ImVec2(clip_max_x, y), IM_COL32(128, 128, 128, 40));
    draw->AddText(ImVec2(label_x + 4, y + (row_h - ImGui::GetTextLineHeight()) / 2), text,
                  row_names_[r].c_str());
  }
  if (hovered_phase && !hovered) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(hovered_phase->label.c_str());
    ImGui::Text("cycles %lld .. %lld (%lld)", static_cast<long long>(hovered_phase->start),
                static_cast<long long>(hovered_phase->end),
                static_cast<long long>(hovered_phase->end - hovered_phase->start));
    ImGui::EndTooltip();
  }
  if (hovered) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(hovered->label.c_str());
    ImGui::Text("%s, %s", cost::op_class_name(hovered->op_class),
                hovered->iteration < 0 ? "prologue"
                                       : (timeline_.loop_var + " = " + std::to_string(hovered->iteration)).c_str());
    ImGui::Text("cycles %lld .. %lld (%lld)", static_cast<long long>(hovered->start),
                static_cast<long long>(hovered->end), static_cast<long long>(hovered->end - hovered->start));
    if (hovered->instructions > 0) {
      ImGui::Text("%lld warp instructions", static_cast<long long>(hovered->instructions));
    }
    if (hovered->stage >= 0) ImGui::Text("shared-memory stage %d", hovered->stage);
    ImGui::EndTooltip();
  }
  ImGui::EndChild();
}

// ---- The solver tab ---------------------------------------------------------------------------

void PipelinePanel::solve() {
  solve_wanted_ = true;
  post_solve();
}

void PipelinePanel::pin_role(const std::string& op, const std::string& role) {
  if (role.empty()) {
    role_pins_.erase(op);
  } else {
    role_pins_[op] = role;
  }
  if (solve_wanted_) post_solve();
}

void PipelinePanel::pin_stage(const std::string& op, int stage) {
  if (stage < 0) {
    stage_pins_.erase(op);
  } else {
    stage_pins_[op] = stage;
  }
  if (solve_wanted_) post_solve();
}

void PipelinePanel::clear_pins() {
  role_pins_.clear();
  stage_pins_.clear();
  if (solve_wanted_) post_solve();
}

void PipelinePanel::set_consumers(int consumers) {
  consumers_ = std::max(0, consumers);
  if (solve_wanted_) post_solve();
}

void PipelinePanel::set_solver_time_limit(double seconds) {
  time_limit_ = std::clamp(seconds, 0.1, 600.0);
  if (solve_wanted_) post_solve();
}

bool PipelinePanel::solving() const { return solver_->busy(); }

void PipelinePanel::post_solve() {
  if (!module_ || kernel_ >= static_cast<int>(module_->kernels.size())) return;
  // The worker gets everything by value: the module is immutable and shared, the cache is
  // thread-safe; a newer request makes this one's answer stale (TaskRunner drops it).
  const matile::ModulePtr module = module_;
  const std::string kernel = module_->kernels[static_cast<size_t>(kernel_)]->name;
  const std::string arch = module_->arch == "sm_90a" ? "sm_90a" : "sm_80";
  // The solve in flight answers a question nobody will see: stop it, so that this one starts now.
  solve_stop_.request_stop();
  solve_stop_ = std::stop_source();
  pipeline::SolveOptions options;
  options.stop = solve_stop_.get_token();
  options.time_limit_seconds = time_limit_;
  if (consumers_ > 0 && arch == "sm_90a") options.consumers = consumers_;
  for (const auto& [op, role] : role_pins_) options.role_pins.emplace_back(op, role);
  for (const auto& [op, stage] : stage_pins_) options.stage_pins.emplace_back(op, stage);
  const std::shared_ptr<pipeline::SolveCache> cache = solve_cache_;
  const int iterations = solver_iterations_;
  solver_->post([this, module, kernel, arch, options, cache, iterations]() -> TaskRunner::Continuation {
    const pipeline::Machine machine = *pipeline::machine_for(arch);
    pipeline::GraphResult built = pipeline::build_graph(*module, machine, kernel);
    if (!built.graph) {
      return [this, error = built.error] {
        solver_graph_.reset();
        solution_.reset();
        solver_error_ = error;
        modulo_table_ = {};
        role_timeline_ = {};
        ++solves_delivered_;
        request_frames();
      };
    }
    auto graph = std::make_shared<pipeline::Graph>(std::move(*built.graph));
    auto solution = std::make_shared<pipeline::Solution>(pipeline::solve(*graph, machine, options, cache.get()));
    auto table = std::make_shared<pipeline::ModuloTable>(pipeline::modulo_table(*graph, *solution));
    auto timeline = std::make_shared<pipeline::RoleTimeline>(pipeline::role_timeline(*graph, *solution, iterations));
    return [this, graph, solution, table, timeline] {
      solver_graph_ = std::move(*graph);
      solution_ = std::move(*solution);
      solver_error_.clear();
      modulo_table_ = std::move(*table);
      role_timeline_ = std::move(*timeline);
      ++solves_delivered_;
      request_frames();
    };
  });
  request_frames();
}

std::optional<sched::Decision> PipelinePanel::realizing_decision(std::string* why) const {
  if (!solver_graph_ || !solution_) {
    *why = solver_error_.empty() ? "no answer yet" : solver_error_;
    return std::nullopt;
  }
  std::string block;
  if (kernel_ >= 0 && static_cast<size_t>(kernel_) < kernel_blocks_.size() &&
      !kernel_blocks_[static_cast<size_t>(kernel_)].empty()) {
    block = kernel_blocks_[static_cast<size_t>(kernel_)].front();
  }
  const int held = kernel_ >= 0 && static_cast<size_t>(kernel_) < kernel_held_slots_.size()
                       ? kernel_held_slots_[static_cast<size_t>(kernel_)]
                       : 0;
  return pipeline::realizing_decision(*solver_graph_, *solution_, block, why, held);
}

bool PipelinePanel::use_solution() {
  std::string why;
  const std::optional<sched::Decision> decision = realizing_decision(&why);
  if (!decision || !use_decision_) return false;
  use_decision_(*decision);
  return true;
}

void PipelinePanel::draw_solver() {
  const bool hopper = module_->arch == "sm_90a";
  if (ImGui::Button(solving() ? "Solving..." : "Solve")) solve();
  ImGui::SameLine();
  if (hopper) {
    ImGui::SetNextItemWidth(90);
    const char* counts[] = {"any", "1", "2", "3"};
    if (ImGui::BeginCombo("Consumers", counts[std::clamp(consumers_, 0, 3)])) {
      for (int i = 0; i < 4; ++i) {
        if (ImGui::Selectable(counts[i], i == consumers_)) set_consumers(i);
      }
      ImGui::EndCombo();
    }
    ImGui::SameLine();
  }
  ImGui::SetNextItemWidth(140);
  float limit = static_cast<float>(time_limit_);
  if (ImGui::SliderFloat("Time limit", &limit, 1.0f, 120.0f, "%.0f s", ImGuiSliderFlags_Logarithmic)) {
    time_limit_ = limit;
  }
  // Re-solve once the slider is released, not on every frame of the drag.
  if (ImGui::IsItemDeactivatedAfterEdit()) solve();
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  int iterations = solver_iterations_;
  if (ImGui::SliderInt("Iterations##solver", &iterations, 1, 8)) {
    solver_iterations_ = iterations;
    if (solver_graph_ && solution_) role_timeline_ = pipeline::role_timeline(*solver_graph_, *solution_, iterations);
  }
  if (!role_pins_.empty() || !stage_pins_.empty()) {
    ImGui::SameLine();
    if (ImGui::Button("Clear pins")) clear_pins();
  }
  ImGui::TextDisabled("%s: Z3 on a worker thread, %s machine model; the bars are the solver's own cycles.",
                      hopper ? "sm_90a (TMA producer, wgmma consumers)" : "sm_80 (cp.async, one role)",
                      hopper ? "Hopper" : "Ampere");
  if (!solver_error_.empty()) {
    ImGui::TextUnformatted(solver_error_.c_str());
    return;
  }
  if (!solution_ || !solver_graph_) {
    ImGui::TextDisabled(solving() ? "Solving the loop..." : "Press Solve to schedule this kernel's loop.");
    return;
  }
  const pipeline::Solution& s = *solution_;
  const ImVec4 colour = s.status == pipeline::SolveStatus::Optimal     ? ImVec4(0.18f, 0.62f, 0.25f, 1.0f)
                        : s.status == pipeline::SolveStatus::BestFound ? ImVec4(0.85f, 0.55f, 0.05f, 1.0f)
                                                                       : ImVec4(0.85f, 0.18f, 0.15f, 1.0f);
  ImGui::TextColored(colour, "%s", pipeline::status_name(s.status));
  ImGui::SameLine();
  ImGui::TextWrapped("%s", s.summary.c_str());
  if (s.status == pipeline::SolveStatus::Optimal || s.status == pipeline::SolveStatus::BestFound) {
    std::string roles;
    for (const pipeline::RoleUse& role : s.roles) {
      roles += (roles.empty() ? "" : ", ") + role.name + " " + std::to_string(role.registers) + "/" +
               std::to_string(role.register_limit) + " regs";
    }
    ImGui::Text("II %lld cycles (lower bound %lld: %s), length %lld cycles, %d stage%s, %s", static_cast<long long>(s.ii),
                static_cast<long long>(s.ii_lower_bound), s.bound_reason.c_str(), static_cast<long long>(s.length),
                s.stages, s.stages == 1 ? "" : "s", roles.c_str());
  }
  ImGui::Text("solve time %.2f s (%.1f s of CPU), %d Z3 check%s%s", s.seconds, s.cpu_seconds, s.checks,
              s.checks == 1 ? "" : "s", s.cached ? " (from the cache)" : "");
  if (solving()) {
    ImGui::SameLine();
    ImGui::TextDisabled("re-solving...");
  }
  for (const std::string& note : s.notes) ImGui::TextDisabled("%s", note.c_str());
  if (use_decision_) {
    std::string why;
    const std::optional<sched::Decision> decision = realizing_decision(&why);
    if (decision) {
      if (ImGui::Button("Use in schedule")) use_solution();
      ImGui::SameLine();
      ImGui::TextDisabled("appends %s", sched::print_decision(*decision).c_str());
    } else if (!solving()) {
      ImGui::TextDisabled("Not realizable as a schedule decision: %s", why.c_str());
    }
  }
  ImGui::BeginChild("##solver_answer", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  const bool scheduled = s.status == pipeline::SolveStatus::Optimal || s.status == pipeline::SolveStatus::BestFound;
  if (!s.explanation.empty()) {
    // Infeasible pins: the unsat core is the answer, shown as such. A schedule above its lower
    // bound: why the next smaller interval is impossible, on demand.
    if (!scheduled) {
      ImGui::TextColored(colour, "%s", s.explanation_title.c_str());
      for (const std::string& line : s.explanation) {
        ImGui::Bullet();
        ImGui::TextWrapped("%s", line.c_str());
      }
    } else if (ImGui::CollapsingHeader((s.explanation_title + " (" + std::to_string(s.explanation.size()) +
                                        " constraints)###why_not")
                                           .c_str())) {
      for (const std::string& line : s.explanation) {
        ImGui::Bullet();
        ImGui::TextWrapped("%s", line.c_str());
      }
    }
  }
  if (ImGui::CollapsingHeader("Ops and pins", ImGuiTreeNodeFlags_DefaultOpen)) draw_solver_ops();
  if (modulo_table_.ii_rows > 0 && ImGui::CollapsingHeader("Modulo reservation table", ImGuiTreeNodeFlags_DefaultOpen)) {
    draw_modulo_table();
  }
  if (!role_timeline_.bars.empty() && ImGui::CollapsingHeader("Per-role timeline", ImGuiTreeNodeFlags_DefaultOpen)) {
    draw_role_timeline();
  }
  ImGui::EndChild();
}

void PipelinePanel::draw_solver_ops() {
  const pipeline::Graph& graph = *solver_graph_;
  const pipeline::Solution& s = *solution_;
  const bool hopper = module_->arch == "sm_90a";
  std::vector<std::string> roles;
  if (hopper) {
    roles.push_back("producer");
    const int consumers = pipeline::machine_for("sm_90a")->max_consumer_roles;
    for (int c = 0; c < consumers; ++c) roles.push_back("consumer" + std::to_string(c));
  } else {
    roles.push_back("main");
  }
  const bool scheduled = s.ops.size() == graph.nodes.size();
  if (!ImGui::BeginTable("##solver_ops", 7, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    return;
  }
  for (const char* heading : {"op", "kind", "pin role", "pin stage", "cycle", "stage", "role"}) {
    ImGui::TableSetupColumn(heading);
  }
  ImGui::TableHeadersRow();
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    const pipeline::Node& node = graph.nodes[v];
    ImGui::PushID(static_cast<int>(v));
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float box = ImGui::GetTextLineHeight() * 0.7f;
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(at.x, at.y + box * 0.2f), ImVec2(at.x + box, at.y + box * 1.2f),
                                              gl::index_colour(static_cast<int64_t>(v)));
    ImGui::Dummy(ImVec2(box, box));
    ImGui::SameLine();
    ImGui::TextUnformatted(node.name.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(pipeline::node_kind_name(node.kind));
    ImGui::TableNextColumn();
    auto role_pin = role_pins_.find(node.name);
    ImGui::SetNextItemWidth(110);
    if (ImGui::BeginCombo("##role", role_pin == role_pins_.end() ? "auto" : role_pin->second.c_str())) {
      if (ImGui::Selectable("auto", role_pin == role_pins_.end())) pin_role(node.name, "");
      for (const std::string& role : roles) {
        if (ImGui::Selectable(role.c_str(), role_pin != role_pins_.end() && role_pin->second == role)) {
          pin_role(node.name, role);
        }
      }
      ImGui::EndCombo();
    }
    ImGui::TableNextColumn();
    auto stage_pin = stage_pins_.find(node.name);
    ImGui::SetNextItemWidth(70);
    const std::string stage_text = stage_pin == stage_pins_.end() ? "auto" : std::to_string(stage_pin->second);
    if (ImGui::BeginCombo("##stage", stage_text.c_str())) {
      if (ImGui::Selectable("auto", stage_pin == stage_pins_.end())) pin_stage(node.name, -1);
      for (int stage = 0; stage <= 5; ++stage) {
        if (ImGui::Selectable(std::to_string(stage).c_str(), stage_pin != stage_pins_.end() && stage_pin->second == stage)) {
          pin_stage(node.name, stage);
        }
      }
      ImGui::EndCombo();
    }
    ImGui::TableNextColumn();
    if (scheduled) ImGui::Text("%lld", static_cast<long long>(s.ops[v].start));
    ImGui::TableNextColumn();
    if (scheduled) ImGui::Text("%d", s.ops[v].stage);
    ImGui::TableNextColumn();
    if (scheduled) {
      auto ring = s.ring_depth.find(node.name);
      if (ring != s.ring_depth.end()) {
        ImGui::Text("%s (ring of %d)", s.ops[v].role.c_str(), ring->second);
      } else {
        ImGui::TextUnformatted(s.ops[v].role.c_str());
      }
    }
    ImGui::PopID();
  }
  ImGui::EndTable();
}

void PipelinePanel::draw_modulo_table() {
  const pipeline::Graph& graph = *solver_graph_;
  const pipeline::ModuloTable& table = modulo_table_;
  ImGui::Checkbox("Colour cells by op (else by role)", &modulo_by_op_);
  if (!modulo_by_op_) {
    ImDrawList* legend = ImGui::GetWindowDrawList();
    for (size_t r = 0; r < solution_->roles.size(); ++r) {
      ImGui::SameLine(0, 14);
      legend_box(legend, role_colour(solution_->roles[r].name, static_cast<int>(r)), solution_->roles[r].name.c_str());
    }
  }
  const ImGuiIO& io = ImGui::GetIO();
  const float row_h = ImGui::GetTextLineHeight() + 2;
  const float label_w = 110.0f, column_w = 170.0f;
  const ImVec2 start = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(label_w + column_w * pipeline::kUnitCount + 4,
                      row_h * static_cast<float>(table.ii_rows + 1) + 4));
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 faint = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  for (int u = 0; u < pipeline::kUnitCount; ++u) {
    char heading[64];
    std::snprintf(heading, sizeof heading, "%s %.0f%%", pipeline::unit_name(static_cast<pipeline::Unit>(u)),
                  100.0 * table.utilization(static_cast<pipeline::Unit>(u)));
    draw->AddText(ImVec2(start.x + label_w + column_w * static_cast<float>(u) + 4, start.y), text, heading);
  }
  const pipeline::Reservation* hovered = nullptr;
  for (int64_t row = 0; row < table.ii_rows; ++row) {
    const float y0 = start.y + row_h * static_cast<float>(row + 1), y1 = y0 + row_h;
    char label[48];
    std::snprintf(label, sizeof label, "%lld  (+%lld cyc)", static_cast<long long>(row),
                  static_cast<long long>(row * table.quantum));
    draw->AddText(ImVec2(start.x + 2, y0 + 1), faint, label);
    draw->AddLine(ImVec2(start.x, y0), ImVec2(start.x + label_w + column_w * pipeline::kUnitCount, y0),
                  IM_COL32(128, 128, 128, 40));
    for (int u = 0; u < pipeline::kUnitCount; ++u) {
      const float x0 = start.x + label_w + column_w * static_cast<float>(u), x1 = x0 + column_w - 2;
      const std::vector<int>& cell = table.cells[static_cast<size_t>(row)][static_cast<size_t>(u)];
      const float part = (x1 - x0) / static_cast<float>(std::max<size_t>(1, cell.size()));
      for (size_t k = 0; k < cell.size(); ++k) {
        const pipeline::Reservation& r = table.reservations[static_cast<size_t>(cell[k])];
        const float cx0 = x0 + part * static_cast<float>(k), cx1 = cx0 + part;
        draw->AddRectFilled(ImVec2(cx0, y0), ImVec2(cx1, y1),
                            modulo_by_op_ ? gl::index_colour(r.op)
                                          : role_colour(solution_->roles[static_cast<size_t>(r.role)].name, r.role));
        // The op's name where its reservation starts (and at row 0 when it wraps).
        if (row == r.first_row || row == 0) {
          char name[160];
          std::snprintf(name, sizeof name, "%s [s%d]", graph.nodes[static_cast<size_t>(r.op)].name.c_str(), r.stage);
          draw->PushClipRect(ImVec2(cx0, y0), ImVec2(cx1, y1), true);
          draw->AddText(ImVec2(cx0 + 3, y0 + 1), IM_COL32(20, 20, 20, 255), name);
          draw->PopClipRect();
          draw->AddLine(ImVec2(cx0, y0), ImVec2(cx1, y0), IM_COL32(0, 0, 0, 120));
        }
        if (ImGui::IsWindowHovered() && io.MousePos.x >= cx0 && io.MousePos.x < cx1 && io.MousePos.y >= y0 &&
            io.MousePos.y < y1) {
          hovered = &r;
        }
      }
      draw->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), IM_COL32(128, 128, 128, 50));
    }
  }
  if (hovered) {
    const pipeline::Node& node = graph.nodes[static_cast<size_t>(hovered->op)];
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(node.name.c_str());
    ImGui::Text("%s: rows %lld..%lld of %lld (%lld cycles), stage %d, %s",
                pipeline::unit_name(hovered->unit), static_cast<long long>(hovered->first_row),
                static_cast<long long>((hovered->first_row + hovered->rows - 1) % table.ii_rows),
                static_cast<long long>(table.ii_rows), static_cast<long long>(hovered->rows * table.quantum),
                hovered->stage, solution_->ops[static_cast<size_t>(hovered->op)].role.c_str());
    ImGui::EndTooltip();
  }
}

void PipelinePanel::draw_role_timeline() {
  const pipeline::Graph& graph = *solver_graph_;
  const pipeline::RoleTimeline& t = role_timeline_;
  const ImGuiIO& io = ImGui::GetIO();
  const float row_h = kRowHeight, band_h = ImGui::GetTextLineHeight() + 1;
  const float width = std::max(200.0f, ImGui::GetContentRegionAvail().x - kLabelWidth - 10);
  const float scale = width / static_cast<float>(std::max<int64_t>(1, t.total_cycles));
  // Rows: the roles, then one per ring (a band per buffer).
  std::vector<float> ring_top;
  float height = row_h * static_cast<float>(t.roles.size());
  for (const pipeline::Ring& ring : t.rings) {
    ring_top.push_back(height);
    height += band_h * static_cast<float>(ring.depth) + 6;
  }
  const float axis_h = ImGui::GetTextLineHeight() + 4;
  const ImVec2 start = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(kLabelWidth + width + 4, axis_h + height + 4));
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const float x0 = start.x + kLabelWidth, top = start.y + axis_h;
  auto x_of = [&](int64_t cycle) { return x0 + static_cast<float>(cycle) * scale; };
  auto role_middle = [&](int role) { return top + row_h * (static_cast<float>(role) + 0.5f); };
  // Intervals: a line every II.
  for (int i = 0; static_cast<int64_t>(i) * t.ii <= t.total_cycles && t.ii > 0; ++i) {
    const float x = x_of(static_cast<int64_t>(i) * t.ii);
    draw->AddLine(ImVec2(x, start.y), ImVec2(x, top + height), IM_COL32(66, 133, 244, 120));
    char label[32];
    std::snprintf(label, sizeof label, "%d II", i);
    draw->AddText(ImVec2(x + 3, start.y), ImGui::GetColorU32(ImGuiCol_TextDisabled), label);
  }
  for (size_t r = 0; r < t.roles.size(); ++r) {
    const float y = top + row_h * static_cast<float>(r);
    draw->AddLine(ImVec2(start.x, y), ImVec2(x0 + width, y), IM_COL32(128, 128, 128, 40));
    draw->AddText(ImVec2(start.x + 4, y + (row_h - ImGui::GetTextLineHeight()) / 2), text, t.roles[r].c_str());
  }
  for (size_t k = 0; k < t.rings.size(); ++k) {
    const float y = top + ring_top[k];
    draw->AddLine(ImVec2(start.x, y), ImVec2(x0 + width, y), IM_COL32(128, 128, 128, 40));
    const std::string name = "ring " + t.rings[k].name + " x" + std::to_string(t.rings[k].depth);
    draw->AddText(ImVec2(start.x + 4, y + 3), text, name.c_str());
  }
  const pipeline::ScheduledBar* hovered = nullptr;
  const pipeline::RingHold* hovered_hold = nullptr;
  auto inside = [&](float bx0, float by0, float bx1, float by1) {
    return ImGui::IsWindowHovered() && io.MousePos.x >= bx0 && io.MousePos.x < bx1 && io.MousePos.y >= by0 &&
           io.MousePos.y < by1;
  };
  for (const pipeline::ScheduledBar& bar : t.bars) {
    const pipeline::Node& node = graph.nodes[static_cast<size_t>(bar.op)];
    const float y0 = top + row_h * static_cast<float>(bar.role) + 3, y1 = y0 + row_h - 6;
    const float bx0 = x_of(bar.start), bx1 = std::max(x_of(bar.busy_end), bx0 + 1.0f), rx = x_of(bar.ready);
    const ImU32 colour = node_colour(node.kind);
    if (rx > bx1) draw->AddRectFilled(ImVec2(bx1, y0 + 4), ImVec2(rx, y1 - 4), with_alpha(colour, 70));
    draw->AddRectFilled(ImVec2(bx0, y0), ImVec2(bx1, y1), colour);
    draw->AddRect(ImVec2(bx0, y0), ImVec2(bx1, y1), IM_COL32(0, 0, 0, 90));
    if (bx1 - bx0 > 24) {
      const std::string label = node.name + " (" + std::to_string(bar.iteration) + ")";
      draw->PushClipRect(ImVec2(bx0 + 1, y0), ImVec2(bx1 - 1, y1), true);
      draw->AddText(ImVec2(bx0 + 3, y0 + (y1 - y0 - ImGui::GetTextLineHeight()) / 2), IM_COL32(20, 20, 20, 255),
                    label.c_str());
      draw->PopClipRect();
    }
    if (inside(bx0, y0, std::max(bx1, rx), y1)) hovered = &bar;
  }
  for (const pipeline::RingHold& hold : t.holds) {
    const float y0 = top + ring_top[static_cast<size_t>(hold.ring)] + 3 + band_h * static_cast<float>(hold.buffer);
    const float y1 = y0 + band_h - 1;
    const ImU32 colour = class_colour(cost::OpClass::AsyncCopy);
    const float fx0 = x_of(hold.fill_start), fx1 = x_of(hold.filled), hx1 = std::max(x_of(hold.released), fx1 + 1);
    draw->AddRectFilled(ImVec2(fx0, y0), ImVec2(fx1, y1), with_alpha(colour, 170));
    draw->AddRectFilled(ImVec2(fx1, y0), ImVec2(hx1, y1), with_alpha(colour, 60));
    draw->AddRect(ImVec2(fx0, y0), ImVec2(hx1, y1), with_alpha(colour, 255));
    char label[48];
    std::snprintf(label, sizeof label, "buffer %d: iteration %d", hold.buffer, hold.iteration);
    draw->PushClipRect(ImVec2(fx0 + 1, y0), ImVec2(hx1 - 1, y1), true);
    draw->AddText(ImVec2(fx0 + 3, y0), IM_COL32(20, 20, 20, 255), label);
    draw->PopClipRect();
    if (inside(fx0, y0, hx1, y1)) hovered_hold = &hold;
  }
  for (const pipeline::Handoff& handoff : t.handoffs) {
    const pipeline::ScheduledBar& from = t.bars[static_cast<size_t>(handoff.from_bar)];
    const pipeline::ScheduledBar& to = t.bars[static_cast<size_t>(handoff.to_bar)];
    const bool filled = graph.nodes[static_cast<size_t>(from.op)].is_copy();
    arrow(draw, ImVec2(x_of(handoff.from_cycle), role_middle(from.role)),
          ImVec2(x_of(handoff.to_cycle), role_middle(to.role)), filled ? kFilledColour : kReleasedColour);
  }
  if (hovered) {
    const pipeline::Node& node = graph.nodes[static_cast<size_t>(hovered->op)];
    ImGui::BeginTooltip();
    ImGui::Text("%s, iteration %d", node.name.c_str(), hovered->iteration);
    ImGui::Text("%s, stage %d: starts %lld, busy until %lld, result at %lld",
                t.roles[static_cast<size_t>(hovered->role)].c_str(), hovered->stage,
                static_cast<long long>(hovered->start), static_cast<long long>(hovered->busy_end),
                static_cast<long long>(hovered->ready));
    if (hovered->buffer >= 0) ImGui::Text("fills buffer %d of its ring", hovered->buffer);
    for (const std::string& op : node.ops) ImGui::TextDisabled("%s", op.c_str());
    ImGui::EndTooltip();
  } else if (hovered_hold) {
    ImGui::BeginTooltip();
    ImGui::Text("buffer %d of %s: iteration %d", hovered_hold->buffer,
                t.rings[static_cast<size_t>(hovered_hold->ring)].name.c_str(), hovered_hold->iteration);
    ImGui::Text("copy from %lld, landed at %lld, released at %lld after its last read",
                static_cast<long long>(hovered_hold->fill_start), static_cast<long long>(hovered_hold->filled),
                static_cast<long long>(hovered_hold->released));
    ImGui::EndTooltip();
  }
}

}  // namespace nautilus::views
