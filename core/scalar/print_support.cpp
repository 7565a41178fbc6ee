#include "core/scalar/print_support.h"

#include <charconv>
#include <cmath>

namespace nautilus::scalar {

using Json = nlohmann::ordered_json;

std::string float_digits(double value, DType dtype) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  const std::to_chars_result result =
      dtype == DType::F64
          ? std::to_chars(buffer, buffer + sizeof buffer, value)
          : std::to_chars(buffer, buffer + sizeof buffer, static_cast<float>(value));
  std::string digits(buffer, result.ptr);
  if (digits.find_first_of(".e") == std::string::npos) digits += ".0";
  return digits;
}

std::string constant_text(double value, DType dtype) {
  const double rounded = round_to(dtype, value);
  if (dtype == DType::Bool) return rounded != 0.0 ? "true" : "false";
  if (dtype == DType::Index) {
    if (std::isfinite(rounded) && rounded >= -0x1p63 && rounded < 0x1p63) {
      return std::to_string(static_cast<int64_t>(rounded));
    }
    return float_digits(value, DType::F64);
  }
  return float_digits(rounded, dtype);
}

const char* compare_word(CompareOp op) {
  switch (op) {
    case CompareOp::LT: return "lt";
    case CompareOp::LE: return "le";
    case CompareOp::GT: return "gt";
    case CompareOp::GE: return "ge";
    case CompareOp::EQ: return "eq";
    case CompareOp::NE: return "ne";
  }
  return "?";
}

std::string buffer_type(const BufferNode& buffer) {
  return std::string(dtype_name(buffer.dtype)) + shape_text(buffer.shape) + " " +
         memory_scope_name(buffer.scope) + (buffer.tail_in_global ? " tail=global" : "");
}

std::string dot_quote(std::string_view text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (c == '\n') {
      quoted += "\\n";
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string dot_buffer_node(const BufferNode& buffer) {
  std::string style;
  switch (buffer.role) {
    case BufferRole::Input: style = "style=filled, fillcolor=\"#dbeafe\""; break;
    case BufferRole::Output: style = "style=filled, fillcolor=\"#dcfce7\", penwidth=2"; break;
    case BufferRole::Intermediate: style = "style=dashed"; break;
    case BufferRole::Workspace: style = "style=dotted"; break;
  }
  return "  " + dot_quote("buffer:" + buffer.name) + " [shape=box, " + style + ", label=" +
         dot_quote(buffer.name + "\n" + buffer_type(buffer) + " " +
                   buffer_role_name(buffer.role)) +
         "];\n";
}

Json provenance_json(const Provenance& provenance) {
  Json json = {{"statement", provenance.statement}};
  if (provenance.range.valid) {
    json["begin"] = provenance.range.begin;
    json["end"] = provenance.range.end;
  }
  return json;
}

Json shape_json(const std::vector<int64_t>& shape) {
  Json json = Json::array();
  for (int64_t extent : shape) json.push_back(extent);
  return json;
}

Json buffers_json(const std::vector<Buffer>& params, const std::vector<Buffer>& allocations) {
  Json buffers = Json::array();
  for (const std::vector<Buffer>* list : {&params, &allocations}) {
    for (const Buffer& buffer : *list) {
      if (!buffer) {
        buffers.push_back(nullptr);
        continue;
      }
      buffers.push_back({{"name", buffer->name},
                         {"shape", shape_json(buffer->shape)},
                         {"dtype", dtype_name(buffer->dtype)},
                         {"scope", memory_scope_name(buffer->scope)},
                         {"role", buffer_role_name(buffer->role)},
                         {"provenance", provenance_json(buffer->provenance)}});
    }
  }
  return buffers;
}

}  // namespace nautilus::scalar
