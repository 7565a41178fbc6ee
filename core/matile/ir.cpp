#include "core/matile/ir.h"

#include <algorithm>
#include <utility>

#include "core/matile/layouts.h"
#include "core/matile/visitor.h"

namespace nautilus::matile {
namespace {

TileType type_of(const Value& value) { return value ? value->type : TileType{}; }
RegisterLayout layout_of(const Value& value) { return value ? value->layout : RegisterLayout{}; }

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

const char* layout_kind_name(LayoutKind kind) {
  switch (kind) {
    case LayoutKind::Uniform: return "uniform";
    case LayoutKind::Blocked: return "blocked";
    case LayoutKind::MmaA: return "mma_a";
    case LayoutKind::MmaB: return "mma_b";
    case LayoutKind::MmaC: return "mma_c";
    case LayoutKind::MmaCSwapped: return "mma_c_swapped";
    case LayoutKind::Derived: return "derived";
  }
  return "?";
}

const char* shared_read_name(SharedRead read) {
  switch (read) {
    case SharedRead::Scalar: return "ld.shared";
    case SharedRead::LdMatrixX4: return "ldmatrix.x4";
    case SharedRead::LdMatrixX4Trans: return "ldmatrix.x4.trans";
  }
  return "?";
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Iota: return "iota";
    case OpKind::Full: return "full";
    case OpKind::Unary: return "unary";
    case OpKind::Binary: return "binary";
    case OpKind::Compare: return "compare";
    case OpKind::Logical: return "logical";
    case OpKind::Select: return "select";
    case OpKind::Cast: return "cast";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Permute: return "permute";
    case OpKind::ExtractSlice: return "extract_slice";
    case OpKind::ConvertLayout: return "convert_layout";
    case OpKind::Reduce: return "reduce";
    case OpKind::Mma: return "mma";
    case OpKind::FmaDot: return "fma_dot";
    case OpKind::GlobalLoad: return "global_load";
    case OpKind::GlobalStore: return "global_store";
    case OpKind::AsyncCopy: return "async_copy";
    case OpKind::CommitGroup: return "commit_group";
    case OpKind::WaitGroup: return "wait_group";
    case OpKind::Barrier: return "barrier";
    case OpKind::SharedLoad: return "shared_load";
    case OpKind::SharedStore: return "shared_store";
    case OpKind::For: return "for";
    case OpKind::Yield: return "yield";
    case OpKind::Roles: return "roles";
    case OpKind::MBarrierInit: return "mbarrier_init";
    case OpKind::MBarrierArrive: return "mbarrier_arrive";
    case OpKind::MBarrierWait: return "mbarrier_wait";
    case OpKind::NamedBarrier: return "named_barrier";
    case OpKind::FenceProxyAsync: return "fence_proxy_async";
    case OpKind::TmaLoad: return "tma_load";
    case OpKind::TmaStore: return "tma_store";
    case OpKind::BulkCommitGroup: return "bulk_commit_group";
    case OpKind::BulkWaitGroup: return "bulk_wait_group";
    case OpKind::WgmmaFence: return "wgmma_fence";
    case OpKind::Wgmma: return "wgmma";
    case OpKind::WgmmaCommitGroup: return "wgmma_commit_group";
    case OpKind::WgmmaWaitGroup: return "wgmma_wait_group";
    case OpKind::StMatrix: return "stmatrix";
    case OpKind::CtaIndex: return "cta_index";
    case OpKind::TileFetch: return "tile_fetch";
    case OpKind::TileRead: return "tile_read";
  }
  return "?";
}

bool is_hopper(OpKind kind) { return kind >= OpKind::Roles; }

bool is_elementwise(OpKind kind) {
  switch (kind) {
    case OpKind::Iota:
    case OpKind::Full:
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Compare:
    case OpKind::Logical:
    case OpKind::Select:
    case OpKind::Cast:
      return true;
    default:
      return false;
  }
}

Value make_value(std::string name, TileType type, RegisterLayout layout) {
  return std::make_shared<const ValueNode>(
      ValueNode{std::move(name), std::move(type), std::move(layout)});
}

OpPtr make_op(Op op) { return std::make_shared<const Op>(std::move(op)); }

RegionPtr make_region(std::vector<OpPtr> ops) {
  return std::make_shared<const Region>(Region{std::move(ops)});
}

std::vector<Value> used_values(const Op& op) {
  std::vector<Value> used = op.operands;
  for (const Value& offset : op.access.offsets) {
    if (offset) used.push_back(offset);
  }
  if (op.shared.stage) used.push_back(op.shared.stage);
  if (op.shared_b.stage) used.push_back(op.shared_b.stage);
  if (op.predicate) used.push_back(op.predicate);
  if (op.trip_count) used.push_back(op.trip_count);
  if (op.mbarrier.index) used.push_back(op.mbarrier.index);
  return used;
}

namespace {
bool is_gather(const Op& op) {
  return (op.kind == OpKind::GlobalLoad || op.kind == OpKind::GlobalStore) &&
         op.access.form == GlobalAccess::Form::Gather && op.buffer;
}
size_t gather_index_count(const Op& op) { return op.buffer ? op.buffer->shape.size() : 0; }
}  // namespace

std::vector<Value> gather_indices(const Op& op) {
  if (!is_gather(op)) return {};
  const size_t n = std::min(gather_index_count(op), op.operands.size());
  return std::vector<Value>(op.operands.begin(), op.operands.begin() + static_cast<long>(n));
}

Value gather_mask(const Op& op) {
  if (!is_gather(op) || !op.access.has_mask || op.operands.empty()) return nullptr;
  return op.operands.back();
}

Value stored_value(const Op& op) {
  if (op.kind == OpKind::SharedStore) return op.operands.empty() ? nullptr : op.operands[0];
  if (op.kind != OpKind::GlobalStore) return nullptr;
  const size_t at = is_gather(op) ? gather_index_count(op) : 0;
  return at < op.operands.size() ? op.operands[at] : nullptr;
}

std::string wgmma_operand_type(DType dtype) {
  if (dtype == DType::F8E4M3) return "e4m3";
  if (dtype == DType::F8E5M2) return "e5m2";
  return dtype_name(dtype);
}

std::string instruction_name(const Op& op, const Kernel* kernel) {
  auto operand_dtype = [&](size_t i) {
    return i < op.operands.size() && op.operands[i] ? op.operands[i]->type.dtype : DType::F32;
  };
  switch (op.kind) {
    case OpKind::Mma: {
      const std::string ab = dtype_name(operand_dtype(0));
      return "mma.sync.aligned.m16n8k16.row.col.f32." + ab + "." + ab + ".f32";
    }
    case OpKind::FmaDot: return "fma.rn.f32";
    case OpKind::AsyncCopy: return "cp.async.cg.shared.global [16]";
    case OpKind::CommitGroup: return "cp.async.commit_group";
    case OpKind::WaitGroup: return "cp.async.wait_group " + std::to_string(op.extent);
    case OpKind::Barrier: return "bar.sync 0";
    case OpKind::SharedLoad:
      switch (op.shared_read) {
        case SharedRead::LdMatrixX4: return "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
        case SharedRead::LdMatrixX4Trans: return "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
        case SharedRead::Scalar: return "ld.shared";
      }
      return "";
    case OpKind::SharedStore: return "st.shared";
    case OpKind::GlobalLoad: return "ld.global";
    case OpKind::GlobalStore: return "st.global";
    case OpKind::Reduce:
      if (op.scratch >= 0) return "shfl.sync.bfly + st.shared/ld.shared";
      return op.xor_masks.empty() ? "" : "shfl.sync.bfly";
    case OpKind::ConvertLayout: return op.via_shared ? "st.shared/ld.shared" : "";
    case OpKind::MBarrierInit: return "mbarrier.init.shared::cta.b64";
    case OpKind::MBarrierArrive:
      return op.tx_bytes > 0 ? "mbarrier.arrive.expect_tx.shared::cta.b64"
                             : "mbarrier.arrive.shared::cta.b64";
    case OpKind::MBarrierWait: return "mbarrier.try_wait.parity.shared::cta.b64";
    case OpKind::NamedBarrier: return op.arrive_only ? "bar.arrive" : "bar.sync";
    case OpKind::FenceProxyAsync: return "fence.proxy.async.shared::cta";
    case OpKind::TmaLoad:
      return std::string("cp.async.bulk.tensor.shared::cluster.global.tile.mbarrier::complete_tx::bytes") +
             (op.multicast_mask != 0 ? ".multicast::cluster" : "");
    case OpKind::TmaStore: return "cp.async.bulk.tensor.global.shared::cta.tile.bulk_group";
    case OpKind::BulkCommitGroup: return "cp.async.bulk.commit_group";
    case OpKind::BulkWaitGroup:
      return std::string("cp.async.bulk.wait_group") + (op.wait_read ? ".read " : " ") +
             std::to_string(op.extent);
    case OpKind::WgmmaFence: return "wgmma.fence.sync.aligned";
    case OpKind::Wgmma: {
      const Value& c = op.operands.empty() ? nullptr : op.operands.back();
      const int64_t n = c && c->type.rank() == 2 ? c->type.shape[1] : 0;
      const bool rs = op.operands.size() == 2;
      const auto alloc_dtype = [&](const SharedRef& ref) {
        const bool known = kernel && ref.alloc >= 0 && static_cast<size_t>(ref.alloc) < kernel->shared.size();
        return known ? kernel->shared[static_cast<size_t>(ref.alloc)].dtype : DType::BF16;
      };
      const DType a = rs ? operand_dtype(0) : alloc_dtype(op.shared);
      const DType b = rs ? a : alloc_dtype(op.shared_b);
      // 8-bit floats read k 32 per instruction.
      const std::string k = is_eight_bit_float(b) ? "k32" : "k16";
      return "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + k + ".f32." +
             wgmma_operand_type(a) + "." + wgmma_operand_type(b) +
             (rs ? " (A in registers)" : "");
    }
    case OpKind::WgmmaCommitGroup: return "wgmma.commit_group.sync.aligned";
    case OpKind::WgmmaWaitGroup: return "wgmma.wait_group.sync.aligned " + std::to_string(op.extent);
    case OpKind::StMatrix: return "stmatrix.sync.aligned.m8n8.x4.shared.b16";
    default: return "";
  }
}

const Buffer* Module::find_buffer(const std::string& buffer_name) const {
  for (const Buffer& buffer : params) {
    if (buffer && buffer->name == buffer_name) return &buffer;
  }
  for (const Buffer& buffer : allocations) {
    if (buffer && buffer->name == buffer_name) return &buffer;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Builder

Builder::Builder(int warps) : warps_(warps), regions_(1) {}

std::string Builder::fresh_name(const std::string& requested) {
  if (requested.empty()) {
    while (true) {
      std::string name = std::to_string(next_number_++);
      if (used_names_.insert(name).second) return name;
    }
  }
  if (used_names_.insert(requested).second) return requested;
  for (int suffix = 1;; ++suffix) {
    std::string name = requested + "." + std::to_string(suffix);
    if (used_names_.insert(name).second) return name;
  }
}

Value Builder::emit(Op op) {
  op.provenance = provenance_;
  OpPtr node = make_op(std::move(op));
  Value result = node->results.empty() ? nullptr : node->results.front();
  regions_.back().push_back(std::move(node));
  return result;
}

Value Builder::append(OpPtr op) {
  if (!op) return nullptr;
  const auto reserve = [&](const Value& value) {
    if (value) used_names_.insert(value->name);
  };
  for (const Value& r : op->results) reserve(r);
  reserve(op->loop_var);
  for (const Value& a : op->block_args) reserve(a);
  if (op->body) for_each_defined_value(*op->body, reserve);
  for (const WarpRole& role : op->roles) {
    if (role.body) for_each_defined_value(*role.body, reserve);
  }
  Value result = op->results.empty() ? nullptr : op->results.front();
  regions_.back().push_back(std::move(op));
  return result;
}

Value Builder::grid(const std::string& name, int64_t extent) {
  Value var = make_value(fresh_name(name), vrtile::index_scalar(), uniform_layout({}, threads()));
  grid_.push_back(GridAxis{var, extent});
  return var;
}

namespace {
// An allocation of `stages` stages of `layout` over `shape`, placed at `byte_offset`.
SharedAlloc shared_alloc(std::string name, DType dtype, std::vector<int64_t> shape,
                         layout::ComposedLayout layout, int stages, std::string purpose,
                         int64_t byte_offset) {
  SharedAlloc alloc;
  alloc.name = std::move(name);
  alloc.dtype = dtype;
  alloc.shape = std::move(shape);
  alloc.stage_elements = layout.cosize();
  alloc.layout = std::move(layout);
  alloc.stages = stages;
  alloc.byte_offset = byte_offset;
  // An int4 allocation holds its tile packed as global memory does (two elements a byte along
  // the last axis): cp.async copies the bytes as they are, and the reads unpack them.
  alloc.byte_size = global_bytes(dtype, int64_t{stages} * alloc.stage_elements);
  alloc.purpose = std::move(purpose);
  return alloc;
}
}  // namespace

int Builder::shared(std::string name, DType dtype, std::vector<int64_t> shape,
                    layout::ComposedLayout layout, int stages, std::string purpose, int64_t alignment) {
  shared_.push_back(shared_alloc(std::move(name), dtype, std::move(shape), std::move(layout), stages,
                                 std::move(purpose),
                                 round_up(shared_end(shared_), std::max<int64_t>(128, alignment))));
  return static_cast<int>(shared_.size()) - 1;
}

int Builder::shared_alias(int base, std::string name, DType dtype, std::vector<int64_t> shape,
                          layout::ComposedLayout layout, std::string purpose) {
  const SharedAlloc& reused = shared_.at(static_cast<size_t>(base));
  SharedAlloc alloc = shared_alloc(std::move(name), dtype, std::move(shape), std::move(layout), 1,
                                   std::move(purpose), reused.byte_offset);
  alloc.alias_of = reused.alias_of >= 0 ? reused.alias_of : base;
  shared_.push_back(std::move(alloc));
  return static_cast<int>(shared_.size()) - 1;
}

int64_t shared_end(const std::vector<SharedAlloc>& allocs) {
  int64_t end = 0;
  for (const SharedAlloc& alloc : allocs) end = std::max(end, alloc.byte_offset + alloc.byte_size);
  return end;
}

namespace {
Op op_of(OpKind kind, std::vector<Value> operands) {
  Op op;
  op.kind = kind;
  op.operands = std::move(operands);
  return op;
}
}  // namespace

Value Builder::iota(int64_t n, RegisterLayout layout, const std::string& name) {
  Op op = op_of(OpKind::Iota, {});
  op.extent = n;
  op.results.push_back(make_value(fresh_name(name), TileType{DType::Index, {n}}, std::move(layout)));
  return emit(std::move(op));
}

Value Builder::full(double value, TileType type, RegisterLayout layout, const std::string& name) {
  Op op = op_of(OpKind::Full, {});
  op.constant = value;
  op.results.push_back(make_value(fresh_name(name), std::move(type), std::move(layout)));
  return emit(std::move(op));
}

Value Builder::unary(UnaryOp op_kind, const Value& a, const std::string& name) {
  Op op = op_of(OpKind::Unary, {a});
  op.unary_op = op_kind;
  op.results.push_back(make_value(fresh_name(name), type_of(a), layout_of(a)));
  return emit(std::move(op));
}

Value Builder::binary(BinaryOp op_kind, const Value& a, const Value& b, const std::string& name) {
  Op op = op_of(OpKind::Binary, {a, b});
  op.binary_op = op_kind;
  op.results.push_back(make_value(fresh_name(name), type_of(a), layout_of(a)));
  return emit(std::move(op));
}

Value Builder::compare(CompareOp op_kind, const Value& a, const Value& b,
                       const std::string& name) {
  Op op = op_of(OpKind::Compare, {a, b});
  op.compare_op = op_kind;
  op.results.push_back(
      make_value(fresh_name(name), TileType{DType::Bool, type_of(a).shape}, layout_of(a)));
  return emit(std::move(op));
}

Value Builder::logical(LogicalOp op_kind, const Value& a, const Value& b,
                       const std::string& name) {
  Op op = op_of(OpKind::Logical, {a, b});
  op.logical_op = op_kind;
  op.results.push_back(make_value(fresh_name(name), type_of(a), layout_of(a)));
  return emit(std::move(op));
}

Value Builder::select(const Value& c, const Value& a, const Value& b, const std::string& name) {
  Op op = op_of(OpKind::Select, {c, a, b});
  op.results.push_back(make_value(fresh_name(name), type_of(a), layout_of(a)));
  return emit(std::move(op));
}

Value Builder::cast(const Value& value, DType dtype, const std::string& name) {
  Op op = op_of(OpKind::Cast, {value});
  op.results.push_back(
      make_value(fresh_name(name), TileType{dtype, type_of(value).shape}, layout_of(value)));
  return emit(std::move(op));
}

Value Builder::broadcast(const Value& value, std::vector<int64_t> shape, std::vector<int> dims,
                         RegisterLayout layout, const std::string& name) {
  Op op = op_of(OpKind::Broadcast, {value});
  op.dims = std::move(dims);
  op.results.push_back(make_value(fresh_name(name), TileType{type_of(value).dtype, std::move(shape)},
                                  std::move(layout)));
  return emit(std::move(op));
}

Value Builder::permute(const Value& value, std::vector<int> order, RegisterLayout layout,
                       const std::string& name) {
  const TileType source = type_of(value);
  TileType type{source.dtype, {}};
  for (int axis : order) {
    type.shape.push_back(axis >= 0 && axis < source.rank()
                             ? source.shape[static_cast<size_t>(axis)]
                             : 1);
  }
  Op op = op_of(OpKind::Permute, {value});
  op.dims = std::move(order);
  op.results.push_back(make_value(fresh_name(name), std::move(type), std::move(layout)));
  return emit(std::move(op));
}

Value Builder::extract_slice(const Value& value, std::vector<int64_t> offsets,
                             std::vector<int64_t> shape, RegisterLayout layout,
                             const std::string& name, int slice_interleave) {
  Op op = op_of(OpKind::ExtractSlice, {value});
  op.offsets = std::move(offsets);
  op.slice_interleave = slice_interleave;
  op.results.push_back(make_value(fresh_name(name), TileType{type_of(value).dtype, std::move(shape)},
                                  std::move(layout)));
  return emit(std::move(op));
}

Value Builder::convert_layout(const Value& value, RegisterLayout layout, bool via_shared,
                              int scratch, const std::string& name) {
  Op op = op_of(OpKind::ConvertLayout, {value});
  op.via_shared = via_shared;
  op.scratch = scratch;
  op.results.push_back(make_value(fresh_name(name), type_of(value), std::move(layout)));
  return emit(std::move(op));
}

Value Builder::reduce(ReduceOp reduce_op, const Value& value, int axis, RegisterLayout layout,
                      std::vector<int> xor_masks, int scratch, const std::string& name) {
  const TileType source = type_of(value);
  TileType type{source.dtype, {}};
  for (int i = 0; i < source.rank(); ++i) {
    if (i != axis) type.shape.push_back(source.shape[static_cast<size_t>(i)]);
  }
  Op op = op_of(OpKind::Reduce, {value});
  op.reduce_op = reduce_op;
  op.axis = axis;
  op.xor_masks = std::move(xor_masks);
  op.scratch = scratch;
  op.results.push_back(make_value(fresh_name(name), std::move(type), std::move(layout)));
  return emit(std::move(op));
}

Value Builder::mma(const Value& a, const Value& b, const Value& c, int warps_m, int warps_n,
                   const std::string& name, bool swapped) {
  Op op = op_of(OpKind::Mma, {a, b, c});
  op.warps_m = warps_m;
  op.warps_n = warps_n;
  op.swapped = swapped;
  op.results.push_back(make_value(fresh_name(name), type_of(c), layout_of(c)));
  return emit(std::move(op));
}

Value Builder::fma_dot(SharedRef a, SharedRef b, const Value& acc, const std::string& name) {
  Op op = op_of(OpKind::FmaDot, {acc});
  op.shared = std::move(a);
  op.shared_b = std::move(b);
  op.results.push_back(make_value(fresh_name(name), type_of(acc), layout_of(acc)));
  return emit(std::move(op));
}

Value Builder::global_load(const Buffer& buffer, GlobalAccess access, std::vector<Value> gather,
                           double other, TileType type, RegisterLayout layout,
                           const std::string& name) {
  Op op = op_of(OpKind::GlobalLoad, std::move(gather));
  op.buffer = buffer;
  op.access = std::move(access);
  op.constant = other;
  op.results.push_back(make_value(fresh_name(name), std::move(type), std::move(layout)));
  return emit(std::move(op));
}

void Builder::global_store(const Buffer& buffer, GlobalAccess access, std::vector<Value> gather,
                           const Value& value) {
  std::vector<Value> operands;
  Value mask;
  if (access.form == GlobalAccess::Form::Gather && access.has_mask && !gather.empty()) {
    mask = gather.back();
    gather.pop_back();
  }
  operands = std::move(gather);
  operands.push_back(value);
  if (mask) operands.push_back(mask);
  Op op = op_of(OpKind::GlobalStore, std::move(operands));
  op.buffer = buffer;
  op.access = std::move(access);
  emit(std::move(op));
}

void Builder::async_copy(SharedRef dst, const Buffer& buffer, GlobalAccess access,
                         std::vector<int64_t> tile_shape, layout::TVLayout copy_layout,
                         int64_t vector_elements, const Value& predicate) {
  Op op = op_of(OpKind::AsyncCopy, {});
  op.shared = std::move(dst);
  op.buffer = buffer;
  op.access = std::move(access);
  op.tile_shape = std::move(tile_shape);
  op.copy_layout = std::move(copy_layout);
  op.vector_elements = vector_elements;
  op.predicate = predicate;
  emit(std::move(op));
}

void Builder::commit_group() { emit(op_of(OpKind::CommitGroup, {})); }

void Builder::wait_group(int64_t pending) {
  Op op = op_of(OpKind::WaitGroup, {});
  op.extent = pending;
  emit(std::move(op));
}

// Inside a role only the role's threads arrive: a bar.sync 0 would wait for the other roles'
// threads forever, so the role synchronizes on a named barrier of its own (ids from 8 up, clear
// of the low ids hand-built kernels pick and of the high ones the emitter takes for a role's
// elected arrives).
void Builder::barrier() {
  if (!role_threads_.empty()) {
    named_barrier(kFirstRoleBarrierId + static_cast<int>(role_index_.back()), role_threads_.back());
    return;
  }
  emit(op_of(OpKind::Barrier, {}));
}

Value Builder::shared_load(SharedRef src, SharedRead read, TileType type, RegisterLayout layout,
                           const std::string& name) {
  Op op = op_of(OpKind::SharedLoad, {});
  op.shared = std::move(src);
  op.shared_read = read;
  op.results.push_back(make_value(fresh_name(name), std::move(type), std::move(layout)));
  return emit(std::move(op));
}

void Builder::shared_store(SharedRef dst, const Value& value) {
  Op op = op_of(OpKind::SharedStore, {value});
  op.shared = std::move(dst);
  emit(std::move(op));
}

std::vector<Value> Builder::for_loop(const std::string& var_name, int64_t extent,
                                     std::vector<Value> inits, const LoopBody& body,
                                     const std::vector<std::string>& result_names,
                                     const std::vector<std::string>& arg_names,
                                     int pipeline_stages, const Value& trip_count) {
  const Provenance provenance = provenance_;
  auto name_at = [](const std::vector<std::string>& names, size_t i) {
    return i < names.size() ? names[i] : std::string();
  };
  Value var = make_value(fresh_name(var_name), vrtile::index_scalar(), uniform_layout({}, threads()));
  std::vector<Value> carried;
  for (size_t i = 0; i < inits.size(); ++i) {
    carried.push_back(
        make_value(fresh_name(name_at(arg_names, i)), type_of(inits[i]), layout_of(inits[i])));
  }
  regions_.emplace_back();
  std::vector<Value> yielded = body(var, carried);
  Op yield = op_of(OpKind::Yield, std::move(yielded));
  yield.provenance = provenance;
  regions_.back().push_back(make_op(std::move(yield)));
  RegionPtr region = make_region(std::move(regions_.back()));
  regions_.pop_back();
  Op loop = op_of(OpKind::For, inits);
  for (size_t i = 0; i < inits.size(); ++i) {
    loop.results.push_back(
        make_value(fresh_name(name_at(result_names, i)), type_of(inits[i]), layout_of(inits[i])));
  }
  loop.loop_var = std::move(var);
  loop.extent = extent;
  loop.block_args = std::move(carried);
  loop.body = std::move(region);
  loop.pipeline_stages = pipeline_stages;
  loop.trip_count = trip_count;
  loop.provenance = provenance;
  OpPtr node = make_op(std::move(loop));
  std::vector<Value> results = node->results;
  regions_.back().push_back(std::move(node));
  return results;
}

std::vector<Value> Builder::for_tiles(const std::string& var_name, std::vector<Value> inits,
                                      const LoopBody& body,
                                      const std::vector<std::string>& result_names,
                                      const std::vector<std::string>& arg_names) {
  int64_t tiles = 1;
  for (const GridAxis& axis : grid_) tiles *= axis.extent;
  std::vector<Value> results = for_loop(var_name, tiles, std::move(inits), body, result_names, arg_names);
  // The loop just built is the last op of the current region.
  Op loop = *regions_.back().back();
  loop.tile_loop = true;
  regions_.back().back() = make_op(std::move(loop));
  return results;
}

int Builder::mbarrier(std::string name, int count, int64_t arrivals, std::string purpose) {
  mbarriers_.push_back(MBarrierAlloc{std::move(name), count, arrivals, std::move(purpose)});
  return static_cast<int>(mbarriers_.size()) - 1;
}

int Builder::tma_map(std::string name, const Buffer& buffer, std::vector<int64_t> box,
                     int swizzle_bytes, std::optional<layout::ComposedLayout> shared_layout,
                     std::vector<int> tile_axes) {
  tma_maps_.push_back(TmaMap{std::move(name), buffer, std::move(box), swizzle_bytes,
                             std::move(shared_layout), std::move(tile_axes)});
  return static_cast<int>(tma_maps_.size()) - 1;
}

void Builder::roles(const std::vector<RoleSpec>& specs) {
  const Provenance provenance = provenance_;
  Op op = op_of(OpKind::Roles, {});
  for (const RoleSpec& spec : specs) {
    role_index_.push_back(op.roles.size());
    role_threads_.push_back(int64_t{spec.warpgroups} * 4 * kWarpSize);
    regions_.emplace_back();
    if (spec.body) spec.body();
    RegionPtr body = make_region(std::move(regions_.back()));
    regions_.pop_back();
    role_threads_.pop_back();
    role_index_.pop_back();
    op.roles.push_back(WarpRole{spec.name, spec.warpgroups, spec.max_registers, std::move(body)});
  }
  provenance_ = provenance;
  emit(std::move(op));
}

void Builder::mbarrier_init(int barrier) {
  Op op = op_of(OpKind::MBarrierInit, {});
  op.mbarrier = BarrierRef{barrier, nullptr};
  emit(std::move(op));
}

void Builder::mbarrier_arrive(BarrierRef bar, int64_t tx_bytes, int64_t arrivals) {
  Op op = op_of(OpKind::MBarrierArrive, {});
  op.mbarrier = std::move(bar);
  op.tx_bytes = tx_bytes;
  op.arrivals_per_op = arrivals;
  emit(std::move(op));
}

void Builder::mbarrier_arrive_per_warp(BarrierRef bar, int64_t threads) {
  Op op = op_of(OpKind::MBarrierArrive, {});
  op.mbarrier = std::move(bar);
  op.arrivals_per_op = threads / kWarpSize;
  op.arrive_per_warp = true;
  emit(std::move(op));
}

void Builder::mbarrier_wait(BarrierRef bar, const Value& parity) {
  Op op = op_of(OpKind::MBarrierWait, {parity});
  op.mbarrier = std::move(bar);
  emit(std::move(op));
}

void Builder::named_barrier(int id, int64_t barrier_threads, bool arrive_only) {
  Op op = op_of(OpKind::NamedBarrier, {});
  op.barrier_id = id;
  op.barrier_threads = barrier_threads;
  op.arrive_only = arrive_only;
  emit(std::move(op));
}

void Builder::warpgroup_barrier(std::vector<int> warpgroup_ids, int64_t barrier_threads, bool arrive_only) {
  Op op = op_of(OpKind::NamedBarrier, {});
  for (int id : warpgroup_ids) {
    if (id != 0) op.barrier_id = op.barrier_id == 0 ? id : std::min(op.barrier_id, id);
  }
  op.warpgroup_ids = std::move(warpgroup_ids);
  op.barrier_threads = barrier_threads;
  op.arrive_only = arrive_only;
  emit(std::move(op));
}

void Builder::fence_proxy_async() { emit(op_of(OpKind::FenceProxyAsync, {})); }

void Builder::tma_load(SharedRef dst, int map, std::vector<Value> coordinates, BarrierRef bar,
                       int64_t multicast_mask) {
  Op op = op_of(OpKind::TmaLoad, std::move(coordinates));
  op.shared = std::move(dst);
  op.tma_map = map;
  op.mbarrier = std::move(bar);
  op.multicast_mask = multicast_mask;
  emit(std::move(op));
}

void Builder::tma_store(int map, std::vector<Value> coordinates, SharedRef src) {
  Op op = op_of(OpKind::TmaStore, std::move(coordinates));
  op.shared = std::move(src);
  op.tma_map = map;
  emit(std::move(op));
}

void Builder::bulk_commit_group() { emit(op_of(OpKind::BulkCommitGroup, {})); }

void Builder::bulk_wait_group(int64_t pending, bool read) {
  Op op = op_of(OpKind::BulkWaitGroup, {});
  op.extent = pending;
  op.wait_read = read;
  emit(std::move(op));
}

void Builder::wgmma_fence() { emit(op_of(OpKind::WgmmaFence, {})); }

Value Builder::wgmma(SharedRef a_shared, const Value& a, SharedRef b_shared, int64_t k,
                     const Value& c, const std::string& name) {
  Op op = op_of(OpKind::Wgmma, a ? std::vector<Value>{a, c} : std::vector<Value>{c});
  if (!a) op.shared = std::move(a_shared);
  op.shared_b = std::move(b_shared);
  op.extent = k;
  op.results.push_back(make_value(fresh_name(name), type_of(c), layout_of(c)));
  return emit(std::move(op));
}

void Builder::wgmma_commit_group() { emit(op_of(OpKind::WgmmaCommitGroup, {})); }

void Builder::wgmma_wait_group(int64_t pending) {
  Op op = op_of(OpKind::WgmmaWaitGroup, {});
  op.extent = pending;
  emit(std::move(op));
}

void Builder::stmatrix(SharedRef dst, const Value& value) {
  Op op = op_of(OpKind::StMatrix, {value});
  op.shared = std::move(dst);
  emit(std::move(op));
}

Value Builder::cta_index(const std::string& name) {
  Op op = op_of(OpKind::CtaIndex, {});
  op.results.push_back(make_value(fresh_name(name.empty() ? "cta" : name), TileType{DType::Index, {}},
                                  uniform_layout({}, threads())));
  return emit(std::move(op));
}

void Builder::tile_fetch(SharedRef dst, const Buffer& counter, BarrierRef bar) {
  Op op = op_of(OpKind::TileFetch, {});
  op.shared = std::move(dst);
  op.buffer = counter;
  op.mbarrier = std::move(bar);
  emit(std::move(op));
}

Value Builder::tile_read(SharedRef src, const std::string& name) {
  Op op = op_of(OpKind::TileRead, {});
  op.shared = std::move(src);
  op.results.push_back(make_value(fresh_name(name.empty() ? "tile" : name), TileType{DType::Index, {}},
                                  uniform_layout({}, threads())));
  return emit(std::move(op));
}

KernelPtr Builder::finish_kernel(std::string name, std::vector<Buffer> params) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.params = std::move(params);
  kernel.grid = std::move(grid_);
  kernel.warps = warps_;
  kernel.persistent = persistent_;
  kernel.dynamic_tiles = dynamic_tiles_;
  kernel.shared = std::move(shared_);
  kernel.mbarriers = std::move(mbarriers_);
  kernel.tma_maps = std::move(tma_maps_);
  kernel.notes = std::move(notes_);
  kernel.shared_bytes = shared_end(kernel.shared);
  kernel.body = make_region(std::move(regions_.front()));
  kernel.provenance = provenance_;
  grid_.clear();
  persistent_ = false;
  dynamic_tiles_ = false;
  shared_.clear();
  mbarriers_.clear();
  tma_maps_.clear();
  notes_.clear();
  role_threads_.clear();
  regions_.assign(1, {});
  used_names_.clear();
  next_number_ = 0;
  return std::make_shared<const Kernel>(std::move(kernel));
}

}  // namespace nautilus::matile
