#include "views/gl/layout_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/layout/bank_conflicts.h"
#include "core/layout/printer.h"
#include "core/matile/layouts.h"
#include "core/matile/visitor.h"

namespace nautilus::views::gl {
namespace {

using layout::layout_error;

constexpr int kBanks = 32;
constexpr int kBankBytes = 4;
constexpr int kWavefrontBytes = kBanks * kBankBytes;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The allocation coordinate of tile coordinate `c` of a window `ref` (ir.h: SharedRef).
std::vector<int64_t> alloc_coordinate(const matile::SharedRef& ref, std::vector<int64_t> c) {
  if (ref.transposed && c.size() == 2) std::swap(c[0], c[1]);
  for (size_t k = 0; k < c.size() && k < ref.offsets.size(); ++k) c[k] += ref.offsets[k];
  return c;
}

std::string ref_text(const matile::Kernel& kernel, const matile::SharedRef& ref) {
  std::string text = kernel.shared[static_cast<size_t>(ref.alloc)].name;
  if (ref.stage) text += "[%" + ref.stage->name + "]";
  text += shape_text(ref.offsets);
  if (ref.transposed) text += "^T";
  return text;
}

// ldmatrix.x4 [.trans] issues of a SharedLoad whose result is an mma A or B fragment tile, as
// the MA interpreter executes them (core/matile/layouts.h: ldmatrix_issues): lane 8j + r gives
// the address of row r of matrix j. An empty result: the value is no fragment tile.
std::vector<SharedInstruction> ldmatrix_issues(const matile::Kernel& kernel, const matile::Op& op) {
  std::vector<SharedInstruction> issues;
  const matile::Value& result = op.results[0];
  const bool trans = op.shared_read == matile::SharedRead::LdMatrixX4Trans;
  for (const matile::LdmatrixIssue& issue :
       matile::ldmatrix_issues(result->layout, result->type.shape, trans, kernel.warps)) {
    SharedInstruction instruction;
    instruction.warp = issue.warp;
    for (const std::array<int64_t, 2>& start : issue.lane_start) {
      instruction.lane_starts.push_back(alloc_coordinate(op.shared, {start[0], start[1]}));
    }
    issues.push_back(std::move(instruction));
  }
  return issues;
}

// One instruction per (warp, register slot) of `value`'s layout: lane l of warp w accesses the
// element its slot holds (ld.shared / st.shared per slot).
std::vector<SharedInstruction> slot_issues(const matile::Kernel& kernel, const matile::SharedRef& ref,
                                           const matile::Value& value) {
  std::vector<SharedInstruction> issues;
  const matile::RegisterLayout& layout = value->layout;
  const int64_t threads = std::min<int64_t>(layout.threads(), kernel.threads());
  for (int64_t warp_first = 0; warp_first < threads; warp_first += matile::kWarpSize) {
    for (int64_t v = 0; v < layout.slots(); ++v) {
      SharedInstruction instruction;
      instruction.warp = static_cast<int>(warp_first / matile::kWarpSize);
      for (int64_t t = warp_first; t < std::min(threads, warp_first + matile::kWarpSize); ++t) {
        instruction.lane_starts.push_back(alloc_coordinate(
            ref, matile::coordinates_of(layout.tv.index(t, v), value->type.shape)));
      }
      issues.push_back(std::move(instruction));
    }
  }
  return issues;
}

// cp.async: thread t's k-th 16-byte vector starts at its value k * vector_elements.
std::vector<SharedInstruction> copy_issues(const matile::Op& op) {
  std::vector<SharedInstruction> issues;
  const layout::TVLayout& tv = op.copy_layout;
  if (op.vector_elements <= 0 || tv.values() % op.vector_elements != 0) return issues;
  const int64_t vectors = tv.values() / op.vector_elements;
  for (int64_t warp_first = 0; warp_first < tv.threads(); warp_first += matile::kWarpSize) {
    for (int64_t k = 0; k < vectors; ++k) {
      SharedInstruction instruction;
      instruction.warp = static_cast<int>(warp_first / matile::kWarpSize);
      for (int64_t t = warp_first; t < std::min(tv.threads(), warp_first + matile::kWarpSize); ++t) {
        instruction.lane_starts.push_back(alloc_coordinate(
            op.shared, matile::coordinates_of(tv.index(t, k * op.vector_elements), op.tile_shape)));
      }
      issues.push_back(std::move(instruction));
    }
  }
  return issues;
}

// The register values of a kernel that the panel can draw (rank 2 or less), each once, in
// program order: a For's block arguments, then the values of its body, then its results; the
// bodies of a Roles op role by role, each value remembering its role. Also what each value is to
// a wgmma.
class DrawableValues : public matile::Visitor {
 public:
  struct Drawable {
    matile::Value value;
    int statement = -1;  // of its defining op
    std::string role;
    int role_warpgroups = 0;
    int64_t first_thread = 0;
  };
  std::vector<Drawable> values;
  std::unordered_map<const matile::ValueNode*, std::string> wgmma_use;

