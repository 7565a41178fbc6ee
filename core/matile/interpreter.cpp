#include "core/matile/interpreter.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"
#include "core/scalar/interpreter_support.h"

namespace nautilus::matile {
namespace {

using scalar::detail::apply_float_binary;
using scalar::detail::apply_unary;
using scalar::detail::bracketed;
using scalar::detail::BufferState;
using scalar::detail::compare_values;
using scalar::detail::floor_divide;
using scalar::detail::FloorDivision;
using scalar::detail::round_value;
using scalar::detail::RuntimeError;
namespace detail = scalar::detail;

// How the interpreter works:
//   1. The module is verified; a malformed module is reported, never executed.
//   2. Global buffers are set up as in the VR interpreter (inputs rounded, the rest unwritten).
//   3. For every grid point: shared memory is reset (every element "never written"), the body
//      runs op by op for all threads; values live in a map from value node to slot array.
//   4. Outputs must be completely written; they and the intermediates are returned.

constexpr int64_t kMaxIndexMagnitude = int64_t{1} << 53;

using Slots = std::vector<double>;  // thread-major: [t * slots + v]

enum class Status : uint8_t { Unwritten, InFlight, Valid };

struct ElementState {
  Status status = Status::Unwritten;
  int32_t writer = -1;
  int64_t write_epoch = -1;
  int32_t reader = -1;  // -2: several threads
  int64_t read_epoch = -1;
};

struct SharedState {
  const SharedAlloc* alloc = nullptr;
  std::vector<int64_t> offsets;  // column-major logical index -> element offset in a stage
  std::vector<double> data;
  std::vector<ElementState> state;
};

struct PendingWrite {
  int alloc;
  int64_t address;
  double value;
};

struct ThreadCopies {
  std::vector<PendingWrite> open;
  std::deque<std::vector<PendingWrite>> committed;
};

double identity_of(ReduceOp op) {
  return op == ReduceOp::Sum ? 0.0 : op == ReduceOp::Max ? -INFINITY : INFINITY;
}

double combine(ReduceOp op, DType dtype, double a, double b) {
  switch (op) {
    case ReduceOp::Sum: return round_value(dtype, a + b);
    case ReduceOp::Max: return std::fmax(a, b);
    case ReduceOp::Min: return std::fmin(a, b);
  }
  return a;
}

class Interpreter : public Visitor {
 public:
  Interpreter(const Module& module, const InterpretOptions& options)
      : module_(module),
        step_limit_(options.max_steps == 0 ? std::numeric_limits<uint64_t>::max()
                                            : options.max_steps),
        globals_("module", module.name) {}

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
    result.instructions = instructions_;
    return result;
  }

 private:
  // -------------------------------------------------------------------------------------------
  // Errors and bookkeeping

  [[noreturn]] void fail(const std::string& message) const {
    std::string where = "kernel " + kernel_->name;
    if (!grid_point_.empty()) where += " at grid point " + bracketed(grid_point_);
    if (op_) {
      where += ": " + op_label(*op_);
      if (op_->provenance.statement >= 0) {
        where += " (statement " + std::to_string(op_->provenance.statement) + ")";
      }
    }
    throw RuntimeError{where + ": " + message};
  }

  void count_steps(uint64_t n) {
    steps_ += n;
    if (steps_ > step_limit_) fail("ran past the step budget of " + std::to_string(step_limit_));
  }

  int64_t threads() const { return kernel_->threads(); }

  Slots& slots_of(const Value& value) {
    auto found = values_.find(value.get());
    if (found == values_.end()) fail("value %" + value->name + " has no contents");
    return found->second;
  }
  Slots& define(const Value& value) {
    Slots& out = values_[value.get()];
    out.assign(static_cast<size_t>(threads() * value->layout.slots()), 0.0);
    return out;
  }
  double uniform(const Value& value) { return slots_of(value)[0]; }
  int64_t uniform_index(const Value& value) { return static_cast<int64_t>(uniform(value)); }

  const std::vector<int64_t>& elements_of(const Value& value) {
    auto found = element_tables_.find(value.get());
    if (found != element_tables_.end()) return found->second;
    return element_tables_.emplace(value.get(), slot_elements(value->layout)).first->second;
  }

  // -------------------------------------------------------------------------------------------
  // Kernels and regions

  void run_kernel(const Kernel& kernel) {
    kernel_ = &kernel;
    op_ = nullptr;
    element_tables_.clear();
    shared_.clear();
    for (const SharedAlloc& alloc : kernel.shared) {
      SharedState state;
      state.alloc = &alloc;
      int64_t elements = 1;
      for (int64_t extent : alloc.shape) elements *= extent;
      state.offsets.resize(static_cast<size_t>(elements));
      for (int64_t i = 0; i < elements; ++i) {
        state.offsets[static_cast<size_t>(i)] = alloc.layout(i);
      }
      shared_.push_back(std::move(state));
    }
    std::vector<int64_t> extents;
    for (const GridAxis& axis : kernel.grid) extents.push_back(axis.extent);
    int64_t points = 1;
    for (int64_t extent : extents) points *= extent;
    grid_point_.assign(extents.size(), 0);
    for (int64_t point = 0; point < points; ++point) {
      int64_t rest = point;
      for (size_t k = extents.size(); k-- > 0;) {
        grid_point_[k] = rest % extents[k];
        rest /= extents[k];
      }
      for (size_t k = 0; k < kernel.grid.size(); ++k) {
        define(kernel.grid[k].var).assign(static_cast<size_t>(threads()),
                                          static_cast<double>(grid_point_[k]));
      }
      reset_shared();
      visit(*kernel.body);
    }
    grid_point_.clear();
  }

