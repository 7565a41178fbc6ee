// The modulo reservation table and the per-role timeline of a solver answer (schedule_view.h).
#include "core/pipeline/schedule_view.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace nautilus::pipeline {
namespace {

bool scheduled(const Graph& graph, const Solution& solution) {
  return (solution.status == SolveStatus::Optimal || solution.status == SolveStatus::BestFound) &&
         solution.ii_slots > 0 && solution.ops.size() == graph.nodes.size();
}

int64_t longest_busy(const SlotTimes& times) {
  return *std::max_element(times.busy.begin(), times.busy.end());
}

}  // namespace

double ModuloTable::utilization(Unit unit) const {
  if (ii_rows <= 0) return 0.0;
  return static_cast<double>(busy_rows[static_cast<size_t>(unit)]) / static_cast<double>(ii_rows);
}

ModuloTable modulo_table(const Graph& graph, const Solution& solution) {
  ModuloTable table;
  if (!scheduled(graph, solution)) return table;
  table.quantum = std::max(1, solution.quantum);
  table.ii_rows = solution.ii_slots;
  table.ii_cycles = solution.ii;
  table.cells.resize(static_cast<size_t>(table.ii_rows));
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    const OpSlot& slot = solution.ops[v];
    const SlotTimes times = slot_times(graph.nodes[v], table.quantum);
    for (int u = 0; u < kUnitCount; ++u) {
      const int64_t busy = times.busy[static_cast<size_t>(u)];
      if (busy <= 0) continue;
      Reservation reservation;
      reservation.op = static_cast<int>(v);
      reservation.unit = static_cast<Unit>(u);
      reservation.first_row = slot.start_slot % table.ii_rows;
      reservation.rows = busy;
      reservation.stage = static_cast<int>(slot.start_slot / table.ii_rows);
      reservation.role = slot.role_index;
      const int index = static_cast<int>(table.reservations.size());
      table.reservations.push_back(reservation);
      // A reservation longer than the interval would overlap itself; the solver never makes one,
      // and the table shows each row once.
      for (int64_t c = 0; c < std::min(busy, table.ii_rows); ++c) {
        table.cells[static_cast<size_t>((reservation.first_row + c) % table.ii_rows)][static_cast<size_t>(u)]
            .push_back(index);
      }
      table.busy_rows[static_cast<size_t>(u)] += std::min(busy, table.ii_rows);
    }
  }
  return table;
}

std::string describe_modulo_table(const Graph& graph, const ModuloTable& table) {
  std::ostringstream out;
  out << "modulo reservation table: II " << table.ii_cycles << " cycles = " << table.ii_rows
      << " rows of " << table.quantum << " cycles\n";
  for (int u = 0; u < kUnitCount; ++u) {
    if (table.busy_rows[static_cast<size_t>(u)] == 0) continue;
    out << "  " << unit_name(static_cast<Unit>(u)) << ": " << table.busy_rows[static_cast<size_t>(u)] << " of "
        << table.ii_rows << " rows busy\n";
  }
  for (size_t row = 0; row < table.cells.size(); ++row) {
    out << "  " << row << ":";
    bool any = false;
    for (int u = 0; u < kUnitCount; ++u) {
      const std::vector<int>& cell = table.cells[row][static_cast<size_t>(u)];
      if (cell.empty()) continue;
      out << (any ? "," : "") << " " << unit_name(static_cast<Unit>(u)) << ":";
      for (int index : cell) {
        const Reservation& r = table.reservations[static_cast<size_t>(index)];
        out << " " << graph.nodes[static_cast<size_t>(r.op)].name << " [s" << r.stage << "]";
      }
      any = true;
    }
    out << (any ? "" : " -") << "\n";
  }
  return out.str();
}

