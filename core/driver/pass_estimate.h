// What each scheduling pass did to the cost of the kernel: the estimate of the program as it is
// after a pass, with the decisions still missing filled in by the search's default completion
// (search::complete_program), compiled to MA tile IR and estimated by a cost model. Comparing the
// estimate after a pass with the one after the pass before it shows what the decision bought
// (teaching mode shows both). The scheduling passes are found by the decision their snapshots
// carry, never by their printed names.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/cost/cost_model.h"
#include "core/driver/pipeline.h"

namespace nautilus::driver {

struct PassEstimate {
  // The estimate of the completed program; empty when there is none (`reason` says why).
  std::optional<cost::CostEstimate> estimate;
  std::string reason;
};

// The estimate after log entry `index` of `compilation`, which must be a stage-scalar snapshot
// (`lower-to-scalar`, a decision or an extra scalar pass): the decisions applied up to and
// including it, then the default completion of its program, compiled with the compilation's spec
// and sizes to stage matile and estimated by `model`. Synchronous (a compile of the whole
// program): run it on a worker. An index outside the log or at another stage gives a reason.
PassEstimate estimate_after_pass(const Compilation& compilation, size_t index,
                                 const cost::CostModel& model);

}  // namespace nautilus::driver
