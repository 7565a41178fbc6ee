// Completing a schedule's software pipelines with the solver (issue: realization of the Twill
// solver's answer). For every kernel of a compiled schedule that has a software-pipelined loop,
// complete_pipelines():
//   1. builds the loop's dependence graph from the MA tile IR as the kernel will run: a
//      warp-specialized kernel (a Roles op, sm_90a) with the sm_90a machine, a cp.async
//      multistage loop with the sm_80 machine (the same H100-measured latencies, one role);
//   2. solves it (solver.h) under the schedule's own pins: a `pipeline` decision's stages and
//      consumers; otherwise the consumer warpgroups the kernel has, since a warp-specialized
//      kernel's tile rows are 64 per consumer;
//   3. writes the answer back as one complete `pipeline(BLOCK, stages=S, consumers=C)` decision
//      (core/sched/pipeline_decision.h), replacing the kernel's earlier ones, at the end of the
//      schedule: the ring depth is the solution's deepest ring, and the lowering issues every
//      copy as far ahead as that ring allows, which is no later than the solution's stage for
//      it, so the realized loop keeps at least the slack the solver proved its interval with;
//   4. compiles the completed schedule again to check the lowering realizes it (the ring fits,
//      the roles build), and keeps the kernel's original pipeline with a reason when not.
// An infeasible pin leaves the schedule as it was and reports the solver's explanation; a solver
// timeout uses the best schedule found and says so.
//
//   gemm.nt, searched for the H100:          completed:
//     warp_spec(C_sum, consumers=2, stages=3)  warp_spec(C_sum, consumers=2, stages=3)
//     tile_order(C_sum, group=16)              tile_order(C_sum, group=16)
//                                              pipeline(C_sum, stages=3, consumers=2)
//   kernel C: optimal, II 1152 cycles (tensor core), rings A 2 / B 3, producer + 2 consumers
#pragma once

#include <string>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/driver/pipeline.h"
#include "core/pipeline/graph.h"
#include "core/pipeline/solver.h"
#include "core/sched/decision.h"

