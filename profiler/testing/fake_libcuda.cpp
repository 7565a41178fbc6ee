// A stand-in for libcuda.so.1, loaded by tests through CudaDriver::load(path) or the runner's
// `--driver PATH`.
//
// It exports every driver entry point the profiler resolves, with the C ABI of cuda.h, and
// describes H100-like devices. Its behaviour is steered by environment variables, read on every
// call so that one loaded copy serves every test:
//
//   NAUTILUS_FAKE_CUDA_INIT_ERROR=<code>   cuInit returns <code> (e.g. 100 = no device)
//   NAUTILUS_FAKE_CUDA_DEVICES=<n>         cuDeviceGetCount reports <n> devices (default 1)
//   NAUTILUS_FAKE_CUDA_ATTRIBUTE_ERROR=1   cuDeviceGetAttribute fails with error 1
//   NAUTILUS_FAKE_CUDA_COMPUTE=<major*10+minor>  compute capability (default 90)
//   NAUTILUS_FAKE_CUDA_MODULE_ERROR=<code> cuModuleLoadDataEx fails with <code> and a JIT log
//
// "Device" memory is host memory, launches run synchronously on the calling thread, and the
// kernels are a fixed set recognized by name (any module image loads and exports all of them);
// their parameters are device pointers, like the kernels the compiler emits:
//
//   fake_copy(src, dst)          dst = src, byte for byte (min of the two sizes)
//   fake_swap_halves(src, dst)   dst = src with its two halves exchanged: a wrong result
//   fake_fault(x)                the next synchronization reports CUDA_ERROR_ILLEGAL_ADDRESS,
//                                and so does every call after it (the context is dead)
//   fake_hang(x)                 never finishes: event queries answer CUDA_ERROR_NOT_READY
//                                forever and a blocking copy never returns
//   fake_too_many_resources(x)   the launch fails with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
//
// Any other kernel name is CUDA_ERROR_NOT_FOUND. Retaining the primary context when none is
// held starts a fresh device (no fault, no hang), as after a context reset on a real GPU.
//
// It is not linked into any product binary.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <thread>

namespace {

constexpr int kSuccess = 0;
constexpr int kErrorInvalidValue = 1;
constexpr int kErrorNotInitialized = 3;
constexpr int kErrorInvalidDevice = 101;

bool g_initialized = false;

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

int device_count() { return env_int("NAUTILUS_FAKE_CUDA_DEVICES", 1); }

bool valid_device(int device) { return device >= 0 && device < device_count(); }

constexpr int kErrorNotFound = 500;
constexpr int kErrorNotReady = 600;
constexpr int kErrorIllegalAddress = 700;
constexpr int kErrorLaunchOutOfResources = 701;
constexpr int kErrorOutOfMemory = 2;

// The state of the one fake device (every ordinal shares it; tests use one device at a time).
struct FakeDevice {
  int context_references = 0;
  int sticky_error = kSuccess;  // set by fake_fault: every later call fails with it
  bool hung = false;            // set by fake_hang
  std::map<std::uintptr_t, std::size_t> allocations;  // address -> bytes
};
FakeDevice g_device;
int g_context_token = 0;  // its address is the CUcontext handle
int g_module_token = 0;   // its address is the CUmodule handle

struct FakeEvent {
  std::chrono::steady_clock::time_point recorded{};
};

enum class FakeKernel { Copy, SwapHalves, Fault, Hang, TooManyResources };
struct FakeFunction {
  const char* name;
  FakeKernel kernel;
  int max_dynamic_shared = 48 << 10;
};
FakeFunction g_functions[] = {
    {"fake_copy", FakeKernel::Copy},
    {"fake_swap_halves", FakeKernel::SwapHalves},
    {"fake_fault", FakeKernel::Fault},
    {"fake_hang", FakeKernel::Hang},
    {"fake_too_many_resources", FakeKernel::TooManyResources},
};

// The size of the allocation that `pointer` starts, or 0 when it is not one.
std::size_t allocation_size(std::uintptr_t pointer) {
  auto it = g_device.allocations.find(pointer);
  return it == g_device.allocations.end() ? 0 : it->second;
}

// The pointer in kernel parameter `index` (every fake kernel takes device pointers only).
std::uintptr_t pointer_parameter(void** parameters, int index) {
  unsigned long long value = 0;
  std::memcpy(&value, parameters[index], sizeof(value));
  return static_cast<std::uintptr_t>(value);
}

// What a call sees once the device is in a failed state.
int device_state_error() { return g_device.sticky_error; }

}  // namespace

