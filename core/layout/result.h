// Results of layout operations that can fail.
//
// Layout algebra has preconditions (CuTe's divisibility conditions, injectivity, congruence of a
// shape and a stride). Layout synthesis explores candidate layouts and must learn *why* one is
// rejected, so every operation whose precondition can fail returns a Result<T> holding either
// the value or a LayoutError with a one-line reason (support/result.h); nothing in core/layout
// asserts or aborts on bad input.
#pragma once

#include <string>
#include <utility>

#include "core/support/result.h"

namespace nautilus::layout {

// Why a layout operation did not apply, e.g.
//   "composition: stride divisibility condition fails: stride 3 of 4:3 and mode 4:1 of (4,2):(1,8)"
struct LayoutError {
  std::string message;
  bool operator==(const LayoutError&) const = default;
};

template <class T>
using Result = nautilus::Result<T, LayoutError>;
using nautilus::BadResultAccess;

inline LayoutError layout_error(std::string message) { return LayoutError{std::move(message)}; }

}  // namespace nautilus::layout
