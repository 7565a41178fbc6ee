// The per-warp timeline of a kernel's inner loop (timeline.h): a small simulation of the warps
// (and, for warp-specialized kernels, of the roles meeting at mbarriers), sized by op_work.
#include "core/cost/timeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/cost/analytical_model.h"
#include "core/matile/visitor.h"
#include "core/scalar/ir.h"
#include "core/vrtile/ir.h"

namespace nautilus::cost {
namespace {

using matile::Op;
using matile::OpKind;
using matile::Value;

// A wgmma's FLOPs in units of its 16-bit form, which wgmma_flops_per_cycle counts: the 8-bit form
// (fp8 operands) runs kEightBitWgmmaSpeedup times as many per cycle.
double wgmma_rate_flops(const OpWork& work) {
  return work.tensor_flops - work.wgmma_8bit_flops + work.wgmma_8bit_flops / kEightBitWgmmaSpeedup;
}

// The k one wgmma instruction reads: 16, or 32 for the 8-bit form.
int64_t wgmma_k_step(const OpWork& work) { return work.wgmma_8bit_flops > 0 ? 32 : 16; }

bool is_uniform_scalar(const Value& value) {
  return value && value->type.shape.empty();
}

std::string kib_text(int64_t bytes) {
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " B";
}

// The path of Fors from the kernel body down to the inner loop: the first pipelined For in
// depth-first program order, else the first For.
bool find_loop(const matile::Region& region, bool want_pipelined, std::vector<const Op*>& path) {
  for (const matile::OpPtr& op : region.ops) {
    if (op->kind != OpKind::For || !op->body) continue;
    path.push_back(op.get());
    if (!want_pipelined || op->pipeline_stages > 0) return true;
    if (find_loop(*op->body, want_pipelined, path)) return true;
    path.pop_back();
  }
  return false;
}

WarpCost warp_cost_on(const matile::Kernel& kernel, const matile::Op& op, const CycleCosts& costs,
                      int warps_running);

// The first Roles op at the top level of the kernel body, or null.
const Op* top_level_roles(const matile::Region& body) {
  for (const matile::OpPtr& op : body.ops) {
    if (op->kind == OpKind::Roles) return op.get();
  }
  return nullptr;
}

// The ring's depth of a warp-specialized kernel: the most stages of an allocation a TMA box
// lands in (0: none).
int ring_stages(const matile::Kernel& kernel, const Op& roles) {
  int stages = 0;
  for (const matile::WarpRole& role : roles.roles) {
    if (!role.body) continue;
    matile::for_each_op(*role.body, [&](const Op& op) {
      if (op.kind == OpKind::TmaLoad && op.shared.alloc >= 0 &&
          op.shared.alloc < static_cast<int>(kernel.shared.size())) {
        stages = std::max(stages, kernel.shared[static_cast<size_t>(op.shared.alloc)].stages);
      }
    });
  }
  return stages;
}

class Simulator {
 public:
  Simulator(const matile::Kernel& kernel, const TimelineOptions& options, PipelineTimeline& out)
      : kernel_(kernel), costs_(options.costs), out_(out),
        clock_(static_cast<size_t>(kernel.warps), 0),
        open_group_(static_cast<size_t>(kernel.warps), -1),
        committed_(static_cast<size_t>(kernel.warps)) {}

  int64_t clock(int warp) const { return clock_[static_cast<size_t>(warp)]; }
  int64_t latest_clock() const { return *std::max_element(clock_.begin(), clock_.end()); }

  void set_scalar(const Value& value, int64_t number) { scalars_[value.get()] = number; }

  // Runs `ops` on every warp, op by op (bar.sync needs every warp at the same op).
  void run(const std::vector<matile::OpPtr>& ops, size_t count, int iteration) {
    for (size_t i = 0; i < count && i < ops.size(); ++i) step(*ops[i], iteration, static_cast<int>(i));
  }

  // Rows: the warps, then one row per copy stage, then the Hopper rows (TMA stages, the tensor
  // cores); copy bars get their row here.
  void finish() {
    for (int w = 0; w < kernel_.warps; ++w) {
      TimelineRow row{TimelineRow::Kind::Warp, "warp " + std::to_string(w), w, -1, "", -1};
      if (auto role = warp_roles_.find(w); role != warp_roles_.end()) {
        row.name += " (" + role->second.first + ")";
        row.role = role->second.first;
        row.warpgroup = role->second.second;
      }
      out_.rows.push_back(std::move(row));
    }
    std::map<int, int> row_of_stage;  // cp.async stage -> row
    std::map<std::pair<int, int>, int> row_of_async;  // (0, TMA stage) or (1, -1) -> row
    for (const auto& [stage, bars] : copy_bars_) {
      row_of_stage[stage] = static_cast<int>(out_.rows.size());
      out_.rows.push_back({TimelineRow::Kind::Copies,
                           stage < 0 ? std::string("cp.async") : "cp.async stage " + std::to_string(stage),
                           -1, stage, "", -1});
    }
    for (auto& [stage, bars] : copy_bars_) {
      for (TimelineBar& bar : bars) {
        bar.row = row_of_stage[stage];
        out_.total_cycles = std::max(out_.total_cycles, bar.end);
        out_.bars.push_back(std::move(bar));
      }
    }
    for (auto& [key, bars] : async_bars_) {
      const int row = static_cast<int>(out_.rows.size());
      row_of_async[key] = row;
      out_.rows.push_back({TimelineRow::Kind::Copies,
                           key.first == 0 ? "tma stage " + std::to_string(key.second)
                                          : std::string("tensor cores (wgmma)"),
                           -1, key.first == 0 ? key.second : -1, "", -1});
      for (TimelineBar& bar : bars) {
        bar.row = row;
        out_.total_cycles = std::max(out_.total_cycles, bar.end);
        out_.bars.push_back(std::move(bar));
      }
    }
    out_.total_cycles = std::max(out_.total_cycles, latest_clock());
    // Hand-offs from a TMA landing start on its stage's row.
    for (PendingHandoff& pending : handoffs_) {
      if (pending.source.warp < 0) {
        auto row = row_of_async.find({0, pending.source.tma_stage});
        if (row == row_of_async.end()) continue;
        pending.handoff.from_row = row->second;
      } else {
        pending.handoff.from_row = pending.source.warp;
      }
      out_.handoffs.push_back(std::move(pending.handoff));
    }
  }

