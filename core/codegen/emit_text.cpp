// C++ text the CUDA emitter builds from: names made valid identifiers, float literals that
// round-trip through f32 (special values as bit patterns), conversions between bf16/f16/fp8/int8
// and float (the 8-bit types are raw bytes converted by the prelude's helpers), and the separable form of a layout's coordinates (a per-thread part computed once plus
// a constant per unrolled slot).
//
//   value %27_k0                 ->  v27_k0                        (identifiers cannot start
//                                                                   with a digit)
//   full -inf : f32              ->  __int_as_float(0xff800000)    (no INFINITY in NVRTC
//                                                                   without extra headers)
//   full 0.0 : f32               ->  0.0f
#include "core/codegen/kernel_emitter.h"

namespace nautilus::codegen::detail {

[[noreturn]] void unsupported(const std::string& message) {
  throw EmitFailure{CodegenError::Kind::Unsupported, message};
}

[[noreturn]] void invalid(const std::string& message) {
  throw EmitFailure{CodegenError::Kind::InvalidInput, message};
}

std::string sanitize(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += word ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "v" + out;
  return out;
}

std::string str(int64_t value) { return std::to_string(value); }

std::string parenthesized(const std::string& expression) {
  const bool simple = expression.find_first_of(" +-*/%?") == std::string::npos ||
                      (expression.front() == '(' && expression.back() == ')' &&
                       expression.find(')') == expression.size() - 1);
  return simple ? expression : "(" + expression + ")";
}

std::string float_literal(double value) {
  if (std::isnan(value)) return "__int_as_float(0x7fffffff)";
  if (std::isinf(value)) return value > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  std::ostringstream out;
  out << std::setprecision(9) << static_cast<float>(value);
  std::string text = out.str();
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text + "f";
}

const char* c_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return "float";
    case DType::F16: return "__half";
    case DType::BF16: return "__nv_bfloat16";
    case DType::Index: return "int";
    case DType::Bool: return "bool";
    case DType::F64: return "double";
    // Both fp8 formats are stored as raw bytes; the conversion helpers name the format, so an
    // fp8 value never meets an operator that would treat its byte as a number.
    case DType::F8E4M3:
    case DType::F8E5M2: return "__nv_fp8_storage_t";
    // An int4 value in registers is a signed byte (its global buffer is packed: int4_at).
    case DType::I8:
    case DType::I4: return "signed char";
  }
  return "float";
}

bool is_narrow_float(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }

std::string to_float(const std::string& expr, DType dtype) {
  switch (dtype) {
    case DType::BF16: return "__bfloat162float(" + expr + ")";
    case DType::F16: return "__half2float(" + expr + ")";
    case DType::F8E4M3: return "nautilus_device::fp8e4m3_to_float(" + expr + ")";
    case DType::F8E5M2: return "nautilus_device::fp8e5m2_to_float(" + expr + ")";
    case DType::I8:
    case DType::I4: return "nautilus_device::int8_to_float(" + expr + ")";
    case DType::Index: return "static_cast<float>(" + expr + ")";
    case DType::Bool: return "(" + expr + " ? 1.0f : 0.0f)";
    default: return expr;
  }
}

std::string from_float(const std::string& expr, DType dtype) {
  switch (dtype) {
    case DType::BF16: return "__float2bfloat16_rn(" + expr + ")";
    case DType::F16: return "__float2half_rn(" + expr + ")";
    case DType::F8E4M3: return "nautilus_device::float_to_fp8e4m3(" + expr + ")";
    case DType::F8E5M2: return "nautilus_device::float_to_fp8e5m2(" + expr + ")";
    case DType::I8: return "nautilus_device::float_to_int8(" + expr + ")";
    case DType::I4: return "nautilus_device::float_to_int4(" + expr + ")";
    case DType::Index: return "static_cast<int>(" + expr + ")";
    case DType::Bool: return "(" + expr + " != 0.0f)";
    default: return expr;
  }
}

std::string constant_of(double value, DType dtype) {
  switch (dtype) {
    case DType::Index: return str(static_cast<int64_t>(value));
    case DType::Bool: return value != 0.0 ? "true" : "false";
    case DType::F32: return float_literal(value);
    default: return from_float(float_literal(value), dtype);
  }
}

std::string term_text(const std::string& index, int64_t position, int64_t extent, int64_t scale,
                      int64_t bound) {
  std::string text = index;
  if (position != 1) text = "(" + text + " / " + str(position) + ")";
  if (position * extent < bound) text = "(" + text + " % " + str(extent) + ")";
  if (scale != 1) text += " * " + str(scale);
  return text;
}

