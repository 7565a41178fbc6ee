// A stand-in for libcuda.so.1, loaded by tests through CudaDriver::load(path) or the runner's
// `--driver PATH`.
//
// It exports every driver entry point the profiler resolves, with the C ABI of cuda.h, and
// describes H100-like devices. Its behaviour is steered by environment variables, read on every
// call so that one loaded copy serves every test:
//
//   NAUTILUS_FAKE_CUDA_INIT_ERROR=<code>   cuInit returns <code> (e.g. 100 = no device)
//   NAUTILUS_FAKE_CUDA_DEVICES=<n>         cuDeviceGetCount reports <n> devices (default 1)
//   NAUTILUS_FAKE_CUDA_DEVICE_NAME=<name>  every device is named <name> (one model); by default
//                                          device i is "Nautilus Fake GPU i" (each its own model)
//   NAUTILUS_FAKE_CUDA_ATTRIBUTE_ERROR=1   cuDeviceGetAttribute fails with error 1
//   NAUTILUS_FAKE_CUDA_COMPUTE=<major*10+minor>  compute capability (default 90)
//   NAUTILUS_FAKE_CUDA_MODULE_ERROR=<code> cuModuleLoadDataEx fails with <code> and a JIT log
//   NAUTILUS_FAKE_CUDA_DRIVER_VERSION=<v>  cuDriverGetVersion reports <v> (default 13000)
//   NAUTILUS_FAKE_CUDA_NO_TENSOR_MAP=1     cuGetProcAddress does not find cuTensorMapEncodeTiled
//   NAUTILUS_FAKE_CUDA_LAUNCH_LOG=<path>   every kernel launch appends the kernel's name and a
//                                          newline to <path> (tests count launches across the
//                                          runner processes of a run)
//
// "Device" memory is host memory, launches run synchronously on the calling thread, and the
// kernels are a fixed set recognized by name (any module image loads and exports all of them);
// their parameters are device pointers, like the kernels the compiler emits:
//
//   fake_copy(src, dst)          dst = src, byte for byte (min of the two sizes)
//   fake_reference_copy(src, dst)  the same under another name (a reference package's kernel,
//                                told apart from the candidates' in the launch log)
//   fake_swap_halves(src, dst)   dst = src with its two halves exchanged: a wrong result
//   fake_fault(x)                the next synchronization reports CUDA_ERROR_ILLEGAL_ADDRESS,
//                                and so does every call after it (the context is dead)
//   fake_hang(x)                 never finishes: event queries answer CUDA_ERROR_NOT_READY
//                                forever and a blocking copy never returns
//   fake_too_many_resources(x)   the launch fails with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
//   fake_tma_copy(map, dst)      dst = the tensor `map` views, element by element, through the
//                                map's address, dims and strides (row-major, innermost dim
//                                fastest). Parameter 0 must be a 128-byte map whose storage is
//                                64-byte aligned (else CUDA_ERROR_INVALID_VALUE). Like the real
//                                driver bug, a map that still has bit 21 of word 1 set faults
//                                (CUDA_ERROR_ILLEGAL_ADDRESS).
//   fake_cluster_copy(src, dst)  dst = src when launched in clusters of 2 or more CTAs (through
//                                cuLaunchKernelEx); without a cluster it faults, as a kernel
//                                reading a peer CTA's shared memory does
//   nautilus_l2_evict(buffer, end, sink)   the runner's L2 flush (profiler/l2_flush.h): reads
//                                [buffer, end), which must lie in one allocation, else it faults
//   fake_tile_counter_copy(src, dst, counter)   a kernel with the dynamic tile scheduler: the
//                                4-byte counter (a workspace) must read 0 at launch; then
//                                dst = src and the counter grows by grid_x (its CTAs' fetches).
//                                A counter left from an earlier launch faults, as such a kernel
//                                would hand out tiles past its grid
//
// cuTensorMapEncodeTiled (reached through cuGetProcAddress_v2 at version 12000) checks the rules
// of cuda.h (map 64-byte aligned, rank 1..5, 16-byte-aligned address, strides multiples of 16,
// box extents in [1, 256] with an inner extent of a multiple of 16 bytes within the swizzle
// span, element strides in [1, 8]) and writes its own layout: word 0 the address, word 1 data
// type | rank << 8 | swizzle << 12 | l2 promotion << 16 | oob fill << 20, words 2-6 the dims,
// 7-10 the strides, 11 the box (16 bits each), 12 box[4] and the element strides. Like drivers
// up to 13.1 it sets bit 21 of word 1 when the tensor is under 128 KiB and the reported driver
// version is at most 13010. cuLaunchKernelEx takes CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION and
// refuses cluster dims that do not divide the grid (CUDA_ERROR_INVALID_CLUSTER_SIZE).
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

