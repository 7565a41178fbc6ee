// One differential-testing triple: (random spec, random schedule, every interpreter stage)
// against the float64 reference of the spec (docs/difftest.md).
//
// Triple `index` of a run seeded with `seed` is fully determined by the pair: the spec text,
// the schedule and the evaluation seed all come from Rng::for_triple(seed, index), so
// `nautilus-difftest --seed S --only INDEX` replays it, and the reproducer files it writes
// replay with the `nautilus` CLI alone.
//
// Outcome of a triple:
//   passed   every stage that was built reproduces the reference within its dtype's tolerance
//   refused  the schedule is a proper user-facing refusal (Compilation::schedule_error: "does
//            not apply", "cannot be lowered to tiles"); the scalar stage is still checked with
//            the decisions applied, and a wrong scalar result is still a failure
//   failed   anything else: the generated spec rejected (a generator bug, reported as such), an
//            internal compiler error, an exception, an interpreter that cannot run (for a reason
//            other than size), a wrong or non-finite result
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sched/decision.h"

namespace nautilus::difftest {

struct TripleOptions {
  std::string category;             // empty: any
  double search_probability = 0.06;  // share of triples that use the search's own schedule
  bool strict_f32 = false;           // GeneratorOptions::strict_f32
  // Share of triples lowered for sm_90a (TMA, wgmma, warp roles where the schedule asks for
  // them with warp_spec, which their walks then propose); the rest for sm_80. The choice comes
  // from a stream of its own, so it does not change the spec or schedule of a triple.
  double hopper_probability = 0.25;
};

struct StageOutcome {
  std::string stage;   // "scalar", "vrtile", "matile"
  std::string status;  // "passed", "failed", "skipped" (not built: the schedule was refused)
  std::string detail;  // the error, or "max rel error 1e-7 (tol 1e-4)"
};

struct TripleResult {
  uint64_t seed = 0;
  uint64_t index = 0;
  std::string category;
  std::string schedule_kind;  // "walk", "search", "lowered"
  std::string arch = "sm_80";  // the MA lowering's target: "sm_80" or "sm_90a"
  bool warp_roles = false;     // the MA module has warp roles (a warp-specialized kernel)
  std::string spec_text;
  sched::Schedule schedule;
  uint64_t eval_seed = 0;
  std::string status;        // "passed", "refused", "failed"
  std::string failure_kind;  // "spec-rejected", "internal-error", "exception", "cannot-run",
                             // "wrong-result", "non-finite", "crash", "timeout"
  std::string failure_stage;  // "spec", "compile", "scalar", "vrtile", "matile"
  std::string detail;         // the compiler's or the evaluator's words
  std::vector<StageOutcome> stages;
  double seconds = 0.0;
};

TripleResult run_triple(uint64_t seed, uint64_t index, const TripleOptions& options);

nlohmann::json to_json(const TripleResult& result);
TripleResult triple_from_json(const nlohmann::json& json);

// Writes spec.nt, schedule.json, schedule.txt (one decision per line) and README.txt (the
// failure, and the `nautilus eval` commands that replay it) into `directory`. Returns an empty
// string on success, otherwise the reason.
std::string write_reproducer(const TripleResult& result, const std::string& directory);

// The reproducer as text (what is printed for each failure).
std::string describe_failure(const TripleResult& result);

}  // namespace nautilus::difftest
