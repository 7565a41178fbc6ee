#include "core/matile/printer.h"

#include <functional>
#include <vector>

#include "core/layout/printer.h"
#include "core/matile/layouts.h"
#include "core/matile/visitor.h"
#include "core/scalar/print_support.h"

namespace nautilus::matile {
namespace {

using scalar::compare_word;
using scalar::constant_text;
using scalar::dot_quote;
using scalar::int_list;
using scalar::iter_args_text;
using scalar::value_list;
using scalar::value_ref;

constexpr const char* kNull = scalar::kNullText;

// The register layouts of a kernel in order of first use.
class LayoutTable {
 public:
  explicit LayoutTable(const Kernel& kernel) {
    for (const GridAxis& axis : kernel.grid) add(axis.var);
    if (kernel.body) add_region(*kernel.body);
  }
  std::string ref(const Value& value) const {
    if (!value) return kNull;
    for (size_t i = 0; i < layouts_.size(); ++i) {
      if (layouts_[i] == value->layout) return "#L" + std::to_string(i);
    }
    return "#L?";
  }
  const std::vector<RegisterLayout>& layouts() const { return layouts_; }

 private:
  void add(const Value& value) {
    if (!value) return;
    for (const RegisterLayout& known : layouts_) {
      if (known == value->layout) return;
    }
    layouts_.push_back(value->layout);
  }
  void add_region(const Region& region) {
    for_each_op(region, [&](const Op& op) {
      add(op.loop_var);
      for (const Value& arg : op.block_args) add(arg);
      for (const Value& result : op.results) add(result);
    });
  }
  std::vector<RegisterLayout> layouts_;
};

std::string shared_name(const Kernel& kernel, int alloc) {
  if (alloc < 0 || alloc >= static_cast<int>(kernel.shared.size())) return kNull;
  return kernel.shared[static_cast<size_t>(alloc)].name;
}

std::string shared_ref_text(const Kernel& kernel, const SharedRef& ref) {
  std::string text = shared_name(kernel, ref.alloc);
  if (ref.stage) text += "[" + value_ref(ref.stage) + "]";
  text += int_list(ref.offsets);
  if (ref.transposed) text += "^T";
  return text;
}

std::string barrier_text(const Kernel& kernel, const BarrierRef& ref) {
  std::string text = ref.barrier >= 0 && ref.barrier < static_cast<int>(kernel.mbarriers.size())
                         ? kernel.mbarriers[static_cast<size_t>(ref.barrier)].name
                         : std::string(kNull);
  if (ref.index) text += "[" + value_ref(ref.index) + "]";
  return text;
}

std::string tma_map_name(const Kernel& kernel, int map) {
  if (map < 0 || map >= static_cast<int>(kernel.tma_maps.size())) return kNull;
  return kernel.tma_maps[static_cast<size_t>(map)].name;
}

std::string hex_text(int64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string text;
  do {
    text.insert(text.begin(), digits[value & 15]);
    value >>= 4;
  } while (value > 0);
  return "0x" + text;
}

std::string window_text(const Op& op) {
  const std::string buffer = op.buffer ? op.buffer->name : kNull;
  if (op.access.form == GlobalAccess::Form::Gather) {
    std::string text = buffer + "[" + value_list(gather_indices(op));
    if (op.access.has_mask) text += " mask " + value_ref(gather_mask(op));
    return text + "]";
  }
  std::string text = buffer + "[";
  const size_t axes = std::max(op.access.offsets.size(), op.access.tile_axes.size());
  for (size_t j = 0; j < axes; ++j) {
    if (j) text += ", ";
    const Value offset = j < op.access.offsets.size() ? op.access.offsets[j] : nullptr;
    const int tile_axis = j < op.access.tile_axes.size() ? op.access.tile_axes[j] : -1;
    if (offset && tile_axis >= 0) {
      text += value_ref(offset) + " + i" + std::to_string(tile_axis);
    } else if (offset) {
      text += value_ref(offset);
    } else if (tile_axis >= 0) {
      text += "i" + std::to_string(tile_axis);
    } else {
      text += "0";
    }
  }
  text += "] bounds " + int_list(op.access.bounds);
  if (op.access.realign_rows) text += " realigned rows";
  return text;
}

std::string op_body_text(const Kernel& kernel, const Op& op) {
  const std::string operands = value_list(op.operands);
  switch (op.kind) {
    case OpKind::Iota: return "iota " + std::to_string(op.extent);
    case OpKind::Full: {
      const DType dtype =
          op.results.empty() || !op.results[0] ? DType::F32 : op.results[0]->type.dtype;
      return "full " + constant_text(op.constant, dtype);
    }
    case OpKind::Unary: return std::string(scalar::unary_op_name(op.unary_op)) + " " + operands;
    case OpKind::Binary: return std::string(scalar::binary_op_name(op.binary_op)) + " " + operands;
    case OpKind::Compare: return std::string("cmp ") + compare_word(op.compare_op) + " " + operands;
    case OpKind::Logical: return std::string(scalar::logical_op_name(op.logical_op)) + " " + operands;
    case OpKind::Select: return "select " + operands;
    case OpKind::Cast: return "cast " + operands;
    case OpKind::Broadcast: return "broadcast " + operands + ", dims " + int_list(op.dims);
    case OpKind::Permute: return "permute " + operands + ", order " + int_list(op.dims);
    case OpKind::ExtractSlice:
      return "extract_slice " + operands + ", offsets " + int_list(op.offsets) +
             (op.slice_interleave > 1 ? ", k interleaved by " + std::to_string(op.slice_interleave) : "");
    case OpKind::ConvertLayout: {
      std::string text = "convert_layout " + operands;
      if (op.via_shared) text += " via shared " + shared_name(kernel, op.scratch);
      return text;
    }
    case OpKind::Reduce: {
      std::string text = std::string("reduce ") + vrtile::reduce_op_name(op.reduce_op) + " " +
                         operands + ", axis " + std::to_string(op.axis);
      if (!op.xor_masks.empty()) text += " shfl " + int_list(op.xor_masks);
      if (op.scratch >= 0) text += " via shared " + shared_name(kernel, op.scratch);
      return text;
    }
    case OpKind::Mma:
      return std::string(op.swapped ? "mma.m16n8k16.swapped " : "mma.m16n8k16 ") + operands + " warps(" +
             std::to_string(op.warps_m) + ", " + std::to_string(op.warps_n) + ")";
    case OpKind::FmaDot:
      return "fma_dot " + shared_ref_text(kernel, op.shared) + ", " +
             shared_ref_text(kernel, op.shared_b) + ", " + operands;
    case OpKind::GlobalLoad: {
      const DType dtype = op.buffer ? op.buffer->dtype : DType::F32;
      return "global_load " + window_text(op) + " other " + constant_text(op.constant, dtype);
    }
    case OpKind::GlobalStore: return "global_store " + window_text(op) + ", " + value_ref(stored_value(op));
    case OpKind::AsyncCopy: {
      std::string text = "cp.async " + shared_ref_text(kernel, op.shared) + " <- " +
                         window_text(op) + " copy " + layout::to_string(op.copy_layout) +
                         " vec " + std::to_string(op.vector_elements);
      if (op.predicate) text += " if " + value_ref(op.predicate);
      return text;
    }
    case OpKind::CommitGroup: return "cp.async.commit_group";
    case OpKind::WaitGroup: return "cp.async.wait_group " + std::to_string(op.extent);
    case OpKind::Barrier: return "bar.sync";
    case OpKind::SharedLoad:
      return std::string(shared_read_name(op.shared_read)) + " " + shared_ref_text(kernel, op.shared);
    case OpKind::SharedStore:
      return "st.shared " + shared_ref_text(kernel, op.shared) + ", " + operands;
    case OpKind::For: {
      std::string text = "for " + (op.loop_var ? op.loop_var->name : std::string(kNull)) +
                         (op.tile_loop ? " in tiles(" + std::to_string(op.extent) + ")"
                                       : " in 0.." + std::to_string(op.extent)) +
                         iter_args_text(op.block_args, op.operands);
      if (op.trip_count) text += " trips " + value_ref(op.trip_count);
      if (op.pipeline_stages > 0) text += " pipeline " + std::to_string(op.pipeline_stages);
      return text;
    }
    case OpKind::Yield: return op.operands.empty() ? "yield" : "yield " + operands;
    case OpKind::Roles: return "roles";
    case OpKind::MBarrierInit: return "mbarrier.init " + barrier_text(kernel, op.mbarrier);
    case OpKind::MBarrierArrive: {
      std::string text = op.tx_bytes > 0 ? "mbarrier.arrive.expect_tx " : "mbarrier.arrive ";
      text += barrier_text(kernel, op.mbarrier);
      if (op.tx_bytes > 0) text += " tx " + std::to_string(op.tx_bytes);
      if (op.arrive_per_warp) {
        text += " per warp";
      } else if (op.arrivals_per_op != 1) {
        text += " count " + std::to_string(op.arrivals_per_op);
      }
      return text;
    }
    case OpKind::MBarrierWait:
      return "mbarrier.wait " + barrier_text(kernel, op.mbarrier) + " parity " + operands;
    case OpKind::NamedBarrier: {
      std::string id = std::to_string(op.barrier_id);
      if (!op.warpgroup_ids.empty()) {  // "[1, 2] by warpgroup": warpgroup g takes entry g
        id = "[";
        for (size_t g = 0; g < op.warpgroup_ids.size(); ++g) {
          id += (g ? ", " : "") + (op.warpgroup_ids[g] == 0 ? std::string("-") : std::to_string(op.warpgroup_ids[g]));
        }
        id += "] by warpgroup";
      }
      return std::string(op.arrive_only ? "bar.arrive " : "bar.sync ") + id + ", " +
             std::to_string(op.barrier_threads);
    }
    case OpKind::FenceProxyAsync: return "fence.proxy.async";
    case OpKind::TmaLoad: {
      std::string text = "tma.load " + shared_ref_text(kernel, op.shared) + " <- " +
                         tma_map_name(kernel, op.tma_map) + "[" + operands + "] mbarrier " +
                         barrier_text(kernel, op.mbarrier);
      if (op.multicast_mask != 0) text += " multicast " + hex_text(op.multicast_mask);
      return text;
    }
    case OpKind::TmaStore:
      return "tma.store " + tma_map_name(kernel, op.tma_map) + "[" + operands + "] <- " +
             shared_ref_text(kernel, op.shared);
    case OpKind::BulkCommitGroup: return "cp.async.bulk.commit_group";
    case OpKind::BulkWaitGroup:
      return std::string("cp.async.bulk.wait_group") + (op.wait_read ? ".read " : " ") +
             std::to_string(op.extent);
    case OpKind::WgmmaFence: return "wgmma.fence";
    case OpKind::Wgmma: {
      const Value c = op.operands.empty() ? nullptr : op.operands.back();
      const int64_t n = c && c->type.rank() == 2 ? c->type.shape[1] : 0;
      const std::string a = op.operands.size() == 2 ? value_ref(op.operands[0])
                                                    : shared_ref_text(kernel, op.shared);
      // The instruction shape: k16, or k32 for 8-bit float operands (the allocations' dtype).
      const bool eight_bit = op.shared_b.alloc >= 0 && static_cast<size_t>(op.shared_b.alloc) < kernel.shared.size() &&
                             is_eight_bit_float(kernel.shared[static_cast<size_t>(op.shared_b.alloc)].dtype);
      return "wgmma.m64n" + std::to_string(n) + (eight_bit ? "k32 " : "k16 ") + a + ", " +
             shared_ref_text(kernel, op.shared_b) + ", " + value_ref(c) + " k " +
             std::to_string(op.extent);
    }
    case OpKind::WgmmaCommitGroup: return "wgmma.commit_group";
    case OpKind::WgmmaWaitGroup: return "wgmma.wait_group " + std::to_string(op.extent);
    case OpKind::StMatrix: return "stmatrix.x4 " + shared_ref_text(kernel, op.shared) + ", " + operands;
    case OpKind::CtaIndex: return "cta_index";
    case OpKind::TileFetch:
      return "tile.fetch " + shared_ref_text(kernel, op.shared) + " <- atomic_add(" +
             (op.buffer ? op.buffer->name : std::string(kNull)) + ", 1) + launched mbarrier " +
             barrier_text(kernel, op.mbarrier);
    case OpKind::TileRead: return "tile.read " + shared_ref_text(kernel, op.shared);
  }
  return "?";
}

std::string role_line(const WarpRole& role) {
  return "role " + role.name + " warpgroups " + std::to_string(role.warpgroups) + " registers " +
         std::to_string(role.max_registers);
}

std::string op_line(const Kernel& kernel, const LayoutTable& table, const Op& op) {
  std::string text;
  if (!op.results.empty()) text = value_list(op.results) + " = ";
  text += op_body_text(kernel, op);
  if (!op.results.empty() && op.kind != OpKind::For) {
    const Value& result = op.results[0];
    text += " : " + (result ? type_text(result->type) : std::string(kNull)) + " " + table.ref(result);
  }
  return text;
}

void print_region(const Kernel& kernel, const LayoutTable& table, const Region& region,
                  int indent, std::string* out) {
  const std::string pad(2 * static_cast<size_t>(indent), ' ');
  for (const OpPtr& op : region.ops) {
    if (!op) {
      *out += pad + kNull + "\n";
      continue;
    }
    *out += pad + op_line(kernel, table, *op);
    if (op->kind == OpKind::For) {
      *out += " {\n";
      if (op->body) print_region(kernel, table, *op->body, indent + 1, out);
      *out += pad + "}";
    }
    if (op->kind == OpKind::Roles) {
      *out += " {\n";
      for (const WarpRole& role : op->roles) {
        *out += pad + "  " + role_line(role) + " {\n";
        if (role.body) print_region(kernel, table, *role.body, indent + 2, out);
        *out += pad + "  }\n";
      }
      *out += pad + "}";
    }
    *out += "\n";
  }
}

std::string shared_line(const Kernel& kernel, const SharedAlloc& alloc) {
  const std::string alias =
      alloc.alias_of >= 0 && alloc.alias_of < static_cast<int>(kernel.shared.size())
          ? " aliases " + kernel.shared[static_cast<size_t>(alloc.alias_of)].name
          : "";
  return "shared " + alloc.name + " : " + type_text(TileType{alloc.dtype, alloc.shape}) + " " +
         layout::to_string(alloc.layout) + " stages " + std::to_string(alloc.stages) +
         " bytes [" + std::to_string(alloc.byte_offset) + ", " +
         std::to_string(alloc.byte_offset + alloc.byte_size) + ")" + alias +
         (alloc.purpose.empty() ? "" : "  // " + alloc.purpose);
}

std::string mbarrier_line(const MBarrierAlloc& barrier) {
  return "mbarrier " + barrier.name + "[" + std::to_string(barrier.count) + "] arrivals " +
         std::to_string(barrier.arrivals) +
         (barrier.purpose.empty() ? "" : "  // " + barrier.purpose);
}

std::string tma_map_line(const TmaMap& map) {
  return "tensor_map " + map.name + " : " + (map.buffer ? map.buffer->name : std::string(kNull)) +
         " box " + int_list(map.box) +
         (map.tile_axes.empty() ? "" : " tile axes " + int_list(std::vector<int64_t>(map.tile_axes.begin(), map.tile_axes.end()))) +
         " swizzle " + std::to_string(map.swizzle_bytes) +
         (map.shared_layout ? " lands " + layout::to_string(*map.shared_layout) : "");
}

}  // namespace

std::string print_op(const Kernel& kernel, const Op& op) {
  return op_line(kernel, LayoutTable(kernel), op);
}

std::string op_label(const Op& op) {
  switch (op.kind) {
    case OpKind::GlobalStore: return "global_store " + (op.buffer ? op.buffer->name : kNull);
    case OpKind::AsyncCopy: return "cp.async " + (op.buffer ? op.buffer->name : kNull);
    case OpKind::CommitGroup: return "cp.async.commit_group";
    case OpKind::WaitGroup: return "cp.async.wait_group";
    case OpKind::Barrier: return "bar.sync";
    case OpKind::SharedStore: return "st.shared";
    case OpKind::Yield: return "yield";
    case OpKind::For: return "for " + (op.loop_var ? op.loop_var->name : kNull);
    case OpKind::Roles: return "roles";
    case OpKind::MBarrierInit:
    case OpKind::MBarrierArrive:
    case OpKind::MBarrierWait:
    case OpKind::NamedBarrier:
    case OpKind::FenceProxyAsync:
    case OpKind::TmaLoad:
    case OpKind::TmaStore:
    case OpKind::BulkCommitGroup:
    case OpKind::BulkWaitGroup:
    case OpKind::WgmmaFence:
    case OpKind::WgmmaCommitGroup:
    case OpKind::WgmmaWaitGroup:
    case OpKind::StMatrix:
    case OpKind::TileFetch:
      return op_kind_name(op.kind);
    default:
      return std::string(op_kind_name(op.kind)) + " " +
             (op.results.empty() ? kNull : value_ref(op.results[0]));
  }
}

std::string print_kernel(const Kernel& kernel) {
  const LayoutTable table(kernel);
  std::string out = "kernel " + kernel.name + "(";
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    if (i) out += ", ";
    out += kernel.params[i] ? kernel.params[i]->name : kNull;
  }
  out += ") grid(";
  for (size_t i = 0; i < kernel.grid.size(); ++i) {
    if (i) out += ", ";
    out += (kernel.grid[i].var ? kernel.grid[i].var->name : kNull) + ": " +
           std::to_string(kernel.grid[i].extent);
    if (i < 32 && (kernel.reversed_axes & (uint32_t{1} << i))) out += " reversed";
  }
  out += ")";
  if (kernel.tile_group > 1) out += " group(" + std::to_string(kernel.tile_group) + ")";
  if (kernel.persistent) out += kernel.dynamic_tiles ? " persistent dynamic" : " persistent";
  out += " warps " + std::to_string(kernel.warps) + " shared_bytes " +
         std::to_string(kernel.shared_bytes) + " {\n";
  for (size_t i = 0; i < table.layouts().size(); ++i) {
    out += "  #L" + std::to_string(i) + " = " + layout_text(table.layouts()[i]) + "\n";
  }
  for (const SharedAlloc& alloc : kernel.shared) out += "  " + shared_line(kernel, alloc) + "\n";
  for (const MBarrierAlloc& barrier : kernel.mbarriers) out += "  " + mbarrier_line(barrier) + "\n";
  for (const TmaMap& map : kernel.tma_maps) out += "  " + tma_map_line(map) + "\n";
  for (const std::string& note : kernel.notes) out += "  // " + note + "\n";
  if (kernel.body) print_region(kernel, table, *kernel.body, 1, &out);
  return out + "}\n";
}

