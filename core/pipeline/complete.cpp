// complete_pipelines (complete.h): the solver's answer for each pipelined kernel of a compiled
// schedule, written back as a `pipeline` decision and checked by compiling it.
#include "core/pipeline/complete.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "core/sched/pipeline_decision.h"
#include "core/support/fixed_point.h"

namespace nautilus::pipeline {

namespace {

// What a kernel's body says about its pipeline: a warp-specialized Roles op (its consumer
// warpgroups) or a software-pipelined For, searched through every nested region.
struct KernelForm {
  bool roles = false;
  int consumers = 0;
  bool pipelined_loop = false;
};

void scan(const matile::Region& region, KernelForm* form) {
  for (const matile::OpPtr& op : region.ops) {
    if (!op) continue;
    if (op->kind == matile::OpKind::Roles) {
      form->roles = true;
      for (size_t r = 1; r < op->roles.size(); ++r) form->consumers += op->roles[r].warpgroups;
      for (const matile::WarpRole& role : op->roles) {
        if (role.body) scan(*role.body, form);
      }
    }
    if (op->kind == matile::OpKind::For) {
      form->pipelined_loop |= op->pipeline_stages > 0;
      if (op->body) scan(*op->body, form);
    }
  }
}

}  // namespace

int consumer_warpgroups(const matile::Kernel& kernel) {
  KernelForm form;
  if (kernel.body) scan(*kernel.body, &form);
  return form.consumers;
}

RingDepths ring_depths(const Graph& graph, const Solution& solution, int held_slots) {
  RingDepths out;
  out.together = solution.stages + held_slots;
  if (solution.ii_slots <= 0 || solution.ops.size() != graph.nodes.size()) return out;
  // Per ring: the first copy into it and the end of its last read. Rings released together share
  // one life, from the iteration's first copy to its last read of any of them; a ring released
  // in its own iteration has its own, and the slots the form holds beyond the graph's (the
  // deferred P·V of overlap=1) belong to the others only. Each ring also takes at least the
  // buffers the solution gave its copy.
  struct Life {
    int64_t first_copy = -1, last_read = -1;
    int buffers = 0;
    void add(int64_t start, int64_t end) {
      first_copy = first_copy < 0 ? start : std::min(first_copy, start);
      last_read = std::max(last_read, end);
    }
  };
  Life together, own;
  for (const Edge& edge : graph.edges) {
    if (!edge.through_shared) continue;
    const auto from = static_cast<size_t>(edge.from), to = static_cast<size_t>(edge.to);
    const int64_t start = solution.ops[from].start_slot;
    const int64_t end = solution.ops[to].start_slot +
                        slot_times(graph.nodes[to], solution.quantum).latency +
                        solution.ii_slots * edge.distance;
    Life& life = graph.rings_released_in_iteration.count(edge.what) ? own : together;
    life.add(start, end);
    const auto buffers = solution.ring_depth.find(graph.nodes[from].name);
    if (buffers != solution.ring_depth.end()) life.buffers = std::max(life.buffers, buffers->second);
  }
  const auto slots = [&](const Life& life, int held) {
    const int64_t span = life.last_read - life.first_copy + held * solution.ii_slots;
    const auto covered = static_cast<int>((span + solution.ii_slots - 1) / solution.ii_slots);
    return std::max(covered, life.buffers + held);
  };
  if (own.first_copy < 0) {
    if (together.first_copy >= 0) out.together = std::max(solution.stages, slots(together, 0)) + held_slots;
    return out;
  }
  out.own = slots(own, 0);
  out.together = together.first_copy >= 0 ? slots(together, held_slots) : out.own;
  return out;
}

int shared_ring_depth(const Graph& graph, const Solution& solution, int held_slots) {
  const RingDepths depths = ring_depths(graph, solution, held_slots);
  return std::max(depths.together, depths.own);
}

namespace {

// Whether [a, a + la) and [b, b + lb) overlap modulo `ii` (every length below `ii`).
bool overlap_modulo(int64_t a, int64_t la, int64_t b, int64_t lb, int64_t ii) {
  if (la <= 0 || lb <= 0) return false;
  if (la >= ii || lb >= ii) return true;
  a %= ii;
  b %= ii;
  for (int64_t shift : {-ii, int64_t{0}, ii}) {
    if (a < b + shift + lb && b + shift < a + la) return true;
  }
  return false;
}

}  // namespace

bool consumers_take_turns(const Graph& graph, const Solution& solution, std::string* why) {
  std::string unused;
  std::string& reason = why ? *why : unused;
  if (solution.roles.size() < 3 || solution.ii_slots <= 0 || solution.ops.size() != graph.nodes.size()) {
    reason = "fewer than two consumer roles";
    return false;
  }
  struct Busy {
    size_t node;
    int role;
    int64_t start, length;
  };
  std::vector<Busy> tensor, cuda_core;
  std::set<int> mma_roles;
  const auto tc = static_cast<size_t>(Unit::TensorCore);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    const OpSlot& slot = solution.ops[i];
    if (slot.role_index == 0) continue;  // the producer
    const SlotTimes times = slot_times(node, solution.quantum);
    if (node.kind == NodeKind::Wgmma && node.subtile >= 0 && times.busy[tc] > 0) {
      tensor.push_back({i, slot.role_index, slot.start_slot, times.busy[tc]});
      mma_roles.insert(slot.role_index);
    } else if (node.kind == NodeKind::Elementwise) {
      const int64_t busy = std::max(times.busy[static_cast<size_t>(Unit::ALU)], times.busy[static_cast<size_t>(Unit::SFU)]);
      if (busy > 0) cuda_core.push_back({i, slot.role_index, slot.start_slot, busy});
    }
  }
  if (mma_roles.size() < 2) {
    reason = "the wgmma sub-tiles run on one consumer";
    return false;
  }
  const int64_t ii = solution.ii_slots;
  for (size_t x = 0; x < tensor.size(); ++x) {
    for (size_t y = x + 1; y < tensor.size(); ++y) {
      if (tensor[x].role != tensor[y].role &&
          overlap_modulo(tensor[x].start, tensor[x].length, tensor[y].start, tensor[y].length, ii)) {
        reason = graph.nodes[tensor[x].node].name + " and " + graph.nodes[tensor[y].node].name +
                 " of different consumers hold the tensor cores at once";
        return false;
      }
    }
  }
  for (const Busy& compute : cuda_core) {
    for (const Busy& mma : tensor) {
      if (compute.role == mma.role || !overlap_modulo(compute.start, compute.length, mma.start, mma.length, ii)) continue;
      reason = graph.nodes[compute.node].name + " on " + solution.ops[compute.node].role + " runs under " +
               graph.nodes[mma.node].name + " on " + solution.ops[mma.node].role;
      return true;
    }
  }
  reason = "no consumer's CUDA-core work runs under another's MMAs";
  return false;
}

