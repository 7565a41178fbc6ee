#include "core/support/npy.h"

#include <fstream>

namespace nautilus {

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    // NumPy has no int4: its values are written one to a byte (unpacked), as int8.
    case DType::I4: return "|i1";
    // NumPy has no fp8 or bf16: their values are written as f32, which holds them exactly.
    default: return "<f4";
  }
}

std::string write_npy(const std::string& path, const std::vector<int64_t>& shape,
                      const std::vector<double>& values, DType dtype) {
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) shape_text += ",";
    if (i + 1 < shape.size()) shape_text += " ";
  }
  shape_text += ")";
  std::string header = std::string("{'descr': '") + npy_descr(dtype) +
                       "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Magic (6) + version (2) + header length (2) + header + '\n' is padded to a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::ofstream out(path, std::ios::binary);
  if (!out) return "cannot create '" + path + "'";
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t header_len = static_cast<uint16_t>(header.size());
  char len_bytes[2] = {static_cast<char>(header_len & 0xff), static_cast<char>(header_len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (double v : values) {
    if (dtype == DType::F64) {
      out.write(reinterpret_cast<const char*>(&v), 8);
    } else if (is_integer_storage(dtype)) {
      const auto byte = static_cast<int8_t>(round_to(dtype, v));
      out.write(reinterpret_cast<const char*>(&byte), 1);
    } else if (dtype == DType::F16) {
      uint16_t h = float_to_half_bits(static_cast<float>(v));
      out.write(reinterpret_cast<const char*>(&h), 2);
    } else {
      float f = static_cast<float>(v);
      out.write(reinterpret_cast<const char*>(&f), 4);
    }
  }
  if (!out) return "cannot write '" + path + "'";
  return {};
}

}  // namespace nautilus
