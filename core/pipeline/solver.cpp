// The pipeline solver: normalization, bounds, the Z3 model at a fixed interval, the search over
// interval / consumer count / length / cross-role edges, unsat-core explanations, the
// independent checker and a sequential fallback (solver.h describes the model).
#include "core/pipeline/solver.h"

#include <pthread.h>
#include <time.h>
#include <z3++.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <numeric>
#include <set>
#include <sstream>

namespace nautilus::pipeline {

const char* status_name(SolveStatus status) {
  switch (status) {
    case SolveStatus::Optimal: return "optimal";
    case SolveStatus::BestFound: return "best found";
    case SolveStatus::Infeasible: return "infeasible";
    case SolveStatus::NoSolution: return "no solution";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds_of(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Z3's resource units (its `rlimit` count: work steps of the solver, the same on every run and
// machine for the same problem and Z3 version) spent by the checks of this thread's solves.
thread_local uint64_t z3_units_spent = 0;

// The time the solver spends (SolveOptions::time_limit_seconds), in solver seconds: Z3 resource
// units spent by this thread since construction over kZ3UnitsPerSecond. A budget in CPU or wall
// seconds gives each check as much work as the machine manages in it, so the best schedule found
// before the limit, and with it the search's pick, changed from run to run (three runs of one
// attention row gave three ring depths). Counted in units, the same problem gets the same answer.
// Real time still caps the wait: cpu_cap_seconds(limit) of this thread's CPU time (the
// watchdog in check()) and wall_cap_seconds(limit) of wall time.
class SolveClock {
 public:
  explicit SolveClock(double limit_seconds)
      : limit_(limit_seconds), wall_start_(Clock::now()), units_start_(z3_units_spent) {
    pthread_getcpuclockid(pthread_self(), &clock_);
    cpu_start_ = cpu_seconds_of(clock_);
  }
  // Solver seconds spent (deterministic).
  double spent() const { return static_cast<double>(z3_units_spent - units_start_) / kZ3UnitsPerSecond; }
  double cpu() const { return cpu_seconds_of(clock_) - cpu_start_; }
  double wall() const { return std::chrono::duration<double>(Clock::now() - wall_start_).count(); }
  // What is left of `seconds` counted from `since` (an earlier spent()), in solver seconds; 0
  // once real time is past its caps.
  double left(double seconds, double since = 0) const {
    if (cpu() >= cpu_cap_seconds(limit_) || wall() >= wall_cap_seconds(limit_)) return 0;
    return seconds - (spent() - since);
  }
  clockid_t clock() const { return clock_; }

 private:
  double limit_;
  Clock::time_point wall_start_;
  uint64_t units_start_ = 0;
  clockid_t clock_{};
  double cpu_start_ = 0;
};

// Z3's `rlimit count` of `solver` (cumulative over its checks).
uint64_t z3_units_of(const z3::solver& solver) {
  const z3::stats stats = solver.statistics();
  for (unsigned i = 0; i < stats.size(); ++i) {
    if (stats.key(i) == "rlimit count") {
      return stats.is_uint(i) ? stats.uint_value(i) : static_cast<uint64_t>(stats.double_value(i));
    }
  }
  return 0;
}

// Interrupts `context` once the thread of `clock` has spent `seconds` of CPU time: Z3's own
// timeout counts wall time.
class CpuWatchdog {
 public:
  CpuWatchdog(z3::context& context, clockid_t clock, double seconds)
      : thread_([this, &context, clock, deadline = cpu_seconds_of(clock) + seconds](std::stop_token stop) {
          std::unique_lock lock(mutex_);
          while (!stop.stop_requested() && armed_) {
            if (cpu_seconds_of(clock) >= deadline) {
              fired_ = true;
              context.interrupt();
              return;
            }
            wake_.wait_for(lock, stop, std::chrono::milliseconds(2), [] { return false; });
          }
        }) {}
  ~CpuWatchdog() {
    thread_.request_stop();
    thread_.join();
  }

  // Called when the check has returned: no interrupt comes after it. An interrupt that came
  // between the check's return and this call leaves the context cancelled, so the caller treats
  // the check as unknown when this returns true (the budget was spent anyway).
  bool disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
    return fired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any wake_;
  bool armed_ = true;
  bool fired_ = false;
  std::jthread thread_;
};

std::string cycles_text(double cycles) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(0) << cycles;
  return out.str();
}

int64_t ceil_slots(double cycles, int q) {
  if (cycles <= 0) return 0;
  return static_cast<int64_t>(std::ceil(cycles / q - 1e-9));
}

// The graph in slots of q cycles.
struct Normalized {
  int q = 1;
  std::vector<int64_t> latency;  // per node, >= 1
  std::vector<std::array<int64_t, kUnitCount>> busy;
  std::vector<int64_t> edge_latency;
  int64_t handoff = 0;  // sm_90a: the mbarrier hand-off between roles
  std::vector<int> registers;
};

Normalized normalize(const Graph& graph, const Machine& machine, int q) {
  Normalized n;
  n.q = q;
  for (const Node& node : graph.nodes) {
    const SlotTimes times = slot_times(node, q);
    n.latency.push_back(times.latency);
    n.busy.push_back(times.busy);
    n.registers.push_back(graph.registers(node));
  }
  for (const Edge& edge : graph.edges) n.edge_latency.push_back(ceil_slots(edge.latency, q));
  n.handoff = machine.warp_specialized() ? ceil_slots(machine.mbarrier_handoff, q) : 0;
  return n;
}

// Longest-path relaxation: true when the graph with weights latency - ii * distance has a
// positive cycle (ii too small for a recurrence).
bool positive_cycle(const Graph& graph, const std::vector<double>& latency, double ii) {
  const size_t n = graph.nodes.size();
  std::vector<double> dist(n, 0.0);
  for (size_t round = 0; round <= n; ++round) {
    bool changed = false;
    for (size_t e = 0; e < graph.edges.size(); ++e) {
      const Edge& edge = graph.edges[e];
      const double w = latency[e] - ii * edge.distance;
      if (dist[static_cast<size_t>(edge.from)] + w > dist[static_cast<size_t>(edge.to)] + 1e-9) {
        dist[static_cast<size_t>(edge.to)] = dist[static_cast<size_t>(edge.from)] + w;
        changed = true;
      }
    }
    if (!changed) return false;
  }
  return true;
}

// Topological order over distance-0 edges, or empty when they form a cycle.
std::vector<int> topological_order(const Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<int> indegree(n, 0), order;
  for (const Edge& edge : graph.edges) {
    if (edge.distance == 0) ++indegree[static_cast<size_t>(edge.to)];
  }
  std::vector<int> ready;
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push_back(static_cast<int>(i));
  }
  while (!ready.empty()) {
    std::sort(ready.begin(), ready.end(), std::greater<int>());
    const int v = ready.back();
    ready.pop_back();
    order.push_back(v);
    for (const Edge& edge : graph.edges) {
      if (edge.distance == 0 && edge.from == v && --indegree[static_cast<size_t>(edge.to)] == 0) {
        ready.push_back(edge.to);
      }
    }
  }
  if (order.size() != n) return {};
  return order;
}

std::string role_name(const Machine& machine, int index) {
  if (!machine.warp_specialized()) return "main";
  return index == 0 ? "producer" : "consumer" + std::to_string(index - 1);
}

// Role budgets and where they come from.
struct Budget {
  int limit = 0;
  std::string source;
};
Budget role_budget(const Graph& graph, const Machine& machine, const SolveOptions& options,
                   int role, int consumers) {
  Budget budget;
  if (!machine.warp_specialized()) {
    const int file = static_cast<int>(65536 / std::max(1, graph.threads));
    budget.limit = std::min(machine.max_registers, file);
    budget.source = budget.limit == machine.max_registers
                        ? "the " + std::to_string(machine.max_registers) + " registers a thread may use"
                        : "65536 registers over " + std::to_string(graph.threads) + " threads";
  } else if (role == 0) {
    budget.limit = machine.producer_registers_for(consumers);
    budget.source = "setmaxnreg " + std::to_string(budget.limit) + " of the producer warpgroup";
    return budget;
  } else {
    budget.limit = machine.consumer_registers(consumers);
    budget.source = "setmaxnreg budget of " + std::to_string(consumers) + " consumer warpgroup" +
                    (consumers == 1 ? "" : "s") + " beside a " +
                    std::to_string(machine.producer_registers_for(consumers)) + "-register producer";
  }
  if (options.max_registers && *options.max_registers < budget.limit) {
    budget.limit = *options.max_registers;
    budget.source = "--max-regs " + std::to_string(*options.max_registers);
  }
  return budget;
}

struct Pins {
  std::vector<int> role;   // per node: pinned role index or -1
  std::vector<int> stage;  // per node: pinned stage or -1
  std::string error;
};

Pins resolve_pins(const Graph& graph, const Machine& machine, const SolveOptions& options) {
  Pins pins;
  pins.role.assign(graph.nodes.size(), -1);
  pins.stage.assign(graph.nodes.size(), -1);
  for (const auto& [op, role] : options.role_pins) {
    const int v = graph.find(op);
    if (v < 0) {
      pins.error = "--pin-role: no op named '" + op + "' in the graph";
      return pins;
    }
    int index = -1;
    if (!machine.warp_specialized()) {
      if (role == "main") index = 0;
    } else if (role == "producer") {
      index = 0;
    } else if (role.rfind("consumer", 0) == 0 && role.size() > 8 &&
               std::all_of(role.begin() + 8, role.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               role.size() < 11) {
      index = std::stoi(role.substr(8)) + 1;
      if (index > machine.max_consumer_roles) index = -1;
    }
    if (index < 0) {
      pins.error = "--pin-role " + op + "=" + role + ": unknown role; " +
                   (machine.warp_specialized()
                        ? "sm_90a roles are producer, consumer0 .. consumer" +
                              std::to_string(machine.max_consumer_roles - 1)
                        : std::string("sm_80 has one role, main"));
      return pins;
    }
    pins.role[static_cast<size_t>(v)] = index;
  }
  for (const auto& [op, stage] : options.stage_pins) {
    const int v = graph.find(op);
    if (v < 0) {
      pins.error = "--pin-stage: no op named '" + op + "' in the graph";
      return pins;
    }
    pins.stage[static_cast<size_t>(v)] = stage;
  }
  return pins;
}

// MaxLive of each role for a schedule (slots): the most registers per thread a role holds at
// any row of the modulo reservation table, its base included (the model's register rule).
std::vector<std::vector<int64_t>> live_rows(const Graph& graph, const Normalized& n,
                                            const std::vector<int64_t>& start,
                                            const std::vector<int>& role, int64_t ii, int roles,
                                            int base) {
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(roles), std::vector<int64_t>(static_cast<size_t>(ii), base));
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    if (n.registers[v] == 0) continue;
    int64_t life = 1;
    bool reader = false;
    for (const Edge& edge : graph.edges) {
      if (edge.through_shared || edge.from != static_cast<int>(v)) continue;
      life = std::max(life, start[static_cast<size_t>(edge.to)] + ii * edge.distance - start[v]);
      reader = true;
    }
    if (!reader) life = std::max(life, n.latency[v]);
    // Each cycle of the value's life lands on row (start + c) mod II.
    auto& row = rows[static_cast<size_t>(role[v])];
    for (int64_t r = 0; r < ii; ++r) {
      const int64_t offset = ((r - start[v]) % ii + ii) % ii;
      const int64_t live = life / ii + (offset < life % ii ? 1 : 0);
      row[static_cast<size_t>(r)] += live * n.registers[v];
    }
  }
  return rows;
}

std::vector<int64_t> max_live(const Graph& graph, const Normalized& n, const std::vector<int64_t>& start,
                              const std::vector<int>& role, int64_t ii, int roles, int base) {
  std::vector<int64_t> worst(static_cast<size_t>(roles), base);
  const auto rows = live_rows(graph, n, start, role, ii, roles, base);
  for (int k = 0; k < roles; ++k) {
    for (int64_t value : rows[static_cast<size_t>(k)]) worst[static_cast<size_t>(k)] = std::max(worst[static_cast<size_t>(k)], value);
  }
  return worst;
}

// A register cut learnt by a model (see Model::add_broken_rows): at the start of op `probe`,
// role `role` holds the instances (value, iteration offset) listed. Valid at any interval, so
// the next interval's model starts with every cut the previous ones learnt.
struct RegisterCut {
  int role = 0;
  int probe = 0;
  std::vector<std::pair<int, int64_t>> instances;
};

// Stages a schedule may have beyond those its longest dependence path needs (the model's
// horizon: start + latency <= (ceil(path / II) + kExtraStages) * II).
constexpr int64_t kExtraStages = 3;

// The Z3 model at one interval and consumer count (solver.h lists the constraints).
class Model {
 public:
  Model(const Graph& graph, const Machine& machine, const SolveOptions& options,
        const Normalized& n, const Pins& pins, int64_t ii, int consumers,
        int64_t path_length, std::vector<RegisterCut>* cuts = nullptr)
      : graph_(graph), machine_(machine), n_(n), ii_(ii), consumers_(consumers), solver_(ctx_, "QF_LIA"),
        cuts_(cuts), stop_(options.stop) {
    const size_t count = graph.nodes.size();
    const bool ws = machine.warp_specialized();
    // The horizon: at most kExtraStages stages more than the longest path needs.
    horizon_ = ((path_length + ii - 1) / ii + kExtraStages) * ii;

    for (size_t v = 0; v < count; ++v) {
      const std::string id = std::to_string(v);
      t_.push_back(ctx_.int_const(("t" + id).c_str()));
      k_.push_back(ctx_.int_const(("k" + id).c_str()));
      r_.push_back(ctx_.int_const(("r" + id).c_str()));
      nb_.push_back(ctx_.int_const(("nb" + id).c_str()));
      m_.push_back(t_[v] - k_[v] * static_cast<int>(ii));
      solver_.add(t_[v] >= 0 && t_[v] + static_cast<int>(n.latency[v]) <= static_cast<int>(horizon_));
      solver_.add(k_[v] >= 0 && m_.back() >= 0 && m_.back() < static_cast<int>(ii));
      solver_.add(nb_[v] >= 1 && nb_[v] <= 16);
      if (ws) {
        solver_.add(r_[v] >= 0 && r_[v] <= consumers);
      } else {
        solver_.add(r_[v] == 0);
      }
    }

    // Dependences, each tracked on its own so a core names the edge.
    for (size_t e = 0; e < graph.edges.size(); ++e) {
      const Edge& edge = graph.edges[e];
      const auto from = static_cast<size_t>(edge.from), to = static_cast<size_t>(edge.to);
      z3::expr need = ctx_.int_val(static_cast<int>(n.edge_latency[e] - ii * edge.distance));
      if (ws) need = need + z3::ite(r_[from] != r_[to], ctx_.int_val(static_cast<int>(n.handoff)), ctx_.int_val(0));
      std::ostringstream why;
      why << graph.nodes[to].name << " reads " << edge.what << " from " << graph.nodes[from].name
          << (edge.distance ? " of the previous iteration" : "") << ": it starts at least "
          << cycles_text(edge.latency) << " cycles after it";
      if (ws) why << " (+" << cycles_text(machine.mbarrier_handoff) << " when they run on different roles)";
      track(t_[to] - t_[from] >= need, why.str());
    }

    // Units: busy intervals never overlap modulo II.
    for (int u = 0; u < kUnitCount; ++u) {
      std::vector<size_t> users;
      for (size_t v = 0; v < count; ++v) {
        if (n.busy[v][static_cast<size_t>(u)] > 0) users.push_back(v);
      }
      if (users.size() < 2) continue;
      z3::expr all = ctx_.bool_val(true);
      std::ostringstream why;
      why << "the " << unit_name(static_cast<Unit>(u)) << " runs one op at a time; per iteration ";
      double total = 0;
      for (size_t i = 0; i < users.size(); ++i) {
        const double cycles = graph.nodes[users[i]].occupancy[static_cast<size_t>(u)];
        total += cycles;
        why << (i ? ", " : "") << graph.nodes[users[i]].name << " " << cycles_text(cycles);
        for (size_t j = i + 1; j < users.size(); ++j) {
          const int bu = static_cast<int>(n.busy[users[i]][static_cast<size_t>(u)]);
          const int bv = static_cast<int>(n.busy[users[j]][static_cast<size_t>(u)]);
          const int I = static_cast<int>(ii);
          const z3::expr d = m_[users[j]] - m_[users[i]];
          all = all && ((d >= bu && d <= I - bv) || (d <= -bv && d >= bu - I));
        }
      }
      why << " (" << cycles_text(total) << " cycles busy)";
      track(all, why.str());
    }

    // Rings: depth * II covers a buffer's life, from its copy to the end of its last read.
    z3::expr smem = ctx_.int_val(static_cast<int>(std::min<int64_t>(graph.fixed_shared_bytes, 1 << 30)));
    std::ostringstream rings;
    bool any_ring = false;
    for (size_t e = 0; e < graph.edges.size(); ++e) {
      const Edge& edge = graph.edges[e];
      if (!edge.through_shared) continue;
      const auto c = static_cast<size_t>(edge.from), r = static_cast<size_t>(edge.to);
      solver_.add(nb_[c] * static_cast<int>(ii) >=
                  t_[r] + static_cast<int>(n.latency[r] + ii * edge.distance) - t_[c]);
    }
    std::vector<size_t> copies, together_rings;
    int64_t together_bytes = 0, own_bytes = 0;
    for (size_t v = 0; v < count; ++v) {
      if (!graph.nodes[v].is_copy()) {
        solver_.add(nb_[v] == 1);
        continue;
      }
      copies.push_back(v);
      smem = smem + nb_[v] * static_cast<int>(graph.nodes[v].buffer_bytes);
      if (graph.released_in_iteration(v)) {
        own_bytes += graph.nodes[v].buffer_bytes;
      } else {
        together_rings.push_back(v);
        together_bytes += graph.nodes[v].buffer_bytes;
      }
      rings << (any_ring ? ", " : "") << graph.nodes[v].name << " " << graph.nodes[v].buffer_bytes << " B";
      any_ring = true;
    }
    if (any_ring) {
      z3::expr bounded = ctx_.bool_val(true);
      for (size_t c : copies) bounded = bounded && nb_[c] <= machine.max_ring_depth;
      track(bounded, "a ring holds at most " + std::to_string(machine.max_ring_depth) +
                         " buffers (the pipeline decision's stages)");
      std::ostringstream why;
      why << "shared memory holds " << machine.shared_capacity << " bytes per CTA; each ring takes its depth times a stage ("
          << rings.str() << (options.bound_rings_released_together && together_rings.size() > 1 ? "; rings released together take the deepest one's depth" : "") << ")";
      if (graph.fixed_shared_bytes) why << ", plus " << graph.fixed_shared_bytes << " B outside the rings";
      // The rings released together take the deepest one's depth once realized
      // (Graph::realized_shared_bytes). When an answer's rings do not fit so (solve), each of
      // them is bounded by the depth at which all of them fit beside the others' single buffers:
      // a bound on each depth rather than a sum over their maximum, which Z3 proves faster.
      z3::expr fits = smem <= static_cast<int>(machine.shared_capacity);
      if (options.bound_rings_released_together && together_rings.size() > 1) {
        const int64_t deepest =
            std::max<int64_t>(0, (machine.shared_capacity - graph.fixed_shared_bytes - own_bytes) / together_bytes);
        for (size_t v : together_rings) fits = fits && nb_[v] <= static_cast<int>(deepest);
        // Beside rings released in their own iteration, whose depths the bound takes as one
        // buffer each, the exact sum for each depth in turn.
        if (own_bytes > 0) {
          z3::expr own = ctx_.int_val(static_cast<int>(std::min<int64_t>(graph.fixed_shared_bytes, 1 << 30)));
          for (size_t c : copies) {
            if (graph.released_in_iteration(c)) own = own + nb_[c] * static_cast<int>(graph.nodes[c].buffer_bytes);
          }
          for (size_t v : together_rings) {
            fits = fits && own + nb_[v] * static_cast<int>(together_bytes) <= static_cast<int>(machine.shared_capacity);
          }
        }
      }
      track(fits, why.str());
    }
    if (options.stages && !copies.empty()) {
      z3::expr all = ctx_.bool_val(true);
      for (size_t c : copies) all = all && nb_[c] == *options.stages;
      track(all, "--stages " + std::to_string(*options.stages) + ": every copied operand has exactly " +
                     std::to_string(*options.stages) + " buffer" + (*options.stages == 1 ? "" : "s") +
                     " (its next copy waits until the reads of the one " +
                     std::to_string(*options.stages) + " iteration" + (*options.stages == 1 ? "" : "s") +
                     " back are done)");
    }

    // Registers: at every row of the modulo reservation table, a role holds its base plus the
    // registers of every instance of its values live there (MaxLive). A value lives from its
    // op's start to its last reader's start (at least one slot; to its own end when only the
    // loop's result reads it).
    // The rows are added lazily: check() verifies every sat model's MaxLive exactly and, where a
    // role is over its budget, adds the budget at that point in time (the start of an op) over
    // the value instances live there; each added constraint is implied by the exact rule, so
    // unsat stays a proof and sat is always checked. Up front only its simplest consequence:
    // each value fits beside the base.
    roles_ = ws ? consumers + 1 : 1;
    base_ = machine.base_registers_for(ws ? consumers : 0);
    for (int role = 0; role < roles_; ++role) {
      const Budget budget = role_budget(graph, machine, options, role, consumers);
      limits_.push_back(budget.limit);
      z3::expr all = ctx_.int_val(base_) <= budget.limit;
      std::ostringstream values;
      bool any = false;
      for (size_t v = 0; v < count; ++v) {
        if (n.registers[v] == 0) continue;
        values << (any ? ", " : "") << graph.nodes[v].name << " " << n.registers[v];
        any = true;
        const z3::expr on = ws ? (r_[v] == role) : ctx_.bool_val(true);
        all = all && z3::implies(on, ctx_.int_val(base_ + n.registers[v]) <= budget.limit);
      }
      std::ostringstream why;
      why << "role " << role_name(machine, role) << " has " << budget.limit
          << " registers per thread (" << budget.source << "); at every point of the iteration it holds "
          << base_ << " for addresses and loop state";
      if (any) why << " plus the registers of the values live there (per thread: " << values.str() << ")";
      register_track_.push_back(tracked_.size());
      track(all, why.str());
    }

    if (cuts_) {
      for (const RegisterCut& cut : *cuts_) {
        if (cut.role < roles_) add_cut(cut);
      }
    }

    if (ws) {
      z3::expr rule = ctx_.bool_val(true);
      for (size_t v = 0; v < count; ++v) {
        rule = rule && (graph.nodes[v].is_copy() ? r_[v] == 0 : r_[v] >= 1);
      }
      track(rule, "sm_90a: TMA copies run on the producer warpgroup, every other op on a consumer warpgroup");
      // A 64-row sub-tile's ops share one consumer: its accumulator and row state live in that
      // warpgroup's registers, and moving them between warpgroups every iteration would ferry
      // whole tiles through shared memory (5x slower in a reproduction of Twill).
      z3::expr together = ctx_.bool_val(true);
      bool any_subtile = false;
      for (size_t u = 0; u < count; ++u) {
        for (size_t v = u + 1; v < count; ++v) {
          if (graph.nodes[u].subtile >= 0 && graph.nodes[u].subtile == graph.nodes[v].subtile &&
              !graph.nodes[u].is_copy() && !graph.nodes[v].is_copy()) {
            together = together && r_[u] == r_[v];
            any_subtile = true;
          }
        }
      }
      if (any_subtile) {
        track(together, "sm_90a: the ops of one 64-row sub-tile run on one consumer warpgroup (its "
                        "accumulator and row state stay in that warpgroup's registers)");
      }
      // Every consumer role does something (C counts the warpgroups the CTA gets).
      for (int role = 1; role <= consumers; ++role) {
        z3::expr used = ctx_.bool_val(false);
        for (size_t v = 0; v < count; ++v) used = used || r_[v] == role;
        solver_.add(used);
      }
      // Symmetry: consumer roles are numbered in order of first use (only without role pins,
      // which name a specific consumer).
      if (std::all_of(pins.role.begin(), pins.role.end(), [](int r) { return r < 0; })) {
        z3::expr seen = ctx_.int_val(0);
        for (size_t v = 0; v < count; ++v) {
          if (graph.nodes[v].is_copy()) continue;
          solver_.add(r_[v] <= seen + 1);
          seen = z3::ite(r_[v] > seen, r_[v], seen);
        }
      }
    }
    for (size_t v = 0; v < count; ++v) {
      if (pins.role[v] >= 0) {
        track(r_[v] == pins.role[v], "pinned: " + graph.nodes[v].name + " runs on role " +
                                         role_name(machine, pins.role[v]));
      }
      if (pins.stage[v] >= 0) {
        track(k_[v] == pins.stage[v], "pinned: " + graph.nodes[v].name + " is issued in stage " +
                                          std::to_string(pins.stage[v]));
      }
    }
  }

