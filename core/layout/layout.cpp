#include "core/layout/layout.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/layout/printer.h"

namespace nautilus::layout {

namespace {

// One leaf mode s:d of a flattened layout.
struct Mode {
  int64_t shape;
  int64_t stride;
};

bool all_positive(const IntTuple& shape) {
  if (shape.is_leaf()) return shape.value() >= 1;
  return std::all_of(shape.elements().begin(), shape.elements().end(), all_positive);
}

// Empty when `shape`:`stride` is a valid layout, otherwise why not.
std::string check_layout(const IntTuple& shape, const IntTuple& stride) {
  if (!congruent(shape, stride)) {
    return "stride " + to_string(stride) + " is not congruent to shape " + to_string(shape);
  }
  if (!all_positive(shape)) return "shape " + to_string(shape) + " has a mode of size < 1";
  return {};
}

void collect_modes(const IntTuple& shape, const IntTuple& stride, std::vector<Mode>& out) {
  if (shape.is_leaf()) {
    out.push_back({shape.value(), stride.value()});
    return;
  }
  for (int i = 0; i < shape.rank(); ++i) collect_modes(shape.mode(i), stride.mode(i), out);
}

// The leaf modes in order. (The operations below work on these flat lists and build a Layout
// only for their result: layout search calls them in its inner loops.)
std::vector<Mode> flat_modes(const Layout& a) {
  std::vector<Mode> modes;
  collect_modes(a.shape(), a.stride(), modes);
  return modes;
}

// coalesce() on a flat list of modes.
std::vector<Mode> coalesce_modes(const std::vector<Mode>& modes) {
  std::vector<Mode> merged;
  for (const Mode& m : modes) {
    if (m.shape == 1) continue;  // contributes coordinate 0 whatever its stride
    if (!merged.empty() && m.stride == merged.back().shape * merged.back().stride) {
      merged.back().shape *= m.shape;  // continues the previous mode's arithmetic progression
    } else {
      merged.push_back(m);
    }
  }
  if (merged.empty()) merged.push_back({1, 0});
  return merged;
}

// A depth <= 1 layout of the modes: a leaf layout for one mode, 1:0 for none.
Layout from_modes(const std::vector<Mode>& modes) {
  if (modes.empty()) return Layout();
  if (modes.size() == 1) return Layout(modes[0].shape, modes[0].stride);
  std::vector<IntTuple> shapes, strides;
  for (const Mode& m : modes) {
    shapes.emplace_back(m.shape);
    strides.emplace_back(m.stride);
  }
  return Layout(IntTuple::tuple(std::move(shapes)), IntTuple::tuple(std::move(strides)));
}

// Adds the offset of the 1-D index `index` inside shape:stride to `offset`. The index is split
// colexicographically over the leaves, consuming `index`; the last leaf of the whole layout
// (`last`) takes whatever remains, which is the extension past the domain. Splitting leaf by
// leaf equals splitting mode by mode, since the modes' extents are products of their leaves.
void add_offset_of_index(int64_t& index, const IntTuple& shape, const IntTuple& stride, bool last,
                         int64_t& offset) {
  if (shape.is_leaf()) {
    if (last) {
      offset += index * stride.value();
    } else {
      offset += (index % shape.value()) * stride.value();
      index /= shape.value();
    }
    return;
  }
  const int r = shape.rank();
  for (int i = 0; i < r; ++i) {
    add_offset_of_index(index, shape.mode(i), stride.mode(i), last && i + 1 == r, offset);
  }
}

int64_t offset_of_index(int64_t index, const IntTuple& shape, const IntTuple& stride) {
  int64_t offset = 0;
  add_offset_of_index(index, shape, stride, /*last=*/true, offset);
  return offset;
}

// Offset of a coordinate weakly congruent to the shape.
int64_t offset_of_coordinate(const IntTuple& coordinate, const IntTuple& shape,
                             const IntTuple& stride) {
  if (coordinate.is_leaf()) return offset_of_index(coordinate.value(), shape, stride);
  int64_t offset = 0;
  for (int i = 0; i < coordinate.rank(); ++i) {
    offset += offset_of_coordinate(coordinate.mode(i), shape.mode(i), stride.mode(i));
  }
  return offset;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string describe(const Mode& m) {
  return std::to_string(m.shape) + ":" + std::to_string(m.stride);
}

// ---- composition of a coalesced layout with one leaf s:d ----

// The modes of A o s:d, and for each mode i of A the largest "digit" (coordinate along mode i)
// that the offsets j*d, j < s, reach. Step 3 of composition sums these over B's leaves to check
// that adding the leaves' offsets never carries from one mode of A into the next.
struct LeafImage {
  std::vector<Mode> modes;
  std::vector<int64_t> digit_max;
};

Result<LeafImage> compose_leaf(const std::vector<Mode>& a, int64_t s, int64_t d) {
  LeafImage image;
  image.digit_max.assign(a.size(), 0);
  if (s == 1) return image;  // a single element at offset 0: 1:0
  if (d == 0) {
    image.modes.push_back({s, 0});
    return image;
  }
  if (d < 0) {
    return layout_error("the right operand has a negative stride in mode " + describe({s, d}) +
                        "; composition needs strides >= 0");
  }
  int64_t rest_stride = d;  // part of d not yet divided out of A's shape
  int64_t rest_shape = s;   // elements still to keep
  for (size_t i = 0; i < a.size(); ++i) {
    const Mode& m = a[i];
    if (i + 1 == a.size()) {  // the last mode is unbounded: it takes everything left
      image.modes.push_back({rest_shape, m.stride * rest_stride});
      return image;
    }
    // 1. Divide out the stride: a mode whose extent divides it is stepped over entirely.
    if (rest_stride % m.shape == 0) {
      rest_stride /= m.shape;
      continue;
    }
    int64_t available;  // elements of this mode reachable with step rest_stride
    if (m.shape % rest_stride == 0) {
      available = m.shape / rest_stride;
    } else if ((rest_shape - 1) * rest_stride < m.shape) {
      available = rest_shape;  // the whole leaf fits in this mode without wrapping
    } else {
      return layout_error("stride divisibility condition fails: the remaining stride " +
                          std::to_string(rest_stride) + " of leaf " + describe({s, d}) +
                          " neither divides nor is divided by mode " + describe(m) +
                          " of the coalesced left operand, and the leaf does not fit inside it");
    }
    // 2. Keep rest_shape elements.
    if (rest_shape <= available) {
      image.modes.push_back({rest_shape, m.stride * rest_stride});
      image.digit_max[i] = (rest_shape - 1) * rest_stride;
      return image;
    }
    if (rest_shape % available != 0) {
      return layout_error("shape divisibility condition fails: leaf " + describe({s, d}) +
                          " needs " + std::to_string(rest_shape) +
                          " more elements, not a multiple of the " + std::to_string(available) +
                          " it can take from mode " + describe(m) +
                          " of the coalesced left operand");
    }
    image.modes.push_back({available, m.stride * rest_stride});
    image.digit_max[i] = (available - 1) * rest_stride;
    rest_shape /= available;
    rest_stride = 1;
  }
  return image;  // unreachable: the last mode always returns
}

// Builds A o B leaf by leaf, keeping B's tree; accumulates each leaf's digit use.
Result<Layout> compose_tree(const std::vector<Mode>& a, const IntTuple& b_shape,
                            const IntTuple& b_stride, std::vector<int64_t>& digit_sum) {
  if (b_shape.is_leaf()) {
    Result<LeafImage> image = compose_leaf(a, b_shape.value(), b_stride.value());
    if (!image) return image.error();
    for (size_t i = 0; i < a.size(); ++i) digit_sum[i] += image->digit_max[i];
    return from_modes(coalesce_modes(image->modes));
  }
  std::vector<Layout> modes;
  for (int i = 0; i < b_shape.rank(); ++i) {
    Result<Layout> mode = compose_tree(a, b_shape.mode(i), b_stride.mode(i), digit_sum);
    if (!mode) return mode;
    modes.push_back(*mode);
  }
  return concatenate(modes);
}

std::vector<Layout> modes_of(const Layout& a) {
  std::vector<Layout> modes;
  for (int i = 0; i < a.rank(); ++i) modes.push_back(a.mode(i));
  return modes;
}

// Empty when tiler `b` fits layout `a`, otherwise why not.
std::string tiler_problem(const char* operation, const Layout& a, const Tiler& b) {
  if (b.empty()) return std::string(operation) + ": the tiler is empty";
  if (static_cast<int>(b.size()) > a.rank()) {
    return std::string(operation) + ": the tiler has " + std::to_string(b.size()) + " modes but " +
           to_string(a) + " has rank " + std::to_string(a.rank());
  }
  return {};
}

// The rank-sensitive products: (A_i, Rep_i) or (Rep_i, A_i) for every mode i.
Result<Layout> rank_product(const char* operation, const Layout& a, const Layout& b,
                            bool block_first) {
  const int r = std::max(a.rank(), b.rank());
  auto padded = [r](const Layout& l) {
    std::vector<Layout> modes = modes_of(l);
    modes.resize(static_cast<size_t>(r));  // new modes are 1:0
    return concatenate(modes);
  };
  const Layout pa = padded(a);
  Result<Layout> product = logical_product(pa, padded(b));
  if (!product) return layout_error(std::string(operation) + ": " + product.error().message);
  const Layout repetition = product->mode(1);
  std::vector<Layout> modes;
  for (int i = 0; i < r; ++i) {
    modes.push_back(block_first ? concatenate({pa.mode(i), repetition.mode(i)})
                                : concatenate({repetition.mode(i), pa.mode(i)}));
  }
  return concatenate(modes);
}

}  // namespace

// ---- Layout ----

Layout::Layout(IntTuple shape, IntTuple stride)
    : shape_(std::move(shape)), stride_(std::move(stride)) {
  const std::string problem = check_layout(shape_, stride_);
  if (!problem.empty()) throw InvalidLayout("invalid layout: " + problem);
  size_ = product(shape_);
}

int64_t Layout::cosize() const {
  int64_t last = 0;
  for (const Mode& m : flat_modes(*this)) last += (m.shape - 1) * std::max<int64_t>(m.stride, 0);
  return last + 1;
}

Layout Layout::mode(int i) const {
  if (i < 0 || i >= rank()) {
    throw std::out_of_range("mode " + std::to_string(i) + " of rank-" + std::to_string(rank()) +
                            " layout " + to_string(*this));
  }
  return Layout(shape_.mode(i), stride_.mode(i));
}

int64_t Layout::operator()(int64_t index) const { return offset_of_index(index, shape_, stride_); }

int64_t Layout::mode_offset(int i, int64_t index) const {
  if (i < 0 || i >= rank()) {
    throw std::out_of_range("mode " + std::to_string(i) + " of rank-" + std::to_string(rank()) +
                            " layout " + to_string(*this));
  }
  return offset_of_index(index, shape_.mode(i), stride_.mode(i));
}

Result<int64_t> Layout::evaluate(const IntTuple& coordinate) const {
  if (!weakly_congruent(coordinate, shape_)) {
    return layout_error("coordinate " + to_string(coordinate) + " does not fit shape " +
                        to_string(shape_));
  }
  return offset_of_coordinate(coordinate, shape_, stride_);
}

// ---- Construction ----

Result<Layout> make_layout(IntTuple shape, IntTuple stride) {
  const std::string problem = check_layout(shape, stride);
  if (!problem.empty()) return layout_error("invalid layout: " + problem);
  return Layout(std::move(shape), std::move(stride));
}

Layout make_layout_left(const IntTuple& shape) {
  std::vector<int64_t> strides;
  int64_t running = 1;
  for (int64_t extent : leaves(shape)) {
    strides.push_back(running);
    running *= extent;
  }
  return Layout(shape, unflatten(strides, shape));
}

Layout make_layout_right(const IntTuple& shape) {
  const std::vector<int64_t> extents = leaves(shape);
  std::vector<int64_t> strides(extents.size());
  int64_t running = 1;
  for (size_t i = extents.size(); i-- > 0;) {
    strides[i] = running;
    running *= extents[i];
  }
  return Layout(shape, unflatten(strides, shape));
}

Layout concatenate(const std::vector<Layout>& layouts) {
  std::vector<IntTuple> shapes, strides;
  for (const Layout& l : layouts) {
    shapes.push_back(l.shape());
    strides.push_back(l.stride());
  }
  return Layout(IntTuple::tuple(std::move(shapes)), IntTuple::tuple(std::move(strides)));
}

// ---- Simplification ----

Layout coalesce(const Layout& a) { return from_modes(coalesce_modes(flat_modes(a))); }

Layout coalesce(const Layout& a, const IntTuple& profile) {
  if (profile.is_leaf()) return coalesce(a);
  std::vector<Layout> modes = modes_of(a);
  const size_t n = std::min(modes.size(), profile.elements().size());
  for (size_t i = 0; i < n; ++i) modes[i] = coalesce(modes[i], profile.elements()[i]);
  return concatenate(modes);
}

Layout filter_zeros(const Layout& a) {
  std::vector<int64_t> shapes = leaves(a.shape());
  const std::vector<int64_t> strides = leaves(a.stride());
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (strides[i] == 0) shapes[i] = 1;
  }
  return Layout(unflatten(shapes, a.shape()), a.stride());
}

Layout filter(const Layout& a) { return coalesce(filter_zeros(a)); }

// ---- Composition ----

Result<Layout> composition(const Layout& a, const Layout& b) {
  // Error messages are built only on failure: layout search calls this in its inner loop.
  auto context = [&] { return "composition " + to_string(a) + " o " + to_string(b); };
  const std::vector<Mode> modes = coalesce_modes(flat_modes(a));
  std::vector<int64_t> digit_sum(modes.size(), 0);
  Result<Layout> result = compose_tree(modes, b.shape(), b.stride(), digit_sum);
  if (!result) return layout_error(context() + ": " + result.error().message);
  // 3. Offsets of different leaves of B are added; that addition must not carry from a bounded
  //    mode of A into the next one, or A(B(c)) differs from the sum of the leaves' images.
  for (size_t i = 0; i + 1 < modes.size(); ++i) {
    if (digit_sum[i] > modes[i].shape - 1) {
      return layout_error(context() + ": the modes of the right operand overlap inside mode " +
                          describe(modes[i]) +
                          " of the coalesced left operand (their offsets "
                          "carry into the next mode, so the composition does not distribute "
                          "over them; is the right operand injective?)");
    }
  }
  return result;
}

// Applies `operation` to mode i of `a` and layout i of the tiler, keeping a's other modes: the
// by-mode form shared by composition and logical_divide.
static Result<Layout> apply_by_mode(const char* name, const Layout& a, const Tiler& b,
                             Result<Layout> (*operation)(const Layout&, const Layout&)) {
  const std::string problem = tiler_problem(name, a, b);
  if (!problem.empty()) return layout_error(problem);
  std::vector<Layout> modes = modes_of(a);
  for (size_t i = 0; i < b.size(); ++i) {
    Result<Layout> mode = operation(modes[i], b[i]);
    if (!mode) return mode;
    modes[i] = *mode;
  }
  return concatenate(modes);
}

Result<Layout> composition(const Layout& a, const Tiler& b) {
  return apply_by_mode("composition", a, b, composition);
}

// ---- Complement and inverses ----

Result<Layout> complement(const Layout& a, int64_t cotarget) {
  auto context = [&] {
    return "complement of " + to_string(a) + " in " + std::to_string(cotarget);
  };
  if (cotarget < 1) return layout_error(context() + ": the cotarget must be >= 1");
  std::vector<Mode> modes;
  for (const Mode& m : flat_modes(a)) {
    if (m.stride == 0 || m.shape == 1) continue;  // filter: broadcast modes hold no new offsets
    if (m.stride < 0) return layout_error(context() + ": negative stride in mode " + describe(m));
    modes.push_back(m);
  }
  std::sort(modes.begin(), modes.end(), [](const Mode& x, const Mode& y) {
    return x.stride != y.stride ? x.stride < y.stride : x.shape < y.shape;
  });
  // Walk the modes by increasing stride; `covered` is the extent below the current mode. The
  // gap between it and the next stride becomes a mode of the complement.
  std::vector<Mode> result;
  int64_t covered = 1;
  for (const Mode& m : modes) {
    if (m.stride < covered) {
      return layout_error(context() + ": not injective: mode " + describe(m) +
                          " overlaps the modes of smaller stride, which span " +
                          std::to_string(covered));
    }
    if (m.stride % covered != 0) {
      return layout_error(context() + ": stride of mode " + describe(m) +
                          " is not a multiple of the extent " + std::to_string(covered) +
                          " of the modes below it");
    }
    result.push_back({m.stride / covered, covered});
    covered = m.stride * m.shape;
  }
  result.push_back({ceil_div(cotarget, covered), covered});
  return from_modes(coalesce_modes(result));
}

Result<Layout> complement(const Layout& a) { return complement(a, a.cosize()); }

Layout right_inverse(const Layout& a) {
  const std::vector<Mode> modes = coalesce_modes(flat_modes(a));
  std::vector<int64_t> index_stride(modes.size());  // stride of each mode in A's 1-D domain
  int64_t running = 1;
  for (size_t i = 0; i < modes.size(); ++i) {
    index_stride[i] = running;
    running *= modes[i].shape;
  }
  std::vector<size_t> order(modes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return modes[x].stride < modes[y].stride; });
  std::vector<Mode> result;
  int64_t covered = 1;  // A's image contains [0, covered) exactly once through `result`
  for (size_t i : order) {
    const Mode& m = modes[i];
    if (m.stride > covered) break;     // a hole: nothing later can continue [0, covered)
    if (m.stride < covered) continue;  // zero, negative, or a repeat of covered offsets
    result.push_back({m.shape, index_stride[i]});
    covered = m.shape * m.stride;
  }
  return from_modes(coalesce_modes(result));
}

