// rematerialize(TENSOR, CONSUMER) — recompute an elementwise tensor inside one consumer instead
// of reading it, keeping the stored tensor for its other readers.
//
// The block writing TENSOR must be elementwise (no reduce variable) with the single store
// TENSOR[v_0, ..., v_r-1] = e (inline's form). In block CONSUMER every load TENSOR[x_0, ...] is
// replaced by e with each v_j replaced by x_j; the producer and every other reader stay as they
// are. This trades recomputation for memory traffic, e.g. recomputing P = exp(S − Mx) in the
// output sum of attention while L still reads the stored P:
//
//   before:
//     block L(b = b, h = h, m = m; reduce n = n):
//       L[b, h, m] = L[b, h, m] + P[b, h, m, n]
//     block O_sum(b = b, h = h, m = m, d = d; reduce n = n):
//       O_sum[b, h, m, d] = O_sum[b, h, m, d] + P[b, h, m, n] * f32(V[b, h, n, d]) / L[b, h, m]
//   after rematerialize(P, O_sum):
//     block L(...):        L[b, h, m] = L[b, h, m] + P[b, h, m, n]                 (unchanged)
//     block O_sum(...):    O_sum[b, h, m, d] = O_sum[b, h, m, d] +
//                              exp(S[b, h, m, n] - Mx[b, h, m]) * f32(V[b, h, n, d]) / L[b, h, m]
//
// Values are unchanged when what e reads holds the same values at CONSUMER as at the producer:
// every writer of those tensors comes before the producer, and none of them is still reducing
// in a loop around the producer or CONSUMER (a running value, as rolling_update leaves it, would
// be read at another point of its reduction). Refused, with the reason: an input tensor, a
// tensor with no or several producers, a reduction or another store form, a consumer that does
// not read TENSOR or is its producer, a consumer that is TENSOR's only reader (inline(TENSOR)
// does that and drops the tensor), and the value conditions above.
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult rematerialize(const scalar::ProgramPtr& program, std::string_view tensor,
                          std::string_view consumer);

DecisionKind rematerialize_decision();

}  // namespace nautilus::sched
