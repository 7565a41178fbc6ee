// The reference outputs a runner computed, kept on disk so that the other runners of the same
// tuning run validate against them instead of running the reference kernels again.
//
// The unscheduled reference of a spec at its timed sizes can take far longer than the candidate
// it checks (the naive attention kernels materialize the whole score matrix); a tuning run
// validates every candidate against the same reference on the same seeded inputs, so the
// outputs are the same every time. nautilus-runner --reference-cache DIR:
//
//   1. keys the reference by what decides its outputs: the reference package's launch.json and
//      kernel source, the seed, the order of the inputs (input k gets seed k), and the device
//      model and compute capability (reference_cache_key);
//   2. takes an exclusive lock on DIR/KEY.lock, so that runners on several GPUs that start at
//      once compute it once (the lock dies with its process);
//   3. reads DIR/KEY.outputs when it is there and whole; otherwise runs the reference, before the
//      candidate is loaded, and writes the file (to a temporary name, renamed into place once
//      complete).
//
// A candidate that faults or hangs cannot poison the file: the reference ran before the
// candidate, in a context no candidate touched, its outputs were copied to host memory and
// written out before the candidate was launched, and a runner killed while writing leaves only
// its temporary file, so the next runner computes the reference again.
//
// File format: the line "nautilus-reference-outputs 1", one line of JSON
// {"key": KEY, "outputs": [{"name", "dtype", "shape", "bytes"}, ...]}, then the outputs' device
// bytes (tensor_bytes.h) in that order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/codegen/package.h"
#include "core/support/tensor.h"

namespace nautilus::profiler {

// The cache key (16 hex digits) of `reference`, read from `reference_dir`, for inputs generated
// from `seed` in the order `input_names`, on a device of `device_name` and compute capability.
std::string reference_cache_key(const std::string& reference_dir,
                                const std::vector<std::string>& input_names, uint64_t seed,
                                const std::string& device_name, int compute_major,
                                int compute_minor);

// An exclusive lock on DIR/KEY.lock for the lifetime of the object; `locked()` is false (and
// the cache is used without the lock) when the directory or file cannot be created.
class ReferenceCacheLock {
 public:
  ReferenceCacheLock(const std::string& directory, const std::string& key);
  ~ReferenceCacheLock();
  ReferenceCacheLock(const ReferenceCacheLock&) = delete;
  ReferenceCacheLock& operator=(const ReferenceCacheLock&) = delete;
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The outputs stored under `key` in `directory`, each of the shape and dtype of `outputs` (the
// reference package's output buffers); nullopt when the file is missing, of another key,
// truncated or of other shapes.
std::optional<TensorMap> read_reference_outputs(
    const std::string& directory, const std::string& key,
    const std::vector<codegen::KernelArgument>& outputs);

// Writes `expected` (every buffer of `outputs`) under `key`; false with `error` when it cannot.
bool write_reference_outputs(const std::string& directory, const std::string& key,
                             const std::vector<codegen::KernelArgument>& outputs,
                             const TensorMap& expected, std::string* error);

}  // namespace nautilus::profiler