std::vector<int> held_ring_slots(const driver::Compilation& compiled) {
  std::vector<int> out;
  if (!compiled.vr_module) return out;
  for (const vrtile::KernelPtr& kernel : compiled.vr_module->kernels) {
    out.push_back(kernel->launch && kernel->launch->consumers > 0 && kernel->launch->overlap ? 1 : 0);
  }
  return out;
}

std::string pipeline_block(const sched::Schedule& schedule, const std::vector<std::string>& blocks) {
  std::string block;
  for (const sched::Decision& d : schedule.decisions) {
    if ((d.kind == "launch" || d.kind == "warp_spec" || d.kind == "pipeline") &&
        std::find(blocks.begin(), blocks.end(), d.target) != blocks.end()) {
      block = d.target;
    }
  }
  if (block.empty() && !blocks.empty()) block = blocks.front();
  return block;
}

std::optional<sched::Decision> realizing_decision(const Graph& graph, const Solution& solution,
                                                  const std::string& block, std::string* why,
                                                  int held_slots) {
  if (solution.status != SolveStatus::Optimal && solution.status != SolveStatus::BestFound) {
    *why = "no schedule to realize: " + solution.summary;
    return std::nullopt;
  }
  const bool roles = graph.form == "hopper roles";
  if (!roles && graph.form != "sm_80 loop") {
    *why = "kernel " + graph.kernel + " is not warp-specialized: its cp.async loop was read as its sm_90a "
           "equivalent, whose roles the lowering builds only after warp_spec";
    return std::nullopt;
  }
  if (block.empty()) {
    *why = "kernel " + graph.kernel + " computes no block a decision can name";
    return std::nullopt;
  }
  const RingDepths depths = ring_depths(graph, solution, held_slots);
  sched::Decision decision{"pipeline", block, {{"stages", int64_t{depths.together}}}};
  if (depths.own > 0 && depths.own != depths.together) decision.args.push_back({"early_stages", int64_t{depths.own}});
  if (roles) decision.args.push_back({"consumers", static_cast<int64_t>(solution.roles.size()) - 1});
  if (roles && consumers_take_turns(graph, solution)) decision.args.push_back({"pingpong", int64_t{1}});
  return decision;
}

