#include "views/gl/pipeline_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <imgui.h>

namespace nautilus::views {
namespace {

constexpr float kRowHeight = 22.0f;
constexpr float kLabelWidth = 120.0f;
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

PipelinePanel::PipelinePanel(QWidget* parent) : ImGuiPanel(parent) {
  setObjectName(QStringLiteral("pipeline_panel"));
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
}

bool PipelinePanel::select_kernel(int index) {
  if (!module_ || index < 0 || index >= static_cast<int>(module_->kernels.size())) return false;
  kernel_ = index;
  rebuild();
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
  if (group_warps_) {
    for (const std::vector<int>& group : cost::identical_warp_rows(timeline_)) {
      if (group.size() < 2) continue;
      const bool contiguous = group.back() - group.front() + 1 == static_cast<int>(group.size());
      std::string name = "warps ";
      if (contiguous) {
        name += std::to_string(timeline_.rows[static_cast<size_t>(group.front())].warp) + "-" +
                std::to_string(timeline_.rows[static_cast<size_t>(group.back())].warp);
      } else {
        for (size_t k = 0; k < group.size(); ++k) {
          name += (k ? "," : "") + std::to_string(timeline_.rows[static_cast<size_t>(group[k])].warp);
        }
      }
      row_names_[static_cast<size_t>(group.front())] = name;
      for (size_t k = 1; k < group.size(); ++k) row_shown_[static_cast<size_t>(group[k])] = false;
    }
  }
  // Rows grow with their bands so that every flight keeps a full bar's height; hidden rows
  // take no space.
  row_top_.assign(timeline_.rows.size() + 1, 0.0f);
  for (size_t r = 0; r < timeline_.rows.size(); ++r) {
    const float height = row_shown_[r] ? 6 + (kRowHeight - 6) * static_cast<float>(bands[r]) : 0.0f;
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
    ImGui::SameLine();
  }
  if (!timeline_.error.empty()) {
    ImGui::TextUnformatted(timeline_.error.c_str());
    return;
  }
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
  draw_legend();
  draw_chart();
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
    const float band = (row_top_[static_cast<size_t>(bar.row) + 1] - row_top_[static_cast<size_t>(bar.row)] - 6) /
                       static_cast<float>(std::max(1, bar_bands_[index].second));
    const float y0 = top + row_top_[static_cast<size_t>(bar.row)] + 3 + band * static_cast<float>(bar_bands_[index].first);
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

}  // namespace nautilus::views