  // Warp specialization (timeline.h): runs every role of `roles` on its warps, each role's ops
  // before its first loop and then `iterations` iterations of that loop (`ahead` more for a role
  // that loads by TMA), the roles meeting at mbarriers, until every role is done or waits for a
  // phase no role will complete. The first role's loop gives out_'s loop fields.
  void run_roles(const Op& roles, int iterations, int ahead) {
    std::vector<RoleRun> runs;
    int first_warp = 0;
    const int64_t start = latest_clock();
    for (const matile::WarpRole& role : roles.roles) {
      // A role whose warpgroups take turns at per-warpgroup named barriers (ping-pong) runs
      // each warpgroup on its own, so that one waits for its turn while another issues; other
      // roles run their warpgroups together.
      const bool apart = role.warpgroups > 1 && role.body && takes_turns(*role.body);
      const int parts = apart ? role.warpgroups : 1;
      const int role_first_warp = first_warp;
      for (int part = 0; part < parts; ++part) {
        RoleRun run;
        run.name = role.name;
        run.first_warp = first_warp;
        run.warps = 4 * role.warpgroups / parts;
        run.role_warps = 4 * role.warpgroups;
        run.warpgroup = apart ? part : -1;
        first_warp += run.warps;
        run.clock = start;
        run.scalars = scalars_;  // what the kernel computed before the roles
        for (int w = run.first_warp; w < run.first_warp + run.warps; ++w) {
          warp_roles_[w] = {role.name, (w - role_first_warp) / 4};
        }
        if (role.body) plan_role(*role.body, iterations, ahead, run);
        runs.push_back(std::move(run));
      }
    }
    // The iterations drawn are those of the first role that computes (its loop loads nothing by
    // TMA): a producer runs ahead of the consumers, so its iterations would not line up with the
    // work the reader follows.
    size_t shown = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
      if (runs[r].loop && !runs[r].loads) {
        shown = r;
        break;
      }
    }
    if (!runs.empty() && runs[shown].loop) {
      const Op& loop = *runs[shown].loop;
      out_.loop_var = loop.loop_var ? loop.loop_var->name : "";
      out_.loop_extent = loop.extent;
      out_.iterations = std::min(iterations, static_cast<int>(loop.extent));
    }
    // Discrete events: the role with the earliest clock that can go on takes its next step; a
    // role whose mbarrier wait cannot be satisfied yet waits until another role has moved.
    while (true) {
      RoleRun* next = nullptr;
      for (RoleRun& run : runs) {
        if (run.next < run.steps.size() && !run.blocked && (!next || run.clock < next->clock)) next = &run;
      }
      if (!next) break;
      if (role_step(*next)) {
        for (RoleRun& run : runs) run.blocked = false;
      } else {
        next->blocked = true;
      }
    }
    for (RoleRun& run : runs) {
      close_span(run);
      for (int w = run.first_warp; w < run.first_warp + run.warps && w < static_cast<int>(clock_.size()); ++w) {
        clock_[static_cast<size_t>(w)] = run.clock;
      }
    }
    if (!runs.empty()) {
      out_.loop_start = runs[shown].loop_start;
      out_.iteration_spans = runs[shown].spans;
    }
  }

 private:
  // One op of a role's program: the op, its loop iteration (-1 before the loop), its position.
  struct RoleStep {
    const Op* op = nullptr;
    int iteration = -1;
    int op_index = 0;
  };
  struct RoleRun {
    std::string name;
    int first_warp = 0, warps = 0;
    // The role's warps (more than `warps` when its warpgroups run apart) and, when they do,
    // which warpgroup this run is (-1: the whole role). An op's work is the role's, each run
    // doing its warps' share of it.
    int role_warps = 0;
    int warpgroup = -1;
    // The scalars the run computed: each run has its own, since warpgroups running apart
    // evaluate the same index ops for different iterations at the same time.
    std::unordered_map<const matile::ValueNode*, int64_t> scalars;
    std::vector<RoleStep> steps;
    size_t next = 0;
    int64_t clock = 0;
    bool blocked = false;
    const Op* loop = nullptr;
    bool loads = false;  // its loop issues TMA loads (a producer)
    int64_t open_wgmma = -1;              // when the open wgmma group's last wgmma ends
    std::vector<int64_t> wgmma_groups;    // committed groups' ends, oldest first
    int64_t loop_start = 0;
    int iteration = -1;  // of the last step taken
    std::vector<std::pair<int64_t, int64_t>> spans;  // per drawn iteration of its loop
    bool arrived = false;   // at the named barrier of its current step
    size_t generation = 0;  // ... whose generation it waits for
  };

  // What completed an mbarrier phase or a named barrier: a role's arrival (its first warp) or a
  // TMA box landing in a stage.
  struct Source {
    int warp = -1;
    int tma_stage = -1;
  };
  struct PendingHandoff {
    TimelineHandoff handoff;  // from_row resolved in finish()
    Source source;
  };
  // One named barrier id: the threads arrived at its current generation, the latest arrival, and
  // when (and by whom) each completed generation completed.
  struct NamedState {
    int64_t arrived = 0;
    int64_t latest = 0;
    Source latest_source;
    std::vector<int64_t> completed;
    std::vector<Source> sources;
  };

  void handoff(const RoleRun& run, const Source& source, bool named, std::string label, int64_t from,
               int64_t to, int iteration) {
    if (source.warp >= run.first_warp && source.warp < run.first_warp + run.warps) return;  // itself
    // Every warpgroup of the waiting role goes on (its first warp's row stands for it).
    for (int warp = run.first_warp; warp < run.first_warp + run.warps; warp += 4) {
      PendingHandoff pending;
      pending.source = source;
      pending.handoff.named_barrier = named;
      pending.handoff.label = label;
      pending.handoff.to_row = warp;
      pending.handoff.from_cycle = from;
      pending.handoff.to_cycle = to;
      pending.handoff.iteration = iteration;
      handoffs_.push_back(std::move(pending));
    }
  }

