// Thread-value layouts of mma.sync.m16n8k16, ldmatrix.x4 and the 16-byte row-major copy,
// checked against the PTX ISA's fragment formulas written out independently here, plus the
// coverage of every tile element by exactly one (thread, value).
#include "core/layout/tv_layout.h"

#include <numeric>

#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "core/layout/printer.h"

namespace nautilus::layout {
namespace {

using RowCol = std::pair<int64_t, int64_t>;

RowCol row_col(const TVLayout& tv, int64_t thread, int64_t value) {
  const IntTuple e = tv.element(thread, value);
  return {e.mode(0).value(), e.mode(1).value()};
}

// Every element of the tile is held by exactly one (thread, value).
void expect_covers_tile_once(const TVLayout& tv) {
  std::map<RowCol, int> holders;
  for (int64_t t = 0; t < tv.threads(); ++t) {
    for (int64_t v = 0; v < tv.values(); ++v) ++holders[row_col(tv, t, v)];
  }
  const int64_t rows = tv.tile.mode(0).value(), cols = tv.tile.mode(1).value();
  EXPECT_EQ(static_cast<int64_t>(holders.size()), rows * cols) << to_string(tv);
  for (const auto& [element, count] : holders) {
    EXPECT_EQ(count, 1) << to_string(tv);
    EXPECT_GE(element.first, 0);
    EXPECT_LT(element.first, rows);
    EXPECT_GE(element.second, 0);
    EXPECT_LT(element.second, cols);
  }
}

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type".
TEST(TVLayout, MmaM16N8K16A) {
  const TVLayout a = mma_m16n8k16_a();
  EXPECT_EQ(to_string(a), "((4,8),(2,2,2)):((32,1),(16,8,128)) on (16,16)");
  ASSERT_EQ(a.threads(), 32);
  ASSERT_EQ(a.values(), 8);
  for (int64_t lane = 0; lane < 32; ++lane) {
    const int64_t group = lane >> 2, in_group = lane % 4;
    for (int64_t i = 0; i < 8; ++i) {
      const int64_t row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
      const int64_t col = i < 4 ? in_group * 2 + (i & 1) : in_group * 2 + (i & 1) + 8;
      ASSERT_EQ(row_col(a, lane, i), RowCol(row, col)) << "lane " << lane << " a" << i;
    }
  }
  expect_covers_tile_once(a);
}

TEST(TVLayout, MmaM16N8K16B) {
  const TVLayout b = mma_m16n8k16_b();
  EXPECT_EQ(to_string(b), "((4,8),(2,2)):((2,16),(1,8)) on (16,8)");
  for (int64_t lane = 0; lane < 32; ++lane) {
    const int64_t group = lane >> 2, in_group = lane % 4;
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t row = i < 2 ? in_group * 2 + (i & 1) : in_group * 2 + (i & 1) + 8;  // k
      const int64_t col = group;                                                        // n
      ASSERT_EQ(row_col(b, lane, i), RowCol(row, col)) << "lane " << lane << " b" << i;
    }
  }
  expect_covers_tile_once(b);
}

TEST(TVLayout, MmaM16N8K16C) {
  const TVLayout c = mma_m16n8k16_c();
  EXPECT_EQ(to_string(c), "((4,8),(2,2)):((32,1),(16,8)) on (16,8)");
  for (int64_t lane = 0; lane < 32; ++lane) {
    const int64_t group = lane >> 2, in_group = lane % 4;
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t row = group + 8 * (i / 2);
      const int64_t col = in_group * 2 + (i % 2);
      ASSERT_EQ(row_col(c, lane, i), RowCol(row, col)) << "lane " << lane << " c" << i;
    }
  }
  expect_covers_tile_once(c);
}

