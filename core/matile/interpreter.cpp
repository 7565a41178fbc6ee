#include "core/matile/interpreter.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/matile/hopper.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"
#include "core/scalar/interpreter_support.h"
#include "core/support/launch_order.h"

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
//   5. The CTAs of one launch run one after the other here but in no fixed order on a GPU, so
//      every global element remembers the launch and CTA that last wrote it: a CTA that reads
//      an element another CTA of the same launch wrote, or overwrites it with another value,
//      fails (cross_cta_race). A kernel that keeps per-CTA data in one global buffer for all
//      CTAs would pass a sequential run and fail on the GPU.

constexpr int64_t kMaxIndexMagnitude = int64_t{1} << 53;

using Slots = std::vector<double>;  // thread-major: [t * slots + v]

enum class Status : uint8_t { Unwritten, InFlight, Valid };

// Threads of control: 0 is the CTA (code outside Roles ops), 1.. the roles. Vector-clock
// components: one per thread of control, then one per mbarrier slot (its completed phases).
struct ElementState {
  Status status = Status::Unwritten;
  int32_t writer = -1;        // CTA thread of the last write (-1: a TMA landing)
  int64_t write_epoch = -1;   // the writer's barrier epoch (within its thread of control)
  int32_t reader = -1;        // -2: several threads
  int64_t read_epoch = -1;
  int32_t reader_agent = 0;   // the thread of control of `reader` / `read_epoch`
  int32_t write_component = 0;  // the writing thread of control, or a slot's component (TMA)
  int64_t write_clock = 0;    // that component's clock at the write
  int64_t proxy_stamp = -1;   // generic writes: the writer's fence.proxy.async count then
  int32_t landing_slot = -1;  // InFlight TMA data: the mbarrier slot whose phase lands it
  int32_t pending_reads = 0;  // async reads in flight (wgmma operands, TMA store sources)
};

struct SharedState {
  const SharedAlloc* alloc = nullptr;
  std::vector<int64_t> offsets;  // column-major logical index -> element offset in a stage
  std::vector<double> data;
  std::vector<ElementState> state;
  std::vector<int64_t> read_clock;  // [element * agents + agent]: each role's last read
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

using Clock = std::vector<int64_t>;

void join_into(Clock* into, const Clock& from) {
  for (size_t i = 0; i < into->size() && i < from.size(); ++i) (*into)[i] = std::max((*into)[i], from[i]);
}

// One mbarrier object.
struct BarrierSlot {
  std::string name;  // "full[1]"
  bool initialized = false;
  int64_t expected = 0, pending = 0;  // arrivals per phase, still pending in this one
  int64_t tx = 0;                     // announced minus landed bytes of this phase
  int64_t announced = 0;              // expect_tx bytes of this phase
  bool carries_tx = false;            // TMA loads complete on this array
  int64_t phase = 0;                  // completed phases
  Clock release;                      // what this phase's arrivals released
  Clock completed;                    // what the last completed phase released
  std::vector<PendingWrite> landing;  // TMA data of this phase
};

struct NamedBarrierState {
  int64_t expected = 0, arrived = 0, generation = 0;
  std::string last_arrivers;  // who arrived in the current phase, for messages
  Clock release, completed;
};

// wgmma or bulk-copy groups of one thread of control.
struct AsyncGroup {
  int64_t id = -1;
  std::vector<std::pair<int, int64_t>> reads;  // (allocation, address) read in flight
};
struct AsyncGroups {
  AsyncGroup open;
  std::deque<AsyncGroup> committed;
  bool empty() const { return open.id < 0 && committed.empty(); }
};

// A role's position: a stack of regions (the role's body, loop bodies inside it).
struct Frame {
  const Region* region = nullptr;
  size_t pc = 0;
  const Op* loop = nullptr;
  int64_t iteration = 0, trips = 0;
};

// The registers of a thread of control: its values, its wgmma results still in flight (value
// -> group) and, per value, who wrote it at which wgmma.fence count. The CTA and the roles that
// run in lockstep share one; each warpgroup of a role whose warpgroups run apart has its own,
// over the role's threads, of which it computes only its own.
struct RegisterState {
  std::unordered_map<const ValueNode*, Slots> values;
  std::unordered_map<const ValueNode*, int64_t> in_flight;
  std::unordered_map<const ValueNode*, std::pair<int, int64_t>> fence_stamps;
  // Register A operands of wgmmas still in flight (RS form), by the group that reads them.
  std::unordered_map<const ValueNode*, int64_t> operands_in_flight;
  void clear() {
    values.clear();
    in_flight.clear();
    fence_stamps.clear();
    operands_in_flight.clear();
  }
};

struct Agent {
  std::string name;  // "role producer", "role consumers warpgroup 1", "the CTA"
  // CTA thread of the register arrays' thread 0 and their threads (the role's); the threads of
  // them this agent runs: all, or one warpgroup's.
  int64_t thread_base = 0, thread_count = 0, lane_lo = 0, lane_hi = 0;
  int warpgroup = -1;  // index in its role when the role's warpgroups run apart; -1: all of them
  std::shared_ptr<RegisterState> registers;  // null: the CTA's
  std::vector<Frame> frames;
  bool done = false;
  int64_t named_generation = -1;  // waiting at a bar.sync of this generation
  AsyncGroups wgmma, bulk;
  int64_t wgmma_fences = 0, proxy_fences = 0;
  int64_t epoch = 0;
  Clock clock;
  std::vector<int64_t> tile_point;  // inside a tile loop: the role's current tile
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
        globals_("module", module.name),
        schedule_rng_(options.schedule_seed),
        schedule_seed_(options.schedule_seed),
        persistent_ctas_(std::max<int64_t>(options.persistent_ctas, 1)),
        split_warpgroups_(options.split_warpgroups) {}

  InterpretResult run(const TensorMap& inputs) {
    InterpretResult result =
        detail::run_guarded<InterpretResult>("module", module_.name, [&](InterpretResult& r) {
          error_kind_ = InterpretErrorKind::Malformed;
          detail::check_verified(verify(module_), "module");
          error_kind_ = InterpretErrorKind::Other;
          globals_.allocate(module_.params, module_.allocations, inputs,
                            [](const scalar::BufferNode& buffer) {
                              return TileType{buffer.dtype, buffer.shape}.element_count();
                            });
          for (const KernelPtr& kernel : module_.kernels) run_kernel(*kernel);
          globals_.collect(&r.outputs, &r.intermediates);
        });
    result.steps = steps_;
    result.instructions = instructions_;
    if (!result.ok) {
      result.error_kind = error_kind_;
      result.error_op = error_op_;
    }
    return result;
  }

 private:
  // -------------------------------------------------------------------------------------------
  // Errors and bookkeeping

  [[noreturn]] void fail(const std::string& message) { fail(InterpretErrorKind::Other, message); }