extern "C" {

int cuInit(unsigned int flags) {
  if (flags != 0) {
    return kErrorInvalidValue;
  }
  int error = env_int("NAUTILUS_FAKE_CUDA_INIT_ERROR", kSuccess);
  g_initialized = error == kSuccess;
  return error;
}

int cuDriverGetVersion(int* version) {
  if (version == nullptr) {
    return kErrorInvalidValue;
  }
  *version = 13000;
  return kSuccess;
}

int cuDeviceGetCount(int* count) {
  if (!g_initialized) {
    return kErrorNotInitialized;
  }
  *count = device_count();
  return kSuccess;
}

int cuDeviceGet(int* device, int ordinal) {
  if (!g_initialized) {
    return kErrorNotInitialized;
  }
  if (!valid_device(ordinal)) {
    return kErrorInvalidDevice;
  }
  *device = ordinal;
  return kSuccess;
}

int cuDeviceGetName(char* name, int length, int device) {
  if (!valid_device(device) || name == nullptr || length <= 0) {
    return kErrorInvalidValue;
  }
  std::snprintf(name, static_cast<std::size_t>(length), "Nautilus Fake GPU %d", device);
  return kSuccess;
}

int cuDeviceTotalMem_v2(std::size_t* bytes, int device) {
  if (!valid_device(device)) {
    return kErrorInvalidDevice;
  }
  *bytes = std::size_t{80} << 30;
  return kSuccess;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (!valid_device(device)) {
    return kErrorInvalidDevice;
  }
  if (env_int("NAUTILUS_FAKE_CUDA_ATTRIBUTE_ERROR", 0) != 0) {
    return kErrorInvalidValue;
  }
  switch (attribute) {
    case 10: *value = 32; break;                  // warp size
    case 13: *value = 1980000; break;             // SM clock, kHz
    case 16: *value = 132; break;                 // SMs
    case 33: *value = 0x18 + device; break;       // PCI bus
    case 36: *value = 2619000; break;             // memory clock, kHz
    case 37: *value = 5120; break;                // bus width, bits
    case 38: *value = 50 << 20; break;            // L2 bytes
    case 39: *value = 2048; break;                // threads per SM
    case 50: *value = 0; break;                   // PCI domain
    case 75: *value = env_int("NAUTILUS_FAKE_CUDA_COMPUTE", 90) / 10; break;  // major
    case 76: *value = env_int("NAUTILUS_FAKE_CUDA_COMPUTE", 90) % 10; break;  // minor
    case 81: *value = 228 << 10; break;           // shared memory per SM
    case 82: *value = 65536; break;               // registers per SM
    case 97: *value = 227 << 10; break;           // shared memory per block, opt-in
    default: *value = 0; break;
  }
  return kSuccess;
}

int cuGetErrorString(int error, const char** text) {
  switch (error) {
    case kSuccess: *text = "no error"; return kSuccess;
    case kErrorInvalidValue: *text = "invalid argument"; return kSuccess;
    case kErrorOutOfMemory: *text = "out of memory"; return kSuccess;
    case kErrorNotInitialized: *text = "initialization error"; return kSuccess;
    case 100: *text = "no CUDA-capable device is detected"; return kSuccess;
    case kErrorInvalidDevice: *text = "invalid device ordinal"; return kSuccess;
    case 200: *text = "device kernel image is invalid"; return kSuccess;
    case kErrorNotFound: *text = "named symbol not found"; return kSuccess;
    case kErrorNotReady: *text = "device not ready"; return kSuccess;
    case kErrorIllegalAddress:
      *text = "an illegal memory access was encountered";
      return kSuccess;
    case kErrorLaunchOutOfResources: *text = "too many resources requested for launch"; return kSuccess;
    case 999: *text = "unknown error"; return kSuccess;
    default: *text = nullptr; return kErrorInvalidValue;
  }
}

int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kErrorInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case kErrorOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return kSuccess;
    case 200: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
    case kErrorNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
    case kErrorNotReady: *name = "CUDA_ERROR_NOT_READY"; return kSuccess;
    case kErrorIllegalAddress: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return kSuccess;
    case kErrorLaunchOutOfResources: *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; return kSuccess;
    default: *name = nullptr; return kErrorInvalidValue;
  }
}

