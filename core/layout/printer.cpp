#include "core/layout/printer.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>
#include <vector>

namespace nautilus::layout {

std::string to_string(const Layout& layout) {
  return to_string(layout.shape()) + ":" + to_string(layout.stride());
}

std::string to_string(const Swizzle& swizzle) {
  return "Sw<" + std::to_string(swizzle.bits) + "," + std::to_string(swizzle.base) + "," +
         std::to_string(swizzle.shift) + ">";
}

std::string to_string(const ComposedLayout& layout) {
  return to_string(layout.swizzle) + " o " + to_string(layout.layout);
}

std::string to_string(const TVLayout& layout) {
  return to_string(layout.layout) + " on " + to_string(layout.tile);
}

// ---- Parsing ----

namespace {

// A recursive-descent reader over the whole text; every method returns false after recording
// the first error.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool int_tuple(IntTuple& out) {
    skip_space();
    if (peek() == '(') {
      ++pos_;
      std::vector<IntTuple> elements;
      skip_space();
      if (peek() == ')') {
        ++pos_;
        out = IntTuple::tuple({});
        return true;
      }
      while (true) {
        IntTuple element;
        if (!int_tuple(element)) return false;
        elements.push_back(std::move(element));
        skip_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        if (peek() == ')') {
          ++pos_;
          out = IntTuple::tuple(std::move(elements));
          return true;
        }
        return fail("expected ',' or ')'");
      }
    }
    int64_t value = 0;
    if (!integer(value)) return false;
    out = value;
    return true;
  }

  bool layout(Layout& out) {
    IntTuple shape, stride;
    if (!int_tuple(shape) || !expect(':') || !int_tuple(stride)) return false;
    Result<Layout> made = make_layout(std::move(shape), std::move(stride));
    if (!made) return fail(made.error().message);
    out = *made;
    return true;
  }

  // "Sw<B,M,S> o" if present.
  bool optional_swizzle(Swizzle& out, bool& present) {
    skip_space();
    present = text_.substr(pos_, 3) == "Sw<";
    if (!present) return true;
    pos_ += 3;
    int64_t b = 0, m = 0, s = 0;
    if (!integer(b) || !expect(',') || !integer(m) || !expect(',') || !integer(s) || !expect('>') ||
        !expect('o')) {
      return false;
    }
    constexpr int64_t kMax = std::numeric_limits<int>::max();
    if (std::max({b, m, s < 0 ? -s : s}) > kMax) return fail("swizzle parameter out of range");
    Result<Swizzle> made =
        Swizzle::make(static_cast<int>(b), static_cast<int>(m), static_cast<int>(s));
    if (!made) return fail(made.error().message);
    out = *made;
    return true;
  }

  bool finish() {
    skip_space();
    return pos_ == text_.size() || fail("unexpected text after the end");
  }

  LayoutError error() const { return error_; }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool expect(char c) {
    skip_space();
    if (peek() != c) return fail(std::string("expected '") + c + "'");
    ++pos_;
    return true;
  }
  bool integer(int64_t& out) {
    skip_space();
    if (peek() == '_') ++pos_;  // CuTe prints static integers as _4
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (!std::isdigit(static_cast<unsigned char>(peek()))) return fail("expected an integer");
    int64_t value = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        return fail("integer out of range");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    out = negative ? -value : value;
    return true;
  }
  bool fail(const std::string& what) {
    error_ = layout_error("column " + std::to_string(pos_ + 1) + ": " + what + " in '" +
                          std::string(text_) + "'");
    return false;
  }

  std::string_view text_;
  size_t pos_ = 0;
  LayoutError error_;
};

}  // namespace

Result<IntTuple> parse_int_tuple(std::string_view text) {
  Reader reader(text);
  IntTuple t;
  if (!reader.int_tuple(t) || !reader.finish()) return reader.error();
  return t;
}

Result<Layout> parse_layout(std::string_view text) {
  Reader reader(text);
  Layout l;
  if (!reader.layout(l) || !reader.finish()) return reader.error();
  return l;
}

Result<ComposedLayout> parse_composed_layout(std::string_view text) {
  Reader reader(text);
  Swizzle swizzle;
  bool present = false;
  Layout l;
  if (!reader.optional_swizzle(swizzle, present) || !reader.layout(l) || !reader.finish()) {
    return reader.error();
  }
  return ComposedLayout{swizzle, l};
}

// ---- Grids ----