  // One check under every tracked group plus the optional length and cross-role bounds.
  z3::check_result check(std::optional<int64_t> length, std::optional<int> cross, double seconds,
                         const std::vector<size_t>* only = nullptr) {
    z3::expr_vector assumptions(ctx_);
    if (only) {
      for (size_t i : *only) assumptions.push_back(tracked_[i].first);
    } else {
      for (const auto& [literal, why] : tracked_) assumptions.push_back(literal);
    }
    if (length) {
      const z3::expr literal = ctx_.bool_const(("len" + std::to_string(fresh_++)).c_str());
      z3::expr all = ctx_.bool_val(true);
      for (size_t v = 0; v < t_.size(); ++v) all = all && t_[v] + static_cast<int>(n_.latency[v]) <= static_cast<int>(*length);
      solver_.add(z3::implies(literal, all));
      assumptions.push_back(literal);
    }
    if (cross && machine_.warp_specialized()) {
      const z3::expr literal = ctx_.bool_const(("cross" + std::to_string(fresh_++)).c_str());
      z3::expr sum = ctx_.int_val(0);
      for (const Edge& edge : graph_.edges) {
        sum = sum + z3::ite(r_[static_cast<size_t>(edge.from)] != r_[static_cast<size_t>(edge.to)],
                            ctx_.int_val(1), ctx_.int_val(0));
      }
      solver_.add(z3::implies(literal, sum <= *cross));
      assumptions.push_back(literal);
    }
    // `seconds` of solver time (SolveClock says why): Z3 stops the check itself when its
    // resource units run out; real time caps it at cpu_cap_seconds() of this thread's CPU
    // time and wall_cap_seconds() of wall time.
    const SolveClock clock(seconds);
    for (;;) {
      const double left = clock.left(seconds);
      if (left <= 0) return z3::unknown;
      z3::params params(ctx_);
      params.set("timeout", static_cast<unsigned>(std::clamp(wall_cap_seconds(left), 0.001, 3600.0) * 1000.0));
      params.set("rlimit", static_cast<unsigned>(std::clamp(left * kZ3UnitsPerSecond, 1.0, 4.0e9)));
      solver_.set(params);
      if (stop_.stop_requested()) return z3::unknown;
      ++checks_;
      z3::check_result result = z3::unknown;
      try {
        // A stop request from another thread interrupts the check (Z3 then answers unknown),
        // and so does the watchdog when the check has spent its CPU time.
        const std::stop_callback interrupt(stop_, [this] { ctx_.interrupt(); });
        CpuWatchdog watchdog(ctx_, clock.clock(), cpu_cap_seconds(left));
        const uint64_t units_before = z3_units_of(solver_);
        result = solver_.check(assumptions);
        z3_units_spent += z3_units_of(solver_) - units_before;
        if (watchdog.disarm()) result = z3::unknown;
      } catch (const z3::exception&) {
        return z3::unknown;
      }
      // A stop request that came while the callback was registered interrupted the context,
      // possibly after the check had returned: the context then refuses to evaluate the model
      // until the next check (Z3 throws "canceled"), so the answer counts as unknown.
      if (stop_.stop_requested()) return z3::unknown;
      if (std::getenv("NAUTILUS_PIPELINE_TRACE")) {
        std::fprintf(stderr, "[pipeline] II %lld consumers %d: %s in %.3f s (%.3f s of CPU, %.3f solver s)\n",
                     static_cast<long long>(ii_), consumers_,
                     result == z3::sat ? "sat" : result == z3::unsat ? "unsat" : "unknown", clock.wall(),
                     clock.cpu(), clock.spent());
      }
      if (result != z3::sat || !add_broken_rows(only)) return result;
    }
  }