namespace nautilus::pipeline {

struct KernelPipeline {
  std::string kernel;
  std::string block;        // the block the decision names
  std::string machine;      // "sm_90a" (roles) or "sm_80" (one role)
  std::optional<Graph> graph;
  Solution solution;
  std::optional<sched::Decision> decision;  // the complete pipeline decision, when solved
  std::string error;        // why this kernel kept its pipeline (no graph, infeasible, refused)
};

struct CompletionOptions {
  SolveOptions solve;        // time limit, register cap; stages / consumers come from the pins
  SolveCache* cache = nullptr;
};

struct Completion {
  sched::Schedule schedule;  // the input schedule with every solved kernel's pipeline decision
  std::vector<KernelPipeline> kernels;  // one per kernel with a pipelined loop
  bool changed = false;      // some decision was added or replaced
  // The MA tile IR of `schedule`, from the compile that checked it (set when changed).
  matile::ModulePtr realized_module;
  // Set by complete_schedule when it kept the search's own cp.async ring depths because the cost
  // model estimates the solver's slower: one line saying so, with both estimates.
  std::string declined;
};

// `compiled` is `options` compiled through the MA stage (Compilation::ma_module set); `file`
// and `options` are compiled again with the completed schedule to check it.
Completion complete_pipelines(const SourceFilePtr& file, const driver::CompileOptions& options,
                              const driver::Compilation& compiled,
                              const CompletionOptions& completion_options = {});

// A searched schedule completed, as `nautilus schedule` and the studio's search do: `schedule`
// compiled through the MA stage for `arch` at `sizes`, complete_pipelines, and when that changed
// the schedule, the model's estimate of the completed one. `completion.kernels` is empty when
// the schedule did not compile (the search's own result is then kept).
// When every kernel the completion changed is a cp.async loop (no warp roles) and the model
// does not estimate the completed schedule at least 2% faster than the searched one, the
// searched one is kept (`completion.changed` false, `completion.declined` says why). The
// cp.async solver machine has one role and prices a ring slot by its interval alone, while the
// analytical model also sees what the depth does to a memory-bound kernel's latency chain and
// occupancy: on the H200 a decode kernel's 3-stage ring (the search's) ran at 35 µs where the
// solver's 2 stages were estimated at 48 µs. And where the model sees no gain, deeper rings
// measured slower (an int8 decode tile: 57.1 µs at 3 stages, 62.8-64.9 at 4 to 6). Warp-specialized kernels keep the solver's answer: there its
// machine (roles, hand-offs, ping-pong) is the finer of the two.
struct CompletedSchedule {
  Completion completion;
  std::optional<cost::CostEstimate> estimate;
};
CompletedSchedule complete_schedule(const SourceFilePtr& file, const std::vector<spec::SizeOverride>& sizes,
                                    const std::string& arch, const sched::Schedule& schedule,
                                    const cost::CostModel& model,
                                    const CompletionOptions& completion_options = {});

// The depth of the ring the lowering keeps for all of an iteration's copies (one slot per
// iteration for every operand): enough buffers to cover from the iteration's first copy to the
// end of its last read of any of them, plus `held_slots` the form holds beyond the graph's, and
// at least the solution's deepest ring. A ring released in the iteration that reads it
// (Graph::rings_released_in_iteration) covers its own life only, without the held slots.
int shared_ring_depth(const Graph& graph, const Solution& solution, int held_slots = 0);

// The two depths the lowering realizes: `together`, of the rings released by the next iteration
// (their shared life plus `held_slots`), and `own`, of the rings released in the iteration that
// reads them (their own life; 0 when the graph has none). shared_ring_depth is the larger.
struct RingDepths {
  int together = 0;
  int own = 0;
};
RingDepths ring_depths(const Graph& graph, const Solution& solution, int held_slots = 0);

// The pipeline decision that realizes `solution` of `graph` on the kernel computing `block`:
// stages = shared_ring_depth (with `held_slots`), and on a warp-specialized kernel its consumer warpgroups (and
// pingpong=1 when the consumers take turns on the tensor cores, consumers_take_turns). nullopt
// with `why` for a graph the lowering does not have the form of (an sm_80 loop read as its
// sm_90a equivalent: the kernel is not warp-specialized, so the roles would not exist).
// `held_slots` are ring slots the lowering's form keeps beyond what the graph shows: warp_spec's
// overlap=1 issues iteration j's P·V in iteration j + 1, so the consumers still hold slot j
// while they read slot j + 1, one slot more than the solution's ring needs (held_ring_slots).
std::optional<sched::Decision> realizing_decision(const Graph& graph, const Solution& solution,
                                                  const std::string& block, std::string* why,
                                                  int held_slots = 0);

// The block a kernel's pipeline decision names, of `blocks` (the kernel's, Compilation::
// kernel_blocks): the one a launch, warp_spec or pipeline decision of `schedule` names, as the
// decision then refines that one; else the kernel's first block.
std::string pipeline_block(const sched::Schedule& schedule, const std::vector<std::string>& blocks);

// The consumer warpgroups of a warp-specialized kernel (its Roles op's roles after the
// producer), 0 for a kernel without roles. The solver keeps this count unless pinned: the
// kernel's tile rows are 64 per consumer warpgroup.
int consumer_warpgroups(const matile::Kernel& kernel);

// Per kernel of `compiled` (its VR kernels, in order): the ring slots its form holds beyond
// the graph's (1 with warp_spec overlap=1, else 0).
std::vector<int> held_ring_slots(const driver::Compilation& compiled);

// Whether `solution` has its consumer warpgroups take turns on the tensor cores: the wgmma
// sub-tiles (graph.h: the 64-row halves, ".h0" / ".h1") run on at least two consumer roles, no
// two consumers' tensor-core reservations overlap (modulo II), and some CUDA-core op (the
// softmax) of one consumer runs while another's MMAs hold the tensor cores -- the structure
// warp_spec's pingpong=1 realizes with named barriers (FlashAttention-3's ping-pong). `why`
// says what it found either way.
bool consumers_take_turns(const Graph& graph, const Solution& solution, std::string* why = nullptr);

// One line per kernel: "kernel C (sm_90a roles): optimal, II 1152 cycles (tensor core), 3
// stages, producer + 2 consumers, 0.04 s -> pipeline(C_sum, stages=3, consumers=2)".
std::string describe_completion(const Completion& completion);

}  // namespace nautilus::pipeline