  void reset_shared() {
    epoch_ = 0;
    copies_.assign(static_cast<size_t>(threads()), ThreadCopies{});
    for (SharedState& s : shared_) {
      const int64_t size = int64_t{s.alloc->stages} * s.alloc->stage_elements;
      s.data.assign(static_cast<size_t>(size), std::nan(""));
      s.state.assign(static_cast<size_t>(size), ElementState{});
    }
  }

  // Errors name the op that was running.
  using Visitor::visit;
  void visit(const Op& op) override {
    op_ = &op;
    Visitor::visit(op);
  }

  void visit_elementwise(const Op& op) override { elementwise(op); }
  void visit_register_move(const Op& op) override { register_move(op); }
  void visit_ConvertLayout(const Op& op) override { convert_layout(op); }
  void visit_Reduce(const Op& op) override { reduce(op); }
  void visit_Mma(const Op& op) override { mma(op); }
  void visit_FmaDot(const Op& op) override { fma_dot(op); }
  void visit_GlobalLoad(const Op& op) override { global_load(op); }
  void visit_GlobalStore(const Op& op) override { global_store(op); }
  void visit_AsyncCopy(const Op& op) override { async_copy(op); }
  void visit_CommitGroup(const Op&) override {
    for (ThreadCopies& c : copies_) {
      c.committed.push_back(std::move(c.open));
      c.open.clear();
    }
  }
  void visit_WaitGroup(const Op& op) override { wait_group(op); }
  void visit_Barrier(const Op&) override {
    ++epoch_;
    instructions_["bar.sync"] += 1;
  }
  void visit_SharedLoad(const Op& op) override { shared_load(op); }
  void visit_SharedStore(const Op& op) override { shared_store(op); }
  void visit_For(const Op& op) override { run_for(op); }
  void visit_Yield(const Op&) override {}  // read by run_for
  // Every kind has its rule above; an op reaching here is a kind without one.
  void visit_op(const Op& op) override {
    fail(std::string("no interpreter rule for ") + op_kind_name(op.kind));
  }

  void run_for(const Op& op) {
    std::vector<Slots> carried;
    for (const Value& init : op.operands) carried.push_back(slots_of(init));
    const Op* self = &op;
    int64_t trips = op.extent;
    if (op.trip_count) trips = std::min(trips, std::max<int64_t>(uniform_index(op.trip_count), 0));
    for (int64_t i = 0; i < trips; ++i) {
      count_steps(1);
      define(op.loop_var).assign(static_cast<size_t>(threads()), static_cast<double>(i));
      for (size_t k = 0; k < op.block_args.size(); ++k) values_[op.block_args[k].get()] = carried[k];
      visit(*op.body);
      op_ = self;
      const Op& yield = *op.body->ops.back();
      for (size_t k = 0; k < yield.operands.size(); ++k) carried[k] = slots_of(yield.operands[k]);
    }
    for (size_t k = 0; k < op.results.size(); ++k) values_[op.results[k].get()] = carried[k];
  }

  // -------------------------------------------------------------------------------------------
  // Element-wise ops: slot by slot (all layouts equal, verified)

  int64_t index_binary(BinaryOp op, int64_t a, int64_t b) {
    int64_t value = 0;
    switch (op) {
      case BinaryOp::Add: value = a + b; break;
      case BinaryOp::Sub: value = a - b; break;
      case BinaryOp::Mul:
        if (__builtin_mul_overflow(a, b, &value)) fail("index multiplication overflows");
        break;
      case BinaryOp::FloorDiv:
      case BinaryOp::Mod: {
        if (b == 0) fail("index division by zero");
        const FloorDivision division = floor_divide(a, b);
        value = op == BinaryOp::FloorDiv ? division.quotient : division.remainder;
        break;
      }
      case BinaryOp::Max: value = a > b ? a : b; break;
      case BinaryOp::Min: value = a < b ? a : b; break;
      case BinaryOp::Div: break;
    }
    if (value > kMaxIndexMagnitude || value < -kMaxIndexMagnitude) fail("index overflow");
    return value;
  }

