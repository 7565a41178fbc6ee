#include "core/vrtile/interpreter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/scalar/interpreter_support.h"
#include "core/support/launch_order.h"
#include "core/vrtile/printer.h"
#include "core/vrtile/verifier.h"

namespace nautilus::vrtile {
namespace {

using scalar::detail::apply_float_binary;
using scalar::detail::apply_unary;
using scalar::detail::bracketed;
using scalar::detail::BufferState;
using scalar::detail::compare_values;
using scalar::detail::floor_divide;
using scalar::detail::FloorDivision;
using scalar::detail::round_value;
using scalar::detail::row_major_strides;
using scalar::detail::RuntimeError;
using scalar::detail::unflatten;
namespace detail = scalar::detail;

// How the interpreter works:
//   1. The module is verified; a malformed module is reported, never executed.
//   2. Inputs are checked against the parameter buffers and rounded to their dtypes; outputs and
//      intermediates start unwritten (NaN, with a written flag per element).
//   3. Each kernel is compiled into a tree of OpCodes: every value gets a slot (a dense tile),
//      every buffer an index with precomputed strides, so executing touches no maps.
//   4. The kernel body runs once per grid point; any error (out of bounds, unwritten read,
//      budget, ...) unwinds with a RuntimeError that becomes InterpretResult::error.
//   5. Outputs must be completely written; they and the intermediates are returned.

// The most elements the interpreter allocates in one tile (over all buffers: kMaxTotalElements):
// far beyond the small shapes interpreters run on. Refusing up front beats being killed for
// memory halfway through, and keeps every flat offset far inside int64.
constexpr int64_t kMaxTileElements = int64_t{1} << 26;

// Index tiles are held as doubles, which hold every integer of magnitude up to 2^53 exactly.
constexpr int64_t kMaxIndexMagnitude = int64_t{1} << 53;

using Tile = std::vector<double>;

struct OpCode {
  const Op* op = nullptr;
  std::vector<int32_t> operands;
  std::vector<int32_t> results;
  int32_t buffer = -1;  // Load / Store
  // Broadcast / Permute: for every result axis, the operand's stride along it (0: replicated).
  std::vector<int64_t> gather_strides;
  // For
  int32_t loop_var = -1;
  int32_t trip_count = -1;  // -1: none
  std::vector<int32_t> block_args;
  std::vector<OpCode> body;  // the last one is the Yield
};

std::string number_text(double value) {
  char digits[32];
  const std::to_chars_result printed = std::to_chars(digits, digits + sizeof digits, value);
  return std::string(digits, printed.ptr);
}

class Interpreter {
 public:
  Interpreter(const Module& module, const InterpretOptions& options)
      : module_(module),
        step_limit_(options.max_steps == 0 ? std::numeric_limits<uint64_t>::max()
                                            : options.max_steps) {}

  InterpretResult run(const TensorMap& inputs) {
    InterpretResult result =
        detail::run_guarded<InterpretResult>("module", module_.name, [&](InterpretResult& r) {
          detail::check_verified(verify(module_), "module");
          globals_.allocate(module_.params, module_.allocations, inputs,
                            [](const scalar::BufferNode& buffer) {
                              return TileType{buffer.dtype, buffer.shape}.element_count();
                            });
          for (const KernelPtr& kernel : module_.kernels) run_kernel(*kernel);
          globals_.collect(&r.outputs, &r.intermediates);
        });
    result.steps = steps_;
    return result;
  }

 private:
  // -------------------------------------------------------------------------------------------
  // 3. Compilation of a kernel into OpCodes with value slots

  int32_t new_slot(const Value& value) {
    if (value->type.element_count() > kMaxTileElements) {
      throw RuntimeError{"kernel " + kernel_->name + ": tile %" + value->name + " of type " +
                         type_text(value->type) + " is larger than the interpreter's limit of " +
                         std::to_string(kMaxTileElements) + " elements"};
    }
    const int32_t slot = static_cast<int32_t>(slots_.size());
    slots_.emplace_back();
    slot_types_.push_back(&value->type);
    slot_of_.emplace(value.get(), slot);
    return slot;
  }

