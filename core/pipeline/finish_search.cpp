#include "core/pipeline/finish_search.h"

#include "core/search/register_check.h"

namespace nautilus::pipeline {

FinishedSchedule finish_search(const search::SearchInput& input, const search::SearchResult& result,
                               const cost::CostModel& model, const std::string& arch,
                               const FinishOptions& options) {
  FinishedSchedule finished{result.schedule, result.estimate, "", ""};
  if (result.measured_us) return finished;
  const std::stop_token stop = options.completion.solve.stop;
  bool fits = false;
  bool guarded = false;  // the chosen leaf fits only with the guarded exp2
  if (options.register_check) {
    search::RegisterCheckOptions check_options;
    check_options.model = &model;
    check_options.stop = stop;
    const std::vector<search::LeafSchedule> leaves = search::pick_then_leaves(result);
    const search::RegisterCheck check = search::choose_leaf_that_fits(input, leaves, arch, check_options);
    for (const std::string& line : check.lines) finished.report += line + "\n";
    finished.register_summary = check.summary;
    if (check.chosen) {
      fits = true;
      guarded = check.verdicts[*check.chosen].guarded_exp2;
      if (*check.chosen > 0) {
        finished.schedule = leaves[*check.chosen].schedule;
        if (check.verdicts[*check.chosen].estimate) finished.estimate = check.verdicts[*check.chosen].estimate;
      }
    }
  }
  if (!options.complete_pipelines || stop.stop_requested()) return finished;
  const CompletedSchedule completed =
      complete_schedule(input.file, input.sizes, arch, finished.schedule, model, options.completion);
  finished.report += describe_completion(completed.completion);
  if (!completed.completion.changed) return finished;
  // The solver's ring depth and consumer count change the registers too: its schedule is not
  // taken where it spills, or where it fits only with the guarded exp2 and the search's did not
  // need it (d 64 attention at S 16384: the solver's 4-stage ring with ping-pong made the
  // persistent kernel's SFU-only exp2 spill; search::kGuardedExp2Cost).
  if (fits) {
    const search::RegisterVerdict verdict = search::check_registers(input, completed.completion.schedule, arch);
    if (verdict.status != search::RegisterVerdict::Status::Fits || (verdict.guarded_exp2 && !guarded)) {
      finished.register_summary = "the completed schedule " + search::describe_verdict(verdict) +
                                  "; kept the schedule without the solver's decision";
      finished.report += "register check: " + finished.register_summary + "\n";
      return finished;
    }
  }
  finished.schedule = completed.completion.schedule;
  if (completed.estimate) finished.estimate = completed.estimate;
  return finished;
}

}  // namespace nautilus::pipeline
