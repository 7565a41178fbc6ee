#include "core/support/build_identity.h"

#include "nautilus/compiler_source_hash.h"

namespace nautilus {

std::string compiler_build_identity() {
  return std::string(NAUTILUS_VERSION) + " (compiler " + NAUTILUS_COMPILER_SOURCE_HASH + ")";
}

}  // namespace nautilus
