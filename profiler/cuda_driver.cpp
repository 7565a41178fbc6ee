#include "profiler/cuda_driver.h"

#include "core/support/shared_library.h"

namespace nautilus::profiler {

std::shared_ptr<const CudaDriver> CudaDriver::load(const std::string& library,
                                                   DriverLoadError* error) {
  SharedLibrary driver_library = SharedLibrary::open(library);
  if (!driver_library.is_open()) {
    if (error != nullptr) {
      const std::string& reason = driver_library.open_error();
      error->kind = DriverLoadError::Kind::NotFound;
      error->message = "cannot load " + library + ": " + (reason.empty() ? "unknown error" : reason);
    }
    return nullptr;
  }

  auto driver = std::make_shared<CudaDriver>();
  driver->library_ = library;
  driver_library.resolve("cuInit", driver->init);
  driver_library.resolve("cuDriverGetVersion", driver->driver_get_version);
  driver_library.resolve("cuDeviceGetCount", driver->device_get_count);
  driver_library.resolve("cuDeviceGet", driver->device_get);
  driver_library.resolve("cuDeviceGetName", driver->device_get_name);
  driver_library.resolve("cuDeviceGetAttribute", driver->device_get_attribute);
  driver_library.resolve("cuDeviceTotalMem_v2", driver->device_total_mem);
  driver_library.resolve("cuGetErrorString", driver->get_error_string);
  driver_library.resolve("cuGetErrorName", driver->get_error_name);
  driver_library.resolve("cuDevicePrimaryCtxRetain", driver->primary_ctx_retain);
  driver_library.resolve("cuDevicePrimaryCtxRelease_v2", driver->primary_ctx_release);
  driver_library.resolve("cuCtxSetCurrent", driver->ctx_set_current);
  driver_library.resolve("cuModuleLoadDataEx", driver->module_load_data_ex);
  driver_library.resolve("cuModuleUnload", driver->module_unload);
  driver_library.resolve("cuModuleGetFunction", driver->module_get_function);
  driver_library.resolve("cuFuncSetAttribute", driver->func_set_attribute);
  driver_library.resolve("cuFuncGetAttribute", driver->func_get_attribute);
  driver_library.resolve("cuMemAlloc_v2", driver->mem_alloc);
  driver_library.resolve("cuMemFree_v2", driver->mem_free);
  driver_library.resolve("cuMemcpyHtoD_v2", driver->memcpy_htod);
  driver_library.resolve("cuMemcpyDtoH_v2", driver->memcpy_dtoh);
  driver_library.resolve("cuMemsetD8Async", driver->memset_d8_async);
  driver_library.resolve("cuLaunchKernel", driver->launch_kernel);
  driver_library.resolve("cuEventCreate", driver->event_create);
  driver_library.resolve("cuEventRecord", driver->event_record);
  driver_library.resolve("cuEventQuery", driver->event_query);
  driver_library.resolve("cuEventDestroy_v2", driver->event_destroy);
  // CUDA 12.8 versioned cuEventElapsedTime (cuda.h maps the plain name to _v2); older drivers
  // export only the original, whose ABI is the same.
  if (!driver_library.resolve_optional("cuEventElapsedTime_v2", driver->event_elapsed_time)) {
    driver_library.resolve("cuEventElapsedTime", driver->event_elapsed_time);
  }
  // Hopper entry points: optional, so that older drivers keep running everything else.
  driver_library.resolve_optional("cuGetProcAddress_v2", driver->get_proc_address);
  driver_library.resolve_optional("cuLaunchKernelEx", driver->launch_kernel_ex);
  driver_library.resolve_optional("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                  driver->occupancy_max_active_blocks);
  const std::string missing = driver_library.first_missing();
  if (!missing.empty()) {
    // Nothing from an incomplete library was used, so it is safe to unload it.
    driver_library.unload();
    if (error != nullptr) {
      error->kind = DriverLoadError::Kind::MissingSymbol;
      error->message = library + " does not export " + missing + " (driver too old or not libcuda)";
    }
    return nullptr;
  }
  // The handle is deliberately never closed: after cuInit the driver owns threads and atexit
  // handlers that live inside the library, and unloading it under them crashes at exit. dlopen
  // reference-counts, so loading the same library again returns the same mapping.
  return driver;
}

cu::TensorMapEncodeTiledFn CudaDriver::tensor_map_encoder(std::string* why) const {
  if (get_proc_address == nullptr) {
    if (why != nullptr) *why = library_ + " does not export cuGetProcAddress_v2 (driver older than CUDA 12.0)";
    return nullptr;
  }
  void* function = nullptr;
  int status = 0;  // CUdriverProcAddressQueryResult: 0 found, 1 not found, 2 version too new
  cu::Result r = get_proc_address("cuTensorMapEncodeTiled", &function,
                                  cu::kTensorMapEncodeTiledVersion, cu::kGetProcAddressDefault,
                                  &status);
  if (r != cu::kSuccess || function == nullptr || status != 0) {
    if (why != nullptr) {
      *why = "cuGetProcAddress(cuTensorMapEncodeTiled, 12000) failed: " +
             (r != cu::kSuccess ? error_text(r) : std::string("query status ") + std::to_string(status));
    }
    return nullptr;
  }
  return reinterpret_cast<cu::TensorMapEncodeTiledFn>(function);
}

std::string CudaDriver::error_text(cu::Result result) const {
  const char* text = nullptr;
  std::string message;
  if (get_error_string != nullptr && get_error_string(result, &text) == cu::kSuccess &&
      text != nullptr) {
    message = text;
  } else {
    message = "unrecognized error";
  }
  return message + " (CUDA error " + std::to_string(result) + ")";
}

std::string CudaDriver::error_name(cu::Result result) const {
  const char* name = nullptr;
  if (get_error_name != nullptr && get_error_name(result, &name) == cu::kSuccess &&
      name != nullptr) {
    return name;
  }
  return "CUDA_ERROR_" + std::to_string(result);
}

}  // namespace nautilus::profiler
