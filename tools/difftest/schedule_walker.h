// Random schedules from the auto-scheduler's own candidate space, for differential testing.
//
// A walk follows the search's phases (core/search/candidates.h) in order -- reduction fusion,
// fusion, tiling (with fusion again after each tile), binding, masking, launch -- and at each
// step picks at random among the candidates the search would enumerate there, plus a few the
// search never tries at the small sizes of the tester (rolling steps of 2..16, split_k_update
// with 2..4 splits, tiles of 2..8) so that partial tiles and short loops are covered. Every
// decision goes through sched::apply_decision; one that does not apply is skipped, exactly as
// the search drops it. complete_program then tiles and binds whatever the walk left, so the
// result is a schedule the search could have produced (or a superset of its moves).
//
// Sometimes the schedule is instead the search's own choice with a small beam, or nothing at
// all (the program as lowered, completed by the compiler's defaults).
#pragma once

#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "core/support/source.h"
#include "tools/difftest/rng.h"

namespace nautilus::difftest {

struct WalkedSchedule {
  std::string kind;          // "walk", "search" or "lowered"
  sched::Schedule schedule;  // decisions in order
  std::string note;          // e.g. why the search found nothing (then the walk is used)
};

// `lowered` is the program as lowered from `file` (the search needs the source). With `hopper`
// the launch phase proposes what the search proposes for sm_90a (warp_spec, persistent CTAs,
// tile orders) and the search lowers for sm_90a.
WalkedSchedule random_schedule(const SourceFilePtr& file, const scalar::ProgramPtr& lowered,
                               Rng& rng, double search_probability, bool hopper = false);

// A random walk through the candidate space (see above), completed.
sched::Schedule random_walk(const scalar::ProgramPtr& lowered, Rng& rng, bool hopper = false);

}  // namespace nautilus::difftest
