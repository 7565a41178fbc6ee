#include "core/support/npy.h"

#include <cstring>
#include <fstream>

namespace nautilus {

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    default: return "<f4";
  }
}

namespace {

// IEEE binary16 bits of a value that is already representable as f16.
uint16_t to_half_bits(double value) {
  float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffff;
  if (((bits >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 : 0));
  if (f == 0.0f) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exponent <= 0) {
    // Subnormal: shift the implicit bit in; the value is exact so no rounding is needed.
    if (exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000;
    return static_cast<uint16_t>(sign | (mantissa >> (14 - exponent)));
  }
  return static_cast<uint16_t>(sign | (exponent << 10) | (mantissa >> 13));
}

}  // namespace

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
    } else if (dtype == DType::F16) {
      uint16_t h = to_half_bits(v);
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
