// A shared library loaded at run time with dlopen, and typed function pointers resolved from it.
//
// NVRTC (core/codegen/nvrtc.h), the CUDA driver (profiler/cuda_driver.h) and CUPTI
// (profiler/cupti_activity.h) are loaded this way so that every binary starts on machines
// without the CUDA toolkit or a GPU. Libraries open with RTLD_NOW | RTLD_LOCAL: every symbol is
// bound at load time (a missing one shows up in resolve(), not mid-run) and none enters the
// global namespace, where it could interpose on another library's copy (CUPTI resolves its
// own driver symbols). A library stays loaded unless the caller unloads it: the CUDA driver and
// CUPTI own threads inside themselves once used, and NVRTC's builtins must stay mapped under
// concurrent compiles, so only a library nothing was used from may be unloaded.
//
//   SharedLibrary library = SharedLibrary::open("libnvrtc.so.12");
//   if (!library.is_open()) return failure(library.open_error());
//   library.resolve("nvrtcVersion", api.version);      // nvrtcResult (*)(int*, int*)
//   if (!library.first_missing().empty()) library.unload();
#pragma once

#include <string>

namespace nautilus {

class SharedLibrary {
 public:
  // dlopen(path); is_open() says whether it worked and open_error() why not (dlerror's text,
  // which starts with the path).
  static SharedLibrary open(const std::string& path);

  bool is_open() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }
  const std::string& open_error() const { return open_error_; }

  // Sets `fn` to the symbol `name` (null when the library does not export it) and returns
  // whether it was found; the first name not found is kept in first_missing().
  template <typename Fn>
  bool resolve(const char* name, Fn& fn) {
    fn = function<Fn>(name);
    if (fn == nullptr && missing_.empty()) missing_ = name;
    return fn != nullptr;
  }
  // The same for a symbol the caller can do without (an alternative name is tried next).
  template <typename Fn>
  bool resolve_optional(const char* name, Fn& fn) {
    fn = function<Fn>(name);
    return fn != nullptr;
  }
  const std::string& first_missing() const { return missing_; }

  // dlclose: only for a library nothing resolved from it was used (an incomplete one).
  void unload();

 private:
  template <typename Fn>
  Fn function(const char* name) const {
    // dlsym returns an object pointer; POSIX guarantees it converts to a function pointer.
    return reinterpret_cast<Fn>(symbol(name));
  }
  void* symbol(const char* name) const;

  void* handle_ = nullptr;
  std::string path_;
  std::string open_error_;
  std::string missing_;
};

}  // namespace nautilus