  // After a sat check: adds the register row constraints the model breaks (for the roles whose
  // register group is assumed); true when it added any (check again).
  bool add_broken_rows(const std::vector<size_t>* only) {
    const z3::model model = solver_.get_model();
    std::vector<int64_t> starts;
    std::vector<int> roles;
    for (size_t v = 0; v < t_.size(); ++v) {
      starts.push_back(model.eval(t_[v], true).get_numeral_int64());
      roles.push_back(static_cast<int>(model.eval(r_[v], true).get_numeral_int64()));
    }
    const auto rows = live_rows(graph_, n_, starts, roles, ii_, roles_, base_);
    bool added = false;
    for (int role = 0; role < roles_; ++role) {
      const size_t group = register_track_[static_cast<size_t>(role)];
      if (only && std::find(only->begin(), only->end(), group) == only->end()) continue;
      const auto& load = rows[static_cast<size_t>(role)];
      // Probes: ops of this role starting on an over-budget row (loads grow only at starts),
      // the worst rows first, a few per round.
      std::vector<int> probes;
      for (size_t u = 0; u < t_.size(); ++u) {
        if (roles[u] != role || n_.registers[u] == 0) continue;
        if (load[static_cast<size_t>(starts[u] % ii_)] > limits_[static_cast<size_t>(role)]) probes.push_back(static_cast<int>(u));
      }
      std::sort(probes.begin(), probes.end(), [&](int a, int b) {
        return load[static_cast<size_t>(starts[static_cast<size_t>(a)] % ii_)] > load[static_cast<size_t>(starts[static_cast<size_t>(b)] % ii_)];
      });
      if (probes.size() > 8) probes.resize(8);
      for (int probe : probes) {
      const int64_t at_value = starts[static_cast<size_t>(probe)];
      RegisterCut cut;
      cut.role = role;
      cut.probe = probe;
      for (size_t v = 0; v < t_.size(); ++v) {
        if (n_.registers[v] == 0) continue;
        // This model's life of v, to pick the instances (iterations j) live at the probe.
        int64_t life = 1;
        bool reader = false;
        for (const Edge& edge : graph_.edges) {
          if (edge.through_shared || edge.from != static_cast<int>(v)) continue;
          life = std::max(life, starts[static_cast<size_t>(edge.to)] + ii_ * edge.distance - starts[v]);
          reader = true;
        }
        if (!reader) life = std::max(life, n_.latency[v]);
        for (int64_t j = -64; j <= 64; ++j) {
          const int64_t begin = starts[v] + j * ii_;
          if (begin - ii_ <= at_value && at_value < begin + life + ii_) cut.instances.emplace_back(static_cast<int>(v), j);
        }
      }
      add_cut(cut);
      if (cuts_) cuts_->push_back(cut);
      added = true;
      }
    }
    return added;
  }

