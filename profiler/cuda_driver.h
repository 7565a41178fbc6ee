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
//
// Two groups of entry points: discovery (cuInit, device attributes; what `nautilus devices`
// needs) and execution (primary context, modules, memory, launches, events; what the runner
// needs). Every one of them exists in every driver since CUDA 11; cuEventElapsedTime is resolved
// as cuEventElapsedTime_v2 (CUDA 12.8+) or, on older drivers, as the original symbol.
//
// Hopper entry points are optional, so an older driver still runs every other package:
// cuLaunchKernelEx (cluster launches, CUDA 11.8+) is resolved by name, and
// cuTensorMapEncodeTiled (CUDA 12.0+) through cuGetProcAddress -- resolved as its ABI symbol
// cuGetProcAddress_v2, the name cuda.h #defines cuGetProcAddress to -- asking for the
// entry point's CUDA 12.0 ABI, the one cu::TensorMapEncodeTiledFn below declares.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace nautilus::profiler {

namespace cu {

using Result = int;  // CUresult
using Device = int;  // CUdevice
using DevicePtr = unsigned long long;  // CUdeviceptr (64-bit on every supported platform)
// Opaque handles (pointers to driver-internal structs in cuda.h).
using Context = struct ContextHandle*;    // CUcontext
using Module = struct ModuleHandle*;      // CUmodule
using Function = struct FunctionHandle*;  // CUfunction
using Stream = struct StreamHandle*;      // CUstream (nullptr: the legacy default stream)
using Event = struct EventHandle*;        // CUevent

inline constexpr Result kSuccess = 0;                    // CUDA_SUCCESS
inline constexpr Result kErrorInvalidValue = 1;          // CUDA_ERROR_INVALID_VALUE
inline constexpr Result kErrorOutOfMemory = 2;           // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr Result kErrorNoDevice = 100;            // CUDA_ERROR_NO_DEVICE
inline constexpr Result kErrorInvalidImage = 200;        // CUDA_ERROR_INVALID_IMAGE
inline constexpr Result kErrorNoBinaryForGpu = 209;      // CUDA_ERROR_NO_BINARY_FOR_GPU
inline constexpr Result kErrorInvalidPtx = 218;          // CUDA_ERROR_INVALID_PTX
inline constexpr Result kErrorNotFound = 500;            // CUDA_ERROR_NOT_FOUND
inline constexpr Result kErrorNotReady = 600;            // CUDA_ERROR_NOT_READY
inline constexpr Result kErrorIllegalAddress = 700;      // CUDA_ERROR_ILLEGAL_ADDRESS
inline constexpr Result kErrorLaunchOutOfResources = 701;  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
inline constexpr Result kErrorLaunchTimeout = 702;       // CUDA_ERROR_LAUNCH_TIMEOUT
inline constexpr Result kErrorLaunchFailed = 719;        // CUDA_ERROR_LAUNCH_FAILED
inline constexpr Result kErrorNotSupported = 801;        // CUDA_ERROR_NOT_SUPPORTED
inline constexpr Result kErrorInvalidClusterSize = 912;  // CUDA_ERROR_INVALID_CLUSTER_SIZE

// CUfunction_attribute values.
inline constexpr int kFuncAttributeNumRegisters = 4;            // CU_FUNC_ATTRIBUTE_NUM_REGS
inline constexpr int kFuncAttributeMaxDynamicSharedBytes = 8;   // ..._MAX_DYNAMIC_SHARED_SIZE_BYTES

// CUjit_option values for cuModuleLoadDataEx (the JIT log of a PTX or cubin load).
inline constexpr int kJitErrorLogBuffer = 5;           // CU_JIT_ERROR_LOG_BUFFER
inline constexpr int kJitErrorLogBufferSizeBytes = 6;  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES

// cuGetProcAddress flags and the CUDA version whose ABI of cuTensorMapEncodeTiled we call.
inline constexpr unsigned long long kGetProcAddressDefault = 0;  // CU_GET_PROC_ADDRESS_DEFAULT
inline constexpr int kTensorMapEncodeTiledVersion = 12000;

// CUlaunchAttributeID / CUlaunchAttribute / CUlaunchConfig for cuLaunchKernelEx, laid out as in
// cuda.h (the attribute value is a 64-byte union aligned like its pointer members).
inline constexpr int kLaunchAttributeClusterDimension = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
struct LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union alignas(8) Value {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster_dim;
  } value = {};
};
static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  Stream stream = nullptr;
  LaunchAttribute* attributes = nullptr;
  unsigned attribute_count = 0;
};
static_assert(sizeof(LaunchConfig) == 56, "CUlaunchConfig is 56 bytes");

// cuTensorMapEncodeTiled's CUDA 12.0 ABI (PFN_cuTensorMapEncodeTiled_v12000): enums are ints,
// the map is the 128-byte, 64-byte-aligned CUtensorMap.
using TensorMapEncodeTiledFn = Result (*)(void* tensor_map, int data_type, unsigned rank,
                                          void* global_address, const unsigned long long* dims,
                                          const unsigned long long* strides_bytes,
                                          const unsigned* box, const unsigned* element_strides,
                                          int interleave, int swizzle, int l2_promotion,
                                          int oob_fill);