  // A run's part of an op's `arrivals`: all of them for a whole role; for a warpgroup running
  // apart its share of the role's threads (every thread arrives), or all of them on warpgroup 0
  // when they do not divide (an elected thread).
  static int64_t arrivals_of_run(const RoleRun& run, int64_t arrivals) {
    if (run.warpgroup < 0) return arrivals;
    const int64_t parts = std::max(run.role_warps / std::max(run.warps, 1), 1);
    if (arrivals % parts == 0) return arrivals / parts;
    return run.warpgroup == 0 ? arrivals : 0;
  }

  // Whether a role's body has named barriers with per-warpgroup ids (ping-pong turns).
  static bool takes_turns(const matile::Region& region) {
    for (const matile::OpPtr& op : region.ops) {
      if (op->kind == OpKind::NamedBarrier && !op->warpgroup_ids.empty()) return true;
      if (op->body && takes_turns(*op->body)) return true;
    }
    return false;
  }

  void close_span(RoleRun& run) const {
    if (run.iteration >= 0 && run.iteration < out_.iterations && !run.spans.empty()) {
      run.spans.back().second = run.clock;
    }
  }
  // One mbarrier slot: the arrivals and bytes its current phase still waits for, the latest
  // contribution, and when each completed phase completed.
  struct SlotState {
    int64_t pending = 0;
    int64_t tx = 0;
    int64_t latest = 0;
    Source latest_source;
    std::vector<int64_t> completed;
    std::vector<Source> sources;  // what completed each completed phase
  };

  // A role's program: the ops before its first loop, then that loop's iterations (a role that
  // loads by TMA `ahead` more, as far as the loop goes).
  void plan_role(const matile::Region& body, int iterations, int ahead, RoleRun& run) {
    for (size_t i = 0; i < body.ops.size(); ++i) {
      const Op& op = *body.ops[i];
      if (op.kind != OpKind::For || !op.body) {
        run.steps.push_back({&op, -1, static_cast<int>(i)});
        continue;
      }
      bool loads = false;
      matile::for_each_op(*op.body, [&](const Op& inner) { loads = loads || inner.kind == OpKind::TmaLoad; });
      const int64_t trips = std::min<int64_t>(op.extent, iterations + (loads ? ahead : 0));
      run.loop = &op;
      run.loads = loads;
      for (int64_t it = 0; it < trips; ++it) {
        for (size_t j = 0; j < op.body->ops.size(); ++j) {
          if (op.body->ops[j]->kind == OpKind::Yield) continue;
          run.steps.push_back({op.body->ops[j].get(), static_cast<int>(it), static_cast<int>(j)});
        }
      }
      return;  // the epilogue after the loop is not drawn
    }
  }

  SlotState& slot_state(const matile::BarrierRef& ref) {
    const int64_t slot = ref.index ? scalar(ref.index).value_or(0) : 0;
    auto [it, inserted] = slots_.try_emplace({ref.barrier, slot});
    if (inserted && ref.barrier >= 0 && ref.barrier < static_cast<int>(kernel_.mbarriers.size())) {
      it->second.pending = kernel_.mbarriers[static_cast<size_t>(ref.barrier)].arrivals;
    }
    return it->second;
  }

  static void contribute(SlotState& slot, int64_t at, Source source) {
    if (at >= slot.latest) {
      slot.latest = at;
      slot.latest_source = source;
    }
  }

  static void maybe_complete(SlotState& slot, int64_t arrivals) {
    if (slot.pending <= 0 && slot.tx <= 0) {
      slot.completed.push_back(slot.latest);
      slot.sources.push_back(slot.latest_source);
      slot.latest_source = {};
      slot.pending = arrivals;
      slot.tx = 0;
      slot.latest = 0;
    }
  }

  int64_t arrivals_of(const matile::BarrierRef& ref) const {
    return ref.barrier >= 0 && ref.barrier < static_cast<int>(kernel_.mbarriers.size())
               ? kernel_.mbarriers[static_cast<size_t>(ref.barrier)].arrivals
               : 1;
  }

  std::string slot_text(const matile::BarrierRef& ref) const {
    std::string name = ref.barrier >= 0 && ref.barrier < static_cast<int>(kernel_.mbarriers.size())
                           ? kernel_.mbarriers[static_cast<size_t>(ref.barrier)].name
                           : "mbarrier";
    const std::optional<int64_t> slot = ref.index ? scalar(ref.index) : std::optional<int64_t>(0);
    return name + "[" + (slot ? std::to_string(*slot) : "?") + "]";
  }

  void role_bar(RoleRun& run, int64_t start, int64_t end, OpClass op_class, const std::string& text,
                int64_t instructions, const RoleStep& step) {
    for (int w = run.first_warp; w < run.first_warp + run.warps; ++w) {
      add_bar(w, start, end, op_class, text, instructions, step.iteration, step.op_index);
    }
  }

  // Executes the role's next step; false (nothing done) when it is an mbarrier wait whose phase
  // has not completed yet.
  bool role_step(RoleRun& run) {
    std::swap(scalars_, run.scalars);
    const bool moved = take_role_step(run);
    std::swap(scalars_, run.scalars);
    return moved;
  }