enum class FakeKernel { Copy, SwapHalves, Fault, Hang, TooManyResources, TmaCopy, ClusterCopy, TileCounterCopy,
                        L2Evict };
struct FakeFunction {
  const char* name;
  FakeKernel kernel;
  int max_dynamic_shared = 48 << 10;
};
FakeFunction g_functions[] = {
    {"fake_copy", FakeKernel::Copy},
    {"fake_reference_copy", FakeKernel::Copy},
    {"fake_swap_halves", FakeKernel::SwapHalves},
    {"fake_fault", FakeKernel::Fault},
    {"fake_hang", FakeKernel::Hang},
    {"fake_too_many_resources", FakeKernel::TooManyResources},
    {"fake_tma_copy", FakeKernel::TmaCopy},
    {"fake_cluster_copy", FakeKernel::ClusterCopy},
    {"fake_tile_counter_copy", FakeKernel::TileCounterCopy},
    {"nautilus_l2_evict", FakeKernel::L2Evict},
};

constexpr int kErrorInvalidClusterSize = 912;
int driver_version() { return env_int("NAUTILUS_FAKE_CUDA_DRIVER_VERSION", 13000); }

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
  *version = driver_version();
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
  const char* model = std::getenv("NAUTILUS_FAKE_CUDA_DEVICE_NAME");
  if (model != nullptr && *model != '\0') {
    std::snprintf(name, static_cast<std::size_t>(length), "%s", model);
  } else {
    std::snprintf(name, static_cast<std::size_t>(length), "Nautilus Fake GPU %d", device);
  }
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
    case kErrorInvalidClusterSize: *text = "invalid cluster size"; return kSuccess;
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
    case kErrorInvalidClusterSize: *name = "CUDA_ERROR_INVALID_CLUSTER_SIZE"; return kSuccess;
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

}  // extern "C"

