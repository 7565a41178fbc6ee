// Register layouts of MA tile IR checked element by element: the mma fragment layouts against
// core/layout's PTX-derived atoms (and the ISA formulas written out here), warp placement,
// coverage of the blocked layout, slices and shuffle plans of reductions, and which conversions
// stay in registers.
#include "core/matile/layouts.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "core/layout/printer.h"

namespace nautilus::matile {
namespace {

using RowCol = std::pair<int64_t, int64_t>;
RowCol at(int64_t row, int64_t col) { return {row, col}; }

// (row, col) of thread t's slot v.
std::pair<int64_t, int64_t> element(const RegisterLayout& l, int64_t t, int64_t v) {
  const int64_t rows = layout::leaves(l.tv.tile)[0];
  const int64_t index = l.tv.index(t, v);
  return {index % rows, index / rows};
}

TEST(MmaLayouts, OneAtomEqualsThePtxFragments) {
  const RegisterLayout a = *mma_a_layout(16, 16, 1, 1);
  const RegisterLayout b = *mma_b_layout(16, 8, 1, 1);
  const RegisterLayout c = *mma_c_layout(16, 8, 1, 1);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(element(a, lane, i), at(g + 8 * ((i / 2) % 2), 2 * t + i % 2 + 8 * (i / 4)));
      EXPECT_EQ(a.tv.index(lane, i), layout::mma_m16n8k16_a().index(lane, i));
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(element(b, lane, i), at(2 * t + i % 2 + 8 * (i / 2), g));
      EXPECT_EQ(element(c, lane, i), at(g + 8 * (i / 2), 2 * t + i % 2));
      EXPECT_EQ(c.tv.index(lane, i), layout::mma_m16n8k16_c().index(lane, i));
    }
  }
}

TEST(MmaLayouts, TilesAndWarps) {
  // 64x32 accumulator over a 2x2 warp grid: warp (wm, wn) owns rows 32wm.., columns 16wn..;
  // slot 4*(mi + mt*ni) + i is atom (mi, ni)'s c_i.
  const RegisterLayout c = *mma_c_layout(64, 32, 2, 2);
  EXPECT_EQ(c.threads(), 128);
  EXPECT_EQ(c.slots(), 4 * 2 * 2);
  std::map<std::pair<int64_t, int64_t>, int> holders;
  for (int64_t t = 0; t < 128; ++t) {
    const int64_t warp = t / 32, wm = warp % 2, wn = warp / 2, lane = t % 32;
    for (int64_t v = 0; v < c.slots(); ++v) {
      const auto [row, col] = element(c, t, v);
      const int64_t i = v % 4, mi = (v / 4) % 2, ni = v / 8;
      EXPECT_EQ(row, 32 * wm + 16 * mi + lane / 4 + 8 * (i / 2));
      EXPECT_EQ(col, 16 * wn + 8 * ni + 2 * (lane % 4) + i % 2);
      holders[{row, col}]++;
    }
  }
  EXPECT_EQ(holders.size(), 64u * 32u);
  for (const auto& [where, count] : holders) EXPECT_EQ(count, 1);
  // A replicates over the warps along N, B over those along M.
  const RegisterLayout a = *mma_a_layout(64, 32, 2, 2);
  EXPECT_EQ(a.tv.index(0, 5), a.tv.index(64, 5));  // warps 0 and 2: wn differs
  const RegisterLayout b = *mma_b_layout(32, 32, 2, 2);
  EXPECT_EQ(b.tv.index(0, 3), b.tv.index(32, 3));  // warps 0 and 1: wm differs
  EXPECT_FALSE(mma_c_layout(40, 32, 2, 1).ok());
  EXPECT_EQ(mma_a_layout(16, 24, 1, 1).error().message,
            "mma A layout of [16, 24] over warps (1, 1): needs M a multiple of 16 * warps_m (or 1, 2, "
            "4, 8 rows on one warp) and K of 16");
}

