// A small seeded random source for the differential tester's generators (spec text, schedule
// walks). It wraps the project's SplitMix64 so that a (seed, triple index) pair gives the same
// spec and schedule on every platform and compiler: a failure found at night replays anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/support/rng.h"

namespace nautilus::difftest {

class Rng {
 public:
  explicit Rng(uint64_t seed) : mix_(seed) {}
  // The stream of triple `index` of a run seeded with `seed`.
  static Rng for_triple(uint64_t seed, uint64_t index) {
    return Rng(derive_seed(seed, index));
  }

  uint64_t next() { return mix_.next(); }
  // Uniform integer in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(mix_.next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return mix_.next_unit() < p; }
  template <typename T>
  const T& pick(const std::vector<T>& values) {
    return values[static_cast<size_t>(range(0, static_cast<int64_t>(values.size()) - 1))];
  }
  std::string pick(std::initializer_list<const char*> values) {
    std::vector<std::string> v(values.begin(), values.end());
    return pick(v);
  }

 private:
  SplitMix64 mix_;
};

}  // namespace nautilus::difftest
