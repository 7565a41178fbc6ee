#include "core/driver/pass_estimate.h"

#include "core/search/candidates.h"

namespace nautilus::driver {

PassEstimate estimate_after_pass(const Compilation& compilation, size_t index,
                                 const cost::CostModel& model) {
  PassEstimate result;
  if (index >= compilation.log.size() || !compilation.spec || !compilation.file) {
    result.reason = "no such pass";
    return result;
  }
  const Snapshot& snapshot = compilation.log[index];
  if (snapshot.stage != Stage::Scalar || !snapshot.program) {
    result.reason = "the pass is not a scheduling pass of the scalar IR";
    return result;
  }
  // 1. The decisions the log applied up to this pass, in order.
  CompileOptions options;
  for (size_t i = 0; i <= index; ++i) {
    const Snapshot& entry = compilation.log[i];
    if (entry.decision) options.schedule.decisions.push_back(*entry.decision);
  }
  // 2. The rest, as the search completes a program by default.
  const search::Completion completion = search::complete_program(snapshot.program, {}, {});
  options.schedule.decisions.insert(options.schedule.decisions.end(),
                                    completion.decisions.begin(), completion.decisions.end());
  // 3. The same spec and sizes, lowered to the MA tile IR the model reads.
  for (const auto& [name, value] : compilation.spec->sizes) options.sizes.push_back({name, value});
  options.last_stage = Stage::MATile;
  const Compilation completed = compile(compilation.file, options);
  if (!completed.ma_module) {
    result.reason = !completed.schedule_error.empty() ? completed.schedule_error
                    : !completed.internal_error.empty() ? completed.internal_error
                                                        : "the completed program does not compile";
    return result;
  }
  result.estimate = model.estimate(*completed.ma_module);
  return result;
}

}  // namespace nautilus::driver