 protected:
  void visit_For(const matile::Op& op) override {
    for (const matile::Value& arg : op.block_args) add(arg, op.provenance.statement);
    if (op.body) visit(*op.body);
    visit_op(op);
  }
  void visit_Roles(const matile::Op& op) override {
    int64_t first_thread = 0;
    for (const matile::WarpRole& role : op.roles) {
      role_ = role.name;
      role_warpgroups_ = role.warpgroups;
      first_thread_ = first_thread;
      if (role.body) visit(*role.body);
      first_thread += int64_t{4} * role.warpgroups * matile::kWarpSize;
    }
    role_.clear();
    role_warpgroups_ = 0;
    first_thread_ = 0;
  }
  void visit_op(const matile::Op& op) override {
    for (const matile::Value& result : op.results) add(result, op.provenance.statement);
    if (op.kind == matile::OpKind::Wgmma) {
      // Operands: [a, c] in the RS form, [c] in the SS form (ir.h).
      for (const matile::Value& result : op.results) wgmma_use.emplace(result.get(), "wgmma accumulator");
      if (!op.operands.empty()) wgmma_use.emplace(op.operands.back().get(), "wgmma accumulator");
      if (op.operands.size() == 2) wgmma_use.emplace(op.operands[0].get(), "wgmma A operand from registers (RS)");
    }
  }

