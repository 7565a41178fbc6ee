// The hash the tuning database keys text by (spec text, generated code): FNV-1a over the bytes,
// 64 bits, printed as 16 hex digits. Stable across runs, machines and versions. Header-only so
// that executors in profiler/ hash generated code without linking the database (SQLite).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace nautilus::tune {

inline std::string hash_text(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

}  // namespace nautilus::tune
