// One CUDA context on one device, with every driver call the runner makes and the failures
// typed the way the runner reports them.
//
// The session uses the device's primary context and the legacy default stream, so everything it
// queues runs in order. Nothing in it ever blocks without a deadline: a kernel that hangs must
// turn into a "timeout" report, not a runner that never answers. Blocking calls (device-to-host
// copies) are therefore only made after `wait` has seen the queue drain, and `wait` polls an
// event until its deadline instead of calling cuCtxSynchronize.
//
// Failures:
//   GpuError::Kind::Load     the device could not take the package (module image rejected,
//                            kernel missing, too much shared memory, allocation failed)
//   GpuError::Kind::Launch   a launch was refused or a kernel faulted; for faults (illegal
//                            address, misaligned access, illegal instruction, assert, ...) the
//                            context is dead: every later call fails with the same error
//   GpuError::Kind::Timeout  `wait` passed its deadline with work still running
// After a fault or a timeout the session is *poisoned*: its destructor skips the frees and
// unloads that would fail or block; the process is expected to report and exit.
//
// Kernel parameters are device pointers or 128-byte tensor maps (KernelParameters keeps each
// value where the launch reads it, maps 64-byte aligned). A launch with cluster dims goes
// through cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; without, through
// cuLaunchKernel. A Hopper kernel that deadlocks (an mbarrier phase that never completes) is a
// kernel that never ends: `wait` turns it into a timeout like any other; a TMA or cluster kernel
// that faults poisons the context like any other fault.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/codegen/package.h"
#include "profiler/cuda_driver.h"
#include "profiler/tensor_map.h"

namespace nautilus::profiler {

struct GpuError {
  enum class Kind { Load, Launch, Timeout };
  Kind kind = Kind::Launch;
  std::string message;       // one line: what failed and the driver's explanation
  cu::Result cuda_error = 0;  // 0 for failures the driver did not report (e.g. a timeout)
  std::string cuda_error_name;  // "CUDA_ERROR_ILLEGAL_ADDRESS"
};

// True for the CUresults after which a context cannot be used again (kernel faults).
bool is_context_fatal(cu::Result result);

// The values of one launch's parameters, in parameter order.
class KernelParameters {
 public:
  void add_pointer(cu::DevicePtr pointer);
  void add_tensor_map(const TensorMapBytes& map);
  size_t size() const { return order_.size(); }
  // One pointer per parameter, each to the parameter's value (what cuLaunchKernel takes);
  // valid until the next add.
  void** values();
  // The value of parameter `index` as bytes (for tests): 8 for a pointer, 128 for a map.
  std::pair<const void*, size_t> value(size_t index) const;

 private:
  std::vector<cu::DevicePtr> pointers_;
  std::vector<TensorMapBytes> maps_;  // aligned storage: vector honours alignas(64)
  std::vector<std::pair<bool, size_t>> order_;  // (is a map, index into pointers_ or maps_)
  std::vector<void*> values_;
};

class GpuSession;

// Tensor maps of kernel arguments, keyed by (kernel, argument), each encoded again when its
// buffer's address changed since it was encoded (a map holds the address).
class TensorMapCache {
 public:
  // The map of argument `argument` of kernel `kernel` over the buffer now at `base`.
  std::optional<GpuError> get(GpuSession& session, size_t kernel, size_t argument,
                              const codegen::TensorMap& map, DType dtype, cu::DevicePtr base,
                              const TensorMapBytes** out);
  int encodes() const { return encodes_; }  // maps encoded so far

 private:
  struct Entry {
    cu::DevicePtr base = 0;
    TensorMapBytes bytes;
  };
  std::map<std::pair<size_t, size_t>, Entry> entries_;
  int encodes_ = 0;
};

// Grid, block, optional cluster and dynamic shared memory of one launch.
struct LaunchShape {
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  std::optional<std::array<int64_t, 3>> cluster;
  int64_t dynamic_shared_bytes = 0;
};

class GpuSession {
 public:
  // Retains the primary context of device `ordinal` and makes it current.
  static std::unique_ptr<GpuSession> open(std::shared_ptr<const CudaDriver> driver, int ordinal,
                                          GpuError* error);
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  const CudaDriver& driver() const { return *driver_; }
  bool poisoned() const { return poisoned_ != Poison::None; }
  // After a timeout a kernel may still be running on the device.
  bool work_may_be_running() const { return poisoned_ == Poison::Timeout; }

  // Loads a cubin or a NUL-terminated PTX image; the JIT's error log goes into the message.
  std::optional<GpuError> load_module(const std::vector<uint8_t>& image, cu::Module* module);
  // Finds `name` in `module` and lets it use `dynamic_shared_bytes` of dynamic shared memory
  // (the opt-in above 48 KiB); `registers` receives the kernel's registers per thread.
  std::optional<GpuError> get_function(cu::Module module, const std::string& name,
                                       int64_t dynamic_shared_bytes, cu::Function* function,
                                       int* registers);

  std::optional<GpuError> allocate(uint64_t bytes, cu::DevicePtr* pointer);
  std::optional<GpuError> upload(cu::DevicePtr destination, const std::vector<uint8_t>& bytes);
  // Blocking: call only after `wait` succeeded.
  std::optional<GpuError> download(cu::DevicePtr source, std::vector<uint8_t>* bytes);
  // Queues a byte fill (asynchronous, in stream order).
  std::optional<GpuError> fill(cu::DevicePtr destination, uint8_t value, uint64_t bytes);

  // Queues `function` with `parameters`; through cuLaunchKernelEx when `shape.cluster` is set.
  std::optional<GpuError> launch(cu::Function function, const LaunchShape& shape,
                                 KernelParameters& parameters);

  // The CTAs of `function` the device holds at once (CTAs per SM times SMs): the grid of a
  // persistent kernel. At least 1.
  int64_t resident_ctas(cu::Function function, int64_t block_threads, int64_t dynamic_shared_bytes);

  // Encodes `map` over the buffer of `dtype` at `base` (a Load error when the driver has no
  // cuTensorMapEncodeTiled or refuses the map). Applies the small-tensor workaround of
  // tensor_map.h for this session's driver version.
  std::optional<GpuError> encode_tensor_map(const codegen::TensorMap& map, DType dtype,
                                            cu::DevicePtr base, TensorMapBytes* out);
  int driver_version() const { return driver_version_; }

  // Waits until everything queued so far has finished, polling for at most `timeout_seconds`.
  std::optional<GpuError> wait(double timeout_seconds);

  // Timing events (recorded in stream order).
  std::optional<GpuError> create_event(cu::Event* event);
  std::optional<GpuError> record(cu::Event event);
  std::optional<GpuError> elapsed_ms(cu::Event start, cu::Event end, float* milliseconds);

 private:
  enum class Poison { None, Fault, Timeout };
  GpuSession(std::shared_ptr<const CudaDriver> driver, int device, cu::Context context);
  // A GpuError for `result` from `call`; marks the session poisoned for fatal results.
  GpuError fail(GpuError::Kind kind, const std::string& call, cu::Result result);

  std::shared_ptr<const CudaDriver> driver_;
  int device_ = 0;
  cu::Context context_ = nullptr;
  Poison poisoned_ = Poison::None;
  cu::Event sync_event_ = nullptr;
  int driver_version_ = 0;
  cu::TensorMapEncodeTiledFn encoder_ = nullptr;  // resolved on first use
  std::string encoder_missing_;
  std::vector<cu::Module> modules_;
  std::vector<cu::DevicePtr> allocations_;
  std::vector<cu::Event> events_;
};

}  // namespace nautilus::profiler