int cuDevicePrimaryCtxRetain(void** context, int device) {
  if (!g_initialized) return kErrorNotInitialized;
  if (!valid_device(device) || context == nullptr) return kErrorInvalidDevice;
  if (g_device.context_references++ == 0) {
    g_device.sticky_error = kSuccess;
    g_device.hung = false;
  }
  *context = &g_context_token;
  return kSuccess;
}

int cuDevicePrimaryCtxRelease_v2(int device) {
  if (!valid_device(device) || g_device.context_references == 0) return kErrorInvalidValue;
  --g_device.context_references;
  return kSuccess;
}

int cuCtxSetCurrent(void* context) {
  return context == nullptr || context == &g_context_token ? kSuccess : kErrorInvalidValue;
}

int cuModuleLoadDataEx(void** module, const void* image, unsigned int option_count, int* options,
                       void** option_values) {
  if (module == nullptr || image == nullptr) return kErrorInvalidValue;
  if (device_state_error() != kSuccess) return device_state_error();
  int error = env_int("NAUTILUS_FAKE_CUDA_MODULE_ERROR", kSuccess);
  if (error != kSuccess) {
    // Fill the JIT error log the caller passed, as the real driver does.
    char* log = nullptr;
    std::size_t log_size = 0;
    for (unsigned i = 0; i < option_count; ++i) {
      if (options[i] == 5) log = static_cast<char*>(option_values[i]);
      if (options[i] == 6) log_size = reinterpret_cast<std::uintptr_t>(option_values[i]);
    }
    if (log != nullptr && log_size > 0) {
      std::snprintf(log, log_size, "fake JIT: the image was rejected");
    }
    return error;
  }
  *module = &g_module_token;
  return kSuccess;
}

int cuModuleUnload(void* module) { return module == &g_module_token ? kSuccess : kErrorInvalidValue; }

int cuModuleGetFunction(void** function, void* module, const char* name) {
  if (module != &g_module_token || function == nullptr || name == nullptr) {
    return kErrorInvalidValue;
  }
  for (FakeFunction& candidate : g_functions) {
    if (std::strcmp(candidate.name, name) == 0) {
      *function = &candidate;
      return kSuccess;
    }
  }
  return kErrorNotFound;
}

int cuFuncSetAttribute(void* function, int attribute, int value) {
  auto* fake = static_cast<FakeFunction*>(function);
  if (fake == nullptr) return kErrorInvalidValue;
  if (attribute == 8) {  // max dynamic shared memory
    if (value < 0 || value > (227 << 10)) return kErrorInvalidValue;
    fake->max_dynamic_shared = value;
  }
  return kSuccess;
}

int cuFuncGetAttribute(int* value, int attribute, void* function) {
  if (value == nullptr || function == nullptr) return kErrorInvalidValue;
  *value = attribute == 4 ? 32 : 0;  // 32 registers; everything else 0
  return kSuccess;
}

int cuMemAlloc_v2(unsigned long long* pointer, std::size_t bytes) {
  if (pointer == nullptr || bytes == 0) return kErrorInvalidValue;
  if (device_state_error() != kSuccess) return device_state_error();
  void* memory = std::malloc(bytes);
  if (memory == nullptr) return kErrorOutOfMemory;
  auto address = reinterpret_cast<std::uintptr_t>(memory);
  g_device.allocations[address] = bytes;
  *pointer = address;
  return kSuccess;
}

int cuMemFree_v2(unsigned long long pointer) {
  auto it = g_device.allocations.find(static_cast<std::uintptr_t>(pointer));
  if (it == g_device.allocations.end()) return kErrorInvalidValue;
  std::free(reinterpret_cast<void*>(it->first));
  g_device.allocations.erase(it);
  return kSuccess;
}

