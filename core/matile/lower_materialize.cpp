// A VR value in the register layout a consumer needs (lower.h rule 4, at emission): a tile
// built only from iota, full, scalars, broadcasts and element-wise ops is rematerialized in that
// layout where it is used; any other value is taken as placed, or converted -- register-only
// when every thread already holds the elements it needs, else through a shared-memory scratch
// allocation. Results are remembered per layout and loop body. From softmax's row statistics
// (#L1 the carried row vector, #L3 the slice of the [4, 1024] tile's blocked layout #L2):
//
//   before (VR):                                after (MA, inside the loop):
//     %log2e = full 1.442695 : f32[4]             %23.1 = convert_layout %23 : f32[4] #L1
//     %Mx = max %Mx_i, %23 : f32[4]               %Mx = max %Mx_i, %23.1 : f32[4] #L1
//     ...                                         %log2e = full 1.442695 : f32[4] #L1
//     %Mx_log2 = mul %Mx, %log2e : f32[4]         %Mx_log2 = mul %Mx, %log2e : f32[4] #L1
//     %Mx_log2_t = broadcast %Mx_log2, dims [0]   %Mx_log2.1 = convert_layout %Mx_log2
//       : f32[4, 1024]                              via shared Mx_log2_cvt : f32[4] #L3
//                                                 %Mx_log2_t = broadcast %Mx_log2.1, dims [0]
//                                                   : f32[4, 1024] #L2
#include <string>
#include <vector>

#include "core/matile/kernel_lowering.h"
#include "core/matile/printer.h"

namespace nautilus::matile::lowering {

namespace {

std::string key_of(const RegisterLayout& l) { return layout_text(l); }

}  // namespace

bool KernelLowering::register_only(const RegisterLayout& from, const RegisterLayout& to,
                                   const TileType& type) {
  if (from.threads() != to.threads()) return false;
  // Remembered across compiles: the search converts the same layouts of the same tiles
  // hundreds of times (a GEGLU's 128 x 1024 activation tiles).
  return !register_move_error(RegisterMove::Copy, from, type.shape, to, type.shape, {});
}

Value KernelLowering::convert(const Value& value, const RegisterLayout& to,
                              const std::string& name) {
  if (value->layout == to) return value;
  if (register_only(value->layout, to, value->type)) {
    return b_.convert_layout(value, to, false, -1, name);
  }
  const DType dtype = value->type.dtype == DType::Bool || value->type.dtype == DType::Index
                          ? DType::F32
                          : value->type.dtype;
  const int s = scratch(name + "_cvt", dtype, {value->type.element_count()},
                        "scratch of the layout conversion of %" + value->name);
  return b_.convert_layout(value, to, true, s, name);
}

// v in layout `to`: rematerialized, taken as placed, or converted.
Value KernelLowering::materialize(const VValue& v, const RegisterLayout& to) {
  const std::string key = key_of(to);
  if (Value* hit = memo_find(v.get(), key)) return *hit;
  Value result;
  if (remat(v)) {
    result = emit_compute(*def(v), v, to);
  } else {
    Value base = placed(v);
    if (!base) fail("%" + v->name + " is used before it was placed");
    result = convert(base, to, v->name);
  }
  memo_.back()[{v.get(), key}] = result;
  return result;
}

RegisterLayout KernelLowering::moved_source_layout(const VOp& op, const VValue& v, const RegisterLayout& to) {
  const VValue& x = op.operands[0];
  if (op.kind == VOpKind::Broadcast) return projected(to, v->type.shape, op.dims, x->type.shape);
  std::vector<int> inverse(op.dims.size());
  for (size_t i = 0; i < op.dims.size(); ++i) inverse[static_cast<size_t>(op.dims[i])] = static_cast<int>(i);
  Result<RegisterLayout> want = permute_layout(to, v->type.shape, inverse);
  return want ? *want : uniform_layout(x->type.shape, threads());
}

// Emits a data-movement or element-wise op of VR value v in layout `to`.
Value KernelLowering::emit_compute(const VOp& op, const VValue& v, const RegisterLayout& to) {
  const std::string& name = v->name;
  switch (op.kind) {
    case VOpKind::Iota: return b_.iota(op.extent, to, name);
    case VOpKind::Full: return b_.full(op.constant, v->type, to, name);
    case VOpKind::Broadcast: {
      const VValue& x = op.operands[0];
      Value source = x->type.rank() == 0 ? scalar_value(x) : materialize(x, moved_source_layout(op, v, to));
      if (!register_only_move(RegisterMove::Broadcast, source, v, op.dims, to)) {
        source = convert(source, uniform_layout(x->type.shape, threads()), x->name);
      }
      return b_.broadcast(source, v->type.shape, op.dims, to, name);
    }
    case VOpKind::Permute: {
      const VValue& x = op.operands[0];
      Value source = materialize(x, moved_source_layout(op, v, to));
      Result<RegisterLayout> natural = permute_layout(source->layout, x->type.shape, op.dims);
      if (natural && *natural == to) return b_.permute(source, op.dims, to, name);
      if (!register_only_move(RegisterMove::Permute, source, v, op.dims, to)) {
        source = convert(source, uniform_layout(x->type.shape, threads()), x->name);
      }
      return b_.permute(source, op.dims, to, name);
    }
    default: break;
  }
  std::vector<Value> operands;
  for (const VValue& x : op.operands) {
    // A rank-0 operand is used where it was placed, in the result's layout: a reduction's
    // result (every thread holds the sum after the butterfly) has the reduce's sliced layout,
    // which a loop-carried scalar's uniform one does not equal although both hold the value in
    // every thread (layernorm's one-pass statistics hoist such a reduction out of the loop).
    operands.push_back(x->type.rank() == 0 && v->type.rank() == 0
                           ? convert(scalar_value(x), to, x->name)
                           : materialize(x, to));
  }
  switch (op.kind) {
    case VOpKind::Unary: return b_.unary(op.unary_op, operands[0], name);
    case VOpKind::Binary: return b_.binary(op.binary_op, operands[0], operands[1], name);
    case VOpKind::Compare: return b_.compare(op.compare_op, operands[0], operands[1], name);
    case VOpKind::Logical: return b_.logical(op.logical_op, operands[0], operands[1], name);
    case VOpKind::Select: return b_.select(operands[0], operands[1], operands[2], name);
    case VOpKind::Cast: return b_.cast(operands[0], v->type.dtype, name);
    default: fail("cannot emit " + std::string(vrtile::op_kind_name(op.kind)) + " %" + name);
  }
}

bool KernelLowering::register_only_move(RegisterMove move, const Value& source, const VValue& v,
                                        const std::vector<int>& dims, const RegisterLayout& to) {
  return !register_move_error(move, source->layout, source->type.shape, to, v->type.shape,
                              std::vector<int64_t>(dims.begin(), dims.end()));
}

// A rank-0 VR value as an MA scalar (emitted at its definition).
Value KernelLowering::scalar_value(const VValue& v) {
  Value value = placed(v);
  if (!value) fail("scalar %" + v->name + " is used before its definition");
  return value;
}

}  // namespace nautilus::matile::lowering
