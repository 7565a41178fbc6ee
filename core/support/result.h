// A value or the error that says why there is none: what every fallible operation of core/
// returns (std::expected is C++23; this is its C++20 subset that the compiler uses).
//
// Layout algebra, layout synthesis and the code generator explore candidates and must learn why
// one is rejected, so they return Result<T, E> rather than asserting; each module has its own
// error type E (LayoutError, CodegenError), which has at least a one-line `message`. Reading
// value() of a failed result is a programming error: it throws BadResultAccess with that message
// (as std::expected::value throws), and never terminates the process silently.
//
//   Result<int, LayoutError> r = LayoutError{"stride 3 does not divide 4"};
//   if (!r) print(r.error().message);
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace nautilus {

class BadResultAccess : public std::logic_error {
 public:
  explicit BadResultAccess(const std::string& reason)
      : std::logic_error("value() of a failed result: " + reason) {}
};

template <class T, class E>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : state_(std::move(error)) {}  // NOLINT: implicit by design

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

  // The failure; a default E when ok().
  const E& error() const {
    static const E none{};
    return ok() ? none : std::get<1>(state_);
  }

 private:
  std::variant<T, E> state_;
};

}  // namespace nautilus
