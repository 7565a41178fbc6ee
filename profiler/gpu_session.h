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
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "profiler/cuda_driver.h"

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

  // Queues `function` with one device pointer per parameter.
  std::optional<GpuError> launch(cu::Function function, const std::array<int64_t, 3>& grid,
                                 const std::array<int64_t, 3>& block, int64_t dynamic_shared_bytes,
                                 const std::vector<cu::DevicePtr>& arguments);

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
  std::vector<cu::Module> modules_;
  std::vector<cu::DevicePtr> allocations_;
  std::vector<cu::Event> events_;
};

}  // namespace nautilus::profiler
