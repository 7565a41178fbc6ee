// Pieces the scalar, VR tile and MA tile interpreters share: the error they unwind with, the
// guarded verify-then-run wrapper that turns it into InterpretResult::error, the arithmetic of
// element-wise ops, and the global buffers (input checking and rounding, unwritten outputs and
// intermediates, result collection). The tile interpreters include this; nothing here depends
// on them.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/scalar/ir.h"
#include "core/support/dtype.h"
#include "core/support/tensor.h"

namespace nautilus::scalar::detail {

struct RuntimeError {
  std::string message;
};

// The most elements an interpreter allocates over all buffers: 2^28 (2 GiB of doubles) is far
// beyond the small shapes interpreters run on. Refusing up front beats being killed for memory
// halfway through filling the buffers, and keeps every flat offset far inside int64.
constexpr int64_t kMaxTotalElements = int64_t{1} << 28;

// "[2, 3]": a shape, or the indices of an element.
std::string bracketed(const std::vector<int64_t>& values);

// The coordinates of a row-major flat offset in `shape`.
std::vector<int64_t> unflatten(const std::vector<int64_t>& shape, int64_t offset);

// Fast path of round_to for the common f32 case.
inline double round_value(DType dtype, double value) {
  if (dtype == DType::F32) return static_cast<double>(static_cast<float>(value));
  return round_to(dtype, value);
}

// A float unary operation, exact in double (the caller rounds).
double apply_unary(UnaryOp op, double x);

// A float binary operation, exact in double (the caller rounds): for +, -, *, / the double result
// rounded to f32 (or narrower) equals the correctly rounded operation in that type. max/min
// follow fmaxf/fminf (a NaN operand is ignored), as on the GPU. NaN for the index-only
// FloorDiv and Mod.
double apply_float_binary(BinaryOp op, double a, double b);

// Floor division and modulo as in Python: the quotient rounds toward -inf and the remainder has
// the sign of the divisor. Requires b != 0 and not (a == INT64_MIN and b == -1).
struct FloorDivision {
  int64_t quotient;
  int64_t remainder;
};
FloorDivision floor_divide(int64_t a, int64_t b);

template <typename T>
bool compare_values(CompareOp op, T a, T b) {
  switch (op) {
    case CompareOp::LT: return a < b;
    case CompareOp::LE: return a <= b;
    case CompareOp::GT: return a > b;
    case CompareOp::GE: return a >= b;
    case CompareOp::EQ: return a == b;
    case CompareOp::NE: return a != b;
  }
  return false;
}

// Throws "<what> does not verify: <first problem> (and N more)" when `problems` is not empty.
void check_verified(const std::vector<std::string>& problems, const std::string& what);

// Runs `body(result)`; a RuntimeError or running out of memory becomes result.error, and a
// failed run returns no outputs or intermediates. `what` is "program" or "module".
template <typename Result, typename Body>
Result run_guarded(const std::string& what, const std::string& name, Body&& body) {
  Result result;
  try {
    body(result);
    result.ok = true;
  } catch (const RuntimeError& error) {
    result.error = error.message;
  } catch (const std::bad_alloc&) {
    result.error = "out of memory while interpreting " + what + " " + name;
  }
  if (!result.ok) {
    result.outputs.clear();
    result.intermediates.clear();
  }
  return result;
}

// The strides of a dense row-major array of `shape`.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);

// A buffer's element count, or kMaxTotalElements + 1 once it passes that limit (or int64),
// counting from the innermost axis.
int64_t capped_element_count(const BufferNode& buffer);

// How many elements a buffer holds; more than kMaxTotalElements is refused.
using ElementCount = int64_t (*)(const BufferNode& buffer);

struct BufferState {
  const BufferNode* node = nullptr;
  std::vector<int64_t> strides;
  std::vector<double> values;
  std::vector<uint8_t> written;  // empty for inputs: every input element is defined
};

// The global buffers of one program or module: the parameters, then the allocations.
class GlobalBuffers {
 public:
  // `what` ("program" or "module") and `name` name the owner in error messages.
  GlobalBuffers(std::string what, std::string name)
      : what_(std::move(what)), name_(std::move(name)) {}

  // Checks that `inputs` names only input parameters, each of the right shape and size, rounds
  // them to their dtypes and starts every other buffer unwritten (NaN).
  void allocate(const std::vector<Buffer>& params, const std::vector<Buffer>& allocations,
                const TensorMap& inputs, ElementCount element_count = capped_element_count);

  // Checks that every output is completely written; fills the outputs and intermediates.
  void collect(TensorMap* outputs, TensorMap* intermediates) const;

  std::vector<BufferState> buffers;
  std::unordered_map<const BufferNode*, int32_t> index;

 private:
  BufferState make_state(const BufferNode& buffer, const TensorMap& inputs,
                         ElementCount element_count);
  std::string input_names(const std::vector<Buffer>& params) const;

  std::string what_;
  std::string name_;
  int64_t total_elements_ = 0;  // over all buffers allocated so far
};

}  // namespace nautilus::scalar::detail
