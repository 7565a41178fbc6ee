// The auto-scheduler: a phased beam search over schedule decisions (docs/search.md).
//
// The search tree's root is the program as lowered from the spec; an edge applies one decision;
// a node is *complete* when every phase has run (candidates.h lists the phases). Every node is
// ranked by the cost model's estimate of its *default completion* (candidates.h): the node's own
// decisions followed by default tiling and binding of whatever is still unscheduled, compiled
// through the driver to MA tile IR. A candidate that does not compile or that the model calls
// infeasible is pruned with the compiler's or the model's reason.
//
// The beam holds (node, phase) entries. Each round every entry not yet done is expanded by its
// phase: the children are the candidate decisions that apply (and are not forbidden, and give a
// program no other node has); in the multi-step phases (reduction-fusion, fusion, masking, launch)
// the node may also stop and go on to the next phase unchanged. The best `beam` entries by
// estimate survive (ties broken by a hash of the program seeded with `seed`, so a run is
// deterministic for a seed). The search ends when every surviving entry is done; the best
// complete node is chosen.
//
//   root ─ rolling_update(O_sum, n, tile=64) ─ compute_at(S, Mx, n_o) ─ tile(O_sum_acc, m=128)
//        ─ reverse_compute_at(O, O_sum, m_o) ─ bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)
//        ─ launch(O_sum_acc, warps=8, stages=2)                        (attention, chosen path)
//
// Pins are decisions that must appear in the result. Each is applied, in order, to the first
// node on a path where it applies (a pin naming O_sum_acc applies right after the rolling_update
// that creates it); the pinned node is the parent's only child. A complete node with a pin left
// over is not a result, and when no node applies pin k the search fails with
// "pin k D does not apply after pin k-1 E: <reason>". Forbidden decisions (matched by kind,
// target and the arguments the pattern gives) are never children and never used by a completion.
//
// Nonsense is refused: when the chosen schedule's estimate is more than kRooflineSuspicion times
// the roofline bound of the math (cost/roofline.h), the search runs again with a beam four times
// wider (at least 12) and keeps the better result; when even that stays above, the result carries
// a warning naming the bound and the kernel that dominates the estimate.
//
// Threads: `threads` compiles of one round run at once (results do not depend on it). The stop
// token is checked before every compile and between rounds; `run_search` then returns what it
// has (stats.cancelled). The observer is called from the calling thread, with the progress and,
// if it asks, the tree as it grows (the studio draws the search live from it).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/cost/roofline.h"
#include "core/scalar/ir.h"
#include "core/sched/decision.h"
#include "core/search/candidates.h"
#include "core/spec/sema.h"
#include "core/support/source.h"