namespace {

int element_bytes(int data_type) {
  switch (data_type) {
    case 6: case 9: return 2;  // FLOAT16, BFLOAT16
    case 7: return 4;          // FLOAT32
    default: return 0;
  }
}

// The fake TMA: reads the tensor the map in parameter 0 views into the buffer in parameter 1.
int run_tma_copy(void** parameters) {
  if (reinterpret_cast<std::uintptr_t>(parameters[0]) % 64 != 0) return kErrorInvalidValue;
  std::uint64_t words[16];
  std::memcpy(words, parameters[0], sizeof(words));
  if ((words[1] >> 21) & 1) {  // the small-tensor driver bug
    g_device.sticky_error = kErrorIllegalAddress;
    return kSuccess;
  }
  const int element = element_bytes(static_cast<int>(words[1] & 0xff));
  const int rank = static_cast<int>((words[1] >> 8) & 0xf);
  if (element == 0 || rank < 1 || rank > 5) return kErrorInvalidValue;
  std::uint64_t dims[5] = {1, 1, 1, 1, 1};
  std::uint64_t strides[5] = {0, 0, 0, 0, 0};  // strides[i]: of dim i (dim 0: the element)
  strides[0] = static_cast<std::uint64_t>(element);
  for (int i = 0; i < rank; ++i) dims[i] = words[2 + i];
  for (int i = 1; i < rank; ++i) strides[i] = words[7 + i - 1];
  std::uintptr_t destination = pointer_parameter(parameters, 1);
  std::size_t capacity = allocation_size(destination);
  std::size_t written = 0;
  const auto* base = reinterpret_cast<const unsigned char*>(static_cast<std::uintptr_t>(words[0]));
  auto* to = reinterpret_cast<unsigned char*>(destination);
  for (std::uint64_t i4 = 0; i4 < dims[4]; ++i4)
    for (std::uint64_t i3 = 0; i3 < dims[3]; ++i3)
      for (std::uint64_t i2 = 0; i2 < dims[2]; ++i2)
        for (std::uint64_t i1 = 0; i1 < dims[1]; ++i1)
          for (std::uint64_t i0 = 0; i0 < dims[0]; ++i0) {
            if (written + static_cast<std::size_t>(element) > capacity) return kSuccess;
            const std::uint64_t offset = i0 * strides[0] + i1 * strides[1] + i2 * strides[2] +
                                         i3 * strides[3] + i4 * strides[4];
            std::memcpy(to + written, base + offset, static_cast<std::size_t>(element));
            written += static_cast<std::size_t>(element);
          }
  return kSuccess;
}

int run_fake_kernel(FakeFunction* fake, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                    unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                    void** parameters, unsigned cluster_size) {
  if (fake == nullptr || parameters == nullptr) return kErrorInvalidValue;
  if (device_state_error() != kSuccess) return device_state_error();
  if (grid_x * grid_y * grid_z == 0 || block_x * block_y * block_z == 0 ||
      block_x * block_y * block_z > 1024) {
    return kErrorInvalidValue;
  }
  if (static_cast<int>(shared_bytes) > fake->max_dynamic_shared) return kErrorInvalidValue;
  if (const char* log = std::getenv("NAUTILUS_FAKE_CUDA_LAUNCH_LOG"); log != nullptr && *log) {
    // One short append per launch: O_APPEND keeps the lines of concurrent runners whole.
    if (std::FILE* file = std::fopen(log, "a")) {
      std::fprintf(file, "%s\n", fake->name);
      std::fclose(file);
    }
  }
  switch (fake->kernel) {
    case FakeKernel::Copy:
    case FakeKernel::SwapHalves:
    case FakeKernel::ClusterCopy: {
      if (fake->kernel == FakeKernel::ClusterCopy && cluster_size < 2) {
        g_device.sticky_error = kErrorIllegalAddress;  // no peer CTA to read from
        return kSuccess;
      }
      std::uintptr_t source = pointer_parameter(parameters, 0);
      std::uintptr_t destination = pointer_parameter(parameters, 1);
      std::size_t bytes = std::min(allocation_size(source), allocation_size(destination));
      auto* to = reinterpret_cast<unsigned char*>(destination);
      const auto* from = reinterpret_cast<const unsigned char*>(source);
      if (fake->kernel != FakeKernel::SwapHalves) {
        std::memmove(to, from, bytes);
      } else {
        std::size_t half = bytes / 8 * 4;  // a multiple of 4 bytes: whole elements move
        std::memmove(to, from + half, bytes - half);
        std::memmove(to + (bytes - half), from, half);
      }
      return kSuccess;
    }
    case FakeKernel::TileCounterCopy: {
      const std::uintptr_t counter = pointer_parameter(parameters, 2);
      if (allocation_size(counter) < 4) return kErrorInvalidValue;
      std::uint32_t fetched = 0;
      std::memcpy(&fetched, reinterpret_cast<const void*>(counter), 4);
      if (fetched != 0) {
        g_device.sticky_error = kErrorIllegalAddress;  // tiles past the grid
        return kSuccess;
      }
      std::uintptr_t source = pointer_parameter(parameters, 0);
      std::uintptr_t destination = pointer_parameter(parameters, 1);
      std::memmove(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source),
                   std::min(allocation_size(source), allocation_size(destination)));
      fetched += grid_x;
      std::memcpy(reinterpret_cast<void*>(counter), &fetched, 4);
      return kSuccess;
    }
    case FakeKernel::L2Evict: {
      // Reads [buffer, end) and stores nothing; a range outside one allocation faults.
      const std::uintptr_t buffer = pointer_parameter(parameters, 0);
      const std::uintptr_t end = pointer_parameter(parameters, 1);
      if (end < buffer || end - buffer > allocation_size(buffer) ||
          allocation_size(pointer_parameter(parameters, 2)) < 4) {
        g_device.sticky_error = kErrorIllegalAddress;
      }
      return kSuccess;
    }
    case FakeKernel::TmaCopy:
      return run_tma_copy(parameters);
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

// cuda.h's CUlaunchAttribute and CUlaunchConfig.
struct FakeLaunchAttribute {
  int id;
  char pad[4];
  union alignas(8) {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster;
  } value;
};
struct FakeLaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void* stream;
  FakeLaunchAttribute* attributes;
  unsigned attribute_count;
};

int fake_tensor_map_encode_tiled(void* map, int data_type, unsigned rank, void* address,
                                 const unsigned long long* dims,
                                 const unsigned long long* strides, const unsigned* box,
                                 const unsigned* element_strides, int interleave, int swizzle,
                                 int l2_promotion, int oob_fill) {
  if (map == nullptr || reinterpret_cast<std::uintptr_t>(map) % 64 != 0) return kErrorInvalidValue;
  const int element = element_bytes(data_type);
  if (element == 0 || rank < 1 || rank > 5 || interleave != 0) return kErrorInvalidValue;
  if (reinterpret_cast<std::uintptr_t>(address) % 16 != 0) return kErrorInvalidValue;
  if (swizzle < 0 || swizzle > 3 || l2_promotion < 0 || l2_promotion > 3 || oob_fill < 0 ||
      oob_fill > 1) {
    return kErrorInvalidValue;
  }
  std::uint64_t tensor_bytes = static_cast<std::uint64_t>(element);
  for (unsigned i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return kErrorInvalidValue;
    if (box[i] == 0 || box[i] > 256) return kErrorInvalidValue;
    if (element_strides[i] == 0 || element_strides[i] > 8) return kErrorInvalidValue;
    tensor_bytes *= dims[i];
  }
  for (unsigned i = 0; i + 1 < rank; ++i) {
    if (strides[i] % 16 != 0 || strides[i] >= (1ull << 40)) return kErrorInvalidValue;
  }
  const unsigned inner = box[0] * static_cast<unsigned>(element);
  if (inner % 16 != 0) return kErrorInvalidValue;
  if (swizzle != 0 && inner > (16u << swizzle)) return kErrorInvalidValue;  // 32, 64, 128 B
  std::uint64_t words[16] = {};
  words[0] = reinterpret_cast<std::uintptr_t>(address);
  words[1] = static_cast<std::uint64_t>(data_type) | std::uint64_t{rank} << 8 |
             static_cast<std::uint64_t>(swizzle) << 12 |
             static_cast<std::uint64_t>(l2_promotion) << 16 |
             static_cast<std::uint64_t>(oob_fill) << 20;
  if (driver_version() <= 13010 && tensor_bytes < (128u << 10)) words[1] |= std::uint64_t{1} << 21;
  for (unsigned i = 0; i < rank; ++i) words[2 + i] = dims[i];
  for (unsigned i = 0; i + 1 < rank; ++i) words[7 + i] = strides[i];
  for (unsigned i = 0; i < rank && i < 4; ++i) words[11] |= std::uint64_t{box[i]} << (16 * i);
  if (rank == 5) words[12] = box[4];
  for (unsigned i = 0; i < rank; ++i) words[12] |= std::uint64_t{element_strides[i]} << (16 + 4 * i);
  std::memcpy(map, words, sizeof(words));
  return kSuccess;
}

}  // namespace

