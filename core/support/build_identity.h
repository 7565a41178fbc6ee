// The compiler's identity as the tuning database records it: the release and a hash of core/'s
// sources at build time (cmake/CompilerSourceHash.cmake), so that two builds that may generate
// different code for one schedule are two compilers.
#pragma once

#include <string>

namespace nautilus {

// "0.1.0 (compiler 3f2a9c0d1e4b)".
std::string compiler_build_identity();

}  // namespace nautilus