// PTX ISA, ldmatrix: "each address corresponds to the start of a matrix row"; lanes 8j..8j+7
// address the rows of matrix j; lane l receives, for matrix j, the elements of row l/4 at
// columns 2*(l%4) and 2*(l%4)+1 in its j-th register.
TEST(TVLayout, LdmatrixX4) {
  const TVLayout addresses = ldmatrix_x4_addresses();
  const TVLayout fragment = ldmatrix_x4_fragment();
  // Matrix j sits at rows 8*(j%2), columns 8*(j/2) of the 16x16 tile.
  auto origin = [](int64_t j) { return RowCol(8 * (j % 2), 8 * (j / 2)); };
  ASSERT_EQ(addresses.threads(), 32);
  ASSERT_EQ(addresses.values(), 8);
  for (int64_t lane = 0; lane < 32; ++lane) {
    const int64_t j = lane / 8, row_in_matrix = lane % 8;
    for (int64_t e = 0; e < 8; ++e) {
      const RowCol expected(origin(j).first + row_in_matrix, origin(j).second + e);
      ASSERT_EQ(row_col(addresses, lane, e), expected) << "lane " << lane << " element " << e;
    }
  }
  ASSERT_EQ(fragment.values(), 8);
  for (int64_t lane = 0; lane < 32; ++lane) {
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t half = 0; half < 2; ++half) {
        const RowCol expected(origin(j).first + lane / 4, origin(j).second + 2 * (lane % 4) + half);
        ASSERT_EQ(row_col(fragment, lane, 2 * j + half), expected)
            << "lane " << lane << " reg " << j;
      }
    }
  }
  // What ldmatrix.x4 delivers is exactly mma's A fragment.
  EXPECT_EQ(fragment, mma_m16n8k16_a());
  expect_covers_tile_once(addresses);
  expect_covers_tile_once(fragment);
}

// Thread t's v-th value of a row-major 16-byte copy: vector k = v / vec, element e = v % vec;
// the k-th chunk assigned to t is the (t + threads*k)-th chunk of the tile in row-major order.
RowCol copy_formula(int64_t t, int64_t v, int64_t cols, int64_t vec, int64_t threads) {
  const int64_t chunk = t + threads * (v / vec);
  const int64_t chunks_per_row = cols / vec;
  return {chunk / chunks_per_row, (chunk % chunks_per_row) * vec + v % vec};
}

TEST(TVLayout, RowMajorCopy16B) {
  EXPECT_EQ(to_string(copy_row_major_16b(64, 64, 2, 128).value()),
            "((8,16),(8,4)):((512,1),(64,16)) on (64,64)");
  struct Case {
    int64_t rows, cols;
    int element_bytes;
    int64_t threads;
  };
  for (const Case& c :
       {Case{64, 64, 2, 128}, Case{128, 64, 2, 128}, Case{16, 256, 2, 32}, Case{8, 1024, 2, 32},
        Case{32, 32, 4, 64}, Case{16, 128, 1, 32}, Case{4, 8, 16, 32}, Case{64, 8, 2, 64}}) {
    const Result<TVLayout> tv = copy_row_major_16b(c.rows, c.cols, c.element_bytes, c.threads);
    ASSERT_TRUE(tv.ok()) << tv.error().message;
    const int64_t vec = 16 / c.element_bytes;
    ASSERT_EQ(tv->threads(), c.threads);
    ASSERT_EQ(tv->threads() * tv->values(), c.rows * c.cols);
    for (int64_t t = 0; t < c.threads; ++t) {
      for (int64_t v = 0; v < tv->values(); ++v) {
        ASSERT_EQ(row_col(*tv, t, v), copy_formula(t, v, c.cols, vec, c.threads))
            << to_string(*tv) << " t" << t << " v" << v;
      }
    }
    expect_covers_tile_once(*tv);
  }
  EXPECT_FALSE(copy_row_major_16b(64, 60, 2, 128).ok());  // rows are not whole chunks
  EXPECT_FALSE(copy_row_major_16b(64, 64, 3, 128).ok());
  EXPECT_FALSE(copy_row_major_16b(64, 64, 2, 96).ok());  // 8 chunks per row, 96 threads
  EXPECT_FALSE(copy_row_major_16b(4, 64, 2, 128).ok());  // 16 rows per step, 4 rows
  EXPECT_FALSE(copy_row_major_16b(6, 640, 2, 64).ok());  // 80 chunks per row: 4 rows per step
}