  // The verifier guarantees every operand is defined before its use.
  int32_t slot_of(const Value& value) const { return slot_of_.at(value.get()); }

  std::vector<OpCode> compile_region(const Region& region) {
    std::vector<OpCode> codes;
    codes.reserve(region.ops.size());
    for (const OpPtr& op : region.ops) codes.push_back(compile_op(*op));
    return codes;
  }

  OpCode compile_op(const Op& op) {
    OpCode code;
    code.op = &op;
    for (const Value& operand : op.operands) code.operands.push_back(slot_of(operand));
    if (op.buffer) code.buffer = globals_.index.at(op.buffer.get());
    if (op.kind == OpKind::Broadcast || op.kind == OpKind::Permute) {
      const std::vector<int64_t> source_strides =
          row_major_strides(op.operands.front()->type.shape);
      code.gather_strides.assign(op.results.front()->type.shape.size(), 0);
      for (size_t i = 0; i < op.dims.size(); ++i) {
        // Broadcast: operand axis i is result axis dims[i]; Permute: result axis i is operand
        // axis order[i].
        if (op.kind == OpKind::Broadcast) {
          code.gather_strides[static_cast<size_t>(op.dims[i])] = source_strides[i];
        } else {
          code.gather_strides[i] = source_strides[static_cast<size_t>(op.dims[i])];
        }
      }
    }
    if (op.kind == OpKind::For) {
      if (op.trip_count) code.trip_count = slot_of(op.trip_count);
      code.loop_var = new_slot(op.loop_var);
      for (const Value& arg : op.block_args) code.block_args.push_back(new_slot(arg));
      code.body = compile_region(*op.body);
    }
    for (const Value& result : op.results) code.results.push_back(new_slot(result));
    return code;
  }

  // -------------------------------------------------------------------------------------------
  // 4. Execution

  void run_kernel(const Kernel& kernel) {
    kernel_ = &kernel;
    current_ = nullptr;
    slots_.clear();
    slot_types_.clear();
    slot_of_.clear();
    std::vector<int32_t> grid_slots;
    for (const GridAxis& axis : kernel.grid) grid_slots.push_back(new_slot(axis.var));
    const std::vector<OpCode> body = compile_region(*kernel.body);

    grid_point_.assign(kernel.grid.size(), 0);
    const int group = kernel.launch ? kernel.launch->group : 1;
    // Grid axes launched from their last tile down (tile_order reverse=LOOP), by loop name.
    uint32_t reversed = 0;
    for (size_t d = 0; kernel.launch && d < kernel.grid.size() && d < 32; ++d) {
      const std::vector<std::string>& names = kernel.launch->reversed;
      if (kernel.grid[d].var &&
          std::find(names.begin(), names.end(), kernel.grid[d].var->name) != names.end()) {
        reversed |= uint32_t{1} << d;
      }
    }
    if ((group > 1 && kernel.grid.size() >= 2) || reversed != 0) {
      run_in_tile_order(kernel, group, reversed, grid_slots, body);
      kernel_ = nullptr;
      return;
    }
    while (true) {
      for (size_t d = 0; d < grid_slots.size(); ++d) {
        slots_[grid_slots[d]].assign(1, static_cast<double>(grid_point_[d]));
      }
      for (const OpCode& code : body) exec(code);
      // Row-major odometer over the grid: the last axis varies fastest.
      size_t d = grid_point_.size();
      while (d > 0 && ++grid_point_[d - 1] == kernel.grid[d - 1].extent) grid_point_[--d] = 0;
      if (d == 0) break;
    }
    kernel_ = nullptr;
  }

