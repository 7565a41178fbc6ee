// A stand-in for libcuda.so.1, loaded by tests through CudaDriver::load(path).
//
// It exports the driver entry points that device discovery resolves, with the C ABI of cuda.h,
// and describes H100-like devices. Its behaviour is steered by environment variables, read on
// every call so that one loaded copy serves every test:
//
//   NAUTILUS_FAKE_CUDA_INIT_ERROR=<code>   cuInit returns <code> (e.g. 100 = no device)
//   NAUTILUS_FAKE_CUDA_DEVICES=<n>         cuDeviceGetCount reports <n> devices (default 1)
//   NAUTILUS_FAKE_CUDA_ATTRIBUTE_ERROR=1   cuDeviceGetAttribute fails with error 1
//
// It is not linked into any product binary.
#include <cstddef>
#include <cstdio>
#include <cstdlib>

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
    case 75: *value = 9; break;                   // compute capability major
    case 76: *value = 0; break;                   // compute capability minor
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
    case kErrorNotInitialized: *text = "initialization error"; return kSuccess;
    case 100: *text = "no CUDA-capable device is detected"; return kSuccess;
    case kErrorInvalidDevice: *text = "invalid device ordinal"; return kSuccess;
    case 999: *text = "unknown error"; return kSuccess;
    default: *text = nullptr; return kErrorInvalidValue;
  }
}

}  // extern "C"