TEST(MmaLayouts, InterleavedColumnsAreAPermutationThatBAndCShare) {
  // Every coordinate of small tiles: with interleave p, atom ni = r + p*q of warp wn takes tile
  // column 8*nt*wn + 8p*q + p*c + r for atom column c, in B (c = the lane's group) and in C (c =
  // 2t + i%2) alike, so the mma computes the same tile; each element is held once per replica.
  struct Case {
    int64_t m, k, n;
    int wm, wn, p;
  };
  for (const Case& x : {Case{16, 16, 16, 1, 1, 2}, Case{32, 32, 64, 2, 2, 4}, Case{16, 32, 128, 1, 2, 8},
                        Case{64, 16, 128, 2, 2, 2}, Case{1, 16, 64, 1, 4, 2}}) {
    SCOPED_TRACE(std::to_string(x.m) + "x" + std::to_string(x.n) + " p " + std::to_string(x.p));
    const RegisterLayout b = *mma_b_layout(x.k, x.n, x.wm, x.wn, x.p);
    const RegisterLayout c = *mma_c_layout(x.m, x.n, x.wm, x.wn, x.p);
    EXPECT_EQ(b.column_interleave, x.p);
    EXPECT_NE(b, *mma_b_layout(x.k, x.n, x.wm, x.wn));
    const int64_t nt = x.n / (8 * x.wn), kt = x.k / 16, mt = mma_m_atoms(x.m, x.wm);
    std::map<std::pair<int64_t, int64_t>, int> b_holders, c_holders;
    for (int64_t thread = 0; thread < 32 * x.wm * x.wn; ++thread) {
      const int64_t lane = thread % 32, wn = (thread / 32) / x.wm, g = lane / 4, t = lane % 4;
      const auto column = [&](int64_t ni, int64_t atom_column) {
        return 8 * nt * wn + 8 * x.p * (ni / x.p) + x.p * atom_column + ni % x.p;
      };
      for (int64_t ni = 0; ni < nt; ++ni) {
        for (int64_t ki = 0; ki < kt; ++ki) {
          for (int i = 0; i < 4; ++i) {
            const auto [row, col] = element(b, thread, 4 * (ki + kt * ni) + i);
            EXPECT_EQ(row, 16 * ki + 2 * t + i % 2 + 8 * (i / 2));
            EXPECT_EQ(col, column(ni, g));
            b_holders[{row, col}]++;
          }
        }
        for (int64_t mi = 0; mi < mt; ++mi) {
          for (int i = 0; i < 4; ++i) {
            const auto [row, col] = element(c, thread, 4 * (mi + mt * ni) + i);
            EXPECT_EQ(col, column(ni, 2 * t + i % 2));
            c_holders[{row, col}]++;
          }
        }
      }
    }
    EXPECT_EQ(b_holders.size(), static_cast<size_t>(x.k * x.n));
    for (const auto& [where, count] : b_holders) EXPECT_EQ(count, x.wm);
    EXPECT_EQ(c_holders.size(), static_cast<size_t>(x.m * x.n));
    // The grouped reads' order of the same elements: every thread holds the same ones, and its
    // slots p apart in the fragment are neighbours.
    const layout::TVLayout reads = *mma_b_row_reads(x.k, x.n, x.wm, x.wn, x.p);
    for (int64_t thread = 0; thread < 32 * x.wm * x.wn; ++thread) {
      std::vector<int64_t> held, read;
      for (int64_t v = 0; v < b.slots(); ++v) {
        held.push_back(b.tv.index(thread, v));
        read.push_back(reads.index(thread, v));
      }
      for (int64_t v = 0; v + 1 < b.slots(); v += x.p) EXPECT_EQ(read[v + 1], read[v] + x.k);
      std::sort(held.begin(), held.end());
      std::sort(read.begin(), read.end());
      EXPECT_EQ(held, read);
    }
  }
  EXPECT_EQ(mma_b_layout(16, 48, 1, 2, 2).error().message,
            "mma B layout of [16, 48] over warps (1, 2), columns interleaved by 2: the interleave must divide "
            "the 3 atoms of a warp");
}