RoleTimeline role_timeline(const Graph& graph, const Solution& solution, int iterations) {
  RoleTimeline timeline;
  if (!scheduled(graph, solution) || iterations < 1) return timeline;
  const int q = std::max(1, solution.quantum);
  timeline.quantum = q;
  timeline.iterations = iterations;
  timeline.ii = solution.ii_slots * q;
  timeline.length = solution.length_slots * q;
  for (const RoleUse& role : solution.roles) timeline.roles.push_back(role.name);
  std::vector<SlotTimes> times;
  for (const Node& node : graph.nodes) times.push_back(slot_times(node, q));

  // 1. The rings: one per copy node, with the depth the solver chose.
  std::vector<int> ring_of(graph.nodes.size(), -1);
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    const Node& node = graph.nodes[v];
    if (!node.is_copy()) continue;
    auto depth = solution.ring_depth.find(node.name);
    if (depth == solution.ring_depth.end() || depth->second <= 0) continue;
    Ring ring;
    ring.copy_op = static_cast<int>(v);
    ring.name = node.name;
    for (const Edge& edge : graph.edges) {
      if (edge.through_shared && edge.from == static_cast<int>(v)) {
        ring.name = edge.what;
        break;
      }
    }
    ring.depth = depth->second;
    ring_of[v] = static_cast<int>(timeline.rings.size());
    timeline.rings.push_back(std::move(ring));
  }

  // 2. The bars: iteration i's op v at t_v + i * II.
  const size_t nodes = graph.nodes.size();
  auto bar_index = [&](int iteration, size_t v) { return static_cast<int>(static_cast<size_t>(iteration) * nodes + v); };
  for (int i = 0; i < iterations; ++i) {
    for (size_t v = 0; v < nodes; ++v) {
      const OpSlot& slot = solution.ops[v];
      ScheduledBar bar;
      bar.op = static_cast<int>(v);
      bar.iteration = i;
      bar.role = slot.role_index;
      bar.start = (slot.start_slot + static_cast<int64_t>(i) * solution.ii_slots) * q;
      bar.busy_end = bar.start + longest_busy(times[v]) * q;
      bar.ready = bar.start + times[v].latency * q;
      bar.stage = static_cast<int>(slot.start_slot / solution.ii_slots);
      if (ring_of[v] >= 0) bar.buffer = i % timeline.rings[static_cast<size_t>(ring_of[v])].depth;
      timeline.total_cycles = std::max(timeline.total_cycles, bar.ready);
      timeline.bars.push_back(bar);
    }
  }

  // 3. Hand-offs: dependences between roles whose both ends are drawn.
  for (const Edge& edge : graph.edges) {
    const OpSlot& from = solution.ops[static_cast<size_t>(edge.from)];
    const OpSlot& to = solution.ops[static_cast<size_t>(edge.to)];
    if (from.role_index == to.role_index) continue;
    for (int i = 0; i + edge.distance < iterations; ++i) {
      Handoff handoff;
      handoff.from_bar = bar_index(i, static_cast<size_t>(edge.from));
      handoff.to_bar = bar_index(i + edge.distance, static_cast<size_t>(edge.to));
      const ScheduledBar& source = timeline.bars[static_cast<size_t>(handoff.from_bar)];
      handoff.from_cycle = source.start + static_cast<int64_t>(std::ceil(edge.latency / q - 1e-9)) * q;
      handoff.from_cycle = std::min(handoff.from_cycle, source.ready);
      handoff.to_cycle = timeline.bars[static_cast<size_t>(handoff.to_bar)].start;
      handoff.what = edge.what;
      timeline.handoffs.push_back(std::move(handoff));
    }
  }

  // 4. Ring buffers in use: from the copy's start to the end of its last read (as the solver's
  //    ring constraint counts it: depth * II must cover this span).
  for (int i = 0; i < iterations; ++i) {
    for (size_t r = 0; r < timeline.rings.size(); ++r) {
      const Ring& ring = timeline.rings[r];
      const ScheduledBar& copy = timeline.bars[static_cast<size_t>(bar_index(i, static_cast<size_t>(ring.copy_op)))];
      RingHold hold;
      hold.ring = static_cast<int>(r);
      hold.iteration = i;
      hold.buffer = copy.buffer;
      hold.fill_start = copy.start;
      hold.filled = copy.ready;
      hold.released = copy.ready;
      hold.copy_bar = bar_index(i, static_cast<size_t>(ring.copy_op));
      for (const Edge& edge : graph.edges) {
        if (!edge.through_shared || edge.from != ring.copy_op) continue;
        const OpSlot& reader = solution.ops[static_cast<size_t>(edge.to)];
        const int64_t end = (reader.start_slot + times[static_cast<size_t>(edge.to)].latency +
                             (static_cast<int64_t>(i) + edge.distance) * solution.ii_slots) * q;
        hold.released = std::max(hold.released, end);
      }
      timeline.total_cycles = std::max(timeline.total_cycles, hold.released);
      timeline.holds.push_back(hold);
    }
  }
  return timeline;
}

}  // namespace nautilus::pipeline
