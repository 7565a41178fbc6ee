#include "core/driver/render.h"

#include "core/driver/pipeline.h"
#include "core/matile/printer.h"
#include "core/scalar/printer.h"
#include "core/spec/printer.h"
#include "core/support/text_diff.h"
#include "core/vrtile/printer.h"

namespace nautilus::driver {
namespace {

// The cuda stage as data: the source and, per kernel, how it is launched.
nlohmann::ordered_json cuda_json(const codegen::EmittedModule& cuda) {
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const codegen::EmittedKernel& kernel : cuda.kernels) {
    nlohmann::ordered_json params = nlohmann::ordered_json::array();
    for (const scalar::Buffer& buffer : kernel.params) params.push_back(buffer->name);
    kernels.push_back({{"symbol", kernel.symbol},
                       {"grid", kernel.grid},
                       {"block", kernel.block},
                       {"dynamic_shared_memory", kernel.dynamic_shared_bytes},
                       {"params", params}});
  }
  return {{"kernels", kernels}, {"source", cuda.source}};
}

std::string render_text(const Snapshot& snapshot, const SourceFile* source) {
  switch (snapshot.stage) {
    case Stage::Spec: return snapshot.spec ? spec::print_spec(*snapshot.spec) : std::string();
    case Stage::Scalar:
      return snapshot.program ? scalar::print_program(*snapshot.program, source) : std::string();
    case Stage::VRTile:
      return snapshot.vr_module ? vrtile::print_module(*snapshot.vr_module) : std::string();
    case Stage::MATile:
      return snapshot.ma_module ? matile::print_module(*snapshot.ma_module) : std::string();
    case Stage::Cuda: return snapshot.cuda ? snapshot.cuda->source : std::string();
  }
  return {};
}

std::string render_dot(const Snapshot& snapshot) {
  switch (snapshot.stage) {
    case Stage::Spec: return snapshot.spec ? spec::spec_to_dot(*snapshot.spec) : std::string();
    case Stage::Scalar:
      return snapshot.program ? scalar::program_to_dot(*snapshot.program) : std::string();
    case Stage::VRTile:
      return snapshot.vr_module ? vrtile::module_to_dot(*snapshot.vr_module) : std::string();
    case Stage::MATile:
      return snapshot.ma_module ? matile::module_to_dot(*snapshot.ma_module) : std::string();
    case Stage::Cuda: return {};
  }
  return {};
}

}  // namespace

const char* render_format_name(RenderFormat format) {
  switch (format) {
    case RenderFormat::Text: return "text";
    case RenderFormat::Dot: return "dot";
    case RenderFormat::Json: return "json";
  }
  return "?";
}

std::optional<RenderFormat> parse_render_format(std::string_view name) {
  for (RenderFormat format : {RenderFormat::Text, RenderFormat::Dot, RenderFormat::Json}) {
    if (name == render_format_name(format)) return format;
  }
  return std::nullopt;
}

nlohmann::ordered_json render_json(const Snapshot& snapshot) {
  switch (snapshot.stage) {
    case Stage::Spec:
      return snapshot.spec ? spec::spec_to_json(*snapshot.spec) : nlohmann::ordered_json();
    case Stage::Scalar:
      return snapshot.program ? scalar::program_to_json(*snapshot.program)
                              : nlohmann::ordered_json();
    case Stage::VRTile:
      return snapshot.vr_module ? vrtile::module_to_json(*snapshot.vr_module)
                                : nlohmann::ordered_json();
    case Stage::MATile:
      return snapshot.ma_module ? matile::module_to_json(*snapshot.ma_module)
                                : nlohmann::ordered_json();
    case Stage::Cuda: return snapshot.cuda ? cuda_json(*snapshot.cuda) : nlohmann::ordered_json();
  }
  return {};
}

std::string render(const Snapshot& snapshot, RenderFormat format, const SourceFile* source) {
  switch (format) {
    case RenderFormat::Text: return render_text(snapshot, source);
    case RenderFormat::Dot: return render_dot(snapshot);
    case RenderFormat::Json: return render_json(snapshot).dump(2) + "\n";
  }
  return {};
}

std::string pass_diff(const std::vector<Snapshot>& log, size_t index, const SourceFile* source) {
  if (index >= log.size()) return {};
  const Snapshot& after = log[index];
  const std::string before_text =
      index > 0 ? render(log[index - 1], RenderFormat::Text, source) : std::string();
  const std::string before_name = index > 0 ? log[index - 1].pass : "(nothing)";
  return unified_diff(before_text, render(after, RenderFormat::Text, source),
                      "before " + before_name, "after " + after.pass);
}

std::string pass_explanation(const Snapshot& snapshot) {
  if (snapshot.decision) {
    if (const sched::DecisionKind* kind = sched::find_decision_kind(snapshot.decision->kind)) {
      return kind->description.empty() ? kind->summary : kind->description;
    }
  }
  for (const PassInfo& info : pass_registry()) {
    if (info.name == snapshot.pass && !info.summary.empty()) return info.summary;
  }
  return snapshot.summary;
}

}  // namespace nautilus::driver