int cuMemcpyHtoD_v2(unsigned long long destination, const void* source, std::size_t bytes) {
  if (device_state_error() != kSuccess) return device_state_error();
  if (bytes > allocation_size(static_cast<std::uintptr_t>(destination))) return kErrorInvalidValue;
  std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(destination)), source, bytes);
  return kSuccess;
}

int cuMemcpyDtoH_v2(void* destination, unsigned long long source, std::size_t bytes) {
  if (device_state_error() != kSuccess) return device_state_error();
  if (g_device.hung) {
    // A blocking copy behind a kernel that never ends never returns either.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (bytes > allocation_size(static_cast<std::uintptr_t>(source))) return kErrorInvalidValue;
  std::memcpy(destination, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(source)), bytes);
  return kSuccess;
}

int cuMemsetD8Async(unsigned long long destination, unsigned char value, std::size_t count,
                    void* /*stream*/) {
  if (device_state_error() != kSuccess) return device_state_error();
  if (count > allocation_size(static_cast<std::uintptr_t>(destination))) return kErrorInvalidValue;
  std::memset(reinterpret_cast<void*>(static_cast<std::uintptr_t>(destination)), value, count);
  return kSuccess;
}

int cuLaunchKernel(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                   unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                   void* /*stream*/, void** parameters, void** /*extra*/) {
  auto* fake = static_cast<FakeFunction*>(function);
  if (fake == nullptr || parameters == nullptr) return kErrorInvalidValue;
  if (device_state_error() != kSuccess) return device_state_error();
  if (grid_x * grid_y * grid_z == 0 || block_x * block_y * block_z == 0 ||
      block_x * block_y * block_z > 1024) {
    return kErrorInvalidValue;
  }
  if (static_cast<int>(shared_bytes) > fake->max_dynamic_shared) return kErrorInvalidValue;
  switch (fake->kernel) {
    case FakeKernel::Copy:
    case FakeKernel::SwapHalves: {
      std::uintptr_t source = pointer_parameter(parameters, 0);
      std::uintptr_t destination = pointer_parameter(parameters, 1);
      std::size_t bytes = std::min(allocation_size(source), allocation_size(destination));
      auto* to = reinterpret_cast<unsigned char*>(destination);
      const auto* from = reinterpret_cast<const unsigned char*>(source);
      if (fake->kernel == FakeKernel::Copy) {
        std::memmove(to, from, bytes);
      } else {
        std::size_t half = bytes / 8 * 4;  // a multiple of 4 bytes: whole elements move
        std::memmove(to, from + half, bytes - half);
        std::memmove(to + (bytes - half), from, half);
      }
      return kSuccess;
    }
    case FakeKernel::Fault:
      g_device.sticky_error = kErrorIllegalAddress;
      return kSuccess;  // launches are asynchronous: the fault shows at the next sync
    case FakeKernel::Hang:
      g_device.hung = true;
      return kSuccess;
    case FakeKernel::TooManyResources:
      return kErrorLaunchOutOfResources;
  }
  return kErrorInvalidValue;
}

int cuEventCreate(void** event, unsigned int /*flags*/) {
  if (event == nullptr) return kErrorInvalidValue;
  *event = new FakeEvent();
  return kSuccess;
}

int cuEventRecord(void* event, void* /*stream*/) {
  if (event == nullptr) return kErrorInvalidValue;
  if (device_state_error() != kSuccess) return device_state_error();
  static_cast<FakeEvent*>(event)->recorded = std::chrono::steady_clock::now();
  return kSuccess;
}

int cuEventQuery(void* event) {
  if (event == nullptr) return kErrorInvalidValue;
  if (device_state_error() != kSuccess) return device_state_error();
  return g_device.hung ? kErrorNotReady : kSuccess;
}

int cuEventElapsedTime_v2(float* milliseconds, void* start, void* end) {
  if (milliseconds == nullptr || start == nullptr || end == nullptr) return kErrorInvalidValue;
  if (device_state_error() != kSuccess) return device_state_error();
  std::chrono::duration<float, std::milli> elapsed =
      static_cast<FakeEvent*>(end)->recorded - static_cast<FakeEvent*>(start)->recorded;
  *milliseconds = elapsed.count();
  return kSuccess;
}

int cuEventDestroy_v2(void* event) {
  delete static_cast<FakeEvent*>(event);
  return kSuccess;
}

}  // extern "C"
