// Results of layout operations that can fail.
//
// Layout algebra has preconditions (CuTe's divisibility conditions, injectivity, congruence of a
// shape and a stride). Layout synthesis explores candidate layouts and must learn *why* one is
// rejected, so every operation whose precondition can fail returns a Result<T> holding either
// the value or a LayoutError with a one-line reason; nothing in core/layout asserts or aborts on
// bad input. Reading value() of a failed result is a programming error and throws
// BadResultAccess (as std::expected::value does), it never terminates the process silently.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace nautilus::layout {

// Why a layout operation did not apply, e.g.
//   "composition: stride divisibility condition fails: stride 3 of 4:3 and mode 4:1 of (4,2):(1,8)"
struct LayoutError {
  std::string message;
  bool operator==(const LayoutError&) const = default;
};

class BadResultAccess : public std::logic_error {
 public:
  explicit BadResultAccess(const std::string& reason)
      : std::logic_error("value() of a failed layout result: " + reason) {}
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}            // NOLINT: implicit by design
  Result(LayoutError error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    if (!ok()) throw BadResultAccess(error().message);
    return std::get<0>(state_);
  }
  T&& value() && {
    if (!ok()) throw BadResultAccess(error().message);
    return std::get<0>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

  // The failure; an empty LayoutError when ok().
  const LayoutError& error() const {
    static const LayoutError none;
    return ok() ? none : std::get<1>(state_);
  }

 private:
  std::variant<T, LayoutError> state_;
};

inline LayoutError layout_error(std::string message) { return LayoutError{std::move(message)}; }

}  // namespace nautilus::layout
