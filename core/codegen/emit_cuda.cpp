// The CUDA emitter's entry point and the kernel frame every op is printed into: the kernel's
// signature, shared allocations, thread coordinates and hoisted addresses; names and register
// storage of values; the walk over regions (each op after its MA text as a comment, a section
// comment quoting the spec line at each new statement) and the loops that carry values.
// kernel_emitter.h lists which file prints which op.
//
//   %acc = for n_o in 0..64 iter_args(%Mx_i = %1, ...)  ->  float Mx[4]; ... = v1[s];
//     pipeline 2 { ... yield %Mx, ... }                    // software-pipelined: 2 stages in flight
//                                                          for (int n_o = 0; n_o < 64; ++n_o) {
//                                                            ...
//                                                            // yield
//                                                            Mx[s] = Mx_next[s]; ...
//                                                          }
#include "core/codegen/emit_cuda.h"

#include "core/codegen/kernel_emitter.h"

namespace nautilus::codegen {
namespace detail {

std::string KernelEmitter::emit(EmittedKernel* launch) {
  // The body goes to its own stream first: it decides which layouts need thread coordinates,
  // which are then declared at the top of the kernel.
  for (const scalar::Buffer& buffer : kernel_.params) buffer_name(buffer);
  for (const SharedAlloc& alloc : kernel_.shared) shared_name(alloc);
  const bool hopper = uses_hopper();
  for (const matile::MBarrierAlloc& bar : kernel_.mbarriers) barrier_names_.push_back(unique(bar.name + "_addr"));
  for (const matile::TmaMap& map : kernel_.tma_maps) {
    tma_names_.push_back(unique(map.name));
    Result<layout::TmaTilePlan> plan = plan_tma_map(map);
    if (!plan) throw EmitFailure{plan.error().kind, plan.error().message};
    launch->tensor_maps.push_back({map.name, map.buffer, *plan});
  }
  role_threads_ = kernel_.threads();
  if (kernel_.body) analyze_uses(*kernel_.body);
  find_folded_index_tiles();
  for (const matile::ValueNode* tile : zero_tiles_) {
    if (wgmma_accumulator_inputs_.count(tile) && !read_otherwise_.count(tile)) wgmma_zero_accumulators_.insert(tile);
  }
  std::vector<std::string> grid_lines = grid_mapping(launch);
  indent_ = 1;
  visit(*kernel_.body);
  std::vector<std::string> frame_lines;
  if (hopper) frame_lines = hopper_frame_lines(launch);
  std::ostringstream out;
  out << "// Kernel " << symbol_ << " (MA kernel " << kernel_.name << "): grid ";
  launch->symbol = symbol_;
  launch->ir_name = kernel_.name;
  launch->block = {kernel_.threads(), 1, 1};
  if (!hopper) launch->dynamic_shared_bytes = kernel_.shared_bytes;
  launch->params = kernel_.params;
  out << "(" << launch->grid[0] << ", " << launch->grid[1] << ", " << launch->grid[2] << "), "
      << kernel_.threads() << " threads, " << launch->dynamic_shared_bytes
      << " bytes of dynamic shared memory.\n";
  // Hopper kernels run one CTA per SM: setmaxnreg needs the register count ptxas fixes with
  // the minimum of one block (C7508 otherwise).
  out << "extern \"C\" __global__ void __launch_bounds__(" << kernel_.threads() << (hopper ? ", 1" : "")
      << ") " << symbol_ << "(";
  for (size_t i = 0; i < kernel_.params.size(); ++i) {
    const scalar::Buffer& buffer = kernel_.params[i];
    out << (i ? ",\n    " : "\n    ")
        << (buffer->role == scalar::BufferRole::Input ? "const " : "")
        << (buffer->dtype == DType::I4 ? "unsigned char" : c_type(buffer->dtype))  // packed nibbles
        << "* __restrict__ " << buffer_name(buffer);
  }
  for (size_t i = 0; i < kernel_.tma_maps.size(); ++i) {
    out << (i + kernel_.params.size() ? ",\n    " : "\n    ") << "const __grid_constant__ tensor_map "
        << tma_names_[i];
  }
  out << ") {\n";
  if (!kernel_.shared.empty() || !kernel_.mbarriers.empty()) {
    out << "  extern __shared__ __align__(" << (hopper ? 1024 : 128) << ") unsigned char shared_memory[];\n";
    for (const SharedAlloc& alloc : kernel_.shared) {
      out << "  // " << alloc.name << ": " << dtype_name(alloc.dtype) << "[";
      for (size_t k = 0; k < alloc.shape.size(); ++k) out << (k ? ", " : "") << alloc.shape[k];
      out << "] x " << alloc.stages << " stage" << (alloc.stages == 1 ? "" : "s") << ", bytes ["
          << alloc.byte_offset << ", " << alloc.byte_offset + alloc.byte_size << ")"
          << (alloc.purpose.empty() ? "" : ": " + alloc.purpose) << "\n";
      out << "  " << c_type(alloc.dtype) << "* const " << shared_name(alloc) << " = reinterpret_cast<"
          << c_type(alloc.dtype) << "*>(shared_memory + " << alloc.byte_offset << ");\n";
    }
  }
  for (const std::string& line : frame_lines) out << "  " << line << "\n";
  out << "  const int tid = threadIdx.x;\n";
  if (uses_warp_) out << "  const int lane = tid % 32;\n  const int warp = tid / 32;\n";
  for (const std::string& line : grid_lines) out << "  " << line << "\n";
  if (!layout_lines_.empty()) {
    out << "  // Thread part of the tile coordinates of each register layout.\n";
    for (const std::string& line : layout_lines_) out << "  " << line << "\n";
  }
  if (!hoisted_lines_.empty()) {
    out << "  // Per-thread parts of shared and global addresses, computed once: inside loops an\n"
           "  // access adds only its stage and a constant.\n";
    for (const std::string& line : hoisted_lines_) out << "  " << line << "\n";
  }
  out << body_.str() << "}\n";
  return out.str();
}


std::string KernelEmitter::unique(const std::string& wanted) {
  std::string name = sanitize(wanted);
  // Avoid the names the kernel itself declares and C++ keywords a spec could collide with.
  static const std::set<std::string> reserved = {
      "tid", "lane", "warp", "shared_memory", "s", "k", "int", "float", "bool", "for", "if",
      "else", "do", "while", "const", "return", "char", "double", "long", "short", "unsigned",
      "signed", "void", "auto", "case", "switch", "default", "break", "continue", "new",
      "delete", "this", "true", "false", "class", "struct", "union", "enum", "template",
      "typename", "namespace", "using", "static", "extern", "register", "volatile",
      // locals and helpers of the emitted code
      "j", "q", "mi", "ni", "valid", "source", "sum", "pair", "lane_row", "lane_col", "i0", "i1", "i2",
      "i3", "i4", "i5", "i6", "i7", "swizzle", "floor_div", "floor_mod", "pack2", "unpack2", "int8x2_to_bf16x2",
      "int4x2_biased", "int4x2_to_bf16x2", "int4x2_to_f16x2",
      "shared_address", "mma_m16n8k16", "mma_m16n8k16_packed", "mma_m16n8k16_swapped", "ldmatrix_x4", "ldmatrix_x4_trans", "cp_async_16", "cp_async_16_line",
      "cp_async_commit", "cp_async_wait", "max", "min", "abs", "nautilus_device", "i", "tensor_map", "sigmoid_approx",
      "fence_register"};
  std::string candidate = name;
  for (int n = 1; reserved.count(candidate) || used_.count(candidate); ++n) {
    candidate = name + "_" + std::to_string(n);
  }
  used_.insert(candidate);
  return candidate;
}

std::string KernelEmitter::buffer_name(const scalar::Buffer& buffer) {
  auto found = buffer_names_.find(buffer.get());
  if (found != buffer_names_.end()) return found->second;
  return buffer_names_[buffer.get()] = unique(buffer->name);
}

std::string KernelEmitter::shared_name(const SharedAlloc& alloc) {
  auto found = shared_names_.find(&alloc);
  if (found != shared_names_.end()) return found->second;
  return shared_names_[&alloc] = unique(alloc.name);
}

const std::string& KernelEmitter::name_of(const Value& value) {
  auto found = names_.find(value.get());
  if (found == names_.end()) invalid("value %" + value->name + " is used before it is emitted");
  return found->second;
}

// Declares storage for `value` ("float x[32];" or "float x;") and returns its name.
std::string KernelEmitter::declare(const Value& value) {
  std::string name = unique(value->name);
  names_[value.get()] = name;
  line(std::string(c_type(value->type.dtype)) + " " + name + slots_suffix(value) + ";");
  return name;
}

std::string KernelEmitter::slots_suffix(const Value& value) {
  const int64_t slots = value->layout.slots();
  return slots == 1 ? "" : "[" + str(slots) + "]";
}

// Slot `slot` (an expression) of `value`.
std::string KernelEmitter::at(const Value& value, const std::string& slot) {
  return value->layout.slots() == 1 ? name_of(value) : name_of(value) + "[" + slot + "]";
}


void KernelEmitter::line(const std::string& text) {
  body_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << text << "\n";
}

// `#pragma unroll` + a for over the slots of `value`, calling `body` with the slot variable;
// a one-slot value gets the body once with slot "0".
void KernelEmitter::for_slots(int64_t slots, const std::function<void(const std::string&)>& body) {
  if (slots == 1) {
    body("0");
    return;
  }
  line("#pragma unroll");
  line("for (int s = 0; s < " + str(slots) + "; ++s) {");
  ++indent_;
  body("s");
  --indent_;
  line("}");
}


std::vector<std::string> KernelEmitter::grid_mapping(EmittedKernel* launch) {
  std::vector<std::string> lines;
  const auto& grid = kernel_.grid;
  if (kernel_.persistent) {
    // The tile loops declare the grid variables (tile_coordinates); the launcher clamps grid.x
    // to the CTAs the GPU holds at once.
    int64_t tiles = 1;
    for (const auto& axis : grid) {
      tiles *= axis.extent;
      names_[axis.var.get()] = unique(axis.var->name);
      ranges_[axis.var.get()] = {0, axis.extent - 1};
      grid_extents_[axis.var.get()] = axis.extent;
    }
    launch->grid = {tiles, 1, 1};
    launch->persistent = true;
    return lines;
  }
  bool direct = grid.size() <= 3;
  for (size_t i = 1; i < grid.size() && direct; ++i) direct = grid[i].extent <= 65535;
  if (kernel_.tile_group > 1 && grid.size() >= 2) return grouped_grid_mapping(launch, direct);
  if (direct) {
    static const char* dims[] = {"x", "y", "z"};
    for (size_t i = 0; i < grid.size(); ++i) {
      launch->grid[i] = grid[i].extent;
      const std::string name = unique(grid[i].var->name);
      names_[grid[i].var.get()] = name;
      ranges_[grid[i].var.get()] = {0, grid[i].extent - 1};
      grid_extents_[grid[i].var.get()] = grid[i].extent;
      lines.push_back("const int " + name + " = " +
                      launch_coordinate(i, std::string("blockIdx.") + dims[i]) +
                      ";  // 0.." + str(grid[i].extent - 1));
    }
    return lines;
  }
  // More than three axes (or large y/z extents): one linear x index, row-major over the axes.
  // gridDim.x stops at 2^31 - 1: a grid of more CTAs (the unscheduled reference's one CTA per
  // element of a 2 x 16 x 8192 x 8192 score tensor) takes its leading axes from blockIdx.y.
  int64_t total = 1;
  for (const auto& axis : grid) total *= axis.extent;
  constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
  size_t first_x_axis = 0;  // axes [first_x_axis, end) are linear in blockIdx.x
  int64_t x_total = total;
  while (x_total > kMaxGridX && first_x_axis + 1 < grid.size()) {
    x_total /= grid[first_x_axis].extent;
    ++first_x_axis;
  }
  const int64_t y_total = total / x_total;
  if (x_total > kMaxGridX || y_total > 65535) {
    throw EmitFailure{CodegenError::Kind::Unsupported,
                      "kernel " + kernel_.name + ": a grid of " + str(total) +
                          " CTAs exceeds what a launch can address (2^31 - 1 along x times "
                          "65535 along y); tile it"};
  }
  launch->grid = {x_total, y_total, 1};
  int64_t inner = 1;
  std::vector<std::string> reversed;
  for (size_t i = grid.size(); i-- > 0;) {
    if (i + 1 == first_x_axis) inner = 1;  // the axes before first_x_axis count blockIdx.y
    const bool along_x = i >= first_x_axis;
    const std::string name = unique(grid[i].var->name);
    names_[grid[i].var.get()] = name;
    ranges_[grid[i].var.get()] = {0, grid[i].extent - 1};
    grid_extents_[grid[i].var.get()] = grid[i].extent;
    reversed.push_back(
        "const int " + name + " = " +
        launch_coordinate(i, term_text(along_x ? "static_cast<int>(blockIdx.x)"
                                               : "static_cast<int>(blockIdx.y)",
                                       inner, grid[i].extent, 1, along_x ? x_total : y_total)) +
        ";  // 0.." + str(grid[i].extent - 1));
    inner *= grid[i].extent;
  }
  lines.assign(reversed.rbegin(), reversed.rend());
  return lines;
}

// The grid coordinate of axis `axis` from `in_order`, its coordinate in the launch order: as is,
// or counted from the axis's last tile down when the tile order reverses the axis
// (Kernel::reversed_axes; tile_order reverse=LOOP).
std::string KernelEmitter::launch_coordinate(size_t axis, const std::string& in_order) const {
  if (axis >= 32 || !(kernel_.reversed_axes & (uint32_t{1} << axis))) return in_order;
  return str(kernel_.grid[axis].extent - 1) + " - static_cast<int>(" + in_order + ")";
}

// The grid variables of a kernel with a grouped tile order (MA Kernel::tile_group): the CTA's
// launch index over axes 0 and 1 is mapped to the grid point the tile order gives it, by the
// formula of core/support/launch_order.h that the interpreters run. Axes 2 and up keep the
// plain order (blockIdx.z, or the rest of a linear index, axis 2 fastest).
std::vector<std::string> KernelEmitter::grouped_grid_mapping(EmittedKernel* launch, bool direct) {
  const auto& grid = kernel_.grid;
  const int64_t group = kernel_.tile_group;
  const int64_t x_extent = grid[0].extent, y_extent = grid[1].extent;
  const int64_t plane = x_extent * y_extent;
  std::vector<std::string> names;
  for (const matile::GridAxis& axis : grid) {
    const std::string name = unique(axis.var->name);
    names_[axis.var.get()] = name;
    ranges_[axis.var.get()] = {0, axis.extent - 1};
    grid_extents_[axis.var.get()] = axis.extent;
    names.push_back(name);
  }
  std::vector<std::string> lines;
  lines.push_back("// Tile order: bands of " + str(group) + " rows of " + names[1] +
                  ", each walked column by column (tile_order).");
  const std::string launched = unique("launched");
  std::string rest;  // the launch index over axes 2 and up
  if (direct) {
    for (size_t i = 0; i < grid.size(); ++i) launch->grid[i] = grid[i].extent;
    lines.push_back("const int " + launched + " = blockIdx.y * " + str(x_extent) +
                    " + blockIdx.x;  // launch index in the " + str(x_extent) + " x " +
                    str(y_extent) + " plane");
    if (grid.size() == 3) rest = "static_cast<int>(blockIdx.z)";
  } else {
    int64_t total = 1;
    for (const auto& axis : grid) total *= axis.extent;
    launch->grid = {total, 1, 1};
    lines.push_back("const int " + launched + " = blockIdx.x % " + str(plane) +
                    ";  // launch index in the " + str(x_extent) + " x " + str(y_extent) + " plane");
    rest = "static_cast<int>(blockIdx.x) / " + str(plane);
  }
  band_coordinates(launched, rest, grid.size() == 3 && direct, &lines);
  return lines;
}

// Declares the grid variables of a grouped tile order (the formula of core/support/launch_order.h)
// from `launched`, the launch index over axes 0 and 1, and `rest`, the index over the other axes
// (used as is for a single third axis when `rest_is_axis2`).
void KernelEmitter::band_coordinates(const std::string& launched, const std::string& rest,
                                     bool rest_is_axis2, std::vector<std::string>* out) {
  const auto& grid = kernel_.grid;
  const int64_t group = kernel_.tile_group;
  const int64_t x_extent = grid[0].extent, y_extent = grid[1].extent;
  const int64_t band_size = group * x_extent;
  std::vector<std::string>& lines = *out;
  std::vector<std::string> names;
  for (const matile::GridAxis& axis : grid) names.push_back(names_.at(axis.var.get()));
  const std::string band = unique("band");
  lines.push_back("const int " + band + " = " + launched + " / " + str(band_size) + ";");
  const std::string in_band = unique("in_band");
  lines.push_back("const int " + in_band + " = " + launched + " - " + band + " * " +
                  str(band_size) + ";");
  std::string rows = str(group);
  if (y_extent % group != 0) {
    // The last band holds the rows left over.
    rows = unique("band_rows");
    lines.push_back("const int " + rows + " = min(" + str(group) + ", " + str(y_extent) + " - " +
                    band + " * " + str(group) + ");");
  }
  lines.push_back("const int " + names[0] + " = " + launch_coordinate(0, in_band + " / " + rows) +
                  ";  // 0.." + str(x_extent - 1));
  lines.push_back("const int " + names[1] + " = " +
                  launch_coordinate(1, band + " * " + str(group) + " + " + in_band + " % " + rows) +
                  ";  // 0.." + str(y_extent - 1));
  int64_t inner = 1;
  for (size_t i = 2; i < grid.size(); ++i) {
    lines.push_back("const int " + names[i] + " = " +
                    launch_coordinate(i, rest_is_axis2 ? rest
                                                       : "(" + rest + " / " + str(inner) + ") % " +
                                                             str(grid[i].extent)) +
                    ";  // 0.." + str(grid[i].extent - 1));
    inner *= grid[i].extent;
  }
}

// The tile loop of a persistent kernel (MA For `tile_loop`): CTA blockIdx.x walks the tiles
// blockIdx.x, blockIdx.x + gridDim.x, ...; with the dynamic scheduler the tiles whose launch
// index the loop carries (`dynamic_tile`, the yield sets the next). Each iteration declares the
// grid variables of its tile in the kernel's tile order.
void KernelEmitter::tile_loop_header(const std::string& var, const std::string& dynamic_tile) {
  const auto& grid = kernel_.grid;
  int64_t tiles = 1;
  for (const auto& axis : grid) tiles *= axis.extent;
  std::string tile = dynamic_tile;
  if (dynamic_tile.empty()) {
    tile = unique("tile");
    line("for (int " + var + " = 0, " + tile + " = blockIdx.x; " + tile + " < " + str(tiles) + "; ++" +
         var + ", " + tile + " += gridDim.x) {");
  } else {
    line("for (int " + var + " = 0; " + tile + " < " + str(tiles) + "; ++" + var +
         ") {  // the next tile comes from the tile ring");
  }
  ++indent_;
  std::vector<std::string> lines;
  if (kernel_.tile_group > 1 && grid.size() >= 2) {
    const int64_t plane = grid[0].extent * grid[1].extent;
    const bool more = grid.size() > 2;
    const std::string launched = more ? unique("in_plane") : tile;
    if (more) lines.push_back("const int " + launched + " = " + tile + " % " + str(plane) + ";");
    band_coordinates(launched, more ? tile + " / " + str(plane) : std::string(), false, &lines);
  } else {
    int64_t inner = 1;
    for (size_t i = 0; i < grid.size(); ++i) {
      const auto& axis = grid[i];
      lines.push_back("const int " + names_.at(axis.var.get()) + " = " +
                      launch_coordinate(i, term_text(tile, inner, axis.extent, 1, tiles)) +
                      ";  // 0.." + str(axis.extent - 1));
      inner *= axis.extent;
    }
  }
  for (const std::string& text : lines) line(text);
}

// The coordinates of `tv` over `shape`, declaring its thread part on first use.
const KernelEmitter::LayoutInfo& KernelEmitter::layout_info(const layout::TVLayout& tv,
                                                            const std::vector<int64_t>& shape,
                                                            const std::string& what) {
  std::ostringstream key;
  key << layout::to_string(tv.layout.shape()) << ":" << layout::to_string(tv.layout.stride())
      << " over ";
  for (int64_t extent : shape) key << extent << ",";
  auto found = layouts_.find(key.str());
  if (found != layouts_.end()) return found->second;
  std::optional<SeparableCoords> coords = separable_coords(tv, shape);
  if (!coords) {
    unsupported(what + ": the tile coordinates of layout " + key.str() +
                " do not split into a thread part and a slot part");
  }
  if (coords->threads > kernel_.threads()) {
    invalid(what + ": layout " + key.str() + " has more threads than the CTA");
  }
  LayoutInfo info;
  info.coords = *coords;
  const std::string prefix = "l" + std::to_string(layouts_.size());
  layout_lines_.push_back("// " + key.str());
  for (size_t k = 0; k < shape.size(); ++k) {
    std::string expression;
    for (const Term& term : coords->thread_terms[k]) {
      expression += (expression.empty() ? "" : " + ") +
                    term_text("tid", term.position, term.extent, term.scale, coords->threads);
    }
    const std::string var = unique(prefix + "_" + axis_suffix(k, shape.size()));
    layout_lines_.push_back("const int " + var + " = " + (expression.empty() ? "0" : expression) + ";");
    info.thread_vars.push_back(var);
  }
  return layouts_.emplace(key.str(), info).first->second;
}

// Tile coordinate `axis` of slot `slot` (the unrolled slot variable) in `info`'s layout.
std::string KernelEmitter::coordinate(const LayoutInfo& info, size_t axis, const std::string& slot) {
  std::string expression = info.thread_vars[axis];
  for (const Term& term : info.coords.slot_terms[axis]) {
    expression += " + " + term_text(slot, term.position, term.extent, term.scale, info.coords.slots);
  }
  return info.coords.slot_terms[axis].empty() ? expression : "(" + expression + ")";
}

std::vector<std::string> KernelEmitter::coordinates(const Value& value, const std::string& slot,
                                                    const std::string& what) {
  const LayoutInfo& info = layout_info(value->layout.tv, value->type.shape, what);
  std::vector<std::string> coords;
  for (size_t k = 0; k < value->type.shape.size(); ++k) coords.push_back(coordinate(info, k, slot));
  return coords;
}

// The column-major element index of slot `slot` of `value` (axis 0 fastest, as TV layouts
// count), as an expression.
std::string KernelEmitter::element_index(const Value& value, const std::string& slot,
                                         const std::string& what) {
  const std::vector<std::string> c = coordinates(value, slot, what);
  std::string index;
  int64_t stride = 1;
  for (size_t k = 0; k < c.size(); ++k) {
    index += (index.empty() ? "" : " + ") +
             (stride == 1 ? c[k] : parenthesized(c[k]) + " * " + str(stride));
    stride *= value->type.shape[k];
  }
  return index.empty() ? "0" : index;
}


const SharedAlloc& KernelEmitter::alloc_of(const SharedRef& ref) {
  if (ref.alloc < 0 || ref.alloc >= static_cast<int>(kernel_.shared.size())) {
    invalid("shared reference to allocation " + std::to_string(ref.alloc) + " of " +
            std::to_string(kernel_.shared.size()));
  }
  return kernel_.shared[static_cast<size_t>(ref.alloc)];
}

// The element offset (from the allocation's base pointer) of tile coordinate `tile` of `ref`.
std::string KernelEmitter::shared_offset(const SharedRef& ref, const std::vector<std::string>& tile) {
  const SharedAlloc& alloc = alloc_of(ref);
  const size_t rank = alloc.shape.size();
  if (tile.size() != rank || ref.offsets.size() != rank) {
    invalid("shared reference to " + alloc.name + " has the wrong rank");
  }
  const layout::Layout& inner = alloc.layout.layout;
  if (inner.rank() != static_cast<int>(rank) && !(rank == 1 && inner.shape().is_leaf())) {
    unsupported("shared layout of " + alloc.name + " does not have one mode per axis");
  }
  std::string linear;
  for (size_t k = 0; k < rank; ++k) {
    const std::string coordinate = parenthesized(tile[ref.transposed ? rank - 1 - k : k]);
    const std::string term = ref.offsets[k] != 0 ? "(" + coordinate + " + " + str(ref.offsets[k]) + ")"
                                                 : coordinate;
    // A hierarchical mode (the 64-column panels of a TMA-written tile, (64,2):(1,8192)) is a
    // mixed radix: level j takes (c / (s_0 ... s_j-1)) % s_j, the last level no modulo.
    const layout::IntTuple& shape = rank == 1 ? inner.shape() : inner.shape().mode(static_cast<int>(k));
    const layout::IntTuple& stride = rank == 1 ? inner.stride() : inner.stride().mode(static_cast<int>(k));
    std::vector<std::pair<int64_t, int64_t>> levels;  // (extent, stride)
    if (shape.is_leaf()) {
      levels.emplace_back(shape.value(), stride.value());
    } else {
      for (int j = 0; j < shape.rank(); ++j) {
        if (!shape.mode(j).is_leaf()) unsupported("shared layout of " + alloc.name + " nests modes deeper than two levels");
        levels.emplace_back(shape.mode(j).value(), stride.mode(j).value());
      }
    }
    int64_t below = 1;
    for (size_t j = 0; j < levels.size(); ++j) {
      const auto [extent, level_stride] = levels[j];
      std::string digit = below == 1 ? term : "(" + term + " / " + str(below) + ")";
      if (j + 1 < levels.size()) digit = "(" + digit + " % " + str(extent) + ")";
      below *= extent;
      if (level_stride == 0) continue;
      linear += (linear.empty() ? "" : " + ") + digit + (level_stride != 1 ? " * " + str(level_stride) : "");
    }
  }
  if (linear.empty()) linear = "0";
  const layout::Swizzle& swizzle = alloc.layout.swizzle;
  if (!swizzle.is_identity()) {
    // The device formula is checked against the layout algebra once per swizzle, not per access.
    if (checked_swizzles_.insert({swizzle.bits, swizzle.base, swizzle.shift}).second) {
      for (int64_t offset = 0; offset < 1 << 14; ++offset) {
        if (device_swizzle(offset, swizzle) != swizzle(offset)) {
          throw EmitFailure{CodegenError::Kind::InvalidInput,
                            "internal: the device swizzle differs from the layout algebra"};
        }
      }
    }
    linear = "swizzle(" + linear + ", " + std::to_string(swizzle.bits) + ", " +
             std::to_string(swizzle.base) + ", " + std::to_string(swizzle.shift) + ")";
  }
  if (ref.stage) linear = name_of(ref.stage) + " * " + str(alloc.stage_elements) + " + " + linear;
  return linear;
}

// A variable computed once at the top of the kernel holding `expression` (deduplicated).
std::string KernelEmitter::hoisted(const std::string& type, const std::string& wanted,
                                   const std::string& expression) {
  const std::string key = type + " " + expression;
  auto found = hoisted_names_.find(key);
  if (found != hoisted_names_.end()) return found->second;
  const std::string name = unique(wanted);
  hoisted_lines_.push_back("const " + type + " " + name + " = " + expression + ";");
  return hoisted_names_[key] = name;
}

// The 32-bit shared-window address of allocation `alloc`'s first byte.
std::string KernelEmitter::shared_window_base(const SharedAlloc& alloc) {
  const std::string pointer = shared_name(alloc);
  return hoisted("unsigned", pointer + "_addr", "shared_address(" + pointer + ")");
}

// Element strides of the allocation's axes (no swizzle), or Unsupported.
std::vector<int64_t> KernelEmitter::shared_strides(const SharedAlloc& alloc) {
  const layout::Layout& inner = alloc.layout.layout;
  const size_t rank = alloc.shape.size();
  std::vector<int64_t> strides;
  if (rank == 1 && inner.shape().is_leaf()) {
    strides.push_back(inner.stride().value());
    return strides;
  }
  if (inner.rank() != static_cast<int>(rank)) {
    unsupported("shared layout of " + alloc.name + " does not have one mode per axis");
  }
  for (size_t k = 0; k < rank; ++k) {
    const layout::IntTuple& mode_shape = inner.shape().mode(static_cast<int>(k));
    if (!mode_shape.is_leaf() || mode_shape.value() != alloc.shape[k]) {
      unsupported("shared layout of " + alloc.name + " has a hierarchical mode");
    }
    strides.push_back(inner.stride().mode(static_cast<int>(k)).value());
  }
  return strides;
}

// An allocation whose axis is a hierarchical mode (the 64-column panels of a TMA-written tile:
// column c at (c % 64) + (c / 64) * panel) is addressed like a flat one when every thread's part
// of the coordinate stays inside one block of the mode's first level and the constant part only
// moves whole blocks: then the offset is the thread part times the first level's stride plus
// the mode's value at the constant. Checked for every thread with the layout algebra; false
// when the layout is flat (shared_strides applies) or the access does not split so.
bool KernelEmitter::panel_strides(const SharedAlloc& alloc, const SharedRef& ref, const SplitCoords& coords,
                                  std::vector<int64_t>* strides, std::vector<int64_t>* constants) {
  const layout::Layout& inner = alloc.layout.layout;
  const size_t rank = alloc.shape.size();
  if (rank < 2 || inner.rank() != static_cast<int>(rank)) return false;
  bool hierarchical = false;
  for (size_t k = 0; k < rank; ++k) hierarchical |= !inner.shape().mode(static_cast<int>(k)).is_leaf();
  if (!hierarchical) return false;
  strides->assign(rank, 0);
  constants->assign(rank, 0);
  for (size_t k = 0; k < rank; ++k) {
    const size_t axis = ref.transposed ? rank - 1 - k : k;
    const layout::Layout mode = inner.mode(static_cast<int>(k));
    const int64_t constant = coords.constants[axis] + ref.offsets[k];
    const int64_t stride = mode.size() > 1 ? mode(1) - mode(0) : 0;
    const int64_t at_constant = mode(constant);
    for (int64_t t = 0; t < coords.threads; ++t) {
      const int64_t part = coords.thread_value(t, axis);
      if (part + constant >= mode.size() || mode(part + constant) != at_constant + part * stride) return false;
    }
    (*strides)[k] = stride;
    (*constants)[k] = at_constant;
  }
  return true;
}

// The 32-bit shared address (an `unsigned` expression) of `coords` in `ref`. The swizzled
// per-thread part is hoisted to the top of the kernel; the access adds its stage and a
// constant. Swizzle<B,M,S> XORs row bits into column bits, so swizzle(base + c) is
// swizzle(base) + d only when c leaves the bits the XOR reads and writes alone (or adds
// whole swizzle periods), and swizzle(base) ^ d when c only sets bits base never has.
// Which form holds is checked here for every thread with the layout algebra; neither holding
// falls back to swizzling the whole offset in place.
std::string KernelEmitter::shared_address_of(const SharedRef& ref, const SplitCoords& coords) {
  const SharedAlloc& alloc = alloc_of(ref);
  const size_t rank = alloc.shape.size();
  if (coords.thread_exprs.size() != rank || coords.constants.size() != rank || ref.offsets.size() != rank) {
    invalid("shared reference to " + alloc.name + " has the wrong rank");
  }
  const int64_t bytes = dtype_bytes(alloc.dtype);
  // An int4 allocation is packed two elements a byte: byte offsets are element offsets halved
  // (the reads start at even elements).
  const bool packed = alloc.dtype == DType::I4;
  const auto byte_count = [&](int64_t elements) { return packed ? elements / 2 : elements * bytes; };
  auto tile_axis = [&](size_t k) { return ref.transposed ? rank - 1 - k : k; };
  std::vector<int64_t> strides;
  std::vector<int64_t> axis_constant(rank, 0);  // per allocation axis, in elements
  if (!panel_strides(alloc, ref, coords, &strides, &axis_constant)) {
    strides = shared_strides(alloc);
    for (size_t k = 0; k < rank; ++k) {
      axis_constant[k] = (coords.constants[tile_axis(k)] + ref.offsets[k]) * strides[k];
    }
  }
  std::string thread_linear;
  for (size_t k = 0; k < rank; ++k) {
    if (strides[k] == 0) continue;
    const std::string& part = coords.thread_exprs[tile_axis(k)];
    if (part == "0") continue;
    thread_linear += (thread_linear.empty() ? "" : " + ") +
                     (strides[k] == 1 ? part : parenthesized(part) + " * " + str(strides[k]));
  }
  if (thread_linear.empty()) thread_linear = "0";
  auto thread_base = [&](int64_t t) {
    int64_t sum = 0;
    for (size_t k = 0; k < rank; ++k) sum += coords.thread_value(t, tile_axis(k)) * strides[k];
    return sum;
  };
  const layout::Swizzle& swizzle = alloc.layout.swizzle;
  auto swizzled = [&](int64_t offset) { return swizzle.is_identity() ? offset : swizzle(offset); };
  std::vector<int64_t> bases(static_cast<size_t>(coords.threads));
  for (int64_t t = 0; t < coords.threads; ++t) bases[static_cast<size_t>(t)] = thread_base(t);
  const std::optional<SwizzleSplit> form = split_swizzled_offset(swizzled, bases, axis_constant);
  std::string address = shared_window_base(alloc);
  if (ref.stage) address += " + " + name_of(ref.stage) + " * " + str(byte_count(alloc.stage_elements)) + "u";
  if (form) {
    std::string lane_offset = thread_linear;
    if (!swizzle.is_identity()) {
      check_device_swizzle(swizzle);
      lane_offset = "swizzle(" + thread_linear + ", " + std::to_string(swizzle.bits) + ", " +
                    std::to_string(swizzle.base) + ", " + std::to_string(swizzle.shift) + ")";
    }
    const std::string lane = hoisted("unsigned", "lane_offset",
                                     packed ? "static_cast<unsigned>(" + lane_offset + ") / 2u"
                                            : parenthesized(lane_offset) + " * " + str(bytes) + "u");
    // The added constant goes last so that it can become the instruction's immediate offset.
    const int64_t x = form->xor_part, a = form->add_part;
    const std::string lane_part = x ? "(" + lane + " ^ " + str(byte_count(x)) + "u)" : lane;
    return "(" + address + " + " + lane_part + ")" + (a ? " + " + str(byte_count(a)) + "u" : "");
  }
  std::vector<std::string> tile;
  for (size_t a = 0; a < rank; ++a) {
    tile.push_back(coords.constants[a] ? parenthesized(coords.thread_exprs[a]) + " + " + str(coords.constants[a])
                                       : coords.thread_exprs[a]);
  }
  if (packed) {
    return shared_window_base(alloc) + " + static_cast<unsigned>(" + shared_offset(ref, tile) + ") / 2u";
  }
  return shared_window_base(alloc) + " + static_cast<unsigned>(" + shared_offset(ref, tile) + ") * " +
         str(bytes) + "u";
}

void KernelEmitter::check_device_swizzle(const layout::Swizzle& swizzle) {
  for (int64_t offset = 0; offset < 1 << 14; ++offset) {
    if (device_swizzle(offset, swizzle) != swizzle(offset)) {
      throw EmitFailure{CodegenError::Kind::InvalidInput,
                        "internal: the device swizzle differs from the layout algebra"};
    }
  }
}

void KernelEmitter::visit(const Op& op) {
  if (op.kind == OpKind::Yield) return;
  previous_loaded_bytes_ = std::move(loaded_bytes_);
  loaded_bytes_.clear();
  provenance_comment(op);
  op_comment(op);
  matile::Visitor::visit(op);
}

void KernelEmitter::provenance_comment(const Op& op) {
  const int statement = op.provenance.statement;
  if (statement < 0 || statement == last_statement_) return;
  last_statement_ = statement;
  std::string text = "// spec statement " + std::to_string(statement);
  if (options_.source != nullptr && op.provenance.range.valid &&
      op.provenance.range.begin <= options_.source->text().size()) {
    const LineColumn where = options_.source->line_column(op.provenance.range.begin);
    std::string quoted(options_.source->line_text(where.line));
    size_t first = quoted.find_first_not_of(" \t");
    quoted = first == std::string::npos ? "" : quoted.substr(first);
    std::string file = options_.source->path();
    size_t slash = file.find_last_of('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    text = "// spec " + file + ":" + std::to_string(where.line) + "  " + quoted;
  }
  body_ << "\n";
  line(text);
}

void KernelEmitter::op_comment(const Op& op) {
  std::string text = op.kind == OpKind::For ? matile::op_label(op) : matile::print_op(kernel_, op);
  const size_t newline = text.find('\n');
  if (newline != std::string::npos) text = text.substr(0, newline);
  const size_t first = text.find_first_not_of(' ');
  line("// " + (first == std::string::npos ? text : text.substr(first)));
}

void KernelEmitter::for_loop(const Op& op) {
  // The carried values live in the result variables; the block arguments are those same
  // variables inside the body, and the Yield assigns them at the end of each iteration.
  for (size_t i = 0; i < op.results.size(); ++i) {
    // A wgmma accumulator that dies here is carried in its own storage: copying registers a
    // wgmma may still be writing would make ptxas wait for it (C7517).
    if (wgmma_values_.count(op.operands[i].get()) && dies_at(op.operands[i], op) &&
        op.operands[i]->layout == op.results[i]->layout) {
      names_[op.results[i].get()] = name_of(op.operands[i]);
      names_[op.block_args[i].get()] = name_of(op.operands[i]);
      continue;
    }
    const std::string name = declare(op.results[i]);
    names_[op.block_args[i].get()] = name;
    for_slots(op.results[i]->layout.slots(), [&](const std::string& s) {
      line(at(op.results[i], s) + " = " + at(op.operands[i], s) + ";");
    });
  }
  const std::string var = unique(op.loop_var->name);
  names_[op.loop_var.get()] = var;
  ranges_[op.loop_var.get()] = {0, op.extent - 1};
  loop_of_var_[op.loop_var.get()] = &op;
  // A trip count that interval arithmetic bounds bounds the variable too: the unmasked part of
  // a loop split at its last full tile (`min(50, c_o_unmasked)`, a constant expression) then
  // proves its accesses in bounds, and they are emitted unchecked (and wide).
  if (op.trip_count) {
    if (std::optional<IndexRange> trips = range_of(op.trip_count)) {
      ranges_[op.loop_var.get()].hi = std::min(op.extent - 1, std::max<int64_t>(trips->hi - 1, 0));
    }
  }
  if (op.pipeline_stages > 0) {
    line("// software-pipelined: " + std::to_string(op.pipeline_stages) + " stages in flight");
  }
  // An early-stop trip count (iterations past it are proven to change nothing) ends the loop
  // there instead of running masked iterations.
  if (op.tile_loop) {
    if (kernel_.dynamic_tiles && op.block_args.empty()) {
      invalid(matile::op_label(op) + ": a dynamic tile loop carries its tile's launch index");
    }
    tile_loop_header(var, kernel_.dynamic_tiles ? name_of(op.block_args[0]) : std::string());
  } else {
    std::string bound = str(op.extent);
    if (op.trip_count) bound = "min(" + bound + ", " + name_of(op.trip_count) + ")";
    line("for (int " + var + " = 0; " + var + " < " + bound + "; ++" + var + ") {");
    ++indent_;
  }
  visit(*op.body);
  const Op& yield = *op.body->ops.back();
  if (yield.kind != OpKind::Yield || yield.operands.size() != op.results.size()) {
    invalid(matile::op_label(op) + ": body does not end with a matching yield");
  }
  // A yielded block argument would be overwritten before it is read: copy through temps.
  bool needs_temps = false;
  for (const Value& v : yield.operands) {
    for (const Value& arg : op.block_args) needs_temps = needs_temps || v == arg;
  }
  if (!op.results.empty()) line("// yield");
  std::vector<std::string> sources;
  for (size_t i = 0; i < yield.operands.size(); ++i) {
    const Value& v = yield.operands[i];
    if (needs_temps) {
      const std::string temp = unique(name_of(op.results[i]) + "_next");
      line(std::string(c_type(v->type.dtype)) + " " + temp + slots_suffix(v) + ";");
      for_slots(v->layout.slots(), [&](const std::string& s) {
        line((v->layout.slots() == 1 ? temp : temp + "[" + s + "]") + " = " + at(v, s) + ";");
      });
      sources.push_back(temp);
    } else {
      sources.push_back(name_of(v));
    }
  }
  for (size_t i = 0; i < yield.operands.size(); ++i) {
    const Value& v = yield.operands[i];
    if (v == op.block_args[i] || (!needs_temps && sources[i] == name_of(op.results[i]))) continue;
    for_slots(v->layout.slots(), [&](const std::string& s) {
      const std::string from = v->layout.slots() == 1 ? sources[i] : sources[i] + "[" + s + "]";
      line(at(op.results[i], s) + " = " + from + ";");
    });
  }
  --indent_;
  line("}");
}

}  // namespace detail

std::optional<SwizzleSplit> split_swizzled_offset(const std::function<int64_t(int64_t)>& swizzle,
                                                  const std::vector<int64_t>& bases,
                                                  const std::vector<int64_t>& axis_constants) {
  if (bases.empty() || axis_constants.size() > 16) return std::nullopt;
  int64_t total = 0;
  for (int64_t c : axis_constants) total += c;
  for (uint32_t mask = 0; mask < (1u << axis_constants.size()); ++mask) {
    int64_t xor_constant = 0;
    for (size_t k = 0; k < axis_constants.size(); ++k) {
      if (mask & (1u << k)) xor_constant += axis_constants[k];
    }
    const int64_t base0 = bases.front();
    SwizzleSplit split;
    split.xor_part = swizzle(base0 + xor_constant) ^ swizzle(base0);
    split.add_part = swizzle(base0 + total) - (swizzle(base0) ^ split.xor_part);
    bool holds = true;
    for (size_t i = 0; i < bases.size() && holds; ++i) {
      const int64_t base = bases[i];
      holds = base >= 0 && base + total >= 0 &&
              swizzle(base + total) == (swizzle(base) ^ split.xor_part) + split.add_part;
    }
    if (holds) return split;
  }
  return std::nullopt;
}

// The most bytes one register tile may hold per thread: eight times a thread's 255 registers.
// A tile past it spills whatever else the kernel does, and NVRTC takes minutes over the
// unrolled spill code (an fp8 GEMM whose whole 4096-long k extent was one tile: 8 KB of B per
// thread, 221 KB spilled, 4.4 minutes to compile). Refused before NVRTC sees it, so a tuner's
// build ends at once with the reason. (The lowering itself accepts such tiles: the search
// estimates untiled states on the way to tiled ones.)
constexpr int64_t kMostRegisterTileBytesPerThread = 8 * 255 * 4;

std::optional<std::string> register_tile_past_the_register_file(const matile::Kernel& kernel) {
  std::optional<std::string> problem;
  matile::for_each_op(*kernel.body, [&](const matile::Op& op) {
    for (const matile::Value& v : op.results) {
      // Index and predicate tiles are rematerialized where they are used, not held.
      if (problem || !v || v->layout.threads() == 0 || v->type.dtype == DType::Index ||
          v->type.dtype == DType::Bool) {
        continue;
      }
      const int64_t bytes = v->layout.slots() * dtype_bytes(v->type.dtype);
      if (bytes > kMostRegisterTileBytesPerThread) {
        problem = "kernel " + kernel.name + ": the register tile %" + v->name + " (" +
                  vrtile::type_text(v->type) + ") holds " + std::to_string(bytes) +
                  " bytes per thread, more than eight times a thread's 255 registers: it would "
                  "spill; tile its loops smaller";
      }
    }
  });
  return problem;
}

Result<EmittedModule> emit_cuda(const matile::Module& module, const EmitOptions& options) {
  const std::vector<std::string> problems = matile::verify(module);
  if (!problems.empty()) {
    return codegen_error(CodegenError::Kind::InvalidInput,
                         "MA tile module " + module.name + " does not verify: " + problems.front());
  }
  for (const matile::KernelPtr& kernel : module.kernels) {
    if (std::optional<std::string> problem = register_tile_past_the_register_file(*kernel)) {
      return codegen_error(CodegenError::Kind::Rejected, *problem);
    }
  }
  EmittedModule emitted;
  std::ostringstream source;
  source << "// CUDA C++ generated by Nautilus " << NAUTILUS_VERSION << " from the MA tile IR of `"
         << module.name << "` (" << module.arch << ").\n"
         << "// Regenerate with `nautilus compile`; every line comes from the emitter.\n\n"
         << cuda_prelude();
  bool hopper_module = false;
  for (const matile::KernelPtr& kernel : module.kernels) {
    hopper_module = hopper_module || !kernel->mbarriers.empty() || !kernel->tma_maps.empty();
    std::vector<const matile::Region*> pending = {kernel->body.get()};
    while (!pending.empty() && !hopper_module) {
      const matile::Region* region = pending.back();
      pending.pop_back();
      if (!region) continue;
      for (const matile::OpPtr& op : region->ops) {
        if (!op) continue;
        hopper_module = hopper_module || matile::is_hopper(op->kind);
        if (op->body) pending.push_back(op->body.get());
        for (const matile::WarpRole& role : op->roles) pending.push_back(role.body.get());
      }
    }
  }
  if (hopper_module) source << cuda_hopper_prelude();
  std::set<std::string> helpers;
  std::set<std::string> symbols;
  for (const matile::KernelPtr& kernel : module.kernels) {
    std::string symbol = detail::sanitize(kernel->name);
    if (symbol.rfind(detail::sanitize(module.name), 0) != 0) {
      symbol = detail::sanitize(module.name) + "_" + symbol;
    }
    for (int n = 1; symbols.count(symbol); ++n) {
      symbol = detail::sanitize(kernel->name) + "_" + std::to_string(n);
    }
    symbols.insert(symbol);
    EmittedKernel launch;
    try {
      detail::KernelEmitter emitter(*kernel, symbol, options);
      const std::string text = emitter.emit(&launch);
      for (const auto& [name, helper] : emitter.helpers()) {
        if (helpers.insert(name).second) source << "\n" << helper;
      }
      source << "\n" << text;
    } catch (const detail::EmitFailure& failure) {
      return codegen_error(failure.kind, "kernel " + kernel->name + ": " + failure.message);
    }
    emitted.kernels.push_back(launch);
  }
  emitted.source = source.str();
  return emitted;
}

}  // namespace nautilus::codegen