// Chunks per row and threads that do not divide each other: c = gcd(chunks, threads) threads
// along a row's chunks, the others along rows, every thread busy (an 80-wide f16 tile once fell
// back to 2 copying threads).
TEST(TVLayout, RowMajorCopy16BSharesRowsWhenChunksAndThreadsDoNotDivide) {
  EXPECT_EQ(to_string(copy_row_major_16b(64, 80, 2, 128).value()),
            "((2,64),(8,5)):((512,1),(64,1024)) on (64,80)");
  struct Case {
    int64_t rows, cols;
    int element_bytes;
    int64_t threads;
  };
  for (const Case& c : {Case{64, 80, 2, 128}, Case{128, 96, 2, 128}, Case{8, 640, 2, 64},
                        Case{64, 40, 4, 128}, Case{96, 24, 2, 96}}) {
    const Result<TVLayout> tv = copy_row_major_16b(c.rows, c.cols, c.element_bytes, c.threads);
    ASSERT_TRUE(tv.ok()) << tv.error().message;
    const int64_t vec = 16 / c.element_bytes, chunks = c.cols / vec;
    const int64_t along_row = std::gcd(chunks, c.threads), along_columns = c.threads / along_row;
    ASSERT_EQ(tv->threads(), c.threads);
    for (int64_t t = 0; t < c.threads; ++t) {
      for (int64_t v = 0; v < tv->values(); ++v) {
        const int64_t j = (v / vec) % (chunks / along_row), k = v / (vec * (chunks / along_row));
        const RowCol expected{t / along_row + k * along_columns,
                              (t % along_row + j * along_row) * vec + v % vec};
        ASSERT_EQ(row_col(*tv, t, v), expected) << to_string(*tv) << " t" << t << " v" << v;
      }
    }
    expect_covers_tile_once(*tv);
  }
}

TEST(TVLayout, TileTVLayout) {
  const Result<TVLayout> tiled = tile_tv_layout(mma_m16n8k16_c(), tuple_of(32, 16));
  ASSERT_TRUE(tiled.ok()) << tiled.error().message;
  EXPECT_EQ(to_string(*tiled), "((4,8),((2,2),(2,2))):((64,1),((32,8),(16,256))) on (32,16)");
  const TVLayout atom = mma_m16n8k16_c();
  for (int64_t t = 0; t < 32; ++t) {
    for (int64_t v = 0; v < atom.values(); ++v) {
      for (int64_t bi = 0; bi < 2; ++bi) {
        for (int64_t bj = 0; bj < 2; ++bj) {
          const RowCol in_atom = row_col(atom, t, v);
          ASSERT_EQ(row_col(*tiled, t, v + atom.values() * (bi + 2 * bj)),
                    RowCol(in_atom.first + 16 * bi, in_atom.second + 8 * bj));
        }
      }
    }
  }
  expect_covers_tile_once(*tiled);
  EXPECT_FALSE(tile_tv_layout(atom, tuple_of(24, 16)).ok());
  EXPECT_FALSE(tile_tv_layout(atom, tuple_of(32, 16, 2)).ok());
}

TEST(TVLayout, CheckedConstruction) {
  EXPECT_TRUE(make_tv_layout(parse_layout("(32,4):(4,1)").value(), tuple_of(8, 16)).ok());
  EXPECT_FALSE(make_tv_layout(parse_layout("32:1").value(), tuple_of(8, 4)).ok());  // rank 1
  EXPECT_FALSE(
      make_tv_layout(parse_layout("(32,4):(4,1)").value(), tuple_of(8, 8)).ok());  // outside
  EXPECT_FALSE(make_tv_layout(parse_layout("(32,4):(-4,1)").value(), tuple_of(8, 16)).ok());
  EXPECT_FALSE(make_tv_layout(parse_layout("(32,4):(4,1)").value(), tuple_of(0, 16)).ok());
}

}  // namespace
}  // namespace nautilus::layout