namespace nautilus::search {

enum class NodeStatus {
  Expanded,  // has children (and is not complete)
  Pruned,    // dropped: beam, duplicate, does not compile, infeasible, pins left over; see reason
  Leaf,      // complete: every phase ran; a candidate result
  Chosen,    // the result
  Failed,    // an internal compiler error, or the measurement failed (validation, fault)
  Open,      // only in trees handed to SearchObserver::on_tree while the search runs: not yet
             // expanded (in the beam, or waiting for its estimate)
};
const char* node_status_name(NodeStatus status);  // "expanded", "pruned", ...

struct SearchNode {
  int id = 0;
  int parent = -1;                         // -1 for the root
  std::optional<sched::Decision> decision;  // the edge from the parent (none at the root)
  Phase phase = Phase::ReductionFusion;     // the phase that made the decision
  bool pinned = false;                      // the decision is a pin (or the partial schedule's)
  size_t pins_applied = 0;                  // pins on the path from the root, this one included
  sched::Schedule schedule;                 // every decision from the root, in order
  scalar::ProgramPtr program;               // the scalar IR after `schedule`
  sched::Schedule completion;               // what the default completion added to estimate it
  std::optional<cost::CostEstimate> estimate;  // of schedule + completion (feasible ones)
  std::optional<double> measured_us;
  NodeStatus status = NodeStatus::Expanded;
  std::string reason;                       // why pruned or failed; the duplicate's original
  std::vector<int> children;
};

struct SearchOptions {
  // Decisions that must appear in the result, in order: a partial schedule's decisions first,
  // then the --pin arguments.
  std::vector<sched::Decision> pins;
  std::vector<sched::Decision> forbids;
  int beam = 3;
  uint64_t seed = 0;
  int threads = 1;
  // Time the `measure` best complete nodes with `Measurer` and choose by measured time.
  int measure = 0;
  // The MA lowering's target ("sm_80" / "sm_90a"); empty: from the cost model's device.
  std::string arch;
  // Also estimate every warp-specialized completion as persistent CTAs with the dynamic tile
  // scheduler. Measured on the H100 (bench/RESULTS.md, "Persistent CTAs offered by the
  // search"), once a persistent CTA releases its query tile after the last QK^T and claims its
  // next tile after its copies, persistent CTAs are within 1.4% of one CTA per tile on every
  // ANCHORS attention row and up to 13.5% faster on the short ones; GEMM 8192^3 1.2% slower,
  // the gated MLP 2.8% faster. The model still overrates them at d 128 (docs/cost-model.md).
  bool offer_persistent = true;
};

struct SearchStats {
  int nodes = 0;
  int expanded = 0;
  int pruned = 0;
  int leaves = 0;
  int failed = 0;
  int compiles = 0;    // distinct completed programs compiled to MA tile IR
  int rounds = 0;
  double seconds = 0.0;
  bool cancelled = false;
};

struct SearchProgress {
  double seconds = 0.0;
  int nodes = 0;
  int compiles = 0;
  int rounds = 0;
  std::string phase;                 // the earliest phase still in the beam
  std::optional<double> best_us;     // best estimate so far (of any node's completion)
  std::string best_schedule;         // its decisions, one per line
};

class SearchObserver {
 public:
  virtual ~SearchObserver() = default;
  virtual void on_progress(const SearchProgress& progress) { (void)progress; }
  // The tree so far, after every round and every batch of estimates (right after on_progress),
  // when wants_tree() says so: nodes by id, as SearchResult::nodes, with the statuses of the
  // moment (Open for nodes not yet expanded; Chosen appears only in the result). Node ids never
  // change and nodes are only added, so a view can insert the new ones and update the rest.
  virtual bool wants_tree() const { return false; }
  virtual void on_tree(const std::vector<SearchNode>& nodes) { (void)nodes; }
};

// Timing one complete schedule on a GPU (the CLI builds a kernel package and runs the runner).
struct Measurement {
  enum class Status { Ok, NoGpu, Failed };
  Status status = Status::Failed;
  double microseconds = 0.0;
  std::string message;  // the runner's reason when not Ok
};
using Measurer = std::function<Measurement(const sched::Schedule& schedule)>;

struct SearchInput {
  SourceFilePtr file;
  std::vector<spec::SizeOverride> sizes;
};

struct SearchResult {
  bool ok = false;
  std::string error;        // why there is no result (conflicting pins, nothing compiles, ...)
  sched::Schedule schedule;  // the chosen schedule (complete)
  std::optional<cost::CostEstimate> estimate;
  std::optional<double> measured_us;
  int chosen = -1;
  std::vector<SearchNode> nodes;  // the tree, by id
  SearchStats stats;
  std::vector<std::string> warnings;  // "no GPU: ...; chose by the estimate"
  std::string model;                  // the cost model's name
  // The roofline bound of the math on the model's device (cost/roofline.h); absent when the
  // spec did not compile.
  std::optional<cost::RooflineBound> roofline;
  // The beam of the search whose result this is: larger than SearchOptions::beam when the first
  // search's choice was estimated at more than kRooflineSuspicion times the roofline bound and
  // the search was run again with a wider beam.
  int beam = 0;
};

// An estimate this many times the roofline bound of the math is a missed fusion rather than a
// slow machine: the search widens its beam, and warns when that finds nothing better.
inline constexpr double kRooflineSuspicion = 20.0;

// The complete schedules of a result's feasible leaves (the chosen one included), each with its
// estimate, best estimate first; a leaf's completion is appended to its decisions.
struct LeafSchedule {
  sched::Schedule schedule;
  double estimate_us = 0.0;
};
std::vector<LeafSchedule> complete_leaves(const SearchResult& result);

// The arch the search lowers its candidates for: SearchOptions::arch, else sm_90a for a Hopper
// cost model and sm_80 otherwise. Whoever times the search's schedules lowers them for the same
// arch, or the kernel timed is not the one estimated.
std::string lowering_arch(const SearchOptions& options, const cost::CostModel& model);

SearchResult run_search(const SearchInput& input, const cost::CostModel& model,
                        const SearchOptions& options, SearchObserver* observer = nullptr,
                        std::stop_token stop = {}, const Measurer& measurer = {});

}  // namespace nautilus::search