  void elementwise(const Op& op) {
    const Value& result = op.results[0];
    const DType dtype = result->type.dtype;
    const std::vector<const Slots*> in = [&] {
      std::vector<const Slots*> operands;
      for (const Value& v : op.operands) operands.push_back(&slots_of(v));
      return operands;
    }();
    Slots out(static_cast<size_t>(threads() * result->layout.slots()));
    count_steps(out.size());
    switch (op.kind) {
      case OpKind::Iota: {
        const std::vector<int64_t>& elements = elements_of(result);
        for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(elements[i]);
        break;
      }
      case OpKind::Full:
        std::fill(out.begin(), out.end(), round_to(dtype, op.constant));
        break;
      case OpKind::Unary:
        for (size_t i = 0; i < out.size(); ++i) {
          const double x = (*in[0])[i];
          if (dtype == DType::Index) {
            out[i] = op.unary_op == UnaryOp::Abs ? std::fabs(x) : 0.0 - x;
          } else {
            out[i] = round_value(dtype, apply_unary(op.unary_op, x));
          }
        }
        break;
      case OpKind::Binary:
        for (size_t i = 0; i < out.size(); ++i) {
          const double a = (*in[0])[i], b = (*in[1])[i];
          if (dtype == DType::Index) {
            out[i] = static_cast<double>(
                index_binary(op.binary_op, static_cast<int64_t>(a), static_cast<int64_t>(b)));
            continue;
          }
          out[i] = round_value(dtype, apply_float_binary(op.binary_op, a, b));
        }
        break;
      case OpKind::Compare:
        for (size_t i = 0; i < out.size(); ++i) {
          out[i] = compare_values(op.compare_op, (*in[0])[i], (*in[1])[i]) ? 1.0 : 0.0;
        }
        break;
      case OpKind::Logical:
        for (size_t i = 0; i < out.size(); ++i) {
          const bool a = (*in[0])[i] != 0.0, b = (*in[1])[i] != 0.0;
          out[i] = (op.logical_op == LogicalOp::And ? (a && b) : (a || b)) ? 1.0 : 0.0;
        }
        break;
      case OpKind::Select:
        for (size_t i = 0; i < out.size(); ++i) {
          out[i] = (*in[0])[i] != 0.0 ? (*in[1])[i] : (*in[2])[i];
        }
        break;
      case OpKind::Cast:
        for (size_t i = 0; i < out.size(); ++i) {
          const double x = (*in[0])[i];
          if (dtype == DType::Index) {
            if (!(std::fabs(x) <= static_cast<double>(kMaxIndexMagnitude))) {
              fail("cast of a non-finite or too large value to index");
            }
            out[i] = std::trunc(x);
          } else if (dtype == DType::Bool) {
            out[i] = x != 0.0 ? 1.0 : 0.0;
          } else {
            out[i] = round_value(dtype, x);
          }
        }
        break;
      default: break;
    }
    values_[result.get()] = std::move(out);
  }

  // -------------------------------------------------------------------------------------------
  // Register-only movement: Broadcast, Permute, ExtractSlice, ConvertLayout (registers)

  // For every result slot, the column-major source element it needs.
  std::vector<int64_t> needed_elements(const Op& op) {
    std::vector<int64_t> argument;
    const RegisterMove move = register_move_of(op, &argument);
    return register_move_sources(move, argument, op.operands[0]->type.shape,
                                 op.results[0]->type.shape, elements_of(op.results[0]));
  }

  const std::vector<int32_t>& gather_table(const Op& op) {
    auto found = gather_tables_.find(&op);
    if (found != gather_tables_.end()) return found->second;
    const Value& source = op.operands[0];
    Result<std::vector<int32_t>> table =
        register_gather(source->layout, source->type.element_count(), needed_elements(op),
                        op.results[0]->layout.slots());
    if (!table) fail("register-only movement is impossible: " + table.error().message);
    return gather_tables_.emplace(&op, std::move(table).value()).first->second;
  }

  void register_move(const Op& op) {
    const Value& result = op.results[0];
    const std::vector<int32_t>& table = gather_table(op);
    const Slots& source = slots_of(op.operands[0]);
    const int64_t source_slots = op.operands[0]->layout.slots();
    const int64_t result_slots = result->layout.slots();
    Slots out(static_cast<size_t>(threads() * result_slots));
    count_steps(out.size());
    for (int64_t t = 0; t < threads(); ++t) {
      for (int64_t v = 0; v < result_slots; ++v) {
        const size_t at = static_cast<size_t>(t * result_slots + v);
        out[at] = source[static_cast<size_t>(t * source_slots + table[at])];
      }
    }
    values_[result.get()] = std::move(out);
  }

  // The dense tile (column-major) of a value, from any holder of each element.
  std::vector<double> dense(const Value& value) {
    const Slots& slots = slots_of(value);
    const std::vector<int64_t>& elements = elements_of(value);
    std::vector<double> tile(static_cast<size_t>(value->type.element_count()), std::nan(""));
    std::vector<uint8_t> held(tile.size(), 0);
    for (size_t i = 0; i < elements.size(); ++i) {
      tile[static_cast<size_t>(elements[i])] = slots[i];
      held[static_cast<size_t>(elements[i])] = 1;
    }
    for (size_t e = 0; e < held.size(); ++e) {
      if (!held[e]) fail("no thread holds element " + std::to_string(e) + " of %" + value->name);
    }
    return tile;
  }

  void convert_layout(const Op& op) {
    if (!op.via_shared) return register_move(op);
    const Value& result = op.results[0];
    const std::vector<double> tile = dense(op.operands[0]);
    const std::vector<int64_t>& elements = elements_of(result);
    Slots out(elements.size());
    count_steps(out.size() + tile.size());
    for (size_t i = 0; i < elements.size(); ++i) out[i] = tile[static_cast<size_t>(elements[i])];
    instructions_["bar.sync"] += 2;
    values_[result.get()] = std::move(out);
  }

