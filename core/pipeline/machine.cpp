// Machine descriptions of the pipeline solver (machine.h says where each figure comes from).
#include "core/pipeline/machine.h"

#include <algorithm>

namespace nautilus::pipeline {

const char* unit_name(Unit unit) {
  switch (unit) {
    case Unit::TensorCore: return "tensor core";
    case Unit::Copy: return "copy engine";
    case Unit::SFU: return "SFU";
    case Unit::ALU: return "ALU";
    case Unit::LSU: return "LSU";
  }
  return "?";
}

double Machine::tma_latency(int64_t bytes) const {
  const double slope = (tma_latency_16k - tma_latency_8k) / 8192.0;
  return std::max(tma_latency_8k * 0.5, tma_latency_8k + slope * static_cast<double>(bytes - 8192));
}

double Machine::cp_async_tile_latency(int64_t bytes) const {
  // The measurement moved 512 bytes; the rest of a tile streams at the copy engine's rate.
  return cp_async_latency + std::max<double>(0, static_cast<double>(bytes - 512)) /
                                copy_bytes_per_clock();
}

int Machine::consumer_registers(int consumers) const {
  if (consumers <= 0) return max_registers;
  const int share = (warpgroup_register_sum - producer_registers_for(consumers)) / consumers;
  return std::min(240, share / 8 * 8);
}

std::optional<Machine> machine_for(const std::string& arch) {
  Machine machine;
  if (arch == "sm_80" || arch == "a100") {
    machine.arch = "sm_80";
    machine.description =
        "sm_80 (Ampere path: cp.async, ldmatrix, mma.sync; one role, no warp specialization)";
    machine.shared_capacity = 163 * 1024;  // A100: 164 KiB per SM, 163 KiB per block
    machine.max_consumer_roles = 0;
    return machine;
  }
  if (arch == "sm_90a" || arch == "sm_90" || arch == "h100") {
    machine.arch = "sm_90a";
    machine.description =
        "sm_90a (Hopper: TMA, mbarrier, wgmma; a TMA producer warpgroup and consumer warpgroups)";
    machine.shared_capacity = 227 * 1024;  // H100: 228 KiB per SM, 227 KiB per block
    machine.max_consumer_roles = 3;        // 4 warpgroups: 1 producer + 3 consumers at most
    return machine;
  }
  return std::nullopt;
}

}  // namespace nautilus::pipeline