  bool take_role_step(RoleRun& run) {
    const RoleStep& step = run.steps[run.next];
    const Op& op = *step.op;
    if (step.iteration >= 0 && run.loop && run.loop->loop_var) {
      set_scalar(run.loop->loop_var, step.iteration);
    }
    // Iteration spans of the role's loop (the drawn iterations only).
    if (step.iteration > run.iteration) {
      if (run.iteration < 0) run.loop_start = run.clock;
      close_span(run);
      if (step.iteration < out_.iterations) run.spans.emplace_back(run.clock, run.clock);
      run.iteration = step.iteration;
    }
    const int64_t sync = static_cast<int64_t>(std::ceil(op_work(kernel_, op).sync_cycles));
    const int64_t t = run.clock;
    switch (op.kind) {
      case OpKind::MBarrierWait: {
        SlotState& slot = slot_state(op.mbarrier);
        const std::optional<int64_t> parity =
            op.operands.empty() ? std::optional<int64_t>(0) : scalar(op.operands[0]);
        const int64_t completed = static_cast<int64_t>(slot.completed.size());
        // The phase of `parity` has completed when the current phase has the other parity.
        if (parity && completed % 2 == *parity % 2) return false;
        const int64_t ready = completed > 0 ? slot.completed.back() : t;
        const int64_t end = std::max(t, ready) + sync;
        if (completed > 0) {
          handoff(run, slot.sources.back(), false, slot_text(op.mbarrier), ready, end, step.iteration);
        }
        role_bar(run, t, end, OpClass::Wait,
                 "mbarrier.wait " + slot_text(op.mbarrier) +
                     (parity ? " parity " + std::to_string(*parity) : std::string()),
                 1, step);
        run.clock = end;
        break;
      }
      case OpKind::MBarrierArrive: {
        const int64_t end = t + sync;
        role_bar(run, t, end, OpClass::Control,
                 std::string(op.tx_bytes > 0 ? "mbarrier.arrive.expect_tx " : "mbarrier.arrive ") +
                     slot_text(op.mbarrier),
                 1, step);
        SlotState& slot = slot_state(op.mbarrier);
        slot.pending -= arrivals_of_run(run, std::max<int64_t>(op.arrivals_per_op, 1));
        slot.tx += op.tx_bytes;
        contribute(slot, end, Source{run.first_warp, -1});
        maybe_complete(slot, arrivals_of(op.mbarrier));
        run.clock = end;
        break;
      }
      case OpKind::TmaLoad: {
        const int64_t end = t + sync;
        const int64_t bytes = static_cast<int64_t>(op_work(kernel_, op).global_bytes);
        const std::optional<int64_t> stage =
            op.shared.stage ? scalar(op.shared.stage) : std::optional<int64_t>(0);
        const std::string target =
            (op.tma_map >= 0 && op.tma_map < static_cast<int>(kernel_.tma_maps.size())
                 ? kernel_.tma_maps[static_cast<size_t>(op.tma_map)].name
                 : std::string("?")) +
            " -> " + kernel_.shared[static_cast<size_t>(op.shared.alloc)].name +
            (stage ? "[" + std::to_string(*stage) + "]" : "[?]");
        role_bar(run, t, end, OpClass::AsyncCopy, "tma.load " + target, 1, step);
        const int64_t lands =
            end + costs_.copy_latency + bytes / std::max<int64_t>(1, costs_.copy_bytes_per_cycle);
        TimelineBar flight;
        flight.iteration = step.iteration;
        flight.start = end;
        flight.end = lands;
        flight.op_class = OpClass::AsyncCopy;
        flight.label = "tma.load " + target + " in flight (" + kib_text(bytes) + ")";
        flight.stage = stage ? static_cast<int>(*stage) : -1;
        flight.op_index = step.op_index;
        flight.instructions = 0;
        async_bars_[{0, flight.stage}].push_back(std::move(flight));
        SlotState& slot = slot_state(op.mbarrier);
        slot.tx -= bytes;
        contribute(slot, lands, Source{-1, stage ? static_cast<int>(*stage) : -1});
        maybe_complete(slot, arrivals_of(op.mbarrier));
        run.clock = end;
        break;
      }
      case OpKind::Wgmma: {
        const int64_t end = t + costs_.wgmma_issue;
        const OpWork work = op_work(kernel_, op);
        const double flops = wgmma_rate_flops(work) * run.warps / std::max(run.role_warps, 1);
        const int64_t k_atoms = std::max<int64_t>(op.extent / wgmma_k_step(work), 1);
        const std::string text = "wgmma" + (op.results.empty() ? std::string() : " %" + op.results[0]->name);
        role_bar(run, t, end, OpClass::Mma, text, k_atoms, step);
        const int64_t begin = std::max(end, tensor_free_);
        const int64_t cycles = static_cast<int64_t>(
            std::ceil(flops / static_cast<double>(std::max<int64_t>(1, costs_.wgmma_flops_per_cycle))));
        tensor_free_ = begin + cycles;
        run.open_wgmma = std::max(run.open_wgmma, tensor_free_);
        TimelineBar running;
        running.iteration = step.iteration;
        running.start = begin;
        running.end = tensor_free_;
        running.op_class = OpClass::Mma;
        running.label = text + " (" + run.name + ")";
        running.op_index = step.op_index;
        async_bars_[{1, -1}].push_back(std::move(running));
        run.clock = end;
        break;
      }
      case OpKind::NamedBarrier: {
        // Each role arrives once per visit (its threads count); bar.sync then waits for the
        // generation it arrived at to complete. With per-warpgroup ids (ping-pong), a warpgroup
        // running apart uses its own id, and id 0 means it skips the op.
        int barrier_id = op.barrier_id;
        if (!op.warpgroup_ids.empty()) {
          const size_t index = static_cast<size_t>(std::max(run.warpgroup, 0));
          barrier_id = index < op.warpgroup_ids.size() ? op.warpgroup_ids[index] : 0;
          if (barrier_id == 0) break;
        }
        NamedState& barrier = named_[barrier_id];
        if (!run.arrived) {
          run.arrived = true;
          run.generation = barrier.completed.size();
          barrier.arrived += static_cast<int64_t>(run.warps) * matile::kWarpSize;
          if (t >= barrier.latest) {
            barrier.latest = t;
            barrier.latest_source = Source{run.first_warp, -1};
          }
          if (barrier.arrived >= std::max<int64_t>(1, op.barrier_threads)) {
            barrier.completed.push_back(barrier.latest);
            barrier.sources.push_back(barrier.latest_source);
            barrier.arrived = 0;
            barrier.latest = 0;
          }
        }
        const std::string text = std::string(op.arrive_only ? "bar.arrive " : "bar.sync ") +
                                 std::to_string(barrier_id) + ", " + std::to_string(op.barrier_threads);
        if (op.arrive_only) {
          role_bar(run, t, t + sync, OpClass::Control, text, 1, step);
          run.clock = t + sync;
        } else {
          if (barrier.completed.size() <= run.generation) return false;  // others still to arrive
          const int64_t ready = barrier.completed[run.generation];
          const int64_t end = std::max(t, ready) + sync;
          role_bar(run, t, end, OpClass::Wait, text, 1, step);
          handoff(run, barrier.sources[run.generation], true, "bar " + std::to_string(barrier_id), ready,
                  end, step.iteration);
          run.clock = end;
        }
        run.arrived = false;
        break;
      }
      case OpKind::WgmmaCommitGroup: {
        run.wgmma_groups.push_back(run.open_wgmma >= 0 ? run.open_wgmma : t);
        run.open_wgmma = -1;
        role_bar(run, t, t + sync, OpClass::Control, "wgmma.commit_group", 1, step);
        run.clock = t + sync;
        break;
      }
      case OpKind::WgmmaWaitGroup: {
        const size_t keep = static_cast<size_t>(std::max<int64_t>(0, op.extent));
        int64_t ready = t;
        while (run.wgmma_groups.size() > keep) {
          ready = std::max(ready, run.wgmma_groups.front());
          run.wgmma_groups.erase(run.wgmma_groups.begin());
        }
        role_bar(run, t, ready + sync, OpClass::Wait, "wgmma.wait_group " + std::to_string(op.extent), 1,
                 step);
        run.clock = ready + sync;
        break;
      }
      default: {
        const WarpCost c = warp_cost_on(kernel_, op, costs_, run.role_warps);
        role_bar(run, t, t + c.cycles, c.op_class, label(op), c.instructions, step);
        run.clock = t + c.cycles;
        evaluate_scalar(op);
        break;
      }
    }
    ++run.next;
    return true;
  }