  // -------------------------------------------------------------------------------------------
  // Reduce in its three steps (ir.h)

  void reduce(const Op& op) {
    const Value& source = op.operands[0];
    const Value& result = op.results[0];
    const DType dtype = source->type.dtype;
    const std::vector<int64_t>& shape = source->type.shape;
    const int64_t source_slots = source->layout.slots();
    const int64_t result_slots = result->layout.slots();
    const std::vector<int64_t>& source_elements = elements_of(source);
    const std::vector<int64_t>& result_elements = elements_of(result);
    const Slots& in = slots_of(source);
    std::vector<int64_t> result_shape;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (static_cast<int>(k) != op.axis) result_shape.push_back(shape[k]);
    }
    const double identity = identity_of(op.reduce_op);
    Slots partial(static_cast<size_t>(threads() * result_slots), identity);
    count_steps(in.size() + partial.size());
    // 1. Within each thread, in slot order.
    for (int64_t t = 0; t < threads(); ++t) {
      std::unordered_map<int64_t, int64_t> slot_of_element;
      for (int64_t v = 0; v < result_slots; ++v) {
        slot_of_element.emplace(result_elements[static_cast<size_t>(t * result_slots + v)], v);
      }
      std::unordered_set<int64_t> combined;  // a repeated element counts once
      for (int64_t v = 0; v < source_slots; ++v) {
        const int64_t element = source_elements[static_cast<size_t>(t * source_slots + v)];
        if (!combined.insert(element).second) continue;
        std::vector<int64_t> c = coordinates_of(element, shape);
        c.erase(c.begin() + op.axis);
        auto found = slot_of_element.find(index_of(c, result_shape));
        if (found == slot_of_element.end()) {
          fail("thread " + std::to_string(t) + " holds an element whose result it does not hold");
        }
        double& p = partial[static_cast<size_t>(t * result_slots + found->second)];
        p = combine(op.reduce_op, dtype, p, in[static_cast<size_t>(t * source_slots + v)]);
      }
    }
    // 2. The xor butterfly across lanes.
    for (int mask : op.xor_masks) {
      Slots next = partial;
      for (int64_t t = 0; t < threads(); ++t) {
        const int64_t partner = t ^ mask;
        for (int64_t v = 0; v < result_slots; ++v) {
          const size_t here = static_cast<size_t>(t * result_slots + v);
          const size_t there = static_cast<size_t>(partner * result_slots + v);
          if (result_elements[here] != result_elements[there]) {
            fail("shuffle partners " + std::to_string(t) + " and " + std::to_string(partner) +
                 " hold different elements in slot " + std::to_string(v));
          }
          next[here] = combine(op.reduce_op, dtype, partial[here], partial[there]);
        }
      }
      partial = std::move(next);
      instructions_["shfl.bfly"] += static_cast<uint64_t>(kernel_->warps * result_slots);
    }
    // 3. Across warps through shared memory, in warp order.
    if (op.scratch >= 0) {
      Result<ReducePlan> plan = reduce_plan(source->layout, shape, op.axis);
      if (!plan) fail(plan.error().message);
      Slots next = partial;
      for (int64_t t = 0; t < threads(); ++t) {
        int64_t base = t;
        std::vector<int64_t> partners{0};
        for (const auto& [position, extent] : plan->warp_leaves) {
          base -= ((t / position) % extent) * position;
          std::vector<int64_t> grown;
          for (int64_t j = 0; j < extent; ++j) {
            for (int64_t p : partners) grown.push_back(p + j * position);
          }
          partners = std::move(grown);
        }
        std::sort(partners.begin(), partners.end());
        for (int64_t v = 0; v < result_slots; ++v) {
          const size_t here = static_cast<size_t>(t * result_slots + v);
          double value = identity;
          for (int64_t p : partners) {
            const size_t there = static_cast<size_t>((base + p) * result_slots + v);
            if (result_elements[here] != result_elements[there]) {
              fail("warp partners hold different elements in slot " + std::to_string(v));
            }
            value = combine(op.reduce_op, dtype, value, partial[there]);
          }
          next[here] = value;
        }
      }
      partial = std::move(next);
      instructions_["bar.sync"] += 2;
    }
    values_[result.get()] = std::move(partial);
  }

  // -------------------------------------------------------------------------------------------
  // mma.sync.m16n8k16 by the PTX fragment formulas (groupID g = lane / 4, t = lane % 4):
  //   a_i at (g + 8*((i/2)%2), 2t + i%2 + 8*(i/4)), b_i at (2t + i%2 + 8*(i/2), g),
  //   c_i at (g + 8*(i/2), 2t + i%2).

