#include "core/codegen/emit_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <optional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "core/layout/int_tuple.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"

namespace nautilus::codegen {
namespace {

using matile::Kernel;
using matile::LayoutKind;
using matile::Module;
using matile::Op;
using matile::OpKind;
using matile::RegisterLayout;
using matile::SharedAlloc;
using matile::SharedRef;
using matile::Value;

// Thrown inside the emitter and turned into a CodegenError at the entry point, so that deep
// helpers need not thread a Result through every string they build.
struct EmitFailure {
  CodegenError::Kind kind;
  std::string message;
};

[[noreturn]] void unsupported(const std::string& message) {
  throw EmitFailure{CodegenError::Kind::Unsupported, message};
}
[[noreturn]] void invalid(const std::string& message) {
  throw EmitFailure{CodegenError::Kind::InvalidInput, message};
}

// ---------------------------------------------------------------------------------------------
// Text helpers

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

// `expression` wrapped in parentheses unless it is a single name or number, so that it can be
// multiplied safely.
std::string parenthesized(const std::string& expression) {
  const bool simple = expression.find_first_of(" +-*/%?") == std::string::npos ||
                      (expression.front() == '(' && expression.back() == ')' &&
                       expression.find(')') == expression.size() - 1);
  return simple ? expression : "(" + expression + ")";
}

// A float literal that round-trips through f32, with the special values spelled as bit patterns
// (NVRTC has no INFINITY macro without extra headers).
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
  }
  return "float";
}

bool is_narrow_float(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }

// `expr` (of `dtype`) as a float.
std::string to_float(const std::string& expr, DType dtype) {
  switch (dtype) {
    case DType::BF16: return "__bfloat162float(" + expr + ")";
    case DType::F16: return "__half2float(" + expr + ")";
    case DType::Index: return "static_cast<float>(" + expr + ")";
    case DType::Bool: return "(" + expr + " ? 1.0f : 0.0f)";
    default: return expr;
  }
}

