// inline: compute an elementwise tensor where it is used instead of storing it.
//
// inline(TENSOR) takes the block that writes the intermediate TENSOR, which must be elementwise:
// no reduce variables, and a body that is the single store `TENSOR[v_0, ..., v_r-1] = e` with
// its iteration variables, each once. Every load `TENSOR[x_0, ..., x_r-1]` in any other block is
// replaced by e with each v_j replaced by x_j; then the producer's nest (the loops that enclose
// only it) and TENSOR's allocation are removed. Values are unchanged: e has TENSOR's dtype (a
// narrowing cast stays in e), so each load yields exactly what the store would have stored.
//
// The tensors e reads must not be written after the producer (every writer of each of them comes
// before the producer in program order), so that reading them later, in the consumers, reads the
// same values. Inline relies on the invariant the other passes keep: an element of an
// intermediate is complete when first read and never written again.
//
// Fails, naming the tensor or block, for inputs, outputs, tensors without a producer or with
// several, reductions, stores of another form, a producer that reads its own tensor, and reads
// of tensors written later.
//
//   inline(P) on attention, before:
//
//     for b in 0..1:                  (P's nest, removed)
//       ...
//           block P(b = b, h = h, m = m, n = n):
//             P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
//     ...
//           block L(b = b, h = h, m = m; reduce n = n):
//             ...
//             L[b, h, m] = L[b, h, m] + P[b, h, m, n]
//
//   after:
//
//           block L(b = b, h = h, m = m; reduce n = n):
//             ...
//             L[b, h, m] = L[b, h, m] + exp(S[b, h, m, n] - Mx[b, h, m])
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

// `inline` is a C++ keyword, hence the name.
ApplyResult inline_tensor(const scalar::ProgramPtr& program, std::string_view tensor);

DecisionKind inline_decision();

}  // namespace nautilus::sched