  // The cut's constraint: instance j of value v is live at the probe's start when it started
  // and one of its readers (of that iteration) has not yet; the role's registers there fit.
  void add_cut(const RegisterCut& cut) {
    const z3::expr& at = t_[static_cast<size_t>(cut.probe)];
    z3::expr sum = ctx_.int_val(base_);
    for (const auto& [node, j] : cut.instances) {
      const auto v = static_cast<size_t>(node);
      const int offset = static_cast<int>(j * ii_);
      bool reader = false;
      z3::expr until = at < t_[v] + (offset + 1);
      for (const Edge& edge : graph_.edges) {
        if (edge.through_shared || edge.from != node) continue;
        until = until || at < t_[static_cast<size_t>(edge.to)] + static_cast<int>((edge.distance + j) * ii_);
        reader = true;
      }
      if (!reader) until = at < t_[v] + (offset + static_cast<int>(n_.latency[v]));
      z3::expr cond = t_[v] + offset <= at && until;
      if (machine_.warp_specialized()) cond = cond && r_[v] == cut.role;
      sum = sum + z3::ite(cond, ctx_.int_val(n_.registers[v]), ctx_.int_val(0));
    }
    const size_t group = register_track_[static_cast<size_t>(cut.role)];
    solver_.add(z3::implies(tracked_[group].first, sum <= limits_[static_cast<size_t>(cut.role)]));
  }

  // The tracked groups in the last unsat core, shrunk by deletion while time allows.
  std::vector<std::string> explain(double seconds) {
    const SolveClock clock(seconds);
    if (check(std::nullopt, std::nullopt, seconds) != z3::unsat) return {};
    std::vector<size_t> core;
    const z3::expr_vector unsat_core = solver_.unsat_core();
    for (unsigned i = 0; i < unsat_core.size(); ++i) {
      for (size_t j = 0; j < tracked_.size(); ++j) {
        if (z3::eq(unsat_core[i], tracked_[j].first)) core.push_back(j);
      }
    }
    for (size_t i = 0; i < core.size();) {
      const double left = clock.left(seconds);
      if (left <= 0.01) break;
      std::vector<size_t> without;
      for (size_t j = 0; j < core.size(); ++j) {
        if (j != i) without.push_back(core[j]);
      }
      if (check(std::nullopt, std::nullopt, std::min(left, 2.0), &without) == z3::unsat) {
        core.swap(without);
      } else {
        ++i;
      }
    }
    std::vector<std::string> reasons;
    for (size_t j : core) reasons.push_back(tracked_[j].second);
    return reasons;
  }

  int64_t value(const z3::expr& e) {
    return solver_.get_model().eval(e, true).get_numeral_int64();
  }

  // The schedule of the last sat check.
  void read(Solution* s, const SolveOptions& options) {
    const z3::model model = solver_.get_model();
    const auto get = [&](const z3::expr& e) { return model.eval(e, true).get_numeral_int64(); };
    const bool ws = machine_.warp_specialized();
    s->ops.clear();
    s->roles.clear();
    s->ring_depth.clear();
    s->ii_slots = ii_;
    s->ii = ii_ * n_.q;
    s->stages = 0;
    int64_t length = 0;
    const int roles = ws ? consumers_ + 1 : 1;
    for (int role = 0; role < roles; ++role) {
      const Budget budget = role_budget(graph_, machine_, options, role, consumers_);
      s->roles.push_back({role_name(machine_, role), budget.limit, budget.source, base_, {}});
    }
    s->shared_bytes = graph_.fixed_shared_bytes;
    for (size_t v = 0; v < t_.size(); ++v) {
      OpSlot op;
      op.name = graph_.nodes[v].name;
      op.start_slot = get(t_[v]);
      op.start = op.start_slot * n_.q;
      op.stage = static_cast<int>(op.start_slot / ii_);
      op.role_index = static_cast<int>(get(r_[v]));
      op.role = role_name(machine_, op.role_index);
      length = std::max(length, op.start_slot + n_.latency[v]);
      s->ops.push_back(op);
    }
    // Ring depths and register copies: the fewest the schedule needs (the model only bounds
    // them from below, so the model's own values may be larger).
    for (size_t v = 0; v < t_.size(); ++v) {
      const OpSlot& op = s->ops[v];
      int64_t buffers = 1;
      for (const Edge& edge : graph_.edges) {
        if (edge.from != static_cast<int>(v) || !edge.through_shared) continue;
        const int64_t to = s->ops[static_cast<size_t>(edge.to)].start_slot;
        const int64_t life = to + n_.latency[static_cast<size_t>(edge.to)] + ii_ * edge.distance - op.start_slot;
        buffers = std::max<int64_t>(buffers, (life + ii_ - 1) / ii_);
      }
      s->roles[static_cast<size_t>(op.role_index)].ops.push_back(op.name);
      if (graph_.nodes[v].is_copy()) {
        const int depth = options.stages ? *options.stages : static_cast<int>(buffers);
        s->ring_depth[op.name] = depth;
        s->stages = std::max(s->stages, depth);
      }
    }
    s->shared_bytes = graph_.realized_shared_bytes([&](size_t v) { return s->ring_depth.at(graph_.nodes[v].name); });
    std::vector<int64_t> starts;
    std::vector<int> role_of;
    for (const OpSlot& op : s->ops) {
      starts.push_back(op.start_slot);
      role_of.push_back(op.role_index);
    }
    const std::vector<int64_t> live = max_live(graph_, n_, starts, role_of, ii_, roles, base_);
    for (int role = 0; role < roles; ++role) s->roles[static_cast<size_t>(role)].registers = static_cast<int>(live[static_cast<size_t>(role)]);
    s->length_slots = length;
    s->length = length * n_.q;
    s->cross_role_edges = 0;
    for (const Edge& edge : graph_.edges) {
      if (s->ops[static_cast<size_t>(edge.from)].role_index != s->ops[static_cast<size_t>(edge.to)].role_index) {
        ++s->cross_role_edges;
      }
    }
  }

