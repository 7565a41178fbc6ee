// The pipeline solver (core/pipeline): graphs read off real lowered loops and the hand-built
// Hopper GEMM, optimal answers on small graphs known by hand, the structures the issue asks for
// (sm_90a GEMM: a TMA producer and consumer warpgroups with >= 3 stages; sm_80 GEMM: a
// multistage cp.async pipeline with one role), explanations of infeasible limits and pins, the
// time-limit fallback, the cache, and `nautilus pipeline`. Every solution is re-checked by
// check_solution, independently of Z3.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <thread>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/driver/pipeline.h"
#include "core/pipeline/graph.h"
#include "core/pipeline/machine.h"
#include "core/pipeline/solver.h"
#include "core/sched/decision.h"
#include "tests/common/cli_run.h"
#include "tests/common/hopper_kernels.h"
#include "tests/common/spec_test_util.h"
#include "tests/common/temp_dir.h"

namespace nautilus::pipeline {
namespace {

std::string source(const std::string& relative) {
  return std::string(NAUTILUS_SOURCE_DIR) + "/" + relative;
}

// assets/specs/<asset>.nt with assets/schedules/<asset>.json, lowered to MA tile IR.
matile::ModulePtr lower_asset(const std::string& asset) {
  std::string error;
  SourceFilePtr file = SourceFile::read(source("assets/specs/" + asset + ".nt"), &error);
  EXPECT_TRUE(file) << error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  auto schedule = sched::read_schedule_file(source("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  if (schedule) options.schedule = *schedule;
  const driver::Compilation compilation = driver::compile(file, options);
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  return compilation.ma_module;
}

Graph graph_of(const matile::Module& module, const std::string& arch) {
  const GraphResult result = build_graph(module, *machine_for(arch));
  EXPECT_TRUE(result.graph) << result.error;
  return result.graph ? *result.graph : Graph{};
}

const Edge* find_edge(const Graph& graph, const std::string& from, const std::string& to) {
  for (const Edge& edge : graph.edges) {
    if (graph.nodes[static_cast<size_t>(edge.from)].name == from &&
        graph.nodes[static_cast<size_t>(edge.to)].name == to) {
      return &edge;
    }
  }
  return nullptr;
}

const RoleUse* role_of_op(const Solution& s, const std::string& op) {
  for (const RoleUse& role : s.roles) {
    for (const std::string& name : role.ops) {
      if (name == op) return &role;
    }
  }
  return nullptr;
}

bool mentions(const std::vector<std::string>& reasons, const std::string& text) {
  for (const std::string& reason : reasons) {
    if (reason.find(text) != std::string::npos) return true;
  }
  return false;
}

Solution solve_checked(const Graph& graph, const std::string& arch, const SolveOptions& options = {}) {
  const Machine machine = *machine_for(arch);
  Solution solution = solve(graph, machine, options);
  if (solution.status == SolveStatus::Optimal || solution.status == SolveStatus::BestFound) {
    EXPECT_EQ(check_solution(graph, machine, options, solution), "") << describe_solution(graph, solution);
  }
  return solution;
}

// ---------------------------------------------------------------------------------------------
// Graphs.

TEST(PipelineGraph, Sm80GemmLoopFromTheLowering) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_80");
  ASSERT_EQ(graph.nodes.size(), 5u) << describe_graph(graph);
  for (const char* name : {"cp.async:A_smem", "cp.async:B_smem", "ldmatrix:A_smem", "ldmatrix:B_smem", "mma:C_sum"}) {
    EXPECT_GE(graph.find(name), 0) << name << "\n" << describe_graph(graph);
  }
  const Node& mma = graph.nodes[static_cast<size_t>(graph.find("mma:C_sum"))];
  EXPECT_EQ(mma.steps, 4);  // the four k16 steps of the 64-wide k tile, one chain
  EXPECT_EQ(graph.registers(mma), 128);  // a 128x128 f32 accumulator over 128 threads
  EXPECT_GT(mma.occupancy[static_cast<size_t>(Unit::TensorCore)], 0);
  const Edge* carried = find_edge(graph, "mma:C_sum", "mma:C_sum");
  ASSERT_TRUE(carried);
  EXPECT_EQ(carried->distance, 1);
  const Edge* buffer = find_edge(graph, "cp.async:A_smem", "ldmatrix:A_smem");
  ASSERT_TRUE(buffer);
  EXPECT_TRUE(buffer->through_shared);
  EXPECT_EQ(buffer->distance, 0);
  EXPECT_TRUE(find_edge(graph, "ldmatrix:B_smem", "mma:C_sum"));
  EXPECT_EQ(graph.hand_stages, 2);
  EXPECT_EQ(graph.nodes[static_cast<size_t>(graph.find("cp.async:A_smem"))].buffer_bytes, 128 * 64 * 2);
}

TEST(PipelineGraph, AttentionLoopCarriesTheRunningMaxSumAndAccumulator) {
  const Graph graph = graph_of(*lower_asset("attention"), "sm_80");
  int mmas = 0, carried = 0;
  for (const Node& node : graph.nodes) mmas += node.kind == NodeKind::Mma ? 1 : 0;
  for (const Edge& edge : graph.edges) carried += edge.distance == 1 ? 1 : 0;
  EXPECT_EQ(mmas, 2) << describe_graph(graph);
  EXPECT_GE(carried, 3) << describe_graph(graph);  // running max, running sum, O accumulator
  EXPECT_GT(graph.fixed_shared_bytes, 0);          // Q, copied once before the loop
}

TEST(PipelineGraph, Sm80LoopReadForSm90aBecomesTmaAndWgmmaSubTiles) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_90a");
  EXPECT_EQ(graph.form, "sm_80 loop retargeted to sm_90a");
  EXPECT_GE(graph.find("tma:A_smem"), 0) << describe_graph(graph);
  EXPECT_GE(graph.find("wgmma:C_sum.h0"), 0);
  EXPECT_GE(graph.find("wgmma:C_sum.h1"), 0);
  EXPECT_LT(graph.find("ldmatrix:A_smem"), 0);  // wgmma reads shared memory itself
  EXPECT_EQ(graph.registers(graph.nodes[static_cast<size_t>(graph.find("wgmma:C_sum.h0"))]), 64);
  EXPECT_TRUE(graph.nodes[static_cast<size_t>(graph.find("tma:B_smem"))].variable_latency);
  const Edge* buffer = find_edge(graph, "tma:A_smem", "wgmma:C_sum.h1");
  ASSERT_TRUE(buffer);
  EXPECT_TRUE(buffer->through_shared);
}

// On sm_90a the boxes one MMA reads share the SM's delivery: a stage lands when all of its
// bytes have. The fused gate-and-up kernel's X, Wg and Wu (16 KB each, read by the two wgmma
// chains) land with 48 KB at the loaded rate, where each alone was given the margin over the
// latency of 16 KB; the ring then needs 4 stages to keep the tensor cores busy (measured on the
// H200: 3 stages 11% slower). Attention's K and V feed different MMAs and keep their own.
TEST(PipelineGraph, TheBoxesOneMmaReadsLandTogether) {
  const driver::Compilation compilation = testing::compile_for_arch(
      "bench/variants/geglu_mlp.nt",
      {"tile(A, t=128, f=128)", "compute_at(G, A, f_o)", "compute_at(U, A, f_o)", "tile(G, h=64)",
       "tile(U, h=64)", "compute_with(U, G, h_o)", "bind(U, f_o=grid.y, t_o=grid.x)",
       "warp_spec(U, consumers=2, stages=3)", "persistent(U)"},
      {"T=512", "H=512", "F=512"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const Machine machine = *machine_for("sm_90a");
  const Graph graph = graph_of(*compilation.ma_module, "sm_90a");
  std::vector<std::string> copies;
  for (const Node& node : graph.nodes) {
    if (!node.is_copy()) continue;
    copies.push_back(node.name);
    EXPECT_EQ(node.buffer_bytes, 16384) << node.name;
    EXPECT_NEAR(node.latency(), 3 * 16384 / machine.loaded_stage_bytes_per_clock, 1.0) << describe_graph(graph);
    EXPECT_EQ(node.landing_bytes, 3 * 16384);
  }
  EXPECT_EQ(copies.size(), 3u) << describe_graph(graph);
  const Solution s = solve_checked(graph, "sm_90a");
  EXPECT_EQ(s.stages, 4) << describe_solution(graph, s);
  EXPECT_LE(s.shared_bytes, machine.shared_capacity);

  const Graph attention = graph_of(*lower_asset("attention"), "sm_90a");
  for (const Node& node : attention.nodes) {
    if (!node.is_copy()) continue;
    EXPECT_NEAR(node.latency(), machine.copy_latency_margin() * machine.tma_latency(node.buffer_bytes), 1.0)
        << describe_graph(attention);
    EXPECT_EQ(node.landing_bytes, 0);
  }
}

// The lowering gives the rings released together the deepest one's depth. A 128 x 256 GEMM's
// A (16 KB) and B (32 KB) rings beside its 64 KB staged epilogue: the first answer takes A 4
// deep and B 3, 256 KB once realized; the solver solves again with each ring bounded, says so,
// and the answer fits with 3 of each.
TEST(PipelineSolver, RingsReleasedTogetherAreSolvedAgainWhenTheirDeepestDoesNotFit) {
  const driver::Compilation compilation = testing::compile_for_arch(
      "assets/specs/gemm.nt",
      {"tile(C_sum, m=128, n=256, k=64)", "reverse_compute_at(C, C_sum, n_o)",
       "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=3)",
       "tile_order(C_sum, group=16)"},
      {});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const Machine machine = *machine_for("sm_90a");
  const Graph graph = graph_of(*compilation.ma_module, "sm_90a");
  EXPECT_TRUE(graph.rings_released_in_iteration.empty());
  const Solution s = solve_checked(graph, "sm_90a");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_TRUE(mentions(s.notes, "solved again with every ring released together")) << describe_solution(graph, s);
  EXPECT_LE(s.shared_bytes, machine.shared_capacity);
  EXPECT_EQ(s.shared_bytes, graph.realized_shared_bytes([&](size_t v) { return s.ring_depth.at(graph.nodes[v].name); }));
  EXPECT_EQ(s.stages, 3) << describe_solution(graph, s);
}

// wgmma's 8-bit form (fp8 operands) reads k 32 per instruction in the time the 16-bit form reads
// k 16: under the same warp-specialized schedule (k tile 64) the fp8 GEMM's wgmmas keep the tensor
// cores busy half as long as the bf16 GEMM's.
TEST(PipelineGraph, EightBitWgmmaTakesHalfTheTensorCoreCyclesOfSixteenBit) {
  const auto tensor_cycles = [](const std::string& asset) {
    std::string error;
    SourceFilePtr file = SourceFile::read(source("assets/specs/" + asset + ".nt"), &error);
    EXPECT_TRUE(file) << error;
    driver::CompileOptions options;
    options.last_stage = driver::Stage::MATile;
    options.matile.arch = "sm_90a";
    for (const char* decision :
         {"tile(C_sum, m=128, n=256, k=64)", "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=3)"}) {
      sched::DecisionParseError parse_error;
      std::optional<sched::Decision> parsed = sched::parse_decision(decision, &parse_error);
      EXPECT_TRUE(parsed) << decision;
      if (parsed) options.schedule.decisions.push_back(*parsed);
    }
    for (const char* size : {"M=1024", "N=1024", "K=1024"}) {
      options.sizes.push_back(*spec::parse_size_override(size, &error));
    }
    const driver::Compilation compilation = driver::compile(file, options);
    EXPECT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
    if (!compilation.ma_module) return 0.0;
    const Graph graph = graph_of(*compilation.ma_module, "sm_90a");
    double cycles = 0.0;
    for (const Node& node : graph.nodes) {
      if (node.kind == NodeKind::Wgmma) cycles += node.occupancy[static_cast<size_t>(Unit::TensorCore)];
    }
    return cycles;
  };
  const double bf16 = tensor_cycles("gemm"), fp8 = tensor_cycles("fp8_gemm_nt");
  EXPECT_GT(fp8, 0.0);
  EXPECT_DOUBLE_EQ(bf16, 2.0 * fp8);
}

TEST(PipelineGraph, HandWrittenHopperGemmKeepsItsRoles) {
  const matile::ModulePtr module = matile::testing::hopper_gemm({});
  const Graph graph = graph_of(*module, "sm_90a");
  EXPECT_EQ(graph.form, "hopper roles");
  EXPECT_EQ(graph.hand_stages, 3);
  ASSERT_GE(graph.find("tma:As"), 0) << describe_graph(graph);
  EXPECT_EQ(graph.nodes[static_cast<size_t>(graph.find("tma:As"))].hand_role, "producer");
  int wgmmas = 0;
  for (const Node& node : graph.nodes) {
    if (node.kind != NodeKind::Wgmma) continue;
    ++wgmmas;
    EXPECT_TRUE(node.hand_role == "consumer0" || node.hand_role == "consumer1") << node.hand_role;
    EXPECT_TRUE(find_edge(graph, "tma:Bs", node.name)) << describe_graph(graph);
  }
  EXPECT_EQ(wgmmas, 2);
  // The cooperative form (one role of two warpgroups, m128 wgmma) splits into two sub-tiles.
  const Graph cooperative = graph_of(*matile::testing::hopper_gemm({.cooperative = true}), "sm_90a");
  int halves = 0;
  for (const Node& node : cooperative.nodes) halves += node.subtile >= 0 ? 1 : 0;
  EXPECT_EQ(halves, 2) << describe_graph(cooperative);
  // And it is no sm_80 loop.
  EXPECT_FALSE(build_graph(*module, *machine_for("sm_80")).graph);
}

TEST(PipelineGraph, KernelsWithoutPipelinedLoopsSayWhy) {
  const GraphResult result = build_graph(*lower_asset("softmax"), *machine_for("sm_80"));
  EXPECT_FALSE(result.graph);
  EXPECT_NE(result.error.find("pipelined loop"), std::string::npos) << result.error;
}

// ---------------------------------------------------------------------------------------------
// Optimal answers on small graphs known by hand (quantum 1: every figure below ~24 cycles).

Node op(const std::string& name, Unit unit, double busy, double fixed) {
  Node node;
  node.name = name;
  node.occupancy[static_cast<size_t>(unit)] = busy;
  node.fixed = fixed;
  return node;
}

Graph toy(std::vector<Node> nodes, std::vector<Edge> edges) {
  Graph graph;
  graph.kernel = "toy";
  graph.arch = "sm_80";
  graph.nodes = std::move(nodes);
  graph.edges = std::move(edges);
  for (Edge& edge : graph.edges) {
    if (edge.latency == 0) edge.latency = graph.nodes[static_cast<size_t>(edge.from)].latency();
  }
  return graph;
}

TEST(PipelineSolver, ResourceBoundTwoOpsOnOneUnit) {
  // Two independent ops of 10 tensor-core cycles (latency 12 each) share one unit: II = 20,
  // and the shortest flat schedule starts them at 0 and 10.
  const Graph graph = toy({op("a", Unit::TensorCore, 10, 2), op("b", Unit::TensorCore, 10, 2)}, {});
  const Solution s = solve_checked(graph, "sm_80");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_EQ(s.quantum, 1);
  EXPECT_EQ(s.ii, 20);
  EXPECT_EQ(s.length, 22);  // 10 of one, then 10 + 2 of the other
  EXPECT_EQ(s.bound_reason, "tensor core");
}

TEST(PipelineSolver, RecurrenceBound) {
  // a -> b (latency 7) -> a of the next iteration (latency 9): the cycle needs II >= 16,
  // although the units need only 4 + 4.
  const Graph graph = toy({op("a", Unit::ALU, 4, 3), op("b", Unit::SFU, 4, 5)},
                          {{0, 1, 0, 0, false, "x"}, {1, 0, 0, 1, false, "y"}});
  const Solution s = solve_checked(graph, "sm_80");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_EQ(s.ii, 16);
  EXPECT_EQ(s.length, 16);
  EXPECT_EQ(s.ops[1].start - s.ops[0].start, 7);
}

TEST(PipelineSolver, OverlapAcrossIterationsMakesTheIntervalShorterThanTheLength) {
  // copy (latency 20, copy engine 4) -> compute (tensor core 10): II = 10 (tensor core), the
  // length 30 spans 3 stages, and the copy's buffer must hold 3 iterations' data.
  Node copy = op("copy", Unit::Copy, 4, 16);
  copy.kind = NodeKind::AsyncCopy;
  copy.buffer_bytes = 1024;
  copy.variable_latency = true;
  Node compute = op("compute", Unit::TensorCore, 10, 0);
  const Graph graph = toy({copy, compute}, {{0, 1, 0, 0, true, "buffer"}});
  const Solution s = solve_checked(graph, "sm_80");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_EQ(s.ii, 10);
  EXPECT_EQ(s.length, 30);
  EXPECT_EQ(s.ops[1].stage, 2);
  EXPECT_EQ(s.ring_depth.at("copy"), 3);
}

// ---------------------------------------------------------------------------------------------
// The assets.

TEST(PipelineSolver, Sm80GemmIsAMultistageCpAsyncPipelineWithOneRole) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_80");
  const Solution s = solve_checked(graph, "sm_80");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_EQ(s.ii, s.ii_lower_bound);
  EXPECT_EQ(s.bound_reason, "tensor core");
  ASSERT_EQ(s.roles.size(), 1u);
  EXPECT_EQ(s.roles[0].name, "main");
  EXPECT_GE(s.stages, 2) << describe_solution(graph, s);
  EXPECT_GT(s.length, s.ii);  // iterations overlap
  EXPECT_EQ(s.cross_role_edges, 0);
  EXPECT_LT(s.seconds, 10.0);
}

TEST(PipelineSolver, Sm90aGemmHasATmaProducerAndConsumersWithThreeStages) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_90a");
  const Solution s = solve_checked(graph, "sm_90a");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_GE(s.stages, 3) << describe_solution(graph, s);
  EXPECT_GE(s.roles.size(), 2u);
  EXPECT_EQ(role_of_op(s, "tma:A_smem")->name, "producer");
  EXPECT_EQ(role_of_op(s, "tma:B_smem")->name, "producer");
  EXPECT_EQ(role_of_op(s, "wgmma:C_sum.h0")->name.rfind("consumer", 0), 0u);
  EXPECT_EQ(role_of_op(s, "wgmma:C_sum.h1")->name.rfind("consumer", 0), 0u);
  EXPECT_EQ(s.roles[0].register_limit, 40);
}

TEST(PipelineSolver, HandWrittenHopperGemmSolvesToAProducerConsumerPipeline) {
  const Graph graph = graph_of(*matile::testing::hopper_gemm({}), "sm_90a");
  const Solution s = solve_checked(graph, "sm_90a");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_GE(s.stages, 3) << describe_solution(graph, s);
  EXPECT_EQ(role_of_op(s, "tma:As")->name, "producer");
  EXPECT_EQ(role_of_op(s, "tma:Bs")->name, "producer");
}

// Busy intervals [start, start + length) overlap modulo ii.
bool overlap_modulo(int64_t a, int64_t a_length, int64_t b, int64_t b_length, int64_t ii) {
  for (int64_t shift = -2; shift <= 2; ++shift) {
    const int64_t b_start = ((b - a) % ii + ii) % ii + a + shift * ii;
    if (b_start < a + a_length && a < b_start + b_length) return true;
  }
  return false;
}

TEST(PipelineSolver, Sm90aAttentionWithTwoConsumersIsFlashAttention3sPingPong) {
  const Graph graph = graph_of(*lower_asset("attention"), "sm_90a");
  SolveOptions options;
  options.consumers = 2;
  const Solution s = solve_checked(graph, "sm_90a", options);
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_EQ(s.ii, s.ii_lower_bound);  // the tensor core never idles
  ASSERT_EQ(s.roles.size(), 3u);
  EXPECT_EQ(s.roles[0].ops, (std::vector<std::string>{"tma:K_smem", "tma:V_smem"}));
  // Each consumer owns one 64-row half: its two GEMMs and its softmax.
  const std::string h0 = role_of_op(s, "wgmma:27.h0")->name, h1 = role_of_op(s, "wgmma:27.h1")->name;
  EXPECT_NE(h0, h1);
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    if (graph.nodes[v].subtile == 0) {
      EXPECT_EQ(s.ops[v].role, h0) << graph.nodes[v].name;
    }
    if (graph.nodes[v].subtile == 1) {
      EXPECT_EQ(s.ops[v].role, h1) << graph.nodes[v].name;
    }
  }
  // The exponentials of one half run while the tensor core works for the other half.
  const auto busy = [&](const std::string& name, Unit unit) {
    const int v = graph.find(name);
    return std::make_pair(s.ops[static_cast<size_t>(v)].start,
                          static_cast<int64_t>(graph.nodes[static_cast<size_t>(v)].occupancy[static_cast<size_t>(unit)]));
  };
  bool hidden = false;
  for (const char* half : {".h0", ".h1"}) {
    const char* other = std::string(half) == ".h0" ? ".h1" : ".h0";
    const auto exp = busy(std::string("ew:37_log2..38") + half, Unit::SFU);
    for (const char* gemm : {"wgmma:27", "wgmma:O_sum_acc"}) {
      const auto tc = busy(std::string(gemm) + other, Unit::TensorCore);
      hidden = hidden || overlap_modulo(exp.first, exp.second, tc.first, tc.second, s.ii);
    }
  }
  EXPECT_TRUE(hidden) << describe_solution(graph, s);
  EXPECT_LT(s.seconds, 20.0);
}

// ---------------------------------------------------------------------------------------------
// Explanations.

TEST(PipelineSolver, MaxRegistersBelowTheAccumulatorIsInfeasibleAndSaysSo) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_80");
  SolveOptions options;
  options.max_registers = 128;
  const Solution s = solve_checked(graph, "sm_80", options);
  ASSERT_EQ(s.status, SolveStatus::Infeasible) << describe_solution(graph, s);
  EXPECT_TRUE(mentions(s.explanation, "--max-regs 128")) << describe_solution(graph, s);
  EXPECT_TRUE(mentions(s.explanation, "mma:C_sum 128")) << describe_solution(graph, s);
}