  // A kernel with a grouped tile order (the schedule's tile_order) runs its grid points in the
  // order the GPU launches them (core/support/launch_order.h), and checks that the order
  // visits every point once: a point visited twice would compute a tile twice and leave another
  // unwritten.
  void run_in_tile_order(const Kernel& kernel, int group, uint32_t reversed,
                         const std::vector<int32_t>& grid_slots, const std::vector<OpCode>& body) {
    std::vector<int64_t> extents;
    int64_t points = 1;
    for (const GridAxis& axis : kernel.grid) {
      extents.push_back(axis.extent);
      points *= axis.extent;
    }
    std::vector<bool> visited(static_cast<size_t>(points), false);
    for (int64_t launched = 0; launched < points; ++launched) {
      const std::vector<int64_t> point =
          grid_point_in_launch_order(launched, extents, group, reversed);
      int64_t row_major = 0;
      for (size_t d = 0; d < point.size(); ++d) {
        grid_point_[d] = point[d];
        row_major = row_major * extents[d] + point[d];
      }
      if (visited[static_cast<size_t>(row_major)]) {
        throw error("the tile order (group " + std::to_string(group) +
                    ") visits this grid point twice (CTA " + std::to_string(launched) + ")");
      }
      visited[static_cast<size_t>(row_major)] = true;
      for (size_t d = 0; d < grid_slots.size(); ++d) {
        slots_[grid_slots[d]].assign(1, static_cast<double>(grid_point_[d]));
      }
      for (const OpCode& code : body) exec(code);
    }
  }

  void count_steps(uint64_t steps) {
    steps_ += steps;
    if (steps_ > step_limit_) {
      throw error("exceeds the step budget of " + std::to_string(step_limit_) + " steps");
    }
  }

  const Tile& operand(const OpCode& code, size_t i) const { return slots_[code.operands[i]]; }
  const TileType& operand_type(const OpCode& code, size_t i) const {
    return *slot_types_[code.operands[i]];
  }

  // The result tile of a single-result op, sized for its type.
  Tile& result(const OpCode& code) {
    Tile& tile = slots_[code.results.front()];
    tile.resize(static_cast<size_t>(slot_types_[code.results.front()]->element_count()));
    return tile;
  }

  const TileType& result_type(const OpCode& code) const {
    return *slot_types_[code.results.front()];
  }

  void exec(const OpCode& code) {
    current_ = code.op;
    const Op& op = *code.op;
    switch (op.kind) {
      case OpKind::Load: return exec_access(code, false);
      case OpKind::Store: return exec_access(code, true);
      case OpKind::Dot: return exec_dot(code);
      case OpKind::Reduce: return exec_reduce(code);
      case OpKind::Broadcast:
      case OpKind::Permute: return exec_gather(code);
      case OpKind::Iota: {
        Tile& out = result(code);
        count_steps(out.size());
        for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(i);
        return;
      }
      case OpKind::Full: {
        Tile& out = result(code);
        count_steps(out.size());
        out.assign(out.size(), round_to(result_type(code).dtype, op.constant));
        return;
      }
      case OpKind::Unary: return exec_unary(code);
      case OpKind::Binary: return exec_binary(code);
      case OpKind::Compare: return exec_compare(code);
      case OpKind::Logical: {
        const Tile &a = operand(code, 0), &b = operand(code, 1);
        Tile& out = result(code);
        count_steps(out.size());
        const bool conjunction = op.logical_op == LogicalOp::And;
        for (size_t i = 0; i < out.size(); ++i) {
          const bool x = a[i] != 0.0, y = b[i] != 0.0;
          out[i] = (conjunction ? x && y : x || y) ? 1.0 : 0.0;
        }
        return;
      }
      case OpKind::Select: {
        const Tile &c = operand(code, 0), &a = operand(code, 1), &b = operand(code, 2);
        Tile& out = result(code);
        count_steps(out.size());
        for (size_t i = 0; i < out.size(); ++i) out[i] = c[i] != 0.0 ? a[i] : b[i];
        return;
      }
      case OpKind::Cast: return exec_cast(code);
      case OpKind::For: return exec_for(code);
      case OpKind::Yield: return;  // executed by its For
    }
  }

