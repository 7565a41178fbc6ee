// Random walks through the search's candidate space (schedule_walker.h says what and why).
#include "tools/difftest/schedule_walker.h"

#include <algorithm>
#include <memory>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/search/candidates.h"
#include "core/search/program_facts.h"
#include "core/search/search.h"

namespace nautilus::difftest {
namespace {

using sched::Decision;
using sched::DecisionArg;

class Walk {
 public:
  Walk(scalar::ProgramPtr program, Rng& rng) : program_(std::move(program)), rng_(rng) {}

  bool apply(const Decision& decision) {
    sched::ApplyResult applied = sched::apply_decision(program_, decision);
    if (!applied.ok()) return false;
    program_ = applied.program;
    decisions_.push_back(decision);
    return true;
  }

  // Up to `attempts` random candidates until one applies.
  bool apply_one_of(std::vector<Decision> candidates, int attempts = 4) {
    for (int i = 0; i < attempts && !candidates.empty(); ++i) {
      const size_t pick = static_cast<size_t>(rng_.range(0, static_cast<int64_t>(candidates.size()) - 1));
      if (apply(candidates[pick])) return true;
      candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(pick));
    }
    return false;
  }

  void reduction_fusion() {
    const int steps = static_cast<int>(rng_.range(0, 3));
    for (int step = 0; step < steps; ++step) {
      const search::ProgramFacts facts = search::analyze_program(*program_);
      // split_k_below: a huge bound lets every long enough reduction be split.
      const search::ReductionFusionCandidates candidates =
          search::reduction_fusion_candidates(*program_, facts, rng_.chance(0.5) ? 0 : INT64_MAX);
      std::vector<Decision> pool = candidates.first;
      for (const auto& [index, others] : candidates.step_variations) {
        pool.insert(pool.end(), others.begin(), others.end());
      }
      // Moves the search does not try at these sizes: short rolling steps and small splits.
      for (const Decision& decision : candidates.first) {
        if (decision.kind != "rolling_update") continue;
        const std::vector<const DecisionArg*> positional = decision.positional();
        if (positional.empty()) continue;
        for (int64_t step_size : {2, 4, 8, 16}) {
          if (rng_.chance(0.3)) {
            pool.push_back({"rolling_update", decision.target,
                            {*positional.front(), DecisionArg{"tile", step_size}}});
          }
        }
        if (rng_.chance(0.3)) {
          pool.push_back({"split_k_update", decision.target,
                          {*positional.front(), DecisionArg{"splits", rng_.range(2, 4)}}});
        }
      }
      if (!apply_one_of(pool)) break;
    }
  }

  void fusion(int max_steps) {
    const int steps = static_cast<int>(rng_.range(0, max_steps));
    for (int step = 0; step < steps; ++step) {
      const search::ProgramFacts facts = search::analyze_program(*program_);
      if (!apply_one_of(search::fusion_candidates(facts))) break;
    }
  }

  void tiling() {
    std::vector<std::string> skip;
    for (int round = 0; round < 8; ++round) {
      const search::ProgramFacts facts = search::analyze_program(*program_);
      std::optional<search::TilePlan> plan = search::next_tile_plan(facts, skip);
      if (!plan) return;
      skip.push_back(plan->block);
      if (rng_.chance(0.15)) continue;  // left to the completion
      std::vector<int64_t> sizes = plan->defaults();
      for (size_t axis = 0; axis < plan->axes.size(); ++axis) {
        if (rng_.chance(0.35)) continue;  // the default
        std::vector<int64_t> options = plan->axes[axis].sizes;
        if (rng_.chance(0.25)) options.insert(options.end(), {2, 4, 8});
        if (!options.empty()) sizes[axis] = rng_.pick(options);
      }
      if (!plan->valid(sizes)) sizes = plan->defaults();
      std::optional<Decision> decision = plan->decision(sizes);
      if (!decision) decision = plan->keep;
      bool applied = decision && apply(*decision);
      if (!applied) {
        std::optional<Decision> fallback = plan->decision(plan->defaults());
        if (!fallback) fallback = plan->keep;
        applied = fallback && apply(*fallback);
      }
      if (applied && rng_.chance(0.5)) fusion(2);
    }
  }

  void binding() {
    if (rng_.chance(0.2)) return;  // left to the completion
    const search::ProgramFacts facts = search::analyze_program(*program_);
    for (const Decision& bind : search::binding_decisions(facts)) apply(bind);
  }

  void masking() {
    const search::ProgramFacts facts = search::analyze_program(*program_);
    for (const Decision& decision : search::masking_candidates(facts)) {
      if (rng_.chance(0.5)) apply(decision);
    }
  }

  void launch(bool hopper) {
    const search::ProgramFacts facts = search::analyze_program(*program_);
    sched::Schedule so_far{decisions_};
    std::vector<Decision> candidates = search::launch_candidates(facts, so_far, hopper);
    for (const Decision& decision : candidates) {
      if (rng_.chance(0.25)) apply(decision);
    }
  }

  sched::Schedule finish() {
    search::Completion completion = search::complete_program(program_, {}, {});
    std::vector<Decision> all = decisions_;
    all.insert(all.end(), completion.decisions.begin(), completion.decisions.end());
    return {all};
  }

 private:
  scalar::ProgramPtr program_;
  Rng& rng_;
  std::vector<Decision> decisions_;
};

const cost::CostModel& h100_model() {
  static const std::unique_ptr<cost::CostModel> model =
      cost::make_analytical_model(cost::h100_sxm());
  return *model;
}

}  // namespace

sched::Schedule random_walk(const scalar::ProgramPtr& lowered, Rng& rng, bool hopper) {
  Walk walk(lowered, rng);
  walk.reduction_fusion();
  walk.fusion(3);
  walk.tiling();
  walk.fusion(2);
  walk.binding();
  walk.masking();
  walk.launch(hopper);
  return walk.finish();
}

WalkedSchedule random_schedule(const SourceFilePtr& file, const scalar::ProgramPtr& lowered,
                               Rng& rng, double search_probability, bool hopper) {
  WalkedSchedule out;
  const double draw = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
  // The search's own sm_90a picks are what users get on Hopper; walks rarely meet warp_spec's
  // conditions, so the sm_90a triples take the search more often.
  if (hopper) search_probability = std::max(search_probability, 0.5);
  if (draw < search_probability) {
    search::SearchInput input;
    input.file = file;
    search::SearchOptions options;
    options.beam = static_cast<int>(rng.range(1, 2));
    options.seed = rng.next() % 1000;
    options.threads = 1;
    options.arch = hopper ? "sm_90a" : "sm_80";
    search::SearchResult result = search::run_search(input, h100_model(), options);
    if (result.ok) {
      out.kind = "search";
      out.schedule = result.schedule;
      return out;
    }
    out.note = "the search found no schedule (" + result.error + "); a random walk instead";
  } else if (draw < search_probability + 0.04) {
    out.kind = "lowered";
    return out;
  }
  out.kind = "walk";
  out.schedule = random_walk(lowered, rng, hopper);
  return out;
}

}  // namespace nautilus::difftest