 private:
  void add(const matile::Value& value, int statement) {
    if (value && value->type.shape.size() <= 2 && seen_.insert(value.get()).second) {
      values.push_back({value, statement, role_, role_warpgroups_, first_thread_});
    }
  }
  std::unordered_set<const matile::ValueNode*> seen_;
  std::string role_;
  int role_warpgroups_ = 0;
  int64_t first_thread_ = 0;
};

// HSV (all in [0, 1]) to 0xAABBGGRR.
uint32_t hsv_colour(double h, double s, double v) {
  h = (h - std::floor(h)) * 6.0;
  const int sector = static_cast<int>(h) % 6;
  const double f = h - std::floor(h);
  const double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  double r = v, g = t, b = p;
  switch (sector) {
    case 0: r = v; g = t; b = p; break;
    case 1: r = q; g = v; b = p; break;
    case 2: r = p; g = v; b = t; break;
    case 3: r = p; g = q; b = v; break;
    case 4: r = t; g = p; b = v; break;
    default: r = v; g = p; b = q; break;
  }
  auto byte = [](double x) { return static_cast<uint32_t>(std::lround(std::clamp(x, 0.0, 1.0) * 255)); };
  return 0xFF000000u | (byte(b) << 16) | (byte(g) << 8) | byte(r);
}

}  // namespace

int64_t LayoutGrid::max_replication() const {
  size_t most = 0;
  for (const auto& cell : holders) most = std::max(most, cell.size());
  return static_cast<int64_t>(most);
}

Result<LayoutGrid> layout_grid(const matile::RegisterLayout& layout,
                               const std::vector<int64_t>& shape) {
  if (shape.size() > 2) {
    return layout_error("a rank-" + std::to_string(shape.size()) +
                        " tile has no 2-D thread/value grid");
  }
  LayoutGrid grid;
  grid.rows = shape.empty() ? 1 : shape[0];
  grid.cols = shape.size() == 2 ? shape[1] : 1;
  const int64_t elements = grid.rows * grid.cols;
  if (layout::product(layout.tv.tile) != elements) {
    return layout_error("the layout's tile " + layout::to_string(layout.tv.tile) + " has " +
                        std::to_string(layout::product(layout.tv.tile)) +
                        " elements, the value's shape " + shape_text(shape) + " has " +
                        std::to_string(elements));
  }
  grid.threads = layout.threads();
  grid.slots = layout.slots();
  grid.holders.resize(static_cast<size_t>(elements));
  for (int64_t t = 0; t < grid.threads; ++t) {
    for (int64_t v = 0; v < grid.slots; ++v) {
      const int64_t index = layout.tv.index(t, v);
      if (index < 0 || index >= elements) {
        return layout_error("thread " + std::to_string(t) + " slot " + std::to_string(v) +
                            " holds element " + std::to_string(index) + ", outside the " +
                            std::to_string(elements) + "-element tile");
      }
      // Column-major index r + R*c -> the row-major cell r*C + c.
      const int64_t r = index % grid.rows, c = index / grid.rows;
      grid.holders[static_cast<size_t>(r * grid.cols + c)].push_back({t, v});
    }
  }
  return grid;
}

std::vector<SharedAccessPattern> shared_access_patterns(const matile::Kernel& kernel, int alloc) {
  std::vector<SharedAccessPattern> patterns;
  if (alloc < 0 || alloc >= static_cast<int>(kernel.shared.size()) || !kernel.body) return patterns;
  matile::for_each_op(*kernel.body, [&](const matile::Op& op) {
    if (op.kind == matile::OpKind::For || op.shared.alloc != alloc) return;
    SharedAccessPattern pattern = shared_access_pattern(kernel, op);
    if (!pattern.instructions.empty()) patterns.push_back(std::move(pattern));
  });
  return patterns;
}

SharedAccessPattern shared_access_pattern(const matile::Kernel& kernel, const matile::Op& op) {
  SharedAccessPattern pattern;
  const int alloc = op.shared.alloc;
  if (alloc < 0 || alloc >= static_cast<int>(kernel.shared.size())) return pattern;
  const int bytes = dtype_bytes(kernel.shared[static_cast<size_t>(alloc)].dtype);
  if (op.kind == matile::OpKind::AsyncCopy && op.buffer) {
    pattern.instruction = "cp.async";
    pattern.writes = true;
    pattern.access_bytes = static_cast<int>(op.vector_elements) * bytes;
    pattern.label = "cp.async " + ref_text(kernel, op.shared) + " <- " + op.buffer->name;
    pattern.instructions = copy_issues(op);
  } else if (op.kind == matile::OpKind::SharedLoad && !op.results.empty()) {
    pattern.instruction = matile::shared_read_name(op.shared_read);
    pattern.label =
        pattern.instruction + " " + ref_text(kernel, op.shared) + " -> %" + op.results[0]->name;
    if (op.shared_read == matile::SharedRead::Scalar) {
      pattern.access_bytes = bytes;
      pattern.instructions = slot_issues(kernel, op.shared, op.results[0]);
    } else {
      pattern.access_bytes = 16;
      pattern.instructions = ldmatrix_issues(kernel, op);
    }
  } else if (op.kind == matile::OpKind::SharedStore) {
    const matile::Value value = matile::stored_value(op);
    if (!value) return pattern;
    pattern.instruction = "st.shared";
    pattern.writes = true;
    pattern.access_bytes = bytes;
    pattern.label = "st.shared " + ref_text(kernel, op.shared) + " <- %" + value->name;
    pattern.instructions = slot_issues(kernel, op.shared, value);
  }
  return pattern;
}

int64_t BankGrid::conflicting_phases() const {
  return std::count_if(phases.begin(), phases.end(),
                       [](const BankPhase& phase) { return phase.wavefronts > 1; });
}

Result<BankGrid> bank_grid(const matile::SharedAlloc& alloc, const SharedAccessPattern& pattern,
                           int stage) {
  const std::string context = "bank grid of " + alloc.name;
  if (alloc.shape.empty() || alloc.shape.size() > 2) {
    return layout_error(context + ": only rank-1 and rank-2 allocations are drawn");
  }
  if (stage < 0 || stage >= std::max(alloc.stages, 1)) {
    return layout_error(context + ": stage " + std::to_string(stage) + " of " +
                        std::to_string(alloc.stages));
  }
  const int a = pattern.access_bytes;
  if (a != 1 && a != 2 && a != 4 && a != 8 && a != 16) {
    return layout_error(context + ": " + std::to_string(a) + "-byte accesses are not modelled");
  }
  BankGrid grid;
  grid.rows = alloc.shape.size() == 2 ? alloc.shape[0] : 1;
  grid.cols = alloc.shape.back();
  grid.element_bytes = dtype_bytes(alloc.dtype);
  grid.stage = stage;
  if (a % grid.element_bytes != 0) {
    return layout_error(context + ": a " + std::to_string(a) + "-byte access of " +
                        std::to_string(grid.element_bytes) + "-byte elements");
  }
  const int64_t cells = grid.rows * grid.cols;
  const int64_t span = std::max(alloc.stage_elements, alloc.layout.cosize());
  // Element offset (within the stage) of each cell, and the cell at each offset.
  std::vector<int64_t> offset_of(static_cast<size_t>(cells));
  std::vector<int64_t> cell_at(static_cast<size_t>(span), -1);
  grid.cells.resize(static_cast<size_t>(cells));
  const int64_t stage_base = int64_t{stage} * alloc.stage_elements;
  for (int64_t r = 0; r < grid.rows; ++r) {
    for (int64_t c = 0; c < grid.cols; ++c) {
      const layout::IntTuple coordinate =
          alloc.shape.size() == 2 ? layout::tuple_of(r, c) : layout::IntTuple(c);
      Result<int64_t> offset = alloc.layout.evaluate(coordinate);
      if (!offset) return layout_error(context + ": " + offset.error().message);
      if (*offset < 0 || *offset >= span) {
        return layout_error(context + ": element (" + std::to_string(r) + ", " + std::to_string(c) +
                            ") lies at offset " + std::to_string(*offset) + ", outside the stage");
      }
      const int64_t cell = r * grid.cols + c;
      offset_of[static_cast<size_t>(cell)] = *offset;
      cell_at[static_cast<size_t>(*offset)] = cell;
      const int64_t byte = alloc.byte_offset + (stage_base + *offset) * grid.element_bytes;
      grid.cells[static_cast<size_t>(cell)] = {static_cast<int>((byte / kBankBytes) % kBanks),
                                               byte / kBankBytes};
    }
  }

  const int64_t elements_per_access = a / grid.element_bytes;
  const int lanes_per_phase = std::min(matile::kWarpSize, kWavefrontBytes / a);
  for (size_t i = 0; i < pattern.instructions.size(); ++i) {
    const SharedInstruction& instruction = pattern.instructions[i];
    if (instruction.lane_starts.size() > static_cast<size_t>(matile::kWarpSize)) {
      return layout_error(context + ": instruction " + std::to_string(i) + " has more than 32 lanes");
    }
    std::vector<PhaseLane> lanes;
    for (size_t lane = 0; lane < instruction.lane_starts.size(); ++lane) {
      const std::vector<int64_t>& start = instruction.lane_starts[lane];
      if (start.empty()) continue;  // inactive lane
      const int64_t r = start.size() == 2 ? start[0] : 0, c = start.back();
      const std::string where = "instruction " + std::to_string(i) + " lane " + std::to_string(lane);
      if (start.size() != alloc.shape.size() || r < 0 || r >= grid.rows || c < 0 || c >= grid.cols) {
        return layout_error(context + ": " + where + " starts outside the allocation");
      }
      PhaseLane access;
      access.lane = static_cast<int>(lane);
      const int64_t first = offset_of[static_cast<size_t>(r * grid.cols + c)];
      for (int64_t e = 0; e < elements_per_access; ++e) {
        const int64_t offset = first + e;
        const int64_t cell = offset < span ? cell_at[static_cast<size_t>(offset)] : -1;
        if (cell < 0) {
          return layout_error(context + ": " + where + " reaches offset " + std::to_string(offset) +
                              ", which holds no element of the tile (not contiguous)");
        }
        access.cells.push_back(cell);
      }
      access.byte_address = alloc.byte_offset + (stage_base + first) * grid.element_bytes;
      if (access.byte_address % a != 0) {
        return layout_error(context + ": " + where + " address " +
                            std::to_string(access.byte_address) + " is not " + std::to_string(a) +
                            "-byte aligned");
      }
      lanes.push_back(std::move(access));
    }
    // The hardware's phases and their conflicts (core/layout/bank_conflicts.h); the grid adds
    // the lanes and cells each phase covers.
    std::vector<std::optional<int64_t>> addresses(instruction.lane_starts.size());
    for (const PhaseLane& lane : lanes) addresses[static_cast<size_t>(lane.lane)] = lane.byte_address;
    Result<std::vector<layout::BankPhaseConflicts>> served = layout::bank_phases(addresses, a);
    if (!served) return layout_error(context + ": " + served.error().message);
    for (const layout::BankPhaseConflicts& conflicts : *served) {
      BankPhase phase;
      phase.instruction = static_cast<int>(i);
      phase.warp = instruction.warp;
      phase.phase = conflicts.phase;
      phase.wavefronts = static_cast<int>(conflicts.wavefronts);
      phase.conflicting_banks = conflicts.conflicting_banks;
      std::vector<PhaseLane> phase_lanes;
      for (const PhaseLane& lane : lanes) {
        if (lane.lane / lanes_per_phase == conflicts.phase) phase_lanes.push_back(lane);
      }
      for (const PhaseLane& lane : phase_lanes) {
        for (int64_t cell : lane.cells) {
          if (std::binary_search(phase.conflicting_banks.begin(), phase.conflicting_banks.end(),
                                 grid.cells[static_cast<size_t>(cell)].bank)) {
            phase.conflict_cells.push_back(cell);
          }
        }
      }
      std::sort(phase.conflict_cells.begin(), phase.conflict_cells.end());
      phase.conflict_cells.erase(std::unique(phase.conflict_cells.begin(), phase.conflict_cells.end()),
                                 phase.conflict_cells.end());
      phase.lanes = std::move(phase_lanes);
      grid.wavefronts += phase.wavefronts;
      grid.ideal_wavefronts += 1;
      grid.phases.push_back(std::move(phase));
    }
  }
  return grid;
}

std::vector<TileChoice> tile_choices(const matile::Kernel& kernel,
                                     const std::vector<std::string>& statement_names) {
  std::vector<TileChoice> choices;
  for (size_t i = 0; i < kernel.shared.size(); ++i) {
    const matile::SharedAlloc& alloc = kernel.shared[i];
    TileChoice choice;
    choice.alloc = static_cast<int>(i);
    choice.label = alloc.name + "  " + std::string(dtype_name(alloc.dtype)) + shape_text(alloc.shape) +
                   "  " + layout::to_string(alloc.layout) +
                   (alloc.stages > 1 ? "  x" + std::to_string(alloc.stages) + " stages" : "");
    choices.push_back(std::move(choice));
  }
  if (!kernel.body) return choices;
  DrawableValues drawable;
  drawable.visit(kernel);
  for (const DrawableValues::Drawable& drawn : drawable.values) {
    const matile::Value& value = drawn.value;
    TileChoice choice;
    choice.value = value;
    choice.role = drawn.role;
    choice.role_warpgroups = drawn.role_warpgroups;
    choice.first_thread = drawn.first_thread;
    if (drawn.statement >= 0 && drawn.statement < static_cast<int>(statement_names.size())) {
      choice.statement = statement_names[static_cast<size_t>(drawn.statement)];
    }
    if (auto use = drawable.wgmma_use.find(value.get()); use != drawable.wgmma_use.end()) choice.use = use->second;
    choice.label = "%" + value->name + "  " + matile::type_text(value->type) + "  " +
                   matile::layout_kind_name(value->layout.kind);
    if (value->layout.warps_m > 0) {
      choice.label += " warps(" + std::to_string(value->layout.warps_m) + "," +
                      std::to_string(value->layout.warps_n) + ")";
    }
    std::string notes = choice.statement;
    if (!choice.use.empty()) notes += (notes.empty() ? "" : ", ") + choice.use;
    if (!choice.role.empty()) notes += (notes.empty() ? "" : ", ") + std::string("role ") + choice.role;
    if (!notes.empty()) choice.label += "  " + notes;
    choices.push_back(std::move(choice));
  }
  return choices;
}

uint32_t index_colour(int64_t index) {
  constexpr double kGolden = 0.6180339887498949;
  // Indices 8 apart land on nearby hues; their saturation differs so they stay apart.
  const double saturation = (index / 8) % 2 == 0 ? 0.40 : 0.62;
  return hsv_colour(static_cast<double>(index) * kGolden, saturation, 0.98);
}

uint32_t thread_colour(int64_t thread, ColourBy by) {
  switch (by) {
    case ColourBy::Warp: return index_colour(thread / matile::kWarpSize);
    case ColourBy::Lane: return index_colour(thread % matile::kWarpSize);
    case ColourBy::Warpgroup: return index_colour(thread / (4 * matile::kWarpSize));
    case ColourBy::Thread: break;
  }
  return index_colour(thread);
}

uint32_t bank_colour(int bank) {
  return hsv_colour(static_cast<double>(bank % kBanks) / kBanks, 0.45, 0.97);
}

}  // namespace nautilus::views::gl
