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

}  // namespace nautilus::profiler