  std::optional<int64_t> scalar(const Value& value) const {
    if (!value) return std::nullopt;
    auto found = scalars_.find(value.get());
    if (found == scalars_.end()) return std::nullopt;
    return found->second;
  }

  // Uniform index / bool scalars the ops compute from constants and loop variables.
  void evaluate_scalar(const Op& op) {
    if (op.results.size() != 1 || !is_uniform_scalar(op.results[0])) return;
    const Value& result = op.results[0];
    auto operand = [&](size_t i) {
      return i < op.operands.size() ? scalar(op.operands[i]) : std::nullopt;
    };
    std::optional<int64_t> value;
    switch (op.kind) {
      case OpKind::Full: value = static_cast<int64_t>(op.constant); break;
      case OpKind::Cast: value = operand(0); break;
      case OpKind::Binary: {
        const auto a = operand(0), b = operand(1);
        if (!a || !b) break;
        switch (op.binary_op) {
          case matile::BinaryOp::Add: value = *a + *b; break;
          case matile::BinaryOp::Sub: value = *a - *b; break;
          case matile::BinaryOp::Mul: value = *a * *b; break;
          case matile::BinaryOp::Max: value = std::max(*a, *b); break;
          case matile::BinaryOp::Min: value = std::min(*a, *b); break;
          case matile::BinaryOp::Div:
          case matile::BinaryOp::FloorDiv:
            if (*b != 0) value = (*a / *b) - ((*a % *b != 0 && (*a < 0) != (*b < 0)) ? 1 : 0);
            break;
          case matile::BinaryOp::Mod:
            if (*b != 0) value = ((*a % *b) + *b) % *b;
            break;
        }
        break;
      }
      case OpKind::Compare: {
        const auto a = operand(0), b = operand(1);
        if (!a || !b) break;
        switch (op.compare_op) {
          case matile::CompareOp::LT: value = *a < *b; break;
          case matile::CompareOp::LE: value = *a <= *b; break;
          case matile::CompareOp::GT: value = *a > *b; break;
          case matile::CompareOp::GE: value = *a >= *b; break;
          case matile::CompareOp::EQ: value = *a == *b; break;
          case matile::CompareOp::NE: value = *a != *b; break;
        }
        break;
      }
      case OpKind::Logical: {
        const auto a = operand(0), b = operand(1);
        if (!a || !b) break;
        value = op.logical_op == matile::LogicalOp::And ? (*a && *b) : (*a || *b);
        break;
      }
      case OpKind::Select: {
        const auto c = operand(0), a = operand(1), b = operand(2);
        if (c && a && b) value = *c ? *a : *b;
        break;
      }
      default: break;
    }
    if (value) {
      scalars_[result.get()] = *value;
    } else {
      scalars_.erase(result.get());
    }
  }

  std::string label(const Op& op) const {
    const std::string result = op.results.empty() ? "" : " %" + op.results[0]->name;
    switch (op.kind) {
      case OpKind::Unary: return std::string(scalar::unary_op_name(op.unary_op)) + result;
      case OpKind::Binary: return std::string(scalar::binary_op_name(op.binary_op)) + result;
      case OpKind::Reduce:
        return std::string("reduce ") + vrtile::reduce_op_name(op.reduce_op) + result;
      case OpKind::Mma: return "mma.m16n8k16" + result;
      case OpKind::SharedLoad:
        return std::string(matile::shared_read_name(op.shared_read)) + " " +
               kernel_.shared[static_cast<size_t>(op.shared.alloc)].name + result;
      case OpKind::WaitGroup: return "cp.async.wait_group " + std::to_string(op.extent);
      case OpKind::Barrier: return "bar.sync";
      case OpKind::CommitGroup: return "cp.async.commit_group";
      case OpKind::For:
        return "for " + (op.loop_var ? op.loop_var->name : std::string()) + " in 0.." +
               std::to_string(op.extent);
      default: return matile::op_kind_name(op.kind) + result;
    }
  }

  void add_bar(int warp, int64_t start, int64_t end, OpClass op_class, std::string text,
               int64_t instructions, int iteration, int op_index) {
    TimelineBar bar;
    bar.row = warp;
    bar.iteration = iteration;
    bar.start = start;
    bar.end = end;
    bar.op_class = op_class;
    bar.label = std::move(text);
    bar.instructions = instructions;
    bar.op_index = op_index;
    out_.bars.push_back(std::move(bar));
  }

