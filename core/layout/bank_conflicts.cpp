#include "core/layout/bank_conflicts.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/layout/printer.h"

namespace nautilus::layout {

namespace {

constexpr int64_t kBanks = 32;
constexpr int64_t kBankBytes = 4;
constexpr int64_t kWarpLanes = 32;
// Bytes one wavefront delivers: the lanes of a phase request at most this much.
constexpr int64_t kWavefrontBytes = kBanks * kBankBytes;

}  // namespace

Result<std::vector<BankPhaseConflicts>> bank_phases(
    const std::vector<std::optional<int64_t>>& byte_addresses, int access_bytes) {
  if (access_bytes != 1 && access_bytes != 2 && access_bytes != 4 && access_bytes != 8 &&
      access_bytes != 16) {
    return layout_error("shared-memory accesses are 1, 2, 4, 8 or 16 bytes, not " +
                        std::to_string(access_bytes));
  }
  if (static_cast<int64_t>(byte_addresses.size()) > kWarpLanes) {
    return layout_error(std::to_string(byte_addresses.size()) + " addresses for a 32-lane warp");
  }
  for (size_t lane = 0; lane < byte_addresses.size(); ++lane) {
    if (!byte_addresses[lane]) continue;
    const int64_t a = *byte_addresses[lane];
    if (a < 0 || a % access_bytes != 0) {
      return layout_error("lane " + std::to_string(lane) + " address " + std::to_string(a) +
                          " is not a non-negative multiple of " + std::to_string(access_bytes));
    }
  }
  const int64_t lanes_per_phase = std::min(kWarpLanes, kWavefrontBytes / access_bytes);
  const int64_t words_per_access = std::max<int64_t>(1, access_bytes / kBankBytes);
  std::vector<BankPhaseConflicts> phases;
  for (size_t first = 0; first < byte_addresses.size(); first += lanes_per_phase) {
    const size_t last = std::min(byte_addresses.size(), first + lanes_per_phase);
    std::map<int64_t, std::set<int64_t>> words_of_bank;  // distinct words each bank delivers
    for (size_t lane = first; lane < last; ++lane) {
      if (!byte_addresses[lane]) continue;
      const int64_t first_word = *byte_addresses[lane] / kBankBytes;
      for (int64_t w = 0; w < words_per_access; ++w) {
        words_of_bank[(first_word + w) % kBanks].insert(first_word + w);
      }
    }
    if (words_of_bank.empty()) continue;  // every lane of the phase is inactive
    BankPhaseConflicts phase;
    phase.phase = static_cast<int>(first / static_cast<size_t>(lanes_per_phase));
    size_t busiest = 0;
    for (const auto& [bank, words] : words_of_bank) {
      busiest = std::max(busiest, words.size());
      if (words.size() > 1) phase.conflicting_banks.push_back(static_cast<int>(bank));
    }
    phase.wavefronts = static_cast<int64_t>(busiest);
    phases.push_back(std::move(phase));
  }
  return phases;
}

Result<BankConflicts> count_bank_conflicts(const std::vector<int64_t>& byte_addresses,
                                           int access_bytes) {
  const std::vector<std::optional<int64_t>> lanes(byte_addresses.begin(), byte_addresses.end());
  Result<std::vector<BankPhaseConflicts>> phases = bank_phases(lanes, access_bytes);
  if (!phases) return phases.error();
  BankConflicts result;
  result.instructions = byte_addresses.empty() ? 0 : 1;
  for (const BankPhaseConflicts& phase : *phases) {
    result.wavefronts += phase.wavefronts;
    result.ideal_wavefronts += 1;
  }
  return result;
}

Result<BankConflicts> count_bank_conflicts(const ComposedLayout& smem, int element_bytes,
                                           const TVLayout& access, int64_t vector_elements) {
  const std::string context = "bank conflicts of " + to_string(access) + " on " + to_string(smem);
  if (smem.layout.rank() != access.tile.rank()) {
    return layout_error(context + ": the shared-memory layout and the tile differ in rank");
  }
  for (int k = 0; k < access.tile.rank(); ++k) {
    if (smem.layout.mode(k).size() != product(access.tile.mode(k))) {
      return layout_error(context + ": mode " + std::to_string(k) +
                          " of the shared-memory layout and of the tile differ in size");
    }
  }
  if (element_bytes < 1 || vector_elements < 1 || access.values() % vector_elements != 0) {
    return layout_error(context + ": " + std::to_string(vector_elements) +
                        "-element vectors do not divide each thread's " +
                        std::to_string(access.values()) + " values");
  }
  const int64_t access_bytes = vector_elements * element_bytes;
  const int64_t vectors = access.values() / vector_elements;
  // A tile and a shared layout of plain modes (no nested shapes) take their offsets by div and
  // mod, without building a coordinate tuple per element.
  bool flat = smem.layout.rank() == access.tile.rank() && !smem.layout.shape().is_leaf();
  std::vector<int64_t> extents, strides;
  for (int k = 0; flat && k < access.tile.rank(); ++k) {
    const IntTuple& extent = access.tile.mode(k);
    const IntTuple& shape = smem.layout.shape().mode(k);
    const IntTuple& stride = smem.layout.stride().mode(k);
    flat = extent.is_leaf() && shape.is_leaf() && stride.is_leaf() && extent.value() == shape.value();
    if (flat) {
      extents.push_back(extent.value());
      strides.push_back(stride.value());
    }
  }
  const auto flat_offset = [&](int64_t index) {
    int64_t offset = 0;
    for (size_t k = 0; k < extents.size(); ++k) {
      // The last mode keeps counting past its extent, as coordinate_of does.
      const int64_t c = k + 1 == extents.size() ? index : index % extents[k];
      offset += c * strides[k];
      index /= extents[k];
    }
    return offset;
  };
  const TVIndexTable indices(access);
  BankConflicts total;
  for (int64_t warp_first = 0; warp_first < access.threads(); warp_first += kWarpLanes) {
    const int64_t lanes = std::min(kWarpLanes, access.threads() - warp_first);
    for (int64_t k = 0; k < vectors; ++k) {
      std::vector<int64_t> addresses;
      for (int64_t lane = 0; lane < lanes; ++lane) {
        const int64_t thread = warp_first + lane;
        // Offsets of the vector's elements; they must be consecutive for one access.
        int64_t start = 0;
        for (int64_t e = 0; e < vector_elements; ++e) {
          const int64_t index = indices.index(thread, k * vector_elements + e);
          Result<int64_t> offset = flat ? Result<int64_t>(smem.swizzle(flat_offset(index)))
                                        : smem.evaluate(coordinate_of(index, access.tile));
          if (!offset) return layout_error(context + ": " + offset.error().message);
          if (e == 0) start = *offset;
          if (*offset != start + e) {
            return layout_error(context + ": thread " + std::to_string(thread) + " vector " +
                                std::to_string(k) +
                                " is not contiguous in shared memory (element " +
                                std::to_string(e) + " at offset " + std::to_string(*offset) +
                                ", expected " + std::to_string(start + e) + ")");
          }
        }
        addresses.push_back(start * element_bytes);
      }
      Result<BankConflicts> one = count_bank_conflicts(addresses, static_cast<int>(access_bytes));
      if (!one) return layout_error(context + ": " + one.error().message);
      total.instructions += one->instructions;
      total.wavefronts += one->wavefronts;
      total.ideal_wavefronts += one->ideal_wavefronts;
    }
  }
  return total;
}

}  // namespace nautilus::layout
