// Results of the code generator: a value, or a CodegenError saying what went wrong and why.
//
// Everything in core/codegen can fail for reasons outside the compiler's control (no NVRTC on
// this machine, a kernel that does not compile, a package directory that cannot be written, an
// MA tile construct the emitter does not print yet). Such failures are returned, never asserted:
// the CLI prints `message` as one line, and the app shows `log` (NVRTC's full compile log) in the
// CUDA panel. Reading value() of a failed result throws BadCodegenAccess (a programming error).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace nautilus::codegen {

struct CodegenError {
  enum class Kind {
    NvrtcNotFound,   // libnvrtc could not be loaded, or lacks an entry point
    BadOption,       // an option NVRTC or the caller rejected (unknown arch, ...)
    Compilation,     // NVRTC compiled and failed: `log` has its diagnostics
    Unsupported,     // the emitter cannot print this MA tile construct (yet)
    InvalidInput,    // malformed input: an IR the emitter cannot trust, a bad launch.json, ...
    Io,              // a file or directory could not be read or written
  };
  Kind kind = Kind::InvalidInput;
  std::string message;  // one line, e.g. "NVRTC not found: tried libnvrtc.so.13, ..."
  std::string log;      // the NVRTC compile log when there is one

  bool operator==(const CodegenError&) const = default;
};

const char* codegen_error_kind_name(CodegenError::Kind kind);  // "nvrtc-not-found", ...

inline CodegenError codegen_error(CodegenError::Kind kind, std::string message,
                                  std::string log = {}) {
  return CodegenError{kind, std::move(message), std::move(log)};
}

class BadCodegenAccess : public std::logic_error {
 public:
  explicit BadCodegenAccess(const std::string& reason)
      : std::logic_error("value() of a failed codegen result: " + reason) {}
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}              // NOLINT: implicit by design
  Result(CodegenError error) : state_(std::move(error)) {}   // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    if (!ok()) throw BadCodegenAccess(error().message);
    return std::get<0>(state_);
  }
  T&& value() && {
    if (!ok()) throw BadCodegenAccess(error().message);
    return std::get<0>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

  // The failure; an empty CodegenError when ok().
  const CodegenError& error() const {
    static const CodegenError none;
    return ok() ? none : std::get<1>(state_);
  }

 private:
  std::variant<T, CodegenError> state_;
};

}  // namespace nautilus::codegen
