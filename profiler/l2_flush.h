// Emptying L2 between timed repetitions, so that no input of one repetition is still cached in
// the next (ANCHORS.md's protocol: "flush L2 between repetitions").
//
// Three modes:
//   read   (the default) a kernel reads a buffer of twice the L2 size. L2 ends up full of clean
//          lines of that buffer: the timed kernel's misses evict them for free.
//   write  a byte fill of the same buffer, the classic flush. L2 ends up full of *dirty* lines,
//          and the timed kernel pays their write-back to DRAM as it evicts them. On an H200 that
//          is up to 50 MB of writes, about 10 µs of DRAM time, charged to whichever kernel runs
//          next: invisible beside a millisecond GEMM, a fifth of a 50 µs decode step that reads
//          134 MB once. Kept for comparison with numbers taken that way.
//   none   nothing between repetitions (inputs larger than L2 still mostly miss).
//
// The read kernel is PTX text the driver compiles when the flush is created (no NVRTC needed);
// its loads go through L2 only (ld.global.cg) and its one store happens only when the XOR of
// everything it read equals a constant, so nothing can drop the loads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "profiler/gpu_session.h"

namespace nautilus::profiler {

enum class L2FlushMode { Read, Write, None };

// "read", "write", "none"; nullopt for anything else.
std::optional<L2FlushMode> parse_l2_flush_mode(const std::string& text);
const char* l2_flush_mode_name(L2FlushMode mode);

// The name of the reading kernel in its PTX module (the fake driver of the tests knows it).
inline constexpr const char* kL2EvictKernel = "nautilus_l2_evict";

class L2Flush {
 public:
  // Allocates the buffer (twice `l2_bytes`, at least 8 MiB) and, for `read`, fills it once and
  // loads the reading kernel, launched with `sm_count` × 4 CTAs. Nothing is allocated for `none`.
  static std::optional<GpuError> create(GpuSession& session, L2FlushMode mode, int64_t l2_bytes,
                                        int sm_count, std::unique_ptr<L2Flush>* out);

  // Queues one flush (in stream order, before the next kernel).
  std::optional<GpuError> run();

  L2FlushMode mode() const { return mode_; }
  uint64_t bytes() const { return bytes_; }

 private:
  L2Flush(GpuSession& session, L2FlushMode mode) : session_(session), mode_(mode) {}

  GpuSession& session_;
  L2FlushMode mode_;
  uint64_t bytes_ = 0;
  cu::DevicePtr buffer_ = 0;
  cu::DevicePtr sink_ = 0;
  cu::Function evict_ = nullptr;
  int64_t ctas_ = 1;
  unsigned fills_ = 0;
};

}  // namespace nautilus::profiler
