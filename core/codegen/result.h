// Results of the code generator: a value, or a CodegenError saying what went wrong and why.
//
// Everything in core/codegen can fail for reasons outside the compiler's control (no NVRTC on
// this machine, a kernel that does not compile, a package directory that cannot be written, an
// MA tile construct the emitter does not print yet). Such failures are returned, never asserted:
// the CLI prints `message` as one line, and the app shows `log` (NVRTC's full compile log) in the
// CUDA panel. Reading value() of a failed result throws BadResultAccess (support/result.h).
#pragma once

#include <string>
#include <utility>

#include "core/support/result.h"

namespace nautilus::codegen {

struct CodegenError {
  enum class Kind {
    NvrtcNotFound,   // libnvrtc could not be loaded, or lacks an entry point
    BadOption,       // an option NVRTC or the caller rejected (unknown arch, ...)
    Compilation,     // NVRTC compiled and failed: `log` has its diagnostics
    Rejected,        // it compiled, but ptxas says the kernel would be slow by construction
                     // (sm_90a: wgmma serialized, or registers spilled): an infeasible
                     // candidate, not a compiler bug; `log` has ptxas' report
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

template <class T>
using Result = nautilus::Result<T, CodegenError>;

}  // namespace nautilus::codegen
