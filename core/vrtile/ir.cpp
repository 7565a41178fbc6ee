#include "core/vrtile/ir.h"

#include <limits>
#include <utility>

namespace nautilus::vrtile {
namespace {

// The type of an operand for inference; a missing operand (reported by the verifier) counts as
// an f32 scalar so that inference never dereferences null.
TileType type_of(const Value& value) { return value ? value->type : TileType{}; }

int64_t extent_or_one(const TileType& type, int axis) {
  return axis >= 0 && axis < type.rank() ? type.shape[static_cast<size_t>(axis)] : 1;
}

OpPtr single_result(Op op, std::string result, TileType type) {
  op.results.push_back(make_value(std::move(result), std::move(type)));
  return make_op(std::move(op));
}

Op op_of(OpKind kind, std::vector<Value> operands, Provenance p) {
  Op op;
  op.kind = kind;
  op.operands = std::move(operands);
  op.provenance = p;
  return op;
}

// Load and Store share the operand layout indices..., [value], [mask].
Op access_op(OpKind kind, Buffer buffer, std::vector<Value> indices, Provenance p) {
  Op op = op_of(kind, std::move(indices), p);
  op.buffer = std::move(buffer);
  return op;
}

void add_mask(Op* op, Value mask) {
  op->has_mask = mask != nullptr;
  if (mask) op->operands.push_back(std::move(mask));
}

}  // namespace

int64_t TileType::element_count() const {
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (__builtin_mul_overflow(count, extent, &count)) return std::numeric_limits<int64_t>::max();
  }
  return count;
}

std::string type_text(const TileType& type) {
  std::string text = dtype_name(type.dtype);
  if (type.shape.empty()) return text;
  text += "[";
  for (size_t i = 0; i < type.shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(type.shape[i]);
  }
  return text + "]";
}

TileType index_scalar() { return TileType{DType::Index, {}}; }

Value make_value(std::string name, TileType type) {
  return std::make_shared<const ValueNode>(ValueNode{std::move(name), std::move(type)});
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Load: return "load";
    case OpKind::Store: return "store";
    case OpKind::Dot: return "dot";
    case OpKind::Reduce: return "reduce";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Permute: return "permute";
    case OpKind::Iota: return "iota";
    case OpKind::Full: return "full";
    case OpKind::Unary: return "unary";
    case OpKind::Binary: return "binary";
    case OpKind::Compare: return "compare";
    case OpKind::Logical: return "logical";
    case OpKind::Select: return "select";
    case OpKind::Cast: return "cast";
    case OpKind::For: return "for";
    case OpKind::Yield: return "yield";
  }
  return "?";
}

bool is_elementwise(OpKind kind) {
  switch (kind) {
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Compare:
    case OpKind::Logical:
    case OpKind::Select:
    case OpKind::Cast: return true;
    default: return false;
  }
}

std::vector<Value> access_indices(const Op& op) {
  // Load: indices..., [mask]; Store: indices..., value, [mask].
  size_t trailing = op.has_mask ? 1 : 0;
  if (op.kind == OpKind::Store) ++trailing;
  if (op.operands.size() < trailing) return {};
  return std::vector<Value>(op.operands.begin(),
                            op.operands.end() - static_cast<std::ptrdiff_t>(trailing));
}

Value access_mask(const Op& op) {
  if (!op.has_mask || op.operands.empty()) return nullptr;
  return op.operands.back();
}

Value stored_value(const Op& op) {
  const size_t from_end = op.has_mask ? 2 : 1;
  if (op.kind != OpKind::Store || op.operands.size() < from_end) return nullptr;
  return op.operands[op.operands.size() - from_end];
}