  void mma(const Op& op) {
    const Value &a = op.operands[0], &b = op.operands[1], &c = op.operands[2];
    const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
    const int wm_count = op.warps_m, wn_count = op.warps_n;
    const int64_t mt = mma_m_atoms(M, wm_count), kt = K / 16, nt = N / (8 * wn_count);
    const int64_t sa = a->layout.slots(), sb = b->layout.slots(), sc = c->layout.slots();
    if (sa != 8 * mt * kt || sb != 4 * kt * nt || sc != 4 * mt * nt) {
      fail("operand slot counts do not match the mma fragments of the warp tile");
    }
    const Slots &av = slots_of(a), &bv = slots_of(b);
    Slots d = slots_of(c);
    count_steps(static_cast<uint64_t>(M * N * K));
    for (int w = 0; w < kernel_->warps; ++w) {
      for (int64_t ki = 0; ki < kt; ++ki) {
        for (int64_t mi = 0; mi < mt; ++mi) {
          for (int64_t ni = 0; ni < nt; ++ni) {
            float A[16][16], B[16][8], C[16][8];
            for (int l = 0; l < kWarpSize; ++l) {
              const int64_t thread = int64_t{w} * kWarpSize + l;
              const int g = l / 4, t = l % 4;
              for (int i = 0; i < 8; ++i) {
                A[g + 8 * ((i / 2) % 2)][2 * t + i % 2 + 8 * (i / 4)] = static_cast<float>(
                    av[static_cast<size_t>(thread * sa + 8 * (mi + mt * ki) + i)]);
              }
              for (int i = 0; i < 4; ++i) {
                B[2 * t + i % 2 + 8 * (i / 2)][g] = static_cast<float>(
                    bv[static_cast<size_t>(thread * sb + 4 * (ki + kt * ni) + i)]);
                C[g + 8 * (i / 2)][2 * t + i % 2] =
                    static_cast<float>(d[static_cast<size_t>(thread * sc + 4 * (mi + mt * ni) + i)]);
              }
            }
            for (int r = 0; r < 16; ++r) {
              for (int col = 0; col < 8; ++col) {
                float sum = C[r][col];
                for (int k = 0; k < 16; ++k) sum = std::fmaf(A[r][k], B[k][col], sum);
                C[r][col] = sum;
              }
            }
            for (int l = 0; l < kWarpSize; ++l) {
              const int64_t thread = int64_t{w} * kWarpSize + l;
              const int g = l / 4, t = l % 4;
              for (int i = 0; i < 4; ++i) {
                d[static_cast<size_t>(thread * sc + 4 * (mi + mt * ni) + i)] =
                    C[g + 8 * (i / 2)][2 * t + i % 2];
              }
            }
            instructions_["mma.m16n8k16"] += 1;
          }
        }
      }
    }
    values_[op.results[0].get()] = std::move(d);
  }

  // -------------------------------------------------------------------------------------------
  // Shared memory

  SharedState& alloc_state(int alloc) { return shared_[static_cast<size_t>(alloc)]; }

  int64_t stage_of(const SharedRef& ref) {
    const SharedAlloc& alloc = *alloc_state(ref.alloc).alloc;
    const int64_t stage = ref.stage ? uniform_index(ref.stage) : 0;
    if (stage < 0 || stage >= alloc.stages) {
      fail("stage " + std::to_string(stage) + " of " + alloc.name + " is out of range (" +
           std::to_string(alloc.stages) + " stages)");
    }
    return stage;
  }

  // The element address (in the allocation's linear storage) of tile coordinate c of `ref`.
  int64_t address_of(const SharedRef& ref, int64_t stage, const std::vector<int64_t>& c) {
    const SharedState& s = alloc_state(ref.alloc);
    const std::vector<int64_t>& shape = s.alloc->shape;
    std::vector<int64_t> a(shape.size());
    for (size_t k = 0; k < shape.size(); ++k) {
      const int64_t coordinate = ref.transposed ? c[shape.size() - 1 - k] : c[k];
      a[k] = ref.offsets[k] + coordinate;
      if (a[k] < 0 || a[k] >= shape[k]) {
        fail("shared window reaches outside " + s.alloc->name + " at " + bracketed(a));
      }
    }
    return stage * s.alloc->stage_elements + s.offsets[static_cast<size_t>(index_of(a, shape))];
  }

  void check_address(const SharedState& s, int64_t address) {
    if (address < 0 || address >= static_cast<int64_t>(s.data.size())) {
      fail("shared address " + std::to_string(address) + " is outside " + s.alloc->name);
    }
  }

  double shared_read(int alloc, int64_t address, int64_t thread) {
    SharedState& s = alloc_state(alloc);
    check_address(s, address);
    ElementState& e = s.state[static_cast<size_t>(address)];
    const std::string where = s.alloc->name + " element " + std::to_string(address);
    if (e.status == Status::Unwritten) fail("thread " + std::to_string(thread) + " reads " + where + ", never written");
    if (e.status == Status::InFlight) {
      fail("thread " + std::to_string(thread) + " reads " + where +
           " before its cp.async landed (missing cp.async.wait_group)");
    }
    if (e.writer != thread && e.write_epoch == epoch_) {
      fail("thread " + std::to_string(thread) + " reads " + where + " written by thread " +
           std::to_string(e.writer) + " without a barrier in between");
    }
    if (e.read_epoch == epoch_ && e.reader != thread) {
      e.reader = -2;
    } else if (e.read_epoch != epoch_) {
      e.reader = static_cast<int32_t>(thread);
      e.read_epoch = epoch_;
    }
    return s.data[static_cast<size_t>(address)];
  }