std::string print_module(const Module& module) {
  std::string out = "# matile IR: " + module.name + " (" + module.arch + ")\n";
  for (const Buffer& buffer : module.params) {
    if (!buffer) continue;
    out += "param " + buffer->name + " : " + scalar::buffer_type(*buffer) + " " +
           scalar::buffer_role_name(buffer->role) + "\n";
  }
  for (const Buffer& buffer : module.allocations) {
    if (!buffer) continue;
    out += "alloc " + buffer->name + " : " + scalar::buffer_type(*buffer) + "\n";
  }
  for (const KernelPtr& kernel : module.kernels) {
    out += "\n";
    if (kernel) out += print_kernel(*kernel);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// DOT

namespace {

class DotWriter : public Visitor {
 public:
  DotWriter(const Kernel& kernel, std::string* out)
      : kernel_(kernel), table_(kernel), out_(out) {}

  void write() {
    *out_ += "  subgraph " + dot_quote("cluster_" + kernel_.name) + " {\n";
    *out_ += "    label=" + dot_quote("kernel " + kernel_.name) + ";\n";
    for (const SharedAlloc& alloc : kernel_.shared) {
      *out_ += "    " + dot_quote(shared_node(alloc.name)) + " [shape=box3d, label=" +
               dot_quote(shared_line(kernel_, alloc)) + "];\n";
    }
    for (const GridAxis& axis : kernel_.grid) {
      if (axis.var) declare_plain(axis.var, "    ");
    }
    pad_ = "    ";
    visit(kernel_);
    *out_ += "  }\n";
    *out_ += edges_;
  }

 private:
  std::string node(const Value& value) const {
    return "op:" + kernel_.name + "/" + (value ? value->name : kNull);
  }
  std::string shared_node(const std::string& name) const {
    return "shared:" + kernel_.name + "/" + name;
  }
  void declare_plain(const Value& value, const std::string& pad) {
    *out_ += pad + dot_quote(node(value)) + " [shape=ellipse, label=" +
             dot_quote("%" + value->name) + "];\n";
  }
  void edge(const std::string& from, const std::string& to, bool dashed = false) {
    edges_ += "  " + dot_quote(from) + " -> " + dot_quote(to) + (dashed ? " [style=dashed]" : "") +
              ";\n";
  }

 protected:
  // A loop is a cluster of its body, indented one level deeper.
  void visit_For(const Op& op) override {
    const std::string pad = pad_;
    *out_ += pad + "subgraph " + dot_quote("cluster_" + kernel_.name + "/" + op_label(op)) +
             " {\n" + pad + "  label=" + dot_quote(op_body_text(kernel_, op)) + ";\n";
    if (op.loop_var) declare_plain(op.loop_var, pad + "  ");
    for (const Value& arg : op.block_args) {
      if (arg) declare_plain(arg, pad + "  ");
    }
    pad_ = pad + "  ";
    if (op.body) visit(*op.body);
    pad_ = pad;
    *out_ += pad + "}\n";
    for (size_t i = 0; i < op.results.size(); ++i) {
      if (!op.results[i]) continue;
      declare_plain(op.results[i], pad);
      if (i < op.operands.size() && i < op.block_args.size() && op.operands[i] &&
          op.block_args[i]) {
        edge(node(op.operands[i]), node(op.block_args[i]));
      }
    }
  }
  // Each role is a cluster of its body.
  void visit_Roles(const Op& op) override {
    const std::string pad = pad_;
    for (const WarpRole& role : op.roles) {
      *out_ += pad + "subgraph " + dot_quote("cluster_" + kernel_.name + "/role " + role.name) +
               " {\n" + pad + "  label=" + dot_quote(role_line(role)) + ";\n";
      pad_ = pad + "  ";
      if (role.body) visit(*role.body);
      pad_ = pad;
      *out_ += pad + "}\n";
    }
  }
  // A Yield is drawn as the loop-carried edges (CarriedEdges below), not as a node.
  void visit_Yield(const Op&) override {}
  void visit_op(const Op& op) override {
    const std::string& pad = pad_;
    std::string id;
    if (!op.results.empty() && op.results[0]) {
      id = node(op.results[0]);
    } else {
      id = "op:" + kernel_.name + "/" + op_kind_name(op.kind) + "#" + std::to_string(counter_++);
    }
    *out_ += pad + dot_quote(id) + " [shape=box, label=" +
             dot_quote(op_line(kernel_, table_, op)) + "];\n";
    for (const Value& used : used_values(op)) {
      if (used) edge(node(used), id);
    }
    if (op.buffer) {
      const std::string buffer = "buffer:" + op.buffer->name;
      if (op.kind == OpKind::GlobalStore) {
        edge(id, buffer);
      } else {
        edge(buffer, id);
      }
    }
    auto shared_edge = [&](const SharedRef& ref, bool writes) {
      if (ref.alloc < 0 || ref.alloc >= static_cast<int>(kernel_.shared.size())) return;
      const std::string s = shared_node(kernel_.shared[static_cast<size_t>(ref.alloc)].name);
      writes ? edge(id, s) : edge(s, id);
    };
    if (op.kind == OpKind::AsyncCopy || op.kind == OpKind::SharedStore ||
        op.kind == OpKind::TmaLoad || op.kind == OpKind::StMatrix || op.kind == OpKind::TileFetch) {
      shared_edge(op.shared, true);
    }
    if (op.kind == OpKind::SharedLoad || op.kind == OpKind::FmaDot || op.kind == OpKind::TmaStore ||
        op.kind == OpKind::TileRead ||
        (op.kind == OpKind::Wgmma && op.operands.size() == 1)) {
      shared_edge(op.shared, false);
    }
    if (op.kind == OpKind::FmaDot || op.kind == OpKind::Wgmma) shared_edge(op.shared_b, false);
    if (op.kind == OpKind::TmaLoad || op.kind == OpKind::TmaStore) {
      if (op.tma_map >= 0 && op.tma_map < static_cast<int>(kernel_.tma_maps.size())) {
        const Buffer& buffer = kernel_.tma_maps[static_cast<size_t>(op.tma_map)].buffer;
        if (buffer) {
          op.kind == OpKind::TmaStore ? edge(id, "buffer:" + buffer->name)
                                      : edge("buffer:" + buffer->name, id);
        }
      }
    }
  }

 private:
  const Kernel& kernel_;
  LayoutTable table_;
  std::string* out_;
  std::string edges_;
  std::string pad_;  // the indentation of the region being written
  int counter_ = 0;
};

// Loop-carried edges: each yielded value -> the block argument it feeds (dashed), an inner
// loop's edges before its enclosing loop's.
class CarriedEdges : public Visitor {
 public:
  CarriedEdges(const Kernel& kernel, std::string* out) : kernel_(kernel), out_(out) {}

 protected:
  void visit_For(const Op& op) override {
    if (!op.body) return;
    visit(*op.body);
    if (op.body->ops.empty() || !op.body->ops.back()) return;
    const Op& yield = *op.body->ops.back();
    for (size_t i = 0; i < yield.operands.size() && i < op.block_args.size(); ++i) {
      if (!yield.operands[i] || !op.block_args[i]) continue;
      *out_ += "  " + dot_quote("op:" + kernel_.name + "/" + yield.operands[i]->name) + " -> " +
               dot_quote("op:" + kernel_.name + "/" + op.block_args[i]->name) +
               " [style=dashed, constraint=false];\n";
      if (i < op.results.size() && op.results[i]) {
        *out_ += "  " + dot_quote("op:" + kernel_.name + "/" + yield.operands[i]->name) + " -> " +
                 dot_quote("op:" + kernel_.name + "/" + op.results[i]->name) + ";\n";
      }
    }
  }

 private:
  const Kernel& kernel_;
  std::string* out_;
};

}  // namespace

std::string module_to_dot(const Module& module) {
  std::string out = "digraph " + dot_quote(module.name) + " {\n  compound=true;\n";
  for (const Buffer& buffer : module.params) {
    if (buffer) out += scalar::dot_buffer_node(*buffer);
  }
  for (const Buffer& buffer : module.allocations) {
    if (buffer) out += scalar::dot_buffer_node(*buffer);
  }
  for (const KernelPtr& kernel : module.kernels) {
    if (!kernel) continue;
    DotWriter(*kernel, &out).write();
    CarriedEdges(*kernel, &out).visit(*kernel);
  }
  return out + "}\n";
}

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

nlohmann::ordered_json value_json(const Value& value, const LayoutTable& table) {
  nlohmann::ordered_json j;
  if (!value) return j;
  j["name"] = value->name;
  j["dtype"] = dtype_name(value->type.dtype);
  j["shape"] = scalar::shape_json(value->type.shape);
  j["layout"] = table.ref(value);
  return j;
}

nlohmann::ordered_json region_json(const Kernel& kernel, const LayoutTable& table,
                                   const Region& region);

// The fields of the Hopper kinds (ir.h notes, "Hopper").
void hopper_json(const Kernel& kernel, const LayoutTable& table, const Op& op,
                 nlohmann::ordered_json* j) {
  const bool reads_a_from_shared = op.kind == OpKind::Wgmma && op.operands.size() == 1;
  if (op.kind == OpKind::TmaLoad || op.kind == OpKind::TmaStore || op.kind == OpKind::StMatrix ||
      op.kind == OpKind::TileFetch || op.kind == OpKind::TileRead || reads_a_from_shared) {
    (*j)["shared"] = shared_ref_text(kernel, op.shared);
  }
  if (op.kind == OpKind::Wgmma) {
    (*j)["shared_b"] = shared_ref_text(kernel, op.shared_b);
    (*j)["form"] = reads_a_from_shared ? "ss" : "rs";
    (*j)["k"] = op.extent;
  }
  if (op.kind == OpKind::TmaLoad || op.kind == OpKind::TmaStore) {
    (*j)["tensor_map"] = tma_map_name(kernel, op.tma_map);
  }
  if (op.mbarrier.barrier >= 0) (*j)["mbarrier"] = barrier_text(kernel, op.mbarrier);
  if (op.kind == OpKind::TmaLoad) (*j)["multicast_mask"] = op.multicast_mask;
  if (op.kind == OpKind::TileFetch && op.buffer) (*j)["counter"] = op.buffer->name;
  if (op.kind == OpKind::MBarrierArrive) {
    (*j)["tx_bytes"] = op.tx_bytes;
    (*j)["arrivals"] = op.arrivals_per_op;
    if (op.arrive_per_warp) (*j)["per_warp"] = true;
  }
  if (op.kind == OpKind::NamedBarrier) {
    (*j)["id"] = op.barrier_id;
    (*j)["threads"] = op.barrier_threads;
    (*j)["arrive_only"] = op.arrive_only;
    if (!op.warpgroup_ids.empty()) (*j)["warpgroup_ids"] = op.warpgroup_ids;
  }
  if (op.kind == OpKind::BulkWaitGroup || op.kind == OpKind::WgmmaWaitGroup) {
    (*j)["pending"] = op.extent;
  }
  if (op.kind == OpKind::BulkWaitGroup) (*j)["read"] = op.wait_read;
  if (op.kind == OpKind::Roles) {
    nlohmann::ordered_json roles = nlohmann::ordered_json::array();
    for (const WarpRole& role : op.roles) {
      roles.push_back({{"name", role.name},
                       {"warpgroups", role.warpgroups},
                       {"max_registers", role.max_registers},
                       {"body", role.body ? region_json(kernel, table, *role.body)
                                          : nlohmann::ordered_json::array()}});
    }
    (*j)["roles"] = roles;
  }
}

nlohmann::ordered_json region_json(const Kernel& kernel, const LayoutTable& table,
                                   const Region& region) {
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const OpPtr& op : region.ops) {
    if (!op) {
      ops.push_back(nullptr);
      continue;
    }
    nlohmann::ordered_json j;
    j["kind"] = op_kind_name(op->kind);
    j["text"] = op_line(kernel, table, *op);
    j["instruction"] = instruction_name(*op, &kernel);
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    for (const Value& result : op->results) results.push_back(value_json(result, table));
    j["results"] = results;
    nlohmann::ordered_json operands = nlohmann::ordered_json::array();
    for (const Value& used : used_values(*op)) operands.push_back(used ? used->name : kNull);
    j["operands"] = operands;
    if (op->buffer) j["buffer"] = op->buffer->name;
    if (op->kind == OpKind::AsyncCopy || op->kind == OpKind::SharedLoad ||
        op->kind == OpKind::SharedStore || op->kind == OpKind::FmaDot) {
      j["shared"] = shared_name(kernel, op->shared.alloc);
    }
    if (op->kind == OpKind::AsyncCopy) {
      j["copy_layout"] = layout::to_json(op->copy_layout);
      j["vector_elements"] = op->vector_elements;
    }
    if (op->kind == OpKind::Mma) {
      j["warps_m"] = op->warps_m;
      j["warps_n"] = op->warps_n;
    }
    if (op->kind == OpKind::WaitGroup) j["pending"] = op->extent;
    if (is_hopper(op->kind)) hopper_json(kernel, table, *op, &j);
    if (op->kind == OpKind::For) {
      j["var"] = op->loop_var ? op->loop_var->name : kNull;
      j["extent"] = op->extent;
      j["pipeline_stages"] = op->pipeline_stages;
      if (op->trip_count) j["trip_count"] = op->trip_count->name;
      if (op->tile_loop) j["tile_loop"] = true;
      nlohmann::ordered_json args = nlohmann::ordered_json::array();
      for (const Value& arg : op->block_args) args.push_back(value_json(arg, table));
      j["block_args"] = args;
      j["body"] = op->body ? region_json(kernel, table, *op->body) : nlohmann::ordered_json::array();
    }
    j["provenance"] = scalar::provenance_json(op->provenance);
    ops.push_back(j);
  }
  return ops;
}

}  // namespace