  [[noreturn]] void fail(InterpretErrorKind kind, const std::string& message) {
    error_kind_ = kind;
    std::string where = "kernel " + kernel_->name;
    if (!grid_point_.empty()) where += " at grid point " + bracketed(grid_point_);
    if (agent_ != 0) where += " in " + agents_[static_cast<size_t>(agent_)].name;
    if (op_) {
      error_op_ = print_op(*kernel_, *op_);
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

  // The threads of the running thread of control (the CTA's or a role's).
  int64_t threads() const { return thread_count_; }
  int warps() const { return static_cast<int>(thread_count_ / kWarpSize); }
  // The threads the running thread of control executes, [lane_lo_, lane_hi_) of threads(): ops
  // compute their slots and touch memory for these alone.
  int64_t lane_count() const { return lane_hi_ - lane_lo_; }
  int first_warp() const { return static_cast<int>(lane_lo_ / kWarpSize); }
  int end_warp() const { return static_cast<int>(lane_hi_ / kWarpSize); }
  bool runs_part() const { return lane_lo_ != 0 || lane_hi_ != thread_count_; }
  std::unordered_map<const ValueNode*, Slots>& values() { return registers_->values; }
  std::unordered_map<const ValueNode*, int64_t>& in_flight() { return registers_->in_flight; }
  std::unordered_map<const ValueNode*, std::pair<int, int64_t>>& fence_stamps() {
    return registers_->fence_stamps;
  }
  Agent& agent() { return agents_[static_cast<size_t>(agent_)]; }
  int64_t epoch() const { return agents_[static_cast<size_t>(agent_)].epoch; }

  Slots& slots_of(const Value& value) {
    auto found = values().find(value.get());
    if (found == values().end()) {
      // A warpgroup of its own reads the values defined before its role in the CTA's registers.
      if (registers_ != &cta_registers_) found = cta_registers_.values.find(value.get());
      if (found == cta_registers_.values.end()) fail("value %" + value->name + " has no contents");
    }
    return found->second;
  }
  Slots& define(const Value& value) {
    Slots& out = values()[value.get()];
    out.assign(static_cast<size_t>(threads() * value->layout.slots()), 0.0);
    return out;
  }
  double uniform(const Value& value) {
    return slots_of(value)[static_cast<size_t>(lane_lo_ * value->layout.slots())];
  }
  int64_t uniform_index(const Value& value) { return static_cast<int64_t>(uniform(value)); }

  const std::vector<int64_t>& elements_of(const Value& value) {
    auto found = element_tables_.find(value.get());
    if (found != element_tables_.end()) return found->second;
    return element_tables_.emplace(value.get(), slot_elements(value->layout)).first->second;
  }

  // -------------------------------------------------------------------------------------------
  // Kernels and regions

  // Step 5 of "How the interpreter works": the launch and CTA of each global element's last
  // write (launch -1: not written by a kernel).
  // Within the CTA, the thread (and its thread of control and barrier epoch) of the last write
  // and of the reads since: threads of one CTA see each other's global writes only across a
  // barrier, as for shared memory.
  struct GlobalWriter {
    int64_t launch = -1;
    int64_t cta = -1;
    int32_t thread = -1;
    int32_t agent = -1;
    int64_t epoch = -1;
    int64_t read_launch = -1;
    int64_t read_cta = -1;
    int32_t reader = -1;  // -2: several threads
    int32_t reader_agent = -1;
    int64_t read_epoch = -1;
  };
  // The writers of a global buffer's elements, by the buffer's index in globals_ (no hashing
  // per element: every global access of every thread comes here).
  std::vector<GlobalWriter>& writers_of(const BufferState& state) {
    const size_t buffer = static_cast<size_t>(&state - globals_.buffers.data());
    if (global_writers_.size() <= buffer) global_writers_.resize(globals_.buffers.size());
    std::vector<GlobalWriter>& writers = global_writers_[buffer];
    if (writers.size() != state.values.size()) writers.resize(state.values.size());
    return writers;
  }
  std::string cta_name(int64_t cta) const { return "CTA " + std::to_string(cta); }
  void check_cross_cta_read(const BufferState& state, int64_t flat, const std::vector<int64_t>& indices) {
    const GlobalWriter& writer = writers_of(state)[static_cast<size_t>(flat)];
    if (writer.launch == launch_ && writer.cta != current_cta_) {
      fail(InterpretErrorKind::CrossCtaRace,
           cta_name(current_cta_) + " reads " + state.node->name + bracketed(indices) + ", which " +
               cta_name(writer.cta) + " of the same launch wrote: CTAs run in no fixed order");
    }
  }
  std::vector<int64_t> indices_of_flat(const BufferState& state, int64_t flat) const {
    std::vector<int64_t> indices(state.strides.size());
    for (size_t j = 0; j < indices.size(); ++j) {
      indices[j] = state.strides[j] > 0 ? flat / state.strides[j] : 0;
      flat -= indices[j] * state.strides[j];
    }
    return indices;
  }
  // Whether the log's last write is this CTA's, by this thread of control since its last barrier.
  bool written_this_epoch(const GlobalWriter& log) const {
    return log.launch == launch_ && log.cta == current_cta_ && log.agent == agent_ &&
           log.epoch == epoch();
  }
  // Whether the log's readers are this CTA's, of this thread of control since its last barrier.
  bool read_this_epoch(const GlobalWriter& log) const {
    return log.read_launch == launch_ && log.read_cta == current_cta_ &&
           log.reader_agent == agent_ && log.read_epoch == epoch();
  }
  // Thread `thread` of the CTA reads the element: another thread's write since the last barrier
  // is a race (the GPU gives no order between them without one).
  void record_global_read(const BufferState& state, int64_t flat, int64_t thread) {
    GlobalWriter& log = writers_of(state)[static_cast<size_t>(flat)];
    if (written_this_epoch(log) && log.thread != thread) {
      fail(InterpretErrorKind::UnsynchronizedRead,
           "thread " + std::to_string(thread) + " reads " + state.node->name +
               bracketed(indices_of_flat(state, flat)) +
               ", which thread " + std::to_string(log.thread) +
               " of the CTA wrote with no barrier between: the read may see the old value");
    }
    if (read_this_epoch(log)) {
      if (log.reader != thread) log.reader = -2;
      return;
    }
    log.read_launch = launch_;
    log.read_cta = current_cta_;
    log.reader = static_cast<int32_t>(thread);
    log.reader_agent = agent_;
    log.read_epoch = epoch();
  }
  void record_global_write(BufferState& state, int64_t flat, double value, int64_t thread,
                           const std::vector<int64_t>& indices) {
    GlobalWriter& writer = writers_of(state)[static_cast<size_t>(flat)];
    const double old = state.values[static_cast<size_t>(flat)];
    const bool same = old == value || (std::isnan(old) && std::isnan(value));
    if (writer.launch == launch_ && writer.cta != current_cta_ && !same) {
      fail(InterpretErrorKind::CrossCtaRace,
           cta_name(current_cta_) + " writes " + state.node->name + bracketed(indices) + " = " +
               std::to_string(value) + " where " + cta_name(writer.cta) +
               " of the same launch wrote " + std::to_string(old) +
               ": CTAs run in no fixed order, so the result depends on which runs last");
    }
    if (read_this_epoch(writer) && writer.reader != thread && !same) {
      fail(InterpretErrorKind::StageOverwrite,
           "thread " + std::to_string(thread) + " overwrites " + state.node->name +
               bracketed(indices) + ", which " +
               (writer.reader == -2 ? std::string("other threads")
                                    : "thread " + std::to_string(writer.reader)) +
               " of the CTA read with no barrier between: the read may see the new value");
    }
    if (written_this_epoch(writer) && writer.thread != thread && !same) {
      fail(InterpretErrorKind::StageOverwrite,
           "thread " + std::to_string(thread) + " overwrites " + state.node->name +
               bracketed(indices) + ", which thread " + std::to_string(writer.thread) +
               " of the CTA wrote with no barrier between: either write may land last");
    }
    writer.launch = launch_;
    writer.cta = current_cta_;
    writer.thread = static_cast<int32_t>(thread);
    writer.agent = agent_;
    writer.epoch = epoch();
    state.values[static_cast<size_t>(flat)] = value;
  }

  void run_kernel(const Kernel& kernel) {
    ++launch_;
    kernel_ = &kernel;
    op_ = nullptr;
    setup_agents(kernel);
    enter(0);
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
    // A grouped tile order (the schedule's tile_order) runs the grid points in the order the GPU
    // launches them (core/support/launch_order.h), checking that it visits each point once.
    const bool grouped =
        (kernel.tile_group > 1 && extents.size() >= 2) || kernel.reversed_axes != 0;
    if (kernel.persistent) {
      // The CTAs walk the tiles themselves (their tile loops bind the grid variables).
      tile_extents_ = extents;
      launched_ = std::min(points, persistent_ctas_);
      // The launcher zeroed the dynamic scheduler's counter; the CTAs run one after the other
      // here, so each fetches from it in that order.
      tile_counter_ = 0;
      tiles_walked_.clear();
      for (cta_ = 0; cta_ < launched_; ++cta_) {
        current_cta_ = cta_;
        bound_point_.clear();
        reset_shared();
        visit(*kernel.body);
        check_barriers_balanced();
      }
      if (kernel.dynamic_tiles) check_every_tile_walked_once(points);
      grid_point_.clear();
      return;
    }
    std::vector<bool> visited(grouped ? static_cast<size_t>(points) : 0, false);
    for (int64_t point = 0; point < points; ++point) {
      current_cta_ = point;
      if (grouped) {
        grid_point_ =
            grid_point_in_launch_order(point, extents, kernel.tile_group, kernel.reversed_axes);
        int64_t row_major = 0;
        for (size_t k = 0; k < extents.size(); ++k) row_major = row_major * extents[k] + grid_point_[k];
        if (visited[static_cast<size_t>(row_major)]) {
          fail("the tile order (group " + std::to_string(kernel.tile_group) +
               ") visits this grid point twice (CTA " + std::to_string(point) + ")");
        }
        visited[static_cast<size_t>(row_major)] = true;
      } else {
        int64_t rest = point;
        for (size_t k = extents.size(); k-- > 0;) {
          grid_point_[k] = rest % extents[k];
          rest /= extents[k];
        }
      }
      for (size_t k = 0; k < kernel.grid.size(); ++k) {
        define(kernel.grid[k].var).assign(static_cast<size_t>(threads()),
                                          static_cast<double>(grid_point_[k]));
      }
      reset_shared();
      visit(*kernel.body);
      check_barriers_balanced();
    }
    grid_point_.clear();
  }

  void reset_shared() {
    reset_agents();
    copies_.assign(static_cast<size_t>(threads()), ThreadCopies{});
    for (SharedState& s : shared_) {
      const int64_t size = s.alloc->alias_of >= 0 ? 0 : int64_t{s.alloc->stages} * s.alloc->stage_elements;
      s.data.assign(static_cast<size_t>(size), std::nan(""));
      s.state.assign(static_cast<size_t>(size), ElementState{});
      s.read_clock.assign(hb_ ? static_cast<size_t>(size) * agents_.size() : 0, 0);
    }
  }

  // Errors name the op that was running.
  using Visitor::visit;
  void visit(const Op& op) override {
    op_ = &op;
    if (!in_flight().empty()) check_no_in_flight_use(op);
    Visitor::visit(op);
    if (op.kind != OpKind::Wgmma) {
      for (const Value& r : op.results) {
        if (!r) continue;
        in_flight().erase(r.get());
        fence_stamps()[r.get()] = {agent_, agent().wgmma_fences};
      }
    }
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
    ++agent().epoch;
    instructions_["bar.sync"] += 1;
  }
  void visit_SharedLoad(const Op& op) override { shared_load(op); }
  void visit_SharedStore(const Op& op) override { shared_store(op); }
  void visit_For(const Op& op) override { run_for(op); }
  void visit_Yield(const Op&) override {}  // read by run_for
  void visit_Roles(const Op& op) override { run_roles(op); }
  void visit_MBarrierInit(const Op& op) override { mbarrier_init(op); }
  void visit_MBarrierArrive(const Op& op) override { mbarrier_arrive(op); }
  void visit_MBarrierWait(const Op& op) override { mbarrier_wait(op); }
  void visit_NamedBarrier(const Op& op) override { named_barrier_outside_roles(op); }
  void visit_FenceProxyAsync(const Op&) override { ++agent().proxy_fences; }
  void visit_TmaLoad(const Op& op) override { tma_load(op); }
  void visit_TmaStore(const Op& op) override { tma_store(op); }
  void visit_BulkCommitGroup(const Op&) override { commit(&agent().bulk); }
  void visit_BulkWaitGroup(const Op& op) override { retire(&agent().bulk, op.extent); }
  void visit_WgmmaFence(const Op&) override { ++agent().wgmma_fences; }
  void visit_Wgmma(const Op& op) override { wgmma(op); }
  void visit_WgmmaCommitGroup(const Op&) override { commit(&agent().wgmma); }
  void visit_WgmmaWaitGroup(const Op& op) override { retire(&agent().wgmma, op.extent); }
  void visit_StMatrix(const Op& op) override { stmatrix(op); }
  void visit_CtaIndex(const Op& op) override {
    if (!kernel_->persistent || launched_ <= 0) fail("cta_index in a kernel that is not persistent");
    define(op.results[0]).assign(static_cast<size_t>(threads()), static_cast<double>(cta_));
  }
  void visit_TileFetch(const Op& op) override { tile_fetch(op); }
  void visit_TileRead(const Op& op) override { tile_read(op); }
  // Every kind has its rule above; an op reaching here is a kind without one.
  void visit_op(const Op& op) override {
    fail(std::string("no interpreter rule for ") + op_kind_name(op.kind));
  }

  // The iterations of a For: its extent, fewer by its trip count; a tile loop runs once per
  // tile of the CTA.
  int64_t trips_of(const Op& op) {
    if (op.tile_loop) {
      if (!kernel_->persistent || launched_ <= 0) fail("a tile loop in a kernel that is not persistent");
      const int64_t tiles = tile_count();
      // A dynamic walk ends when its carried launch index passes the tiles (dynamic_tile_of).
      if (kernel_->dynamic_tiles) return std::numeric_limits<int64_t>::max();
      return std::max<int64_t>(0, (tiles - cta_ + launched_ - 1) / launched_);
    }
    int64_t trips = op.extent;
    if (op.trip_count) trips = std::min(trips, std::max<int64_t>(uniform_index(op.trip_count), 0));
    return trips;
  }

  int64_t tile_count() const {
    int64_t tiles = 1;
    for (int64_t extent : tile_extents_) tiles *= extent;
    return tiles;
  }

  // The grid point of iteration `step` of a static tile loop: launch index cta + step * launched
  // in the kernel's tile order.
  std::vector<int64_t> tile_point(int64_t step) { return launch_point(cta_ + step * launched_); }
  std::vector<int64_t> launch_point(int64_t launch) {
    return grid_point_in_launch_order(launch, tile_extents_, kernel_->tile_group, kernel_->reversed_axes);
  }

  // A dynamic tile loop's tile (ir.h notes): the launch index its first iter_arg carries (the
  // init, or the last yield), or -1 once the walk is over. Every tile a role starts is counted,
  // so that the end of the kernel can check that each role walked each tile exactly once.
  int64_t dynamic_tile_of(const Slots& carried) {
    if (carried.empty()) fail("a dynamic tile loop carries no launch index");
    const double launch = carried[0];
    const int64_t tiles = tile_count();
    if (!(launch >= 0)) fail("a dynamic tile loop's launch index is " + std::to_string(launch));
    if (launch >= static_cast<double>(tiles)) return -1;
    const int64_t tile = static_cast<int64_t>(launch);
    std::vector<int>& walked = tiles_walked_[agents_[static_cast<size_t>(agent_)].name];
    walked.resize(static_cast<size_t>(tiles), 0);
    if (++walked[static_cast<size_t>(tile)] > 1) {
      fail("the dynamic tile scheduler hands tile " + std::to_string(tile) + " to " + agent().name +
           " a second time");
    }
    return tile;
  }

  void check_every_tile_walked_once(int64_t tiles) {
    op_ = nullptr;
    if (tiles_walked_.empty()) fail("no role walked the tiles of a kernel with the dynamic tile scheduler");
    for (const auto& [role, walked] : tiles_walked_) {
      for (int64_t t = 0; t < tiles; ++t) {
        if (t >= static_cast<int64_t>(walked.size()) || walked[static_cast<size_t>(t)] == 0) {
          fail("the dynamic tile scheduler never hands tile " + std::to_string(t) + " to " + role);
        }
      }
    }
  }
  // Binds the grid variables to `point` for the running threads; the roles take turns op by op,
  // so a binding that is already there (the same point, as many threads) is kept.
  void bind_grid(const std::vector<int64_t>& point) {
    if (point == bound_point_ && threads() == bound_threads_ && registers_ == bound_registers_) return;
    for (size_t k = 0; k < kernel_->grid.size() && k < point.size(); ++k) {
      define(kernel_->grid[k].var).assign(static_cast<size_t>(threads()), static_cast<double>(point[k]));
    }
    bound_point_ = point;
    bound_threads_ = threads();
    bound_registers_ = registers_;
  }

  void run_for(const Op& op) {
    std::vector<Slots> carried;
    for (const Value& init : op.operands) carried.push_back(slots_of(init));
    const Op* self = &op;
    const int64_t trips = trips_of(op);
    const bool dynamic = op.tile_loop && kernel_->dynamic_tiles;
    for (int64_t i = 0; i < trips; ++i) {
      count_steps(1);
      if (dynamic) {
        const int64_t tile = dynamic_tile_of(carried.at(0));
        if (tile < 0) break;
        bind_grid(launch_point(tile));
      } else if (op.tile_loop) {
        bind_grid(tile_point(i));
      }
      define(op.loop_var).assign(static_cast<size_t>(threads()), static_cast<double>(i));
      for (size_t k = 0; k < op.block_args.size(); ++k) values()[op.block_args[k].get()] = carried[k];
      carry_marks(i == 0 ? op.operands : op.body->ops.back()->operands, op.block_args);
      visit(*op.body);
      op_ = self;
      check_operands_retired(op);
      const Op& yield = *op.body->ops.back();
      for (size_t k = 0; k < yield.operands.size(); ++k) carried[k] = slots_of(yield.operands[k]);
    }
    for (size_t k = 0; k < op.results.size(); ++k) values()[op.results[k].get()] = carried[k];
    carry_marks(trips == 0 ? op.operands : op.body->ops.back()->operands, op.results);
  }

  // A loop's body runs in the same registers every iteration (the emitted CUDA declares its
  // values in the body): a wgmma still in flight at the end of an iteration must not read a
  // register operand the body defines, or the next iteration overwrites it under the
  // tensor cores. (Accumulators are fenced and carried; A fragments are not.)
  void check_operands_retired(const Op& loop) {
    const auto& operands = registers_->operands_in_flight;
    if (operands.empty()) return;
    const std::unordered_set<const ValueNode*>& defined = defined_in(loop);
    for (const auto& [value, group] : operands) {
      if (!defined.count(value)) continue;
      fail(InterpretErrorKind::OperandInFlight,
           "a wgmma still in flight at the end of the iteration reads its A operand from registers "
           "the next iteration overwrites; wait for it (wgmma.wait_group) before the iteration ends");
    }
  }
  const std::unordered_set<const ValueNode*>& defined_in(const Op& loop) {
    auto found = defined_in_body_.find(&loop);
    if (found != defined_in_body_.end()) return found->second;
    std::unordered_set<const ValueNode*>& defined = defined_in_body_[&loop];
    const std::function<void(const Region&)> collect = [&](const Region& region) {
      for (const OpPtr& op : region.ops) {
        for (const Value& v : op->results) defined.insert(v.get());
        for (const Value& v : op->block_args) defined.insert(v.get());
        if (op->body) collect(*op->body);
        for (const WarpRole& role : op->roles) {
          if (role.body) collect(*role.body);
        }
      }
    };
    collect(*loop.body);
    for (const Value& v : loop.block_args) defined.insert(v.get());
    return defined;
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
    // The running threads' slots (all of them, unless one warpgroup runs apart).
    const size_t first = static_cast<size_t>(lane_lo_ * result->layout.slots());
    const size_t end = static_cast<size_t>(lane_hi_ * result->layout.slots());
    count_steps(end - first);
    switch (op.kind) {
      case OpKind::Iota: {
        const std::vector<int64_t>& elements = elements_of(result);
        for (size_t i = first; i < end; ++i) out[i] = static_cast<double>(elements[i]);
        break;
      }
      case OpKind::Full:
        std::fill(out.begin() + static_cast<std::ptrdiff_t>(first), out.begin() + static_cast<std::ptrdiff_t>(end),
                  round_to(dtype, op.constant));
        break;
      case OpKind::Unary:
        for (size_t i = first; i < end; ++i) {
          const double x = (*in[0])[i];
          if (dtype == DType::Index) {
            out[i] = op.unary_op == UnaryOp::Abs ? std::fabs(x) : 0.0 - x;
          } else {
            out[i] = round_value(dtype, apply_unary(op.unary_op, x));
          }
        }
        break;
      case OpKind::Binary:
        for (size_t i = first; i < end; ++i) {
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
        for (size_t i = first; i < end; ++i) {
          out[i] = compare_values(op.compare_op, (*in[0])[i], (*in[1])[i]) ? 1.0 : 0.0;
        }
        break;
      case OpKind::Logical:
        for (size_t i = first; i < end; ++i) {
          const bool a = (*in[0])[i] != 0.0, b = (*in[1])[i] != 0.0;
          out[i] = (op.logical_op == LogicalOp::And ? (a && b) : (a || b)) ? 1.0 : 0.0;
        }
        break;
      case OpKind::Select:
        for (size_t i = first; i < end; ++i) {
          out[i] = (*in[0])[i] != 0.0 ? (*in[1])[i] : (*in[2])[i];
        }
        break;
      case OpKind::Cast:
        for (size_t i = first; i < end; ++i) {
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
    values()[result.get()] = std::move(out);
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
    count_steps(static_cast<uint64_t>(lane_count() * result_slots));
    for (int64_t t = lane_lo_; t < lane_hi_; ++t) {
      for (int64_t v = 0; v < result_slots; ++v) {
        const size_t at = static_cast<size_t>(t * result_slots + v);
        out[at] = source[static_cast<size_t>(t * source_slots + table[at])];
      }
    }
    values()[result.get()] = std::move(out);
  }

  // The dense tile (column-major) of a value, from any holder of each element among the running
  // threads.
  std::vector<double> dense(const Value& value) {
    const Slots& slots = slots_of(value);
    const std::vector<int64_t>& elements = elements_of(value);
    std::vector<double> tile(static_cast<size_t>(value->type.element_count()), std::nan(""));
    std::vector<uint8_t> held(tile.size(), 0);
    const int64_t per_thread = value->layout.slots();
    for (size_t i = static_cast<size_t>(lane_lo_ * per_thread); i < static_cast<size_t>(lane_hi_ * per_thread); ++i) {
      tile[static_cast<size_t>(elements[i])] = slots[i];
      held[static_cast<size_t>(elements[i])] = 1;
    }
    for (size_t e = 0; e < held.size(); ++e) {
      if (!held[e]) {
        fail("no thread holds element " + std::to_string(e) + " of %" + value->name +
             (runs_part() ? " in " + agent().name + " (a layout change across warpgroups that run apart)" : ""));
      }
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
    const int64_t per_thread = result->layout.slots();
    for (size_t i = static_cast<size_t>(lane_lo_ * per_thread); i < static_cast<size_t>(lane_hi_ * per_thread); ++i) {
      out[i] = tile[static_cast<size_t>(elements[i])];
    }
    instructions_["bar.sync"] += 2;
    values()[result.get()] = std::move(out);
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
    // 1. Within each thread, in slot order (a repeated element once).
    const bool repeats = repeats_in_a_thread(source->layout);
    for (int64_t t = lane_lo_; t < lane_hi_; ++t) {
      std::unordered_map<int64_t, int64_t> slot_of_element;
      for (int64_t v = 0; v < result_slots; ++v) {
        slot_of_element.emplace(result_elements[static_cast<size_t>(t * result_slots + v)], v);
      }
      std::unordered_set<int64_t> combined;
      for (int64_t v = 0; v < source_slots; ++v) {
        const int64_t element = source_elements[static_cast<size_t>(t * source_slots + v)];
        if (repeats && !combined.insert(element).second) continue;
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
      for (int64_t t = lane_lo_; t < lane_hi_; ++t) {
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
      instructions_["shfl.bfly"] += static_cast<uint64_t>((end_warp() - first_warp()) * result_slots);
    }
    // 3. Across warps through shared memory, in warp order.
    if (op.scratch >= 0) {
      Result<ReducePlan> plan = reduce_plan(source->layout, shape, op.axis);
      if (!plan) fail(plan.error().message);
      Slots next = partial;
      for (int64_t t = lane_lo_; t < lane_hi_; ++t) {
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
            if (base + p < lane_lo_ || base + p >= lane_hi_) {
              fail("a reduction across the warpgroups of a role whose warpgroups run apart");
            }
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
    values()[result.get()] = std::move(partial);
  }

  // -------------------------------------------------------------------------------------------
  // mma.sync.m16n8k16 by the PTX fragment formulas (groupID g = lane / 4, t = lane % 4):
  //   a_i at (g + 8*((i/2)%2), 2t + i%2 + 8*(i/4)), b_i at (2t + i%2 + 8*(i/2), g),
  //   c_i at (g + 8*(i/2), 2t + i%2).
  // Each instruction computes A[16][16] * B[16][8] + C[16][8] in f32 fused multiply-adds in
  // increasing k from the lanes' registers. The direct form takes A from a's slots and B from
  // b's; the swapped one (ir.h, Mma) takes A's rows g and g + 8 from b's n8 atoms 2j and 2j + 1
  // and B from a's a_0, a_1, a_4, a_5.
  void mma(const Op& op) {
    const Value &a = op.operands[0], &b = op.operands[1], &c = op.operands[2];
    const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
    const int wm_count = op.warps_m, wn_count = op.warps_n;
    const int64_t mt = mma_m_atoms(M, wm_count), kt = K / 16, nt = N / (8 * wn_count);
    const int64_t sa = a->layout.slots(), sb = b->layout.slots(), sc = c->layout.slots();
    const int64_t instructions = op.swapped ? nt / 2 : mt * nt;  // per warp and k step
    if (sa != 8 * mt * kt || sb != 4 * kt * nt || sc != 4 * instructions || (op.swapped && nt % 2 != 0)) {
      fail("operand slot counts do not match the mma fragments of the warp tile");
    }
    const Slots &av = slots_of(a), &bv = slots_of(b);
    Slots d = slots_of(c);
    count_steps(static_cast<uint64_t>(M * N * K));
    float A[16][16], B[16][8], C[16][8];
    for (int w = first_warp(); w < end_warp(); ++w) {
      for (int64_t ki = 0; ki < kt; ++ki) {
        for (int64_t j = 0; j < instructions; ++j) {
          const int64_t mi = j % mt, ni = j / mt;  // the direct form's atom
          for (int l = 0; l < kWarpSize; ++l) {
            const int64_t thread = int64_t{w} * kWarpSize + l;
            const int g = l / 4, t = l % 4;
            const double* c_slots = &d[static_cast<size_t>(thread * sc + 4 * j)];
            for (int i = 0; i < 8; ++i) {
              const int row = g + 8 * ((i / 2) % 2), column = 2 * t + i % 2 + 8 * (i / 4);
              const int64_t slot = op.swapped ? 4 * (ki + kt * (2 * j + (i / 2) % 2)) + i % 2 + 2 * (i / 4)
                                              : 8 * (mi + mt * ki) + i;
              A[row][column] = static_cast<float>((op.swapped ? bv : av)[static_cast<size_t>(
                  thread * (op.swapped ? sb : sa) + slot)]);
            }
            for (int i = 0; i < 4; ++i) {
              const int64_t slot = op.swapped ? 8 * ki + i % 2 + 4 * (i / 2) : 4 * (ki + kt * ni) + i;
              B[2 * t + i % 2 + 8 * (i / 2)][g] = static_cast<float>(
                  (op.swapped ? av : bv)[static_cast<size_t>(thread * (op.swapped ? sa : sb) + slot)]);
              C[g + 8 * (i / 2)][2 * t + i % 2] = static_cast<float>(c_slots[i]);
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
              d[static_cast<size_t>(thread * sc + 4 * j + i)] = C[g + 8 * (i / 2)][2 * t + i % 2];
            }
          }
          instructions_["mma.m16n8k16"] += 1;
        }
      }
    }
    values()[op.results[0].get()] = std::move(d);
  }

  // -------------------------------------------------------------------------------------------
  // Shared memory

  // The storage of `alloc`: an alias (SharedAlloc::alias_of) shares its base's elements and
  // their states, so a write through one is a write of the other's bytes for the race checks.
  // Element addresses are the same in both (the same element size, the same first byte).
  SharedState& alloc_state(int alloc) {
    const SharedAlloc& own = *shared_[static_cast<size_t>(alloc)].alloc;
    return shared_[static_cast<size_t>(own.alias_of >= 0 ? own.alias_of : alloc)];
  }
  // The allocation itself: its shape, layout and stages.
  const SharedState& layout_state(int alloc) const { return shared_[static_cast<size_t>(alloc)]; }

  int64_t stage_of(const SharedRef& ref) {
    const SharedAlloc& alloc = *layout_state(ref.alloc).alloc;
    const int64_t stage = ref.stage ? uniform_index(ref.stage) : 0;
    if (stage < 0 || stage >= alloc.stages) {
      fail("stage " + std::to_string(stage) + " of " + alloc.name + " is out of range (" +
           std::to_string(alloc.stages) + " stages)");
    }
    return stage;
  }

  // The element address (in the allocation's linear storage) of tile coordinate c of `ref`.
  int64_t address_of(const SharedRef& ref, int64_t stage, const std::vector<int64_t>& c) {
    const SharedState& s = layout_state(ref.alloc);
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

  // Reads element `address` for thread `thread` (of the running thread of control). An
  // async-proxy read (a wgmma operand, a TMA store source) joins `group` and stays in flight
  // until the group retires.
  double shared_read(int alloc, int64_t address, int64_t thread, AsyncGroup* group = nullptr) {
    SharedState& s = alloc_state(alloc);
    check_address(s, address);
    ElementState& e = s.state[static_cast<size_t>(address)];
    const int64_t global = thread_base_ + thread;
    const std::string where = s.alloc->name + " element " + std::to_string(address);
    if (e.status == Status::Unwritten) fail("thread " + std::to_string(global) + " reads " + where + ", never written");
    if (e.status == Status::InFlight) {
      if (e.landing_slot >= 0) {
        const BarrierSlot& slot = slots_[static_cast<size_t>(e.landing_slot)];
        fail(slot.tx < 0 ? InterpretErrorKind::TxCountMismatch : InterpretErrorKind::UnlandedRead,
             "thread " + std::to_string(global) + " reads " + where + " before its TMA landed: " +
                 slot.name + " phase " + std::to_string(slot.phase) + " has not completed (" +
                 slot_state(slot) + ")" +
                 (slot.tx < 0 ? "; more bytes landed than expect_tx announced" : ""));
      }
      fail(InterpretErrorKind::UnlandedRead,
           "thread " + std::to_string(global) + " reads " + where +
           " before its cp.async landed (missing cp.async.wait_group)");
    }
    if (e.write_component == agent_) {
      if (e.writer != global && e.write_epoch == epoch()) {
        fail(InterpretErrorKind::UnsynchronizedRead,
             "thread " + std::to_string(global) + " reads " + where + " written by thread " +
             std::to_string(e.writer) + " without a barrier in between");
      }
    } else if (hb_ && agent().clock[static_cast<size_t>(e.write_component)] < e.write_clock) {
      if (e.write_component >= static_cast<int32_t>(agents_.size())) {
        const BarrierSlot& slot = slots_[static_cast<size_t>(e.write_component) - agents_.size()];
        fail(InterpretErrorKind::UnlandedRead,
             "thread " + std::to_string(global) + " reads " + where + ", landed by TMA on " +
                 slot.name + " phase " + std::to_string(e.write_clock - 1) +
                 ", without waiting for that phase");
      }
      fail(InterpretErrorKind::UnsynchronizedRead,
           "thread " + std::to_string(global) + " reads " + where + " written by " +
               agents_[static_cast<size_t>(e.write_component)].name +
               " without synchronization (no mbarrier or named barrier orders the write first)");
    }
    if (group) {
      if (e.proxy_stamp >= 0 && e.write_component < static_cast<int32_t>(agents_.size()) &&
          agents_[static_cast<size_t>(e.write_component)].proxy_fences <= e.proxy_stamp) {
        fail(InterpretErrorKind::ProxyFenceMissing,
             "the async proxy reads " + where + ", written by st.shared/stmatrix of " +
                 agents_[static_cast<size_t>(e.write_component)].name +
                 " without a fence.proxy.async after the write");
      }
      ++e.pending_reads;
      group->reads.emplace_back(alloc, address);
      return s.data[static_cast<size_t>(address)];
    }
    const bool same_epoch = e.reader_agent == agent_ && e.read_epoch == epoch();
    if (same_epoch && e.reader != global) {
      e.reader = -2;
    } else if (!same_epoch) {
      e.reader = static_cast<int32_t>(global);
      e.read_epoch = epoch();
      e.reader_agent = agent_;
    }
    if (hb_) s.read_clock[static_cast<size_t>(address) * agents_.size() + static_cast<size_t>(agent_)] = agent().clock[static_cast<size_t>(agent_)];
    return s.data[static_cast<size_t>(address)];
  }

  // Checks that the running thread of control may overwrite the element now: no other thread
  // of it read it since its last barrier, no async read of it is in flight, every other role's
  // read and write of it is ordered before (`who` names the writer in messages).
  ElementState& check_overwrite(int alloc, int64_t address, int64_t thread,
                                const std::string& who = "") {
    SharedState& s = alloc_state(alloc);
    check_address(s, address);
    ElementState& e = s.state[static_cast<size_t>(address)];
    const int64_t global = thread_base_ + thread;
    const std::string writer = who.empty() ? "thread " + std::to_string(global) : who;
    if (e.reader_agent == agent_ && e.read_epoch == epoch() && e.reader != global) {
      fail(InterpretErrorKind::StageOverwrite,
           writer + " overwrites " + s.alloc->name + " element " +
           std::to_string(address) + " that " +
           (e.reader == -2 ? std::string("other threads") : "thread " + std::to_string(e.reader)) +
           " read since the last barrier (missing bar.sync)");
    }
    if (!hb_) return e;
    const std::string where = s.alloc->name + " element " + std::to_string(address);
    if (e.pending_reads > 0) {
      fail(InterpretErrorKind::StageOverwrite,
           writer + " overwrites " + where + " while an async read of it (a wgmma operand or a " +
               "TMA store source) is in flight: its group was not retired by a wait_group");
    }
    if (e.status == Status::InFlight && e.landing_slot >= 0) {
      fail(InterpretErrorKind::StageOverwrite,
           writer + " overwrites " + where + " whose TMA on " +
               slots_[static_cast<size_t>(e.landing_slot)].name + " has not landed");
    }
    for (size_t a = 0; a < agents_.size(); ++a) {
      if (static_cast<int>(a) == agent_) continue;
      const int64_t read = s.read_clock[static_cast<size_t>(address) * agents_.size() + a];
      if (read > agent().clock[a]) {
        fail(InterpretErrorKind::StageOverwrite,
             writer + " overwrites " + where + ", which " + agents_[a].name +
                 " read and has not released to " + agent().name +
                 " (no mbarrier arrive/wait or named barrier orders the read first)");
      }
    }
    if (e.status != Status::Unwritten && e.write_component != agent_ &&
        agent().clock[static_cast<size_t>(e.write_component)] < e.write_clock) {
      fail(InterpretErrorKind::StageOverwrite,
           writer + " overwrites " + where + ", whose last write (" + component_name(e.write_component) +
               ") " + agent().name + " has not synchronized with");
    }
    return e;
  }

  void record_write(ElementState& e, int64_t thread) {
    e.status = Status::Valid;
    e.writer = static_cast<int32_t>(thread_base_ + thread);
    e.write_epoch = epoch();
    e.write_component = agent_;
    e.write_clock = hb_ ? agent().clock[static_cast<size_t>(agent_)] : 0;
    e.proxy_stamp = agent().proxy_fences;
    e.landing_slot = -1;
  }

  void shared_write(int alloc, int64_t address, int64_t thread, double value) {
    ElementState& e = check_overwrite(alloc, address, thread);
    record_write(e, thread);
    alloc_state(alloc).data[static_cast<size_t>(address)] = value;
  }

  void shared_store(const Op& op) {
    const Value& value = op.operands[0];
    const Slots& in = slots_of(value);
    const std::vector<int64_t>& elements = elements_of(value);
    const int64_t stage = stage_of(op.shared);
    const int64_t slots = value->layout.slots();
    count_steps(in.size());
    for (int64_t t = lane_lo_; t < lane_hi_; ++t) {
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
      for (int64_t t = lane_lo_; t < lane_hi_; ++t) {
        for (int64_t v = 0; v < slots; ++v) {
          const size_t at = static_cast<size_t>(t * slots + v);
          const int64_t address =
              address_of(op.shared, stage, coordinates_of(elements[at], result->type.shape));
          out[at] = shared_read(op.shared.alloc, address, t);
        }
      }
      values()[result.get()] = std::move(out);
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
                                                       warps())) {
      if (issue.warp < first_warp() || issue.warp >= end_warp()) continue;
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
    values()[result.get()] = std::move(out);
  }

  void fma_dot(const Op& op) {
    const Value& acc = op.operands[0];
    const Value& result = op.results[0];
    const int64_t M = acc->type.shape[0], N = acc->type.shape[1];
    const SharedAlloc& a_alloc = *layout_state(op.shared.alloc).alloc;
    const int64_t K = op.shared.transposed ? a_alloc.shape[0] - op.shared.offsets[0]
                                           : a_alloc.shape[1] - op.shared.offsets[1];
    (void)M;
    (void)N;
    const int64_t a_stage = stage_of(op.shared), b_stage = stage_of(op.shared_b);
    const std::vector<int64_t>& elements = elements_of(result);
    const int64_t slots = result->layout.slots();
    Slots out = slots_of(acc);
    count_steps(out.size() * static_cast<uint64_t>(K));
    for (int64_t t = lane_lo_; t < lane_hi_; ++t) {
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
    values()[result.get()] = std::move(out);
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
    check_cross_cta_read(state, flat, indices);
    return state.values[static_cast<size_t>(flat)];
  }

  // The first slot of the running threads holding each element (every holder holds the same
  // value and indices); -1 for elements only other threads hold.
  std::vector<int64_t> first_holders(const Value& value) {
    const std::vector<int64_t>& elements = elements_of(value);
    std::vector<int64_t> first(static_cast<size_t>(value->type.element_count()), -1);
    const int64_t per_thread = value->layout.slots();
    for (size_t i = static_cast<size_t>(lane_lo_ * per_thread); i < static_cast<size_t>(lane_hi_ * per_thread); ++i) {
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
    std::vector<int64_t> flats(first.size(), -1);  // -1: not accessed (masked or out of bounds)
    std::vector<int64_t> indices(op.buffer->shape.size());
    count_steps(elements.size());
    for (size_t e = 0; e < first.size(); ++e) {
      if (first[e] >= 0 && access_element(op, result, static_cast<int64_t>(e), first[e], &indices)) {
        flats[e] = flat_offset(state, indices);
        tile[e] = global_read(state, flats[e], indices);
      }
    }
    Slots out(elements.size());
    const int64_t per_thread = result->layout.slots();
    for (size_t i = static_cast<size_t>(lane_lo_ * per_thread); i < static_cast<size_t>(lane_hi_ * per_thread); ++i) {
      const size_t e = static_cast<size_t>(elements[i]);
      out[i] = tile[e];
      // Every thread holding the element reads it.
      if (flats[e] >= 0) {
        record_global_read(state, flats[e], thread_base_ + static_cast<int64_t>(i) / per_thread);
      }
    }
    values()[result.get()] = std::move(out);
  }

  // Writes each element once, from the first slot holding it.
  void global_store(const Op& op) {
    const Value value = stored_value(op);
    BufferState& state = buffer_state(op.buffer);
    const std::vector<int64_t> first = first_holders(value);
    const Slots& in = slots_of(value);
    count_steps(in.size());
    std::vector<int64_t> indices(op.buffer->shape.size());
    const int64_t per_thread = value->layout.slots();
    for (size_t e = 0; e < first.size(); ++e) {
      if (first[e] < 0 || !access_element(op, value, static_cast<int64_t>(e), first[e], &indices)) continue;
      const int64_t flat = flat_offset(state, indices);
      // The emitted store is predicated on the first thread holding the element.
      record_global_write(state, flat, in[static_cast<size_t>(first[e])],
                          thread_base_ + first[e] / per_thread, indices);
      if (!state.written.empty()) state.written[static_cast<size_t>(flat)] = 1;
    }
  }

  // cp.async: per thread, its slots taken vector_elements at a time.
  void async_copy(const Op& op) {
    if (runs_part()) fail("cp.async in a role whose warpgroups run apart");
    if (op.predicate && uniform(op.predicate) == 0.0) return;
    BufferState& state = buffer_state(op.buffer);
    const int64_t stage = stage_of(op.shared);
    const SharedAlloc& alloc = *layout_state(op.shared.alloc).alloc;
    // Bits an element: int4 is packed two elements a byte in global and in shared memory.
    const int64_t bits = alloc.dtype == DType::I4 ? 4 : 8 * dtype_bytes(alloc.dtype);
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
            if ((alloc.byte_offset * 8 + address * bits) % 128 != 0) {
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
              if ((flat * bits) % 128 != 0) {
                fail("cp.async source " + op.buffer->name + bracketed(indices) +
                     " is not 16-byte aligned");
              }
            } else if (flat != flat0 + j) {
              fail("cp.async source vector in " + op.buffer->name + " is not contiguous");
            }
            value = global_read(state, flat, indices);
            record_global_read(state, flat, thread_base_ + t);
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
          record_write(s.state[static_cast<size_t>(write.address)], static_cast<int64_t>(t));
          s.data[static_cast<size_t>(write.address)] = write.value;
        }
        c.committed.pop_front();
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // HOPPER: threads of control, mbarriers, TMA, wgmma (interpreter.h: "Hopper roles")

  // Whether a role's warpgroups run as threads of control of their own: the role has several
  // and per-warpgroup named barriers (ping-pong), which lockstep could not execute, or the
  // caller asked for it (InterpretOptions::split_warpgroups).
  bool runs_apart(const WarpRole& role) const {
    if (role.warpgroups < 2 || !role.body) return false;
    if (split_warpgroups_) return true;
    bool per_warpgroup = false;
    for_each_op(*role.body, [&](const Op& op) {
      per_warpgroup = per_warpgroup || (op.kind == OpKind::NamedBarrier && !op.warpgroup_ids.empty());
    });
    return per_warpgroup;
  }

  // Threads of control: the CTA, then every role of every Roles op (a role whose warpgroups run
  // apart: one per warpgroup); mbarrier slots.
  void setup_agents(const Kernel& kernel) {
    agents_.clear();
    role_agents_.clear();
    agents_.push_back(make_agent("the CTA", 0, kernel.threads()));
    if (kernel.body) {
      for_each_op(*kernel.body, [&](const Op& op) {
        if (op.kind != OpKind::Roles) return;
        int64_t base = 0;
        for (const WarpRole& role : op.roles) {
          const int64_t count = int64_t{role.warpgroups} * kWarpgroupThreads;
          std::vector<int>& ids = role_agents_[&role];
          if (!runs_apart(role)) {
            ids.push_back(static_cast<int>(agents_.size()));
            agents_.push_back(make_agent("role " + role.name, base, count));
          } else {
            for (int g = 0; g < role.warpgroups; ++g) {
              ids.push_back(static_cast<int>(agents_.size()));
              Agent a = make_agent("role " + role.name + " warpgroup " + std::to_string(g), base, count);
              a.lane_lo = int64_t{g} * kWarpgroupThreads;
              a.lane_hi = a.lane_lo + kWarpgroupThreads;
              a.warpgroup = g;
              a.registers = std::make_shared<RegisterState>();
              agents_.push_back(std::move(a));
            }
          }
          base += count;
        }
      });
    }
    // Kernels with roles or mbarriers keep vector clocks (TMA data is ordered through them even
    // without roles); others keep the per-thread barrier epochs alone.
    hb_ = agents_.size() > 1 || !kernel.mbarriers.empty();
    slots_.clear();
    slot_base_.clear();
    std::vector<bool> tma_targets(kernel.mbarriers.size(), false);
    if (kernel.body) {
      for_each_op(*kernel.body, [&](const Op& op) {
        if (op.kind == OpKind::TmaLoad && op.mbarrier.barrier >= 0) {
          tma_targets[static_cast<size_t>(op.mbarrier.barrier)] = true;
        }
      });
    }
    for (size_t b = 0; b < kernel.mbarriers.size(); ++b) {
      const MBarrierAlloc& barrier = kernel.mbarriers[b];
      slot_base_.push_back(static_cast<int>(slots_.size()));
      for (int i = 0; i < barrier.count; ++i) {
        BarrierSlot slot;
        slot.name = barrier.name + "[" + std::to_string(i) + "]";
        slot.carries_tx = tma_targets[b];
        slots_.push_back(std::move(slot));
      }
    }
  }

  static Agent make_agent(std::string name, int64_t base, int64_t count) {
    Agent agent;
    agent.name = std::move(name);
    agent.thread_base = base;
    agent.thread_count = count;
    agent.lane_hi = count;
    return agent;
  }

  // Per grid point: fresh barriers, clocks and groups.
  void reset_agents() {
    const size_t components = agents_.size() + slots_.size();
    for (size_t a = 0; a < agents_.size(); ++a) {
      Agent& g = agents_[a];
      g.frames.clear();
      g.done = false;
      g.named_generation = -1;
      g.wgmma = AsyncGroups{};
      g.bulk = AsyncGroups{};
      g.wgmma_fences = g.proxy_fences = g.epoch = 0;
      g.clock.assign(components, 0);
      g.clock[a] = 1;
      if (g.registers) g.registers->clear();
    }
    for (BarrierSlot& slot : slots_) {
      std::string name = std::move(slot.name);
      const bool carries_tx = slot.carries_tx;
      slot = BarrierSlot{};
      slot.name = std::move(name);
      slot.carries_tx = carries_tx;
      slot.release.assign(components, 0);
      slot.completed.assign(components, 0);
    }
    named_.clear();
    cta_registers_.in_flight.clear();
    cta_registers_.fence_stamps.clear();
  }

  std::string component_name(int32_t component) const {
    if (component < static_cast<int32_t>(agents_.size())) return agents_[static_cast<size_t>(component)].name;
    const BarrierSlot& slot = slots_[static_cast<size_t>(component) - agents_.size()];
    return "a TMA landing on " + slot.name;
  }

  static std::string slot_state(const BarrierSlot& slot) {
    return std::to_string(slot.phase) + " phases completed, current parity " +
           std::to_string(slot.phase & 1) + ", " + std::to_string(slot.pending) + " of " +
           std::to_string(slot.expected) + " arrivals and " + std::to_string(slot.tx) +
           " transaction bytes pending";
  }

  BarrierSlot& slot_of(const BarrierRef& ref) {
    const MBarrierAlloc& barrier = kernel_->mbarriers[static_cast<size_t>(ref.barrier)];
    const int64_t index = ref.index ? uniform_index(ref.index) : 0;
    if (index < 0 || index >= barrier.count) {
      fail("slot " + std::to_string(index) + " of mbarrier " + barrier.name + " is out of range (" +
           std::to_string(barrier.count) + " slots)");
    }
    BarrierSlot& slot = slots_[static_cast<size_t>(slot_base_[static_cast<size_t>(ref.barrier)] + index)];
    if (!slot.initialized) fail("mbarrier " + slot.name + " is used before mbarrier.init");
    return slot;
  }
  int32_t component_of(const BarrierSlot& slot) const {
    return static_cast<int32_t>(agents_.size() + static_cast<size_t>(&slot - slots_.data()));
  }

  // A wgmma result may travel through loops (its registers stay put) but nothing else may read
  // it before its group retires.
  void carry_marks(const std::vector<Value>& from, const std::vector<Value>& to) {
    std::vector<std::pair<const ValueNode*, int64_t>> flight;
    std::vector<std::pair<const ValueNode*, std::pair<int, int64_t>>> stamps;
    for (size_t k = 0; k < from.size() && k < to.size(); ++k) {
      auto f = in_flight().find(from[k].get());
      if (f != in_flight().end()) flight.emplace_back(to[k].get(), f->second);
      auto st = fence_stamps().find(from[k].get());
      if (st != fence_stamps().end()) stamps.emplace_back(to[k].get(), st->second);
    }
    for (size_t k = 0; k < from.size() && k < to.size(); ++k) {
      in_flight().erase(to[k].get());
      fence_stamps().erase(to[k].get());
    }
    for (const auto& [node, group] : flight) in_flight()[node] = group;
    for (const auto& [node, stamp] : stamps) fence_stamps()[node] = stamp;
  }

  void check_no_in_flight_use(const Op& op) {
    if (op.kind == OpKind::Yield || op.kind == OpKind::For) return;
    const std::vector<Value> used = used_values(op);
    for (size_t i = 0; i < used.size(); ++i) {
      if (!used[i] || !in_flight().count(used[i].get())) continue;
      const bool wgmma_accumulator = op.kind == OpKind::Wgmma && i + 1 == op.operands.size();
      if (wgmma_accumulator) continue;
      fail(InterpretErrorKind::AccumulatorBeforeWait,
           "reads %" + used[i]->name + ", a wgmma result whose group no wgmma.wait_group has " +
               "retired (ptxas would serialize the wgmma)");
    }
  }

  // ---- roles

  void run_roles(const Op& op) {
    const Op* self = &op;
    std::vector<int> running;
    Agent& cta = agents_[0];
    for (const WarpRole& role : op.roles) {
      for (const int id : role_agents_.at(&role)) {
        Agent& a = agents_[static_cast<size_t>(id)];
        join_into(&a.clock, cta.clock);
        a.frames.assign(1, Frame{role.body.get()});
        a.done = false;
        running.push_back(id);
      }
    }
    ++cta.clock[0];
    while (true) {
      bool progressed = false, all_done = true;
      std::vector<int> order = running;
      if (schedule_seed_ != 0) std::shuffle(order.begin(), order.end(), schedule_rng_);
      for (int id : order) {
        const int turn = schedule_seed_ != 0 ? 1 + static_cast<int>(schedule_rng_() % 4) : 1;
        for (int t = 0; t < turn && !agents_[static_cast<size_t>(id)].done; ++t) {
          if (!step(id)) break;
          progressed = true;
        }
        all_done = all_done && agents_[static_cast<size_t>(id)].done;
      }
      if (all_done) break;
      if (!progressed) deadlock(running);
    }
    enter(0);
    op_ = self;
    // A named barrier left partly arrived (an arrival nobody consumed: a ping-pong seed too many)
    // would leave the hardware barrier mid-phase for the next use of its id.
    for (const auto& [id, state] : named_) {
      if (state.arrived == 0) continue;
      fail(InterpretErrorKind::ArrivalCountMismatch,
           "the roles end with named barrier " + std::to_string(id) + " in a partial phase: " +
               std::to_string(state.arrived) + " of " + std::to_string(state.expected) +
               " threads arrived (" + state.last_arrivers + ")");
    }
    for (int id : running) {
      Agent& a = agents_[static_cast<size_t>(id)];
      if (!a.wgmma.empty() || !a.bulk.empty()) {
        fail(InterpretErrorKind::AsyncInFlightAtExit,
             a.name + " ends with " + (a.wgmma.empty() ? "bulk copy" : "wgmma") +
                 " groups in flight (missing wait_group 0)");
      }
      join_into(&cta.clock, a.clock);
    }
    ++cta.epoch;  // the roles end together: the CTA continues after all of them
  }

  void enter(int id) {
    Agent& a = agents_[static_cast<size_t>(id)];
    agent_ = id;
    thread_base_ = a.thread_base;
    thread_count_ = a.thread_count;
    lane_lo_ = a.lane_lo;
    lane_hi_ = a.lane_hi;
    registers_ = a.registers ? a.registers.get() : &cta_registers_;
  }

  // The id of the named barrier `op` is for the running thread of control: a per-warpgroup id
  // (0: this warpgroup skips the op), else the op's.
  int named_barrier_id(const Op& op) {
    if (op.warpgroup_ids.empty()) return op.barrier_id;
    const int g = agent().warpgroup;
    if (g < 0 || g >= static_cast<int>(op.warpgroup_ids.size())) {
      fail("a per-warpgroup named barrier run by " + agent().name + ", which is not one warpgroup of its role");
    }
    return op.warpgroup_ids[static_cast<size_t>(g)];
  }

  // Ops one elected thread (the role's thread 0) executes: in a role whose warpgroups run apart,
  // warpgroup 0 runs them and the others pass.
  static bool elected(const Op& op) {
    switch (op.kind) {
      case OpKind::TmaLoad: case OpKind::TmaStore: case OpKind::BulkCommitGroup:
      case OpKind::BulkWaitGroup: case OpKind::MBarrierInit: return true;
      default: return false;
    }
  }

  // Runs the next op of role `id`; false when it is blocked (nothing changed).
  bool step(int id) {
    Agent& a = agents_[static_cast<size_t>(id)];
    enter(id);
    // The roles walk their tiles independently: the grid variables hold this role's tile.
    if (!a.tile_point.empty()) bind_grid(a.tile_point);
    Frame& f = a.frames.back();
    if (f.pc >= f.region->ops.size()) {  // the role's body ended
      a.frames.pop_back();
      a.done = true;
      return true;
    }
    const Op& op = *f.region->ops[f.pc];
    op_ = &op;
    count_steps(1);
    switch (op.kind) {
      case OpKind::For: {
        if (!in_flight().empty()) check_no_in_flight_use(op);
        int64_t trips = trips_of(op);
        if (op.tile_loop && kernel_->dynamic_tiles) {
          const int64_t tile = dynamic_tile_of(slots_of(op.operands.at(0)));
          if (tile < 0) {
            trips = 0;
          } else {
            a.tile_point = launch_point(tile);
            bind_grid(a.tile_point);
          }
        } else if (op.tile_loop && trips > 0) {
          a.tile_point = tile_point(0);
          bind_grid(a.tile_point);
        }
        if (trips == 0) {
          for (size_t k = 0; k < op.results.size(); ++k) values()[op.results[k].get()] = slots_of(op.operands[k]);
          carry_marks(op.operands, op.results);
          ++f.pc;
          return true;
        }
        define(op.loop_var).assign(static_cast<size_t>(threads()), 0.0);
        for (size_t k = 0; k < op.block_args.size(); ++k) values()[op.block_args[k].get()] = slots_of(op.operands[k]);
        carry_marks(op.operands, op.block_args);
        a.frames.push_back(Frame{op.body.get(), 0, &op, 0, trips});
        return true;
      }
      case OpKind::Yield: {
        const Op& loop = *f.loop;
        check_operands_retired(loop);
        std::vector<Slots> carried;
        for (const Value& v : op.operands) carried.push_back(slots_of(v));
        int64_t next_tile = 0;
        if (loop.tile_loop && kernel_->dynamic_tiles) next_tile = dynamic_tile_of(carried.at(0));
        if (++f.iteration < f.trips && next_tile >= 0) {
          if (loop.tile_loop && kernel_->dynamic_tiles) {
            a.tile_point = launch_point(next_tile);
            bind_grid(a.tile_point);
          } else if (loop.tile_loop) {
            a.tile_point = tile_point(f.iteration);
            bind_grid(a.tile_point);
          }
          define(loop.loop_var).assign(static_cast<size_t>(threads()), static_cast<double>(f.iteration));
          for (size_t k = 0; k < loop.block_args.size(); ++k) values()[loop.block_args[k].get()] = carried[k];
          carry_marks(op.operands, loop.block_args);
          f.pc = 0;
        } else {
          if (loop.tile_loop) a.tile_point.clear();
          for (size_t k = 0; k < loop.results.size(); ++k) values()[loop.results[k].get()] = carried[k];
          carry_marks(op.operands, loop.results);
          a.frames.pop_back();
          ++a.frames.back().pc;
        }
        return true;
      }
      case OpKind::MBarrierWait:
        if (!mbarrier_ready(op)) return false;
        break;
      case OpKind::NamedBarrier: {
        const int id = named_barrier_id(op);
        if (id == 0) {  // not this warpgroup's
          ++f.pc;
          return true;
        }
        const NamedStep done = named_step(a, id, op.barrier_threads, op.arrive_only);
        if (done.passed) ++f.pc;
        return done.progressed;
      }
      case OpKind::MBarrierArrive:
        if (a.warpgroup >= 0 && elected_arrive(op)) {
          // One elected thread arrives for the whole role, so the role's warpgroups meet first
          // (the emitter's bar.sync on the role's barrier before it); then warpgroup 0 arrives.
          const NamedStep done = named_step(a, role_meeting_barrier(a), threads(), false);
          if (!done.passed) return done.progressed;
          if (a.warpgroup == 0) visit(op);
          ++a.frames.back().pc;
          return true;
        }
        break;
      default:
        if (a.warpgroup > 0 && elected(op)) {  // warpgroup 0's thread 0 issues it
          ++f.pc;
          return true;
        }
        break;
    }
    visit(op);
    ++a.frames.back().pc;
    return true;
  }

  struct NamedStep {
    bool progressed = false;  // something changed (an arrival, or the wait passed)
    bool passed = false;      // the op is done: an arrival, or a bar.sync whose phase completed
  };
  // One turn of agent `a` at named barrier `id` counting `expected` threads: it arrives (once),
  // and a bar.sync then waits until the phase completes, acquiring what the arrivals released.
  NamedStep named_step(Agent& a, int id, int64_t expected, bool arrive_only) {
    const bool arrived_now = a.named_generation < 0;
    if (arrived_now) named_arrive(a, id, expected, arrive_only);
    if (arrive_only) return {true, true};
    if (named_[id].generation == a.named_generation) return {arrived_now, false};
    join_into(&a.clock, named_[id].completed);
    a.named_generation = -1;
    ++a.epoch;
    instructions_["bar.sync"] += 1;
    return {true, true};
  }

  // An mbarrier arrive of one elected thread for the role (not every thread for itself).
  bool elected_arrive(const Op& op) const {
    if (op.arrive_per_warp) return false;
    return op.arrivals_per_op != threads() || op.tx_bytes > 0;
  }
  // The barrier on which a role's warpgroups running apart meet before an elected arrive: one
  // per role, outside the ids 1..15 of the IR's named barriers.
  int role_meeting_barrier(const Agent& a) const { return -1 - static_cast<int>(a.thread_base / kWarpgroupThreads); }

  // Every running role is blocked: report each one's wait.
  [[noreturn]] void deadlock(const std::vector<int>& running) {
    std::string message = "deadlock: every role waits and none can proceed";
    InterpretErrorKind kind = InterpretErrorKind::Deadlock;
    const Op* first = nullptr;
    int first_id = 0;
    for (int id : running) {
      const Agent& a = agents_[static_cast<size_t>(id)];
      if (a.done) {
        message += "; " + a.name + " has ended";
        continue;
      }
      const Frame& f = a.frames.back();
      const Op& op = *f.region->ops[f.pc];
      if (!first) {
        first = &op;
        first_id = id;
      }
      enter(id);
      message += "; " + a.name + " waits at `" + print_op(*kernel_, op) + "`";
      if (op.kind == OpKind::MBarrierWait) {
        const BarrierSlot& slot = slot_of(op.mbarrier);
        message += " for the phase of parity " + std::to_string(uniform_index(op.operands[0])) +
                   ": " + slot.name + " has " + slot_state(slot);
        if (slot.pending == 0 && slot.tx > 0) {
          kind = InterpretErrorKind::TxCountMismatch;
          message += " (every arrival came, but expect_tx announced " + std::to_string(slot.tx) +
                     " bytes more than the TMA copies delivered)";
        }
      } else if (op.kind == OpKind::MBarrierArrive && a.named_generation >= 0) {
        const NamedBarrierState& state = named_[role_meeting_barrier(a)];
        message += " (its role's warpgroups meet before the elected arrive): " +
                   std::to_string(state.arrived) + " of " + std::to_string(state.expected) + " threads arrived";
      } else if (op.kind == OpKind::NamedBarrier) {
        const int barrier = named_barrier_id(op);
        const NamedBarrierState& state = named_[barrier];
        message += " (named barrier " + std::to_string(barrier) + "): " + std::to_string(state.arrived) +
                   " of " + std::to_string(state.expected) + " threads arrived" +
                   (state.last_arrivers.empty() ? std::string() : " (" + state.last_arrivers + ")");
      }
    }
    enter(first_id);
    op_ = first;
    fail(kind, message);
  }

  // ---- mbarriers and named barriers

  void mbarrier_init(const Op& op) {
    const MBarrierAlloc& barrier = kernel_->mbarriers[static_cast<size_t>(op.mbarrier.barrier)];
    for (int i = 0; i < barrier.count; ++i) {
      BarrierSlot& slot = slots_[static_cast<size_t>(slot_base_[static_cast<size_t>(op.mbarrier.barrier)] + i)];
      slot.initialized = true;
      slot.expected = slot.pending = barrier.arrivals;
      slot.tx = 0;
    }
    instructions_["mbarrier.init"] += static_cast<uint64_t>(barrier.count);
  }

  void complete_phase(BarrierSlot& slot) {
    // A phase of a barrier that TMA loads complete on, without any expect_tx, releases its
    // waiters before the data it guards has landed (a missing arrive.expect_tx).
    if (slot.carries_tx && slot.announced == 0) {
      fail(InterpretErrorKind::TxCountMismatch,
           slot.name + " phase " + std::to_string(slot.phase) + " completes without expect_tx, " +
               "though TMA loads complete on it: its waiters would read before the data lands");
    }
    const int32_t component = component_of(slot);
    ++slot.phase;
    for (const PendingWrite& write : slot.landing) {
      SharedState& s = alloc_state(write.alloc);
      ElementState& e = s.state[static_cast<size_t>(write.address)];
      e.status = Status::Valid;
      e.writer = -1;
      e.write_component = component;
      e.write_clock = slot.phase;
      e.proxy_stamp = -1;
      e.landing_slot = -1;
      s.data[static_cast<size_t>(write.address)] = write.value;
    }
    slot.landing.clear();
    slot.completed = slot.release;
    slot.completed[static_cast<size_t>(component)] = slot.phase;
    std::fill(slot.release.begin(), slot.release.end(), 0);
    slot.pending = slot.expected;
    slot.tx = 0;
    slot.announced = 0;
  }

  // After arrivals or landed bytes: completes the phase, or reports bytes beyond expect_tx.
  void settle(BarrierSlot& slot) {
    if (slot.pending > 0) return;
    if (slot.tx == 0) return complete_phase(slot);
    if (slot.tx < 0) {
      fail(InterpretErrorKind::TxCountMismatch,
           slot.name + " phase " + std::to_string(slot.phase) + ": every arrival came but " +
               std::to_string(-slot.tx) + " more transaction bytes landed than expect_tx announced");
    }
  }

  void mbarrier_arrive(const Op& op) {
    BarrierSlot& slot = slot_of(op.mbarrier);
    Agent& a = agent();
    // Every thread arriving for itself, in a warpgroup running apart: its threads arrive (an
    // elected arrive comes here from warpgroup 0 only, once the role's warpgroups met).
    // One arrival per warp: its lanes converge first, so the warp's arrival follows every lane's work.
    const int64_t lanes_per_arrival = op.arrive_per_warp ? kWarpSize : 1;
    const int64_t arrivals =
        runs_part() && !elected_arrive(op) ? lane_count() / lanes_per_arrival : op.arrivals_per_op;
    if (slot.pending < arrivals) {
      fail(InterpretErrorKind::ArrivalCountMismatch,
           "arrives " + std::to_string(arrivals) + " times on " + slot.name +
               ", whose phase " + std::to_string(slot.phase) + " has only " +
               std::to_string(slot.pending) + " arrivals pending (over-arrival)");
    }
    slot.tx += op.tx_bytes;
    slot.announced += op.tx_bytes;
    join_into(&slot.release, a.clock);
    ++a.clock[static_cast<size_t>(agent_)];
    slot.pending -= arrivals;
    instructions_[op.tx_bytes > 0 ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive"] += 1;
    settle(slot);
  }

  bool mbarrier_ready(const Op& op) {
    const BarrierSlot& slot = slot_of(op.mbarrier);
    const int64_t parity = uniform_index(op.operands[0]);
    if (parity != 0 && parity != 1) fail("mbarrier parity " + std::to_string(parity) + " is not 0 or 1");
    return (slot.phase & 1) != parity;
  }

  void mbarrier_wait(const Op& op) {
    if (!mbarrier_ready(op)) {
      // Outside roles nothing else runs that could complete the phase.
      const BarrierSlot& slot = slot_of(op.mbarrier);
      fail(slot.pending == 0 && slot.tx > 0 ? InterpretErrorKind::TxCountMismatch
                                            : InterpretErrorKind::Deadlock,
           "deadlock: " + agent().name + " waits for the phase of parity " +
               std::to_string(uniform_index(op.operands[0])) + " of " + slot.name +
               ", which nothing can complete (" + slot_state(slot) + ")");
    }
    join_into(&agent().clock, slot_of(op.mbarrier).completed);
    instructions_["mbarrier.try_wait"] += 1;
  }

  void named_arrive(Agent& a, int id, int64_t expected, bool arrive_only) {
    NamedBarrierState& state = named_[id];
    if (state.release.empty()) {
      state.release.assign(a.clock.size(), 0);
      state.completed.assign(a.clock.size(), 0);
    }
    if (state.arrived == 0) state.expected = expected;
    if (state.expected != expected) {
      fail(InterpretErrorKind::ArrivalCountMismatch,
           "arrives at named barrier " + std::to_string(id) + " counting " +
               std::to_string(expected) + " threads while others arrived counting " +
               std::to_string(state.expected));
    }
    state.arrived += lane_count();
    state.last_arrivers += (state.last_arrivers.empty() ? "" : ", ") + a.name +
                           (arrive_only ? " arrived" : " waits");
    if (state.arrived > state.expected) {
      fail(InterpretErrorKind::ArrivalCountMismatch,
           std::to_string(state.arrived) + " threads arrive at named barrier " +
               std::to_string(id) + ", which counts " + std::to_string(state.expected));
    }
    join_into(&state.release, a.clock);
    ++a.clock[static_cast<size_t>(agent_)];
    if (!arrive_only) a.named_generation = state.generation;
    if (state.arrived == state.expected) {
      state.completed = state.release;
      std::fill(state.release.begin(), state.release.end(), 0);
      state.arrived = 0;
      state.last_arrivers.clear();
      ++state.generation;
    }
    if (arrive_only) instructions_["bar.arrive"] += 1;
  }

  // Outside roles the whole CTA executes the op: a bar.sync of every thread.
  void named_barrier_outside_roles(const Op& op) {
    if (op.arrive_only || op.barrier_threads != threads()) {
      fail(InterpretErrorKind::Deadlock,
           "named barrier " + std::to_string(op.barrier_id) + " outside roles must be a bar.sync " +
               "of all " + std::to_string(threads()) + " threads");
    }
    ++agent().epoch;
    instructions_["bar.sync"] += 1;
  }

  // ---- TMA

  const TmaMap& map_of(const Op& op) const { return kernel_->tma_maps[static_cast<size_t>(op.tma_map)]; }

  // Visits every element of the map's box: its coordinate in the shared tile (the box over the
  // map's tile axes), its buffer indices, and whether it lies inside the buffer.
  template <typename Body>
  void for_each_box_element(const Op& op, Body&& body) {
    const TmaMap& map = map_of(op);
    const std::vector<int> tile_axes = tma_tile_axes(map);
    std::vector<int64_t> tile_coordinate(tile_axes.size());
    std::vector<int64_t> start;
    for (const Value& c : op.operands) start.push_back(uniform_index(c));
    int64_t elements = 1;
    for (int64_t extent : map.box) elements *= extent;
    count_steps(static_cast<uint64_t>(elements));
    std::vector<int64_t> c(map.box.size()), indices(map.box.size());
    for (int64_t flat = 0; flat < elements; ++flat) {
      int64_t rest = flat;
      bool inside = true;
      for (size_t j = map.box.size(); j-- > 0;) {
        c[j] = rest % map.box[j];
        rest /= map.box[j];
        indices[j] = start[j] + c[j];
        if (indices[j] < 0 || indices[j] >= map.buffer->shape[j]) inside = false;
      }
      for (size_t t = 0; t < tile_axes.size(); ++t) tile_coordinate[t] = c[static_cast<size_t>(tile_axes[t])];
      body(tile_coordinate, indices, inside);
    }
  }

  void tma_load(const Op& op) {
    BarrierSlot& slot = slot_of(op.mbarrier);
    const TmaMap& map = map_of(op);
    BufferState& state = buffer_state(map.buffer);
    const int64_t stage = stage_of(op.shared);
    const std::string who = "the TMA load of " + agent().name;
    for_each_box_element(op, [&](const std::vector<int64_t>& c, const std::vector<int64_t>& indices,
                                 bool inside) {
      double value = 0.0;
      if (inside) {
        const int64_t flat = flat_offset(state, indices);
        value = global_read(state, flat, indices);
        record_global_read(state, flat, thread_base_);  // the elected thread issues the copy
      }
      const int64_t address = address_of(op.shared, stage, c);
      ElementState& e = check_overwrite(op.shared.alloc, address, 0, who);
      e.status = Status::InFlight;
      e.landing_slot = static_cast<int32_t>(&slot - slots_.data());
      slot.landing.push_back({op.shared.alloc, address, value});
    });
    instructions_["tma.load"] += 1;
    slot.tx -= tma_box_bytes(map);  // complete_tx
    settle(slot);
  }

  // ---- the dynamic tile scheduler (ir.h notes)

  // The elected thread's atomic add on the counter; its value lands in the ring slot on the
  // barrier, as a TMA load's data does: readable only after a wait on the phase it completes.
  void tile_fetch(const Op& op) {
    if (!kernel_->dynamic_tiles || launched_ <= 0) fail("tile_fetch in a kernel without the dynamic tile scheduler");
    BarrierSlot& slot = slot_of(op.mbarrier);
    const int64_t stage = stage_of(op.shared);
    const int64_t address = address_of(op.shared, stage, {0});
    const double value = static_cast<double>(tile_counter_++ + launched_);
    ElementState& e = check_overwrite(op.shared.alloc, address, 0, "the tile fetch of " + agent().name);
    e.status = Status::InFlight;
    e.landing_slot = static_cast<int32_t>(&slot - slots_.data());
    slot.landing.push_back({op.shared.alloc, address, value});
    instructions_["atom.global.add"] += 1;
    count_steps(1);
  }

  void tile_read(const Op& op) {
    const int64_t stage = stage_of(op.shared);
    const int64_t address = address_of(op.shared, stage, {0});
    Slots& out = define(op.results[0]);
    count_steps(out.size());
    for (int64_t t = 0; t < threads(); ++t) {
      out[static_cast<size_t>(t)] = shared_read(op.shared.alloc, address, t);
    }
  }

  AsyncGroup& open_group(AsyncGroups* groups) {
    if (groups->open.id < 0) groups->open.id = next_group_++;
    return groups->open;
  }

  void tma_store(const Op& op) {
    const TmaMap& map = map_of(op);
    BufferState& state = buffer_state(map.buffer);
    const int64_t stage = stage_of(op.shared);
    AsyncGroup& group = open_group(&agent().bulk);
    for_each_box_element(op, [&](const std::vector<int64_t>& c, const std::vector<int64_t>& indices,
                                 bool inside) {
      if (!inside) return;
      const double value = shared_read(op.shared.alloc, address_of(op.shared, stage, c), 0, &group);
      const int64_t flat = flat_offset(state, indices);
      record_global_write(state, flat, value, thread_base_, indices);  // the elected thread's
      if (!state.written.empty()) state.written[static_cast<size_t>(flat)] = 1;
    });
    instructions_["tma.store"] += 1;
  }

  void commit(AsyncGroups* groups) {
    if (groups->open.id < 0) groups->open.id = next_group_++;  // an empty group still counts
    groups->committed.push_back(std::move(groups->open));
    groups->open = AsyncGroup{};
  }

  // wait_group n: all but the n most recent committed groups complete; their async reads end
  // now (the executing role's clock) and their wgmma results become usable.
  void retire(AsyncGroups* groups, int64_t pending) {
    Agent& a = agent();
    while (static_cast<int64_t>(groups->committed.size()) > pending) {
      const AsyncGroup& group = groups->committed.front();
      for (const auto& [alloc, address] : group.reads) {
        SharedState& s = alloc_state(alloc);
        ElementState& e = s.state[static_cast<size_t>(address)];
        --e.pending_reads;
        if (hb_) {
          int64_t& read = s.read_clock[static_cast<size_t>(address) * agents_.size() + static_cast<size_t>(agent_)];
          read = std::max(read, a.clock[static_cast<size_t>(agent_)]);
        }
      }
      for (auto it = in_flight().begin(); it != in_flight().end();) {
        it = it->second == group.id ? in_flight().erase(it) : std::next(it);
      }
      auto& operands = registers_->operands_in_flight;
      for (auto it = operands.begin(); it != operands.end();) {
        it = it->second == group.id ? operands.erase(it) : std::next(it);
      }
      groups->committed.pop_front();
    }
  }

  // ---- wgmma and stmatrix, by the PTX fragment formulas (warp w of warpgroup g, lane l):
  //   accumulator register i at row 64g + 16w + l/4 + 8((i/2)%2), column 8(i/4) + 2(l%4) + i%2;
  //   register A (k atom q) register i at row 64g + 16w + l/4 + 8((i/2)%2),
  //   column 16q + 2(l%4) + i%2 + 8(i/4).

  void check_fenced(const Value& value) {
    auto found = fence_stamps().find(value.get());
    if (found == fence_stamps().end()) return;  // written by a wgmma
    const auto [writer, fences] = found->second;
    const int64_t now = agent().wgmma_fences;
    if (writer == agent_ ? fences < now : now > 0) return;
    fail(InterpretErrorKind::WgmmaFenceMissing,
         "%" + value->name + " was written by ordinary code after the last wgmma.fence");
  }

  void wgmma(const Op& op) {
    const bool rs = op.operands.size() == 2;
    const Value& c = op.operands.back();
    const Value& result = op.results[0];
    const int64_t M = c->type.shape[0], N = c->type.shape[1], K = op.extent;
    // The executing warpgroups: all of the role's, or the one running apart (its 64 rows).
    const int64_t groups = lane_count() / kWarpgroupThreads;
    const int64_t first_row = 64 * (lane_lo_ / kWarpgroupThreads), end_row = 64 * (lane_hi_ / kWarpgroupThreads);
    check_fenced(c);
    if (rs) check_fenced(op.operands[0]);
    const int64_t sc = c->layout.slots();
    if (sc != N / 2 || (rs && op.operands[0]->layout.slots() != K / 2)) {
      fail("operand slot counts do not match the wgmma fragments");
    }
    AsyncGroup& group = open_group(&agent().wgmma);
    std::vector<float> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N));
    if (rs) {
      const Slots& av = slots_of(op.operands[0]);
      const int64_t sa = K / 2;
      for (int64_t thread = lane_lo_; thread < lane_hi_; ++thread) {
        const int64_t g = thread / 128, w = (thread / 32) % 4, l = thread % 32;
        for (int64_t q = 0; q < K / 16; ++q) {
          for (int64_t i = 0; i < 8; ++i) {
            const int64_t row = 64 * g + 16 * w + l / 4 + 8 * ((i / 2) % 2);
            const int64_t col = 16 * q + 2 * (l % 4) + i % 2 + 8 * (i / 4);
            A[static_cast<size_t>(row * K + col)] =
                static_cast<float>(av[static_cast<size_t>(thread * sa + 8 * q + i)]);
          }
        }
      }
    } else {
      const int64_t stage = stage_of(op.shared);
      for (int64_t m = first_row; m < end_row && m < M; ++m) {
        for (int64_t k = 0; k < K; ++k) {
          A[static_cast<size_t>(m * K + k)] = static_cast<float>(
              shared_read(op.shared.alloc, address_of(op.shared, stage, {m, k}), 128 * (m / 64), &group));
        }
      }
    }
    const int64_t b_stage = stage_of(op.shared_b);
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t n = 0; n < N; ++n) {
        B[static_cast<size_t>(k * N + n)] = static_cast<float>(
            shared_read(op.shared_b.alloc, address_of(op.shared_b, b_stage, {k, n}), 0, &group));
      }
    }
    const Slots& cv = slots_of(c);
    Slots d(cv.size());
    count_steps(static_cast<uint64_t>((end_row - first_row) * N * K));
    for (int64_t thread = lane_lo_; thread < lane_hi_; ++thread) {
      const int64_t g = thread / 128, w = (thread / 32) % 4, l = thread % 32;
      for (int64_t i = 0; i < sc; ++i) {
        const int64_t row = 64 * g + 16 * w + l / 4 + 8 * ((i / 2) % 2);
        const int64_t col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
        float sum = static_cast<float>(cv[static_cast<size_t>(thread * sc + i)]);
        for (int64_t k = 0; k < K; ++k) {
          sum = std::fmaf(A[static_cast<size_t>(row * K + k)], B[static_cast<size_t>(k * N + col)], sum);
        }
        d[static_cast<size_t>(thread * sc + i)] = sum;
      }
    }
    // One instruction reads 32 bytes of k: k16 for 16-bit operands, k32 for 8-bit floats.
    const int64_t k_step = 32 / dtype_bytes(alloc_state(op.shared_b.alloc).alloc->dtype);
    instructions_["wgmma.m64n" + std::to_string(N) + "k" + std::to_string(k_step)] +=
        static_cast<uint64_t>(groups * (K / k_step));
    values()[result.get()] = std::move(d);
    in_flight()[result.get()] = group.id;
    fence_stamps().erase(result.get());
    if (rs) registers_->operands_in_flight[op.operands[0].get()] = group.id;
  }

  // stmatrix.x4: for issue q of warp w, matrix m covers rows 16w + 8(m%2) .. +7 and columns
  // 8(2q + m/2) .. +7 of the warpgroup's 64 rows; lane L gives the row address of row L%8 of
  // matrix L/8, and lane l stores its registers 8q + 2m + {0,1} at row l/4, columns 2(l%4) + {0,1}.
  void stmatrix(const Op& op) {
    const Value& value = op.operands[0];
    const Slots& in = slots_of(value);
    const int64_t slots = value->layout.slots(), N = value->type.shape[1];
    if (slots != N / 2) fail("the value's slot count does not match the accumulator fragment");
    const int64_t stage = stage_of(op.shared);
    const SharedState& s = alloc_state(op.shared.alloc);
    const int bytes = dtype_bytes(s.alloc->dtype);
    count_steps(in.size());
    for (int64_t warp = first_warp(); warp < end_warp(); ++warp) {
      const int64_t g = warp / 4, w = warp % 4;
      for (int64_t q = 0; q < N / 16; ++q) {
        int64_t address[kWarpSize];
        for (int lane = 0; lane < kWarpSize; ++lane) {
          const int64_t m = lane / 8;
          const int64_t row = 64 * g + 16 * w + 8 * (m % 2) + lane % 8, col = 8 * (2 * q + m / 2);
          address[lane] = address_of(op.shared, stage, {row, col});
          if ((s.alloc->byte_offset + address[lane] * bytes) % 16 != 0) {
            fail("stmatrix row address of lane " + std::to_string(lane) + " in " + s.alloc->name +
                 " is not 16-byte aligned");
          }
          for (int64_t e = 1; e < 8; ++e) {
            if (address_of(op.shared, stage, {row, col + e}) != address[lane] + e) {
              fail("stmatrix row of lane " + std::to_string(lane) + " in " + s.alloc->name +
                   " is not 8 contiguous elements");
            }
          }
        }
        for (int64_t l = 0; l < kWarpSize; ++l) {
          const int64_t thread = warp * kWarpSize + l;
          for (int64_t m = 0; m < 4; ++m) {
            for (int64_t e = 0; e < 2; ++e) {
              shared_write(op.shared.alloc, address[8 * m + l / 4] + 2 * (l % 4) + e, thread,
                           in[static_cast<size_t>(thread * slots + 8 * q + 2 * m + e)]);
            }
          }
        }
        instructions_["stmatrix.x4"] += 1;
      }
    }
  }

  // When a grid point ends every mbarrier phase must have been completed or left untouched.
  void check_barriers_balanced() {
    for (const BarrierSlot& slot : slots_) {
      if (!slot.initialized || (slot.pending == slot.expected && slot.tx == 0)) continue;
      op_ = nullptr;
      fail(slot.pending == slot.expected ? InterpretErrorKind::TxCountMismatch
                                         : InterpretErrorKind::ArrivalCountMismatch,
           "the kernel ends with " + slot.name + " in a partial phase: " + slot_state(slot));
    }
    if (!agents_[0].wgmma.empty() || !agents_[0].bulk.empty()) {
      op_ = nullptr;
      fail(InterpretErrorKind::AsyncInFlightAtExit,
           "the kernel ends with wgmma or bulk copy groups in flight (missing wait_group 0)");
    }
  }

  const Module& module_;
  const uint64_t step_limit_;
  uint64_t steps_ = 0;
  detail::GlobalBuffers globals_;
  const Kernel* kernel_ = nullptr;
  const Op* op_ = nullptr;
  std::vector<int64_t> grid_point_;
  RegisterState cta_registers_;
  RegisterState* registers_ = &cta_registers_;  // the running thread of control's
  std::unordered_map<const ValueNode*, std::vector<int64_t>> element_tables_;
  std::unordered_map<const Op*, std::vector<int32_t>> gather_tables_;
  std::vector<SharedState> shared_;
  std::vector<ThreadCopies> copies_;
  // Threads of control (agent 0: the CTA) and Hopper state (the HOPPER section above).
  std::vector<Agent> agents_;
  std::unordered_map<const WarpRole*, std::vector<int>> role_agents_;  // one, or one per warpgroup
  int agent_ = 0;
  // The running thread of control: the CTA thread of its register arrays' thread 0, their
  // thread count, and the threads [lane_lo_, lane_hi_) of them it executes (a warpgroup of a
  // role whose warpgroups run apart; else all).
  int64_t thread_base_ = 0, thread_count_ = 0, lane_lo_ = 0, lane_hi_ = 0;
  const bool split_warpgroups_;
  bool hb_ = false;  // the kernel has roles: vector clocks are kept
  std::vector<BarrierSlot> slots_;
  std::vector<int> slot_base_;  // first slot of each mbarrier array
  std::unordered_map<int, NamedBarrierState> named_;
  int64_t next_group_ = 0;
  std::mt19937_64 schedule_rng_;
  const uint64_t schedule_seed_;
  const int64_t persistent_ctas_;
  int64_t launch_ = 0;       // kernels run so far: the current launch's number
  int64_t current_cta_ = 0;  // the CTA running now (its grid point's index, or a persistent CTA)
  std::vector<std::vector<GlobalWriter>> global_writers_;
  std::unordered_map<const Op*, std::unordered_set<const ValueNode*>> defined_in_body_;  // per buffer of globals_
  // The dynamic tile scheduler: the counter of the kernel being run (zero at its launch) and,
  // per role, how often each tile was walked.
  int64_t tile_counter_ = 0;
  std::map<std::string, std::vector<int>> tiles_walked_;
  // A persistent kernel's CTA being run, the CTAs launched and the tile space (the grid).
  int64_t cta_ = 0, launched_ = 0;
  std::vector<int64_t> tile_extents_;
  // What bind_grid last bound the grid variables to.
  std::vector<int64_t> bound_point_;
  int64_t bound_threads_ = -1;
  const RegisterState* bound_registers_ = nullptr;
  InterpretErrorKind error_kind_ = InterpretErrorKind::Other;
  std::string error_op_;
  std::map<std::string, uint64_t> instructions_;
};

}  // namespace

const char* interpret_error_kind_name(InterpretErrorKind kind) {
  switch (kind) {
    case InterpretErrorKind::None: return "none";
    case InterpretErrorKind::Malformed: return "malformed";
    case InterpretErrorKind::UnlandedRead: return "unlanded_read";
    case InterpretErrorKind::UnsynchronizedRead: return "unsynchronized_read";
    case InterpretErrorKind::StageOverwrite: return "stage_overwrite";
    case InterpretErrorKind::TxCountMismatch: return "tx_count_mismatch";
    case InterpretErrorKind::ArrivalCountMismatch: return "arrival_count_mismatch";
    case InterpretErrorKind::AccumulatorBeforeWait: return "accumulator_before_wait";
    case InterpretErrorKind::WgmmaFenceMissing: return "wgmma_fence_missing";
    case InterpretErrorKind::ProxyFenceMissing: return "proxy_fence_missing";
    case InterpretErrorKind::AsyncInFlightAtExit: return "async_in_flight_at_exit";
    case InterpretErrorKind::Deadlock: return "deadlock";
    case InterpretErrorKind::CrossCtaRace: return "cross_cta_race";
    case InterpretErrorKind::OperandInFlight: return "operand_in_flight";
    case InterpretErrorKind::Other: return "other";
  }
  return "?";
}

InterpretResult interpret(const Module& module, const TensorMap& inputs,
                          const InterpretOptions& options) {
  return Interpreter(module, options).run(inputs);
}

}  // namespace nautilus::matile
