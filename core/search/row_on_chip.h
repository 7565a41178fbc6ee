// Row kernels that keep their row on chip: the search's alternative completion of a row
// kernel whose passes over a row read the same input more than once.
//
// A row kernel (a rolled reduction, `rolling_update(Lse_sum, c, tile=2048)`, with its consumers
// moved into the row loop and stepped over the row, `tile(Y, c=2048)`) reads its row once for
// the statistics and once more for the output. Where the row fits a CTA's shared memory, the
// alternative copies it once per row into a shared buffer that every pass reads:
//
//   before: rolling_update(Lse_sum, c, tile=2048); ...; tile(Y, c=2048)
//   after:  ... ; cache_read(Lse_sum, X, shared, at=r, readers=all); tile(X_shared, c=2048)
//
// Each returned list is applied in order after the completion's tiling (before its binds).
#pragma once

#include <vector>

#include "core/scalar/ir.h"
#include "core/sched/decision.h"

namespace nautilus::search {

// The largest row the form keeps on chip: a CTA's shared memory on the H100 (227 KB), less
// room for the reductions' scratch.
inline constexpr int64_t kMostRowBytesOnChip = 224 * 1024;

std::vector<std::vector<sched::Decision>> row_on_chip_forms(const scalar::ProgramPtr& program);

}  // namespace nautilus::search
