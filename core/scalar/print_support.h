// Printing pieces the scalar IR printer and the VR tile printer share: number and shape text,
// the DOT quoting and buffer nodes, and the JSON of buffers, shapes and provenance.
#pragma once

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

// "[2, 3]".
std::string shape_text(const std::vector<int64_t>& shape);

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
