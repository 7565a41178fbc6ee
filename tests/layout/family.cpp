#include "tests/layout/family.h"

#include <algorithm>

namespace nautilus::layout::testing {

namespace {

constexpr int64_t kMaxSize = 16;

void flat_shapes(std::vector<int64_t>& prefix, int64_t size, int rank,
                 std::vector<std::vector<int64_t>>& out) {
  if (static_cast<int>(prefix.size()) == rank) {
    out.push_back(prefix);
    return;
  }
  for (int64_t s = 1; s * size <= kMaxSize; ++s) {
    prefix.push_back(s);
    flat_shapes(prefix, s * size, rank, out);
    prefix.pop_back();
  }
}

std::vector<int64_t> prefix_products(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides;
  int64_t running = 1;
  for (int64_t s : shape) {
    strides.push_back(running);
    running *= s;
  }
  return strides;
}

std::vector<int64_t> suffix_products(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= shape[i];
  }
  return strides;
}

// The stride variants of one flat shape, as lists of leaf strides.
std::vector<std::vector<int64_t>> stride_variants(const std::vector<int64_t>& shape) {
  std::vector<std::vector<int64_t>> variants;
  const std::vector<int64_t> left = prefix_products(shape);
  variants.push_back(left);
  variants.push_back(suffix_products(shape));
  std::vector<int64_t> doubled = left;
  for (int64_t& d : doubled) d *= 2;
  variants.push_back(doubled);
  std::vector<int64_t> holed = left;
  for (size_t i = 1; i < holed.size(); ++i) holed[i] *= 3;
  variants.push_back(holed);
  std::vector<int64_t> broadcast(shape.size(), 0);
  int64_t running = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    broadcast[i] = running;
    running *= shape[i];
  }
  variants.push_back(broadcast);
  return variants;
}

IntTuple leaves_tuple(const std::vector<int64_t>& values) {
  if (values.size() == 1) return values[0];
  std::vector<IntTuple> elements(values.begin(), values.end());
  return IntTuple::tuple(std::move(elements));
}

void add_unique(std::vector<Layout>& out, const Layout& l) {
  if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
}

std::vector<Layout> build_family() {
  std::vector<Layout> family;
  for (int rank = 1; rank <= 3; ++rank) {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<int64_t> prefix;
    flat_shapes(prefix, 1, rank, shapes);
    for (const auto& shape : shapes) {
      for (const auto& strides : stride_variants(shape)) {
        add_unique(family, Layout(leaves_tuple(shape), leaves_tuple(strides)));
      }
    }
  }
  // Nested trees over the flat shapes of size <= 16 with every extent >= 2.
  const std::vector<IntTuple> profiles = {tuple_of(tuple_of(0, 0), 0), tuple_of(0, tuple_of(0, 0)),
                                          tuple_of(tuple_of(0, 0), tuple_of(0, 0))};
  for (const IntTuple& profile : profiles) {
    const int n = static_cast<int>(leaves(profile).size());
    std::vector<std::vector<int64_t>> shapes;
    std::vector<int64_t> prefix;
    flat_shapes(prefix, 1, n, shapes);
    for (const auto& shape : shapes) {
      if (std::any_of(shape.begin(), shape.end(), [](int64_t s) { return s < 2; })) continue;
      std::vector<int64_t> holed = prefix_products(shape);
      holed.back() *= 2;
      for (const auto& strides : {prefix_products(shape), suffix_products(shape), holed}) {
        add_unique(family, Layout(unflatten(shape, profile), unflatten(strides, profile)));
      }
    }
  }
  return family;
}

}  // namespace

const std::vector<Layout>& small_layouts() {
  static const std::vector<Layout> family = build_family();
  return family;
}

const std::vector<Layout>& small_rank2_layouts() {
  static const std::vector<Layout> family = [] {
    std::vector<Layout> out;
    for (const Layout& l : small_layouts()) {
      if (l.rank() == 2) out.push_back(l);
    }
    return out;
  }();
  return family;
}

const std::vector<Layout>& small_tilers() {
  static const std::vector<Layout> family = [] {
    std::vector<Layout> out;
    for (const Layout& l : small_layouts()) {
      if (l.rank() <= 2 && l.size() <= 8) out.push_back(l);
    }
    return out;
  }();
  return family;
}

std::vector<int64_t> image(const Layout& a) {
  // An odometer over the flattened leaves, independent of Layout::operator() (which the tests
  // compare with it): the leftmost coordinate turns fastest.
  const std::vector<int64_t> shape = leaves(a.shape()), stride = leaves(a.stride());
  std::vector<int64_t> coordinate(shape.size(), 0);
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(a.size()));
  int64_t offset = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    offsets.push_back(offset);
    for (size_t k = 0; k < shape.size(); ++k) {
      offset += stride[k];
      if (++coordinate[k] < shape[k]) break;
      offset -= shape[k] * stride[k];
      coordinate[k] = 0;
    }
  }
  return offsets;
}

std::set<int64_t> image_set(const Layout& a) {
  const std::vector<int64_t> offsets = image(a);
  return {offsets.begin(), offsets.end()};
}

bool is_injective(const Layout& a) {
  std::vector<int64_t> offsets = image(a);
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end();
}

}  // namespace nautilus::layout::testing
