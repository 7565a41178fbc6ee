// Hopper's asynchronous machine as CUDA for sm_90a (inline PTX only; the wrappers are in
// cuda_prelude's Hopper part, the wgmma ones are printed per shape next to the kernels).
// Everything layout-dependent comes from core/layout: TMA boxes from plan_tma_tile() over the
// map's box layout, wgmma descriptors from wgmma_descriptor() of the shared allocation's layout
// and their block / k16 steps from wgmma_block_offsets(). Nothing here writes a bit pattern.
//
//   roles { role producer warpgroups 1       ->  const int warpgroup = threadIdx.x / 128;
//           registers 40 { ... } ... }           if (warpgroup < 1) {  // role producer
//                                                  setmaxnreg_dec<40>();
//                                                  const int tid = threadIdx.x - 0; ...
//   mbarrier.arrive.expect_tx full[%s]      ->  if (tid == 0) mbarrier_arrive_expect_tx(
//     tx 24576                                      full_addr + static_cast<unsigned>(s) * 8u, 24576u);
//   tma.load As[%s] <- tmA[%m0, %k0]        ->  if (tid == 0) tma_load_2d(As_addr + s * 16384u + 0u,
//     mbarrier full[%s]                             &tmA, full_addr + s * 8u, k0 + 0, m0 + 0);
//   (a map over K[b, h, n, d] with tile axes {2, 3}: tma_load_4d(..., d0 + 0, n0 + 0, h, b))
//   %acc_k = wgmma As[%s][0, 0], Bs[%s]^T,   ->  wgmma_m64n64k16_ss_00(acc0, a_desc + 0ull, b_desc + 0ull, 1);
//     %acc_i k 64                                ... one per k16 step (descriptor + block step >> 4)
//   (when %acc_i is `full 0.0` read only by wgmmas, it is left unwritten and the first k16
//    step passes accumulate 0: scale-d 0)
//   the same on fp8 rings (e4m3/e5m2 allocations, both K-major)
//                                           ->  wgmma_m64n256k32_e4m3_ss(acc0, a_desc + ..., b_desc + ..., 1);
//                                                ... one per k32 step: 32 bytes of k, as for 16-bit
//                                                types, and no transpose operands (8-bit forms have none)
//   wgmma.wait_group 1                      ->  wgmma_wait_group<1>(); fence_register(acc0[0]); ...
//
// Threads. A Roles op branches on the CTA's warpgroup index; inside a role `tid` is redeclared
// as the role's thread index (the IR's register layouts there have the role's thread count),
// and the role's layout coordinates and hoisted addresses are declared at the top of its branch.
// Ops done by "one elected thread" (mbarrier init, arrives, TMA copies and their bulk groups)
// run on the region's thread 0.
//
// Accumulators. A wgmma result takes its accumulator's storage when nothing reads the
// accumulator afterwards (and so does a For carrying it), so in-flight accumulator registers are
// never copied; a wgmma.wait_group that retires an accumulator's last wgmma fences its registers
// with empty asm statements ("+f"), so that the compiler keeps their reads after that wait --
// otherwise ptxas serializes the wgmmas (C7515/C7517), which the compile gate rejects. Fencing
// them anywhere else (between wgmmas) would make ptxas inject a warpgroup.arrive (C7519).
#include "core/codegen/kernel_emitter.h"
#include "core/codegen/package.h"
#include "core/layout/tma.h"
#include "core/layout/wgmma.h"
#include "core/matile/hopper.h"

