#include "core/vrtile/verifier.h"

#include <charconv>
#include <cmath>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/scalar/verifier.h"
#include "core/vrtile/printer.h"

namespace nautilus::vrtile {
namespace {

using scalar::BufferNode;
using scalar::BufferRole;

// The largest integer magnitude below which every integer is a double: index tiles are held as
// doubles by the interpreter, and constants beyond it would not denote one integer.
constexpr double kMaxExactInteger = 0x1p53;

// Shortest round-trip digits, with ".0" on integral values so they read as floats.
std::string number_text(double value) {
  char digits[32];
  const std::to_chars_result printed = std::to_chars(digits, digits + sizeof digits, value);
  std::string text(digits, printed.ptr);
  if (std::isfinite(value) && text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Walks each kernel once in program order, keeping the values visible at the current point.
// Before the walk, every definition in the kernel is collected so that a use that is not
// visible can be told apart: defined later (a use before definition), defined in a region that
// has been left (out of scope), or not defined in the kernel at all.
class Verifier {
 public:
  explicit Verifier(const Module& module) : module_(module) {}

  std::vector<std::string> run() {
    check_buffers();
    std::set<std::string> kernel_names;
    for (size_t i = 0; i < module_.kernels.size(); ++i) {
      const KernelPtr& kernel = module_.kernels[i];
      if (!kernel) {
        error("kernel #" + std::to_string(i) + " is null");
        continue;
      }
      if (!valid_name(kernel->name)) {
        error("kernel #" + std::to_string(i) + " has the invalid name '" + kernel->name +
              "' (letters, digits, _ and . only)");
      } else if (!kernel_names.insert(kernel->name).second) {
        error("kernel name " + kernel->name + " is used twice");
      }
      check_kernel(*kernel);
    }
    return std::move(errors_);
  }

 private:
  void error(std::string message) { errors_.push_back(std::move(message)); }
  void error_here(const std::string& message) { error(where_ + ": " + message); }

  // -------------------------------------------------------------------------------------------
  // 1. Module buffers: declared once, roles consistent with where they are declared, positive
  //    extents, a float element type.

  void check_buffers() {
    scalar::check_global_buffers(module_.params, module_.allocations, &declared_, &errors_);
  }

  // -------------------------------------------------------------------------------------------
  // 2. Kernels

  void check_kernel(const Kernel& kernel) {
    kernel_label_ = "kernel " + kernel.name;
    where_ = kernel_label_;
    params_.clear();
    definitions_.clear();
    defined_.clear();
    visible_.clear();
    names_.clear();

    for (size_t i = 0; i < kernel.params.size(); ++i) {
      const Buffer& buffer = kernel.params[i];
      if (!buffer) {
        error_here("param #" + std::to_string(i) + " is null");
        continue;
      }
      if (!declared_.count(buffer.get())) {
        error_here("param " + buffer->name +
                   (module_.find_buffer(buffer->name)
                        ? " is not the buffer the module declares under that name"
                        : " is not a buffer of module " + module_.name));
      }
      if (!params_.insert(buffer.get()).second) {
        error_here("param " + buffer->name + " is listed twice");
      }
    }

    if (kernel.launch) {
      const int warps = kernel.launch->warps;
      if (warps != 1 && warps != 2 && warps != 4 && warps != 8) {
        error_here("launches " + std::to_string(warps) + " warps; warps must be 1, 2, 4 or 8");
      }
      if (kernel.launch->stages < 1 || kernel.launch->stages > 8) {
        error_here("has " + std::to_string(kernel.launch->stages) +
                   " pipeline stages; stages must be between 1 and 8");
      }
      if (kernel.launch->consumers < 0 || kernel.launch->consumers > 3) {
        error_here("has " + std::to_string(kernel.launch->consumers) +
                   " consumer warpgroups; consumers must be 0 to 3");
      }
    }

    collect_definitions(kernel);
    std::vector<const ValueNode*> kernel_scope;
    for (size_t i = 0; i < kernel.grid.size(); ++i) {
      const GridAxis& axis = kernel.grid[i];
      const std::string label = "grid axis " + (axis.var ? axis.var->name : std::to_string(i));
      where_ = kernel_label_ + ": " + label;
      if (axis.extent <= 0) {
        error_here("has extent " + std::to_string(axis.extent) + "; grid extents must be positive");
      }
      if (axis.var && axis.var->type != index_scalar()) {
        error_here("variable has type " + type_text(axis.var->type) + "; grid variables are index");
      }
      define(axis.var, label, &kernel_scope);
    }
    where_ = kernel_label_;
    if (!kernel.body) {
      error_here("has no body");
      return;
    }
    check_region(*kernel.body, nullptr);
  }

  // Records the definer of every value defined anywhere in the kernel (first definition wins).
  void collect_definitions(const Kernel& kernel) {
    for (const GridAxis& axis : kernel.grid) {
      if (axis.var) definitions_.emplace(axis.var.get(), "grid axis " + axis.var->name);
    }
    if (kernel.body) collect_definitions(*kernel.body);
  }

  void collect_definitions(const Region& region) {
    for (const OpPtr& op : region.ops) {
      if (!op) continue;
      const std::string label = op_label(*op);
      for (const Value& result : op->results) {
        if (result) definitions_.emplace(result.get(), label);
      }
      if (op->kind != OpKind::For) continue;
      if (op->loop_var) definitions_.emplace(op->loop_var.get(), label);
      for (const Value& arg : op->block_args) {
        if (arg) definitions_.emplace(arg.get(), label + " (block argument)");
      }
      if (op->body) collect_definitions(*op->body);
    }
  }

  // Makes `value` visible from here to the end of the region owning `scope`.
  void define(const Value& value, const std::string& definer,
              std::vector<const ValueNode*>* scope) {
    if (!value) {
      error_here("defines a null value");
      return;
    }
    auto [previous, inserted] = defined_.emplace(value.get(), definer);
    if (!inserted) {
      error_here("%" + value->name + " is defined twice (by " + previous->second + " and by " +
                 definer + ")");
      return;
    }
    if (!valid_name(value->name)) {
      error_here("value name '" + value->name + "' is invalid (letters, digits, _ and . only)");
    } else if (!names_.emplace(value->name, value.get()).second) {
      error_here("name %" + value->name + " is given to two different values");
    }
    for (size_t axis = 0; axis < value->type.shape.size(); ++axis) {
      if (value->type.shape[axis] <= 0) {
        error_here("%" + value->name + " has type " + type_text(value->type) +
                   "; tile extents must be positive");
        break;
      }
    }
    visible_.insert(value.get());
    scope->push_back(value.get());
  }

  // Checks a use of `value` as the operand described by `role`; returns whether it can be
  // type-checked (it is not null).
  bool use(const Value& value, const std::string& role) {
    if (!value) {
      error_here(role + " is null");
      return false;
    }
    if (visible_.count(value.get())) return true;
    auto definition = definitions_.find(value.get());
    if (definition == definitions_.end()) {
      error_here(role + " %" + value->name + " is not defined in " + kernel_label_);
    } else if (!defined_.count(value.get())) {
      error_here(role + " %" + value->name + " is used before its definition (by " +
                 definition->second + ")");
    } else {
      error_here(role + " %" + value->name + " (defined by " + definition->second +
                 ") is used outside its scope");
    }
    return true;
  }

  // Checks every operand; returns whether all are non-null.
  bool use_operands(const Op& op) {
    bool all = true;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      all &= use(op.operands[i], "operand " + std::to_string(i));
    }
    return all;
  }

  // `loop` is the For whose body this region is, or null for the kernel body.
  void check_region(const Region& region, const Op* loop) {
    std::vector<const ValueNode*> scope;
    for (size_t i = 0; i < region.ops.size(); ++i) {
      const OpPtr& op = region.ops[i];
      if (!op) {
        error_here("op #" + std::to_string(i) + " is null");
        continue;
      }
      if (op->kind == OpKind::Yield) {
        where_ = kernel_label_ + ": yield";
        if (!loop) {
          error_here("appears outside a for body");
        } else if (i + 1 != region.ops.size()) {
          error_here("is not the last op of the body of " + op_label(*loop));
        } else {
          check_yield(*op, *loop);
        }
      } else {
        check_op(*op, &scope);
      }
    }
    if (loop && (region.ops.empty() || !region.ops.back() ||
                 region.ops.back()->kind != OpKind::Yield)) {
      where_ = kernel_label_ + ": " + op_label(*loop);
      error_here("body does not end with a yield");
    }
    for (const ValueNode* value : scope) visible_.erase(value);
  }

  // -------------------------------------------------------------------------------------------
  // 3. Operations

  void check_op(const Op& op, std::vector<const ValueNode*>* scope) {
    const std::string label = op_label(op);
    where_ = kernel_label_ + ": " + label;
    const bool operands_present = use_operands(op);
    const size_t expected_results =
        op.kind == OpKind::Store ? 0 : op.kind == OpKind::For ? op.operands.size() : 1;
    bool results_present = op.results.size() == expected_results;
    if (!results_present) {
      error_here("has " + std::to_string(op.results.size()) + " results; " +
                 op_kind_name(op.kind) + " has " + std::to_string(expected_results));
    }
    for (const Value& result : op.results) results_present &= result != nullptr;
    if (op.kind == OpKind::For) {
      check_for(op, operands_present, results_present);
    } else if (operands_present && results_present) {
      check_types(op);
    }
    where_ = kernel_label_ + ": " + label;
    for (const Value& result : op.results) define(result, label, scope);
  }

  // The result (there is exactly one; check_op made sure) has type `expected`.
  void expect_result(const Op& op, const TileType& expected) {
    const TileType& actual = op.results.front()->type;
    if (actual != expected) {
      error_here("result has type " + type_text(actual) + "; expected " +
                 type_text(expected));
    }
  }

  bool expect_operand_count(const Op& op, size_t low, size_t high, const std::string& what) {
    if (op.operands.size() >= low && op.operands.size() <= high) return true;
    error_here("has " + std::to_string(op.operands.size()) + " operands; " +
               op_kind_name(op.kind) + " takes " + what);
    return false;
  }

  void check_types(const Op& op) {
    switch (op.kind) {
      case OpKind::Load:
      case OpKind::Store: return check_access(op);
      case OpKind::Dot: return check_dot(op);
      case OpKind::Reduce: return check_reduce(op);
      case OpKind::Broadcast: return check_broadcast(op);
      case OpKind::Permute: return check_permute(op);
      case OpKind::Iota:
        if (!expect_operand_count(op, 0, 0, "none")) return;
        if (op.extent <= 0) {
          error_here("has extent " + std::to_string(op.extent) + "; iota extents must be positive");
        }
        return expect_result(op, TileType{DType::Index, {op.extent}});
      case OpKind::Full: return check_full(op);
      case OpKind::Unary:
      case OpKind::Binary:
      case OpKind::Compare:
      case OpKind::Logical:
      case OpKind::Select:
      case OpKind::Cast: return check_elementwise(op);
      case OpKind::For:
      case OpKind::Yield: return;  // checked with their loop
    }
  }

  // Load: indices..., [mask]; Store: indices..., value, [mask].
  void check_access(const Op& op) {
    const bool store = op.kind == OpKind::Store;
    const size_t minimum = (store ? 1 : 0) + (op.has_mask ? 1 : 0);
    if (op.operands.size() < minimum) {
      error_here("has " + std::to_string(op.operands.size()) + " operands; a masked " +
                 op_kind_name(op.kind) + " needs at least " + std::to_string(minimum));
      return;
    }
    if (!op.buffer) {
      error_here("has no buffer");
      return;
    }
    const BufferNode& buffer = *op.buffer;
    if (!params_.count(&buffer)) {
      error_here("buffer " + buffer.name + " is not a param of " + kernel_label_);
    }
    if (store && buffer.role == BufferRole::Input) {
      error_here("stores into input buffer " + buffer.name);
    }
    const std::vector<Value> indices = access_indices(op);
    if (indices.size() != buffer.shape.size()) {
      error_here(buffer.name + " has rank " + std::to_string(buffer.shape.size()) +
                 " but is accessed with " + std::to_string(indices.size()) + " indices");
    }
    // Every index, the mask and the value share one shape: the first index's, else the value's
    // or the mask's (a rank-0 buffer has no indices).
    const Value mask = access_mask(op);
    const Value value = store ? stored_value(op) : nullptr;
    const Value& reference = !indices.empty() ? indices.front() : value ? value : mask;
    const std::vector<int64_t> shape = reference ? reference->type.shape : std::vector<int64_t>{};
    for (size_t i = 0; i < indices.size(); ++i) {
      const TileType& type = indices[i]->type;
      if (type.dtype != DType::Index) {
        error_here("index " + std::to_string(i) + " %" + indices[i]->name + " has dtype " +
                   dtype_name(type.dtype) + "; indices are index tiles");
      }
      if (type.shape != shape) {
        error_here("index " + std::to_string(i) + " %" + indices[i]->name + " has type " +
                   type_text(type) + "; the indices of an access share one shape");
      }
    }
    if (mask) {
      if (mask->type != TileType{DType::Bool, shape}) {
        error_here("mask %" + mask->name + " has type " + type_text(mask->type) +
                   "; expected " + type_text(TileType{DType::Bool, shape}));
      }
    }
    if (store) {
      const TileType expected{buffer.dtype, shape};
      if (value->type != expected) {
        error_here("value %" + value->name + " has type " + type_text(value->type) +
                   "; expected " + type_text(expected) +
                   " (the buffer's dtype at the indices' shape; conversions are explicit casts)");
      }
    } else {
      expect_result(op, TileType{buffer.dtype, shape});
    }
  }

  void check_dot(const Op& op) {
    if (!expect_operand_count(op, 2, 3, "a, b and an optional accumulator")) return;
    const TileType& a = op.operands[0]->type;
    const TileType& b = op.operands[1]->type;
    if (a.rank() != 2 || b.rank() != 2) {
      error_here("operands have types " + type_text(a) + " and " + type_text(b) +
                 "; dot takes [M, K] and [K, N] tiles");
      return;
    }
    if (a.shape[1] != b.shape[0]) {
      error_here("operands have types " + type_text(a) + " and " + type_text(b) +
                 "; the K extents differ");
    }
    const bool mma_dtype =
        a.dtype == DType::F16 || a.dtype == DType::BF16 || a.dtype == DType::F32;
    if (a.dtype != b.dtype || !mma_dtype) {
      error_here("operands have dtypes " + std::string(dtype_name(a.dtype)) + " and " +
                 dtype_name(b.dtype) + "; dot takes f16, bf16 or f32 operands of one dtype");
    }
    const TileType expected{DType::F32, {a.shape[0], b.shape[1]}};
    if (op.operands.size() == 3 && op.operands[2]->type != expected) {
      error_here("accumulator %" + op.operands[2]->name + " has type " +
                 type_text(op.operands[2]->type) + "; expected " + type_text(expected));
    }
    expect_result(op, expected);
  }

  void check_reduce(const Op& op) {
    if (!expect_operand_count(op, 1, 1, "one operand")) return;
    const TileType& source = op.operands[0]->type;
    if (!is_float(source.dtype)) {
      error_here("reduces a " + std::string(dtype_name(source.dtype)) +
                 " tile; reductions take float tiles");
    }
    if (op.axis < 0 || op.axis >= source.rank()) {
      error_here("axis " + std::to_string(op.axis) + " is out of range for " +
                 type_text(source));
      return;
    }
    TileType expected = source;
    expected.shape.erase(expected.shape.begin() + op.axis);
    expect_result(op, expected);
  }

  void check_broadcast(const Op& op) {
    if (!expect_operand_count(op, 1, 1, "one operand")) return;
    const TileType& source = op.operands[0]->type;
    const TileType& result = op.results.front()->type;
    if (result.dtype != source.dtype) {
      error_here("result has dtype " + std::string(dtype_name(result.dtype)) +
                 "; broadcast keeps the operand's " + dtype_name(source.dtype));
    }
    if (static_cast<int>(op.dims.size()) != source.rank()) {
      error_here("has " + std::to_string(op.dims.size()) + " dims for an operand of rank " +
                 std::to_string(source.rank()) + "; one result axis per operand axis");
      return;
    }
    for (size_t i = 0; i < op.dims.size(); ++i) {
      const int dim = op.dims[i];
      if (dim < 0 || dim >= result.rank()) {
        error_here("dims[" + std::to_string(i) + "] = " + std::to_string(dim) +
                   " is out of range for result " + type_text(result));
        continue;
      }
      if (i > 0 && dim <= op.dims[i - 1]) {
        error_here("dims must be strictly increasing; dims[" + std::to_string(i) + "] = " +
                   std::to_string(dim) + " follows " + std::to_string(op.dims[i - 1]));
      }
      if (result.shape[static_cast<size_t>(dim)] != source.shape[i]) {
        error_here("operand axis " + std::to_string(i) + " of " + type_text(source) +
                   " maps to result axis " + std::to_string(dim) + " of " +
                   type_text(result) + " with a different extent");
      }
    }
  }

  void check_permute(const Op& op) {
    if (!expect_operand_count(op, 1, 1, "one operand")) return;
    const TileType& source = op.operands[0]->type;
    std::vector<bool> seen(static_cast<size_t>(source.rank()), false);
    bool permutation = static_cast<int>(op.dims.size()) == source.rank();
    for (int axis : op.dims) {
      if (!permutation) break;
      if (axis < 0 || axis >= source.rank() || seen[static_cast<size_t>(axis)]) {
        permutation = false;
      } else {
        seen[static_cast<size_t>(axis)] = true;
      }
    }
    if (!permutation) {
      std::string order;
      for (size_t i = 0; i < op.dims.size(); ++i) {
        order += (i ? ", " : "") + std::to_string(op.dims[i]);
      }
      error_here("order [" + order + "] is not a permutation of the axes of " +
                 type_text(source));
      return;
    }
    TileType expected{source.dtype, {}};
    for (int axis : op.dims) expected.shape.push_back(source.shape[static_cast<size_t>(axis)]);
    expect_result(op, expected);
  }

  void check_full(const Op& op) {
    if (!expect_operand_count(op, 0, 0, "none")) return;
    const DType dtype = op.results.front()->type.dtype;
    const double value = op.constant;
    if (dtype == DType::Index &&
        !(std::isfinite(value) && value == std::trunc(value) &&
          std::fabs(value) <= kMaxExactInteger)) {
      error_here("constant " + number_text(value) +
                 " is not an index (an integer of magnitude at most 2^53)");
    }
    if (dtype == DType::Bool && value != 0.0 && value != 1.0) {
      error_here("constant " + number_text(value) + " is not a bool (0 or 1)");
    }
  }

  void check_elementwise(const Op& op) {
    const size_t arity = op.kind == OpKind::Select                          ? 3
                         : op.kind == OpKind::Unary || op.kind == OpKind::Cast ? 1
                                                                              : 2;
    if (!expect_operand_count(op, arity, arity, std::to_string(arity) + " operands")) return;
    const TileType& a = op.operands[0]->type;
    const DType dtype = a.dtype;
    switch (op.kind) {
      case OpKind::Unary: {
        const bool index_ok = op.unary_op == UnaryOp::Neg || op.unary_op == UnaryOp::Abs;
        if (!is_float(dtype) && !(index_ok && dtype == DType::Index)) {
          error_here(std::string(scalar::unary_op_name(op.unary_op)) + " of " +
                     dtype_name(dtype) +
                     (index_ok ? "; needs a float or index operand" : "; needs a float operand"));
        }
        return expect_result(op, a);
      }
      case OpKind::Binary: {
        if (!same_operand_types(op, 0, 1)) return;
        const char* name = scalar::binary_op_name(op.binary_op);
        switch (op.binary_op) {
          case BinaryOp::Div:
            if (!is_float(dtype)) {
              error_here(std::string(name) + " of " + dtype_name(dtype) +
                         "; index division is floordiv");
            }
            break;
          case BinaryOp::FloorDiv:
          case BinaryOp::Mod:
            if (dtype != DType::Index) {
              error_here(std::string(name) + " of " + dtype_name(dtype) +
                         "; floordiv and mod are index operations");
            }
            break;
          case BinaryOp::Add:
          case BinaryOp::Sub:
          case BinaryOp::Mul:
          case BinaryOp::Max:
          case BinaryOp::Min:
            if (dtype == DType::Bool) {
              error_here(std::string(name) + " of bool; arithmetic needs float or index "
                                             "operands (logical ops take bool)");
            }
            break;
        }
        return expect_result(op, a);
      }
      case OpKind::Compare:
        if (!same_operand_types(op, 0, 1)) return;
        if (dtype == DType::Bool) error_here("compares bool tiles; comparisons take float or index");
        return expect_result(op, TileType{DType::Bool, a.shape});
      case OpKind::Logical:
        if (!same_operand_types(op, 0, 1)) return;
        if (dtype != DType::Bool) {
          error_here(std::string(scalar::logical_op_name(op.logical_op)) + " of " +
                     dtype_name(dtype) + "; logical ops take bool tiles");
        }
        return expect_result(op, a);
      case OpKind::Select: {
        if (dtype != DType::Bool) {
          error_here("condition %" + op.operands[0]->name + " has dtype " + dtype_name(dtype) +
                     "; select conditions are bool");
        }
        if (!same_operand_types(op, 1, 2)) return;
        const TileType& chosen = op.operands[1]->type;
        if (a.shape != chosen.shape) {
          error_here("condition has type " + type_text(a) + " but the values have type " +
                     type_text(chosen) + "; element-wise operands share one shape");
        }
        return expect_result(op, chosen);
      }
      case OpKind::Cast: return expect_result(op, TileType{op.results.front()->type.dtype, a.shape});
      default: return;
    }
  }

  bool same_operand_types(const Op& op, size_t i, size_t j) {
    const TileType& a = op.operands[i]->type;
    const TileType& b = op.operands[j]->type;
    if (a == b) return true;
    error_here("operands %" + op.operands[i]->name + " : " + type_text(a) + " and %" +
               op.operands[j]->name + " : " + type_text(b) +
               " differ; element-wise operands have equal types (broadcast explicitly)");
    return false;
  }

  // -------------------------------------------------------------------------------------------
  // 4. Loops

  void check_for(const Op& loop, bool inits_present, bool results_present) {
    if (loop.trip_count && use(loop.trip_count, "trip count") &&
        loop.trip_count->type != index_scalar()) {
      error_here("trip count %" + loop.trip_count->name + " has type " +
                 type_text(loop.trip_count->type) + "; trip counts are index");
    }
    if (loop.extent < 0) {
      error_here("has extent " + std::to_string(loop.extent) + "; trip counts are not negative");
    }
    if (loop.block_args.size() != loop.operands.size()) {
      error_here("has " + std::to_string(loop.operands.size()) + " iter_args but " +
                 std::to_string(loop.block_args.size()) + " block arguments");
    }
    if (inits_present) {
      for (size_t i = 0; i < loop.operands.size(); ++i) {
        const TileType& init = loop.operands[i]->type;
        if (i < loop.block_args.size() && loop.block_args[i] &&
            loop.block_args[i]->type != init) {
          error_here("block argument %" + loop.block_args[i]->name + " has type " +
                     type_text(loop.block_args[i]->type) + " but its initial value has " +
                     type_text(init));
        }
        if (results_present && i < loop.results.size() && loop.results[i]->type != init) {
          error_here("result %" + loop.results[i]->name + " has type " +
                     type_text(loop.results[i]->type) + " but its initial value has " +
                     type_text(init));
        }
      }
    }
    // The loop variable and block arguments are visible in the body only.
    const std::string label = op_label(loop);
    std::vector<const ValueNode*> body_scope;
    if (loop.loop_var && loop.loop_var->type != index_scalar()) {
      error_here("loop variable has type " + type_text(loop.loop_var->type) +
                 "; loop variables are index");
    }
    define(loop.loop_var, label, &body_scope);
    for (const Value& arg : loop.block_args) define(arg, label + " (block argument)", &body_scope);
    if (!loop.body) {
      error_here("has no body");
    } else {
      check_region(*loop.body, &loop);
    }
    for (const ValueNode* value : body_scope) visible_.erase(value);
  }

  void check_yield(const Op& yield, const Op& loop) {
    where_ = kernel_label_ + ": yield of " + op_label(loop);
    const bool present = use_operands(yield);
    if (!yield.results.empty()) error_here("has results; yield has none");
    if (yield.operands.size() != loop.operands.size()) {
      error_here("yields " + std::to_string(yield.operands.size()) + " values but the loop has " +
                 std::to_string(loop.operands.size()) + " iter_args");
      return;
    }
    if (!present) return;
    for (size_t i = 0; i < yield.operands.size(); ++i) {
      const Value& init = loop.operands[i];
      if (init && yield.operands[i]->type != init->type) {
        error_here("value " + std::to_string(i) + " %" + yield.operands[i]->name + " has type " +
                   type_text(yield.operands[i]->type) + " but iter_arg " + std::to_string(i) +
                   " has " + type_text(init->type));
      }
    }
  }

  const Module& module_;
  std::vector<std::string> errors_;
  std::string where_;         // prefixes every message: the kernel and the op being checked
  std::string kernel_label_;  // "kernel attention"
  std::unordered_set<const BufferNode*> declared_;  // the module's buffers
  std::unordered_set<const BufferNode*> params_;    // the current kernel's params
  // The current kernel's values: every definition (collected before the walk), those defined
  // so far in the walk with their definer, those visible at the current point, and names.
  std::unordered_map<const ValueNode*, std::string> definitions_;
  std::unordered_map<const ValueNode*, std::string> defined_;
  std::unordered_set<const ValueNode*> visible_;
  std::unordered_map<std::string, const ValueNode*> names_;
};

}  // namespace

std::vector<std::string> verify(const Module& module) { return Verifier(module).run(); }

}  // namespace nautilus::vrtile