// A float expression converted (rounded to nearest even) to `dtype`.
std::string from_float(const std::string& expr, DType dtype) {
  switch (dtype) {
    case DType::BF16: return "__float2bfloat16_rn(" + expr + ")";
    case DType::F16: return "__float2half_rn(" + expr + ")";
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

// "((t / 4) % 8) * 16" with the trivial parts left out.
std::string term_text(const std::string& index, int64_t position, int64_t extent, int64_t scale,
                      int64_t bound) {
  std::string text = index;
  if (position != 1) text = "(" + text + " / " + str(position) + ")";
  if (position * extent < bound) text = "(" + text + " % " + str(extent) + ")";
  if (scale != 1) text += " * " + str(scale);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Separable coordinates of a TV layout: tile coordinate k of (thread t, slot v) is
//   sum over thread leaves ((t / p) % s) * c  +  sum over slot leaves ((v / p) % s) * c,
// each leaf moving along exactly one axis. Checked against the layout on every (t, v).

struct Term {
  int64_t position = 1;  // product of the extents of the leaves before this one
  int64_t extent = 1;
  int64_t scale = 1;     // coordinate units per step along its axis
};

struct SeparableCoords {
  std::vector<std::vector<Term>> thread_terms;  // per axis
  std::vector<std::vector<Term>> slot_terms;    // per axis
  int64_t threads = 1;
  int64_t slots = 1;
};

int64_t evaluate_terms(const std::vector<Term>& terms, int64_t index) {
  int64_t sum = 0;
  for (const Term& term : terms) sum += ((index / term.position) % term.extent) * term.scale;
  return sum;
}

// Assigns each leaf of `mode` to the tile axis it moves along; false when a leaf straddles axes.
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

// The values a uniform index scalar can take: grid and loop variables, constants and the
// arithmetic on them, widened by interval arithmetic (lo <= value <= hi). Used to drop bounds
// checks that can never fail.
struct IndexRange {
  int64_t lo = 0;
  int64_t hi = 0;
};

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

// ---------------------------------------------------------------------------------------------
// The fixed device helpers every translation unit starts with.

constexpr const char* kPrelude = R"(#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace nautilus_device {

// Floor division and modulo with the divisor's sign (the IR's index semantics).
__device__ __forceinline__ int floor_div(int a, int b) {
  const int q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int floor_mod(int a, int b) {
  const int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// CuTe's Swizzle<bits, base, shift> on an element offset: XOR the `bits` bits at
// [base + shift, base + shift + bits) into those at [base, base + bits).
__device__ __forceinline__ int swizzle(int offset, int bits, int base, int shift) {
  const int mask = ((1 << bits) - 1) << base;
  return shift >= 0 ? offset ^ ((offset >> shift) & mask)
                    : offset ^ ((offset & mask) << -shift);
}

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ unsigned pack2(__nv_bfloat16 low, __nv_bfloat16 high) {
  return static_cast<unsigned>(__bfloat16_as_ushort(low)) |
         (static_cast<unsigned>(__bfloat16_as_ushort(high)) << 16);
}
__device__ __forceinline__ unsigned pack2(__half low, __half high) {
  return static_cast<unsigned>(__half_as_ushort(low)) |
         (static_cast<unsigned>(__half_as_ushort(high)) << 16);
}
__device__ __forceinline__ void unpack2(unsigned bits, __nv_bfloat16& low, __nv_bfloat16& high) {
  low = __ushort_as_bfloat16(static_cast<unsigned short>(bits & 0xffffu));
  high = __ushort_as_bfloat16(static_cast<unsigned short>(bits >> 16));
}
__device__ __forceinline__ void unpack2(unsigned bits, __half& low, __half& high) {
  low = __ushort_as_half(static_cast<unsigned short>(bits & 0xffffu));
  high = __ushort_as_half(static_cast<unsigned short>(bits >> 16));
}

// d += a * b for one m16n8k16 atom: a holds a_0..a_7, b holds b_0..b_3, d holds c_0..c_3.
__device__ __forceinline__ void mma_m16n8k16(float* d, const __nv_bfloat16* a,
                                             const __nv_bfloat16* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(pack2(a[0], a[1])), "r"(pack2(a[2], a[3])), "r"(pack2(a[4], a[5])),
        "r"(pack2(a[6], a[7])), "r"(pack2(b[0], b[1])), "r"(pack2(b[2], b[3])));
}
__device__ __forceinline__ void mma_m16n8k16(float* d, const __half* a, const __half* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(pack2(a[0], a[1])), "r"(pack2(a[2], a[3])), "r"(pack2(a[4], a[5])),
        "r"(pack2(a[6], a[7])), "r"(pack2(b[0], b[1])), "r"(pack2(b[2], b[3])));
}

// ldmatrix.x4: this lane supplies the row address `address`; registers 0 and 1 land in
// low[0..3], registers 2 and 3 in high[0..3] (two 16-bit elements per register, low half first).
template <typename T>
__device__ __forceinline__ void ldmatrix_x4(T* low, T* high, unsigned address) {
  unsigned r0, r1, r2, r3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(address));
  unpack2(r0, low[0], low[1]);
  unpack2(r1, low[2], low[3]);
  unpack2(r2, high[0], high[1]);
  unpack2(r3, high[2], high[3]);
}
template <typename T>
__device__ __forceinline__ void ldmatrix_x4_trans(T* low, T* high, unsigned address) {
  unsigned r0, r1, r2, r3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(address));
  unpack2(r0, low[0], low[1]);
  unpack2(r1, low[2], low[3]);
  unpack2(r2, high[0], high[1]);
  unpack2(r3, high[2], high[3]);
}

// cp.async of 16 bytes; bytes past `source_bytes` (0..16) are zero-filled.
__device__ __forceinline__ void cp_async_16(unsigned destination, const void* source,
                                            int source_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :
               : "r"(destination), "l"(source), "r"(source_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

}  // namespace nautilus_device

using namespace nautilus_device;
)";

// The emitter's own model of the swizzle helper above, checked against core/layout's on a
// range of offsets so that the printed formula cannot drift from the layout algebra.
int64_t device_swizzle(int64_t offset, const layout::Swizzle& s) {
  const int64_t mask = ((int64_t{1} << s.bits) - 1) << s.base;
  return s.shift >= 0 ? offset ^ ((offset >> s.shift) & mask) : offset ^ ((offset & mask) << -s.shift);
}

// ---------------------------------------------------------------------------------------------

class KernelEmitter : public matile::Visitor {
 public:
  KernelEmitter(const Kernel& kernel, std::string symbol, const EmitOptions& options)
      : kernel_(kernel), symbol_(std::move(symbol)), options_(options) {}

  std::string emit(EmittedKernel* launch) {
    // The body goes to its own stream first: it decides which layouts need thread coordinates,
    // which are then declared at the top of the kernel.
    for (const scalar::Buffer& buffer : kernel_.params) buffer_name(buffer);
    for (const SharedAlloc& alloc : kernel_.shared) shared_name(alloc);
    std::vector<std::string> grid_lines = grid_mapping(launch);
    indent_ = 1;
    visit(*kernel_.body);
    std::ostringstream out;
    out << "// Kernel " << symbol_ << " (MA kernel " << kernel_.name << "): grid ";
    launch->symbol = symbol_;
    launch->ir_name = kernel_.name;
    launch->block = {kernel_.threads(), 1, 1};
    launch->dynamic_shared_bytes = kernel_.shared_bytes;
    launch->params = kernel_.params;
    out << "(" << launch->grid[0] << ", " << launch->grid[1] << ", " << launch->grid[2] << "), "
        << kernel_.threads() << " threads, " << kernel_.shared_bytes
        << " bytes of dynamic shared memory.\n";
    out << "extern \"C\" __global__ void __launch_bounds__(" << kernel_.threads() << ") " << symbol_
        << "(";
    for (size_t i = 0; i < kernel_.params.size(); ++i) {
      const scalar::Buffer& buffer = kernel_.params[i];
      out << (i ? ",\n    " : "\n    ")
          << (buffer->role == scalar::BufferRole::Input ? "const " : "") << c_type(buffer->dtype)
          << "* __restrict__ " << buffer_name(buffer);
    }
    out << ") {\n";
    if (!kernel_.shared.empty()) {
      out << "  extern __shared__ __align__(128) unsigned char shared_memory[];\n";
      for (const SharedAlloc& alloc : kernel_.shared) {
        out << "  // " << alloc.name << ": " << dtype_name(alloc.dtype) << "[";
        for (size_t k = 0; k < alloc.shape.size(); ++k) out << (k ? ", " : "") << alloc.shape[k];
        out << "] x " << alloc.stages << " stage" << (alloc.stages == 1 ? "" : "s") << ", bytes ["
            << alloc.byte_offset << ", " << alloc.byte_offset + alloc.byte_size << ")"
            << (alloc.purpose.empty() ? "" : ": " + alloc.purpose) << "\n";
        out << "  " << c_type(alloc.dtype) << "* const " << shared_name(alloc) << " = reinterpret_cast<"
            << c_type(alloc.dtype) << "*>(shared_memory + " << alloc.byte_offset << ");\n";
      }
    }
    out << "  const int tid = threadIdx.x;\n";
    if (uses_warp_) out << "  const int lane = tid % 32;\n  const int warp = tid / 32;\n";
    for (const std::string& line : grid_lines) out << "  " << line << "\n";
    if (!layout_lines_.empty()) {
      out << "  // Thread part of the tile coordinates of each register layout.\n";
      for (const std::string& line : layout_lines_) out << "  " << line << "\n";
    }
    if (!hoisted_lines_.empty()) {
      out << "  // Per-thread parts of shared and global addresses, computed once: inside loops an\n"
             "  // access adds only its stage and a constant.\n";
      for (const std::string& line : hoisted_lines_) out << "  " << line << "\n";
    }
    out << body_.str() << "}\n";
    return out.str();
  }

 private:
  // -------------------------------------------------------------------------------------------
  // Names

  std::string unique(const std::string& wanted) {
    std::string name = sanitize(wanted);
    // Avoid the names the kernel itself declares and C++ keywords a spec could collide with.
    static const std::set<std::string> reserved = {
        "tid", "lane", "warp", "shared_memory", "s", "k", "int", "float", "bool", "for", "if",
        "else", "do", "while", "const", "return", "char", "double", "long", "short", "unsigned",
        "signed", "void", "auto", "case", "switch", "default", "break", "continue", "new",
        "delete", "this", "true", "false", "class", "struct", "union", "enum", "template",
        "typename", "namespace", "using", "static", "extern", "register", "volatile",
        // locals and helpers of the emitted code
        "j", "q", "mi", "ni", "valid", "source", "sum", "pair", "lane_row", "lane_col", "i0", "i1", "i2",
        "i3", "i4", "i5", "i6", "i7", "swizzle", "floor_div", "floor_mod", "pack2", "unpack2",
        "shared_address", "mma_m16n8k16", "ldmatrix_x4", "ldmatrix_x4_trans", "cp_async_16",
        "cp_async_commit", "cp_async_wait", "max", "min", "abs", "nautilus_device"};
    std::string candidate = name;
    for (int n = 1; reserved.count(candidate) || used_.count(candidate); ++n) {
      candidate = name + "_" + std::to_string(n);
    }
    used_.insert(candidate);
    return candidate;
  }

  std::string buffer_name(const scalar::Buffer& buffer) {
    auto found = buffer_names_.find(buffer.get());
    if (found != buffer_names_.end()) return found->second;
    return buffer_names_[buffer.get()] = unique(buffer->name);
  }

  std::string shared_name(const SharedAlloc& alloc) {
    auto found = shared_names_.find(&alloc);
    if (found != shared_names_.end()) return found->second;
    return shared_names_[&alloc] = unique(alloc.name);
  }

  const std::string& name_of(const Value& value) {
    auto found = names_.find(value.get());
    if (found == names_.end()) invalid("value %" + value->name + " is used before it is emitted");
    return found->second;
  }

  // Declares storage for `value` ("float x[32];" or "float x;") and returns its name.
  std::string declare(const Value& value) {
    std::string name = unique(value->name);
    names_[value.get()] = name;
    line(std::string(c_type(value->type.dtype)) + " " + name + slots_suffix(value) + ";");
    return name;
  }

  static std::string slots_suffix(const Value& value) {
    const int64_t slots = value->layout.slots();
    return slots == 1 ? "" : "[" + str(slots) + "]";
  }

  // Slot `slot` (an expression) of `value`.
  std::string at(const Value& value, const std::string& slot) {
    return value->layout.slots() == 1 ? name_of(value) : name_of(value) + "[" + slot + "]";
  }

  // -------------------------------------------------------------------------------------------
  // Output

  void line(const std::string& text) {
    body_ << std::string(static_cast<size_t>(indent_) * 2, ' ') << text << "\n";
  }

  // `#pragma unroll` + a for over the slots of `value`, calling `body` with the slot variable;
  // a one-slot value gets the body once with slot "0".
  void for_slots(int64_t slots, const std::function<void(const std::string&)>& body) {
    if (slots == 1) {
      body("0");
      return;
    }
    line("#pragma unroll");
    line("for (int s = 0; s < " + str(slots) + "; ++s) {");
    ++indent_;
    body("s");
    --indent_;
    line("}");
  }

  // -------------------------------------------------------------------------------------------
  // Grid

  std::vector<std::string> grid_mapping(EmittedKernel* launch) {
    std::vector<std::string> lines;
    const auto& grid = kernel_.grid;
    bool direct = grid.size() <= 3;
    for (size_t i = 1; i < grid.size() && direct; ++i) direct = grid[i].extent <= 65535;
    if (direct) {
      static const char* dims[] = {"x", "y", "z"};
      for (size_t i = 0; i < grid.size(); ++i) {
        launch->grid[i] = grid[i].extent;
        const std::string name = unique(grid[i].var->name);
        names_[grid[i].var.get()] = name;
        ranges_[grid[i].var.get()] = {0, grid[i].extent - 1};
        lines.push_back("const int " + name + " = blockIdx." + dims[i] + ";  // 0.." +
                        str(grid[i].extent - 1));
      }
      return lines;
    }
    // More than three axes (or large y/z extents): one linear x index, row-major over the axes.
    int64_t total = 1;
    for (const auto& axis : grid) total *= axis.extent;
    launch->grid = {total, 1, 1};
    int64_t inner = 1;
    std::vector<std::string> reversed;
    for (size_t i = grid.size(); i-- > 0;) {
      const std::string name = unique(grid[i].var->name);
      names_[grid[i].var.get()] = name;
      ranges_[grid[i].var.get()] = {0, grid[i].extent - 1};
      reversed.push_back("const int " + name + " = " +
                         term_text("static_cast<int>(blockIdx.x)", inner, grid[i].extent, 1, total) +
                         ";  // 0.." + str(grid[i].extent - 1));
      inner *= grid[i].extent;
    }
    lines.assign(reversed.rbegin(), reversed.rend());
    return lines;
  }

  // -------------------------------------------------------------------------------------------
  // Layout coordinates

  struct LayoutInfo {
    SeparableCoords coords;
    std::vector<std::string> thread_vars;  // per axis
  };

  // The coordinates of `tv` over `shape`, declaring its thread part on first use.
  const LayoutInfo& layout_info(const layout::TVLayout& tv, const std::vector<int64_t>& shape,
                                const std::string& what) {
    std::ostringstream key;
    key << layout::to_string(tv.layout.shape()) << ":" << layout::to_string(tv.layout.stride())
        << " over ";
    for (int64_t extent : shape) key << extent << ",";
    auto found = layouts_.find(key.str());
    if (found != layouts_.end()) return found->second;
    std::optional<SeparableCoords> coords = separable_coords(tv, shape);
    if (!coords) {
      unsupported(what + ": the tile coordinates of layout " + key.str() +
                  " do not split into a thread part and a slot part");
    }
    if (coords->threads > kernel_.threads()) {
      invalid(what + ": layout " + key.str() + " has more threads than the CTA");
    }
    LayoutInfo info;
    info.coords = *coords;
    const std::string prefix = "l" + std::to_string(layouts_.size());
    layout_lines_.push_back("// " + key.str());
    for (size_t k = 0; k < shape.size(); ++k) {
      std::string expression;
      for (const Term& term : coords->thread_terms[k]) {
        expression += (expression.empty() ? "" : " + ") +
                      term_text("tid", term.position, term.extent, term.scale, coords->threads);
      }
      const std::string var = unique(prefix + "_" + axis_suffix(k, shape.size()));
      layout_lines_.push_back("const int " + var + " = " + (expression.empty() ? "0" : expression) + ";");
      info.thread_vars.push_back(var);
    }
    return layouts_.emplace(key.str(), info).first->second;
  }

  // Tile coordinate `axis` of slot `slot` (the unrolled slot variable) in `info`'s layout.
  static std::string coordinate(const LayoutInfo& info, size_t axis, const std::string& slot) {
    std::string expression = info.thread_vars[axis];
    for (const Term& term : info.coords.slot_terms[axis]) {
      expression += " + " + term_text(slot, term.position, term.extent, term.scale, info.coords.slots);
    }
    return info.coords.slot_terms[axis].empty() ? expression : "(" + expression + ")";
  }

  std::vector<std::string> coordinates(const Value& value, const std::string& slot,
                                       const std::string& what) {
    const LayoutInfo& info = layout_info(value->layout.tv, value->type.shape, what);
    std::vector<std::string> coords;
    for (size_t k = 0; k < value->type.shape.size(); ++k) coords.push_back(coordinate(info, k, slot));
    return coords;
  }

  // The column-major element index of slot `slot` of `value` (axis 0 fastest, as TV layouts
  // count), as an expression.
  std::string element_index(const Value& value, const std::string& slot, const std::string& what) {
    const std::vector<std::string> c = coordinates(value, slot, what);
    std::string index;
    int64_t stride = 1;
    for (size_t k = 0; k < c.size(); ++k) {
      index += (index.empty() ? "" : " + ") +
               (stride == 1 ? c[k] : parenthesized(c[k]) + " * " + str(stride));
      stride *= value->type.shape[k];
    }
    return index.empty() ? "0" : index;
  }

  // -------------------------------------------------------------------------------------------
  // Shared memory addressing

  const SharedAlloc& alloc_of(const SharedRef& ref) {
    if (ref.alloc < 0 || ref.alloc >= static_cast<int>(kernel_.shared.size())) {
      invalid("shared reference to allocation " + std::to_string(ref.alloc) + " of " +
              std::to_string(kernel_.shared.size()));
    }
    return kernel_.shared[static_cast<size_t>(ref.alloc)];
  }

  // The element offset (from the allocation's base pointer) of tile coordinate `tile` of `ref`.
  std::string shared_offset(const SharedRef& ref, const std::vector<std::string>& tile) {
    const SharedAlloc& alloc = alloc_of(ref);
    const layout::Layout& inner = alloc.layout.layout;
    const size_t rank = alloc.shape.size();
    if (tile.size() != rank || ref.offsets.size() != rank) {
      invalid("shared reference to " + alloc.name + " has the wrong rank");
    }
    std::vector<int64_t> strides;
    if (rank == 1 && inner.shape().is_leaf()) {
      strides.push_back(inner.stride().value());
    } else {
      if (inner.rank() != static_cast<int>(rank)) {
        unsupported("shared layout of " + alloc.name + " does not have one mode per axis");
      }
      for (size_t k = 0; k < rank; ++k) {
        const layout::IntTuple& mode_shape = inner.shape().mode(static_cast<int>(k));
        if (!mode_shape.is_leaf() || mode_shape.value() != alloc.shape[k]) {
          unsupported("shared layout of " + alloc.name + " has a hierarchical mode");
        }
        strides.push_back(inner.stride().mode(static_cast<int>(k)).value());
      }
    }
    std::string linear;
    for (size_t k = 0; k < rank; ++k) {
      const std::string coordinate = parenthesized(tile[ref.transposed ? rank - 1 - k : k]);
      std::string term = ref.offsets[k] != 0 ? "(" + coordinate + " + " + str(ref.offsets[k]) + ")"
                                             : coordinate;
      if (strides[k] == 0) continue;
      if (strides[k] != 1) term += " * " + str(strides[k]);
      linear += (linear.empty() ? "" : " + ") + term;
    }
    if (linear.empty()) linear = "0";
    const layout::Swizzle& swizzle = alloc.layout.swizzle;
    if (!swizzle.is_identity()) {
      for (int64_t offset = 0; offset < 1 << 14; ++offset) {
        if (device_swizzle(offset, swizzle) != swizzle(offset)) {
          throw EmitFailure{CodegenError::Kind::InvalidInput,
                            "internal: the device swizzle differs from the layout algebra"};
        }
      }
      linear = "swizzle(" + linear + ", " + std::to_string(swizzle.bits) + ", " +
               std::to_string(swizzle.base) + ", " + std::to_string(swizzle.shift) + ")";
    }
    if (ref.stage) linear = name_of(ref.stage) + " * " + str(alloc.stage_elements) + " + " + linear;
    return linear;
  }

  // A variable computed once at the top of the kernel holding `expression` (deduplicated).
  std::string hoisted(const std::string& type, const std::string& wanted, const std::string& expression) {
    const std::string key = type + " " + expression;
    auto found = hoisted_names_.find(key);
    if (found != hoisted_names_.end()) return found->second;
    const std::string name = unique(wanted);
    hoisted_lines_.push_back("const " + type + " " + name + " = " + expression + ";");
    return hoisted_names_[key] = name;
  }

  // The 32-bit shared-window address of allocation `alloc`'s first byte.
  std::string shared_window_base(const SharedAlloc& alloc) {
    const std::string pointer = shared_name(alloc);
    return hoisted("unsigned", pointer + "_addr", "shared_address(" + pointer + ")");
  }

  // Tile coordinates of one access split into a per-thread part and a constant: axis a is
  // thread_exprs[a] (valid at the top of the kernel; thread_value(t, a) its value in thread t)
  // plus constants[a].
  struct SplitCoords {
    std::vector<std::string> thread_exprs;
    std::function<int64_t(int64_t, size_t)> thread_value;
    int64_t threads = 1;
    std::vector<int64_t> constants;
  };

  // Element strides of the allocation's axes (no swizzle), or Unsupported.
  std::vector<int64_t> shared_strides(const SharedAlloc& alloc) {
    const layout::Layout& inner = alloc.layout.layout;
    const size_t rank = alloc.shape.size();
    std::vector<int64_t> strides;
    if (rank == 1 && inner.shape().is_leaf()) {
      strides.push_back(inner.stride().value());
      return strides;
    }
    if (inner.rank() != static_cast<int>(rank)) {
      unsupported("shared layout of " + alloc.name + " does not have one mode per axis");
    }
    for (size_t k = 0; k < rank; ++k) {
      const layout::IntTuple& mode_shape = inner.shape().mode(static_cast<int>(k));
      if (!mode_shape.is_leaf() || mode_shape.value() != alloc.shape[k]) {
        unsupported("shared layout of " + alloc.name + " has a hierarchical mode");
      }
      strides.push_back(inner.stride().mode(static_cast<int>(k)).value());
    }
    return strides;
  }

  // The 32-bit shared address (an `unsigned` expression) of `coords` in `ref`. The swizzled
  // per-thread part is hoisted to the top of the kernel; the access adds its stage and a
  // constant. Swizzle<B,M,S> XORs row bits into column bits, so swizzle(base + c) is
  // swizzle(base) + d only when c leaves the bits the XOR reads and writes alone (or adds
  // whole swizzle periods), and swizzle(base) ^ d when c only sets bits base never has.
  // Which form holds is checked here for every thread with the layout algebra; neither holding
  // falls back to swizzling the whole offset in place.
  std::string shared_address_of(const SharedRef& ref, const SplitCoords& coords) {
    const SharedAlloc& alloc = alloc_of(ref);
    const size_t rank = alloc.shape.size();
    if (coords.thread_exprs.size() != rank || coords.constants.size() != rank || ref.offsets.size() != rank) {
      invalid("shared reference to " + alloc.name + " has the wrong rank");
    }
    const std::vector<int64_t> strides = shared_strides(alloc);
    const int64_t bytes = dtype_bytes(alloc.dtype);
    auto tile_axis = [&](size_t k) { return ref.transposed ? rank - 1 - k : k; };
    std::string thread_linear;
    std::vector<int64_t> axis_constant(rank, 0);  // per allocation axis, in elements
    for (size_t k = 0; k < rank; ++k) {
      if (strides[k] == 0) continue;
      axis_constant[k] = (coords.constants[tile_axis(k)] + ref.offsets[k]) * strides[k];
      const std::string& part = coords.thread_exprs[tile_axis(k)];
      if (part == "0") continue;
      thread_linear += (thread_linear.empty() ? "" : " + ") +
                       (strides[k] == 1 ? part : parenthesized(part) + " * " + str(strides[k]));
    }
    if (thread_linear.empty()) thread_linear = "0";
    auto thread_base = [&](int64_t t) {
      int64_t sum = 0;
      for (size_t k = 0; k < rank; ++k) sum += coords.thread_value(t, tile_axis(k)) * strides[k];
      return sum;
    };
    const layout::Swizzle& swizzle = alloc.layout.swizzle;
    auto swizzled = [&](int64_t offset) { return swizzle.is_identity() ? offset : swizzle(offset); };
    std::vector<int64_t> bases(static_cast<size_t>(coords.threads));
    for (int64_t t = 0; t < coords.threads; ++t) bases[static_cast<size_t>(t)] = thread_base(t);
    const std::optional<SwizzleSplit> form = split_swizzled_offset(swizzled, bases, axis_constant);
    std::string address = shared_window_base(alloc);
    if (ref.stage) address += " + " + name_of(ref.stage) + " * " + str(alloc.stage_elements * bytes) + "u";
    if (form) {
      std::string lane_offset = thread_linear;
      if (!swizzle.is_identity()) {
        check_device_swizzle(swizzle);
        lane_offset = "swizzle(" + thread_linear + ", " + std::to_string(swizzle.bits) + ", " +
                      std::to_string(swizzle.base) + ", " + std::to_string(swizzle.shift) + ")";
      }
      const std::string lane = hoisted("unsigned", "lane_offset",
                                       parenthesized(lane_offset) + " * " + str(bytes) + "u");
      // The added constant goes last so that it can become the instruction's immediate offset.
      const int64_t x = form->xor_part, a = form->add_part;
      const std::string lane_part = x ? "(" + lane + " ^ " + str(x * bytes) + "u)" : lane;
      return "(" + address + " + " + lane_part + ")" + (a ? " + " + str(a * bytes) + "u" : "");
    }
    std::vector<std::string> tile;
    for (size_t a = 0; a < rank; ++a) {
      tile.push_back(coords.constants[a] ? parenthesized(coords.thread_exprs[a]) + " + " + str(coords.constants[a])
                                         : coords.thread_exprs[a]);
    }
    return shared_window_base(alloc) + " + static_cast<unsigned>(" + shared_offset(ref, tile) + ") * " +
           str(bytes) + "u";
  }

  void check_device_swizzle(const layout::Swizzle& swizzle) {
    for (int64_t offset = 0; offset < 1 << 14; ++offset) {
      if (device_swizzle(offset, swizzle) != swizzle(offset)) {
        throw EmitFailure{CodegenError::Kind::InvalidInput,
                          "internal: the device swizzle differs from the layout algebra"};
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Regions and ops

  // Every op is preceded by its MA text as a comment (and its spec statement when that
  // changes). A Yield prints nothing: its For assigns the carried values after the body.
  using matile::Visitor::visit;
  void visit(const Op& op) override {
    if (op.kind == OpKind::Yield) return;
    provenance_comment(op);
    op_comment(op);
    matile::Visitor::visit(op);
  }

  void provenance_comment(const Op& op) {
    const int statement = op.provenance.statement;
    if (statement < 0 || statement == last_statement_) return;
    last_statement_ = statement;
    std::string text = "// spec statement " + std::to_string(statement);
    if (options_.source != nullptr && op.provenance.range.valid &&
        op.provenance.range.begin <= options_.source->text().size()) {
      const LineColumn where = options_.source->line_column(op.provenance.range.begin);
      std::string quoted(options_.source->line_text(where.line));
      size_t first = quoted.find_first_not_of(" \t");
      quoted = first == std::string::npos ? "" : quoted.substr(first);
      std::string file = options_.source->path();
      size_t slash = file.find_last_of('/');
      if (slash != std::string::npos) file = file.substr(slash + 1);
      text = "// spec " + file + ":" + std::to_string(where.line) + "  " + quoted;
    }
    body_ << "\n";
    line(text);
  }

  void op_comment(const Op& op) {
    std::string text = op.kind == OpKind::For ? matile::op_label(op) : matile::print_op(kernel_, op);
    const size_t newline = text.find('\n');
    if (newline != std::string::npos) text = text.substr(0, newline);
    const size_t first = text.find_first_not_of(' ');
    line("// " + (first == std::string::npos ? text : text.substr(first)));
  }

  void visit_elementwise(const Op& op) override { elementwise(op); }
  void visit_register_move(const Op& op) override { register_move(op); }
  void visit_ConvertLayout(const Op& op) override {
    return op.via_shared ? convert_via_shared(op) : register_move(op);
  }
  void visit_Reduce(const Op& op) override { reduce(op); }
  void visit_Mma(const Op& op) override { mma(op); }
  void visit_FmaDot(const Op& op) override { fma_dot(op); }
  void visit_GlobalLoad(const Op& op) override { global_load(op); }
  void visit_GlobalStore(const Op& op) override { global_store(op); }
  void visit_AsyncCopy(const Op& op) override { async_copy(op); }
  void visit_CommitGroup(const Op&) override { line("cp_async_commit();"); }
  void visit_WaitGroup(const Op& op) override { line("cp_async_wait<" + str(op.extent) + ">();"); }
  void visit_Barrier(const Op&) override { line("__syncthreads();"); }
  void visit_SharedLoad(const Op& op) override { shared_load(op); }
  void visit_SharedStore(const Op& op) override { shared_store(op); }
  void visit_For(const Op& op) override { for_loop(op); }
  // Every kind above has its CUDA; an op reaching here is a kind without any.
  void visit_op(const Op& op) override {
    unsupported(std::string("no CUDA for MA op kind ") + matile::op_kind_name(op.kind));
  }

  std::string unary_expression(scalar::UnaryOp unary, const std::string& x, DType dtype) {
    if (dtype == DType::Index) {
      return unary == scalar::UnaryOp::Abs ? "abs(" + x + ")" : "-" + x;
    }
    const std::string f = to_float(x, dtype);
    std::string value;
    switch (unary) {
      case scalar::UnaryOp::Neg: value = "-" + f; break;
      case scalar::UnaryOp::Exp: value = "expf(" + f + ")"; break;
      case scalar::UnaryOp::Exp2: value = "exp2f(" + f + ")"; break;
      case scalar::UnaryOp::Log: value = "logf(" + f + ")"; break;
      case scalar::UnaryOp::Log2: value = "log2f(" + f + ")"; break;
      case scalar::UnaryOp::Sqrt: value = "sqrtf(" + f + ")"; break;
      case scalar::UnaryOp::Rsqrt: value = "rsqrtf(" + f + ")"; break;
      case scalar::UnaryOp::Tanh: value = "tanhf(" + f + ")"; break;
      case scalar::UnaryOp::Sigmoid: value = "1.0f / (1.0f + expf(-" + f + "))"; break;
      case scalar::UnaryOp::Abs: value = "fabsf(" + f + ")"; break;
    }
    return from_float(value, dtype);
  }

  std::string binary_expression(scalar::BinaryOp binary, const std::string& a, const std::string& b,
                                DType dtype) {
    using scalar::BinaryOp;
    if (dtype == DType::Index) {
      switch (binary) {
        case BinaryOp::Add: return a + " + " + b;
        case BinaryOp::Sub: return a + " - " + b;
        case BinaryOp::Mul: return a + " * " + b;
        case BinaryOp::FloorDiv: return "floor_div(" + a + ", " + b + ")";
        case BinaryOp::Mod: return "floor_mod(" + a + ", " + b + ")";
        case BinaryOp::Max: return "max(" + a + ", " + b + ")";
        case BinaryOp::Min: return "min(" + a + ", " + b + ")";
        case BinaryOp::Div: break;
      }
      invalid("division of index values");
    }
    const std::string fa = to_float(a, dtype), fb = to_float(b, dtype);
    std::string value;
    switch (binary) {
      case BinaryOp::Add: value = fa + " + " + fb; break;
      case BinaryOp::Sub: value = fa + " - " + fb; break;
      case BinaryOp::Mul: value = fa + " * " + fb; break;
      case BinaryOp::Div: value = fa + " / " + fb; break;
      case BinaryOp::Max: value = "fmaxf(" + fa + ", " + fb + ")"; break;
      case BinaryOp::Min: value = "fminf(" + fa + ", " + fb + ")"; break;
      case BinaryOp::FloorDiv:
      case BinaryOp::Mod: invalid("floor division of float values");
    }
    return from_float(value, dtype);
  }

  void elementwise(const Op& op) {
    const Value& result = op.results[0];
    const DType dtype = result->type.dtype;
    // A one-slot result (a uniform scalar, mostly index arithmetic) is one const definition.
    const bool scalar_form = result->layout.slots() == 1;
    if (scalar_form) {
      names_[result.get()] = unique(result->name);
    } else {
      declare(result);
    }
    if (op.kind == OpKind::Cast && paired_narrowing(op)) return;
    for_slots(result->layout.slots(), [&](const std::string& s) {
      const std::string target = at(result, s);
      auto operand = [&](size_t i) { return at(op.operands[i], s); };
      std::string value;
      switch (op.kind) {
        case OpKind::Iota: value = coordinates(result, s, "iota %" + result->name)[0]; break;
        case OpKind::Full: value = constant_of(op.constant, dtype); break;
        case OpKind::Unary: value = unary_expression(op.unary_op, operand(0), dtype); break;
        case OpKind::Binary:
          value = binary_expression(op.binary_op, operand(0), operand(1), dtype);
          break;
        case OpKind::Compare: {
          const DType in = op.operands[0]->type.dtype;
          const bool as_float = is_narrow_float(in);
          value = (as_float ? to_float(operand(0), in) : operand(0)) + " " +
                  scalar::compare_op_name(op.compare_op) + " " +
                  (as_float ? to_float(operand(1), in) : operand(1));
          break;
        }
        case OpKind::Logical:
          value = operand(0) + (op.logical_op == scalar::LogicalOp::And ? " && " : " || ") + operand(1);
          break;
        case OpKind::Select: value = operand(0) + " ? " + operand(1) + " : " + operand(2); break;
        case OpKind::Cast: {
          const DType from = op.operands[0]->type.dtype;
          if (from == dtype) {
            value = operand(0);
          } else if (dtype == DType::Bool) {
            value = from == DType::Index ? operand(0) + " != 0" : to_float(operand(0), from) + " != 0.0f";
          } else if (from == DType::Bool) {
            value = operand(0) + " ? " + constant_of(1.0, dtype) + " : " + constant_of(0.0, dtype);
          } else {
            value = from_float(to_float(operand(0), from), dtype);
          }
          break;
        }
        default: break;
      }
      line(scalar_form ? "const " + std::string(c_type(dtype)) + " " + target + " = " + value + ";"
                       : target + " = " + value + ";");
    });
    if (scalar_form) definitions_[result.get()] = &op;
    if (scalar_form && dtype == DType::Index) track_range(op);
  }

  // An f32 tile cast to bf16/f16 two slots at a time: one cvt.rn.bf16x2.f32 (or f16x2) per pair
  // instead of a conversion per element and a pack before the mma. Each half is rounded to
  // nearest even, as the one-element conversion does.
  bool paired_narrowing(const Op& op) {
    const Value& result = op.results[0];
    const Value& source = op.operands[0];
    const int64_t slots = result->layout.slots();
    const DType dtype = result->type.dtype;
    if (source->type.dtype != DType::F32 || !is_narrow_float(dtype) || slots < 2 || slots % 2 != 0 ||
        source->layout.slots() != slots) {
      return false;
    }
    const bool bf16 = dtype == DType::BF16;
    line("#pragma unroll");
    line("for (int s = 0; s < " + str(slots) + "; s += 2) {");
    line(std::string("  const ") + (bf16 ? "__nv_bfloat162" : "__half2") + " pair = " +
         (bf16 ? "__floats2bfloat162_rn(" : "__floats2half2_rn(") + at(source, "s") + ", " + at(source, "s + 1") + ");");
    line("  " + at(result, "s") + " = pair.x;");
    line("  " + at(result, "s + 1") + " = pair.y;");
    line("}");
    return true;
  }

  // The range of `value` when `predicate` (a uniform Bool scalar) holds: a comparison of an
  // index with a bound narrows that index, and everything computed from it is re-derived.
  std::optional<IndexRange> range_given(const Value& value, const Value& predicate) {
    std::map<const matile::ValueNode*, IndexRange> narrowed;
    auto def = predicate ? definitions_.find(predicate.get()) : definitions_.end();
    if (def != definitions_.end() && def->second->kind == OpKind::Compare) {
      const Op& compare = *def->second;
      const auto a = range_of(compare.operands[0]), b = range_of(compare.operands[1]);
      if (a && b) {
        switch (compare.compare_op) {
          case scalar::CompareOp::LT: narrowed[compare.operands[0].get()] = {a->lo, std::min(a->hi, b->hi - 1)}; break;
          case scalar::CompareOp::LE: narrowed[compare.operands[0].get()] = {a->lo, std::min(a->hi, b->hi)}; break;
          case scalar::CompareOp::GT: narrowed[compare.operands[1].get()] = {b->lo, std::min(b->hi, a->hi - 1)}; break;
          case scalar::CompareOp::GE: narrowed[compare.operands[1].get()] = {b->lo, std::min(b->hi, a->hi)}; break;
          default: break;
        }
      }
    }
    if (narrowed.empty()) return range_of(value);
    std::function<std::optional<IndexRange>(const Value&, int)> derive =
        [&](const Value& v, int depth) -> std::optional<IndexRange> {
      if (!v) return IndexRange{0, 0};
      auto found = narrowed.find(v.get());
      if (found != narrowed.end()) return found->second;
      auto op = definitions_.find(v.get());
      if (depth > 16 || op == definitions_.end() || op->second->kind != OpKind::Binary) return range_of(v);
      const auto a = derive(op->second->operands[0], depth + 1), b = derive(op->second->operands[1], depth + 1);
      if (!a || !b) return std::nullopt;
      return binary_range(op->second->binary_op, *a, *b);
    };
    return derive(value, 0);
  }

  // The range of a uniform index scalar defined by `op`, when interval arithmetic bounds it.
  void track_range(const Op& op) {
    const matile::ValueNode* result = op.results[0].get();
    if (op.kind == OpKind::Full) {
      const auto value = static_cast<int64_t>(op.constant);
      ranges_[result] = {value, value};
      alignments_[result] = value == 0 ? int64_t{1} << 30 : std::abs(value);
      return;
    }
    if (op.kind == OpKind::Binary && op.operands.size() == 2) {
      const int64_t a = alignment_of(op.operands[0]), b = alignment_of(op.operands[1]);
      switch (op.binary_op) {
        case scalar::BinaryOp::Add:
        case scalar::BinaryOp::Sub: alignments_[result] = std::gcd(a, b); break;
        case scalar::BinaryOp::Mul: alignments_[result] = a * b <= (int64_t{1} << 30) ? a * b : a; break;
        default: break;
      }
    }
    auto range_of = [&](size_t i) -> std::optional<IndexRange> {
      auto found = ranges_.find(op.operands[i].get());
      if (found == ranges_.end()) return std::nullopt;
      return found->second;
    };
    if (op.kind == OpKind::Binary && op.operands.size() == 2) {
      const auto a = range_of(0), b = range_of(1);
      if (!a || !b) return;
      if (auto range = binary_range(op.binary_op, *a, *b)) ranges_[result] = *range;
    } else if (op.kind == OpKind::Cast && op.operands[0]->type.dtype == DType::Index) {
      if (auto a = range_of(0)) ranges_[result] = *a;
    }
  }

  std::optional<IndexRange> range_of(const Value& value) {
    if (!value) return IndexRange{0, 0};
    auto found = ranges_.find(value.get());
    if (found == ranges_.end()) return std::nullopt;
    return found->second;
  }

  // A per-slot table that is the same for every thread, or an Unsupported error.
  std::vector<int64_t> thread_independent(const std::vector<int32_t>& table, int64_t slots,
                                          const std::string& what) {
    std::vector<int64_t> per_slot(static_cast<size_t>(slots));
    for (int64_t v = 0; v < slots; ++v) per_slot[static_cast<size_t>(v)] = table[static_cast<size_t>(v)];
    for (size_t i = 0; i < table.size(); ++i) {
      if (table[i] != per_slot[i % static_cast<size_t>(slots)]) {
        unsupported(what + ": thread " + std::to_string(i / static_cast<size_t>(slots)) +
                    " needs another source slot than thread 0 (registers cannot be indexed "
                    "per thread)");
      }
    }
    return per_slot;
  }

  // `out[s] = in[table[s]]` through a constexpr table, or a plain copy when the table is the
  // identity (or the value a scalar).
  void table_copy(const Value& result, const Value& source, const std::vector<int64_t>& table) {
    const int64_t slots = result->layout.slots();
    bool identity = source->layout.slots() == slots;
    for (int64_t v = 0; v < slots && identity; ++v) identity = table[static_cast<size_t>(v)] == v;
    if (identity || source->layout.slots() == 1) {
      for_slots(slots, [&](const std::string& s) { line(at(result, s) + " = " + at(source, s) + ";"); });
      return;
    }
    if (slots == 1) {
      line(at(result, "0") + " = " + at(source, str(table[0])) + ";");
      return;
    }
    std::string entries;
    for (int64_t v = 0; v < slots; ++v) entries += (v ? ", " : "") + str(table[static_cast<size_t>(v)]);
    const std::string table_name = unique(name_of(result) + "_from");
    line("constexpr int " + table_name + "[" + str(slots) + "] = {" + entries + "};");
    for_slots(slots, [&](const std::string& s) {
      line(at(result, s) + " = " + at(source, table_name + "[" + s + "]") + ";");
    });
  }

  // The column-major source element each result slot needs (as the interpreter defines it).
  std::vector<int64_t> needed_elements(const Op& op) {
    const Value& result = op.results[0];
    const Value& source = op.operands[0];
    const std::vector<int64_t> elements = matile::slot_elements(result->layout);
    std::vector<int64_t> needed(elements.size());
    std::vector<int64_t> source_coords(source->type.shape.size());
    for (size_t i = 0; i < elements.size(); ++i) {
      const std::vector<int64_t> c = matile::coordinates_of(elements[i], result->type.shape);
      switch (op.kind) {
        case OpKind::Broadcast:
          for (size_t k = 0; k < source_coords.size(); ++k) source_coords[k] = c[static_cast<size_t>(op.dims[k])];
          break;
        case OpKind::Permute:
          for (size_t k = 0; k < c.size(); ++k) source_coords[static_cast<size_t>(op.dims[k])] = c[k];
          break;
        case OpKind::ExtractSlice:
          for (size_t k = 0; k < c.size(); ++k) source_coords[k] = c[k] + op.offsets[k];
          break;
        default: source_coords = c; break;
      }
      needed[i] = matile::index_of(source_coords, source->type.shape);
    }
    return needed;
  }

  void register_move(const Op& op) {
    const Value& result = op.results[0];
    const Value& source = op.operands[0];
    auto table = matile::register_gather(source->layout, source->type.element_count(),
                                         needed_elements(op), result->layout.slots());
    if (!table) unsupported(matile::op_label(op) + ": " + table.error().message);
    if (op.kind == OpKind::ConvertLayout && !same_for_every_thread(*table, result->layout.slots())) {
      return select_by_element(op);
    }
    std::vector<int64_t> per_slot = thread_independent(*table, result->layout.slots(), matile::op_label(op));
    declare(result);
    table_copy(result, source, per_slot);
  }

  static bool same_for_every_thread(const std::vector<int32_t>& table, int64_t slots) {
    for (size_t i = 0; i < table.size(); ++i) {
      if (table[i] != table[i % static_cast<size_t>(slots)]) return false;
    }
    return true;
  }

  // A register-only conversion where threads take their elements from different source slots
  // (a row statistic every thread holds whole, converted to a layout where each thread keeps
  // one row): every result slot computes its element index and picks it with a chain of
  // selects over the elements that slot takes in any thread. Registers are only indexed by
  // constants, so they stay registers. This needs a source whose slot of an element is the
  // same in every thread that holds it, and few candidates per slot.
  void select_by_element(const Op& op) {
    constexpr size_t kMaxCandidates = 32;
    const Value& result = op.results[0];
    const Value& source = op.operands[0];
    const std::string what = matile::op_label(op);
    const int64_t source_slots = source->layout.slots(), result_slots = result->layout.slots();
    const std::vector<int64_t> source_elements = matile::slot_elements(source->layout);
    const std::vector<int64_t> result_elements = matile::slot_elements(result->layout);
    std::map<int64_t, int64_t> slot_of_element;
    for (size_t i = 0; i < source_elements.size(); ++i) {
      const int64_t slot = static_cast<int64_t>(i) % source_slots;
      auto [it, inserted] = slot_of_element.emplace(source_elements[i], slot);
      if (!inserted && it->second != slot) {
        unsupported(what + ": element " + str(source_elements[i]) + " sits in different slots " +
                    "of different threads (registers cannot be indexed per thread)");
      }
    }
    std::vector<std::set<int64_t>> candidates(static_cast<size_t>(result_slots));
    for (size_t i = 0; i < result_elements.size(); ++i) {
      candidates[i % static_cast<size_t>(result_slots)].insert(result_elements[i]);
    }
    declare(result);
    line("// each thread picks its elements: the source slot depends on the thread");
    for (int64_t v = 0; v < result_slots; ++v) {
      const std::set<int64_t>& options = candidates[static_cast<size_t>(v)];
      if (options.size() > kMaxCandidates) {
        unsupported(what + ": slot " + str(v) + " takes " + str(static_cast<int64_t>(options.size())) +
                    " different elements across threads (registers cannot be indexed per thread)");
      }
      std::string value = at(source, str(slot_of_element.at(*options.rbegin())));
      if (options.size() > 1) {
        const std::string element = unique(name_of(result) + "_e");
        line("const int " + element + " = " + element_index(result, str(v), what) + ";");
        for (auto it = std::next(options.rbegin()); it != options.rend(); ++it) {
          value = element + " == " + str(*it) + " ? " + at(source, str(slot_of_element.at(*it))) +
                  " : " + value;
        }
      }
      line(at(result, str(v)) + " = " + value + ";");
    }
  }

  void convert_via_shared(const Op& op) {
    const Value& result = op.results[0];
    const Value& source = op.operands[0];
    if (op.scratch < 0) invalid(matile::op_label(op) + ": via shared memory without scratch");
    SharedRef ref;
    ref.alloc = op.scratch;
    const SharedAlloc& alloc = alloc_of(ref);
    const std::string what = matile::op_label(op);
    // The scratch holds the tile either with the tile's shape or flat, in column-major order.
    auto address = [&](const Value& value, const std::string& s) {
      if (alloc.shape.size() == 1 && value->type.shape.size() != 1) {
        ref.offsets = {0};
        return shared_offset(ref, {element_index(value, s, what)});
      }
      ref.offsets.assign(value->type.shape.size(), 0);
      return shared_offset(ref, coordinates(value, s, what));
    };
    const std::string scratch = shared_name(alloc);
    for_slots(source->layout.slots(), [&](const std::string& s) {
      line(scratch + "[" + address(source, s) + "] = " + at(source, s) + ";");
    });
    line("__syncthreads();");
    declare(result);
    for_slots(result->layout.slots(), [&](const std::string& s) {
      line(at(result, s) + " = " + scratch + "[" + address(result, s) + "];");
    });
    line("__syncthreads();");
  }

  std::string combine(vrtile::ReduceOp reduce_op, DType dtype, const std::string& a,
                      const std::string& b) {
    const std::string fa = to_float(a, dtype), fb = to_float(b, dtype);
    switch (reduce_op) {
      case vrtile::ReduceOp::Sum: return from_float(fa + " + " + fb, dtype);
      case vrtile::ReduceOp::Max: return from_float("fmaxf(" + fa + ", " + fb + ")", dtype);
      case vrtile::ReduceOp::Min: return from_float("fminf(" + fa + ", " + fb + ")", dtype);
    }
    return a;
  }

  void reduce(const Op& op) {
    const Value& source = op.operands[0];
    const Value& result = op.results[0];
    const DType dtype = source->type.dtype;
    if (!is_float(dtype)) invalid(matile::op_label(op) + ": reduce of a non-float tile");
    const std::vector<int64_t>& shape = source->type.shape;
    const int64_t source_slots = source->layout.slots(), result_slots = result->layout.slots();
    const std::vector<int64_t> source_elements = matile::slot_elements(source->layout);
    const std::vector<int64_t> result_elements = matile::slot_elements(result->layout);
    std::vector<int64_t> result_shape = shape;
    result_shape.erase(result_shape.begin() + op.axis);
    // Step 1's mapping: source slot -> result slot, which must not depend on the thread.
    std::vector<int32_t> table(static_cast<size_t>(kernel_.threads() * source_slots));
    for (int64_t t = 0; t < kernel_.threads(); ++t) {
      std::map<int64_t, int64_t> slot_of_element;
      for (int64_t w = 0; w < result_slots; ++w) {
        slot_of_element.emplace(result_elements[static_cast<size_t>(t * result_slots + w)], w);
      }
      for (int64_t v = 0; v < source_slots; ++v) {
        std::vector<int64_t> c =
            matile::coordinates_of(source_elements[static_cast<size_t>(t * source_slots + v)], shape);
        c.erase(c.begin() + op.axis);
        auto found = slot_of_element.find(matile::index_of(c, result_shape));
        if (found == slot_of_element.end()) invalid(matile::op_label(op) + ": result layout misses an element");
        table[static_cast<size_t>(t * source_slots + v)] = static_cast<int32_t>(found->second);
      }
    }
    const std::vector<int64_t> target = thread_independent(table, source_slots, matile::op_label(op));
    const double identity = op.reduce_op == vrtile::ReduceOp::Sum ? 0.0
                            : op.reduce_op == vrtile::ReduceOp::Max ? -INFINITY
                                                                    : INFINITY;
    declare(result);
    line("// 1. within the thread, in slot order");
    for_slots(result_slots, [&](const std::string& s) {
      line(at(result, s) + " = " + constant_of(identity, dtype) + ";");
    });
    // Source slots in order; a table when the slot -> result mapping is not the identity.
    std::string entries;
    bool simple = result_slots == 1;
    for (int64_t v = 0; v < source_slots; ++v) entries += (v ? ", " : "") + str(target[static_cast<size_t>(v)]);
    std::string target_of_s = "0";
    if (!simple) {
      const std::string table_name = unique(name_of(result) + "_slot");
      line("constexpr int " + table_name + "[" + str(source_slots) + "] = {" + entries + "};");
      target_of_s = table_name + "[s]";
    }
    for_slots(source_slots, [&](const std::string& s) {
      const std::string into = at(result, source_slots == 1 ? str(target[0]) : target_of_s);
      line(into + " = " + combine(op.reduce_op, dtype, into, at(source, s)) + ";");
    });
    if (!op.xor_masks.empty()) {
      line("// 2. across lanes: xor butterfly");
      uses_warp_ = true;
      for (int mask : op.xor_masks) {
        for_slots(result_slots, [&](const std::string& s) {
          const std::string here = at(result, s);
          line(here + " = " +
               combine(op.reduce_op, dtype, here,
                       "__shfl_xor_sync(0xffffffffu, " + here + ", " + std::to_string(mask) + ")") +
               ";");
        });
      }
    }
    if (op.scratch >= 0) cross_warp_reduce(op, result, dtype, identity);
  }

  // Step 3: every warp writes its partial of each result element to scratch[warp, element];
  // after a barrier each thread combines the partials of its partner warps (the threads that
  // differ from it only in the warp leaves of the reduced axis) in increasing order.
  void cross_warp_reduce(const Op& op, const Value& result, DType dtype, double identity) {
    auto plan = matile::reduce_plan(op.operands[0]->layout, op.operands[0]->type.shape, op.axis);
    if (!plan) unsupported(matile::op_label(op) + ": " + plan.error().message);
    SharedRef ref;
    ref.alloc = op.scratch;
    const SharedAlloc& alloc = alloc_of(ref);
    const int64_t elements = result->type.element_count();
    if (alloc.shape.size() != 2 || alloc.shape[0] < kernel_.warps || alloc.shape[1] < elements) {
      invalid(matile::op_label(op) + ": scratch " + alloc.name + " is not [warps, elements]");
    }
    ref.offsets = {0, 0};
    std::vector<int64_t> partners{0};
    std::string base = "tid";
    for (const auto& [position, extent] : plan->warp_leaves) {
      base += " - " + term_text("tid", position, extent, position, kernel_.threads());
      std::vector<int64_t> grown;
      for (int64_t j = 0; j < extent; ++j) {
        for (int64_t p : partners) grown.push_back(p + j * position);
      }
      partners = std::move(grown);
    }
    std::sort(partners.begin(), partners.end());
    uses_warp_ = true;
    const std::string scratch = shared_name(alloc);
    const std::string what = matile::op_label(op);
    line("// 3. across warps through " + alloc.name + ", in warp order");
    for_slots(result->layout.slots(), [&](const std::string& s) {
      line(scratch + "[" + shared_offset(ref, {"warp", element_index(result, s, what)}) + "] = " +
           from_float(to_float(at(result, s), dtype), alloc.dtype) + ";");
    });
    line("__syncthreads();");
    line("{");
    ++indent_;
    const std::string base_name = unique(name_of(result) + "_base");
    line("const int " + base_name + " = " + base + ";");
    for_slots(result->layout.slots(), [&](const std::string& s) {
      line(at(result, s) + " = " + constant_of(identity, dtype) + ";");
      for (int64_t p : partners) {
        const std::string partner_warp = "(" + base_name + " + " + str(p) + ") / 32";
        const std::string partial = to_float(
            scratch + "[" + shared_offset(ref, {partner_warp, element_index(result, s, what)}) + "]",
            alloc.dtype);
        line(at(result, s) + " = " +
             combine(op.reduce_op, dtype, at(result, s), from_float(partial, dtype)) + ";");
      }
    });
    --indent_;
    line("}");
    line("__syncthreads();");
  }

  void mma(const Op& op) {
    const Value &a = op.operands[0], &b = op.operands[1], &c = op.operands[2];
    const Value& result = op.results[0];
    const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
    const int wm = op.warps_m, wn = op.warps_n;
    if (a->type.dtype != b->type.dtype || !is_narrow_float(a->type.dtype)) {
      unsupported(matile::op_label(op) + ": mma.sync needs bf16 or f16 operands of one dtype");
    }
    auto la = matile::mma_a_layout(M, K, wm, wn);
    auto lb = matile::mma_b_layout(K, N, wm, wn);
    auto lc = matile::mma_c_layout(M, N, wm, wn);
    if (!la || !lb || !lc || a->layout != *la || b->layout != *lb || c->layout != *lc ||
        result->layout != *lc) {
      invalid(matile::op_label(op) + ": operands are not in the mma.sync fragment layouts");
    }
    const int64_t mt = M / (16 * wm), kt = K / 16, nt = N / (8 * wn);
    declare(result);
    for_slots(result->layout.slots(), [&](const std::string& s) { line(at(result, s) + " = " + at(c, s) + ";"); });
    line("// " + matile::instruction_name(op) + ": per warp " + str(mt) + " x " + str(nt) +
         " atoms, " + str(kt) + " k steps");
    line("#pragma unroll");
    line("for (int k = 0; k < " + str(kt) + "; ++k) {");
    line("#pragma unroll");
    line("  for (int mi = 0; mi < " + str(mt) + "; ++mi) {");
    line("#pragma unroll");
    line("    for (int ni = 0; ni < " + str(nt) + "; ++ni) {");
    line("      mma_m16n8k16(&" + name_of(result) + "[4 * (mi + " + str(mt) + " * ni)], &" + name_of(a) +
         "[8 * (mi + " + str(mt) + " * k)], &" + name_of(b) + "[4 * (k + " + str(kt) + " * ni)]);");
    line("    }");
    line("  }");
    line("}");
  }

  void fma_dot(const Op& op) {
    const Value& acc = op.operands[0];
    const Value& result = op.results[0];
    const SharedAlloc& a_alloc = alloc_of(op.shared);
    const SharedAlloc& b_alloc = alloc_of(op.shared_b);
    const int64_t K = op.shared.transposed ? a_alloc.shape[0] - op.shared.offsets[0]
                                           : a_alloc.shape[1] - op.shared.offsets[1];
    declare(result);
    const std::string a_name = shared_name(a_alloc), b_name = shared_name(b_alloc);
    for_slots(result->layout.slots(), [&](const std::string& s) {
      const std::vector<std::string> c = coordinates(result, s, matile::op_label(op));
      line("{");
      ++indent_;
      line("float sum = " + at(acc, s) + ";");
      line("for (int k = 0; k < " + str(K) + "; ++k) {");
      ++indent_;
      line("sum = fmaf(" + to_float(a_name + "[" + shared_offset(op.shared, {c[0], "k"}) + "]", a_alloc.dtype) +
           ", " + to_float(b_name + "[" + shared_offset(op.shared_b, {"k", c[1]}) + "]", b_alloc.dtype) +
           ", sum);");
      --indent_;
      line("}");
      line(at(result, s) + " = sum;");
      --indent_;
      line("}");
    });
  }

  // Buffer indices and validity of tile coordinate `c` of a window access.
  struct WindowIndex {
    std::vector<std::string> indices;
    std::string valid;  // empty: always valid
  };

  WindowIndex window(const Op& op, const std::vector<std::string>& c) {
    const matile::GlobalAccess& access = op.access;
    const size_t rank = op.buffer->shape.size();
    if (access.tile_axes.size() != rank || access.offsets.size() != rank || access.bounds.size() != rank) {
      invalid(matile::op_label(op) + ": window access of the wrong rank");
    }
    WindowIndex out;
    for (size_t j = 0; j < rank; ++j) {
      std::string index;
      if (access.offsets[j]) index = name_of(access.offsets[j]);
      if (access.tile_axes[j] >= 0) {
        const std::string& coordinate = c[static_cast<size_t>(access.tile_axes[j])];
        index = index.empty() ? coordinate : index + " + " + coordinate;
      }
      if (index.empty()) index = "0";
      out.indices.push_back(index);
      // An index that can only be 0 is always in bounds; anything else is checked.
      if (index != "0" || access.bounds[j] < 1) {
        out.valid += (out.valid.empty() ? "" : " && ") + std::string("(") + index + ") < " +
                     str(access.bounds[j]);
      }
    }
    return out;
  }

  std::string flat_offset(const scalar::Buffer& buffer, const std::vector<std::string>& indices) {
    std::string flat;
    int64_t stride = 1;
    std::vector<std::string> terms;
    for (size_t j = buffer->shape.size(); j-- > 0;) {
      std::string term = "static_cast<long long>(" + indices[j] + ")";
      if (stride != 1) term += " * " + str(stride);
      terms.push_back(term);
      stride *= buffer->shape[j];
    }
    for (size_t i = terms.size(); i-- > 0;) flat += (flat.empty() ? "" : " + ") + terms[i];
    return flat.empty() ? "0" : flat;
  }

  void global_load(const Op& op) {
    const Value& result = op.results[0];
    const std::vector<Value> gather = matile::gather_indices(op);
    const Value mask = matile::gather_mask(op);
    declare(result);
    if (planned_window_load(op, result)) return;
    const std::string buffer = buffer_name(op.buffer);
    const std::string other = constant_of(op.constant, op.buffer->dtype);
    for_slots(result->layout.slots(), [&](const std::string& s) {
      std::vector<std::string> indices;
      std::string valid;
      if (op.access.form == matile::GlobalAccess::Form::Window) {
        WindowIndex w = window(op, coordinates(result, s, matile::op_label(op)));
        indices = w.indices;
        valid = w.valid;
      } else {
        for (const Value& index : gather) indices.push_back(at(index, s));
        if (mask) valid = at(mask, s);
      }
      const std::string read = buffer + "[" + flat_offset(op.buffer, indices) + "]";
      line(at(result, s) + " = " + (valid.empty() ? read : valid + " ? " + read + " : " + other) + ";");
    });
  }

  // Which slots of a replicated layout write: the stride-0 thread leaves give a per-thread
  // condition (coordinate 0 writes), the stride-0 slot leaves a per-slot one.
  std::pair<std::string, std::string> single_writer(const RegisterLayout& layout,
                                                    const std::string& slot) {
    auto conditions = [](const layout::Layout& mode, const std::string& index, int64_t bound) {
      const std::vector<int64_t> extents = layout::leaves(mode.shape());
      const std::vector<int64_t> strides = layout::leaves(mode.stride());
      std::string condition;
      int64_t position = 1;
      for (size_t i = 0; i < extents.size(); ++i) {
        if (strides[i] == 0 && extents[i] > 1) {
          condition += (condition.empty() ? "" : " && ") +
                       term_text(index, position, extents[i], 1, bound) + " == 0";
        }
        position *= extents[i];
      }
      return condition;
    };
    return {conditions(layout.tv.layout.mode(0), "tid", layout.threads()),
            conditions(layout.tv.layout.mode(1), slot, layout.slots())};
  }

  // A window access of a register tile, slot by slot, in 32-bit indices: the flat index of slot
  // v is `base + slot_flat[v]` (base: the window's uniform offsets plus the hoisted thread part)
  // and slot_check[v] the bounds it can fail (empty: it never can, by the ranges of the offsets
  // and the layout's reach). Slot pairs holding neighbouring elements at even indices in every
  // thread can be accessed together. nullopt for gathers and buffers of 2^31 elements or more.
  struct WindowPlan {
    std::string base;
    std::vector<int64_t> slot_flat;
    std::vector<std::string> slot_check;
    bool even_start = false;  // base is even in every thread
    bool pair(int64_t v) const {
      const auto i = static_cast<size_t>(v);
      return even_start && i + 1 < slot_flat.size() && slot_flat[i] % 2 == 0 &&
             slot_flat[i + 1] == slot_flat[i] + 1 && slot_check[i].empty() && slot_check[i + 1].empty();
    }
    std::string at(int64_t v) const {
      const int64_t flat = slot_flat[static_cast<size_t>(v)];
      return flat ? base + " + " + str(flat) : base;
    }
  };

  std::optional<WindowPlan> window_plan(const Op& op, const Value& value, const Value& predicate = nullptr) {
    const matile::GlobalAccess& access = op.access;
    const size_t rank = op.buffer->shape.size();
    const std::vector<int64_t>& shape = value->type.shape;
    if (access.form != matile::GlobalAccess::Form::Window || rank == 0 || access.tile_axes.size() != rank ||
        access.offsets.size() != rank || access.bounds.size() != rank) {
      return std::nullopt;
    }
    int64_t elements = 1;
    for (int64_t extent : op.buffer->shape) elements *= extent;
    if (elements >= (int64_t{1} << 31)) return std::nullopt;
    const LayoutInfo& info = layout_info(value->layout.tv, shape, matile::op_label(op));
    const int64_t threads = info.coords.threads, slots = value->layout.slots();
    std::vector<int64_t> stride(rank, 1);
    for (size_t j = rank - 1; j-- > 0;) stride[j] = stride[j + 1] * op.buffer->shape[j + 1];
    WindowPlan plan;
    plan.slot_flat.assign(static_cast<size_t>(slots), 0);
    plan.slot_check.assign(static_cast<size_t>(slots), "");
    std::string uniform, per_thread;
    int64_t uniform_alignment = 0;  // every uniform part is a multiple of it (0: the part is 0)
    std::vector<int64_t> thread_flat(static_cast<size_t>(threads), 0);
    for (size_t j = 0; j < rank; ++j) {
      const std::string factor = stride[j] == 1 ? "" : " * " + str(stride[j]);
      const std::optional<IndexRange> offset = range_given(access.offsets[j], predicate);
      const int a = access.tile_axes[j];
      int64_t thread_most = 0;
      std::string thread_part;
      if (a >= 0) {
        const size_t axis = static_cast<size_t>(a);
        for (int64_t t = 0; t < threads; ++t) {
          const int64_t part = evaluate_terms(info.coords.thread_terms[axis], t);
          thread_most = std::max(thread_most, part);
          thread_flat[static_cast<size_t>(t)] += part * stride[j];
        }
        if (info.thread_vars[axis] != "0") {
          thread_part = info.thread_vars[axis];
          per_thread += (per_thread.empty() ? "" : " + ") + thread_part + factor;
        }
      }
      if (access.offsets[j]) {
        uniform += (uniform.empty() ? "" : " + ") + name_of(access.offsets[j]) + factor;
        uniform_alignment = std::gcd(uniform_alignment, alignment_of(access.offsets[j]) * stride[j]);
      }
      for (int64_t v = 0; v < slots; ++v) {
        const int64_t constant = a >= 0 ? evaluate_terms(info.coords.slot_terms[static_cast<size_t>(a)], v) : 0;
        plan.slot_flat[static_cast<size_t>(v)] += constant * stride[j];
        if (offset && offset->hi + thread_most + constant < access.bounds[j]) continue;
        std::string index = access.offsets[j] ? name_of(access.offsets[j]) : "";
        if (!thread_part.empty()) index += (index.empty() ? "" : " + ") + thread_part;
        if (constant || index.empty()) index += (index.empty() ? "" : " + ") + str(constant);
        std::string& check = plan.slot_check[static_cast<size_t>(v)];
        check += (check.empty() ? "" : " && ") + parenthesized(index) + " < " + str(access.bounds[j]);
      }
    }
    const std::string buffer = buffer_name(op.buffer);
    std::string start = per_thread.empty() ? "" : hoisted("int", buffer + "_thread", per_thread);
    if (!uniform.empty()) start = start.empty() ? uniform : uniform + " + " + start;
    if (!start.empty() && !uniform.empty()) {
      const std::string start_name = unique(buffer + "_start");
      line("const int " + start_name + " = " + start + ";");
      start = start_name;
    }
    plan.base = start.empty() ? buffer : "(" + buffer + " + " + start + ")";
    plan.even_start = uniform_alignment % 2 == 0 &&
                      std::all_of(thread_flat.begin(), thread_flat.end(), [](int64_t f) { return f % 2 == 0; });
    return plan;
  }

  // Window stores through a WindowPlan: checks only where an index can reach its bound, and
  // unchecked neighbouring pairs as one 4-byte (16-bit types) or 8-byte (f32) store.
  bool planned_window_store(const Op& op, const Value& value) {
    std::optional<WindowPlan> plan = window_plan(op, value);
    if (!plan) return false;
    const DType dtype = op.buffer->dtype;
    const bool pairs = is_narrow_float(dtype) || dtype == DType::F32;
    for (int64_t v = 0; v < value->layout.slots(); ++v) {
      // Replicated holders store the same value; one of them is enough.
      auto [thread_writes, slot_writes] = single_writer(value->layout, str(v));
      std::string valid = plan->slot_check[static_cast<size_t>(v)];
      for (const std::string& condition : {thread_writes, slot_writes}) {
        if (!condition.empty()) valid = valid.empty() ? condition : condition + " && " + valid;
      }
      if (pairs && thread_writes.empty() && slot_writes.empty() && plan->pair(v) &&
          single_writer(value->layout, str(v + 1)).second.empty()) {
        if (dtype == DType::F32) {
          line("*reinterpret_cast<float2*>(" + plan->at(v) + ") = make_float2(" + at(value, str(v)) + ", " +
               at(value, str(v + 1)) + ");");
        } else {
          line("*reinterpret_cast<unsigned*>(" + plan->at(v) + ") = pack2(" + at(value, str(v)) + ", " +
               at(value, str(v + 1)) + ");");
        }
        ++v;
        continue;
      }
      const std::string store = "*(" + plan->at(v) + ") = " + at(value, str(v)) + ";";
      line(valid.empty() ? store : "if (" + valid + ") " + store);
    }
    return true;
  }

  // Window loads through a WindowPlan: checks only where an index can reach its bound, and
  // unchecked neighbouring pairs of 16-bit elements as one 4-byte load.
  bool planned_window_load(const Op& op, const Value& result) {
    std::optional<WindowPlan> plan = window_plan(op, result);
    if (!plan) return false;
    const DType dtype = op.buffer->dtype;
    if (result->type.dtype != dtype) invalid(matile::op_label(op) + ": loaded dtype differs from the buffer's");
    const std::string other = constant_of(op.constant, dtype);
    for (int64_t v = 0; v < result->layout.slots(); ++v) {
      if (is_narrow_float(dtype) && plan->pair(v)) {
        line("unpack2(*reinterpret_cast<const unsigned*>(" + plan->at(v) + "), " + at(result, str(v)) + ", " +
             at(result, str(v + 1)) + ");");
        ++v;
        continue;
      }
      const std::string& valid = plan->slot_check[static_cast<size_t>(v)];
      const std::string read = "*(" + plan->at(v) + ")";
      line(at(result, str(v)) + " = " + (valid.empty() ? read : valid + " ? " + read + " : " + other) + ";");
    }
    return true;
  }

  // Every value a uniform index scalar takes is a multiple of this (1 when unknown).
  int64_t alignment_of(const Value& value) {
    auto found = alignments_.find(value.get());
    return found == alignments_.end() ? 1 : found->second;
  }

  void global_store(const Op& op) {
    const Value value = matile::stored_value(op);
    const std::vector<Value> gather = matile::gather_indices(op);
    const Value mask = matile::gather_mask(op);
    const std::string buffer = buffer_name(op.buffer);
    const DType dtype = op.buffer->dtype;
    if (value->type.dtype != dtype) invalid(matile::op_label(op) + ": stored dtype differs from the buffer's");
    if (planned_window_store(op, value)) return;
    for_slots(value->layout.slots(), [&](const std::string& s) {
      std::vector<std::string> indices;
      std::string valid;
      if (op.access.form == matile::GlobalAccess::Form::Window) {
        WindowIndex w = window(op, coordinates(value, s, matile::op_label(op)));
        indices = w.indices;
        valid = w.valid;
      } else {
        for (const Value& index : gather) indices.push_back(at(index, s));
        if (mask) valid = at(mask, s);
      }
      // Replicated holders store the same value; one of them is enough.
      auto [thread_writes, slot_writes] = single_writer(value->layout, s);
      for (const std::string& condition : {thread_writes, slot_writes}) {
        if (!condition.empty()) valid = valid.empty() ? condition : condition + " && " + valid;
      }
      const std::string store = buffer + "[" + flat_offset(op.buffer, indices) + "] = " + at(value, s) + ";";
      if (valid.empty()) {
        line(store);
      } else {
        line("if (" + valid + ") {");
        line("  " + store);
        line("}");
      }
    });
  }

  void async_copy(const Op& op) {
    const SharedAlloc& alloc = alloc_of(op.shared);
    const int64_t vector = op.vector_elements;
    const int bytes = dtype_bytes(alloc.dtype);
    if (vector * bytes != 16) invalid(matile::op_label(op) + ": cp.async vectors must be 16 bytes");
    if (op.access.form != matile::GlobalAccess::Form::Window) {
      unsupported(matile::op_label(op) + ": cp.async from a gather");
    }
    const std::vector<int64_t>& tile = op.tile_shape;
    const int last = static_cast<int>(tile.size()) - 1;
    const size_t rank = op.buffer->shape.size();
    if (op.access.tile_axes.size() != rank || rank == 0 ||
        op.access.tile_axes[rank - 1] != last) {
      unsupported(matile::op_label(op) + ": the copied vectors must run along the buffer's last axis");
    }
    const LayoutInfo& info = layout_info(op.copy_layout, tile, matile::op_label(op));
    const int64_t copy_threads = info.coords.threads;
    const int64_t vectors = op.copy_layout.values() / vector;
    const std::string buffer = buffer_name(op.buffer);
    const std::string destination = shared_name(alloc);
    std::vector<std::string> guards;
    if (op.predicate) guards.push_back(name_of(op.predicate));
    if (copy_threads < kernel_.threads()) guards.push_back("tid < " + str(copy_threads));
    if (!guards.empty()) {
      std::string condition;
      for (const std::string& g : guards) condition += (condition.empty() ? "" : " && ") + g;
      line("if (" + condition + ") {");
      ++indent_;
    }
    // Vector j starts at slot j * vector; the copies are unrolled here, each with constant slot
    // coordinates, so every address is a hoisted per-thread part plus a constant.
    SplitCoords split;
    split.threads = copy_threads;
    split.thread_exprs = info.thread_vars;
    split.thread_value = [&info](int64_t t, size_t axis) {
      return evaluate_terms(info.coords.thread_terms[axis], t);
    };
    // Per tile axis, the largest thread part (for the bounds the window can reach).
    std::vector<int64_t> thread_max(tile.size(), 0);
    for (int64_t t = 0; t < copy_threads; ++t) {
      for (size_t a = 0; a < tile.size(); ++a) thread_max[a] = std::max(thread_max[a], split.thread_value(t, a));
    }
    // The uniform part of the flat source index (the window's offsets) and the per-thread part.
    int64_t elements = 1;
    for (int64_t extent : op.buffer->shape) elements *= extent;
    const bool narrow = elements < (int64_t{1} << 31);
    std::vector<int64_t> buffer_stride(rank, 1);
    for (size_t j = rank - 1; j-- > 0;) buffer_stride[j] = buffer_stride[j + 1] * op.buffer->shape[j + 1];
    std::string uniform, per_thread;
    for (size_t j = 0; j < rank; ++j) {
      const std::string factor = buffer_stride[j] == 1 ? "" : " * " + str(buffer_stride[j]);
      if (op.access.offsets[j]) {
        uniform += (uniform.empty() ? "" : " + ") + name_of(op.access.offsets[j]) + factor;
      }
      const int a = op.access.tile_axes[j];
      if (a >= 0 && info.thread_vars[static_cast<size_t>(a)] != "0") {
        per_thread += (per_thread.empty() ? "" : " + ") + info.thread_vars[static_cast<size_t>(a)] + factor;
      }
    }
    std::string start;  // the flat index of the thread's first element (32-bit when it fits)
    if (narrow) {
      const std::string thread_name =
          per_thread.empty() ? "" : hoisted("int", buffer + "_thread", per_thread);
      start = uniform.empty() ? (thread_name.empty() ? "0" : thread_name)
                              : thread_name.empty() ? uniform : uniform + " + " + thread_name;
      if (start != "0" && start != thread_name) {
        const std::string start_name = unique(buffer + "_start");
        line("const int " + start_name + " = " + start + ";");
        start = start_name;
      }
    }
    for (int64_t j = 0; j < vectors; ++j) {
      split.constants.clear();
      for (size_t a = 0; a < tile.size(); ++a) {
        split.constants.push_back(evaluate_terms(info.coords.slot_terms[a], j * vector));
      }
      // Buffer index j: offset + thread part + constant. Checked only where it can reach the
      // bound: along the last axis the vector's end, elsewhere its index.
      std::vector<std::string> indices;
      std::string others;
      bool last_checked = false;
      int64_t constant_flat = 0;
      for (size_t b = 0; b < rank; ++b) {
        const int a = op.access.tile_axes[b];
        std::string index = op.access.offsets[b] ? name_of(op.access.offsets[b]) : "";
        int64_t reach = 0;
        if (a >= 0) {
          const size_t axis = static_cast<size_t>(a);
          const int64_t constant = split.constants[axis];
          const std::string& thread_part = info.thread_vars[axis];
          std::string coordinate = thread_part == "0" ? "" : thread_part;
          if (constant) coordinate += (coordinate.empty() ? "" : " + ") + str(constant);
          if (coordinate.empty()) coordinate = "0";
          index = index.empty() ? coordinate : index + " + " + coordinate;
          reach = thread_max[axis] + constant;
          constant_flat += constant * buffer_stride[b];
        }
        if (index.empty()) index = "0";
        indices.push_back(index);
        const std::optional<IndexRange> offset = range_given(op.access.offsets[b], op.predicate);
        const int64_t end = b + 1 == rank ? vector : 1;  // elements from the index on that must fit
        const bool in_bounds = offset && offset->hi + reach + end <= op.access.bounds[b];
        if (b + 1 == rank) {
          last_checked = !in_bounds;
        } else if (!in_bounds) {
          others += (others.empty() ? "" : " && ") + parenthesized(index) + " < " + str(op.access.bounds[b]);
        }
      }
      line("// vector " + str(j) + ": tile slot " + str(j * vector));
      const std::string destination_address = shared_address_of(op.shared, split);
      std::string pointer;
      if (narrow) {
        pointer = start == "0" ? buffer : "(" + buffer + " + " + start + ")";
        if (constant_flat) pointer += " + " + str(constant_flat);
      } else {
        pointer = buffer + " + (" + flat_offset(op.buffer, indices) + ")";
      }
      if (others.empty() && !last_checked) {
        line("cp_async_16(" + destination_address + ", " + pointer + ", 16);");
        continue;
      }
      line("{");
      ++indent_;
      const std::string count = last_checked ? "max(0, min(" + str(vector) + ", " + str(op.access.bounds[rank - 1]) +
                                                   " - (" + indices[rank - 1] + ")))"
                                             : str(vector);
      line("const int valid = " + (others.empty() ? count : "(" + others + ") ? " + count + " : 0") + ";");
      line("cp_async_16(" + destination_address + ", valid > 0 ? " + pointer + " : " + buffer + ", valid * " +
           std::to_string(bytes) + ");");
      --indent_;
      line("}");
    }
    if (!guards.empty()) {
      --indent_;
      line("}");
    }
  }

  void shared_load(const Op& op) {
    const Value& result = op.results[0];
    const SharedAlloc& alloc = alloc_of(op.shared);
    const std::string source = shared_name(alloc);
    if (op.shared_read == matile::SharedRead::Scalar) {
      declare(result);
      for_slots(result->layout.slots(), [&](const std::string& s) {
        line(at(result, s) + " = " + source + "[" +
             shared_offset(op.shared, coordinates(result, s, matile::op_label(op))) + "];");
      });
      return;
    }
    ldmatrix(op);
  }

  // ldmatrix.x4 as the interpreter executes it: lane 8j + r supplies the address of row r of
  // matrix j; the matrices of one issue and the slots they fill follow the fragment layout.
  // Every issue's row address is the lane's part (hoisted) plus a constant per (mi, k) / (k, q).
  void ldmatrix(const Op& op) {
    const Value& result = op.results[0];
    const RegisterLayout& layout = result->layout;
    const bool trans = op.shared_read == matile::SharedRead::LdMatrixX4Trans;
    const int64_t R = result->type.shape[0], C = result->type.shape[1];
    const int wm = layout.warps_m, wn = layout.warps_n;
    const SharedAlloc& alloc = alloc_of(op.shared);
    if (dtype_bytes(alloc.dtype) != 2) invalid(matile::op_label(op) + ": ldmatrix reads 16-bit elements");
    uses_warp_ = true;
    declare(result);
    const std::string helper = trans ? "ldmatrix_x4_trans" : "ldmatrix_x4";
    const std::string out = name_of(result);
    SplitCoords coords;
    coords.threads = kernel_.threads();
    std::vector<std::string> issues;
    if (layout.kind == LayoutKind::MmaA) {
      auto expected = matile::mma_a_layout(R, C, wm, wn);
      if (!expected || *expected != layout) invalid(matile::op_label(op) + ": ldmatrix into a non-fragment layout");
      const int64_t mt = R / (16 * wm), kt = C / 16;
      // Lane 8j + r: rows m0 + 8*(j%2) + r (or m0 + 8*(j%2)), columns k0 + 8*(j/2) (+ r).
      coords.thread_exprs = {"(warp % " + std::to_string(wm) + ") * " + str(mt * 16) +
                                 " + 8 * ((lane / 8) % 2)" + (trans ? "" : " + lane % 8"),
                             "8 * (lane / 16)" + std::string(trans ? " + lane % 8" : "")};
      coords.thread_value = [=](int64_t t, size_t axis) -> int64_t {
        const int64_t lane = t % 32, warp = t / 32;
        if (axis == 0) return (warp % wm) * mt * 16 + 8 * ((lane / 8) % 2) + (trans ? 0 : lane % 8);
        return 8 * (lane / 16) + (trans ? lane % 8 : 0);
      };
      line("// row addresses: swizzle((lane_row + 16 * mi) * stride + lane_col + 16 * k), the lane's");
      line("// part hoisted, one constant per (mi, k)");
      for (int64_t k = 0; k < kt; ++k) {
        for (int64_t mi = 0; mi < mt; ++mi) {
          coords.constants = {16 * mi, 16 * k};
          const std::string slot = str(8 * (mi + mt * k));
          line(helper + "(&" + out + "[" + slot + "], &" + out + "[" + slot + " + 4], " +
               shared_address_of(op.shared, coords) + ");");
        }
      }
    } else if (layout.kind == LayoutKind::MmaB) {
      auto expected = matile::mma_b_layout(R, C, wm, wn);
      if (!expected || *expected != layout) invalid(matile::op_label(op) + ": ldmatrix into a non-fragment layout");
      const int64_t kt = R / 16, nt = C / (8 * wn);
      if (nt % 2 != 0) unsupported(matile::op_label(op) + ": ldmatrix.x4 of B needs an even number of n atoms per warp");
      // Lane 8j + r: rows k0 + 8*(j%2) (+ r), columns n0 + 8*(j/2) (+ r).
      coords.thread_exprs = {"8 * ((lane / 8) % 2)" + std::string(trans ? " + lane % 8" : ""),
                             "(warp / " + std::to_string(wm) + ") * " + str(nt * 8) + " + 8 * (lane / 16)" +
                                 (trans ? "" : " + lane % 8")};
      coords.thread_value = [=](int64_t t, size_t axis) -> int64_t {
        const int64_t lane = t % 32, warp = t / 32;
        if (axis == 0) return 8 * ((lane / 8) % 2) + (trans ? lane % 8 : 0);
        return (warp / wm) * nt * 8 + 8 * (lane / 16) + (trans ? 0 : lane % 8);
      };
      line("// row addresses: swizzle((lane_row + 16 * k) * stride + lane_col + 16 * q), the lane's");
      line("// part hoisted, one constant per (k, q)");
      for (int64_t k = 0; k < kt; ++k) {
        for (int64_t q = 0; q < nt / 2; ++q) {
          coords.constants = {16 * k, 16 * q};
          line(helper + "(&" + out + "[" + str(4 * (k + kt * (2 * q))) + "], &" + out + "[" +
               str(4 * (k + kt * (2 * q + 1))) + "], " + shared_address_of(op.shared, coords) + ");");
        }
      }
    } else {
      invalid(matile::op_label(op) + ": ldmatrix result is not an mma A or B fragment");
    }
  }

  void shared_store(const Op& op) {
    const Value& value = op.operands[0];
    const std::string target = shared_name(alloc_of(op.shared));
    for_slots(value->layout.slots(), [&](const std::string& s) {
      line(target + "[" + shared_offset(op.shared, coordinates(value, s, matile::op_label(op))) + "] = " +
           at(value, s) + ";");
    });
  }

  void for_loop(const Op& op) {
    // The carried values live in the result variables; the block arguments are those same
    // variables inside the body, and the Yield assigns them at the end of each iteration.
    for (size_t i = 0; i < op.results.size(); ++i) {
      const std::string name = declare(op.results[i]);
      names_[op.block_args[i].get()] = name;
      for_slots(op.results[i]->layout.slots(), [&](const std::string& s) {
        line(at(op.results[i], s) + " = " + at(op.operands[i], s) + ";");
      });
    }
    const std::string var = unique(op.loop_var->name);
    names_[op.loop_var.get()] = var;
    ranges_[op.loop_var.get()] = {0, op.extent - 1};
    if (op.pipeline_stages > 0) {
      line("// software-pipelined: " + std::to_string(op.pipeline_stages) + " stages in flight");
    }
    // An early-stop trip count (iterations past it are proven to change nothing) ends the loop
    // there instead of running masked iterations.
    std::string bound = str(op.extent);
    if (op.trip_count) bound = "min(" + bound + ", " + name_of(op.trip_count) + ")";
    line("for (int " + var + " = 0; " + var + " < " + bound + "; ++" + var + ") {");
    ++indent_;
    visit(*op.body);
    const Op& yield = *op.body->ops.back();
    if (yield.kind != OpKind::Yield || yield.operands.size() != op.results.size()) {
      invalid(matile::op_label(op) + ": body does not end with a matching yield");
    }
    // A yielded block argument would be overwritten before it is read: copy through temps.
    bool needs_temps = false;
    for (const Value& v : yield.operands) {
      for (const Value& arg : op.block_args) needs_temps = needs_temps || v == arg;
    }
    if (!op.results.empty()) line("// yield");
    std::vector<std::string> sources;
    for (size_t i = 0; i < yield.operands.size(); ++i) {
      const Value& v = yield.operands[i];
      if (needs_temps) {
        const std::string temp = unique(name_of(op.results[i]) + "_next");
        line(std::string(c_type(v->type.dtype)) + " " + temp + slots_suffix(v) + ";");
        for_slots(v->layout.slots(), [&](const std::string& s) {
          line((v->layout.slots() == 1 ? temp : temp + "[" + s + "]") + " = " + at(v, s) + ";");
        });
        sources.push_back(temp);
      } else {
        sources.push_back(name_of(v));
      }
    }
    for (size_t i = 0; i < yield.operands.size(); ++i) {
      const Value& v = yield.operands[i];
      if (v == op.block_args[i]) continue;
      for_slots(v->layout.slots(), [&](const std::string& s) {
        const std::string from = v->layout.slots() == 1 ? sources[i] : sources[i] + "[" + s + "]";
        line(at(op.results[i], s) + " = " + from + ";");
      });
    }
    --indent_;
    line("}");
  }

  const Kernel& kernel_;
  std::string symbol_;
  const EmitOptions& options_;
  std::ostringstream body_;
  int indent_ = 1;
  int last_statement_ = -1;
  bool uses_warp_ = false;
  std::set<std::string> used_;
  std::map<const matile::ValueNode*, std::string> names_;
  std::map<const scalar::BufferNode*, std::string> buffer_names_;
  std::map<const SharedAlloc*, std::string> shared_names_;
  std::map<std::string, LayoutInfo> layouts_;
  std::vector<std::string> layout_lines_;
  std::vector<std::string> hoisted_lines_;
  std::map<std::string, std::string> hoisted_names_;  // expression -> hoisted variable
  std::map<const matile::ValueNode*, IndexRange> ranges_;
  std::map<const matile::ValueNode*, const Op*> definitions_;  // uniform scalars
  std::map<const matile::ValueNode*, int64_t> alignments_;     // see alignment_of
};

}  // namespace

std::optional<SwizzleSplit> split_swizzled_offset(const std::function<int64_t(int64_t)>& swizzle,
                                                  const std::vector<int64_t>& bases,
                                                  const std::vector<int64_t>& axis_constants) {
  if (bases.empty() || axis_constants.size() > 16) return std::nullopt;
  int64_t total = 0;
  for (int64_t c : axis_constants) total += c;
  for (uint32_t mask = 0; mask < (1u << axis_constants.size()); ++mask) {
    int64_t xor_constant = 0;
    for (size_t k = 0; k < axis_constants.size(); ++k) {
      if (mask & (1u << k)) xor_constant += axis_constants[k];
    }
    const int64_t base0 = bases.front();
    SwizzleSplit split;
    split.xor_part = swizzle(base0 + xor_constant) ^ swizzle(base0);
    split.add_part = swizzle(base0 + total) - (swizzle(base0) ^ split.xor_part);
    bool holds = true;
    for (size_t i = 0; i < bases.size() && holds; ++i) {
      const int64_t base = bases[i];
      holds = base >= 0 && base + total >= 0 &&
              swizzle(base + total) == (swizzle(base) ^ split.xor_part) + split.add_part;
    }
    if (holds) return split;
  }
  return std::nullopt;
}

Result<EmittedModule> emit_cuda(const Module& module, const EmitOptions& options) {
  const std::vector<std::string> problems = matile::verify(module);
  if (!problems.empty()) {
    return codegen_error(CodegenError::Kind::InvalidInput,
                         "MA tile module " + module.name + " does not verify: " + problems.front());
  }
  EmittedModule emitted;
  std::ostringstream source;
  source << "// CUDA C++ generated by Nautilus " << NAUTILUS_VERSION << " from the MA tile IR of `"
         << module.name << "` (" << module.arch << ").\n"
         << "// Regenerate with `nautilus compile`; every line comes from the emitter.\n\n"
         << kPrelude;
  std::set<std::string> symbols;
  for (const matile::KernelPtr& kernel : module.kernels) {
    std::string symbol = sanitize(kernel->name);
    if (symbol.rfind(sanitize(module.name), 0) != 0) symbol = sanitize(module.name) + "_" + symbol;
    for (int n = 1; symbols.count(symbol); ++n) symbol = sanitize(kernel->name) + "_" + std::to_string(n);
    symbols.insert(symbol);
    EmittedKernel launch;
    try {
      KernelEmitter emitter(*kernel, symbol, options);
      source << "\n" << emitter.emit(&launch);
    } catch (const EmitFailure& failure) {
      return codegen_error(failure.kind, "kernel " + kernel->name + ": " + failure.message);
    }
    emitted.kernels.push_back(launch);
  }
  emitted.source = source.str();
  return emitted;
}

}  // namespace nautilus::codegen