Result<Layout> left_inverse(const Layout& a) {
  auto context = [&] { return "left_inverse of " + to_string(a); };
  const std::vector<Mode> modes = coalesce_modes(flat_modes(a));
  if (modes.size() == 1 && modes[0].shape == 1) return Layout();  // one element, offset 0
  for (const Mode& m : modes) {
    if (m.stride <= 0) {
      return layout_error(
          context() + ": mode " + describe(m) +
          (m.stride == 0 ? " has stride 0 (not injective)" : " has a negative stride"));
    }
  }
  std::vector<int64_t> index_stride(modes.size());
  int64_t running = 1;
  for (size_t i = 0; i < modes.size(); ++i) {
    index_stride[i] = running;
    running *= modes[i].shape;
  }
  std::vector<size_t> order(modes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return modes[x].stride < modes[y].stride; });
  // The result reads an offset in the mixed radix (d_0, d_1/d_0, ..., d_n/d_{n-1}, s_n) of the
  // sorted strides d_k; digit k+1 is the coordinate along sorted mode k, which must therefore
  // fit below the next stride without overlapping it.
  std::vector<Mode> result{{modes[order[0]].stride, 0}};
  for (size_t k = 0; k < order.size(); ++k) {
    const Mode& m = modes[order[k]];
    int64_t digit_extent = m.shape;
    if (k + 1 < order.size()) {
      const Mode& next = modes[order[k + 1]];
      if (next.stride < m.stride * m.shape) {
        return layout_error(context() + ": mode " + describe(next) + " interleaves with mode " +
                            describe(m) + (next.stride == m.stride ? " (not injective)" : ""));
      }
      if (next.stride % m.stride != 0) {
        return layout_error(context() + ": left inverse divisibility condition fails: stride " +
                            std::to_string(next.stride) + " is not a multiple of stride " +
                            std::to_string(m.stride));
      }
      digit_extent = next.stride / m.stride;
    }
    result.push_back({digit_extent, index_stride[order[k]]});
  }
  return from_modes(coalesce_modes(result));
}