  // Checks that `thread` may overwrite the element now (no other reader since the last barrier).
  ElementState& check_overwrite(int alloc, int64_t address, int64_t thread) {
    SharedState& s = alloc_state(alloc);
    check_address(s, address);
    ElementState& e = s.state[static_cast<size_t>(address)];
    if (e.read_epoch == epoch_ && e.reader != thread) {
      fail("thread " + std::to_string(thread) + " overwrites " + s.alloc->name + " element " +
           std::to_string(address) + " that " +
           (e.reader == -2 ? std::string("other threads") : "thread " + std::to_string(e.reader)) +
           " read since the last barrier (missing bar.sync)");
    }
    return e;
  }

  void shared_write(int alloc, int64_t address, int64_t thread, double value) {
    ElementState& e = check_overwrite(alloc, address, thread);
    e.status = Status::Valid;
    e.writer = static_cast<int32_t>(thread);
    e.write_epoch = epoch_;
    alloc_state(alloc).data[static_cast<size_t>(address)] = value;
  }

  void shared_store(const Op& op) {
    const Value& value = op.operands[0];
    const Slots& in = slots_of(value);
    const std::vector<int64_t>& elements = elements_of(value);
    const int64_t stage = stage_of(op.shared);
    const int64_t slots = value->layout.slots();
    count_steps(in.size());
    for (int64_t t = 0; t < threads(); ++t) {
      for (int64_t v = 0; v < slots; ++v) {
        const size_t at = static_cast<size_t>(t * slots + v);
        const int64_t address =
            address_of(op.shared, stage, coordinates_of(elements[at], value->type.shape));
        shared_write(op.shared.alloc, address, t, in[at]);
      }
    }
  }

  void shared_load(const Op& op) {
    const Value& result = op.results[0];
    if (op.shared_read == SharedRead::Scalar) {
      const std::vector<int64_t>& elements = elements_of(result);
      const int64_t stage = stage_of(op.shared);
      const int64_t slots = result->layout.slots();
      Slots out(elements.size());
      count_steps(out.size());
      for (int64_t t = 0; t < threads(); ++t) {
        for (int64_t v = 0; v < slots; ++v) {
          const size_t at = static_cast<size_t>(t * slots + v);
          const int64_t address =
              address_of(op.shared, stage, coordinates_of(elements[at], result->type.shape));
          out[at] = shared_read(op.shared.alloc, address, t);
        }
      }
      values_[result.get()] = std::move(out);
      return;
    }
    ldmatrix(op);
  }

  // ldmatrix.x4: lane L gives the address of row L%8 of matrix L/8 (8 contiguous 16-bit
  // elements, 16-byte aligned). Without .trans lane l receives, in register j, elements
  // 2*(l%4) and 2*(l%4)+1 of row l/4 of matrix j; with .trans, element l/4 of rows 2*(l%4) and
  // 2*(l%4)+1. Which tile elements a matrix covers is fixed by the fragment the result holds
  // (layouts.h: ldmatrix_issues, which the studio's bank pictures use too).
  void ldmatrix(const Op& op) {
    const Value& result = op.results[0];
    const RegisterLayout& layout = result->layout;
    const bool trans = op.shared_read == SharedRead::LdMatrixX4Trans;
    const int64_t slots = layout.slots();
    const int64_t stage = stage_of(op.shared);
    const SharedState& s = alloc_state(op.shared.alloc);
    const int bytes = dtype_bytes(s.alloc->dtype);
    Slots out(static_cast<size_t>(threads() * slots), std::nan(""));
    count_steps(out.size());
    for (const LdmatrixIssue& issue : ldmatrix_issues(layout, result->type.shape, trans,
                                                       kernel_->warps)) {
      int64_t address[kWarpSize];
      for (int lane = 0; lane < kWarpSize; ++lane) {
        const std::array<int64_t, 2>& start = issue.lane_start[static_cast<size_t>(lane)];
        address[lane] = address_of(op.shared, stage, {start[0], start[1]});
        if ((s.alloc->byte_offset + address[lane] * bytes) % 16 != 0) {
          fail("ldmatrix row address of lane " + std::to_string(lane) + " in " + s.alloc->name +
               " is not 16-byte aligned");
        }
      }
      for (int l = 0; l < kWarpSize; ++l) {
        const int64_t thread = int64_t{issue.warp} * kWarpSize + l;
        for (int j = 0; j < 4; ++j) {
          for (int e = 0; e < 2; ++e) {
            const int64_t at = trans ? address[8 * j + 2 * (l % 4) + e] + l / 4
                                     : address[8 * j + l / 4] + 2 * (l % 4) + e;
            out[static_cast<size_t>(thread * slots + issue.slot[j][e])] =
                shared_read(op.shared.alloc, at, thread);
          }
        }
      }
      instructions_[trans ? "ldmatrix.x4.trans" : "ldmatrix.x4"] += 1;
    }
    values_[result.get()] = std::move(out);
  }