  // Load and Store: indices..., [value], [mask]. Elements where the mask is false are not
  // accessed at all, so their indices may lie anywhere.
  void exec_access(const OpCode& code, bool store) {
    const Op& op = *code.op;
    BufferState& buffer = globals_.buffers[code.buffer];
    const size_t rank = buffer.node->shape.size();
    const Tile* mask = op.has_mask ? &slots_[code.operands.back()] : nullptr;
    const Tile* value = store ? &slots_[code.operands[rank]] : nullptr;
    // The tile's shape: the indices', which equals the value's and the mask's (verified).
    const TileType& tile_type = store ? operand_type(code, rank) : result_type(code);
    const int64_t count = tile_type.element_count();
    Tile* out = store ? nullptr : &result(code);
    const double other = round_to(buffer.node->dtype, op.constant);
    count_steps(static_cast<uint64_t>(count));
    for (int64_t e = 0; e < count; ++e) {
      if (mask && (*mask)[e] == 0.0) {
        if (out) (*out)[e] = other;
        continue;
      }
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d) {
        const double index = slots_[code.operands[d]][e];
        if (!(index >= 0 && index < static_cast<double>(buffer.node->shape[d]))) {
          throw error(std::string(store ? "writes " : "reads ") + buffer.node->name +
                      element_indices(code, e, rank) + " outside its shape " +
                      bracketed(buffer.node->shape) + " (tile element " +
                      bracketed(unflatten(tile_type.shape, e)) + ")");
        }
        offset += static_cast<int64_t>(index) * buffer.strides[d];
      }
      if (store) {
        buffer.values[offset] = (*value)[e];
        buffer.written[offset] = 1;
      } else {
        if (!buffer.written.empty() && !buffer.written[offset]) {
          throw error("reads " + buffer.node->name + element_indices(code, e, rank) +
                      " before it was written (tile element " +
                      bracketed(unflatten(tile_type.shape, e)) + ")");
        }
        (*out)[e] = buffer.values[offset];
      }
    }
  }

  // "[0, 1, 12, 3]": the global element tile element `e` of an access addresses.
  std::string element_indices(const OpCode& code, int64_t e, size_t rank) const {
    std::string text = "[";
    for (size_t d = 0; d < rank; ++d) {
      if (d) text += ", ";
      text += number_text(slots_[code.operands[d]][e]);
    }
    return text + "]";
  }