// ---- Divide ----

Result<Layout> logical_divide(const Layout& a, const Layout& b) {
  auto context = [&] { return "logical_divide of " + to_string(a) + " by " + to_string(b); };
  Result<Layout> rest = complement(b, a.size());
  if (!rest) return layout_error(context() + ": " + rest.error().message);
  Result<Layout> divided = composition(a, concatenate({b, *rest}));
  if (!divided) return layout_error(context() + ": " + divided.error().message);
  return divided;
}

Result<Layout> logical_divide(const Layout& a, const Tiler& b) {
  return apply_by_mode("logical_divide", a, b, logical_divide);
}

namespace {

// Splits a by-mode logical_divide into its tiles and its rests (with A's untiled modes).
Result<std::pair<std::vector<Layout>, std::vector<Layout>>> divide_parts(const char* operation,
                                                                         const Layout& a,
                                                                         const Tiler& b) {
  Result<Layout> divided = logical_divide(a, b);
  if (!divided) return layout_error(std::string(operation) + ": " + divided.error().message);
  std::vector<Layout> tiles, rests;
  for (int i = 0; i < divided->rank(); ++i) {
    if (static_cast<size_t>(i) < b.size()) {
      tiles.push_back(divided->mode(i).mode(0));
      rests.push_back(divided->mode(i).mode(1));
    } else {
      rests.push_back(divided->mode(i));
    }
  }
  return std::make_pair(std::move(tiles), std::move(rests));
}

}  // namespace

