// The enumerated families of small layouts that the property tests run over, and brute-force
// oracles (images, injectivity) computed by evaluating every coordinate.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "core/layout/layout.h"

namespace nautilus::layout::testing {

// Every flat shape of rank 1 to 3 with size <= 16, each with these strides: compact
// column-major, compact row-major, column-major with doubled strides (holes between
// elements), column-major with a hole between mode 0 and the rest, and column-major with a
// broadcast (stride-0) first mode. Then nested shapes ((a,b),c), (a,(b,c)), ((a,b),(c,d)) with
// compact, row-major and holed strides. Duplicates removed; order is deterministic.
const std::vector<Layout>& small_layouts();
// The members of small_layouts() with rank 2 (for the by-mode tilers and the rank-sensitive
// products).
const std::vector<Layout>& small_rank2_layouts();
// Rank-1 and rank-2 members with size <= 8 (the right operands of by-mode tilers).
const std::vector<Layout>& small_tilers();

// The offsets A(i) for 0 <= i < size(A), in order, computed without Layout::operator().
std::vector<int64_t> image(const Layout& a);
std::set<int64_t> image_set(const Layout& a);
bool is_injective(const Layout& a);

}  // namespace nautilus::layout::testing