  int checks() const { return checks_; }
  int64_t horizon() const { return horizon_; }

 private:
  void track(const z3::expr& constraint, const std::string& why) {
    const z3::expr literal = ctx_.bool_const(("c" + std::to_string(tracked_.size())).c_str());
    solver_.add(z3::implies(literal, constraint));
    tracked_.emplace_back(literal, why);
  }

  const Graph& graph_;
  const Machine& machine_;
  const Normalized& n_;
  int64_t ii_;
  int consumers_;
  int base_ = 0;  // registers each role holds besides its values (Machine::base_registers_for)
  int64_t horizon_ = 0;
  z3::context ctx_;
  z3::solver solver_;
  std::vector<z3::expr> t_, k_, m_, r_, nb_;
  int roles_ = 1;
  std::vector<int> limits_;
  std::vector<size_t> register_track_;  // the tracked group of each role's registers
  std::vector<RegisterCut>* cuts_ = nullptr;
  std::vector<std::pair<z3::expr, std::string>> tracked_;
  int fresh_ = 0;
  int checks_ = 0;
  std::stop_token stop_;
};

// A schedule with no overlap at all (each op after the previous one, one buffer per ring), for
// when the solver found nothing in its time: valid whenever the budgets allow it.
std::optional<Solution> sequential_schedule(const Graph& graph, const Machine& machine,
                                            const SolveOptions& options, const Normalized& n,
                                            const Pins& pins) {
  const std::vector<int> order = topological_order(graph);
  if (order.empty()) return std::nullopt;
  const bool ws = machine.warp_specialized();
  std::vector<int64_t> start(graph.nodes.size(), 0);
  std::vector<int> role(graph.nodes.size(), 0);
  int64_t now = 0;
  for (int v : order) {
    const auto i = static_cast<size_t>(v);
    role[i] = ws ? (graph.nodes[i].is_copy() ? 0 : 1) : 0;
    if (pins.role[i] >= 0 || pins.stage[i] > 0) return std::nullopt;
    start[i] = now;
    now += n.latency[i] + n.handoff;
  }
  int64_t ii = std::max<int64_t>(1, now);
  for (size_t e = 0; e < graph.edges.size(); ++e) {
    const Edge& edge = graph.edges[e];
    if (edge.distance == 0) continue;
    const int64_t need = n.edge_latency[e] + n.handoff - (start[static_cast<size_t>(edge.to)] - start[static_cast<size_t>(edge.from)]);
    ii = std::max<int64_t>(ii, (need + edge.distance - 1) / edge.distance);
  }
  Solution s;
  s.quantum = n.q;
  s.ii_slots = ii;
  s.ii = ii * n.q;
  s.length_slots = now;
  s.length = now * n.q;
  s.shared_bytes = graph.fixed_shared_bytes;
  const int roles = ws ? 2 : 1;
  for (int r = 0; r < roles; ++r) {
    const Budget budget = role_budget(graph, machine, options, r, 1);
    s.roles.push_back({role_name(machine, r), budget.limit, budget.source, machine.base_registers, {}});
  }
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    OpSlot op;
    op.name = graph.nodes[v].name;
    op.start_slot = start[v];
    op.start = start[v] * n.q;
    op.stage = 0;
    op.role_index = role[v];
    op.role = role_name(machine, role[v]);
    s.roles[static_cast<size_t>(role[v])].ops.push_back(op.name);
    if (graph.nodes[v].is_copy()) {
      const int depth = options.stages.value_or(1);
      s.ring_depth[op.name] = depth;
      s.stages = std::max(s.stages, depth);
    }
    s.ops.push_back(op);
  }
  s.shared_bytes = graph.realized_shared_bytes([&](size_t v) { return s.ring_depth.at(graph.nodes[v].name); });
  for (const Edge& edge : graph.edges) {
    if (role[static_cast<size_t>(edge.from)] != role[static_cast<size_t>(edge.to)]) ++s.cross_role_edges;
  }
  const std::vector<int64_t> live = max_live(graph, n, start, role, ii, roles, machine.base_registers);
  for (int r = 0; r < roles; ++r) s.roles[static_cast<size_t>(r)].registers = static_cast<int>(live[static_cast<size_t>(r)]);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The cache.

std::string SolveCache::key(const Graph& graph, const Machine& machine, const SolveOptions& options) {
  std::ostringstream text;
  text << graph.canonical_text() << "machine " << machine.arch << " smem " << machine.shared_capacity
       << " regs " << machine.max_registers << " " << machine.base_registers << " " << machine.base_registers_for(3) << " "
       << machine.max_consumer_roles << " " << machine.producer_registers << " " << machine.producer_registers_for(3) << " handoff "
       << machine.mbarrier_handoff << " barrier " << machine.named_barrier << " rings "
       << machine.max_ring_depth << "\noptions "
       << options.time_limit_seconds << " " << options.max_registers.value_or(-1) << " "
       << options.stages.value_or(-1) << " " << options.max_ii.value_or(-1) << " "
       << options.consumers.value_or(-1) << " "
       << options.target_slots << " " << options.bound_rings_released_together;
  for (const auto& [op, role] : options.role_pins) text << " role " << op << "=" << role;
  for (const auto& [op, stage] : options.stage_pins) text << " stage " << op << "=" << stage;
  // FNV-1a, 64 bits: stable across runs and platforms (std::hash is not).
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text.str()) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << hash;
  return out.str();
}

std::optional<Solution> SolveCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = entries_.find(key);
  if (found == entries_.end() && !directory_.empty()) {
    std::ifstream file(std::filesystem::path(directory_) / (key + ".json"));
    if (file) {
      try {
        entries_[key] = solution_from_json(nlohmann::json::parse(file));
        found = entries_.find(key);
      } catch (const std::exception&) {
        return std::nullopt;  // a damaged entry is a miss
      }
    }
  }
  if (found == entries_.end()) return std::nullopt;
  ++hits_;
  Solution solution = found->second;
  solution.cached = true;
  return solution;
}

void SolveCache::store(const std::string& key, const Solution& solution) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[key] = solution;
  if (directory_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  std::ofstream file(std::filesystem::path(directory_) / (key + ".json"));
  if (file) file << solution_json(Graph{}, solution).dump(1) << "\n";
}

// ---------------------------------------------------------------------------------------------
// The search.

SlotTimes slot_times(const Node& node, int quantum) {
  const int q = std::max(1, quantum);
  SlotTimes times;
  times.latency = std::max<int64_t>(1, ceil_slots(node.latency(), q));
  for (int u = 0; u < kUnitCount; ++u) {
    const double cycles = node.occupancy[static_cast<size_t>(u)];
    times.busy[static_cast<size_t>(u)] = cycles >= 0.5 ? std::max<int64_t>(1, ceil_slots(cycles, q)) : 0;
  }
  return times;
}

namespace {
Solution solve_once(const Graph& graph, const Machine& machine, const SolveOptions& options,
                    SolveCache* cache);
}  // namespace

Solution solve(const Graph& graph, const Machine& machine, const SolveOptions& options,
               SolveCache* cache) {
  Solution s = solve_once(graph, machine, options, cache);
  const bool found = s.status == SolveStatus::Optimal || s.status == SolveStatus::BestFound;
  if (!found || options.bound_rings_released_together || s.shared_bytes <= machine.shared_capacity) return s;
  // The lowering gives the rings released together the deepest one's depth: this answer's
  // rings do not fit so. Solve again with each of those rings bounded.
  SolveOptions bounded = options;
  bounded.bound_rings_released_together = true;
  Solution again = solve_once(graph, machine, bounded, cache);
  again.notes.push_back("the first answer's rings, realized at the deepest one's depth, took " +
                        std::to_string(s.shared_bytes) + " bytes of shared memory (" +
                        std::to_string(machine.shared_capacity) +
                        " fit): solved again with every ring released together at most that deep");
  return again;
}

