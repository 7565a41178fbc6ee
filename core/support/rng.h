// Seeded random numbers that are identical on every platform and compiler.
//
// std::uniform_real_distribution is implementation-defined, so inputs generated with it would
// differ between the CI machine, a user's machine and the GPU runner. SplitMix64 plus a fixed
// mapping to doubles gives the same inputs everywhere for the same seed.
#pragma once

#include <cstdint>
#include <string_view>

namespace nautilus {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  // The generator seeded with `seed` after `index` calls to next(): the state advances by a
  // constant, so any position of the stream is reached directly (parallel tensor fills).
  static SplitMix64 at(uint64_t seed, uint64_t index) {
    return SplitMix64(seed + index * kIncrement);
  }

  uint64_t next() {
    uint64_t z = (state_ += kIncrement);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double next_unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * next_unit(); }

 private:
  static constexpr uint64_t kIncrement = 0x9e3779b97f4a7c15ULL;
  uint64_t state_;
};

// A per-tensor seed derived from the run seed and the tensor's position, so adding an input does
// not change the values of the others.
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  SplitMix64 mix(seed ^ (0xd1b54a32d192ed03ULL * (stream + 1)));
  return mix.next();
}

// A 64-bit hash of `text` that is the same on every platform and compiler (FNV-1a), unlike
// std::hash: the search breaks ties between equal estimates with it, so a run is reproducible.
inline uint64_t stable_hash(std::string_view text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace nautilus