  void step(const Op& op, int iteration, int op_index) {
    const size_t warps = clock_.size();
    switch (op.kind) {
      case OpKind::Yield: return;
      case OpKind::Barrier: {
        const int64_t arrive_all = latest_clock();
        for (size_t w = 0; w < warps; ++w) {
          add_bar(static_cast<int>(w), clock_[w], arrive_all + costs_.barrier, OpClass::Wait,
                  "bar.sync", 1, iteration, op_index);
          clock_[w] = arrive_all + costs_.barrier;
        }
        return;
      }
      case OpKind::WaitGroup: {
        for (size_t w = 0; w < warps; ++w) {
          std::vector<int64_t>& groups = committed_[w];
          const size_t keep = static_cast<size_t>(std::max<int64_t>(0, op.extent));
          int64_t ready = clock_[w];
          while (groups.size() > keep) {
            ready = std::max(ready, groups.front());
            groups.erase(groups.begin());
          }
          add_bar(static_cast<int>(w), clock_[w], ready, OpClass::Wait, label(op), 1, iteration,
                  op_index);
          clock_[w] = ready;
        }
        return;
      }
      case OpKind::CommitGroup: {
        for (size_t w = 0; w < warps; ++w) {
          // An empty group is complete at once.
          committed_[w].push_back(open_group_[w] >= 0 ? open_group_[w] : clock_[w]);
          open_group_[w] = -1;
        }
        break;  // and costs its issue below
      }
      case OpKind::AsyncCopy: {
        async_copy(op, iteration, op_index);
        return;
      }
      default: break;
    }
    const WarpCost c = warp_cost(kernel_, op, costs_);
    for (size_t w = 0; w < warps; ++w) {
      add_bar(static_cast<int>(w), clock_[w], clock_[w] + c.cycles, c.op_class, label(op),
              c.instructions, iteration, op_index);
      clock_[w] += c.cycles;
    }
    evaluate_scalar(op);
  }

  void async_copy(const Op& op, int iteration, int op_index) {
    const std::optional<int64_t> predicate = scalar(op.predicate);
    const bool off = op.predicate && predicate && *predicate == 0;
    const std::optional<int64_t> stage = op.shared.stage ? scalar(op.shared.stage) : std::optional<int64_t>(0);
    const matile::SharedAlloc& alloc = kernel_.shared[static_cast<size_t>(op.shared.alloc)];
    int64_t elements = 1;
    for (int64_t extent : op.tile_shape) elements *= extent;
    const int64_t bytes = elements * dtype_bytes(alloc.dtype);
    const std::string target = (op.buffer ? op.buffer->name : std::string("?")) + " -> " +
                               alloc.name + (stage ? "[" + std::to_string(*stage) + "]" : "[?]");
    const WarpCost c = warp_cost(kernel_, op, costs_);
    int64_t first_issue = -1, last_landing = 0;
    for (size_t w = 0; w < clock_.size(); ++w) {
      const int64_t issue = off ? 0 : c.cycles;
      add_bar(static_cast<int>(w), clock_[w], clock_[w] + issue, OpClass::AsyncCopy,
              "cp.async " + target + (off ? " (predicated off)" : ""), off ? 0 : c.instructions,
              iteration, op_index);
      TimelineBar& bar = out_.bars.back();
      bar.stage = stage ? static_cast<int>(*stage) : -1;
      bar.predicated_off = off;
      if (!off) {
        if (first_issue < 0) first_issue = clock_[w];
        first_issue = std::min(first_issue, clock_[w]);
        const int64_t lands = clock_[w] + issue + costs_.copy_latency +
                              bytes / std::max<int64_t>(1, costs_.copy_bytes_per_cycle);
        open_group_[w] = std::max(open_group_[w], lands);
        last_landing = std::max(last_landing, lands);
      }
      clock_[w] += issue;
    }
    if (off) return;
    TimelineBar flight;
    flight.iteration = iteration;
    flight.start = first_issue;
    flight.end = last_landing;
    flight.op_class = OpClass::AsyncCopy;
    flight.label = "cp.async " + target + " in flight (" + kib_text(bytes) + ")";
    flight.stage = stage ? static_cast<int>(*stage) : -1;
    flight.op_index = op_index;
    copy_bars_[flight.stage].push_back(std::move(flight));
  }

  const matile::Kernel& kernel_;
  const CycleCosts& costs_;
  PipelineTimeline& out_;
  std::vector<int64_t> clock_;
  std::vector<int64_t> open_group_;               // landing time of each warp's open group
  std::vector<std::vector<int64_t>> committed_;   // landing times of committed groups, oldest first
  std::unordered_map<const matile::ValueNode*, int64_t> scalars_;
  std::map<int, std::vector<TimelineBar>> copy_bars_;
  // Hopper rows: (0, stage) TMA flights per stage, (1, -1) the tensor cores' wgmmas.
  std::map<std::pair<int, int>, std::vector<TimelineBar>> async_bars_;
  std::map<std::pair<int, int64_t>, SlotState> slots_;  // (mbarrier array, slot)
  std::map<int, std::pair<std::string, int>> warp_roles_;  // warp -> its role, its warpgroup there
  std::map<int, NamedState> named_;                     // named barrier id -> its state
  std::vector<PendingHandoff> handoffs_;
  int64_t tensor_free_ = 0;                             // when the tensor cores are next free
};

// Runs the ops before path[level] in `region`, then descends into it; the last For of the path
// runs `iterations` times.
void run_path(Simulator& sim, const matile::Region& region, const std::vector<const Op*>& path,
              size_t level, int iterations, PipelineTimeline& out) {
  const Op* loop = path[level];
  size_t position = 0;
  while (position < region.ops.size() && region.ops[position].get() != loop) ++position;
  sim.run(region.ops, position, -1);
  if (level + 1 < path.size()) {
    // An enclosing loop: its first iteration leads to the inner loop.
    if (loop->loop_var) sim.set_scalar(loop->loop_var, 0);
    run_path(sim, *loop->body, path, level + 1, iterations, out);
    return;
  }
  out.loop_start = sim.clock(0);
  for (int i = 0; i < iterations; ++i) {
    if (loop->loop_var) sim.set_scalar(loop->loop_var, i);
    const int64_t start = sim.clock(0);
    sim.run(loop->body->ops, loop->body->ops.size(), i);
    out.iteration_spans.emplace_back(start, sim.clock(0));
  }
}

}  // namespace