namespace {

std::string pad_left(const std::string& s, size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

// A table titled `title` whose cells[r][c] are already formatted.
std::string table(const std::string& title, const std::vector<std::vector<std::string>>& cells) {
  const size_t rows = cells.size();
  const size_t cols = rows ? cells[0].size() : 0;
  size_t width = std::to_string(cols ? cols - 1 : 0).size();
  for (const auto& row : cells) {
    for (const std::string& cell : row) width = std::max(width, cell.size());
  }
  const size_t label = std::to_string(rows ? rows - 1 : 0).size();
  std::string out = title + "\n" + std::string(label, ' ') + " |";
  for (size_t c = 0; c < cols; ++c) out += " " + pad_left(std::to_string(c), width);
  out += "\n" + std::string(label + 1, '-') + "+" + std::string(cols * (width + 1), '-') + "\n";
  for (size_t r = 0; r < rows; ++r) {
    out += pad_left(std::to_string(r), label) + " |";
    for (const std::string& cell : cells[r]) out += " " + pad_left(cell, width);
    out += "\n";
  }
  return out;
}

template <class Offset>
Result<std::string> offset_grid(const std::string& title, const Layout& layout, Offset offset) {
  if (layout.rank() != 2) {
    return layout_error("a grid needs a rank-2 layout, not " + to_string(layout));
  }
  const int64_t rows = layout.mode(0).size();
  const int64_t cols = layout.mode(1).size();
  std::vector<std::vector<std::string>> cells(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) cells[r].push_back(std::to_string(offset(r + rows * c)));
  }
  return table(title, cells);
}

// owners[index] = every (thread, value) holding the element with that column-major index, in
// increasing thread, then value order.
std::vector<std::vector<std::pair<int64_t, int64_t>>> owners(const TVLayout& tv) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> result(
      static_cast<size_t>(product(tv.tile)));
  for (int64_t t = 0; t < tv.threads(); ++t) {
    for (int64_t v = 0; v < tv.values(); ++v) {
      const int64_t index = tv.index(t, v);
      if (index >= 0 && index < static_cast<int64_t>(result.size())) {
        result[static_cast<size_t>(index)].emplace_back(t, v);
      }
    }
  }
  return result;
}

}  // namespace

Result<std::string> render_grid(const Layout& layout) {
  return offset_grid(to_string(layout), layout, [&](int64_t i) { return layout(i); });
}

Result<std::string> render_grid(const ComposedLayout& layout) {
  return offset_grid(to_string(layout), layout.layout, [&](int64_t i) { return layout(i); });
}

Result<std::string> render_grid(const TVLayout& layout) {
  if (layout.tile.rank() != 2) {
    return layout_error("a grid needs a 2-D tile, not " + to_string(layout.tile));
  }
  const int64_t rows = product(layout.tile.mode(0));
  const int64_t cols = product(layout.tile.mode(1));
  const auto held = owners(layout);
  std::vector<std::vector<std::string>> cells(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const auto& who = held[static_cast<size_t>(r + rows * c)];
      cells[r].push_back(who.empty() ? "."
                                     : "T" + std::to_string(who[0].first) + "V" +
                                           std::to_string(who[0].second));
    }
  }
  return table(to_string(layout), cells);
}

// ---- JSON ----

nlohmann::ordered_json to_json(const IntTuple& tuple) {
  if (tuple.is_leaf()) return tuple.value();
  nlohmann::ordered_json elements = nlohmann::ordered_json::array();
  for (const IntTuple& e : tuple.elements()) elements.push_back(to_json(e));
  return elements;
}

nlohmann::ordered_json to_json(const Layout& layout) {
  nlohmann::ordered_json j;
  j["text"] = to_string(layout);
  j["shape"] = to_json(layout.shape());
  j["stride"] = to_json(layout.stride());
  j["size"] = layout.size();
  j["cosize"] = layout.cosize();
  return j;
}

nlohmann::ordered_json to_json(const Swizzle& swizzle) {
  nlohmann::ordered_json j;
  j["text"] = to_string(swizzle);
  j["bits"] = swizzle.bits;
  j["base"] = swizzle.base;
  j["shift"] = swizzle.shift;
  return j;
}

nlohmann::ordered_json to_json(const ComposedLayout& layout) {
  nlohmann::ordered_json j;
  j["text"] = to_string(layout);
  j["swizzle"] = to_json(layout.swizzle);
  j["layout"] = to_json(layout.layout);
  return j;
}

nlohmann::ordered_json to_json(const TVLayout& layout) {
  nlohmann::ordered_json j;
  j["text"] = to_string(layout);
  j["tile"] = to_json(layout.tile);
  j["threads"] = layout.threads();
  j["values"] = layout.values();
  j["layout"] = to_json(layout.layout);
  if (layout.tile.rank() == 2) {
    const int64_t rows = product(layout.tile.mode(0));
    const int64_t cols = product(layout.tile.mode(1));
    const auto held = owners(layout);
    nlohmann::ordered_json grid = nlohmann::ordered_json::array();
    for (int64_t r = 0; r < rows; ++r) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array();
      for (int64_t c = 0; c < cols; ++c) {
        nlohmann::ordered_json cell = nlohmann::ordered_json::array();
        for (const auto& [t, v] : held[static_cast<size_t>(r + rows * c)]) {
          cell.push_back({t, v});
        }
        row.push_back(std::move(cell));
      }
      grid.push_back(std::move(row));
    }
    j["grid"] = std::move(grid);
  }
  return j;
}

}  // namespace nautilus::layout
