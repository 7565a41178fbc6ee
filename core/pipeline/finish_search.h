// What runs after the search picks a schedule by estimate, in `nautilus schedule` and the
// studio's search panel alike:
//   1. the register check (core/search/register_check.h): the pick is compiled with NVRTC, and
//      when ptxas spills it or the Hopper gate refuses it, the best-ranked leaf that fits
//      replaces it;
//   2. the pipeline solver's completion (complete.h) of that schedule; a completion that makes a
//      fitting schedule spill is not used.
//
//   fp8_gemm.nt at 4096³, H200 preset:
//     register check: leaf 1 (estimate 514.4 µs) under ptxas for sm_90a: fp8_gemm_C 255 registers
//       (estimated 223), no spill
//     pipeline: kernel C (cp.async loop): optimal, II 460 cycles ... -> pipeline(C_sum, stages=3)
#pragma once

#include <optional>
#include <stop_token>
#include <string>

#include "core/cost/cost_model.h"
#include "core/pipeline/complete.h"
#include "core/search/search.h"

namespace nautilus::pipeline {

struct FinishOptions {
  bool register_check = true;
  bool complete_pipelines = true;
  CompletionOptions completion;  // the solver's limits; its stop token also stops the check
};

struct FinishedSchedule {
  sched::Schedule schedule;
  std::optional<cost::CostEstimate> estimate;
  std::string report;  // the check's and the completion's lines, each ending in a newline
  // One line when the register check changed the schedule or could not keep a fitting one (the
  // studio's status line shows it); empty otherwise.
  std::string register_summary;
};

// `result` must be ok; a measured result (--measure) is returned as it is, measured.
FinishedSchedule finish_search(const search::SearchInput& input, const search::SearchResult& result,
                               const cost::CostModel& model, const std::string& arch,
                               const FinishOptions& options = {});

}  // namespace nautilus::pipeline