WarpCost warp_cost(const matile::Kernel& kernel, const matile::Op& op, const CycleCosts& costs) {
  return warp_cost_on(kernel, op, costs, kernel.warps);
}

namespace {

// warp_cost for an op that runs on `warps` warps (a role's, in a warp-specialized kernel).
WarpCost warp_cost_on(const matile::Kernel& kernel, const matile::Op& op, const CycleCosts& costs,
                      int warps_running) {
  if (op.kind == OpKind::For) {
    // A nested loop: its body's costs (waits not modelled) times its trip count.
    int64_t body = 0;
    if (op.body) {
      for (const matile::OpPtr& inner : op.body->ops) {
        body += warp_cost_on(kernel, *inner, costs, warps_running).cycles;
      }
    }
    return {OpClass::Control, body * op.extent, 0};
  }
  // 1. The op's work for the whole CTA, as the estimate counts it, as warp instructions per pipe
  //    (the work is spread evenly over the warps).
  const OpWork work = op_work(kernel, op);
  const double warps = std::max(1, warps_running);
  const double lanes = warps * matile::kWarpSize;
  const double alu = work.alu_ops / lanes;
  const double sfu = work.special_ops / lanes;
  const double mma = work.tensor_flops / 4096.0 / warps;  // one mma.m16n8k16 is 4096 FLOPs
  const double wavefronts = work.shared_bytes / 128.0 / warps;
  const auto whole = [](double count) { return static_cast<int64_t>(std::ceil(count - 1e-9)); };
  // 2. Cycles: the pipes one after another (one warp issues in order).
  const int64_t math = whole(alu) * costs.alu + whole(sfu) * costs.sfu + whole(mma) * costs.mma;
  const int64_t shared = whole(wavefronts) * costs.shared_wavefront;
  const int64_t barriers = whole(work.barriers) * costs.barrier;
  const Value result = op.results.empty() ? nullptr : op.results[0];
  // 3. The class: what the op is for the reader of the picture.
  switch (op.kind) {
    case OpKind::Iota:
    case OpKind::Full:
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Compare:
    case OpKind::Logical:
    case OpKind::Select:
    case OpKind::Cast:
      if (is_uniform_scalar(result)) return {OpClass::Control, math, whole(alu + sfu)};
      return {OpClass::ElementWise, math, whole(alu + sfu)};
    case OpKind::Broadcast:
    case OpKind::Permute:
    case OpKind::ExtractSlice:
      return {OpClass::ElementWise, 0, 0};  // register renaming: the model counts nothing
    case OpKind::ConvertLayout:
      if (!op.via_shared) return {OpClass::ElementWise, 0, 0};
      return {OpClass::SharedLoad, math + shared + barriers, whole(wavefronts)};
    case OpKind::Reduce:
      return {OpClass::Reduce, math + shared + barriers, whole(alu)};
    case OpKind::Mma:
      return {OpClass::Mma, math + shared, whole(mma)};
    case OpKind::FmaDot:
      return {OpClass::Mma, math + shared, whole(alu)};
    case OpKind::GlobalLoad:
      return {OpClass::Global, costs.global_latency + math + shared, whole(alu)};
    case OpKind::GlobalStore:
      return {OpClass::Global, math + shared, whole(alu)};
    case OpKind::AsyncCopy:
      // The model counts one CUDA-core operation per vector copy; the bytes land later.
      return {OpClass::AsyncCopy, whole(alu) * costs.copy_issue, whole(alu)};
    case OpKind::SharedLoad:
    case OpKind::SharedStore:
      return {OpClass::SharedLoad, shared + math, whole(wavefronts)};
    case OpKind::CommitGroup:
      return {OpClass::Control, costs.commit, 1};
    case OpKind::For:
    case OpKind::WaitGroup:
    case OpKind::Barrier:
    case OpKind::Yield:
      break;
    // Hopper. Outside the role simulation (which times waits, TMA flights and wgmma on the
    // tensor cores itself) these are the issuing warp's cycles: the model's fixed latencies for
    // the synchronizing ops, a TMA box's one-thread issue, a wgmma's run at the tensor cores'
    // rate, stmatrix's wavefronts.
    case OpKind::Roles:
      break;
    case OpKind::MBarrierInit:
    case OpKind::MBarrierArrive:
    case OpKind::FenceProxyAsync:
    case OpKind::BulkCommitGroup:
    case OpKind::WgmmaFence:
    case OpKind::WgmmaCommitGroup:
      return {OpClass::Control, whole(work.sync_cycles), 1};
    case OpKind::MBarrierWait:
    case OpKind::NamedBarrier:
    case OpKind::BulkWaitGroup:
    case OpKind::WgmmaWaitGroup:
      return {OpClass::Wait, whole(work.sync_cycles), 1};
    case OpKind::TmaLoad:
    case OpKind::TmaStore:
      return {OpClass::AsyncCopy, whole(work.sync_cycles), 1};
    case OpKind::Wgmma:
      return {OpClass::Mma,
              whole(wgmma_rate_flops(work) / static_cast<double>(std::max<int64_t>(1, costs.wgmma_flops_per_cycle))),
              std::max<int64_t>(op.extent / wgmma_k_step(work), 1)};
    case OpKind::StMatrix:
      return {OpClass::SharedLoad, shared, whole(wavefronts)};
    // The dynamic tile scheduler: the CTA's index is free, the fetch is the elected thread's
    // atomic round trip, the read one shared word.
    case OpKind::CtaIndex:
      return {OpClass::Control, 0, 0};
    case OpKind::TileFetch:
      return {OpClass::Global, whole(work.sync_cycles), 1};
    case OpKind::TileRead:
      return {OpClass::SharedLoad, shared + whole(work.sync_cycles), 1};
  }
  return {OpClass::Wait, 0, 0};
}

}  // namespace

const char* op_class_name(OpClass op_class) {
  switch (op_class) {
    case OpClass::AsyncCopy: return "cp.async";
    case OpClass::Wait: return "wait / barrier";
    case OpClass::SharedLoad: return "ldmatrix / shared";
    case OpClass::Mma: return "mma";
    case OpClass::ElementWise: return "softmax / element-wise";
    case OpClass::Reduce: return "reduce";
    case OpClass::Global: return "global";
    case OpClass::Control: return "index / control";
  }
  return "?";
}