Completion complete_pipelines(const SourceFilePtr& file, const driver::CompileOptions& options,
                              const driver::Compilation& compiled,
                              const CompletionOptions& completion_options) {
  Completion out;
  out.schedule = options.schedule;
  if (!compiled.ma_module) return out;
  const matile::Module& module = *compiled.ma_module;
  std::vector<sched::Decision> added;
  std::vector<std::string> solved_blocks;
  const std::vector<int> held_slots = held_ring_slots(compiled);
  for (size_t k = 0; k < module.kernels.size(); ++k) {
    const matile::Kernel& kernel = *module.kernels[k];
    KernelForm form;
    if (kernel.body) scan(*kernel.body, &form);
    if (!form.roles && !form.pipelined_loop) continue;
    KernelPipeline result;
    result.kernel = kernel.name;
    const std::vector<std::string> blocks =
        k < compiled.kernel_blocks.size() ? compiled.kernel_blocks[k] : std::vector<std::string>{};
    result.block = pipeline_block(options.schedule, blocks);
    result.machine = form.roles ? "sm_90a" : "sm_80";
    const Machine machine = *machine_for(result.machine);
    GraphResult built = build_graph(module, machine, kernel.name);
    if (!built.graph) {
      result.error = built.error;
      out.kernels.push_back(std::move(result));
      continue;
    }
    result.graph = std::move(built.graph);
    const sched::PipelinePins pins = sched::pipeline_pins(options.schedule, blocks);
    SolveOptions solve_options = completion_options.solve;
    if (pins.stages) solve_options.stages = pins.stages;
    if (form.roles) solve_options.consumers = form.consumers;
    result.solution = solve(*result.graph, machine, solve_options, completion_options.cache);
    const SolveStatus status = result.solution.status;
    if (status != SolveStatus::Optimal && status != SolveStatus::BestFound) {
      result.error = result.solution.summary;
      out.kernels.push_back(std::move(result));
      continue;
    }
    std::string why;
    const int held = k < held_slots.size() ? held_slots[k] : 0;
    std::optional<sched::Decision> decision =
        realizing_decision(*result.graph, result.solution, result.block, &why, held);
    std::string turns;
    if (decision && consumers_take_turns(*result.graph, result.solution, &turns)) {
      result.solution.notes.push_back("the consumers take turns on the tensor cores (" + turns +
                                      "): realized with pingpong=1");
    }
    if (decision && held > 0) {
      std::string own;
      for (const std::string& ring : result.graph->rings_released_in_iteration) {
        own += (own.empty() ? "" : ", ") + ring;
      }
      result.solution.notes.push_back(
          "the ring has " + std::to_string(held) + " slot" + (held == 1 ? "" : "s") +
          " more than the solution's: warp_spec overlap=1 keeps the previous iteration's slot "
          "until its deferred MMAs retire" +
          (own.empty() ? std::string()
                       : " (not counted for " + own + ", released in the iteration that reads it)"));
    }
    if (!decision) {
      result.error = why;
      out.kernels.push_back(std::move(result));
      continue;
    }
    // A pinned depth is the user's: every ring has it, whatever the shared ring would need.
    if (pins.stages) decision->args.front().value = int64_t{*pins.stages};
    // A pinned `stages` sets every ring unless early_stages is pinned too.
    auto early = std::find_if(decision->args.begin(), decision->args.end(),
                              [](const sched::DecisionArg& a) { return a.key == "early_stages"; });
    if (pins.early_stages) {
      if (early == decision->args.end()) decision->args.insert(decision->args.begin() + 1, {"early_stages", int64_t{0}});
      early = decision->args.begin() + 1;
      early->value = int64_t{*pins.early_stages};
    } else if (pins.stages && early != decision->args.end()) {
      decision->args.erase(early);
    }
    result.decision = decision;
    added.push_back(*decision);
    solved_blocks.insert(solved_blocks.end(), blocks.begin(), blocks.end());
    out.kernels.push_back(std::move(result));
  }
  if (added.empty()) return out;

  // The completed schedule: the solved kernels' earlier pipeline decisions go, the new ones
  // follow everything else (they refine launch and warp_spec stages).
  const auto build = [&](const std::vector<sched::Decision>& extra) {
    sched::Schedule schedule;
    for (const sched::Decision& d : options.schedule.decisions) {
      const bool replaced = d.kind == "pipeline" &&
                            std::find(solved_blocks.begin(), solved_blocks.end(), d.target) != solved_blocks.end();
      if (!replaced) schedule.decisions.push_back(d);
    }
    schedule.decisions.insert(schedule.decisions.end(), extra.begin(), extra.end());
    return schedule;
  };
  // The last schedule that compiled is always the completed one (a refused trial changes
  // nothing kept), so its module is the realized module.
  matile::ModulePtr last_compiled;
  const auto compiles = [&](const sched::Schedule& schedule, std::string* why) {
    driver::CompileOptions check = options;
    check.schedule = schedule;
    check.last_stage = driver::Stage::MATile;
    check.on_snapshot = nullptr;
    const driver::Compilation again = driver::compile(file, check);
    if (again.ok()) {
      last_compiled = again.ma_module;
      return true;
    }
    *why = !again.schedule_error.empty() ? again.schedule_error : again.internal_error;
    return false;
  };
  std::string why;
  if (!compiles(build(added), &why)) {
    // Find the kernels whose decision the lowering refuses, one at a time.
    std::vector<sched::Decision> kept;
    for (KernelPipeline& kernel : out.kernels) {
      if (!kernel.decision) continue;
      // The nearest depth the lowering realizes, and why: deeper first (a form that needs more
      // slots than the solution's rings), then shallower down to the solution's deepest ring (a
      // held slot that does not fit in shared memory).
      sched::Decision decision = *kernel.decision;
      const int64_t wanted = decision.args.front().as_int();
      const bool pinned = sched::pipeline_pins(options.schedule, {decision.target}).stages.has_value();
      std::vector<int64_t> depths = {wanted};
      if (!pinned) {
        for (int64_t d = wanted + 1; d <= 8; ++d) depths.push_back(d);
        const int held = kernel.solution.stages > 0 ? static_cast<int>(wanted) - kernel.solution.stages : 0;
        for (int64_t d = wanted - 1; d >= std::max<int64_t>(1, wanted - held); --d) depths.push_back(d);
      }
      std::string first_reason;
      bool realized = false;
      for (const int64_t depth : depths) {
        decision.args.front().value = depth;
        std::vector<sched::Decision> trial = kept;
        trial.push_back(decision);
        std::string reason;
        if (compiles(build(trial), &reason)) {
          kept = std::move(trial);
          realized = true;
          break;
        }
        if (first_reason.empty()) first_reason = reason;
      }
      if (!realized) {
        kernel.error = "the lowering does not realize " + sched::print_decision(*kernel.decision) +
                       ": " + first_reason;
        kernel.decision.reset();
      } else if (decision != *kernel.decision) {
        kernel.solution.notes.push_back(
            "the lowering realizes " + std::to_string(decision.args.front().as_int()) +
            " stages, not " + std::to_string(kernel.decision->args.front().as_int()) + ": " +
            first_reason);
        kernel.decision = decision;
      }
    }
    added = std::move(kept);
    solved_blocks.clear();
    for (size_t k = 0; k < module.kernels.size() && k < compiled.kernel_blocks.size(); ++k) {
      for (const sched::Decision& d : added) {
        const std::vector<std::string>& blocks = compiled.kernel_blocks[k];
        if (std::find(blocks.begin(), blocks.end(), d.target) != blocks.end()) {
          solved_blocks.insert(solved_blocks.end(), blocks.begin(), blocks.end());
        }
      }
    }
  }
  if (added.empty()) return out;
  out.schedule = build(added);
  out.changed = sched::print_decisions(out.schedule.decisions, "\n") !=
                sched::print_decisions(options.schedule.decisions, "\n");
  if (out.changed) out.realized_module = last_compiled;
  return out;
}

