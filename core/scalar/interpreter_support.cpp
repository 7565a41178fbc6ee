#include "core/scalar/interpreter_support.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nautilus::scalar::detail {

std::string bracketed(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

std::vector<int64_t> unflatten(const std::vector<int64_t>& shape, int64_t offset) {
  std::vector<int64_t> coordinates(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coordinates[d] = offset % shape[d];
    offset /= shape[d];
  }
  return coordinates;
}

double apply_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Exp2: return std::exp2(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Log2: return std::log2(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Rsqrt: return 1.0 / std::sqrt(x);
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::Abs: return std::fabs(x);
  }
  return x;
}

double apply_float_binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Max: return std::fmax(a, b);
    case BinaryOp::Min: return std::fmin(a, b);
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

FloorDivision floor_divide(int64_t a, int64_t b) {
  FloorDivision result{a / b, a % b};
  if (result.remainder != 0 && ((result.remainder < 0) != (b < 0))) {
    --result.quotient;
    result.remainder += b;
  }
  return result;
}

void check_verified(const std::vector<std::string>& problems, const std::string& what) {
  if (problems.empty()) return;
  throw RuntimeError{what + " does not verify: " + problems.front() +
                     (problems.size() > 1
                          ? " (and " + std::to_string(problems.size() - 1) + " more)"
                          : "")};
}

namespace {

// As Program::find_buffer.
const Buffer* find(const std::vector<Buffer>& params, const std::vector<Buffer>& allocations,
                   const std::string& buffer_name) {
  for (const std::vector<Buffer>* list : {&params, &allocations}) {
    for (const Buffer& buffer : *list) {
      if (buffer && buffer->name == buffer_name) return &buffer;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

int64_t capped_element_count(const BufferNode& buffer) {
  const std::vector<int64_t>& shape = buffer.shape;
  int64_t count = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (__builtin_mul_overflow(count, shape[d], &count) || count > kMaxTotalElements) {
      return kMaxTotalElements + 1;
    }
  }
  return count;
}

void GlobalBuffers::allocate(const std::vector<Buffer>& params,
                             const std::vector<Buffer>& allocations, const TensorMap& inputs,
                             ElementCount element_count) {
  for (const auto& [name, tensor] : inputs) {
    const Buffer* buffer = find(params, allocations, name);
    if (!buffer || (*buffer)->role != BufferRole::Input) {
      throw RuntimeError{name + " is not an input of " + what_ + " " + name_ +
                         " (its inputs are " + input_names(params) + ")"};
    }
  }
  for (const std::vector<Buffer>* list : {&params, &allocations}) {
    for (const Buffer& buffer : *list) {
      index.emplace(buffer.get(), static_cast<int32_t>(buffers.size()));
      buffers.push_back(make_state(*buffer, inputs, element_count));
    }
  }
}

std::string GlobalBuffers::input_names(const std::vector<Buffer>& params) const {
  std::string names;
  for (const Buffer& buffer : params) {
    if (buffer->role != BufferRole::Input) continue;
    names += names.empty() ? "" : ", ";
    names += buffer->name;
  }
  return names.empty() ? "none" : names;
}

BufferState GlobalBuffers::make_state(const BufferNode& buffer, const TensorMap& inputs,
                                      ElementCount element_count) {
  BufferState state;
  state.node = &buffer;
  const int64_t count = element_count(buffer);
  total_elements_ += std::min(count, kMaxTotalElements + 1);
  if (total_elements_ > kMaxTotalElements) {
    throw RuntimeError{"buffer " + buffer.name + " of shape " + bracketed(buffer.shape) +
                       " brings " + what_ + " " + name_ + " past the interpreter's limit of " +
                       std::to_string(kMaxTotalElements) + " elements; bind smaller sizes"};
  }
  state.strides = row_major_strides(buffer.shape);
  if (buffer.role == BufferRole::Input) {
    auto it = inputs.find(buffer.name);
    if (it == inputs.end()) throw RuntimeError{"missing input " + buffer.name};
    const TensorData& tensor = it->second;
    if (tensor.shape != buffer.shape) {
      throw RuntimeError{"input " + buffer.name + " has shape " + bracketed(tensor.shape) + "; " +
                         what_ + " " + name_ + " expects " + bracketed(buffer.shape)};
    }
    if (static_cast<int64_t>(tensor.values.size()) != count) {
      throw RuntimeError{"input " + buffer.name + " has " + std::to_string(tensor.values.size()) +
                         " values; its shape " + bracketed(buffer.shape) + " has " +
                         std::to_string(count) + " elements"};
    }
    state.values.reserve(tensor.values.size());
    for (double value : tensor.values) state.values.push_back(round_value(buffer.dtype, value));
  } else {
    state.values.assign(static_cast<size_t>(count), std::numeric_limits<double>::quiet_NaN());
    state.written.assign(static_cast<size_t>(count), 0);
  }
  return state;
}

void GlobalBuffers::collect(TensorMap* outputs, TensorMap* intermediates) const {
  for (const BufferState& state : buffers) {
    const BufferNode& buffer = *state.node;
    if (buffer.role == BufferRole::Input) continue;
    if (buffer.role == BufferRole::Output) {
      for (size_t i = 0; i < state.written.size(); ++i) {
        if (!state.written[i]) {
          throw RuntimeError{"output " + buffer.name +
                             bracketed(unflatten(buffer.shape, static_cast<int64_t>(i))) +
                             " was never written"};
        }
      }
    }
    TensorMap& map = buffer.role == BufferRole::Output ? *outputs : *intermediates;
    map[buffer.name] = TensorData{buffer.shape, buffer.dtype, state.values};
  }
}

}  // namespace nautilus::scalar::detail