  // acc[m, n] (or 0), then one f32 fused multiply-add per k in increasing order. fmaf is exact
  // here: f16, bf16 and f32 values are all floats.
  void exec_dot(const OpCode& code) {
    const Tile &a = operand(code, 0), &b = operand(code, 1);
    const Tile* acc = code.operands.size() == 3 ? &operand(code, 2) : nullptr;
    const TileType& a_type = operand_type(code, 0);
    const int64_t M = a_type.shape[0], K = a_type.shape[1];
    const int64_t N = operand_type(code, 1).shape[1];
    Tile& out = result(code);
    count_steps(static_cast<uint64_t>(M) * static_cast<uint64_t>(N) * static_cast<uint64_t>(K));
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        float sum = acc ? static_cast<float>((*acc)[m * N + n]) : 0.0f;
        for (int64_t k = 0; k < K; ++k) {
          sum = std::fmaf(static_cast<float>(a[m * K + k]), static_cast<float>(b[k * N + n]), sum);
        }
        out[m * N + n] = sum;
      }
    }
  }

  // Along the axis in increasing index order from the identity, rounding each step; max/min
  // ignore NaN operands (fmax/fmin), as the scalar interpreter and fmaxf do.
  void exec_reduce(const OpCode& code) {
    const Op& op = *code.op;
    const Tile& source = operand(code, 0);
    const TileType& type = operand_type(code, 0);
    const size_t axis = static_cast<size_t>(op.axis);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= type.shape[d];
    for (size_t d = axis + 1; d < type.shape.size(); ++d) inner *= type.shape[d];
    const int64_t length = type.shape[axis];
    Tile& out = result(code);
    count_steps(source.size());
    const double identity = op.reduce_op == ReduceOp::Sum   ? 0.0
                            : op.reduce_op == ReduceOp::Max ? -INFINITY
                                                            : INFINITY;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        double value = identity;
        for (int64_t j = 0; j < length; ++j) {
          const double x = source[(o * length + j) * inner + i];
          switch (op.reduce_op) {
            case ReduceOp::Sum: value = round_value(type.dtype, value + x); break;
            case ReduceOp::Max: value = std::fmax(value, x); break;
            case ReduceOp::Min: value = std::fmin(value, x); break;
          }
        }
        out[o * inner + i] = value;
      }
    }
  }

  // Broadcast and Permute: every result element reads the operand element whose offset is the
  // dot product of the result coordinates with gather_strides.
  void exec_gather(const OpCode& code) {
    const Tile& source = operand(code, 0);
    const std::vector<int64_t>& shape = result_type(code).shape;
    Tile& out = result(code);
    count_steps(out.size());
    std::vector<int64_t> coordinates(shape.size(), 0);
    int64_t offset = 0;
    for (size_t e = 0; e < out.size(); ++e) {
      out[e] = source[offset];
      // Advance the row-major odometer, keeping the source offset in step.
      for (size_t d = shape.size(); d-- > 0;) {
        offset += code.gather_strides[d];
        if (++coordinates[d] < shape[d]) break;
        offset -= code.gather_strides[d] * shape[d];
        coordinates[d] = 0;
      }
    }
  }

  void exec_unary(const OpCode& code) {
    const UnaryOp op = code.op->unary_op;
    const Tile& a = operand(code, 0);
    const DType dtype = result_type(code).dtype;
    Tile& out = result(code);
    count_steps(out.size());
    if (dtype == DType::Index) {  // neg or abs (verified)
      for (size_t i = 0; i < out.size(); ++i) {
        // Exact on integers up to 2^53; 0 - x keeps -0.0 out of index tiles.
        out[i] = op == UnaryOp::Abs ? std::fabs(a[i]) : 0.0 - a[i];
      }
      return;
    }
    for (size_t i = 0; i < out.size(); ++i) out[i] = round_value(dtype, apply_unary(op, a[i]));
  }

  void exec_binary(const OpCode& code) {
    const BinaryOp op = code.op->binary_op;
    const Tile &a = operand(code, 0), &b = operand(code, 1);
    const DType dtype = result_type(code).dtype;
    Tile& out = result(code);
    count_steps(out.size());
    if (dtype == DType::Index) {
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<double>(apply_index_binary(
            op, static_cast<int64_t>(a[i]), static_cast<int64_t>(b[i]), code, i));
      }
      return;
    }
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = round_value(dtype, apply_float_binary(op, a[i], b[i]));
    }
  }

  // Floor division and modulo as in Python (the remainder has the divisor's sign); results must
  // stay within the exactly representable range of the tiles.
  int64_t apply_index_binary(BinaryOp op, int64_t a, int64_t b, const OpCode& code,
                             size_t element) {
    int64_t value = 0;
    switch (op) {
      case BinaryOp::Add: value = a + b; break;  // |a|, |b| <= 2^53: no int64 overflow
      case BinaryOp::Sub: value = a - b; break;
      case BinaryOp::Mul:
        if (__builtin_mul_overflow(a, b, &value)) value = std::numeric_limits<int64_t>::max();
        break;
      case BinaryOp::FloorDiv:
      case BinaryOp::Mod: {
        if (b == 0) {
          throw error("divides by zero (tile element " +
                      bracketed(unflatten(result_type(code).shape, static_cast<int64_t>(element))) +
                      ")");
        }
        const FloorDivision division = floor_divide(a, b);
        value = op == BinaryOp::FloorDiv ? division.quotient : division.remainder;
        break;
      }
      case BinaryOp::Max: value = a > b ? a : b; break;
      case BinaryOp::Min: value = a < b ? a : b; break;
      case BinaryOp::Div: break;  // float-only (verified)
    }
    if (value > kMaxIndexMagnitude || value < -kMaxIndexMagnitude) {
      throw error("overflows the index range ±2^53 (tile element " +
                  bracketed(unflatten(result_type(code).shape, static_cast<int64_t>(element))) +
                  ")");
    }
    return value;
  }

  void exec_compare(const OpCode& code) {
    const CompareOp op = code.op->compare_op;
    const Tile &a = operand(code, 0), &b = operand(code, 1);
    Tile& out = result(code);
    count_steps(out.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = compare_values(op, a[i], b[i]) ? 1.0 : 0.0;
  }

  void exec_cast(const OpCode& code) {
    const Tile& a = operand(code, 0);
    const DType dtype = result_type(code).dtype;
    Tile& out = result(code);
    count_steps(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const double value = round_to(dtype, a[i]);  // Index truncates, Bool tests != 0
      if (dtype == DType::Index && !(std::fabs(value) <= static_cast<double>(kMaxIndexMagnitude))) {
        throw error("cannot convert " + number_text(a[i]) + " to an index (tile element " +
                    bracketed(unflatten(result_type(code).shape, static_cast<int64_t>(i))) + ")");
      }
      out[i] = value;
    }
  }

  // The block arguments hold the carried values; each iteration's Yield replaces them (through
  // copies, since a Yield may name block arguments in another order), and the results are
  // their values after the last iteration.
  void exec_for(const OpCode& code) {
    const Op& op = *code.op;
    for (size_t i = 0; i < code.block_args.size(); ++i) {
      slots_[code.block_args[i]] = slots_[code.operands[i]];
    }
    const OpCode& yield = code.body.back();
    std::vector<Tile> next(code.block_args.size());
    int64_t trips = op.extent;
    if (code.trip_count >= 0) {
      const double stop = slots_[code.trip_count].front();
      trips = std::clamp(static_cast<int64_t>(stop), int64_t{0}, op.extent);
    }
    for (int64_t iteration = 0; iteration < trips; ++iteration) {
      current_ = &op;
      count_steps(1);
      slots_[code.loop_var].assign(1, static_cast<double>(iteration));
      for (const OpCode& body_op : code.body) exec(body_op);
      for (size_t i = 0; i < next.size(); ++i) next[i] = slots_[yield.operands[i]];
      for (size_t i = 0; i < next.size(); ++i) slots_[code.block_args[i]].swap(next[i]);
    }
    for (size_t i = 0; i < code.results.size(); ++i) {
      slots_[code.results[i]] = slots_[code.block_args[i]];
    }
  }

  // -------------------------------------------------------------------------------------------
  // Errors name the kernel, the grid point, the op and its spec statement.

  RuntimeError error(const std::string& what) const {
    std::string message = "kernel " + kernel_->name;
    if (!kernel_->grid.empty()) {
      message += " at grid point (";
      for (size_t d = 0; d < kernel_->grid.size(); ++d) {
        if (d) message += ", ";
        message += kernel_->grid[d].var->name + "=" + std::to_string(grid_point_[d]);
      }
      message += ")";
    }
    if (current_) {
      message += ": " + op_label(*current_);
      if (current_->provenance.statement >= 0) {
        message += " (spec statement " + std::to_string(current_->provenance.statement) + ")";
      }
    }
    return RuntimeError{message + " " + what};
  }

  const Module& module_;
  const uint64_t step_limit_;
  uint64_t steps_ = 0;

  detail::GlobalBuffers globals_{"module", module_.name};

  // The running kernel: its value slots, the grid point and the op executing now.
  const Kernel* kernel_ = nullptr;
  std::vector<Tile> slots_;
  std::vector<const TileType*> slot_types_;
  std::unordered_map<const ValueNode*, int32_t> slot_of_;
  std::vector<int64_t> grid_point_;
  const Op* current_ = nullptr;
};

}  // namespace

InterpretResult interpret(const Module& module, const TensorMap& inputs,
                          const InterpretOptions& options) {
  return Interpreter(module, options).run(inputs);
}

}  // namespace nautilus::vrtile