Result<Layout> zipped_divide(const Layout& a, const Tiler& b) {
  auto parts = divide_parts("zipped_divide", a, b);
  if (!parts) return parts.error();
  return concatenate({concatenate(parts->first), concatenate(parts->second)});
}

Result<Layout> tiled_divide(const Layout& a, const Tiler& b) {
  auto parts = divide_parts("tiled_divide", a, b);
  if (!parts) return parts.error();
  std::vector<Layout> modes{concatenate(parts->first)};
  modes.insert(modes.end(), parts->second.begin(), parts->second.end());
  return concatenate(modes);
}

// ---- Product ----

Result<Layout> logical_product(const Layout& a, const Layout& b) {
  auto context = [&] { return "logical_product of " + to_string(a) + " and " + to_string(b); };
  Result<Layout> repetitions = complement(a, a.size() * b.cosize());
  if (!repetitions) return layout_error(context() + ": " + repetitions.error().message);
  Result<Layout> placed = composition(*repetitions, b);
  if (!placed) return layout_error(context() + ": " + placed.error().message);
  return concatenate({a, *placed});
}

Result<Layout> blocked_product(const Layout& a, const Layout& b) {
  return rank_product("blocked_product", a, b, /*block_first=*/true);
}

Result<Layout> raked_product(const Layout& a, const Layout& b) {
  return rank_product("raked_product", a, b, /*block_first=*/false);
}

}  // namespace nautilus::layout