  void fma_dot(const Op& op) {
    const Value& acc = op.operands[0];
    const Value& result = op.results[0];
    const int64_t M = acc->type.shape[0], N = acc->type.shape[1];
    const SharedAlloc& a_alloc = *alloc_state(op.shared.alloc).alloc;
    const int64_t K = op.shared.transposed ? a_alloc.shape[0] - op.shared.offsets[0]
                                           : a_alloc.shape[1] - op.shared.offsets[1];
    (void)M;
    (void)N;
    const int64_t a_stage = stage_of(op.shared), b_stage = stage_of(op.shared_b);
    const std::vector<int64_t>& elements = elements_of(result);
    const int64_t slots = result->layout.slots();
    Slots out = slots_of(acc);
    count_steps(out.size() * static_cast<uint64_t>(K));
    for (int64_t t = 0; t < threads(); ++t) {
      for (int64_t v = 0; v < slots; ++v) {
        const size_t at = static_cast<size_t>(t * slots + v);
        const std::vector<int64_t> c = coordinates_of(elements[at], result->type.shape);
        float sum = static_cast<float>(out[at]);
        for (int64_t k = 0; k < K; ++k) {
          const double x =
              shared_read(op.shared.alloc, address_of(op.shared, a_stage, {c[0], k}), t);
          const double y =
              shared_read(op.shared_b.alloc, address_of(op.shared_b, b_stage, {k, c[1]}), t);
          sum = std::fmaf(static_cast<float>(x), static_cast<float>(y), sum);
        }
        out[at] = sum;
      }
    }
    instructions_["fma"] += out.size() * static_cast<uint64_t>(K);
    values_[result.get()] = std::move(out);
  }

  // -------------------------------------------------------------------------------------------
  // Global memory

  BufferState& buffer_state(const Buffer& buffer) {
    return globals_.buffers[static_cast<size_t>(globals_.index.at(buffer.get()))];
  }

  // The buffer indices of tile coordinate c of a window access, and whether it is valid.
  bool window_indices(const GlobalAccess& access, const std::vector<int64_t>& c,
                      std::vector<int64_t>* indices) {
    bool valid = true;
    for (size_t j = 0; j < indices->size(); ++j) {
      int64_t index = access.offsets[j] ? uniform_index(access.offsets[j]) : 0;
      if (access.tile_axes[j] >= 0) index += c[static_cast<size_t>(access.tile_axes[j])];
      (*indices)[j] = index;
      if (index >= access.bounds[j]) valid = false;
    }
    return valid;
  }

  int64_t flat_offset(const BufferState& state, const std::vector<int64_t>& indices) {
    int64_t flat = 0;
    for (size_t j = 0; j < indices.size(); ++j) {
      if (indices[j] < 0 || indices[j] >= state.node->shape[j]) {
        fail("access of " + state.node->name + bracketed(indices) + " out of bounds " +
             bracketed(state.node->shape));
      }
      flat += indices[j] * state.strides[j];
    }
    return flat;
  }

  double global_read(const BufferState& state, int64_t flat, const std::vector<int64_t>& indices) {
    if (!state.written.empty() && !state.written[static_cast<size_t>(flat)]) {
      fail("read of " + state.node->name + bracketed(indices) + ", never written");
    }
    return state.values[static_cast<size_t>(flat)];
  }

  // The first slot holding each element (every holder holds the same value and indices).
  std::vector<int64_t> first_holders(const Value& value) {
    const std::vector<int64_t>& elements = elements_of(value);
    std::vector<int64_t> first(static_cast<size_t>(value->type.element_count()), -1);
    for (size_t i = 0; i < elements.size(); ++i) {
      int64_t& f = first[static_cast<size_t>(elements[i])];
      if (f < 0) f = static_cast<int64_t>(i);
    }
    return first;
  }

  // Whether element `e` (first held at slot `at`) is accessed, and its buffer indices.
  bool access_element(const Op& op, const Value& tile, int64_t e, int64_t at,
                      std::vector<int64_t>* indices) {
    if (op.access.form == GlobalAccess::Form::Window) {
      return window_indices(op.access, coordinates_of(e, tile->type.shape), indices);
    }
    const std::vector<Value> gather = gather_indices(op);
    for (size_t j = 0; j < indices->size(); ++j) {
      (*indices)[j] = static_cast<int64_t>(slots_of(gather[j])[static_cast<size_t>(at)]);
    }
    const Value mask = gather_mask(op);
    return !mask || slots_of(mask)[static_cast<size_t>(at)] != 0.0;
  }

  // Loads each element once and hands it to every slot holding it.
  void global_load(const Op& op) {
    const Value& result = op.results[0];
    BufferState& state = buffer_state(op.buffer);
    const std::vector<int64_t>& elements = elements_of(result);
    const std::vector<int64_t> first = first_holders(result);
    const double other = round_to(op.buffer->dtype, op.constant);
    std::vector<double> tile(first.size(), other);
    std::vector<int64_t> indices(op.buffer->shape.size());
    count_steps(elements.size());
    for (size_t e = 0; e < first.size(); ++e) {
      if (access_element(op, result, static_cast<int64_t>(e), first[e], &indices)) {
        tile[e] = global_read(state, flat_offset(state, indices), indices);
      }
    }
    Slots out(elements.size());
    for (size_t i = 0; i < elements.size(); ++i) out[i] = tile[static_cast<size_t>(elements[i])];
    values_[result.get()] = std::move(out);
  }

