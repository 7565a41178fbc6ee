// Kernel durations from the CUPTI activity API, with libcupti loaded at run time.
//
// CUPTI's activity API makes the driver write one record per kernel execution (start and end
// timestamps taken on the GPU, in nanoseconds) into buffers that CUPTI hands back to us. Unlike
// CUDA events, the timestamps bracket the kernel itself: no launch overhead and no gap between
// a kernel and the event recorded after it. The runner enables the concurrent-kernel records only
// around its timed repetitions.
//
// libcupti is dlopen()ed like libcuda (cuda_driver.h): the runner must start on machines
// without the CUDA toolkit, and then simply times with CUDA events instead. The candidates are,
// in order: $NAUTILUS_LIBCUPTI when set, libcupti.so.13, libcupti.so.12, libcupti.so, then
// extras/CUPTI/lib64/libcupti.so and lib64/libcupti.so under $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda. Without a GPU, cuptiActivityEnable fails (CUPTI error 999): that is reported
// as the reason CUPTI is unavailable, never as a crash.
//
// The activity API is process-global (one set of buffer callbacks per process), so at most one
// CuptiKernelActivity is active at a time; `start` refuses a second.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nautilus::profiler {

// One kernel execution as CUPTI recorded it.
struct KernelActivity {
  std::string name;       // the kernel's symbol (extern "C" kernels are not mangled)
  uint64_t start_ns = 0;  // GPU timestamps
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;  // ties the record to the launch call that produced it

  double duration_us() const { return static_cast<double>(end_ns - start_ns) * 1e-3; }
};

// The library names and paths CuptiKernelActivity::start tries, in order.
std::vector<std::string> cupti_library_candidates();

class CuptiKernelActivity {
 public:
  // Loads CUPTI (once per process) and enables kernel activity records. Returns nullptr with a
  // one-line `reason` when CUPTI cannot be loaded or refuses (no GPU, no permission, another
  // collection active, CUPTI headers missing at build time).
  static std::unique_ptr<CuptiKernelActivity> start(std::string* reason);

  // Flushes every buffer, disables the records and returns the kernel executions collected
  // since `start`, sorted by start time. False with `reason` when the flush or disable fails.
  bool stop(std::vector<KernelActivity>* records, std::string* reason);

  // Disables collection if `stop` was not called.
  ~CuptiKernelActivity();

  CuptiKernelActivity(const CuptiKernelActivity&) = delete;
  CuptiKernelActivity& operator=(const CuptiKernelActivity&) = delete;

 private:
  CuptiKernelActivity() = default;
  bool stopped_ = false;
};

}  // namespace nautilus::profiler