nlohmann::ordered_json module_to_json(const Module& module) {
  nlohmann::ordered_json j;
  j["name"] = module.name;
  j["arch"] = module.arch;
  j["buffers"] = scalar::buffers_json(module.params, module.allocations);
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const KernelPtr& kernel : module.kernels) {
    if (!kernel) continue;
    const LayoutTable table(*kernel);
    nlohmann::ordered_json k;
    k["name"] = kernel->name;
    nlohmann::ordered_json params = nlohmann::ordered_json::array();
    for (const Buffer& buffer : kernel->params) params.push_back(buffer ? buffer->name : kNull);
    k["params"] = params;
    nlohmann::ordered_json grid = nlohmann::ordered_json::array();
    for (const GridAxis& axis : kernel->grid) {
      grid.push_back({{"var", axis.var ? axis.var->name : kNull}, {"extent", axis.extent}});
      const size_t i = grid.size() - 1;
      if (i < 32 && (kernel->reversed_axes & (uint32_t{1} << i))) grid.back()["reversed"] = true;
    }
    k["grid"] = grid;
    if (kernel->tile_group > 1) k["tile_group"] = kernel->tile_group;
    if (kernel->persistent) k["persistent"] = true;
    if (kernel->dynamic_tiles) k["tile_scheduler"] = "dynamic";
    k["warps"] = kernel->warps;
    k["shared_bytes"] = kernel->shared_bytes;
    nlohmann::ordered_json layouts = nlohmann::ordered_json::array();
    for (size_t i = 0; i < table.layouts().size(); ++i) {
      const RegisterLayout& l = table.layouts()[i];
      layouts.push_back({{"id", "#L" + std::to_string(i)},
                         {"kind", layout_kind_name(l.kind)},
                         {"text", layout_text(l)},
                         {"layout", layout::to_json(l.tv)}});
    }
    k["layouts"] = layouts;
    nlohmann::ordered_json shared = nlohmann::ordered_json::array();
    for (const SharedAlloc& alloc : kernel->shared) {
      shared.push_back({{"name", alloc.name},
                        {"dtype", dtype_name(alloc.dtype)},
                        {"shape", scalar::shape_json(alloc.shape)},
                        {"layout", layout::to_json(alloc.layout)},
                        {"stages", alloc.stages},
                        {"stage_elements", alloc.stage_elements},
                        {"byte_offset", alloc.byte_offset},
                        {"byte_size", alloc.byte_size},
                        {"purpose", alloc.purpose}});
      if (alloc.alias_of >= 0) shared.back()["alias_of"] = alloc.alias_of;
      if (alloc.released_in_iteration) shared.back()["released_in_iteration"] = true;
    }
    k["shared"] = shared;
    if (!kernel->mbarriers.empty()) {
      nlohmann::ordered_json barriers = nlohmann::ordered_json::array();
      for (const MBarrierAlloc& barrier : kernel->mbarriers) {
        barriers.push_back({{"name", barrier.name},
                            {"count", barrier.count},
                            {"arrivals", barrier.arrivals},
                            {"purpose", barrier.purpose}});
        if (barrier.early_release) barriers.back()["early_release"] = true;
      }
      k["mbarriers"] = barriers;
    }
    if (!kernel->tma_maps.empty()) {
      nlohmann::ordered_json maps = nlohmann::ordered_json::array();
      for (const TmaMap& map : kernel->tma_maps) {
        maps.push_back({{"name", map.name},
                        {"buffer", map.buffer ? map.buffer->name : kNull},
                        {"box", scalar::shape_json(map.box)},
                        {"swizzle_bytes", map.swizzle_bytes}});
        if (map.shared_layout) maps.back()["shared_layout"] = layout::to_string(*map.shared_layout);
        if (!map.tile_axes.empty()) maps.back()["tile_axes"] = map.tile_axes;
      }
      k["tensor_maps"] = maps;
    }
    if (!kernel->notes.empty()) k["notes"] = kernel->notes;
    k["body"] = kernel->body ? region_json(*kernel, table, *kernel->body)
                             : nlohmann::ordered_json::array();
    k["provenance"] = scalar::provenance_json(kernel->provenance);
    kernels.push_back(k);
  }
  j["kernels"] = kernels;
  return j;
}

}  // namespace nautilus::matile