extern "C" {

// One CTA of any kernel per SM (the fake kernels need no more).
int cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* function, int block_size,
                                                std::size_t /*dynamic_shared_bytes*/) {
  if (blocks == nullptr || function == nullptr || block_size < 1) return kErrorInvalidValue;
  *blocks = 1;
  return kSuccess;
}

int cuLaunchKernel(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                   unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                   void* /*stream*/, void** parameters, void** /*extra*/) {
  return run_fake_kernel(static_cast<FakeFunction*>(function), grid_x, grid_y, grid_z, block_x,
                         block_y, block_z, shared_bytes, parameters, 1);
}

int cuLaunchKernelEx(const FakeLaunchConfig* config, void* function, void** parameters,
                     void** /*extra*/) {
  if (config == nullptr) return kErrorInvalidValue;
  unsigned cluster_size = 1;
  for (unsigned i = 0; i < config->attribute_count; ++i) {
    const FakeLaunchAttribute& attribute = config->attributes[i];
    if (attribute.id != 4) continue;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    const auto& c = attribute.value.cluster;
    if (c.x == 0 || c.y == 0 || c.z == 0 || config->grid_x % c.x != 0 ||
        config->grid_y % c.y != 0 || config->grid_z % c.z != 0 || c.x * c.y * c.z > 8) {
      return kErrorInvalidClusterSize;
    }
    cluster_size = c.x * c.y * c.z;
  }
  return run_fake_kernel(static_cast<FakeFunction*>(function), config->grid_x, config->grid_y,
                         config->grid_z, config->block_x, config->block_y, config->block_z,
                         config->shared_bytes, parameters, cluster_size);
}

int cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version,
                        unsigned long long /*flags*/, int* symbol_status) {
  if (symbol == nullptr || function == nullptr) return kErrorInvalidValue;
  *function = nullptr;
  int status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  if (std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0 &&
      env_int("NAUTILUS_FAKE_CUDA_NO_TENSOR_MAP", 0) == 0) {
    if (cuda_version >= 12000) {
      *function = reinterpret_cast<void*>(&fake_tensor_map_encode_tiled);
      status = 0;
    } else {
      status = 2;  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
    }
  }
  if (symbol_status != nullptr) *symbol_status = status;
  return status == 0 ? kSuccess : kErrorNotFound;
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