int64_t evaluate_terms(const std::vector<Term>& terms, int64_t index) {
  int64_t sum = 0;
  for (const Term& term : terms) sum += ((index / term.position) % term.extent) * term.scale;
  return sum;
}

bool split_mode(const layout::Layout& mode, const std::vector<int64_t>& shape,
                std::vector<std::vector<Term>>* terms) {
  const std::vector<int64_t> extents = layout::leaves(mode.shape());
  const std::vector<int64_t> strides = layout::leaves(mode.stride());
  terms->assign(shape.size(), {});
  std::vector<int64_t> axis_stride(shape.size(), 1);  // column-major: axis 0 fastest
  for (size_t k = 1; k < shape.size(); ++k) axis_stride[k] = axis_stride[k - 1] * shape[k - 1];
  int64_t position = 1;
  for (size_t i = 0; i < extents.size(); ++i) {
    const int64_t s = extents[i], d = strides[i];
    if (s > 1 && d != 0) {
      if (shape.empty()) return false;
      size_t axis = 0;
      for (size_t k = 0; k < shape.size(); ++k) {
        if (axis_stride[k] <= d) axis = k;
      }
      if (d % axis_stride[axis] != 0) return false;
      const int64_t scale = d / axis_stride[axis];
      if (scale * (s - 1) >= shape[axis]) return false;
      (*terms)[axis].push_back({position, s, scale});
    }
    position *= s;
  }
  return true;
}

std::optional<SeparableCoords> separable_coords(const layout::TVLayout& tv,
                                                const std::vector<int64_t>& shape) {
  SeparableCoords coords;
  coords.threads = tv.threads();
  coords.slots = tv.values();
  if (!split_mode(tv.layout.mode(0), shape, &coords.thread_terms) ||
      !split_mode(tv.layout.mode(1), shape, &coords.slot_terms)) {
    return std::nullopt;
  }
  for (int64_t t = 0; t < coords.threads; ++t) {
    for (int64_t v = 0; v < coords.slots; ++v) {
      std::vector<int64_t> expected = matile::coordinates_of(tv.index(t, v), shape);
      for (size_t k = 0; k < shape.size(); ++k) {
        if (evaluate_terms(coords.thread_terms[k], t) + evaluate_terms(coords.slot_terms[k], v) !=
            expected[k]) {
          return std::nullopt;
        }
      }
    }
  }
  return coords;
}

std::optional<IndexRange> binary_range(scalar::BinaryOp binary, IndexRange a, IndexRange b) {
  using scalar::BinaryOp;
  constexpr int64_t kLimit = int64_t{1} << 40;  // far from overflow, far beyond any index
  auto bounded = [&](int64_t lo, int64_t hi) -> std::optional<IndexRange> {
    if (lo < -kLimit || hi > kLimit) return std::nullopt;
    return IndexRange{lo, hi};
  };
  for (int64_t v : {a.lo, a.hi, b.lo, b.hi}) {
    if (v < -kLimit || v > kLimit) return std::nullopt;
  }
  switch (binary) {
    case BinaryOp::Add: return bounded(a.lo + b.lo, a.hi + b.hi);
    case BinaryOp::Sub: return bounded(a.lo - b.hi, a.hi - b.lo);
    case BinaryOp::Mul: {
      const int64_t p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
      return bounded(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
    }
    case BinaryOp::Max: return bounded(std::max(a.lo, b.lo), std::max(a.hi, b.hi));
    case BinaryOp::Min: return bounded(std::min(a.lo, b.lo), std::min(a.hi, b.hi));
    case BinaryOp::FloorDiv:
      // Floor division by a positive constant is monotonic.
      if (b.lo != b.hi || b.lo <= 0) return std::nullopt;
      return bounded(a.lo >= 0 ? a.lo / b.lo : -((-a.lo + b.lo - 1) / b.lo),
                     a.hi >= 0 ? a.hi / b.lo : -((-a.hi + b.lo - 1) / b.lo));
    case BinaryOp::Mod:
      if (b.lo != b.hi || b.lo <= 0) return std::nullopt;
      if (a.lo >= 0 && a.hi < b.lo) return a;
      return IndexRange{0, b.lo - 1};
    case BinaryOp::Div: break;
  }
  return std::nullopt;
}

std::string axis_suffix(size_t axis, size_t rank) {
  if (rank == 2) return axis == 0 ? "row" : "col";
  return "c" + std::to_string(axis);
}

}  // namespace nautilus::codegen::detail