TEST(MmaLayouts, InterleavedKStepsAreAPermutationThatAAndBShareAndTheirSlicesMoveNothing) {
  // Every coordinate of small tiles: with k interleave p, A's a_i and B's b_i of k step
  // ki = r + p*q at atom column (A) or row (B) 2t + i%2 + 8*(i/2 or i/4) sit at k = 16pq + 4pt +
  // 4r + v (v = i%2 + 2*(i/2 or i/4)): the same k for the same atom position in both, so the mma
  // sums the same products; a lane's k of p neighbouring steps are 4p neighbours. Each step is
  // an interleaved slice that only picks slots (register_move_error is empty).
  struct Case {
    int64_t m, k, n;
    int wm, wn, p;
  };
  for (const Case& x : {Case{1, 128, 64, 1, 4, 8}, Case{16, 64, 16, 1, 1, 4}, Case{8, 32, 32, 1, 2, 2},
                        Case{32, 256, 32, 2, 1, 8}, Case{4, 128, 128, 1, 4, 4}}) {
    SCOPED_TRACE(std::to_string(x.m) + "x" + std::to_string(x.k) + "x" + std::to_string(x.n) + " p " +
                 std::to_string(x.p));
    const RegisterLayout a = *mma_a_layout(x.m, x.k, x.wm, x.wn, x.p);
    const RegisterLayout b = *mma_b_layout(x.k, x.n, x.wm, x.wn, 1, x.p);
    EXPECT_EQ(a.k_interleave, x.p);
    EXPECT_EQ(b.k_interleave, x.p);
    const int64_t kt = x.k / 16, nt = x.n / (8 * x.wn), mt = mma_m_atoms(x.m, x.wm);
    const RegisterLayout standard_a = *mma_a_layout(x.m, x.k, x.wm, x.wn);
    const RegisterLayout standard_b = *mma_b_layout(x.k, x.n, x.wm, x.wn);
    std::map<std::pair<int64_t, int64_t>, int> b_holders;
    for (int64_t thread = 0; thread < 32 * x.wm * x.wn; ++thread) {
      const int64_t t = (thread % 32) % 4;
      for (int64_t ki = 0; ki < kt; ++ki) {
        const auto k_of = [&](int64_t value) { return 16 * x.p * (ki / x.p) + 4 * x.p * t + 4 * (ki % x.p) + value; };
        for (int64_t mi = 0; mi < mt; ++mi) {
          for (int i = 0; i < 8; ++i) {
            const int64_t slot = 8 * (mi + mt * ki) + i;
            const auto [row, col] = element(a, thread, slot);
            EXPECT_EQ(col, k_of(i % 2 + 2 * (i / 4)));
            EXPECT_EQ(col, interleaved_k(ki, element(standard_a, thread, slot).second - 16 * ki, x.p));
            EXPECT_EQ(row, element(standard_a, thread, slot).first);
          }
        }
        for (int64_t ni = 0; ni < nt; ++ni) {
          for (int i = 0; i < 4; ++i) {
            const int64_t slot = 4 * (ki + kt * ni) + i;
            const auto [row, col] = element(b, thread, slot);
            EXPECT_EQ(row, k_of(i % 2 + 2 * (i / 2)));
            EXPECT_EQ(col, element(standard_b, thread, slot).second);
            b_holders[{row, col}]++;
          }
        }
      }
    }
    EXPECT_EQ(b_holders.size(), static_cast<size_t>(x.k * x.n));
    for (const auto& [where, count] : b_holders) EXPECT_EQ(count, x.wm);
    // Each k step's slice into the step's standard fragment picks slots in every thread.
    const RegisterLayout a_step = *mma_a_layout(x.m, 16, x.wm, x.wn);
    const RegisterLayout b_step = *mma_b_layout(16, x.n, x.wm, x.wn);
    for (int64_t ki = 0; ki < kt; ++ki) {
      EXPECT_EQ(register_move_error(RegisterMove::InterleavedSlice, a, {x.m, x.k}, a_step, {x.m, 16},
                                    {0, 16 * ki, x.p}),
                std::nullopt);
      EXPECT_EQ(register_move_error(RegisterMove::InterleavedSlice, b, {x.k, x.n}, b_step, {16, x.n},
                                    {16 * ki, 0, x.p}),
                std::nullopt);
      // The plain window of the same step is not in the interleaved fragment's slots alone.
      if (x.p > 1) {
        EXPECT_NE(register_move_error(RegisterMove::ExtractSlice, b, {x.k, x.n}, b_step, {16, x.n}, {16 * ki, 0}),
                  std::nullopt);
      }
    }
  }
  EXPECT_EQ(mma_b_layout(48, 8, 1, 1, 1, 2).error().message,
            "mma B layout of [48, 8] over warps (1, 1), k interleaved by 2: the k interleave must divide the 3 k "
            "steps");
}

