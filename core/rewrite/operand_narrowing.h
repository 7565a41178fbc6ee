// Tensor-core operand narrowing: dots read 16-bit operands instead of f32 copies of them.
//
// Exact form: `dot(cast(x : T → f32), cast(y : T → f32), acc)` with T = bf16 or f16 becomes
// `dot(x, y, acc)`. Products of two 16-bit floats are exact in f32 and the dot adds them with
// f32 rounding either way, so the result is bit for bit the same. A cast seen through a permute
// (`permute(cast(k))`) counts: the permute moves onto the 16-bit tile.
//
// 8-bit operands: `cast(x : T8 → f32)` with T8 = fp8e4m3, fp8e5m2 or int8 counts as a cast
// from a 16-bit type, because every 8-bit value is exact in bf16 and in f16 (fp8's exponent
// range and 2-3 mantissa bits, int8's 8 significant bits): the operand becomes
// `cast(x : T8 → T)`, T the other operand's 16-bit type or bf16, converted in registers, and the
// dot runs on the tensor cores with the same exact products. (FP8 tensor-core instructions,
// which would read the bytes as they are, are not used yet.)
//
// Rounding form (NarrowingMode::RoundComputed, the default of the pass list): when one operand
// is a cast from a 16-bit T and the other an f32 tile computed by the operator, the other is
// rounded to T: `dot(p, cast(v : bf16 → f32), acc)` becomes `dot(cast(p : f32 → bf16), v, acc)`.
// This is FlashAttention's P in bf16 and is an APPROXIMATION: each element of p gains a relative
// error up to 2⁻⁹ (bf16) or 2⁻¹² (f16), which is within the tolerance of a 16-bit output but not
// of an f32 one. So it applies only where
//   - the other operand is computed, not an f32 *input* loaded as is (through permutes and
//     broadcasts): the user declared that input f32, and an f32 × f16 dot stays an f32 dot
//     (CUDA cores), its 16-bit operand cast up; and
//   - every output of the module that the dot's result flows into (through loop-carried values
//     and global intermediates too) is 16-bit: an f32 output asks for f32 accuracy (its
//     tolerance is f32's), so attention with an f32 output keeps P in f32, while the usual
//     bf16-output attention still gets P in bf16 for the tensor cores.
// NarrowingMode::ExactOnly never rounds.
//
//   before:                                   after:
//     %qf = cast %q : f32[8, 4]                 %kt.1 = permute %k, order [1, 0] : bf16[4, 16]
//     %kf = cast %k : f32[16, 4]                %qk = dot %q, %kt.1 : f32[8, 16]
//     %kt = permute %kf, order [1, 0]           ...
//     %qk = dot %qf, %kt : f32[8, 16]           %p.1 = cast %p : bf16[8, 16]
//     ...                                       %acc1 = dot %p.1, %v, %acc_s : f32[8, 4]
//     %vf = cast %v : f32[16, 4]
//     %acc1 = dot %p, %vf, %acc_s : f32[8, 4]
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

enum class NarrowingMode {
  ExactOnly,      // only dots whose two operands are casts from one 16-bit type
  RoundComputed,  // also round a computed f32 operand to the other's 16-bit type where the
                  // dot only feeds 16-bit outputs
};

// Returns `module` itself when no dot can read narrower operands.
vrtile::ModulePtr narrow_dot_operands(const vrtile::ModulePtr& module,
                                      NarrowingMode mode = NarrowingMode::RoundComputed);

}  // namespace nautilus::rewrite