PipelineTimeline timeline_from_kernel(const matile::Kernel& kernel, const TimelineOptions& options) {
  PipelineTimeline timeline;
  timeline.kernel = kernel.name;
  std::vector<const Op*> path;
  if (!kernel.body || kernel.warps <= 0) {
    timeline.error = "kernel " + kernel.name + " has no body";
    return timeline;
  }
  if (const Op* roles = top_level_roles(*kernel.body)) {
    // Warp specialization: the ops before the Roles op on every warp, then the roles.
    timeline.pipeline_stages = ring_stages(kernel, *roles);
    Simulator sim(kernel, options, timeline);
    size_t position = 0;
    while (kernel.body->ops[position].get() != roles) ++position;
    sim.run(kernel.body->ops, position, -1);
    sim.run_roles(*roles, std::max(0, options.iterations), std::max(1, timeline.pipeline_stages));
    sim.finish();
    if (timeline.iteration_spans.empty()) {
      timeline.error = "kernel " + kernel.name + ": its first role has no loop to draw";
    }
    return timeline;
  }
  if (!find_loop(*kernel.body, true, path)) {
    path.clear();
    find_loop(*kernel.body, false, path);
  }
  if (path.empty()) {
    timeline.error = "kernel " + kernel.name + " has no loop: there is no inner loop to draw";
    return timeline;
  }
  const Op& loop = *path.back();
  timeline.loop_var = loop.loop_var ? loop.loop_var->name : "";
  timeline.loop_extent = loop.extent;
  timeline.pipeline_stages = loop.pipeline_stages;
  timeline.iterations = static_cast<int>(std::clamp<int64_t>(options.iterations, 0, loop.extent));
  Simulator sim(kernel, options, timeline);
  run_path(sim, *kernel.body, path, 0, timeline.iterations, timeline);
  sim.finish();
  return timeline;
}

std::vector<std::vector<int>> identical_warp_rows(const PipelineTimeline& timeline) {
  // Each warp row's bars as (start, end, label) in order; equal sequences group together.
  std::vector<std::vector<std::tuple<int64_t, int64_t, std::string>>> bars(timeline.rows.size());
  for (const TimelineBar& bar : timeline.bars) {
    bars[static_cast<size_t>(bar.row)].emplace_back(bar.start, bar.end, bar.label);
  }
  std::vector<std::vector<int>> groups;
  for (size_t r = 0; r < timeline.rows.size(); ++r) {
    if (timeline.rows[r].kind != TimelineRow::Kind::Warp) continue;
    auto same = std::find_if(groups.begin(), groups.end(), [&](const std::vector<int>& group) {
      return bars[static_cast<size_t>(group.front())] == bars[r];
    });
    if (same == groups.end()) {
      groups.push_back({static_cast<int>(r)});
    } else {
      same->push_back(static_cast<int>(r));
    }
  }
  return groups;
}

const char* role_phase_name(RolePhase::Kind kind) {
  switch (kind) {
    case RolePhase::Kind::TensorCore: return "tensor core";
    case RolePhase::Kind::ElementWise: return "softmax / element-wise";
    case RolePhase::Kind::Wait: return "waiting";
    case RolePhase::Kind::Copy: return "issuing copies";
  }
  return "?";
}

std::vector<RolePhase> role_phases(const PipelineTimeline& timeline) {
  std::vector<std::vector<const TimelineBar*>> by_row(timeline.rows.size());
  for (const TimelineBar& bar : timeline.bars) by_row[static_cast<size_t>(bar.row)].push_back(&bar);
  std::vector<RolePhase> phases;
  for (size_t r = 0; r < timeline.rows.size(); ++r) {
    if (timeline.rows[r].kind != TimelineRow::Kind::Warp || timeline.rows[r].role.empty()) continue;
    std::vector<const TimelineBar*>& bars = by_row[r];
    std::stable_sort(bars.begin(), bars.end(),
                     [](const TimelineBar* a, const TimelineBar* b) { return a->start < b->start; });
    std::optional<RolePhase> open;
    std::vector<std::string> names;  // the wgmma results or barriers of the open phase
    int ops = 0;
    auto close = [&] {
      if (!open) return;
      std::string detail;
      if (open->kind == RolePhase::Kind::ElementWise) {
        detail = std::to_string(ops) + (ops == 1 ? " op" : " ops");
      } else {
        for (size_t k = 0; k < names.size(); ++k) detail += (k ? ", " : "") + names[k];
      }
      open->label = std::string(role_phase_name(open->kind)) + (detail.empty() ? "" : ": " + detail);
      phases.push_back(std::move(*open));
      open.reset();
      names.clear();
      ops = 0;
    };
    for (const TimelineBar* bar : bars) {
      // 1. The kind of work: a wgmma and the wait for its group are the tensor core's; the
      //    barrier waits, the role's; index arithmetic and free ops belong to their neighbours.
      std::optional<RolePhase::Kind> kind;
      std::string name;
      switch (bar->op_class) {
        case OpClass::Mma:
          kind = RolePhase::Kind::TensorCore;
          name = bar->label;
          break;
        case OpClass::Wait:
          if (bar->label.rfind("wgmma.wait_group", 0) == 0) {
            kind = RolePhase::Kind::TensorCore;
          } else if (bar->end > bar->start) {
            kind = RolePhase::Kind::Wait;
            name = bar->label;
          }
          break;
        case OpClass::ElementWise:
        case OpClass::Reduce:
        case OpClass::SharedLoad:
        case OpClass::Global:
          if (bar->end > bar->start) kind = RolePhase::Kind::ElementWise;
          break;
        case OpClass::AsyncCopy:
          kind = RolePhase::Kind::Copy;
          break;
        case OpClass::Control:
          break;
      }
      if (!kind) continue;
      // 2. A new kind closes the open phase.
      if (!open || open->kind != *kind) {
        close();
        open = RolePhase{static_cast<int>(r), *kind, bar->start, bar->end, bar->iteration, ""};
      }
      open->end = std::max(open->end, bar->end);
      ++ops;
      if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    close();
  }
  return phases;
}

}  // namespace nautilus::cost