TEST(MmaLayouts, FragmentsOfFewerThanSixteenRowsRepeatTheAtomsRows) {
  // A decode step's 8-head group (or 4, 2, 1 rows) on one warp along M: the instruction's row
  // g + 8 (and every row past M) is row (g + 8) % M, by the PTX formulas with rows taken mod M.
  for (int64_t m : {1, 2, 4, 8}) {
    const RegisterLayout a = *mma_a_layout(m, 32, 1, 4);
    const RegisterLayout c = *mma_c_layout(m, 64, 1, 4);
    for (int64_t t = 0; t < 128; ++t) {
      const int64_t lane = t % 32, wn = t / 32;
      for (int64_t v = 0; v < a.slots(); ++v) {
        const int64_t i = v % 8, ki = v / 8;
        const auto [row, col] = element(a, t, v);
        EXPECT_EQ(row, (lane / 4 + 8 * ((i / 2) % 2)) % m) << "M " << m;
        EXPECT_EQ(col, 16 * ki + 2 * (lane % 4) + i % 2 + 8 * (i / 4)) << "M " << m;
      }
      for (int64_t v = 0; v < c.slots(); ++v) {
        const int64_t i = v % 4, ni = v / 4;
        const auto [row, col] = element(c, t, v);
        EXPECT_EQ(row, (lane / 4 + 8 * (i / 2)) % m) << "M " << m;
        EXPECT_EQ(col, 16 * wn + 8 * ni + 2 * (lane % 4) + i % 2) << "M " << m;
      }
    }
    // The row sums keep each row once: the repeating slot leaf is gone from the slice.
    const RegisterLayout rows = *slice_layout(c, {m, 64}, 1);
    EXPECT_EQ(rows.slots(), 1) << layout_text(rows);
  }
  EXPECT_FALSE(mma_a_layout(8, 32, 2, 2).ok()) << "short tiles run on one warp along M";
  EXPECT_FALSE(mma_c_layout(12, 32, 1, 4).ok());
}

TEST(MmaLayouts, SwappedProductsAccumulatorIsTheInstructionsDTransposed) {
  // The swapped product of M short rows: instruction j of warp w computes columns 16j + r
  // (r < 16, the instruction's rows: B's n8 atoms 2j and 2j + 1) of the warp's 16 * nt / 2
  // columns against A's rows as its 8 columns (column c is row c % M), so lane (g, t)'s c_i is
  // D[g + 8 (i / 2)][2t + i % 2] = element (row (2t + i % 2) % M, column 16j + g + 8 (i / 2)).
  for (int64_t m : {1, 2, 4, 8}) {
    const RegisterLayout c = *mma_swapped_c_layout(m, 128, 4);
    EXPECT_EQ(c.kind, LayoutKind::MmaCSwapped);
    EXPECT_EQ(c.slots(), 4 * 2);  // 32 columns a warp: two instructions of 16 rows
    std::map<std::pair<int64_t, int64_t>, int> holders;
    for (int64_t t = 0; t < 128; ++t) {
      const int64_t lane = t % 32, w = t / 32;
      for (int64_t v = 0; v < c.slots(); ++v) {
        const int64_t i = v % 4, j = v / 4;
        const auto [row, col] = element(c, t, v);
        EXPECT_EQ(row, (2 * (lane % 4) + i % 2) % m) << "M " << m;
        EXPECT_EQ(col, 32 * w + 16 * j + lane / 4 + 8 * (i / 2)) << "M " << m;
        holders[{row, col}]++;
      }
    }
    EXPECT_EQ(holders.size(), static_cast<size_t>(m * 128)) << "every element is held";
    // B's n8 atoms 2j and 2j + 1 hold, for lane group g, the columns the instruction's rows g
    // and g + 8 stand for.
    const RegisterLayout b = *mma_b_layout(16, 128, 1, 4);
    for (int64_t t = 0; t < 128; ++t) {
      for (int64_t v = 0; v < c.slots(); ++v) {
        const int64_t i = v % 4, j = v / 4;
        EXPECT_EQ(element(c, t, v).second, element(b, t, 4 * (2 * j + i / 2)).second);
      }
    }
    // A's a_0, a_1, a_4, a_5 are the instruction's B column g: row g % M.
    const RegisterLayout a = *mma_a_layout(m, 16, 1, 4);
    for (int64_t t = 0; t < 128; ++t) {
      for (int64_t i : {0, 1, 4, 5}) EXPECT_EQ(element(a, t, i).first, (t % 32 / 4) % m);
    }
  }
  EXPECT_EQ(layout_text(*mma_swapped_c_layout(1, 64, 2)),
            "mma_c_swapped warps(1,2) (((4,8),(1,2)),((2,2),2)):(((0,1),(0,32)),((0,8),16)) on (1,64)");
  EXPECT_FALSE(mma_swapped_c_layout(16, 64, 2).ok()) << "16 rows or more take the direct form";
  EXPECT_FALSE(mma_swapped_c_layout(1, 24, 1).ok()) << "whole pairs of n8 atoms";
}

