#include "core/cost/timeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/cost/analytical_model.h"
#include "core/scalar/ir.h"
#include "core/vrtile/ir.h"

namespace nautilus::cost {
namespace {

using matile::Op;
using matile::OpKind;
using matile::Value;

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

  // Rows: the warps, then one row per copy stage; copy bars get their row here.
  void finish() {
    for (int w = 0; w < kernel_.warps; ++w) {
      out_.rows.push_back({TimelineRow::Kind::Warp, "warp " + std::to_string(w), w, -1});
    }
    std::map<int, int> row_of_stage;
    for (const auto& [stage, bars] : copy_bars_) {
      row_of_stage[stage] = static_cast<int>(out_.rows.size());
      out_.rows.push_back({TimelineRow::Kind::Copies,
                           stage < 0 ? std::string("cp.async") : "cp.async stage " + std::to_string(stage),
                           -1, stage});
    }
    for (auto& [stage, bars] : copy_bars_) {
      for (TimelineBar& bar : bars) {
        bar.row = row_of_stage[stage];
        out_.total_cycles = std::max(out_.total_cycles, bar.end);
        out_.bars.push_back(std::move(bar));
      }
    }
    out_.total_cycles = std::max(out_.total_cycles, latest_clock());
  }

 private:
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
  if (op.kind == OpKind::For) {
    // A nested loop: its body's costs (waits not modelled) times its trip count.
    int64_t body = 0;
    if (op.body) {
      for (const matile::OpPtr& inner : op.body->ops) body += warp_cost(kernel, *inner, costs).cycles;
    }
    return {OpClass::Control, body * op.extent, 0};
  }
  // 1. The op's work for the whole CTA, as the estimate counts it, as warp instructions per pipe
  //    (the work is spread evenly over the warps).
  const OpWork work = op_work(kernel, op);
  const double warps = std::max(1, kernel.warps);
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
    // Hopper's asynchronous ops have no cost yet (issue 13, cost model).
    case OpKind::Roles:
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
    case OpKind::Wgmma:
    case OpKind::WgmmaCommitGroup:
    case OpKind::WgmmaWaitGroup:
    case OpKind::StMatrix:
      break;
  }
  return {OpClass::Wait, 0, 0};
}

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

}  // namespace nautilus::cost
