// Random, always-valid spec text for differential testing (docs/difftest.md).
//
// The generator writes `.nt` source, not ASTs, so every triple also exercises the lexer, parser
// and sema. Each spec comes from one *category* of program shape users write, with the details
// drawn at random:
//
//   elementwise  chains of exp, tanh, sigmoid, max/min, select with index masks, index
//                arithmetic (i / 2, I - 1 - i, i % 3), broadcast extra inputs, constants
//   reduction    sum / max / min over one or two axes (rows or columns), masked with the
//                reducer's identity, with element-wise prologues and epilogues
//   softmax      softmax / log-softmax / log-sum-exp / cross-entropy rows, masked with -inf,
//                normalizer as its own statement, inline, or the whole thing in one statement
//   attention    batch / head dims, grouped heads (K[b, h / G, ...]), decode, causal / window /
//                prefix / document / padding masks, soft-capping, ALiBi, additive bias
//   gemm         GEMM (B or Bᵀ), batched, bias + activation epilogues, GEMM chains, gated MLPs
//   norm         RMSNorm / LayerNorm rows, alone or feeding a GEMM
//   nested       reductions nested inside expressions and inside other reductions
//
// Sizes are small (each dimension 1..24, non-powers of two and partial tiles included) so the
// interpreters run in milliseconds. Values stay bounded (inputs are uniform in [-1, 1); exp only
// of bounded arguments, divisions only by quantities bounded away from 0), and every row that a
// max-reduction or a softmax masks with -inf keeps at least one unmasked entry (checked against
// the mask's own predicate at the chosen sizes), so a difference from the float64 reference is
// the compiler's, not the generator's.
#pragma once

#include <string>
#include <vector>

#include "tools/difftest/rng.h"

namespace nautilus::difftest {

struct GeneratedSpec {
  std::string category;
  std::string text;  // the whole .nt file, sizes bound by its `let` line
};

struct GeneratorOptions {
  // Keep f32 outputs of contractions of 16-bit inputs. By default such an output gets a 16-bit
  // dtype: the default VR pipeline rounds a computed f32 dot operand to 16 bits (FlashAttention's
  // P in bf16, rewrite/operand_narrowing.h), a documented approximation outside f32 tolerance.
  bool strict_f32 = false;
  // Sizes and types the Hopper tensor-core path takes (the sm_90a triples), for the attention,
  // gemm and norm categories: every extent drawn from the full range (rows, columns,
  // contractions, head dims) is one of 64, 72, 128 or 136 (16-byte rows of 16-bit types, whole
  // and partial 64-wide tiles), and inputs are 16-bit floats, so that warp_spec can give a TMA
  // producer and wgmma consumers. Batch and head counts and the small parameters of masks stay
  // as they are.
  bool tensor_core_sizes = false;
};

const std::vector<std::string>& spec_categories();

// A spec of a random category (`category` empty) or of the given one.
GeneratedSpec generate_spec(Rng& rng, const std::string& category = {},
                            const GeneratorOptions& options = {});

}  // namespace nautilus::difftest