TEST(BlockedLayout, CoversEveryElementEvenlyAtAnyShape) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{4, 16}, {7, 33}, {64, 64}, {5}, {}, {2, 3, 4}}) {
    const RegisterLayout l = blocked_layout(shape, 128);
    int64_t elements = 1;
    for (int64_t e : shape) elements *= e;
    std::vector<int> held(static_cast<size_t>(elements), 0);
    for (int64_t e : slot_elements(l)) held[static_cast<size_t>(e)]++;
    for (int count : held) EXPECT_EQ(count, held[0]) << layout_text(l);
    EXPECT_EQ(held[0] * elements, 128 * l.slots());
  }
  EXPECT_EQ(layout_text(blocked_layout({8, 16}, 128)),
            "blocked ((16,8,1),(1,1)):((8,1,0),(0,0)) on (8,16)");
}

// Runs of neighbours: each thread's consecutive slots are consecutive elements of the last
// axis, so one 16-byte access moves a run of 8 bf16; the runs cover the tile like single
// elements did, and a run never leaves threads of the CTA without elements.
TEST(BlockedLayout, RunsOfNeighboursAlongTheLastAxis) {
  const RegisterLayout l = blocked_layout({4, 1024}, 128, 8);
  for (int64_t t = 0; t < 128; ++t) {
    for (int64_t v = 0; v < l.slots(); ++v) {
      const std::vector<int64_t> at = coordinates_of(l.tv.index(t, v), {4, 1024});
      EXPECT_EQ(at[1], 8 * t + v % 8) << "thread " << t << " slot " << v;
      EXPECT_EQ(at[0], v / 8);
    }
  }
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{4, 16}, {64, 64}, {8, 64}, {2, 3, 8}, {1024}}) {
    const int64_t run = blocked_vector(shape, 128, 2);
    const RegisterLayout r = blocked_layout(shape, 128, run);
    int64_t elements = 1;
    for (int64_t e : shape) elements *= e;
    std::vector<int> held(static_cast<size_t>(elements), 0);
    for (int64_t e : slot_elements(r)) held[static_cast<size_t>(e)]++;
    for (int count : held) EXPECT_EQ(count, held[0]) << layout_text(r);
    EXPECT_EQ(held[0] * elements, 128 * r.slots());
    if (elements >= 128) {
      EXPECT_EQ(held[0], 1) << "no replication: " << layout_text(r);
    }
  }
  EXPECT_EQ(blocked_vector({4, 1024}, 128, 2), 8);   // 16 bytes of bf16
  EXPECT_EQ(blocked_vector({4, 1024}, 128, 4), 4);   // 16 bytes of f32
  EXPECT_EQ(blocked_vector({8, 64}, 128, 2), 4);     // 8 would leave 64 threads idle
  EXPECT_EQ(blocked_vector({7, 33}, 128, 2), 1);     // no run divides 33
  EXPECT_EQ(layout_text(blocked_layout({4, 1024}, 128, 8)),
            "blocked ((128,1,1),(8,1,4)):((32,0,0),(4,0,1)) on (4,1024)");
}