namespace nautilus::codegen {

Result<layout::TmaTilePlan> plan_tma_map(const matile::TmaMap& map) {
  const auto unsupported_map = [&](const std::string& why) {
    return codegen_error(CodegenError::Kind::Unsupported, "tensor map " + map.name + ": " + why);
  };
  if (!map.buffer) return unsupported_map("has no buffer");
  const std::vector<int64_t>& shape = map.buffer->shape;
  const std::vector<int> tile_axes = matile::tma_tile_axes(map);
  const int rank = static_cast<int>(shape.size());
  if (map.box.size() != shape.size() || rank > 5 || tile_axes.size() != 2 || tile_axes[1] != rank - 1 ||
      tile_axes[0] < 0 || tile_axes[0] >= tile_axes[1]) {
    return unsupported_map("the box must span two buffer axes, the second the last, of a buffer of rank 2..5");
  }
  const DType dtype = map.buffer->dtype;
  auto box = matile::tma_tile_layout(map);
  if (!box) return unsupported_map(box.error().message);
  // Element strides of the row-major buffer.
  std::vector<int64_t> strides(shape.size(), 1);
  for (int axis = rank - 1; axis-- > 0;) strides[static_cast<size_t>(axis)] = strides[static_cast<size_t>(axis) + 1] * shape[static_cast<size_t>(axis) + 1];
  const size_t a0 = static_cast<size_t>(tile_axes[0]), a1 = static_cast<size_t>(tile_axes[1]);
  layout::GlobalTensor global;
  global.shape = {shape[a0], shape[a1]};
  global.strides = {strides[a0], 1};
  auto tile_plan = layout::plan_tma_tile(*box, dtype_bytes(dtype), global);
  if (!tile_plan) return unsupported_map(tile_plan.error().message);
  layout::TmaTilePlan plan = *tile_plan;
  for (int axis = rank - 1; axis >= 0; --axis) {
    if (axis == tile_axes[0] || axis == tile_axes[1]) continue;
    if (map.box[static_cast<size_t>(axis)] != 1) return unsupported_map("the box is not 1 outside its tile axes");
    plan.outer_dims.push_back(shape[static_cast<size_t>(axis)]);
    plan.outer_stride_bytes.push_back(strides[static_cast<size_t>(axis)] * dtype_bytes(dtype));
  }
  return plan;
}

TensorMap tensor_map_of_plan(const layout::TmaTilePlan& plan) {
  TensorMap map;
  map.dims = {plan.global_dims[0], plan.global_dims[1]};
  map.strides_bytes = {plan.global_stride_bytes};
  map.box = {plan.box_dims[0], plan.box_dims[1]};
  map.element_strides = {plan.element_strides[0], plan.element_strides[1]};
  for (size_t i = 0; i < plan.outer_dims.size(); ++i) {
    map.dims.push_back(plan.outer_dims[i]);
    map.strides_bytes.push_back(plan.outer_stride_bytes[i]);
    map.box.push_back(1);
    map.element_strides.push_back(1);
  }
  constexpr TensorMapSwizzle swizzles[] = {TensorMapSwizzle::None, TensorMapSwizzle::B32,
                                           TensorMapSwizzle::B64, TensorMapSwizzle::B128};
  map.swizzle = swizzles[std::clamp(plan.tensor_map_swizzle, 0, 3)];
  map.l2_promotion = TensorMapL2Promotion::B128;
  map.oob_fill = TensorMapOobFill::None;
  return map;
}

namespace detail {
namespace {

using matile::BarrierRef;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

std::string hex(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value << "ull";
  return out.str();
}

bool region_uses_hopper(const matile::Region& region) {
  for (const matile::OpPtr& op : region.ops) {
    if (!op) continue;
    if (matile::is_hopper(op->kind)) return true;
    if (op->body && region_uses_hopper(*op->body)) return true;
  }
  return false;
}

}  // namespace

bool KernelEmitter::uses_hopper() const {
  return !kernel_.mbarriers.empty() || !kernel_.tma_maps.empty() ||
         (kernel_.body && region_uses_hopper(*kernel_.body));
}

void KernelEmitter::analyze_uses(const matile::Region& region) {
  for (const matile::OpPtr& pointer : region.ops) {
    if (!pointer) continue;
    const Op& op = *pointer;
    const int64_t index = static_cast<int64_t>(op_index_.size());
    op_index_[&op] = index;
    ops_in_order_.push_back(&op);
    for (const Value& value : matile::used_values(op)) {
      if (value) last_use_[value.get()] = index;
      if (value) readers_[value.get()].push_back(&op);
    }
    for (const Value& value : op.results) def_region_[value.get()] = &region;
    for (const Value& value : op.results) defining_op_[value.get()] = &op;
    if (op.kind == OpKind::NamedBarrier) {
      used_barrier_ids_.insert(op.barrier_id);
      for (int id : op.warpgroup_ids) {
        if (id != 0) used_barrier_ids_.insert(id);
      }
    }
    if (op.kind == OpKind::Wgmma) {
      wgmma_values_.insert(op.results[0].get());
      wgmma_accumulator_inputs_.insert(op.operands.back().get());
    }
    if (op.kind == OpKind::WgmmaFence) {
      std::vector<const matile::ValueNode*>& register_a = fence_register_a_[&op];
      for (auto next = std::find(region.ops.begin(), region.ops.end(), pointer) + 1; next != region.ops.end(); ++next) {
        if (!*next || (*next)->kind == OpKind::WgmmaCommitGroup || (*next)->kind == OpKind::WgmmaFence) break;
        if ((*next)->kind != OpKind::Wgmma || (*next)->operands.size() != 2) continue;
        const matile::ValueNode* a = (*next)->operands[0].get();
        if (std::find(register_a.begin(), register_a.end(), a) == register_a.end()) register_a.push_back(a);
      }
    }
    if (op.kind == OpKind::Full && op.constant == 0.0 && op.results[0]->type.dtype == DType::F32 &&
        op.results[0]->layout.slots() > 1) {
      zero_tiles_.insert(op.results[0].get());
    }
    for (const Value& value : matile::used_values(op)) {
      const bool as_accumulator = op.kind == OpKind::Wgmma && value == op.operands.back() &&
                                  std::count(op.operands.begin(), op.operands.end(), value) == 1;
      if (value && !as_accumulator) read_otherwise_.insert(value.get());
    }
    if (op.body) {
      for (const Value& arg : op.block_args) def_region_[arg.get()] = op.body.get();
      analyze_uses(*op.body);
      // A value used inside a loop is read again by every iteration: it lives until the loop's end.
      const int64_t end = static_cast<int64_t>(op_index_.size()) - 1;
      for (auto& [value, last] : last_use_) {
        if (last > index && last <= end && def_region_.count(value) && def_region_[value] == &region) {
          last = std::max(last, end);
        }
      }
    }
    for (const matile::WarpRole& role : op.roles) {
      if (role.body) analyze_uses(*role.body);
    }
  }
}

// True when `op` is the last reader of `value` and both are in the region being printed, so
// `op`'s result may take over the value's storage.
bool KernelEmitter::dies_at(const Value& value, const Op& op) {
  if (regions_.empty() || !value) return false;
  auto region = def_region_.find(value.get());
  auto last = last_use_.find(value.get());
  auto index = op_index_.find(&op);
  return region != def_region_.end() && region->second == regions_.back() &&
         last != last_use_.end() && index != op_index_.end() && last->second == index->second;
}

void KernelEmitter::visit(const matile::Region& region) {
  regions_.push_back(&region);
  const size_t accumulators = accumulators_.size();
  matile::Visitor::visit(region);
  // Accumulators declared inside the region are out of scope after it; those that reuse an
  // outer one's storage stay, with the group of their last wgmma.
  std::vector<Accumulator> inner(accumulators_.begin() + static_cast<long>(accumulators), accumulators_.end());
  accumulators_.resize(accumulators);
  for (const Accumulator& acc : inner) {
    bool outer = false;
    for (size_t i = 0; i < accumulators; ++i) outer = outer || accumulators_[i].name == acc.name;
    if (outer) accumulators_.push_back(acc);
  }
  regions_.pop_back();
}

std::vector<std::string> KernelEmitter::hopper_frame_lines(EmittedKernel* launch) {
  std::vector<std::string> lines;
  int64_t offset = round_up(kernel_.shared_bytes, 8);
  for (const matile::MBarrierAlloc& bar : kernel_.mbarriers) {
    const std::string name = barrier_names_[&bar - kernel_.mbarriers.data()];
    lines.push_back("// mbarriers " + bar.name + "[" + str(bar.count) + "], " + str(bar.arrivals) +
                    " arrival" + (bar.arrivals == 1 ? "" : "s") + " a phase, bytes [" + str(offset) +
                    ", " + str(offset + 8 * bar.count) + ")" +
                    (bar.purpose.empty() ? "" : ": " + bar.purpose));
    lines.push_back("const unsigned " + name + " = shared_address(shared_memory + " + str(offset) + ");");
    offset += 8 * int64_t{bar.count};
  }
  launch->dynamic_shared_bytes = kernel_.mbarriers.empty() ? kernel_.shared_bytes : offset;
  // wgmma descriptors and TMA boxes are computed for a dynamic shared memory that starts at a
  // multiple of 1024 bytes (the 128-byte swizzle's repeat): check it instead of computing wrong.
  lines.push_back("if (shared_address(shared_memory) % 1024u != 0u) __trap();");
  return lines;
}

std::string KernelEmitter::smem_base() {
  return hoisted("unsigned", "smem_base", "shared_address(shared_memory)");
}

std::string KernelEmitter::barrier_address(const BarrierRef& ref) {
  if (ref.barrier < 0 || ref.barrier >= static_cast<int>(barrier_names_.size())) {
    invalid("mbarrier reference to array " + std::to_string(ref.barrier));
  }
  const std::string& base = barrier_names_[static_cast<size_t>(ref.barrier)];
  if (!ref.index) return base;
  return base + " + static_cast<unsigned>(" + name_of(ref.index) + ") * 8u";
}

std::string KernelEmitter::elected_thread_guard() { return "if (tid == 0) "; }

const matile::TmaMap& KernelEmitter::tma_map_of(const Op& op) {
  if (op.tma_map < 0 || op.tma_map >= static_cast<int>(kernel_.tma_maps.size())) {
    invalid(matile::op_label(op) + ": no tensor map " + std::to_string(op.tma_map));
  }
  return kernel_.tma_maps[static_cast<size_t>(op.tma_map)];
}

std::string KernelEmitter::tma_map_name(int map) { return tma_names_[static_cast<size_t>(map)]; }

void KernelEmitter::visit_Roles(const Op& op) {
  if (auto why = matile::roles_error(op, kernel_.warps)) invalid(matile::op_label(op) + ": " + *why);
  const std::string warpgroup = unique("warpgroup");
  line("{");
  ++indent_;
  line("const int " + warpgroup + " = threadIdx.x / 128;");
  // ptxas gives each thread of a __launch_bounds__(T, 1) kernel at most 64K / T registers
  // (rounded down to 8): budgets above that grow with setmaxnreg.inc, the others shrink.
  const int64_t entry = std::min<int64_t>(65536 / kernel_.threads() / 8 * 8, 256);
  int first = 0;
  const int64_t outer_threads = role_threads_;
  for (size_t r = 0; r < op.roles.size(); ++r) {
    const matile::WarpRole& role = op.roles[r];
    const int end = first + role.warpgroups;
    line(std::string(r == 0 ? "if" : "} else if") + " (" + warpgroup + " < " + std::to_string(end) +
         ") {  // role " + role.name + ": warpgroups [" + std::to_string(first) + ", " +
         std::to_string(end) + "), " + std::to_string(role.max_registers) + " registers");
    ++indent_;
    if (role.max_registers > entry) {
      line("setmaxnreg_inc<" + std::to_string(role.max_registers) + ">();");
    } else if (role.max_registers < entry) {
      line("setmaxnreg_dec<" + std::to_string(role.max_registers) + ">();");
    }
    // The role's own frame: its thread index, layout coordinates and hoisted addresses.
    std::ostringstream role_body;
    role_body.swap(body_);
    auto saved_layouts = std::move(layouts_);
    auto saved_layout_lines = std::move(layout_lines_);
    auto saved_hoisted_lines = std::move(hoisted_lines_);
    auto saved_hoisted_names = std::move(hoisted_names_);
    layouts_.clear();
    layout_lines_.clear();
    hoisted_lines_.clear();
    hoisted_names_.clear();
    const bool saved_uses_warp = uses_warp_;
    uses_warp_ = false;
    role_threads_ = int64_t{role.warpgroups} * matile::kWarpgroupThreads;
    const int outer_barrier = role_barrier_id_;
    role_barrier_id_ = 0;
    if (role.warpgroups > 1) {
      // A barrier of the role's own threads, for its elected arrives (visit_MBarrierArrive).
      for (int id = 15; id >= 1 && role_barrier_id_ == 0; --id) {
        if (!used_barrier_ids_.count(id)) role_barrier_id_ = id;
      }
      if (role_barrier_id_ != 0) used_barrier_ids_.insert(role_barrier_id_);
    }
    if (role.body) visit(*role.body);
    role_threads_ = outer_threads;
    role_barrier_id_ = outer_barrier;
    role_body.swap(body_);
    line("const int tid = threadIdx.x - " + std::to_string(first * matile::kWarpgroupThreads) + ";");
    if (uses_warp_) line("const int lane = tid % 32;  const int warp = tid / 32;");
    for (const std::string& text : layout_lines_) line(text);
    for (const std::string& text : hoisted_lines_) line(text);
    body_ << role_body.str();
    layouts_ = std::move(saved_layouts);
    layout_lines_ = std::move(saved_layout_lines);
    hoisted_lines_ = std::move(saved_hoisted_lines);
    hoisted_names_ = std::move(saved_hoisted_names);
    uses_warp_ = saved_uses_warp;
    --indent_;
    first = end;
  }
  line("}");
  --indent_;
  line("}");
}

void KernelEmitter::visit_MBarrierInit(const Op& op) {
  const matile::BarrierRef& ref = op.mbarrier;
  if (ref.barrier < 0 || ref.barrier >= static_cast<int>(kernel_.mbarriers.size())) {
    invalid(matile::op_label(op) + ": no mbarrier array " + std::to_string(ref.barrier));
  }
  const matile::MBarrierAlloc& bar = kernel_.mbarriers[static_cast<size_t>(ref.barrier)];
  line(elected_thread_guard() + "{");
  line("#pragma unroll");
  line("  for (int i = 0; i < " + str(bar.count) + "; ++i) mbarrier_init(" +
       barrier_names_[static_cast<size_t>(ref.barrier)] + " + i * 8u, " + str(bar.arrivals) + "u);");
  line("  fence_mbarrier_init();");
  line("}");
}

void KernelEmitter::visit_MBarrierArrive(const Op& op) {
  const std::string address = barrier_address(op.mbarrier);
  if (op.arrivals_per_op < 1) invalid(matile::op_label(op) + ": no arrivals");
  // Every warp arrives once for its lanes: __syncwarp orders each lane's work (its
  // wgmma.wait_group, its reads) before lane 0's arrive, at 1/32 of the shared-memory atomics.
  if (op.arrive_per_warp) {
    line("__syncwarp();");
    line("if ((threadIdx.x & 31) == 0) mbarrier_arrive(" + address + ");  // one lane per warp");
    return;
  }
  // Every thread arrives for itself: each releases only what it has done, so nobody waits for
  // the others first (the consumers of a TMA ring release a stage this way).
  if (op.arrivals_per_op == role_threads_ && op.tx_bytes == 0) {
    line("mbarrier_arrive(" + address + ");  // every thread");
    return;
  }
  // One elected thread arrives for the whole region, so every thread of it must have done what
  // the arrival releases: with several warpgroups, a wgmma.wait_group or a read in one warpgroup
  // says nothing about another's, so the region's threads meet first.
  if (role_threads_ > matile::kWarpgroupThreads) {
    if (role_threads_ == kernel_.threads()) {
      line("__syncthreads();  // every warpgroup is done before the elected arrive");
    } else if (role_barrier_id_ != 0) {
      line("named_barrier_sync(" + std::to_string(role_barrier_id_) + ", " + str(role_threads_) +
           ");  // the role's warpgroups are done before the elected arrive");
    } else {
      unsupported(matile::op_label(op) + ": no free named barrier for the role's elected arrive");
    }
  }
  const std::string first = op.tx_bytes > 0
                                ? "mbarrier_arrive_expect_tx(" + address + ", " + str(op.tx_bytes) + "u);"
                                : "mbarrier_arrive(" + address + ");";
  line(elected_thread_guard() + first);
  if (op.arrivals_per_op > 1) {
    line("if (tid > 0 && tid < " + str(op.arrivals_per_op) + ") mbarrier_arrive(" + address + ");");
  }
}

void KernelEmitter::visit_MBarrierWait(const Op& op) {
  line("mbarrier_wait(" + barrier_address(op.mbarrier) + ", " + name_of(op.operands.at(0)) + ");");
}

// A per-warpgroup barrier (the consumers' ping-pong) picks its id by the role's warpgroup,
// tid / 128, which is uniform over each warp as bar.sync needs; a warpgroup whose entry is 0
// skips it:
//   bar.sync [1, 2] by warpgroup, 256   ->  named_barrier_sync(tid / 128 == 0 ? 1 : 2, 256);
//   bar.arrive [-, 1] by warpgroup, 256 ->  if (tid / 128 == 1) named_barrier_arrive(1, 256);
void KernelEmitter::visit_NamedBarrier(const Op& op) {
  const std::string call = op.arrive_only ? "named_barrier_arrive(" : "named_barrier_sync(";
  if (op.warpgroup_ids.empty()) {
    line(call + std::to_string(op.barrier_id) + ", " + str(op.barrier_threads) + ");");
    return;
  }
  if (static_cast<int64_t>(op.warpgroup_ids.size()) * matile::kWarpgroupThreads != role_threads_) {
    invalid(matile::op_label(op) + ": one barrier id per warpgroup of the role");
  }
  std::string condition, id;
  for (size_t g = op.warpgroup_ids.size(); g-- > 0;) {
    const int barrier = op.warpgroup_ids[g];
    if (barrier == 0) continue;
    if (barrier < 1 || barrier > 15) invalid(matile::op_label(op) + ": named barrier ids are 1..15");
    if (role_barrier_id_ != 0 && barrier == role_barrier_id_) {
      unsupported(matile::op_label(op) + ": barrier " + std::to_string(barrier) +
                  " is the role's own barrier for its elected arrives");
    }
    const std::string is_g = "tid / 128 == " + std::to_string(g);
    condition = condition.empty() ? is_g : is_g + " || " + condition;
    id = id.empty() ? std::to_string(barrier) : "(" + is_g + " ? " + std::to_string(barrier) + " : " + id + ")";
  }
  const bool everyone = std::none_of(op.warpgroup_ids.begin(), op.warpgroup_ids.end(), [](int b) { return b == 0; });
  line(std::string(everyone ? "" : "if (" + condition + ") ") + call + id + ", " + str(op.barrier_threads) +
       ");  // per warpgroup");
}

void KernelEmitter::visit_FenceProxyAsync(const Op&) { line("fence_proxy_async();"); }

// One cp.async.bulk.tensor per box of the map's plan: box b of the tile starts at the op's
// coordinates plus the box's tile coordinate and lands (or is read) at the stage's start plus
// the box's shared offset.
void KernelEmitter::tma_copy(const Op& op, bool load) {
  const matile::TmaMap& map = tma_map_of(op);
  Result<layout::TmaTilePlan> plan = plan_tma_map(map);
  if (!plan) unsupported(matile::op_label(op) + ": " + plan.error().message);
  const SharedAlloc& alloc = alloc_of(op.shared);
  auto box = matile::tma_tile_layout(map);
  if (!box || alloc.layout != *box || alloc.shape != matile::tma_tile_box(map) ||
      alloc.dtype != map.buffer->dtype) {
    unsupported(matile::op_label(op) + ": allocation " + alloc.name +
                " is not laid out as the tensor map's box lands");
  }
  for (int64_t offset : op.shared.offsets) {
    if (offset != 0) unsupported(matile::op_label(op) + ": a TMA box fills its whole stage");
  }
  const int64_t stage_bytes = alloc.stage_elements * dtype_bytes(alloc.dtype);
  if (alloc.byte_offset % plan->shared_alignment_bytes != 0 ||
      (alloc.stages > 1 && stage_bytes % plan->shared_alignment_bytes != 0)) {
    unsupported(matile::op_label(op) + ": allocation " + alloc.name + " or its stages do not start at multiples of " +
                str(plan->shared_alignment_bytes) + " bytes");
  }
  if (op.operands.size() != map.box.size()) invalid(matile::op_label(op) + ": needs one coordinate per buffer axis");
  std::string start = shared_window_base(alloc);
  if (op.shared.stage) start += " + static_cast<unsigned>(" + name_of(op.shared.stage) + ") * " + str(stage_bytes) + "u";
  const std::string map_name = "&" + tma_map_name(op.tma_map);
  // The map's dimensions: the tile's inner mode, its other mode, then the buffer's other axes
  // from the innermost (plan_tma_map).
  const std::vector<int> tile_axes = matile::tma_tile_axes(map);
  const std::string inner = name_of(op.operands[static_cast<size_t>(tile_axes[static_cast<size_t>(plan->inner_mode)])]);
  const std::string outer = name_of(op.operands[static_cast<size_t>(tile_axes[static_cast<size_t>(1 - plan->inner_mode)])]);
  std::string rest;
  for (int axis = static_cast<int>(map.box.size()) - 1; axis >= 0; --axis) {
    if (axis == tile_axes[0] || axis == tile_axes[1]) continue;
    rest += ", " + name_of(op.operands[static_cast<size_t>(axis)]);
  }
  const std::string dims = std::to_string(2 + plan->outer_dims.size()) + "d";
  line("// " + str(static_cast<int64_t>(plan->boxes.size())) + " box" + (plan->boxes.size() == 1 ? "" : "es") +
       " of {" + str(plan->box_dims[0]) + ", " + str(plan->box_dims[1]) + "}, " + str(plan->box_bytes) +
       " bytes each (layout::plan_tma_tile)");
  line(elected_thread_guard() + "{");
  for (const layout::TmaBox& b : plan->boxes) {
    const std::string where = start + " + " + str(b.shared_offset_bytes) + "u";
    const std::string c0 = inner + " + " + str(b.map_coordinate[0]);
    const std::string c1 = outer + " + " + str(b.map_coordinate[1]);
    if (load) {
      line("  tma_load_" + dims + "(" + where + ", " + map_name + ", " + barrier_address(op.mbarrier) +
           ", " + c0 + ", " + c1 + rest + ");");
    } else {
      line("  tma_store_" + dims + "(" + map_name + ", " + where + ", " + c0 + ", " + c1 + rest + ");");
    }
  }
  line("}");
}

void KernelEmitter::visit_TmaLoad(const Op& op) {
  if (op.multicast_mask != 0) unsupported(matile::op_label(op) + ": multicast TMA loads are not emitted yet");
  tma_copy(op, true);
}

void KernelEmitter::visit_TmaStore(const Op& op) { tma_copy(op, false); }

// The dynamic tile scheduler (MA ir.h notes). The ring's slots are ints at the start of each
// stage of the one-element allocation.
std::string KernelEmitter::tile_ring_slot(const Op& op) {
  const SharedAlloc& alloc = alloc_of(op.shared);
  if (alloc.dtype != DType::Index || alloc.shape != std::vector<int64_t>{1}) {
    invalid(matile::op_label(op) + ": the tile ring is not a one-element index allocation");
  }
  std::string index = "0";
  if (op.shared.stage) index = name_of(op.shared.stage) + " * " + str(alloc.stage_elements);
  return shared_name(alloc) + "[" + index + "]";
}

void KernelEmitter::visit_CtaIndex(const Op& op) {
  const std::string name = unique(op.results[0]->name);
  names_[op.results[0].get()] = name;
  line("const int " + name + " = static_cast<int>(blockIdx.x);");
}

// The elected thread takes the next launch index from the workspace counter (zeroed before the
// launch, so the k-th fetch of the whole grid gets launched + k) and writes it into the ring; its
// following mbarrier arrive releases the write to the waiting threads.
void KernelEmitter::visit_TileFetch(const Op& op) {
  if (!op.buffer) invalid(matile::op_label(op) + ": no tile counter");
  line(elected_thread_guard() + "{");
  line("  " + tile_ring_slot(op) + " = static_cast<int>(atomicAdd(reinterpret_cast<unsigned*>(" +
       buffer_name(op.buffer) + "), 1u) + gridDim.x);");
  line("}");
}

void KernelEmitter::visit_TileRead(const Op& op) {
  const std::string name = unique(op.results[0]->name);
  names_[op.results[0].get()] = name;
  // volatile: the elected thread of another warp wrote it; the mbarrier wait before ordered it.
  line("const int " + name + " = *reinterpret_cast<volatile int*>(&" + tile_ring_slot(op) + ");");
}

// The bulk groups belong to the thread that issued the stores: it commits and waits.
void KernelEmitter::visit_BulkCommitGroup(const Op&) { line(elected_thread_guard() + "bulk_commit_group();"); }

void KernelEmitter::visit_BulkWaitGroup(const Op& op) {
  line(elected_thread_guard() + (op.wait_read ? "bulk_wait_group_read<" : "bulk_wait_group<") +
       str(op.extent) + ">();");
}

// Before wgmma.fence, the accumulators the coming wgmmas read are tied in place: otherwise the
// compiler may sink their ordinary initialization below the fence and ptxas has to inject a
// warpgroup.arrive of its own (C7519).
void KernelEmitter::visit_WgmmaFence(const Op& op) {
  const int64_t index = op_index_.at(&op);
  std::set<std::string> done;
  for (const matile::ValueNode* value : wgmma_accumulator_inputs_) {
    auto name = names_.find(value);
    auto region = def_region_.find(value);
    auto last = last_use_.find(value);
    if (name == names_.end() || region == def_region_.end() || last == last_use_.end() ||
        last->second < index || value->layout.slots() < 2 ||
        std::find(regions_.begin(), regions_.end(), region->second) == regions_.end() ||
        !done.insert(name->second).second) {
      continue;
    }
    line("#pragma unroll");
    line("for (int s = 0; s < " + str(value->layout.slots()) + "; ++s) fence_register(" + name->second + "[s]);");
  }
  auto register_a = fence_register_a_.find(&op);
  if (register_a != fence_register_a_.end()) {
    for (const matile::ValueNode* value : register_a->second) {
      auto name = names_.find(value);
      auto region = def_region_.find(value);
      // Only a value in scope here (a name of a region already closed is not).
      if (name == names_.end() || region == def_region_.end() || value->layout.slots() % 2 != 0 ||
          std::find(regions_.begin(), regions_.end(), region->second) == regions_.end()) {
        continue;
      }
      const std::string packed = unique(name->second + "_packed");
      const int64_t pairs = value->layout.slots() / 2;
      line("unsigned " + packed + "[" + str(pairs) + "];");
      line("#pragma unroll");
      line("for (int s = 0; s < " + str(pairs) + "; ++s) {");
      line("  " + packed + "[s] = pack2(" + name->second + "[2 * s], " + name->second + "[2 * s + 1]);");
      line("  fence_register(" + packed + "[s]);");
      line("}");
      packed_a_[value] = packed;
    }
  }
  line("wgmma_fence();");
}

void KernelEmitter::visit_WgmmaCommitGroup(const Op&) {
  packed_a_.clear();
  line("wgmma_commit_group();");
  ++committed_groups_;
}

// Fences the accumulators whose last wgmma is in a group that `wgmma.wait_group pending` retires
// (groups are counted in program text; a loop body's groups are the same every iteration).
void KernelEmitter::fence_accumulators(int64_t pending) {
  std::map<std::string, std::pair<int64_t, int64_t>> latest;  // name -> (slots, last group)
  for (const Accumulator& acc : accumulators_) latest[acc.name] = {acc.slots, acc.group};
  for (const auto& [name, entry] : latest) {
    if (entry.second >= committed_groups_ - pending) continue;
    line("#pragma unroll");
    line("for (int s = 0; s < " + str(entry.first) + "; ++s) fence_register(" + name + "[s]);");
  }
}

void KernelEmitter::visit_WgmmaWaitGroup(const Op& op) {
  line("wgmma_wait_group<" + str(op.extent) + ">();");
  fence_accumulators(op.extent);
}

// The descriptors of one shared operand: the operand tile (mn, k) -> element offset read off the
// allocation's layout (swapping its axes when the window is transposed the other way), the
// descriptor of the window's first block from wgmma_descriptor(), and the other blocks' (each
// executing warpgroup's 64 rows of A; each k16 step) moved by wgmma_block_offsets().
KernelEmitter::WgmmaOperand KernelEmitter::wgmma_operand(const Op& op, const SharedRef& ref, bool is_a,
                                                         int64_t mn_extent, int64_t k, int warpgroups) {
  const std::string what = matile::op_label(op) + ": operand " + (is_a ? "A" : "B");
  const SharedAlloc& alloc = alloc_of(ref);
  if (alloc.shape.size() != 2 || ref.offsets.size() != 2) unsupported(what + " is not a 2-D allocation");
  const int e = static_cast<int>(dtype_bytes(alloc.dtype));
  // The window is [M, K] for A and [K, N] for B; a transposed window reads the allocation's axes
  // swapped. The operand tile wants (mn, k).
  const bool mn_is_axis0 = is_a != ref.transposed;
  layout::ComposedLayout tile = alloc.layout;
  if (!mn_is_axis0) {
    const layout::Layout& l = alloc.layout.layout;
    if (l.rank() != 2) unsupported(what + ": the allocation's layout needs one mode per axis");
    tile.layout = layout::concatenate({l.mode(1), l.mode(0)});
  }
  const int64_t mn_offset = ref.offsets[mn_is_axis0 ? 0 : 1];
  const int64_t k_offset = ref.offsets[mn_is_axis0 ? 1 : 0];
  const int64_t k_extent = layout::wgmma_k_extent(e);
  if (mn_offset % mn_extent != 0 || k_offset % k_extent != 0) {
    unsupported(what + ": the window offsets are not whole wgmma blocks");
  }
  const int64_t mn_block = mn_offset / mn_extent, k_block = k_offset / k_extent;
  WgmmaOperand result;
  std::string reasons;
  for (layout::OperandMajor major : {layout::OperandMajor::K, layout::OperandMajor::MN}) {
    auto first =
        layout::wgmma_descriptor(tile, e, major, alloc.byte_offset, mn_extent, mn_block, k_block);
    if (!first) {
      reasons += std::string(reasons.empty() ? "" : "; ") + layout::operand_major_name(major) + ": " +
                 first.error().message;
      continue;
    }
    auto steps = layout::wgmma_block_offsets(tile, e, major, mn_extent);
    if (!steps) unsupported(what + ": " + steps.error().message);
    const auto step = [&](int64_t mb, int64_t kb) -> int64_t {
      auto at = steps->evaluate(layout::tuple_of(mb, kb));
      if (!at) unsupported(what + ": block (" + str(mb) + ", " + str(kb) + ") " + at.error().message);
      return *at;
    };
    const int64_t origin = step(mn_block, k_block);
    const uint64_t bits = first->encode();
    const int groups = is_a ? warpgroups : 1;
    for (int g = 0; g < groups; ++g) {
      for (int64_t kb = 0; kb < k / k_extent; ++kb) {
        const int64_t delta = step(mn_block + g, k_block + kb) - origin;
        // The address field holds bytes >> 4; every step is a multiple of 16 bytes.
        if (delta % 16 != 0) unsupported(what + ": a block step of " + str(delta) + " bytes");
        result.descriptors.push_back(bits + static_cast<uint64_t>(delta / 16));
      }
    }
    result.mn_major = major == layout::OperandMajor::MN;
    result.description = alloc.name + " " + layout::operand_major_name(major) + " " +
                         layout::to_string(*first);
    const int64_t stage_bytes = alloc.stage_elements * e;
    std::string runtime = smem_base();
    if (ref.stage) runtime += " + static_cast<unsigned>(" + name_of(ref.stage) + ") * " + str(stage_bytes) + "u";
    result.runtime_address = runtime;
    // A stage must keep the swizzle's alignment the descriptor assumed for stage 0.
    if (alloc.stages > 1 && first->swizzle != layout::SwizzleMode::None &&
        stage_bytes % layout::swizzle_repeat_bytes(first->swizzle) != 0) {
      unsupported(what + ": stages of " + str(stage_bytes) + " bytes break the swizzle's alignment");
    }
    return result;
  }
  unsupported(what + ": wgmma cannot read allocation " + alloc.name + " (" + reasons + ")");
}

void KernelEmitter::visit_Wgmma(const Op& op) {
  const bool rs = op.operands.size() == 2;
  const Value& c = op.operands.back();
  const Value& result = op.results[0];
  const int64_t M = c->type.shape[0], N = c->type.shape[1];
  const int warpgroups = static_cast<int>(role_threads_ / matile::kWarpgroupThreads);
  auto acc_layout = matile::wgmma_accumulator_layout(M, N, warpgroups);
  if (!acc_layout || c->layout != *acc_layout || result->layout != *acc_layout ||
      c->type.dtype != DType::F32) {
    invalid(matile::op_label(op) + ": the accumulator is not f32 in the wgmma accumulator layout of " +
            std::to_string(warpgroups) + " warpgroups");
  }
  const SharedAlloc& b_alloc = alloc_of(op.shared_b);
  // 16-bit operands of one dtype, k16 per instruction, either major-ness; or 8-bit floats (e4m3,
  // e5m2 in any pairing) from shared memory, k32 per instruction, K-major only: that form of the
  // instruction has no transpose operands.
  const bool eight_bit = is_eight_bit_float(b_alloc.dtype);
  if (b_alloc.dtype != DType::BF16 && b_alloc.dtype != DType::F16 && !eight_bit) {
    unsupported(matile::op_label(op) + ": wgmma operands must be bf16, f16 or fp8 (e4m3, e5m2)");
  }
  if (eight_bit && rs) unsupported(matile::op_label(op) + ": 8-bit wgmma reads A from shared memory, not registers");
  const std::string b_type = matile::wgmma_operand_type(b_alloc.dtype);
  std::string a_type = b_type;
  const int64_t k_extent = layout::wgmma_k_extent(static_cast<int>(dtype_bytes(b_alloc.dtype)));
  const int64_t k_steps = op.extent / k_extent;
  if (op.extent % k_extent != 0 || k_steps < 1) {
    invalid(matile::op_label(op) + ": K must be a multiple of " + str(k_extent));
  }
  const WgmmaOperand b = wgmma_operand(op, op.shared_b, false, N, op.extent, warpgroups);
  WgmmaOperand a;
  if (rs) {
    const Value& a_regs = op.operands[0];
    auto a_layout = matile::wgmma_a_layout(M, op.extent, warpgroups);
    if (!a_layout || a_regs->layout != *a_layout || a_regs->type.dtype != b_alloc.dtype) {
      invalid(matile::op_label(op) + ": register A is not in the wgmma A fragment layout");
    }
  } else {
    const DType a_dtype = alloc_of(op.shared).dtype;
    if (eight_bit ? !is_eight_bit_float(a_dtype) : a_dtype != b_alloc.dtype) {
      invalid(matile::op_label(op) + ": A and B dtypes differ");
    }
    a_type = matile::wgmma_operand_type(a_dtype);
    a = wgmma_operand(op, op.shared, true, 64, op.extent, warpgroups);
  }
  if (eight_bit && (a.mn_major || b.mn_major)) {
    unsupported(matile::op_label(op) + ": operand " + (a.mn_major ? "A" : "B") +
                " is MN-major; wgmma reads 8-bit operands only K-major");
  }
  // The wrapper of this instruction shape: d += A * B for one k step (32 bytes of k).
  const int64_t regs = N / 2;
  const std::string type = a_type == b_type ? a_type : a_type + "_" + b_type;
  // wgmma_m64n128k16_bf16_ss_01 (the transposes of A and B), wgmma_m64n128k32_e4m3_e5m2_ss.
  const std::string helper =
      "wgmma_m64n" + str(N) + "k" + str(k_extent) + "_" + type + (rs ? "_rs" : "_ss") +
      (eight_bit ? "" : "_" + (rs ? "" : std::string(a.mn_major ? "1" : "0")) + (b.mn_major ? "1" : "0"));
  if (!helpers_.count(helper)) {
    std::ostringstream h;
    std::string outputs, list;
    for (int64_t i = 0; i < regs; ++i) {
      list += (i ? ", %" : "%") + str(i);
      outputs += std::string(i ? ", " : "") + (i % 8 == 0 && i ? "\n        " : "") + "\"+f\"(d[" + str(i) + "])";
    }
    const std::string instruction = "wgmma.mma_async.sync.aligned.m64n" + str(N) + "k" + str(k_extent) +
                                    ".f32." + a_type + "." + b_type;
    // The immediate operands after scale-d: scale-a and scale-b (1: no negation), then, for
    // 16-bit types only, the transposes of A and B.
    const std::string transposes =
        eight_bit ? std::string() : ", " + std::string(a.mn_major ? "1" : "0") + ", " + (b.mn_major ? "1" : "0");
    h << "// " << instruction << (rs ? " (A from registers)" : " (A and B from shared memory)")
      << ": d = A * B + (accumulate ? d : 0) (scale-d).\n";
    if (rs) {
      h << "__device__ __forceinline__ void " << helper
        << "(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b, int accumulate) {\n"
        << "  asm volatile(\n      \"{\\n .reg .pred p;\\n setp.ne.b32 p, %" << regs + 5 << ", 0;\\n \"\n"
        << "      \"" << instruction << " {" << list << "}, {%" << regs << ", %" << regs + 1 << ", %"
        << regs + 2 << ", %" << regs + 3 << "}, %" << regs + 4 << ", p, 1, 1, " << (b.mn_major ? 1 : 0)
        << ";\\n}\\n\"\n      : " << outputs
        << "\n      : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"l\"(b), \"r\"(accumulate));\n}\n";
    } else {
      h << "__device__ __forceinline__ void " << helper
        << "(float* d, unsigned long long a, unsigned long long b, int accumulate) {\n"
        << "  asm volatile(\n      \"{\\n .reg .pred p;\\n setp.ne.b32 p, %" << regs + 2 << ", 0;\\n \"\n"
        << "      \"" << instruction << " {" << list << "}, %" << regs << ", %" << regs + 1 << ", p, 1, 1"
        << transposes << ";\\n}\\n\"\n      : " << outputs
        << "\n      : \"l\"(a), \"l\"(b), \"r\"(accumulate));\n}\n";
    }
    helpers_[helper] = h.str();
  }
  // The result updates the accumulator in place when the accumulator dies here; otherwise it
  // starts as a copy (made before any wgmma writes it).
  // A zero accumulator is never written: the first k step ignores it (scale-d 0).
  const bool from_zero = wgmma_zero_accumulators_.count(c.get()) > 0;
  std::string d;
  if (dies_at(c, op)) {
    d = name_of(c);
    names_[result.get()] = d;
  } else {
    d = declare(result);
    if (!from_zero) {
      for_slots(result->layout.slots(), [&](const std::string& s) { line(at(result, s) + " = " + at(c, s) + ";"); });
    }
  }
  accumulators_.push_back({d, result->layout.slots(), committed_groups_});
  if (!rs) line("// A: " + a.description);
  line("// B: " + b.description);
  line("{");
  ++indent_;
  const std::string b_desc = unique("b_desc");
  line("const unsigned long long " + b_desc + " = static_cast<unsigned long long>((" + b.runtime_address + ") >> 4);");
  std::string a_desc;
  if (!rs) {
    a_desc = unique("a_desc");
    line("const unsigned long long " + a_desc + " = static_cast<unsigned long long>((" + a.runtime_address + ") >> 4);");
  }
  for (int64_t kb = 0; kb < k_steps; ++kb) {
    const std::string bd = b_desc + " + " + hex(b.descriptors[static_cast<size_t>(kb)]);
    const std::string accumulate = from_zero && kb == 0 ? ", 0" : ", 1";
    if (rs) {
      const std::string& an = name_of(op.operands[0]);
      auto packed = packed_a_.find(op.operands[0].get());
      std::string args;
      for (int r = 0; r < 4; ++r) {
        const int64_t v = 8 * kb + 2 * r;
        args += packed != packed_a_.end() ? packed->second + "[" + str(v / 2) + "], "
                                          : "pack2(" + an + "[" + str(v) + "], " + an + "[" + str(v + 1) + "]), ";
      }
      line(helper + "(" + d + ", " + args + bd + accumulate + ");");
    } else if (warpgroups == 1) {
      line(helper + "(" + d + ", " + a_desc + " + " + hex(a.descriptors[static_cast<size_t>(kb)]) + ", " + bd +
           accumulate + ");");
    } else {
      // Each warpgroup reads its own 64 rows of A: the descriptor of its block.
      std::string pick;
      for (int g = warpgroups - 1; g >= 0; --g) {
        const std::string value = hex(a.descriptors[static_cast<size_t>(g * k_steps + kb)]);
        pick = pick.empty() ? value : "(tid / 128 == " + std::to_string(g) + " ? " + value + " : " + pick + ")";
      }
      line(helper + "(" + d + ", " + a_desc + " + " + pick + ", " + bd + accumulate + ");");
    }
  }
  --indent_;
  line("}");
}

// stmatrix.x4 per 16 columns: the four 8x8 matrices (rows 0-7 / 8-15 of the warp's 16 rows,
// columns +0 / +8) take the accumulator slots 8q + {0,1}, {2,3}, {4,5}, {6,7}; lane l gives the
// row address of matrix l / 8, row l % 8.
void KernelEmitter::visit_StMatrix(const Op& op) {
  const Value& value = op.operands.at(0);
  const int64_t M = value->type.shape[0], N = value->type.shape[1];
  const int warpgroups = static_cast<int>(role_threads_ / matile::kWarpgroupThreads);
  auto layout = matile::wgmma_accumulator_layout(M, N, warpgroups);
  if (!layout || value->layout != *layout || !is_narrow_float(value->type.dtype) || N % 16 != 0) {
    invalid(matile::op_label(op) + ": stmatrix needs a 16-bit tile in the wgmma accumulator layout");
  }
  if (op.shared.transposed) unsupported(matile::op_label(op) + ": transposed stmatrix windows");
  SplitCoords coords;
  coords.threads = role_threads_;
  coords.thread_exprs = {"16 * (tid / 32) + tid % 8 + 8 * ((tid / 8) % 2)", "8 * ((tid / 16) % 2)"};
  coords.thread_value = [](int64_t t, size_t axis) -> int64_t {
    return axis == 0 ? 16 * (t / 32) + t % 8 + 8 * ((t / 8) % 2) : 8 * ((t / 16) % 2);
  };
  const std::string& v = name_of(value);
  for (int64_t q = 0; q < N / 16; ++q) {
    coords.constants = {0, 16 * q};
    std::string regs;
    for (int r = 0; r < 4; ++r) {
      const int64_t slot = 8 * q + 2 * r;
      regs += ", pack2(" + v + "[" + str(slot) + "], " + v + "[" + str(slot + 1) + "])";
    }
    line("stmatrix_x4(" + shared_address_of(op.shared, coords) + regs + ");");
  }
}

}  // namespace detail
}  // namespace nautilus::codegen