namespace {
Solution solve_once(const Graph& graph, const Machine& machine, const SolveOptions& options,
                    SolveCache* cache) {
  const SolveClock clock(options.time_limit_seconds);
  const auto elapsed = [&] { return clock.wall(); };
  // A stop request leaves no time: every loop below ends at its next test.
  const auto left = [&] {
    return options.stop.stop_requested() ? 0.0 : clock.left(options.time_limit_seconds);
  };
  std::string key;
  if (cache) {
    key = SolveCache::key(graph, machine, options);
    if (auto hit = cache->find(key)) {
      hit->seconds = elapsed();
      hit->cpu_seconds = clock.cpu();
      hit->solver_seconds = clock.spent();
      return *hit;
    }
  }
  Solution best;
  const auto finish = [&](Solution s) {
    s.seconds = elapsed();
    s.cpu_seconds = clock.cpu();
    s.solver_seconds = clock.spent();
    if (clock.left(options.time_limit_seconds) <= 0 && s.solver_seconds < options.time_limit_seconds * 0.99) {
      s.notes.push_back("the real-time cap (" + cycles_text(cpu_cap_seconds(options.time_limit_seconds)) +
                        " s of CPU or " + cycles_text(wall_cap_seconds(options.time_limit_seconds)) +
                        " s of wall time) ended the solve before its solver time: a loaded or slower "
                        "machine; another run may answer differently");
    }
    if (options.stop.stop_requested() && s.status != SolveStatus::Optimal && s.status != SolveStatus::Infeasible) {
      s.notes.push_back("stopped on request after " + std::to_string(static_cast<int>(s.seconds * 1000)) +
                        " ms, before the time limit: what was found so far");
    }
    // Timeouts depend on the machine's load: only proven answers are worth reusing.
    if (cache && (s.status == SolveStatus::Optimal || s.status == SolveStatus::Infeasible)) {
      cache->store(key, s);
    }
    return s;
  };
  const Pins pins = resolve_pins(graph, machine, options);
  if (!pins.error.empty()) {
    best.status = SolveStatus::NoSolution;
    best.summary = pins.error;
    return finish(best);
  }
  if (topological_order(graph).empty()) {
    best.summary = "the loop body has a dependence cycle within one iteration";
    return finish(best);
  }

  // 1. Lower bound in cycles (resources, recurrences), then the quantum.
  double bound = 1;
  std::string reason = "one slot";
  for (int u = 0; u < kUnitCount; ++u) {
    double total = 0;
    for (const Node& node : graph.nodes) total += node.occupancy[static_cast<size_t>(u)];
    if (total > bound) {
      bound = total;
      reason = unit_name(static_cast<Unit>(u));
    }
  }
  std::vector<double> edge_cycles;
  for (const Edge& edge : graph.edges) edge_cycles.push_back(edge.latency);
  if (positive_cycle(graph, edge_cycles, bound)) {
    double lo = bound, hi = bound * 2;
    while (positive_cycle(graph, edge_cycles, hi)) hi *= 2;
    while (hi - lo > 1) {
      const double mid = (lo + hi) / 2;
      (positive_cycle(graph, edge_cycles, mid) ? lo : hi) = mid;
    }
    bound = hi;
    reason = "a recurrence (a loop-carried dependence cycle)";
  }
  const int q = std::max(1, static_cast<int>(std::ceil(bound / std::max(1, options.target_slots))));
  const Normalized n = normalize(graph, machine, q);
  best.quantum = q;

  // 2. The same bounds in slots.
  int64_t lb = 1;
  for (int u = 0; u < kUnitCount; ++u) {
    int64_t total = 0;
    for (const auto& busy : n.busy) total += busy[static_cast<size_t>(u)];
    lb = std::max(lb, total);
  }
  std::vector<double> edge_slots(n.edge_latency.begin(), n.edge_latency.end());
  while (positive_cycle(graph, edge_slots, static_cast<double>(lb))) ++lb;
  best.ii_lower_bound = lb * q;
  best.bound_reason = reason;
  int64_t cap = static_cast<int64_t>(graph.nodes.size()) * n.handoff + 1;
  for (int64_t latency : n.latency) cap += latency;
  for (int64_t latency : n.edge_latency) cap = std::max(cap, latency + n.handoff + 1);
  if (options.max_ii) cap = std::min(cap, *options.max_ii / q);
  // Length bound: the longest same-iteration path.
  std::vector<int64_t> asap(graph.nodes.size(), 0);
  for (int v : topological_order(graph)) {
    for (size_t e = 0; e < graph.edges.size(); ++e) {
      const Edge& edge = graph.edges[e];
      if (edge.distance == 0 && edge.from == v) {
        asap[static_cast<size_t>(edge.to)] = std::max(asap[static_cast<size_t>(edge.to)],
                                                      asap[static_cast<size_t>(v)] + n.edge_latency[e]);
      }
    }
  }
  int64_t length_lb = 1;
  for (size_t v = 0; v < graph.nodes.size(); ++v) length_lb = std::max(length_lb, asap[v] + n.latency[v]);

  int compute_ops = 0;
  for (const Node& node : graph.nodes) compute_ops += node.is_copy() ? 0 : 1;
  const int max_consumers = machine.warp_specialized() ? std::min(machine.max_consumer_roles, compute_ops) : 0;
  std::vector<int> consumer_counts;
  if (options.consumers && (!machine.warp_specialized() || *options.consumers < 1 ||
                            *options.consumers > machine.max_consumer_roles)) {
    best.summary = machine.warp_specialized()
                       ? "--consumers must be 1.." + std::to_string(machine.max_consumer_roles)
                       : std::string("--consumers: sm_80 has no warp specialization");
    return finish(best);
  }
  if (options.consumers) {
    consumer_counts.push_back(*options.consumers);
  } else if (machine.warp_specialized()) {
    for (int c = 1; c <= max_consumers; ++c) consumer_counts.push_back(c);
  } else {
    consumer_counts.push_back(0);
  }

  // 3. The search over II. An attempt at one II tries every consumer count and, for a count
  // with a schedule, minimizes its length, then its cross-role edges. Order: the lower bound;
  // then galloping (lb+1, lb+2, lb+4, ...) with a share of the time, so that a good schedule
  // is in hand early; then every II between the bound and the best found, upwards, with all
  // the time left: the first with a schedule is the smallest, and proving the ones below it
  // impossible is what makes the answer optimal.
  int checks = 0;
  std::map<int, std::vector<RegisterCut>> cuts;  // per consumer count, carried across intervals
  struct Attempt {
    enum State { Unsat, Sat, Unknown } state = Unsat;
    Solution solution;
    bool length_proven = true, cross_proven = true, complete = true;
  };
  const auto attempt = [&](int64_t ii, double budget) {
    const double begin = clock.spent();
    const auto remaining = [&] { return std::min(left(), clock.left(budget, begin)); };
    Attempt chosen;
    bool any_sat = false, any_unknown = false;
    // Each consumer count gets a fair share of the attempt's time for its first check; counts
    // that ran out of it get a second turn with whatever the others left (their learnt
    // register cuts carry over).
    std::vector<int> queue = consumer_counts;
    const size_t first_pass = queue.size();
    for (size_t index = 0; index < queue.size(); ++index) {
      const int consumers = queue[index];
      const bool last_turn = index >= first_pass;
      if (remaining() <= 0) {
        any_unknown = true;
        break;
      }
      const size_t turns_left = (index < first_pass ? first_pass : queue.size()) - index;
      const double share = remaining() / static_cast<double>(turns_left);
      Model model(graph, machine, options, n, pins, ii, consumers, length_lb, &cuts[consumers]);
      const z3::check_result result = model.check(std::nullopt, std::nullopt, share);
      if (result != z3::sat) {
        checks += model.checks();
        if (result == z3::unknown && !last_turn) {
          queue.push_back(consumers);
        } else {
          any_unknown = any_unknown || result == z3::unknown;
        }
        continue;
      }
      Attempt candidate;
      candidate.state = Attempt::Sat;
      model.read(&candidate.solution, options);
      // Minimize the length by bisection between the path bound and the found length.
      int64_t lo = length_lb, hi = candidate.solution.length_slots;
      while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        const z3::check_result r = model.check(mid, std::nullopt, remaining());
        if (r == z3::sat) {
          model.read(&candidate.solution, options);
          hi = candidate.solution.length_slots;
        } else if (r == z3::unsat) {
          lo = mid + 1;
        } else {
          candidate.length_proven = false;
          break;
        }
      }
      // Then the cross-role edges, at that length.
      if (machine.warp_specialized()) {
        candidate.cross_proven = candidate.length_proven;
        const int64_t length = candidate.solution.length_slots;
        while (candidate.length_proven && candidate.solution.cross_role_edges > 0) {
          const z3::check_result r = model.check(length, candidate.solution.cross_role_edges - 1, remaining());
          if (r == z3::sat) {
            model.read(&candidate.solution, options);
          } else {
            candidate.cross_proven = r == z3::unsat;
            break;
          }
        }
      }
      checks += model.checks();
      const bool better = !any_sat ||
                          candidate.solution.length_slots < chosen.solution.length_slots ||
                          (candidate.solution.length_slots == chosen.solution.length_slots &&
                           candidate.solution.cross_role_edges < chosen.solution.cross_role_edges);
      if (better) chosen = candidate;
      any_sat = true;
    }
    if (!any_sat) chosen.state = any_unknown ? Attempt::Unknown : Attempt::Unsat;
    // A consumer count that ran out of time might have held a shorter schedule.
    chosen.complete = !any_unknown;
    return chosen;
  };

