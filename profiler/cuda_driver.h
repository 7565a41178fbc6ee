// The CUDA driver API, loaded at run time.
//
// Nautilus never links libcuda: a binary linked with -lcuda does not even start on a machine
// without the NVIDIA driver, and most machines that run the app or CI have none. Instead
// `CudaDriver::load` dlopen()s libcuda.so.1 and resolves the entry points the profiler uses. When
// the library or a symbol is missing, loading fails with a reason and everything else keeps
// working ("no GPU").
//
// The types below mirror the ABI of cuda.h (CUresult and CUdevice are ints, attributes are the
// CU_DEVICE_ATTRIBUTE_* enumerators), declared here so that this header needs no CUDA toolkit.
// Every entry point is resolved by its ABI symbol name, e.g. cuDeviceTotalMem is the versioned
// symbol cuDeviceTotalMem_v2 (cuda.h #defines the plain name to it).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace nautilus::profiler {

namespace cu {

using Result = int;  // CUresult
using Device = int;  // CUdevice

inline constexpr Result kSuccess = 0;       // CUDA_SUCCESS
inline constexpr Result kErrorNoDevice = 100;  // CUDA_ERROR_NO_DEVICE

// CUdevice_attribute values used by device discovery (stable across driver versions).
enum class Attribute : int {
  MaxThreadsPerBlock = 1,
  WarpSize = 10,
  MaxRegistersPerBlock = 12,
  ClockRateKHz = 13,
  MultiprocessorCount = 16,
  PciBusId = 33,
  MemoryClockRateKHz = 36,
  GlobalMemoryBusWidthBits = 37,
  L2CacheSizeBytes = 38,
  MaxThreadsPerMultiprocessor = 39,
  PciDomainId = 50,
  ComputeCapabilityMajor = 75,
  ComputeCapabilityMinor = 76,
  MaxSharedMemoryPerMultiprocessor = 81,
  MaxRegistersPerMultiprocessor = 82,
  MaxSharedMemoryPerBlockOptin = 97,
};

}  // namespace cu

// Why CudaDriver::load failed.
struct DriverLoadError {
  enum class Kind {
    NotFound,       // dlopen failed: no such library (or it cannot be mapped)
    MissingSymbol,  // the library opened but lacks an entry point
  };
  Kind kind = Kind::NotFound;
  std::string message;  // one line, e.g. "cannot load libcuda.so.1: ...: No such file or directory"
};

// The resolved entry points of one loaded libcuda. Function pointers have the C signatures of
// cuda.h; call them only through a CudaDriver obtained from `load`, which guarantees that all of
// them are non-null.
class CudaDriver {
 public:
  using InitFn = cu::Result (*)(unsigned int flags);
  using DriverGetVersionFn = cu::Result (*)(int* version);
  using DeviceGetCountFn = cu::Result (*)(int* count);
  using DeviceGetFn = cu::Result (*)(cu::Device* device, int ordinal);
  using DeviceGetNameFn = cu::Result (*)(char* name, int length, cu::Device device);
  using DeviceGetAttributeFn = cu::Result (*)(int* value, int attribute, cu::Device device);
  using DeviceTotalMemFn = cu::Result (*)(std::size_t* bytes, cu::Device device);
  using GetErrorStringFn = cu::Result (*)(cu::Result error, const char** text);

  // The library name the system driver is installed under (the SONAME, present without the
  // development symlink libcuda.so).
  static constexpr const char* kSystemLibrary = "libcuda.so.1";

  // dlopen()s `library` (a SONAME searched the usual way, or a path) and resolves every entry
  // point. Returns nullptr and fills `error` (when non-null) if the library cannot be opened or
  // lacks a symbol. The library is never unloaded (see the .cpp for why).
  static std::shared_ptr<const CudaDriver> load(const std::string& library,
                                                DriverLoadError* error);

  // The text of a CUresult, e.g. "no CUDA-capable device is detected (CUDA error 100)".
  std::string error_text(cu::Result result) const;

  const std::string& library() const { return library_; }

  InitFn init = nullptr;
  DriverGetVersionFn driver_get_version = nullptr;
  DeviceGetCountFn device_get_count = nullptr;
  DeviceGetFn device_get = nullptr;
  DeviceGetNameFn device_get_name = nullptr;
  DeviceGetAttributeFn device_get_attribute = nullptr;
  DeviceTotalMemFn device_total_mem = nullptr;
  GetErrorStringFn get_error_string = nullptr;

 private:
  std::string library_;
};

}  // namespace nautilus::profiler