inline constexpr unsigned kEventDefault = 0;         // CU_EVENT_DEFAULT (records time)
inline constexpr unsigned kEventDisableTiming = 2;   // CU_EVENT_DISABLE_TIMING (cheap sync point)

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
  using GetErrorNameFn = cu::Result (*)(cu::Result error, const char** name);

  using PrimaryCtxRetainFn = cu::Result (*)(cu::Context* context, cu::Device device);
  using PrimaryCtxReleaseFn = cu::Result (*)(cu::Device device);
  using CtxSetCurrentFn = cu::Result (*)(cu::Context context);
  using ModuleLoadDataExFn = cu::Result (*)(cu::Module* module, const void* image,
                                            unsigned int option_count, int* options,
                                            void** option_values);
  using ModuleUnloadFn = cu::Result (*)(cu::Module module);
  using ModuleGetFunctionFn = cu::Result (*)(cu::Function* function, cu::Module module,
                                             const char* name);
  using FuncSetAttributeFn = cu::Result (*)(cu::Function function, int attribute, int value);
  using FuncGetAttributeFn = cu::Result (*)(int* value, int attribute, cu::Function function);
  using MemAllocFn = cu::Result (*)(cu::DevicePtr* pointer, std::size_t bytes);
  using MemFreeFn = cu::Result (*)(cu::DevicePtr pointer);
  using MemcpyHtoDFn = cu::Result (*)(cu::DevicePtr destination, const void* source,
                                      std::size_t bytes);
  using MemcpyDtoHFn = cu::Result (*)(void* destination, cu::DevicePtr source, std::size_t bytes);
  using MemsetD8AsyncFn = cu::Result (*)(cu::DevicePtr destination, unsigned char value,
                                         std::size_t count, cu::Stream stream);
  using LaunchKernelFn = cu::Result (*)(cu::Function function, unsigned grid_x, unsigned grid_y,
                                        unsigned grid_z, unsigned block_x, unsigned block_y,
                                        unsigned block_z, unsigned shared_bytes, cu::Stream stream,
                                        void** parameters, void** extra);
  using EventCreateFn = cu::Result (*)(cu::Event* event, unsigned int flags);
  using EventRecordFn = cu::Result (*)(cu::Event event, cu::Stream stream);
  using EventQueryFn = cu::Result (*)(cu::Event event);
  using EventElapsedTimeFn = cu::Result (*)(float* milliseconds, cu::Event start, cu::Event end);
  using EventDestroyFn = cu::Result (*)(cu::Event event);
  using GetProcAddressFn = cu::Result (*)(const char* symbol, void** function, int cuda_version,
                                          unsigned long long flags, int* symbol_status);
  using OccupancyMaxActiveBlocksFn = cu::Result (*)(int* blocks, cu::Function function,
                                                     int block_size, std::size_t dynamic_shared_bytes);
  using LaunchKernelExFn = cu::Result (*)(const cu::LaunchConfig* config, cu::Function function,
                                          void** parameters, void** extra);

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
  // The enumerator name of a CUresult, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS"; "CUDA_ERROR_<code>" for
  // a code the driver does not know.
  std::string error_name(cu::Result result) const;

  const std::string& library() const { return library_; }

  // cuTensorMapEncodeTiled through cuGetProcAddress (call after cuInit); nullptr with `why`
  // filled when this driver has no cuGetProcAddress or no such entry point at version 12.0.
  cu::TensorMapEncodeTiledFn tensor_map_encoder(std::string* why) const;

  InitFn init = nullptr;
  DriverGetVersionFn driver_get_version = nullptr;
  DeviceGetCountFn device_get_count = nullptr;
  DeviceGetFn device_get = nullptr;
  DeviceGetNameFn device_get_name = nullptr;
  DeviceGetAttributeFn device_get_attribute = nullptr;
  DeviceTotalMemFn device_total_mem = nullptr;
  GetErrorStringFn get_error_string = nullptr;
  GetErrorNameFn get_error_name = nullptr;

  PrimaryCtxRetainFn primary_ctx_retain = nullptr;
  PrimaryCtxReleaseFn primary_ctx_release = nullptr;
  CtxSetCurrentFn ctx_set_current = nullptr;
  ModuleLoadDataExFn module_load_data_ex = nullptr;
  ModuleUnloadFn module_unload = nullptr;
  ModuleGetFunctionFn module_get_function = nullptr;
  FuncSetAttributeFn func_set_attribute = nullptr;
  FuncGetAttributeFn func_get_attribute = nullptr;
  MemAllocFn mem_alloc = nullptr;
  MemFreeFn mem_free = nullptr;
  MemcpyHtoDFn memcpy_htod = nullptr;
  MemcpyDtoHFn memcpy_dtoh = nullptr;
  MemsetD8AsyncFn memset_d8_async = nullptr;
  LaunchKernelFn launch_kernel = nullptr;
  EventCreateFn event_create = nullptr;
  EventRecordFn event_record = nullptr;
  EventQueryFn event_query = nullptr;
  EventElapsedTimeFn event_elapsed_time = nullptr;
  EventDestroyFn event_destroy = nullptr;
  // Optional (nullptr on drivers without them): see the top of this file.
  GetProcAddressFn get_proc_address = nullptr;
  LaunchKernelExFn launch_kernel_ex = nullptr;
  // cuOccupancyMaxActiveBlocksPerMultiprocessor: how many CTAs of a persistent kernel to launch
  // (without it, one per SM).
  OccupancyMaxActiveBlocksFn occupancy_max_active_blocks = nullptr;

 private:
  std::string library_;
};

}  // namespace nautilus::profiler
