#include "core/support/shared_library.h"

#include <dlfcn.h>

namespace nautilus {

SharedLibrary SharedLibrary::open(const std::string& path) {
  SharedLibrary library;
  library.path_ = path;
  library.handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library.handle_ == nullptr) {
    const char* reason = dlerror();
    library.open_error_ = reason != nullptr ? reason : "";
  }
  return library;
}

void* SharedLibrary::symbol(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

void SharedLibrary::unload() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
}

}  // namespace nautilus