  std::map<int64_t, Attempt::State> decided;
  std::optional<std::pair<int64_t, Attempt>> found;
  const auto run = [&](int64_t ii, double budget) {
    Attempt a = attempt(ii, budget);
    decided[ii] = a.state;
    if (a.state == Attempt::Sat && (!found || ii < found->first)) found.emplace(ii, a);
    return a.state;
  };
  // The bound first, with two thirds of the time: when it is feasible the check is usually
  // quick; when it is not (an SFU- or register-bound loop), proving that can take longer than
  // the whole limit, and a schedule at a larger interval must be in hand first. The last loop
  // comes back to it. Two thirds, not a half: FlashAttention-3's d 64 loop on three consumers is
  // feasible at the bound, but its register cuts take 9 to 11 s of the 20 to settle, so with
  // half the time it was found in one solve of two (2026-11-27).
  if (lb <= cap) run(lb, std::max(0.5, left() * 2 / 3));
  for (int64_t step = 1; !found && lb + step <= cap && left() > 0; step *= 2) {
    run(lb + step, std::max(0.5, left() / 3));
  }
  if (!found && lb + 1 <= cap && left() > 0 && decided.rbegin()->first < cap) {
    run(cap, std::max(0.5, left() / 3));
  }
  for (int64_t ii = lb; ii <= cap && left() > 0; ++ii) {
    if (found && ii >= found->first) break;
    if (decided.count(ii) && decided[ii] != Attempt::Unknown) continue;
    if (run(ii, left()) == Attempt::Sat) break;
  }
  // The smallest interval with a schedule left a consumer count unexplored in its share of the
  // time: that interval again with all the time left (each count's register cuts carry over).
  if (found && !found->second.complete && left() > 0.05) {
    Attempt again = attempt(found->first, left());
    if (again.state == Attempt::Sat &&
        (again.complete || again.solution.length_slots <= found->second.solution.length_slots)) {
      found->second = std::move(again);
    }
  }
  const auto all_unsat_below = [&](int64_t limit) {
    for (int64_t ii = lb; ii < limit; ++ii) {
      auto d = decided.find(ii);
      if (d == decided.end() || d->second != Attempt::Unsat) return false;
    }
    return true;
  };

  if (found) {
    const int64_t ii = found->first;
    const Attempt& chosen = found->second;
    Solution s = chosen.solution;
    s.quantum = q;
    s.ii_lower_bound = best.ii_lower_bound;
    s.bound_reason = best.bound_reason;
    const bool ii_optimal = all_unsat_below(ii);
    const bool proven = ii_optimal && chosen.length_proven && chosen.cross_proven && chosen.complete;
    s.status = proven ? SolveStatus::Optimal : SolveStatus::BestFound;
    std::ostringstream summary;
    if (proven) {
      summary << "optimal under the model: II " << s.ii << " cycles "
              << (ii == lb ? "equals the lower bound (" + reason + ")"
                           : "(every smaller interval proven impossible)")
              << "; length and cross-role edges minimal";
    } else {
      summary << "best found within " << options.time_limit_seconds << " s: ";
      std::vector<std::string> open;
      if (!ii_optimal) {
        int64_t proven_below = lb;
        while (proven_below < ii && decided.count(proven_below) && decided[proven_below] == Attempt::Unsat) ++proven_below;
        open.push_back("intervals from " + std::to_string(proven_below * q) + " to " +
                       std::to_string((ii - 1) * q) + " cycles were not ruled out");
      }
      if (!chosen.length_proven) open.push_back("the length is not proven minimal");
      if (!chosen.cross_proven) open.push_back("the cross-role edges are not proven minimal");
      if (!chosen.complete) open.push_back("a consumer count was not explored");
      for (size_t i = 0; i < open.size(); ++i) summary << (i ? "; " : "") << open[i];
      s.notes.push_back("the time limit stopped the search; the schedule is valid but not proven optimal");
    }
    s.summary = summary.str();
    // Why not one slot less?
    if (ii > lb && decided.count(ii - 1) && decided[ii - 1] == Attempt::Unsat && left() > 0.05) {
      const int consumers = machine.warp_specialized() ? static_cast<int>(s.roles.size()) - 1 : 0;
      Model model(graph, machine, options, n, pins, ii - 1, consumers, length_lb, &cuts[consumers]);
      s.explanation = model.explain(std::min(left(), 5.0));
      checks += model.checks();
      if (!s.explanation.empty()) {
        s.explanation_title = "why II = " + std::to_string((ii - 1) * q) +
                              " cycles is impossible (the lower bound is " +
                              std::to_string(lb * q) + ", " + reason + ")";
      }
    }
    s.checks = checks;
    return finish(s);
  }
  best.checks = checks;
  const bool ii_proven = all_unsat_below(cap + 1);
  const bool timed_out = !ii_proven;

  // 4. Nothing found: infeasible (every II proven unsat), or out of time.
  if (ii_proven && !timed_out) {
    best.status = SolveStatus::Infeasible;
    best.summary = "no schedule exists under the model for any interval up to " +
                   std::to_string(cap * q) + " cycles";
    const int64_t at = std::max<int64_t>(1, cap);
    Model model(graph, machine, options, n, pins, at, consumer_counts.front(), length_lb, &cuts[consumer_counts.front()]);
    best.explanation = model.explain(std::max(1.0, std::min(left() + 2.0, 5.0)));
    best.checks = checks + model.checks();
    best.explanation_title = "conflicting constraints (at II = " + std::to_string(at * q) + " cycles" +
                             (machine.warp_specialized() ? ", 1 consumer warpgroup" : "") + ")";
    return finish(best);
  }
  if (auto fallback = sequential_schedule(graph, machine, options, n, pins)) {
    fallback->ii_lower_bound = best.ii_lower_bound;
    fallback->bound_reason = best.bound_reason;
    if (check_solution(graph, machine, options, *fallback).empty()) {
      fallback->status = SolveStatus::BestFound;
      fallback->summary = "best found within " + cycles_text(options.time_limit_seconds) +
                          " s: the solver found no schedule in time; this is the sequential "
                          "schedule (no overlap between iterations)";
      fallback->notes.push_back("the time limit stopped the search before any schedule was found");
      fallback->checks = checks;
      return finish(*fallback);
    }
  }
  best.status = SolveStatus::NoSolution;
  best.summary = "no schedule found within " + cycles_text(options.time_limit_seconds) +
                 " s, and the sequential schedule does not fit the budgets";
  best.checks = checks;
  return finish(best);
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// The checker.

std::string check_solution(const Graph& graph, const Machine& machine, const SolveOptions& options,
                           const Solution& s) {
  if (s.ops.size() != graph.nodes.size()) return "the solution has a different number of ops";
  const Normalized n = normalize(graph, machine, s.quantum);
  const int64_t ii = s.ii_slots;
  if (ii <= 0) return "no interval";
  const bool ws = machine.warp_specialized();
  const auto t = [&](int v) { return s.ops[static_cast<size_t>(v)].start_slot; };
  const auto r = [&](int v) { return s.ops[static_cast<size_t>(v)].role_index; };
  for (size_t e = 0; e < graph.edges.size(); ++e) {
    const Edge& edge = graph.edges[e];
    const int64_t need = n.edge_latency[e] + (ws && r(edge.from) != r(edge.to) ? n.handoff : 0) - ii * edge.distance;
    if (t(edge.to) - t(edge.from) < need) {
      return "dependence " + graph.nodes[static_cast<size_t>(edge.from)].name + " -> " +
             graph.nodes[static_cast<size_t>(edge.to)].name + " violated";
    }
  }
  for (int u = 0; u < kUnitCount; ++u) {
    std::vector<int64_t> use(static_cast<size_t>(ii), 0);
    for (size_t v = 0; v < graph.nodes.size(); ++v) {
      for (int64_t c = 0; c < n.busy[v][static_cast<size_t>(u)]; ++c) {
        if (++use[static_cast<size_t>((t(static_cast<int>(v)) + c) % ii)] > machine.capacity[static_cast<size_t>(u)]) {
          return std::string("the ") + unit_name(static_cast<Unit>(u)) + " is oversubscribed";
        }
      }
    }
  }
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    if (!graph.nodes[v].is_copy()) continue;
    auto depth = s.ring_depth.find(graph.nodes[v].name);
    if (depth == s.ring_depth.end()) return "no ring depth for " + graph.nodes[v].name;
    if (options.stages && depth->second != *options.stages) return "ring depth differs from --stages";
    if (depth->second > machine.max_ring_depth) return "the ring of " + graph.nodes[v].name + " is too deep";
    for (const Edge& edge : graph.edges) {
      if (!edge.through_shared || edge.from != static_cast<int>(v)) continue;
      if (depth->second * ii < t(edge.to) + n.latency[static_cast<size_t>(edge.to)] + ii * edge.distance - t(edge.from)) {
        return "the ring of " + graph.nodes[v].name + " is too shallow";
      }
    }
  }
  const int64_t smem =
      graph.realized_shared_bytes([&](size_t v) { return s.ring_depth.at(graph.nodes[v].name); });
  if (smem > machine.shared_capacity) return "shared memory over capacity";
  const int roles = static_cast<int>(s.roles.size());
  std::vector<int64_t> starts;
  std::vector<int> role_of;
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    if (r(static_cast<int>(v)) < 0 || r(static_cast<int>(v)) >= roles) return "bad role";
    if (ws && graph.nodes[v].is_copy() != (r(static_cast<int>(v)) == 0)) return "producer rule violated";
    if (t(static_cast<int>(v)) + n.latency[v] > s.length_slots) return "an op ends after the length";
    starts.push_back(t(static_cast<int>(v)));
    role_of.push_back(r(static_cast<int>(v)));
  }
  const std::vector<int64_t> registers = max_live(graph, n, starts, role_of, ii, roles, machine.base_registers_for(ws ? roles - 1 : 0));
  const int consumers = ws ? roles - 1 : 0;
  for (int role = 0; role < roles; ++role) {
    const Budget budget = role_budget(graph, machine, options, role, consumers);
    if (registers[static_cast<size_t>(role)] > budget.limit) {
      return "role " + role_name(machine, role) + " needs " + std::to_string(registers[static_cast<size_t>(role)]) +
             " registers, over its " + std::to_string(budget.limit);
    }
  }
  const Pins pins = resolve_pins(graph, machine, options);
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    if (pins.role[v] >= 0 && pins.role[v] != r(static_cast<int>(v))) return "role pin violated";
    if (pins.stage[v] >= 0 && pins.stage[v] != t(static_cast<int>(v)) / ii) return "stage pin violated";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Printing.