// A tile read transposed ([h, e] of a buffer whose last dimension is h): the runs and the
// threads go along axis 0, so that a thread's run is 8 neighbours in memory.
TEST(BlockedLayout, RunsAlongTheAxisContiguousInMemory) {
  const RegisterLayout l = blocked_layout({4096, 8}, 128, blocked_vector({4096, 8}, 128, 2, 0), 0);
  for (int64_t t = 0; t < 128; ++t) {
    for (int64_t v = 0; v < l.slots(); ++v) {
      const std::vector<int64_t> at = coordinates_of(l.tv.index(t, v), {4096, 8});
      EXPECT_EQ(at[0], 8 * t + v % 8 + 1024 * ((v / 8) % 4)) << "thread " << t << " slot " << v;
      EXPECT_EQ(at[1], v / 32);
    }
  }
  // Its rows reduced away, the layout is the row vector's own default one: no conversion.
  EXPECT_EQ(slot_elements(*slice_layout(l, {4096, 8}, 1)),
            slot_elements(blocked_layout({4096}, 128, blocked_vector({4096}, 128, 2))));
}

TEST(SliceAndReducePlan, RowsOfTheAccumulator) {
  const RegisterLayout c = *mma_c_layout(32, 16, 2, 1);
  const RegisterLayout rows = *slice_layout(c, {32, 16}, 1);
  // Thread t holds rows g and g + 8 of its warp's 16.
  for (int64_t t = 0; t < 64; ++t) {
    std::vector<int64_t> held;
    for (int64_t v = 0; v < rows.slots(); ++v) held.push_back(rows.tv.index(t, v));
    EXPECT_EQ(held, (std::vector<int64_t>{16 * (t / 32) + (t % 32) / 4, 16 * (t / 32) + (t % 32) / 4 + 8}));
  }
  const ReducePlan along_n = *reduce_plan(c, {32, 16}, 1);
  EXPECT_EQ(along_n.xor_masks, (std::vector<int>{1, 2}));
  EXPECT_FALSE(along_n.cross_warp);
  const ReducePlan along_m = *reduce_plan(c, {32, 16}, 0);
  EXPECT_EQ(along_m.xor_masks, (std::vector<int>{4, 8, 16}));
  EXPECT_TRUE(along_m.cross_warp);
  // 64 threads along a row: 32 lanes shuffle, 2 warps combine through shared memory.
  const ReducePlan wide = *reduce_plan(blocked_layout({2, 64}, 128), {2, 64}, 1);
  EXPECT_EQ(wide.xor_masks, (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_TRUE(wide.cross_warp);
}

TEST(SliceAndReducePlan, ReplicatingSlotsCannotBeReduced) {
  const RegisterLayout u = uniform_layout({4, 4}, 32);
  RegisterLayout repeated = u;
  repeated.tv.layout = layout::Layout(layout::tuple_of(32, layout::tuple_of(16, 2)),
                                      layout::tuple_of(0, layout::tuple_of(1, 0)));
  EXPECT_FALSE(slice_layout(repeated, {4, 4}, 1).ok());
}

TEST(RegisterGather, AccumulatorToAFragmentStaysInRegistersOnlyWithoutWarpsAlongN) {
  auto feasible = [](const RegisterLayout& from, const RegisterLayout& to, int64_t elements) {
    return register_gather(from, elements, slot_elements(to), to.slots()).ok();
  };
  EXPECT_TRUE(feasible(*mma_c_layout(32, 32, 2, 1), *mma_a_layout(32, 32, 2, 1), 32 * 32));
  EXPECT_FALSE(feasible(*mma_c_layout(32, 32, 1, 2), *mma_a_layout(32, 32, 1, 2), 32 * 32));
  EXPECT_FALSE(feasible(*mma_c_layout(32, 32, 2, 1), blocked_layout({32, 32}, 64), 32 * 32));
  EXPECT_FALSE(feasible(blocked_layout({32, 32}, 64), uniform_layout({32, 32}, 64), 32 * 32));
  EXPECT_TRUE(feasible(uniform_layout({32, 32}, 64), *mma_c_layout(32, 32, 2, 1), 32 * 32));
}

TEST(PermuteLayout, KeepsEverySlotInPlace) {
  const RegisterLayout c = *mma_c_layout(16, 32, 1, 1);
  const RegisterLayout t = *permute_layout(c, {16, 32}, {1, 0});
  for (int64_t thread = 0; thread < 32; ++thread) {
    for (int64_t v = 0; v < c.slots(); ++v) {
      const auto [row, col] = element(c, thread, v);
      const int64_t index = t.tv.index(thread, v);
      EXPECT_EQ(index % 32, col);
      EXPECT_EQ(index / 32, row);
    }
  }
}

}  // namespace
}  // namespace nautilus::matile