// The tiles warp-specialized consumers read in registers that stayed global loads because their
// kernel's ring had no room for them (matile::Kernel::register_tiles_without_room).
static int register_tiles_without_room(const matile::Module& module) {
  int count = 0;
  for (const matile::KernelPtr& kernel : module.kernels) count += kernel->register_tiles_without_room;
  return count;
}

CompletedSchedule complete_schedule(const SourceFilePtr& file, const std::vector<spec::SizeOverride>& sizes,
                                    const std::string& arch, const sched::Schedule& schedule,
                                    const cost::CostModel& model,
                                    const CompletionOptions& completion_options) {
  CompletedSchedule out;
  out.completion.schedule = schedule;
  driver::CompileOptions compile_options;
  compile_options.sizes = sizes;
  compile_options.schedule = schedule;
  compile_options.last_stage = driver::Stage::MATile;
  compile_options.matile.arch = arch;
  const driver::Compilation compiled = driver::compile(file, compile_options);
  if (!compiled.ok() || !compiled.ma_module) return out;
  out.completion = complete_pipelines(file, compile_options, compiled, completion_options);
  if (out.completion.realized_module) out.estimate = model.estimate(*out.completion.realized_module);
  if (!out.completion.changed || !out.estimate) return out;
  bool warp_specialized = false;
  for (const KernelPipeline& kernel : out.completion.kernels) {
    warp_specialized = warp_specialized || (kernel.decision && kernel.machine == "sm_90a");
  }
  // The solver's cp.async depths are taken only where the model expects them to gain at least
  // 2%: a depth it prices within that of the searched one measured slower on the H200 (an int8
  // decode tile, 1 x 128 x 128 on 4 warps: 57.1 µs at 3 stages, 64.9 at 4, 62.8 at 5, 64.5 at
  // 6, while the model priced 5 at 56.7 against 57.1; 2026-11-29).
  // Warp-specialized rings are taken, since they measured faster than the model priced them
  // (attention's 4-stage ping-pong completions: 169.1 µs where the searched 3 stages ran 184.9 at
  // B 32 H 32 S 512 d 64, priced 2% the other way), except where the deeper ring displaces a tile
  // the consumers read in registers back to global loads, which the solver's machine does not
  // see: then the model judges, and a completion priced more than 2% slower is declined (the
  // gated MLP's down projection at 5 stages: 2810.8 against 2071.3 µs estimated).
  constexpr double kGainToTakeTheSolvers = 0.98;
  constexpr double kLossToKeepTheSearched = 1.02;
  const cost::CostEstimate searched = model.estimate(*compiled.ma_module);
  const double bar = warp_specialized ? kLossToKeepTheSearched : kGainToTakeTheSolvers;
  const bool judged = !warp_specialized || (out.completion.realized_module &&
                                            register_tiles_without_room(*out.completion.realized_module) >
                                                register_tiles_without_room(*compiled.ma_module));
  if (judged && searched.feasible && out.estimate->feasible &&
      out.estimate->microseconds > bar * searched.microseconds) {
    std::ostringstream why;
    why << "pipeline: kept the schedule's ring depths: the cost model estimates the solver's at "
        << fixed_point(out.estimate->microseconds, 1) << " µs against "
        << fixed_point(searched.microseconds, 1) << " µs, "
        << (warp_specialized ? "more than 2% slower (warp-specialized kernels)" : "not 2% faster (cp.async loops)");
    out.completion.declined = why.str();
    out.completion.changed = false;
    out.completion.schedule = schedule;
    out.completion.realized_module.reset();
    out.estimate = searched;
  }
  return out;
}