std::string describe_solution(const Graph& graph, const Solution& s) {
  std::ostringstream out;
  out << "solution: " << status_name(s.status) << (s.cached ? " (cached)" : "") << "\n  " << s.summary << "\n";
  if (!s.ops.empty()) {
    out << "  II " << s.ii << " cycles (lower bound " << s.ii_lower_bound << ": " << s.bound_reason
        << "), length " << s.length << " cycles (" << (s.length_slots + s.ii_slots - 1) / std::max<int64_t>(1, s.ii_slots)
        << " iterations in flight), " << s.stages << " stage" << (s.stages == 1 ? "" : "s")
        << " (the deepest ring), " << s.roles.size() << " role" << (s.roles.size() == 1 ? "" : "s") << ", "
        << s.cross_role_edges << " cross-role edge" << (s.cross_role_edges == 1 ? "" : "s") << ", shared "
        << s.shared_bytes << " B; model quantum " << s.quantum << " cycles\n";
    size_t width = 2;
    for (const OpSlot& op : s.ops) width = std::max(width, op.name.size());
    out << "  " << std::left << std::setw(static_cast<int>(width)) << "op" << "  " << std::right
        << std::setw(6) << "cycle" << "  stage  role\n";
    for (size_t v = 0; v < s.ops.size(); ++v) {
      const OpSlot& op = s.ops[v];
      out << "  " << std::left << std::setw(static_cast<int>(width)) << op.name << "  " << std::right
          << std::setw(6) << op.start << "  " << std::setw(5) << op.stage << "  " << op.role;
      auto depth = s.ring_depth.find(op.name);
      if (depth != s.ring_depth.end()) out << "  (ring of " << depth->second << ")";
      if (v < graph.nodes.size() && !graph.nodes[v].hand_role.empty()) out << "  [hand: " << graph.nodes[v].hand_role << "]";
      out << "\n";
    }
    out << "  roles:\n";
    for (const RoleUse& role : s.roles) {
      out << "    " << role.name << ": " << role.registers << " of " << role.register_limit
          << " registers (" << role.limit_source << "), " << role.ops.size() << " op"
          << (role.ops.size() == 1 ? "" : "s") << "\n";
    }
  }
  if (!s.explanation.empty()) {
    out << "  " << s.explanation_title << ":\n";
    for (const std::string& reason : s.explanation) out << "    - " << reason << "\n";
  }
  for (const std::string& note : s.notes) out << "  note: " << note << "\n";
  out << "  solve time " << std::fixed << std::setprecision(3) << s.seconds << " s (" << std::setprecision(1)
      << s.cpu_seconds << " s of CPU, " << s.solver_seconds << " solver s), " << s.checks << " Z3 check" << (s.checks == 1 ? "" : "s") << "\n";
  return out.str();
}

nlohmann::ordered_json graph_json(const Graph& graph) {
  nlohmann::ordered_json json;
  json["kernel"] = graph.kernel;
  json["loop"] = graph.loop;
  json["trip_count"] = graph.trip_count;
  json["arch"] = graph.arch;
  json["form"] = graph.form;
  json["threads"] = graph.threads;
  json["hand_stages"] = graph.hand_stages;
  json["fixed_shared_bytes"] = graph.fixed_shared_bytes;
  json["nodes"] = nlohmann::ordered_json::array();
  for (const Node& node : graph.nodes) {
    nlohmann::ordered_json j;
    j["name"] = node.name;
    j["kind"] = node_kind_name(node.kind);
    j["latency"] = node.latency();
    nlohmann::ordered_json units = nlohmann::ordered_json::object();
    for (int u = 0; u < kUnitCount; ++u) {
      if (node.occupancy[static_cast<size_t>(u)] > 0) units[unit_name(static_cast<Unit>(u))] = node.occupancy[static_cast<size_t>(u)];
    }
    j["units"] = units;
    j["registers"] = graph.registers(node);
    j["buffer_bytes"] = node.buffer_bytes;
    j["variable_latency"] = node.variable_latency;
    if (node.landing_bytes > 0) j["landing_bytes"] = node.landing_bytes;
    if (node.subtile >= 0) j["subtile"] = node.subtile;
    if (!node.hand_role.empty()) j["hand_role"] = node.hand_role;
    j["ops"] = node.ops;
    json["nodes"].push_back(j);
  }
  json["edges"] = nlohmann::ordered_json::array();
  for (const Edge& edge : graph.edges) {
    json["edges"].push_back({{"from", graph.nodes[static_cast<size_t>(edge.from)].name},
                             {"to", graph.nodes[static_cast<size_t>(edge.to)].name},
                             {"latency", edge.latency},
                             {"distance", edge.distance},
                             {"through_shared", edge.through_shared},
                             {"what", edge.what}});
  }
  return json;
}

nlohmann::ordered_json solution_json(const Graph&, const Solution& s) {
  nlohmann::ordered_json json;
  json["status"] = status_name(s.status);
  json["summary"] = s.summary;
  json["ii"] = s.ii;
  json["length"] = s.length;
  json["ii_lower_bound"] = s.ii_lower_bound;
  json["bound_reason"] = s.bound_reason;
  json["quantum"] = s.quantum;
  json["ii_slots"] = s.ii_slots;
  json["length_slots"] = s.length_slots;
  json["stages"] = s.stages;
  json["shared_bytes"] = s.shared_bytes;
  json["cross_role_edges"] = s.cross_role_edges;
  json["ops"] = nlohmann::ordered_json::array();
  for (const OpSlot& op : s.ops) {
    json["ops"].push_back({{"name", op.name}, {"cycle", op.start}, {"stage", op.stage},
                           {"role", op.role}, {"slot", op.start_slot}, {"role_index", op.role_index}});
  }
  json["roles"] = nlohmann::ordered_json::array();
  for (const RoleUse& role : s.roles) {
    json["roles"].push_back({{"name", role.name}, {"registers", role.registers},
                             {"register_limit", role.register_limit}, {"limit_source", role.limit_source},
                             {"ops", role.ops}});
  }
  json["ring_depth"] = s.ring_depth;
  json["explanation_title"] = s.explanation_title;
  json["explanation"] = s.explanation;
  json["notes"] = s.notes;
  json["seconds"] = s.seconds;
  json["cpu_seconds"] = s.cpu_seconds;
  json["solver_seconds"] = s.solver_seconds;
  json["checks"] = s.checks;
  json["cached"] = s.cached;
  return json;
}

Solution solution_from_json(const nlohmann::json& json) {
  Solution s;
  const std::string status = json.at("status").get<std::string>();
  for (SolveStatus candidate : {SolveStatus::Optimal, SolveStatus::BestFound, SolveStatus::Infeasible,
                                SolveStatus::NoSolution}) {
    if (status == status_name(candidate)) s.status = candidate;
  }
  s.summary = json.at("summary").get<std::string>();
  s.ii = json.at("ii").get<int64_t>();
  s.length = json.at("length").get<int64_t>();
  s.ii_lower_bound = json.at("ii_lower_bound").get<int64_t>();
  s.bound_reason = json.at("bound_reason").get<std::string>();
  s.quantum = json.at("quantum").get<int>();
  s.ii_slots = json.at("ii_slots").get<int64_t>();
  s.length_slots = json.at("length_slots").get<int64_t>();
  s.stages = json.at("stages").get<int>();
  s.shared_bytes = json.at("shared_bytes").get<int64_t>();
  s.cross_role_edges = json.at("cross_role_edges").get<int>();
  for (const auto& op : json.at("ops")) {
    s.ops.push_back({op.at("name").get<std::string>(), op.at("cycle").get<int64_t>(), op.at("stage").get<int>(),
                     op.at("role").get<std::string>(), op.at("slot").get<int64_t>(), op.at("role_index").get<int>()});
  }
  for (const auto& role : json.at("roles")) {
    s.roles.push_back({role.at("name").get<std::string>(), role.at("register_limit").get<int>(),
                       role.at("limit_source").get<std::string>(), role.at("registers").get<int>(),
                       role.at("ops").get<std::vector<std::string>>()});
  }
  s.ring_depth = json.at("ring_depth").get<std::map<std::string, int>>();
  s.explanation_title = json.at("explanation_title").get<std::string>();
  s.explanation = json.at("explanation").get<std::vector<std::string>>();
  s.notes = json.at("notes").get<std::vector<std::string>>();
  s.seconds = json.at("seconds").get<double>();
  s.cpu_seconds = json.value("cpu_seconds", 0.0);
  s.solver_seconds = json.value("solver_seconds", 0.0);
  s.checks = json.at("checks").get<int>();
  return s;
}

}  // namespace nautilus::pipeline
