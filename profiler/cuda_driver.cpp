#include "profiler/cuda_driver.h"

#include <dlfcn.h>

namespace nautilus::profiler {
namespace {

// Resolves `name` into `fn`; on failure records the first missing symbol in `missing`.
template <typename Fn>
void resolve(void* handle, const char* name, Fn& fn, std::string& missing) {
  // dlsym returns an object pointer; POSIX guarantees it converts to a function pointer.
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr && missing.empty()) {
    missing = name;
  }
}

}  // namespace

std::shared_ptr<const CudaDriver> CudaDriver::load(const std::string& library,
                                                   DriverLoadError* error) {
  // RTLD_LOCAL keeps the driver's symbols out of the global namespace so that they cannot
  // interpose on anything else the process loads (e.g. CUPTI resolves its own copy).
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (error != nullptr) {
      const char* reason = dlerror();
      error->kind = DriverLoadError::Kind::NotFound;
      error->message =
          "cannot load " + library + ": " + (reason != nullptr ? reason : "unknown error");
    }
    return nullptr;
  }

  auto driver = std::make_shared<CudaDriver>();
  driver->library_ = library;
  std::string missing;
  resolve(handle, "cuInit", driver->init, missing);
  resolve(handle, "cuDriverGetVersion", driver->driver_get_version, missing);
  resolve(handle, "cuDeviceGetCount", driver->device_get_count, missing);
  resolve(handle, "cuDeviceGet", driver->device_get, missing);
  resolve(handle, "cuDeviceGetName", driver->device_get_name, missing);
  resolve(handle, "cuDeviceGetAttribute", driver->device_get_attribute, missing);
  resolve(handle, "cuDeviceTotalMem_v2", driver->device_total_mem, missing);
  resolve(handle, "cuGetErrorString", driver->get_error_string, missing);
  resolve(handle, "cuGetErrorName", driver->get_error_name, missing);
  resolve(handle, "cuDevicePrimaryCtxRetain", driver->primary_ctx_retain, missing);
  resolve(handle, "cuDevicePrimaryCtxRelease_v2", driver->primary_ctx_release, missing);
  resolve(handle, "cuCtxSetCurrent", driver->ctx_set_current, missing);
  resolve(handle, "cuModuleLoadDataEx", driver->module_load_data_ex, missing);
  resolve(handle, "cuModuleUnload", driver->module_unload, missing);
  resolve(handle, "cuModuleGetFunction", driver->module_get_function, missing);
  resolve(handle, "cuFuncSetAttribute", driver->func_set_attribute, missing);
  resolve(handle, "cuFuncGetAttribute", driver->func_get_attribute, missing);
  resolve(handle, "cuMemAlloc_v2", driver->mem_alloc, missing);
  resolve(handle, "cuMemFree_v2", driver->mem_free, missing);
  resolve(handle, "cuMemcpyHtoD_v2", driver->memcpy_htod, missing);
  resolve(handle, "cuMemcpyDtoH_v2", driver->memcpy_dtoh, missing);
  resolve(handle, "cuMemsetD8Async", driver->memset_d8_async, missing);
  resolve(handle, "cuLaunchKernel", driver->launch_kernel, missing);
  resolve(handle, "cuEventCreate", driver->event_create, missing);
  resolve(handle, "cuEventRecord", driver->event_record, missing);
  resolve(handle, "cuEventQuery", driver->event_query, missing);
  resolve(handle, "cuEventDestroy_v2", driver->event_destroy, missing);
  // CUDA 12.8 versioned cuEventElapsedTime (cuda.h maps the plain name to _v2); older drivers
  // export only the original, whose ABI is the same.
  std::string no_v2;
  resolve(handle, "cuEventElapsedTime_v2", driver->event_elapsed_time, no_v2);
  if (driver->event_elapsed_time == nullptr) {
    resolve(handle, "cuEventElapsedTime", driver->event_elapsed_time, missing);
  }
  if (!missing.empty()) {
    // Nothing from an incomplete library was used, so it is safe to unload it.
    dlclose(handle);
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