std::string describe_completion(const Completion& completion) {
  std::ostringstream out;
  for (const KernelPipeline& kernel : completion.kernels) {
    out << "pipeline: kernel " << kernel.kernel << " ("
        << (kernel.machine == "sm_90a" ? "sm_90a roles" : "cp.async loop") << "): ";
    const Solution& s = kernel.solution;
    if (s.status == SolveStatus::Optimal || s.status == SolveStatus::BestFound) {
      out << status_name(s.status) << ", II " << s.ii << " cycles";
      if (!s.bound_reason.empty()) out << " (lower bound " << s.ii_lower_bound << ": " << s.bound_reason << ")";
      const size_t roles = s.roles.size();
      out << ", " << (roles > 1 ? "producer + " + std::to_string(roles - 1) + " consumer" +
                                      (roles > 2 ? "s" : "")
                                : std::string("one role"));
      out << ", " << fixed_point(s.seconds, 2) << " s" << (s.cached ? " (cached)" : "");
    }
    if (kernel.decision) {
      out << " -> " << sched::print_decision(*kernel.decision);
    } else {
      out << (s.status == SolveStatus::Optimal || s.status == SolveStatus::BestFound ? "; " : "")
          << "kept the schedule's pipeline: " << kernel.error;
    }
    out << "\n";
    for (const std::string& note : s.notes) out << "  note: " << note << "\n";
    if (!kernel.decision && !s.explanation.empty()) {
      out << "  " << s.explanation_title << "\n";
      for (const std::string& line : s.explanation) out << "    - " << line << "\n";
    }
  }
  if (!completion.declined.empty()) out << completion.declined << "\n";
  return out.str();
}

}  // namespace nautilus::pipeline