TEST(PipelineSolver, OneStageRaisesTheIntervalAndTheExplanationNamesIt) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_80");
  SolveOptions options;
  options.stages = 1;
  const Solution s = solve_checked(graph, "sm_80", options);
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  EXPECT_GT(s.ii, s.ii_lower_bound);  // no overlap of a copy with the reads of its buffer
  EXPECT_EQ(s.stages, 1);
  EXPECT_TRUE(mentions(s.explanation, "--stages 1")) << describe_solution(graph, s);
  // Capped below what one stage needs, there is no schedule at all, and the answer says why.
  options.max_ii = s.ii - 1;
  const Solution capped = solve_checked(graph, "sm_80", options);
  ASSERT_EQ(capped.status, SolveStatus::Infeasible) << describe_solution(graph, capped);
  EXPECT_TRUE(mentions(capped.explanation, "--stages 1")) << describe_solution(graph, capped);
}

TEST(PipelineSolver, PinningAWgmmaOnTheProducerIsInfeasibleAndSaysSo) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_90a");
  SolveOptions options;
  options.role_pins = {{"wgmma:C_sum.h0", "producer"}};
  options.time_limit_seconds = 10;
  const Solution s = solve_checked(graph, "sm_90a", options);
  ASSERT_EQ(s.status, SolveStatus::Infeasible) << describe_solution(graph, s);
  EXPECT_TRUE(mentions(s.explanation, "pinned: wgmma:C_sum.h0 runs on role producer"))
      << describe_solution(graph, s);
  // A pin naming nothing is an error, not a hang.
  options.role_pins = {{"wgmma:nothing", "producer"}};
  EXPECT_NE(solve(graph, *machine_for("sm_90a"), options).summary.find("no op named"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Time limits and the cache.

TEST(PipelineSolver, ATimeoutReturnsTheBestScheduleFoundAndSaysSo) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_80");
  SolveOptions options;
  options.time_limit_seconds = 1e-6;
  const auto start = std::chrono::steady_clock::now();
  const Solution s = solve_checked(graph, "sm_80", options);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  ASSERT_EQ(s.status, SolveStatus::BestFound) << describe_solution(graph, s);
  EXPECT_NE(s.summary.find("best found"), std::string::npos);
  EXPECT_FALSE(s.notes.empty());
  EXPECT_NE(s.notes[0].find("time limit"), std::string::npos);
}

// The limit counts Z3's work, not time: the same problem gets the same answer with two threads
// keeping both cores busy beside the solve as without them (a limit in CPU or wall time gave
// three ring depths in three runs of one attention row), and the wait stays under the caps.
// Attention on sm_90a with any number of consumers does not finish in half a solver second; so
// short a limit keeps the loaded solve far from the real-time caps (the wall cap's 8 s floor)
// also when ctest runs another test on the same two cores.
TEST(PipelineSolver, TheTimeLimitCountsTheSolversWorkNotTime) {
  const Graph graph = graph_of(*lower_asset("attention"), "sm_90a");
  SolveOptions options;
  options.time_limit_seconds = 0.5;
  const Solution alone = solve(graph, *machine_for("sm_90a"), options);
  // Two busy threads beside the solver; each stops when its jthread is destroyed, also when
  // solve throws.
  std::vector<std::jthread> load;
  load.reserve(2);
  for (int i = 0; i < 2; ++i) {
    load.emplace_back([](std::stop_token stop) {
      volatile double sink = 0;
      while (!stop.stop_requested()) sink = sink + 1.0;
    });
  }
  const Solution loaded = solve(graph, *machine_for("sm_90a"), options);
  load.clear();
  for (const Solution* s : {&alone, &loaded}) {
    EXPECT_NE(s->status, SolveStatus::Optimal) << describe_solution(graph, *s);
    // It spent its solver time and no real-time cap ended it.
    EXPECT_GT(s->solver_seconds, 0.99 * options.time_limit_seconds) << describe_solution(graph, *s);
    EXPECT_LT(s->cpu_seconds, cpu_cap_seconds(options.time_limit_seconds) + 0.5) << describe_solution(graph, *s);
    EXPECT_LT(s->seconds, wall_cap_seconds(options.time_limit_seconds) + 1.0) << describe_solution(graph, *s);
    EXPECT_NE(describe_solution(graph, *s).find("solver s)"), std::string::npos);
  }
  // The same answer, op by op.
  EXPECT_EQ(alone.status, loaded.status);
  EXPECT_EQ(alone.ii, loaded.ii);
  EXPECT_EQ(alone.length, loaded.length);
  EXPECT_EQ(alone.stages, loaded.stages);
  EXPECT_EQ(alone.solver_seconds, loaded.solver_seconds);
  ASSERT_EQ(alone.ops.size(), loaded.ops.size());
  for (size_t i = 0; i < alone.ops.size(); ++i) {
    EXPECT_EQ(alone.ops[i].start, loaded.ops[i].start) << alone.ops[i].name;
    EXPECT_EQ(alone.ops[i].role, loaded.ops[i].role) << alone.ops[i].name;
  }
}

// A stop request from another thread (the studio's newer request) ends a long solve at once: the
// running Z3 check is interrupted and the answer says it was stopped. Attention on sm_90a with
// any number of consumers takes the whole 20 s limit otherwise (docs/pipeline.md §5).
TEST(PipelineSolver, AStopRequestEndsALongSolveAtOnce) {
  const Graph graph = graph_of(*lower_asset("attention"), "sm_90a");
  std::stop_source stop;
  SolveOptions options;
  options.stop = stop.get_token();
  // A jthread: should solve() throw, the test fails with the exception instead of aborting.
  std::jthread stopper([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  const Solution s = solve(graph, *machine_for("sm_90a"), options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stopper.join();
  EXPECT_LT(seconds, 5.0) << describe_solution(graph, s);
  EXPECT_NE(s.status, SolveStatus::Infeasible) << "a stop proves nothing";
  if (s.status != SolveStatus::Optimal) {
    EXPECT_TRUE(mentions(s.notes, "stopped on request")) << describe_solution(graph, s);
  }
  if (s.status == SolveStatus::BestFound) {
    EXPECT_EQ(check_solution(graph, *machine_for("sm_90a"), options, s), "");
  }
}

TEST(PipelineSolver, TheCacheAnswersTheSameProblemAgain) {
  const Graph graph = graph_of(*lower_asset("gemm"), "sm_80");
  const Machine machine = *machine_for("sm_80");
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("nautilus-pipeline-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  SolveCache cache(directory.string());
  const Solution first = solve(graph, machine, {}, &cache);
  ASSERT_EQ(first.status, SolveStatus::Optimal);
  EXPECT_FALSE(first.cached);
  const Solution second = solve(graph, machine, {}, &cache);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(second.ii, first.ii);
  EXPECT_EQ(second.ops.size(), first.ops.size());
  // Another process (a fresh cache over the same directory) finds it on disk.
  SolveCache fresh(directory.string());
  const Solution third = solve(graph, machine, {}, &fresh);
  EXPECT_TRUE(third.cached);
  EXPECT_EQ(third.length, first.length);
  // Another machine or limit is another problem.
  SolveOptions other;
  other.stages = 3;
  EXPECT_NE(SolveCache::key(graph, machine, other), SolveCache::key(graph, machine, {}));
  EXPECT_NE(SolveCache::key(graph, *machine_for("sm_90a"), {}), SolveCache::key(graph, machine, {}));
  std::filesystem::remove_all(directory);
}

// ---------------------------------------------------------------------------------------------
// The command line.

TEST(PipelineCli, PrintsTheGraphTheScheduleAndItsStatus) {
  const auto run = testing::run_cli_in_process(
      {"pipeline", source("assets/specs/gemm.nt"), "--schedule", source("assets/schedules/gemm.json"),
       "--arch", "sm_90a"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("graph of kernel C, loop k_o"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("solution: optimal"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("producer"), std::string::npos);
  EXPECT_NE(run.out.find("solve time"), std::string::npos);
  // The hand schedule's kernel is not warp-specialized: its sm_90a answer is no decision yet.
  EXPECT_NE(run.out.find("not realizable as a schedule decision: kernel C is not warp-specialized"),
            std::string::npos) << run.out;
  const auto sm80 = testing::run_cli_in_process(
      {"pipeline", source("assets/specs/gemm.nt"), "--schedule", source("assets/schedules/gemm.json")});
  ASSERT_EQ(sm80.status, 0) << sm80.err;
  EXPECT_NE(sm80.out.find("realized as: pipeline(C_sum, stages="), std::string::npos) << sm80.out;
}

// A warp-specialized attention kernel computes several blocks (Mx_init, ..., O_sum_acc): the
// realizing decision names the one its warp_spec names, and the solver keeps the kernel's two
// consumer warpgroups unless --consumers pins another count.
TEST(PipelineCli, AWarpSpecializedKernelKeepsItsConsumersAndItsBlock) {
  testing::TempDir directory("nautilus-pipeline-cli");
  const std::string schedule = directory.file("attention.json");
  std::ofstream(schedule) << R"json({"decisions": ["rolling_update(O_sum, n, tile=128)", "compute_at(S, Mx, n_o)",
      "tile(O_sum_acc, m=128)", "reverse_compute_at(O, O_sum, m_o)",
      "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)", "warp_spec(O_sum_acc, consumers=2, stages=3)"]})json";
  const auto run = testing::run_cli_in_process(
      {"pipeline", source("assets/specs/attention.nt"), "--schedule", schedule, "--arch", "sm_90a",
       "-D", "B=1", "-D", "H=1", "-D", "M=136", "-D", "N=256", "-D", "D=128"});
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("consumers: 2, the kernel's own"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("realized as: pipeline(O_sum_acc, stages="), std::string::npos) << run.out;
  // (followed by pingpong=1 when the answer has the two consumers take turns on the tensor cores)
  EXPECT_NE(run.out.find(", consumers=2"), std::string::npos) << run.out;
}

TEST(PipelineCli, JsonAndExplanations) {
  const auto json = testing::run_cli_in_process(
      {"pipeline", source("assets/specs/gemm.nt"), "--schedule", source("assets/schedules/gemm.json"), "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json document = nlohmann::json::parse(json.out);
  EXPECT_EQ(document["solution"]["status"], "optimal");
  EXPECT_EQ(document["graph"]["nodes"].size(), 5u);
  EXPECT_EQ(document["decision"].get<std::string>().rfind("pipeline(C_sum, stages=", 0), 0u) << json.out;
  const auto infeasible = testing::run_cli_in_process(
      {"pipeline", source("assets/specs/gemm.nt"), "--schedule", source("assets/schedules/gemm.json"),
       "--max-regs", "128"});
  EXPECT_EQ(infeasible.status, 1);
  EXPECT_NE(infeasible.out.find("conflicting constraints"), std::string::npos) << infeasible.out;
  EXPECT_NE(infeasible.out.find("--max-regs 128"), std::string::npos) << infeasible.out;
  EXPECT_NE(infeasible.err.find("no pipeline schedule"), std::string::npos) << infeasible.err;
  const auto bad = testing::run_cli_in_process(
      {"pipeline", source("assets/specs/gemm.nt"), "--arch", "sm_70"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("expected sm_80, sm_90a"), std::string::npos) << bad.err;
  const auto help = testing::run_cli_in_process({"help", "pipeline"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--max-regs"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::pipeline
