// What the Pipeline panel draws of a solver answer (core/pipeline/schedule_view.h): the modulo
// reservation table holds every op's busy slots on its units at its row and stage, never more
// than a unit's capacity; the per-role timeline repeats the flat schedule every II, hands values
// over between roles after their producers' latencies, and fills ring buffers in turn so that a
// buffer is released before the copy that reuses it starts.
#include <gtest/gtest.h>

#include <map>

#include "core/pipeline/graph.h"
#include "core/pipeline/machine.h"
#include "core/pipeline/schedule_view.h"
#include "core/pipeline/solver.h"
#include "tests/common/hopper_kernels.h"

namespace nautilus::pipeline {
namespace {

Node unit_op(const std::string& name, Unit unit, double busy, double fixed) {
  Node node;
  node.name = name;
  node.occupancy[static_cast<size_t>(unit)] = busy;
  node.fixed = fixed;
  return node;
}

// copy (latency 20, copy engine 4) -> compute (tensor core 10) on sm_80: II 10, length 30, a
// ring of 3 buffers (PipelineSolver.OverlapAcrossIterationsMakesTheIntervalShorterThanTheLength).
Graph copy_compute() {
  Node copy = unit_op("copy", Unit::Copy, 4, 16);
  copy.kind = NodeKind::AsyncCopy;
  copy.buffer_bytes = 1024;
  copy.variable_latency = true;
  Graph graph;
  graph.kernel = "toy";
  graph.arch = "sm_80";
  graph.nodes = {copy, unit_op("compute", Unit::TensorCore, 10, 0)};
  graph.edges = {{0, 1, 20, 0, true, "buffer"}};
  return graph;
}

Solution solved(const Graph& graph, const std::string& arch) {
  const Machine machine = *machine_for(arch);
  Solution solution = solve(graph, machine, {});
  EXPECT_EQ(check_solution(graph, machine, {}, solution), "") << describe_solution(graph, solution);
  return solution;
}

TEST(PipelineScheduleView, ModuloTableOfAResourceBoundLoop) {
  const Graph graph = copy_compute();
  const Solution s = solved(graph, "sm_80");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  const ModuloTable table = modulo_table(graph, s);
  ASSERT_EQ(table.ii_rows, 10);
  EXPECT_EQ(table.quantum, 1);
  EXPECT_DOUBLE_EQ(table.utilization(Unit::TensorCore), 1.0);  // the unit that bounds II
  EXPECT_DOUBLE_EQ(table.utilization(Unit::Copy), 0.4);
  EXPECT_DOUBLE_EQ(table.utilization(Unit::SFU), 0.0);
  // The compute op is in stage 2 (it starts 20 cycles after its copy): every tensor-core row
  // holds it, labelled with that stage.
  for (int64_t row = 0; row < table.ii_rows; ++row) {
    const std::vector<int>& cell = table.cells[static_cast<size_t>(row)][static_cast<size_t>(Unit::TensorCore)];
    ASSERT_EQ(cell.size(), 1u) << row;
    const Reservation& r = table.reservations[static_cast<size_t>(cell[0])];
    EXPECT_EQ(graph.nodes[static_cast<size_t>(r.op)].name, "compute");
    EXPECT_EQ(r.stage, 2);
  }
  const std::string text = describe_modulo_table(graph, table);
  EXPECT_NE(text.find("tensor core: 10 of 10 rows busy"), std::string::npos) << text;
  EXPECT_NE(text.find("copy engine: copy [s0]"), std::string::npos) << text;
}

TEST(PipelineScheduleView, RingBuffersAreReleasedBeforeTheirNextCopy) {
  const Graph graph = copy_compute();
  const Solution s = solved(graph, "sm_80");
  ASSERT_EQ(s.ring_depth.at("copy"), 3);
  const RoleTimeline timeline = role_timeline(graph, s, 6);
  ASSERT_EQ(timeline.roles, (std::vector<std::string>{"main"}));
  EXPECT_EQ(timeline.bars.size(), 12u);
  EXPECT_TRUE(timeline.handoffs.empty());  // one role: nothing crosses
  ASSERT_EQ(timeline.rings.size(), 1u);
  EXPECT_EQ(timeline.rings[0].name, "buffer");
  EXPECT_EQ(timeline.rings[0].depth, 3);
  ASSERT_EQ(timeline.holds.size(), 6u);
  std::map<int, const RingHold*> last_of_buffer;
  for (const RingHold& hold : timeline.holds) {
    EXPECT_EQ(hold.buffer, hold.iteration % 3);
    EXPECT_EQ(hold.fill_start, s.ops[0].start + hold.iteration * s.ii);
    EXPECT_EQ(hold.released, s.ops[1].start + 10 + hold.iteration * s.ii);  // the compute is done
    if (auto previous = last_of_buffer.find(hold.buffer); previous != last_of_buffer.end()) {
      EXPECT_LE(previous->second->released, hold.fill_start) << "buffer " << hold.buffer;
    }
    last_of_buffer[hold.buffer] = &hold;
  }
  // Iterations repeat every II.
  for (const ScheduledBar& bar : timeline.bars) {
    EXPECT_EQ(bar.start, s.ops[static_cast<size_t>(bar.op)].start + bar.iteration * s.ii);
  }
}

TEST(PipelineScheduleView, HopperGemmHandsTilesFromTheProducerToTheConsumers) {
  const GraphResult built = build_graph(*matile::testing::hopper_gemm({}), *machine_for("sm_90a"));
  ASSERT_TRUE(built.graph) << built.error;
  const Graph& graph = *built.graph;
  const Solution s = solved(graph, "sm_90a");
  ASSERT_EQ(s.status, SolveStatus::Optimal) << describe_solution(graph, s);
  const ModuloTable table = modulo_table(graph, s);
  const Machine machine = *machine_for("sm_90a");
  int64_t reserved = 0;
  for (const auto& row : table.cells) {
    for (int u = 0; u < kUnitCount; ++u) {
      EXPECT_LE(static_cast<int>(row[static_cast<size_t>(u)].size()), machine.capacity[static_cast<size_t>(u)]);
      reserved += static_cast<int64_t>(row[static_cast<size_t>(u)].size());
    }
  }
  int64_t busy = 0;
  for (const Reservation& r : table.reservations) {
    busy += r.rows;
    EXPECT_EQ(r.stage, s.ops[static_cast<size_t>(r.op)].stage);
  }
  EXPECT_EQ(reserved, busy);

  const RoleTimeline timeline = role_timeline(graph, s, 4);
  ASSERT_GE(timeline.roles.size(), 2u);
  EXPECT_EQ(timeline.roles[0], "producer");
  ASSERT_FALSE(timeline.handoffs.empty());
  for (const Handoff& handoff : timeline.handoffs) {
    const ScheduledBar& from = timeline.bars[static_cast<size_t>(handoff.from_bar)];
    const ScheduledBar& to = timeline.bars[static_cast<size_t>(handoff.to_bar)];
    EXPECT_NE(from.role, to.role);
    EXPECT_LE(handoff.from_cycle, handoff.to_cycle);  // a dependence the solver honoured
    EXPECT_GT(handoff.from_cycle, from.start);
  }
  // Every tile a consumer reads comes from the producer through a ring.
  EXPECT_EQ(timeline.rings.size(), 2u);
  for (const Ring& ring : timeline.rings) EXPECT_EQ(ring.depth, s.ring_depth.at(graph.nodes[static_cast<size_t>(ring.copy_op)].name));
}

TEST(PipelineScheduleView, NoScheduleDrawsNothing) {
  const Graph graph = copy_compute();
  Solution none;
  none.status = SolveStatus::Infeasible;
  EXPECT_EQ(modulo_table(graph, none).ii_rows, 0);
  EXPECT_TRUE(role_timeline(graph, none, 3).bars.empty());
}

}  // namespace
}  // namespace nautilus::pipeline
