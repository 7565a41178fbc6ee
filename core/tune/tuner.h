// The tuner: measures the candidates the cost model likes best and remembers every result in the
// tuning database (docs/tuning.md).
//
//   1. Search (core/search) with the user's pins and forbids; the complete leaves it kept,
//      ranked by their estimates, are the first candidates.
//   2. When those are used up: mutations of the best measured schedules so far (all of the
//      database's validated records for this spec, sizes and device; not their duplicates,
//      which would make every duplicate a parent and the run walk the whole space). A mutation of schedule
//      D1 ... Dn at decision i is a leaf of the same search with D1 ... Dn except Di pinned and
//      Di itself forbidden: the search's own candidates (other tile sizes, raster orders, warps
//      and stages, warp specialization, fusions) for that one decision, ranked by the model.
//      Each parent is mutated once per run; when no parent gives a new schedule the space the
//      search offers is exhausted and the run ends.
//   3. Every candidate whose key (spec hash, sizes, schedule, device) the database already has
//      is skipped, not measured again; the others go to the executor in batches of its
//      parallelism, validated then timed, and each result is written as it arrives.
//   4. Duplicates: the executor compiles each candidate and asks the tuner (through
//      Executor::skip_code_when) whether its generated code is measured already: by a record of
//      the database for this spec, sizes and device, or by a candidate of this run. Such a
//      candidate is not run; it is recorded as a duplicate of that record (status "duplicate",
//      TuningRecord::duplicate_of), so no later run takes its schedule again, and it does not
//      count against the budget, unless the record it duplicates is another compiler's: keys
//      hold the compiler's version with a hash of its sources (core/support/build_identity.h),
//      so after a change to the compiler every schedule is a new candidate, and one whose code
//      did not change is that earlier measurement carried over, which counts as measured.
//      When the mutations run out and duplicates took candidates,
//      the mutations are asked again for twice as many leaves per decision, so that a budget of
//      N measures N distinct kernels where the space has them.
//
// The run ends when `budget` candidates were measured (with `resume`, counting this compiler's
// records the database already holds for this spec, sizes and device, duplicates not counted
// unless carried over), when
// `time_limit_seconds` passed,
// when the candidates are exhausted, or when `should_stop` says so (checked between batches and,
// through Executor::stop_starting_when, between the candidates of a batch: the candidates in
// flight finish and are recorded, the batch's others are not started).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/search/search.h"
#include "core/tune/executor.h"
#include "core/tune/tuning_db.h"

namespace nautilus::tune {

struct TuneOptions {
  search::SearchOptions search;
  int budget = 64;
  std::optional<double> time_limit_seconds;
  bool resume = false;
  // Parents mutated per round of mutation (the fastest measured ones not mutated yet).
  int parents_per_round = 2;
  // Leaves kept per mutated decision (the best estimates); doubled, up to
  // max_mutations_per_decision, when duplicates used up the candidates (step 4 above).
  int mutations_per_decision = 3;
  int max_mutations_per_decision = 48;
  std::string source = "tune";
  std::function<bool()> should_stop;
  // Candidates the cost model estimates at more than this many times the search's own pick are
  // not measured (0: measure every candidate). A mutation that undoes a fusion (the score
  // matrix of attention as a kernel of its own) can run 30 000 times longer than the pick, and
  // its validation and timing hold a GPU for minutes; the model is never that far off on a
  // kernel it ranks first (docs/tuning.md).
  double skip_estimate_ratio = 20.0;
};

struct TuneProgress {
  int measured = 0;        // this run
  int budget_left = 0;     // after this one
  int skipped = 0;         // already in the database
  int duplicates = 0;      // this run's candidates not run: their code was measured already
  // Set when this report is of a duplicate (not measured): the record whose code it has.
  std::optional<int64_t> duplicate_of;
  double seconds = 0.0;
  std::optional<double> eta_seconds;  // at the mean time per candidate so far
  std::optional<double> best_us;      // best validated median of this spec, sizes and device
  std::string schedule;               // the candidate just measured
  std::string outcome;                // "12.5 µs", "wrong_results: ...", ...
  std::optional<double> median_us;    // the candidate's median when validated and timed
};

struct TuneResult {
  bool ok = false;
  std::string error;
  int measured = 0;
  int skipped = 0;        // candidates the database already had
  int duplicates = 0;     // candidates not run: the same code as a measured one (recorded)
  int carried_over = 0;   // of those, the code measured under another compiler (counted as measured)
  int hopeless = 0;       // candidates not run: estimated past skip_estimate_ratio x the pick
  int failed = 0;         // measured but not validated and timed
  bool stopped = false;   // should_stop ended the run
  bool exhausted = false; // no new candidate was left
  std::optional<TuningRecord> best;  // the database's best for this spec, sizes and device
  std::optional<double> analytical_pick_us;  // measured time of the search's own choice
  double seconds = 0.0;   // wall clock of the whole run, the search included
  MeasurementKey key;     // the key's spec, sizes and device (schedule empty)
};

// The spec's identity for the database: hash of its normalized text and its resolved sizes
// (`let` values with the -D overrides applied); nullopt with `error` when it does not check.
struct SpecIdentity {
  std::string spec_hash;
  std::string sizes;
};
std::optional<SpecIdentity> identify_spec(const search::SearchInput& input, std::string* error);

TuneResult run_tune(const search::SearchInput& input, const cost::CostModel& model,
                    TuningDatabase& db, Executor& executor, const TuneOptions& options,
                    const std::function<void(const TuneProgress&)>& on_progress = {});

}  // namespace nautilus::tune