  // Writes each element once, from the first slot holding it.
  void global_store(const Op& op) {
    const Value value = stored_value(op);
    BufferState& state = buffer_state(op.buffer);
    const std::vector<int64_t> first = first_holders(value);
    const Slots& in = slots_of(value);
    count_steps(in.size());
    std::vector<int64_t> indices(op.buffer->shape.size());
    for (size_t e = 0; e < first.size(); ++e) {
      if (!access_element(op, value, static_cast<int64_t>(e), first[e], &indices)) continue;
      const int64_t flat = flat_offset(state, indices);
      state.values[static_cast<size_t>(flat)] = in[static_cast<size_t>(first[e])];
      if (!state.written.empty()) state.written[static_cast<size_t>(flat)] = 1;
    }
  }

  // cp.async: per thread, its slots taken vector_elements at a time.
  void async_copy(const Op& op) {
    if (op.predicate && uniform(op.predicate) == 0.0) return;
    BufferState& state = buffer_state(op.buffer);
    const int64_t stage = stage_of(op.shared);
    const SharedAlloc& alloc = *alloc_state(op.shared.alloc).alloc;
    const int bytes = dtype_bytes(alloc.dtype);
    const int64_t vec = op.vector_elements;
    const int64_t last = static_cast<int64_t>(op.tile_shape.size()) - 1;
    const int64_t copy_threads = op.copy_layout.threads(), values = op.copy_layout.values();
    std::vector<int64_t> indices(op.buffer->shape.size());
    count_steps(static_cast<uint64_t>(copy_threads * values));
    for (int64_t t = 0; t < copy_threads; ++t) {
      for (int64_t first = 0; first + vec <= values; first += vec) {
        const std::vector<int64_t> c0 =
            coordinates_of(op.copy_layout.index(t, first), op.tile_shape);
        int64_t valid_count = 0;
        bool prefix = true;
        int64_t flat0 = 0, address0 = 0;
        for (int64_t j = 0; j < vec; ++j) {
          std::vector<int64_t> c = coordinates_of(op.copy_layout.index(t, first + j), op.tile_shape);
          std::vector<int64_t> expected = c0;
          expected[static_cast<size_t>(last)] += j;
          if (c != expected) fail("copy vector of thread " + std::to_string(t) + " is not contiguous along the last axis");
          const bool valid = window_indices(op.access, c, &indices);
          const int64_t address = address_of(op.shared, stage, c);
          if (j == 0) {
            address0 = address;
            if ((alloc.byte_offset + address * bytes) % 16 != 0) {
              fail("cp.async destination in " + alloc.name + " is not 16-byte aligned");
            }
          } else if (address != address0 + j) {
            fail("cp.async destination vector in " + alloc.name + " is not contiguous");
          }
          double value = 0.0;  // zero-fill
          if (valid) {
            if (!prefix) fail("cp.async vector whose valid elements are not a prefix");
            const int64_t flat = flat_offset(state, indices);
            if (j == 0) {
              flat0 = flat;
              if ((flat * bytes) % 16 != 0) {
                fail("cp.async source " + op.buffer->name + bracketed(indices) +
                     " is not 16-byte aligned");
              }
            } else if (flat != flat0 + j) {
              fail("cp.async source vector in " + op.buffer->name + " is not contiguous");
            }
            value = global_read(state, flat, indices);
            ++valid_count;
          } else {
            prefix = false;
          }
          ElementState& e = check_overwrite(op.shared.alloc, address, t);
          e.status = Status::InFlight;
          copies_[static_cast<size_t>(t)].open.push_back({op.shared.alloc, address, value});
        }
        (void)valid_count;
        instructions_["cp.async"] += 1;
      }
    }
  }

  void wait_group(const Op& op) {
    for (size_t t = 0; t < copies_.size(); ++t) {
      ThreadCopies& c = copies_[t];
      while (static_cast<int64_t>(c.committed.size()) > op.extent) {
        for (const PendingWrite& write : c.committed.front()) {
          SharedState& s = alloc_state(write.alloc);
          ElementState& e = s.state[static_cast<size_t>(write.address)];
          e.status = Status::Valid;
          e.writer = static_cast<int32_t>(t);
          e.write_epoch = epoch_;
          s.data[static_cast<size_t>(write.address)] = write.value;
        }
        c.committed.pop_front();
      }
    }
  }

  const Module& module_;
  const uint64_t step_limit_;
  uint64_t steps_ = 0;
  detail::GlobalBuffers globals_;
  const Kernel* kernel_ = nullptr;
  const Op* op_ = nullptr;
  std::vector<int64_t> grid_point_;
  std::unordered_map<const ValueNode*, Slots> values_;
  std::unordered_map<const ValueNode*, std::vector<int64_t>> element_tables_;
  std::unordered_map<const Op*, std::vector<int32_t>> gather_tables_;
  std::vector<SharedState> shared_;
  std::vector<ThreadCopies> copies_;
  int64_t epoch_ = 0;
  std::map<std::string, uint64_t> instructions_;
};

}  // namespace

InterpretResult interpret(const Module& module, const TensorMap& inputs,
                          const InterpretOptions& options) {
  return Interpreter(module, options).run(inputs);
}

}  // namespace nautilus::matile
