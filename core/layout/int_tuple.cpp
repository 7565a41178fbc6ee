#include "core/layout/int_tuple.h"

#include <algorithm>

namespace nautilus::layout {

const std::vector<IntTuple>& IntTuple::no_elements() {
  static const std::vector<IntTuple> none;
  return none;
}

int depth(const IntTuple& t) {
  if (t.is_leaf()) return 0;
  int deepest = 0;
  for (const IntTuple& e : t.elements()) deepest = std::max(deepest, depth(e));
  return deepest + 1;
}

int64_t product(const IntTuple& t) {
  if (t.is_leaf()) return t.value();
  int64_t p = 1;
  for (const IntTuple& e : t.elements()) p *= product(e);
  return p;
}

namespace {

void collect_leaves(const IntTuple& t, std::vector<int64_t>& out) {
  if (t.is_leaf()) {
    out.push_back(t.value());
    return;
  }
  for (const IntTuple& e : t.elements()) collect_leaves(e, out);
}

IntTuple unflatten_from(const std::vector<int64_t>& values, size_t& next, const IntTuple& profile) {
  if (profile.is_leaf()) return values[next++];
  std::vector<IntTuple> elements;
  elements.reserve(profile.elements().size());
  for (const IntTuple& e : profile.elements()) elements.push_back(unflatten_from(values, next, e));
  return IntTuple::tuple(std::move(elements));
}

}  // namespace

std::vector<int64_t> leaves(const IntTuple& t) {
  std::vector<int64_t> out;
  collect_leaves(t, out);
  return out;
}

IntTuple flatten(const IntTuple& t) {
  if (t.is_leaf()) return t;
  std::vector<IntTuple> flat;
  for (int64_t v : leaves(t)) flat.emplace_back(v);
  return IntTuple::tuple(std::move(flat));
}

IntTuple unflatten(const std::vector<int64_t>& values, const IntTuple& profile) {
  size_t next = 0;
  return unflatten_from(values, next, profile);
}

bool congruent(const IntTuple& a, const IntTuple& b) {
  if (a.is_leaf() || b.is_leaf()) return a.is_leaf() && b.is_leaf();
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    if (!congruent(a.mode(i), b.mode(i))) return false;
  }
  return true;
}

bool weakly_congruent(const IntTuple& a, const IntTuple& b) {
  if (a.is_leaf()) return true;
  if (b.is_leaf() || a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    if (!weakly_congruent(a.mode(i), b.mode(i))) return false;
  }
  return true;
}

IntTuple coordinate_of(int64_t index, const IntTuple& shape) {
  if (shape.is_leaf()) return index;
  std::vector<IntTuple> coordinate;
  const int r = shape.rank();
  for (int i = 0; i < r; ++i) {
    const IntTuple& mode = shape.mode(i);
    if (i + 1 == r) {
      coordinate.push_back(coordinate_of(index, mode));  // the last mode keeps the remainder
    } else {
      const int64_t extent = product(mode);
      coordinate.push_back(coordinate_of(index % extent, mode));
      index /= extent;
    }
  }
  return IntTuple::tuple(std::move(coordinate));
}

int64_t index_of(const IntTuple& coordinate, const IntTuple& shape) {
  if (coordinate.is_leaf()) return coordinate.value();
  int64_t index = 0;
  int64_t scale = 1;
  for (int i = 0; i < shape.rank(); ++i) {
    index += scale * index_of(coordinate.mode(i), shape.mode(i));
    scale *= product(shape.mode(i));
  }
  return index;
}

std::string to_string(const IntTuple& t) {
  if (t.is_leaf()) return std::to_string(t.value());
  std::string out = "(";
  for (size_t i = 0; i < t.elements().size(); ++i) {
    if (i) out += ",";
    out += to_string(t.elements()[i]);
  }
  return out + ")";
}

}  // namespace nautilus::layout