const Buffer* Module::find_buffer(const std::string& buffer_name) const {
  for (const std::vector<Buffer>* list : {&params, &allocations}) {
    for (const Buffer& buffer : *list) {
      if (buffer && buffer->name == buffer_name) return &buffer;
    }
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Builders of single operations

OpPtr make_load(std::string result, Buffer buffer, std::vector<Value> indices, Value mask,
                double other, Provenance p) {
  TileType type;
  type.dtype = buffer ? buffer->dtype : DType::F32;
  // The indices' shape; a rank-0 buffer has no indices, and then the mask gives the shape.
  if (!indices.empty()) {
    type.shape = type_of(indices.front()).shape;
  } else {
    type.shape = type_of(mask).shape;
  }
  Op op = access_op(OpKind::Load, std::move(buffer), std::move(indices), p);
  add_mask(&op, std::move(mask));
  op.constant = other;
  return single_result(std::move(op), std::move(result), std::move(type));
}

OpPtr make_store(Buffer buffer, std::vector<Value> indices, Value value, Value mask,
                 Provenance p) {
  Op op = access_op(OpKind::Store, std::move(buffer), std::move(indices), p);
  // A null value keeps its slot (the verifier reports it) so the mask stays last.
  op.operands.push_back(std::move(value));
  add_mask(&op, std::move(mask));
  return make_op(std::move(op));
}

OpPtr make_dot(std::string result, Value a, Value b, Value acc, Provenance p) {
  const TileType type{DType::F32, {extent_or_one(type_of(a), 0), extent_or_one(type_of(b), 1)}};
  std::vector<Value> operands{std::move(a), std::move(b)};
  if (acc) operands.push_back(std::move(acc));
  return single_result(op_of(OpKind::Dot, std::move(operands), p), std::move(result), type);
}

OpPtr make_reduce(std::string result, ReduceOp reduce_op, Value value, int axis, Provenance p) {
  TileType type = type_of(value);
  if (axis >= 0 && axis < type.rank()) type.shape.erase(type.shape.begin() + axis);
  Op op = op_of(OpKind::Reduce, {std::move(value)}, p);
  op.reduce_op = reduce_op;
  op.axis = axis;
  return single_result(std::move(op), std::move(result), std::move(type));
}

OpPtr make_broadcast(std::string result, Value value, std::vector<int64_t> shape,
                     std::vector<int> dims, Provenance p) {
  const TileType type{type_of(value).dtype, std::move(shape)};
  Op op = op_of(OpKind::Broadcast, {std::move(value)}, p);
  op.dims = std::move(dims);
  return single_result(std::move(op), std::move(result), type);
}

OpPtr make_permute(std::string result, Value value, std::vector<int> order, Provenance p) {
  const TileType source = type_of(value);
  TileType type{source.dtype, {}};
  for (int axis : order) type.shape.push_back(extent_or_one(source, axis));
  Op op = op_of(OpKind::Permute, {std::move(value)}, p);
  op.dims = std::move(order);
  return single_result(std::move(op), std::move(result), std::move(type));
}

OpPtr make_iota(std::string result, int64_t n, Provenance p) {
  Op op = op_of(OpKind::Iota, {}, p);
  op.extent = n;
  return single_result(std::move(op), std::move(result), TileType{DType::Index, {n}});
}

OpPtr make_full(std::string result, double value, TileType type, Provenance p) {
  Op op = op_of(OpKind::Full, {}, p);
  op.constant = value;
  return single_result(std::move(op), std::move(result), std::move(type));
}

OpPtr make_unary(std::string result, UnaryOp unary_op, Value a, Provenance p) {
  TileType type = type_of(a);
  Op op = op_of(OpKind::Unary, {std::move(a)}, p);
  op.unary_op = unary_op;
  return single_result(std::move(op), std::move(result), std::move(type));
}

OpPtr make_binary(std::string result, BinaryOp binary_op, Value a, Value b, Provenance p) {
  TileType type = type_of(a);
  Op op = op_of(OpKind::Binary, {std::move(a), std::move(b)}, p);
  op.binary_op = binary_op;
  return single_result(std::move(op), std::move(result), std::move(type));
}

OpPtr make_compare(std::string result, CompareOp compare_op, Value a, Value b, Provenance p) {
  const TileType type{DType::Bool, type_of(a).shape};
  Op op = op_of(OpKind::Compare, {std::move(a), std::move(b)}, p);
  op.compare_op = compare_op;
  return single_result(std::move(op), std::move(result), type);
}

OpPtr make_logical(std::string result, LogicalOp logical_op, Value a, Value b, Provenance p) {
  const TileType type{DType::Bool, type_of(a).shape};
  Op op = op_of(OpKind::Logical, {std::move(a), std::move(b)}, p);
  op.logical_op = logical_op;
  return single_result(std::move(op), std::move(result), type);
}

OpPtr make_select(std::string result, Value condition, Value if_true, Value if_false,
                  Provenance p) {
  TileType type = type_of(if_true);
  return single_result(
      op_of(OpKind::Select, {std::move(condition), std::move(if_true), std::move(if_false)}, p),
      std::move(result), std::move(type));
}

OpPtr make_cast(std::string result, Value value, DType dtype, Provenance p) {
  const TileType type{dtype, type_of(value).shape};
  return single_result(op_of(OpKind::Cast, {std::move(value)}, p), std::move(result), type);
}

OpPtr make_for(std::vector<std::string> results, Value loop_var, int64_t extent,
               std::vector<Value> inits, std::vector<Value> block_args, RegionPtr body,
               Provenance p, Value trip_count) {
  Op op = op_of(OpKind::For, {}, p);
  op.trip_count = std::move(trip_count);
  for (size_t i = 0; i < inits.size(); ++i) {
    std::string name = i < results.size() ? std::move(results[i]) : std::string();
    op.results.push_back(make_value(std::move(name), type_of(inits[i])));
  }
  op.operands = std::move(inits);
  op.loop_var = std::move(loop_var);
  op.extent = extent;
  op.block_args = std::move(block_args);
  op.body = std::move(body);
  return make_op(std::move(op));
}

OpPtr make_yield(std::vector<Value> values, Provenance p) {
  return make_op(op_of(OpKind::Yield, std::move(values), p));
}

OpPtr make_op(Op op) { return std::make_shared<const Op>(std::move(op)); }

RegionPtr make_region(std::vector<OpPtr> ops) {
  return std::make_shared<const Region>(Region{std::move(ops)});
}

KernelPtr make_kernel(std::string name, std::vector<Buffer> params, std::vector<GridAxis> grid,
                      RegionPtr body, Provenance p) {
  return std::make_shared<const Kernel>(
      Kernel{std::move(name), std::move(params), std::move(grid), std::move(body), p, std::nullopt});
}

// ---------------------------------------------------------------------------------------------
// Builder

Builder::Builder() : regions_(1) {}

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

Value Builder::emit(OpPtr op) {
  Value result = !op || op->results.empty() ? nullptr : op->results.front();
  regions_.back().push_back(std::move(op));
  return result;
}

void Builder::reserve_names(const Op& op) {
  for (const Value& result : op.results) {
    if (result) used_names_.insert(result->name);
  }
  if (op.kind != OpKind::For) return;
  if (op.loop_var) used_names_.insert(op.loop_var->name);
  for (const Value& arg : op.block_args) {
    if (arg) used_names_.insert(arg->name);
  }
  if (!op.body) return;
  for (const OpPtr& body_op : op.body->ops) {
    if (body_op) reserve_names(*body_op);
  }
}

Value Builder::append(OpPtr op) {
  if (op) reserve_names(*op);
  return emit(std::move(op));
}

Value Builder::grid(const std::string& name, int64_t extent) {
  Value var = make_value(fresh_name(name), index_scalar());
  grid_.push_back(GridAxis{var, extent});
  return var;
}

Value Builder::load(const Buffer& buffer, std::vector<Value> indices, const Value& mask,
                    double other, const std::string& name) {
  return emit(make_load(fresh_name(name), buffer, std::move(indices), mask, other, provenance_));
}

void Builder::store(const Buffer& buffer, std::vector<Value> indices, const Value& value,
                    const Value& mask) {
  emit(make_store(buffer, std::move(indices), value, mask, provenance_));
}

Value Builder::dot(const Value& a, const Value& b, const Value& acc, const std::string& name) {
  return emit(make_dot(fresh_name(name), a, b, acc, provenance_));
}

Value Builder::reduce(ReduceOp op, const Value& value, int axis, const std::string& name) {
  return emit(make_reduce(fresh_name(name), op, value, axis, provenance_));
}

Value Builder::broadcast(const Value& value, std::vector<int64_t> shape, std::vector<int> dims,
                         const std::string& name) {
  return emit(
      make_broadcast(fresh_name(name), value, std::move(shape), std::move(dims), provenance_));
}

Value Builder::permute(const Value& value, std::vector<int> order, const std::string& name) {
  return emit(make_permute(fresh_name(name), value, std::move(order), provenance_));
}

Value Builder::iota(int64_t n, const std::string& name) {
  return emit(make_iota(fresh_name(name), n, provenance_));
}

Value Builder::full(double value, TileType type, const std::string& name) {
  return emit(make_full(fresh_name(name), value, std::move(type), provenance_));
}

Value Builder::unary(UnaryOp op, const Value& a, const std::string& name) {
  return emit(make_unary(fresh_name(name), op, a, provenance_));
}

Value Builder::binary(BinaryOp op, const Value& a, const Value& b, const std::string& name) {
  return emit(make_binary(fresh_name(name), op, a, b, provenance_));
}

Value Builder::compare(CompareOp op, const Value& a, const Value& b, const std::string& name) {
  return emit(make_compare(fresh_name(name), op, a, b, provenance_));
}

Value Builder::logical(LogicalOp op, const Value& a, const Value& b, const std::string& name) {
  return emit(make_logical(fresh_name(name), op, a, b, provenance_));
}

Value Builder::select(const Value& condition, const Value& if_true, const Value& if_false,
                      const std::string& name) {
  return emit(make_select(fresh_name(name), condition, if_true, if_false, provenance_));
}

Value Builder::cast(const Value& value, DType dtype, const std::string& name) {
  return emit(make_cast(fresh_name(name), value, dtype, provenance_));
}

std::vector<Value> Builder::for_loop(const std::string& var_name, int64_t extent,
                                     std::vector<Value> inits, const LoopBody& body,
                                     const std::vector<std::string>& result_names,
                                     const std::vector<std::string>& arg_names,
                                     const Value& trip_count) {
  // The For and its Yield get the provenance current at entry, whatever the body sets.
  const Provenance provenance = provenance_;
  auto name_at = [](const std::vector<std::string>& names, size_t i) {
    return i < names.size() ? names[i] : std::string();
  };
  Value var = make_value(fresh_name(var_name), index_scalar());
  std::vector<Value> carried;
  for (size_t i = 0; i < inits.size(); ++i) {
    carried.push_back(make_value(fresh_name(name_at(arg_names, i)), type_of(inits[i])));
  }
  regions_.emplace_back();
  std::vector<Value> yielded = body(var, carried);
  regions_.back().push_back(make_yield(std::move(yielded), provenance));
  RegionPtr region = make_region(std::move(regions_.back()));
  regions_.pop_back();
  std::vector<std::string> names;
  for (size_t i = 0; i < inits.size(); ++i) names.push_back(fresh_name(name_at(result_names, i)));
  OpPtr loop = make_for(std::move(names), std::move(var), extent, std::move(inits),
                        std::move(carried), std::move(region), provenance, trip_count);
  std::vector<Value> results = loop->results;
  regions_.back().push_back(std::move(loop));
  return results;
}

KernelPtr Builder::finish_kernel(std::string name, std::vector<Buffer> params) {
  KernelPtr kernel = make_kernel(std::move(name), std::move(params), std::move(grid_),
                                 make_region(std::move(regions_.front())));
  grid_.clear();
  regions_.assign(1, {});
  used_names_.clear();
  next_number_ = 0;
  return kernel;
}

}  // namespace nautilus::vrtile
