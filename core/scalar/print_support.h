// Printing pieces the scalar IR printer and the VR and MA tile printers share: number, shape
// and constant text, the SSA value lists of the tile IRs, the DOT quoting and buffer nodes, and
// the JSON of buffers, shapes and provenance.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scalar/ir.h"
#include "core/support/dtype.h"

namespace nautilus::scalar {

// Shortest digits that read back to the same value in `dtype`: f16, bf16 and f32 values are all
// exact floats, so the float overload of to_chars gives the shortest form for them; f64 uses the
// double overload. A decimal point is added to integral values so that a float never reads as
// an integer. Infinities and NaN are "inf", "-inf" and "nan".
std::string float_digits(double value, DType dtype);

// What every printer writes for a missing (null) node.
inline constexpr const char* kNullText = "<null>";

// "[2, 3]": any list of integers (dims, offsets, xor masks).
template <typename Int>
std::string int_list(const std::vector<Int>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

// "[2, 3]".
inline std::string shape_text(const std::vector<int64_t>& shape) { return int_list(shape); }

// A constant as the value it denotes in `dtype` (a Full's value, a load's `other`): "true" or
// "false" for Bool, an integer for an integral Index within int64 (anything else, rejected by
// the verifiers, keeps its digits so the text shows what is wrong), else float_digits of the
// value rounded to `dtype`.
std::string constant_text(double value, DType dtype);

// "lt", "le", "gt", "ge", "eq", "ne": the word of a tile IR `cmp` op.
const char* compare_word(CompareOp op);

// The tile IRs' SSA values (VR and MA tile `Value`s: shared pointers to nodes with a `name`).
// "%name", or kNullText for a missing value.
template <typename ValuePtr>
std::string value_ref(const ValuePtr& value) {
  return value ? "%" + value->name : kNullText;
}

// "%a, %b".
template <typename ValuePtr>
std::string value_list(const std::vector<ValuePtr>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) text += ", ";
    text += value_ref(values[i]);
  }
  return text;
}

// A tile For's carried values, " iter_args(%acc = %init, ...)", or "" when it carries none.
template <typename ValuePtr>
std::string iter_args_text(const std::vector<ValuePtr>& block_args,
                           const std::vector<ValuePtr>& inits) {
  if (block_args.empty() && inits.empty()) return "";
  std::string text = " iter_args(";
  const size_t count = std::max(block_args.size(), inits.size());
  for (size_t i = 0; i < count; ++i) {
    if (i) text += ", ";
    text += (i < block_args.size() ? value_ref(block_args[i]) : kNullText) + " = " +
            (i < inits.size() ? value_ref(inits[i]) : kNullText);
  }
  return text + ")";
}

// "f32[2, 3] global".
std::string buffer_type(const BufferNode& buffer);

// A DOT double-quoted string: only `"` and `\` are special (a newline becomes the `\n` escape).
std::string dot_quote(std::string_view text);

// The DOT statement (one indented line) of a buffer's node, styled by its role.
std::string dot_buffer_node(const BufferNode& buffer);

nlohmann::ordered_json provenance_json(const Provenance& provenance);
nlohmann::ordered_json shape_json(const std::vector<int64_t>& shape);

// The parameters, then the allocations (null ones as null): name, shape, dtype, scope, role and
// provenance.
nlohmann::ordered_json buffers_json(const std::vector<Buffer>& params,
                                    const std::vector<Buffer>& allocations);

}  // namespace nautilus::scalar
