// Float64 reference evaluation of a checked spec: the meaning of the math, and the oracle every
// stage of the compiler is compared with.
//
// Each statement is evaluated point by point over its left-hand index space, straight from the
// syntax tree: a reduction loops over its variables and combines in float64 (sum from 0,
// max from -inf, min from +inf); nested reductions are evaluated where they appear, exactly as
// written, with no fusion. One reuse keeps inline normalizers affordable: a nested reduction is
// recomputed only when a variable its body reads changes, so `sum(n) e / (sum(n3) f)` evaluates
// the inner sum once per row rather than once per n. Arithmetic is exact (float64) on the given
// (already rounded) inputs, and what a later statement reads of a defined 16-bit tensor is
// rounded to its dtype (the declared one, or the narrow one sema keeps for an intermediate),
// because that is how the spec says it is stored: `Xn[t, h] : bf16 = ...` is read as bf16
// values, by the reference as by every stage. So a narrow intermediate feeding an f32 output is
// checked with the f32 tolerance against a reference that rounds it too, rather than with a
// looser one. 16-bit intermediates are returned rounded; outputs exact (their tolerance covers
// their own rounding), except 8-bit outputs, returned rounded and saturated as they are stored
// (a saturated value is no rounding error); f32 rounding is left out (within every tolerance).
#pragma once

#include <cstdint>
#include <string>

#include "core/spec/ast.h"
#include "core/support/tensor.h"

namespace nautilus::spec {

// Seeded random inputs for every `input` of the spec: uniform in [-1, 1), rounded to the input's
// dtype. Input k (in declaration order) uses derive_seed(seed, k), so inputs are independent.
TensorMap make_random_inputs(const Spec& spec, uint64_t seed);

// Number of scalar operations the reference evaluation performs, with that reuse (saturates at
// ~1.8e19).
double estimate_reference_operations(const Spec& spec);

// The floating-point work of the spec as written, the number TFLOP/s figures divide: a sum of
// products counts one multiply-add (2 FLOPs) per term plus the work inside its factors, every
// other arithmetic node, call or comparison 1 per evaluation, constants (sizes, literals,
// sqrt(D)) nothing. Each node is evaluated once per value of the index variables it depends on
// (an inline normalizer costs one sum per row, as hoisted). Attention gives 4·B·H·M·N·D plus the
// softmax's few operations per score; a causal mask written as a select does not halve it.
double estimate_flops(const Spec& spec);

// The bytes every kernel schedule must move at least: each input read once and each output
// written once, at its dtype's size.
double estimate_compulsory_bytes(const Spec& spec);

struct ReferenceOptions {
  double max_operations = 2e9;  // refuse to start above this estimate
};

struct ReferenceResult {
  bool ok = false;
  std::string error;
  TensorMap tensors;  // every defined tensor (intermediates and outputs), dtype F64
};

ReferenceResult evaluate_reference(const Spec& spec, const TensorMap& inputs,
                                   const ReferenceOptions& options = {});

}  // namespace nautilus::spec
