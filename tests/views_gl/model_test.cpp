// The pictures' data without a display: thread/value grids and bank grids of the attention
// example's MA tile IR (views/gl/layout_model.h), and every asset's pipeline timeline
// (core/cost/timeline.h, whose own tests are tests/cost/timeline_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/cost/timeline.h"
#include "core/layout/bank_conflicts.h"
#include "core/layout/tv_layout.h"
#include "core/matile/layouts.h"
#include "tests/common/spec_test_util.h"
#include "tests/views_gl/gl_test_util.h"
#include "views/gl/layout_model.h"

namespace nautilus::views::gl {
namespace {

using testing::attention_module;

const matile::Kernel& attention_kernel() {
  static const matile::Kernel empty;
  const matile::ModulePtr module = attention_module();
  return module && !module->kernels.empty() ? *module->kernels[0] : empty;
}

// The register value of the kernel named `name`, or null.
matile::Value value_named(const matile::Kernel& kernel, const std::string& name) {
  for (const TileChoice& choice : tile_choices(kernel)) {
    if (choice.value && choice.value->name == name) return choice.value;
  }
  return nullptr;
}

// The first register value whose layout is of `kind` and whose tile is 2-D.
matile::Value first_of_kind(const matile::Kernel& kernel, matile::LayoutKind kind) {
  for (const TileChoice& choice : tile_choices(kernel)) {
    if (choice.value && choice.value->layout.kind == kind && choice.value->type.shape.size() == 2) {
      return choice.value;
    }
  }
  return nullptr;
}

int alloc_named(const matile::Kernel& kernel, const std::string& name) {
  for (size_t i = 0; i < kernel.shared.size(); ++i) {
    if (kernel.shared[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// ---- Register tiles ------------------------------------------------------------------------

TEST(LayoutGridModel, EveryRegisterTileHasExactlyTheHoldersOfItsIndexFunction) {
  const matile::Kernel& kernel = attention_kernel();
  ASSERT_TRUE(kernel.body);
  int checked = 0;
  for (const TileChoice& choice : tile_choices(kernel)) {
    if (!choice.value) continue;
    const matile::Value& value = choice.value;
    const Result<LayoutGrid> grid = layout_grid(value->layout, value->type.shape);
    ASSERT_TRUE(grid) << value->name << ": " << grid.error().message;
    // Every (thread, slot) is listed at the element its index function names, and nowhere else.
    int64_t listed = 0;
    for (const auto& cell : grid->holders) {
      listed += static_cast<int64_t>(cell.size());
      EXPECT_TRUE(std::is_sorted(cell.begin(), cell.end(), [](const TVHolder& a, const TVHolder& b) {
        return a.thread != b.thread ? a.thread < b.thread : a.slot < b.slot;
      }));
    }
    EXPECT_EQ(listed, value->layout.threads() * value->layout.slots()) << value->name;
    for (int64_t t = 0; t < value->layout.threads(); ++t) {
      for (int64_t v = 0; v < value->layout.slots(); ++v) {
        const std::vector<int64_t> c =
            matile::coordinates_of(value->layout.tv.index(t, v), value->type.shape);
        const int64_t row = c.empty() ? 0 : c[0], col = c.size() == 2 ? c[1] : 0;
        const auto& holders = grid->at(row, col);
        ASSERT_NE(std::find(holders.begin(), holders.end(), TVHolder{t, v}), holders.end())
            << value->name << " T" << t << " V" << v;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

// The PTX ISA's m16n8k16 C fragment (c_i at row groupID + 8*(i/2), col 2*(lane%4) + i%2),
// repeated over a warps_m x warps_n grid of warps, each owning mt x nt atoms of 16x8 (the atoms
// of a warp are contiguous; slot 4*(mi + mt*ni) + i). Returns the first element whose holders
// differ, or "".
std::string mismatch_with_mma_c_formula(const LayoutGrid& grid, int warps_m, int warps_n) {
  const int64_t mt = grid.rows / (16 * warps_m), nt = grid.cols / (8 * warps_n);
  for (int64_t r = 0; r < grid.rows; ++r) {
    for (int64_t c = 0; c < grid.cols; ++c) {
      const int64_t wm = r / (16 * mt), mi = (r / 16) % mt;
      const int64_t wn = c / (8 * nt), ni = (c / 8) % nt;
      const int64_t lane = 4 * (r % 8) + (c % 8) / 2;
      const int64_t thread = 32 * (wm + warps_m * wn) + lane;
      const int64_t slot = 4 * (mi + mt * ni) + 2 * ((r % 16) / 8) + c % 2;
      const std::vector<TVHolder> expected = {{thread, slot}};
      if (grid.at(r, c) != expected) {
        return "(" + std::to_string(r) + ", " + std::to_string(c) + ") expected T" +
               std::to_string(thread) + " V" + std::to_string(slot);
      }
    }
  }
  return "";
}

TEST(LayoutGridModel, MmaAccumulatorMatchesThePtxFragmentFormula) {
  const matile::Kernel& kernel = attention_kernel();
  const matile::Value acc = first_of_kind(kernel, matile::LayoutKind::MmaC);
  ASSERT_TRUE(acc);
  const Result<LayoutGrid> grid = layout_grid(acc->layout, acc->type.shape);
  ASSERT_TRUE(grid) << grid.error().message;
  EXPECT_EQ(grid->max_replication(), 1);
  EXPECT_EQ(mismatch_with_mma_c_formula(*grid, acc->layout.warps_m, acc->layout.warps_n), "");
  // The first cells read like CuTe's picture of the C fragment.
  EXPECT_EQ(grid->at(0, 0), (std::vector<TVHolder>{{0, 0}}));
  EXPECT_EQ(grid->at(0, 1), (std::vector<TVHolder>{{0, 1}}));
  EXPECT_EQ(grid->at(0, 2), (std::vector<TVHolder>{{1, 0}}));
  EXPECT_EQ(grid->at(1, 0), (std::vector<TVHolder>{{4, 0}}));
  EXPECT_EQ(grid->at(8, 0), (std::vector<TVHolder>{{0, 2}}));
}

TEST(LayoutGridModel, AWrongLayoutIsCaughtByTheFormulaCheck) {
  // The same tile in the generic blocked layout: the check above must reject it.
  const matile::Value acc = first_of_kind(attention_kernel(), matile::LayoutKind::MmaC);
  ASSERT_TRUE(acc);
  const matile::RegisterLayout blocked =
      matile::blocked_layout(acc->type.shape, acc->layout.threads());
  const Result<LayoutGrid> grid = layout_grid(blocked, acc->type.shape);
  ASSERT_TRUE(grid) << grid.error().message;
  EXPECT_NE(mismatch_with_mma_c_formula(*grid, acc->layout.warps_m, acc->layout.warps_n), "");
}

TEST(LayoutGridModel, MmaBOperandIsReplicatedOverTheWarpsAlongM) {
  const matile::Kernel& kernel = attention_kernel();
  const matile::Value b = first_of_kind(kernel, matile::LayoutKind::MmaB);
  ASSERT_TRUE(b);
  const Result<LayoutGrid> grid = layout_grid(b->layout, b->type.shape);
  ASSERT_TRUE(grid) << grid.error().message;
  const int warps_m = b->layout.warps_m;
  EXPECT_EQ(grid->max_replication(), warps_m);
  // b_i at row 2*(lane%4) + i%2 + 8*(i/2), col lane/4: element (k, n) is held by lane
  // 4*(n%8) + (k%8)/2 of every warp along M.
  for (int64_t k = 0; k < grid->rows; ++k) {
    for (int64_t n = 0; n < grid->cols; ++n) {
      const auto& holders = grid->at(k, n);
      ASSERT_EQ(static_cast<int>(holders.size()), warps_m) << k << ", " << n;
      for (int w = 0; w < warps_m; ++w) {
        EXPECT_EQ(holders[static_cast<size_t>(w)].thread, 32 * w + 4 * (n % 8) + (k % 8) / 2);
      }
    }
  }
}

TEST(LayoutGridModel, RowStatisticsAreOneColumnHeldByAQuad) {
  const matile::Value row_max = value_named(attention_kernel(), "Mx");
  const matile::Value acc = first_of_kind(attention_kernel(), matile::LayoutKind::MmaC);
  ASSERT_TRUE(row_max && acc);
  ASSERT_EQ(acc->type.shape[0], row_max->type.shape[0]);
  const int64_t mt = acc->type.shape[0] / (16 * acc->layout.warps_m);
  ASSERT_EQ(row_max->type.shape.size(), 1u);
  const Result<LayoutGrid> grid = layout_grid(row_max->layout, row_max->type.shape);
  ASSERT_TRUE(grid) << grid.error().message;
  EXPECT_EQ(grid->cols, 1);
  EXPECT_EQ(grid->rows, row_max->type.shape[0]);
  // The four lanes of the quad that holds the row's accumulators.
  for (int64_t r = 0; r < grid->rows; ++r) {
    std::set<int64_t> threads;
    for (const TVHolder& h : grid->at(r, 0)) threads.insert(h.thread);
    const int64_t first = 32 * (r / (16 * mt)) + 4 * (r % 8);
    EXPECT_EQ(threads, (std::set<int64_t>{first, first + 1, first + 2, first + 3})) << r;
  }
}

TEST(LayoutGridModel, BadShapesAreReported) {
  const matile::Value acc = first_of_kind(attention_kernel(), matile::LayoutKind::MmaC);
  ASSERT_TRUE(acc);
  const Result<LayoutGrid> wrong = layout_grid(acc->layout, {64, 64});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("elements"), std::string::npos) << wrong.error().message;
  const Result<LayoutGrid> rank3 = layout_grid(acc->layout, {2, 64, 64});
  ASSERT_FALSE(rank3);
  EXPECT_NE(rank3.error().message.find("rank-3"), std::string::npos);
}

// ---- Shared tiles --------------------------------------------------------------------------

// Sum of layout::count_bank_conflicts over the pattern's instructions, from the byte addresses
// the grid computed: the grid and core's bank model must agree.
int64_t core_wavefronts(const BankGrid& grid, const SharedAccessPattern& pattern) {
  std::map<int, std::vector<int64_t>> addresses;  // instruction -> lane addresses in lane order
  for (const BankPhase& phase : grid.phases) {
    for (const PhaseLane& lane : phase.lanes) addresses[phase.instruction].push_back(lane.byte_address);
  }
  int64_t total = 0;
  for (const auto& [instruction, lanes] : addresses) {
    const auto counted = layout::count_bank_conflicts(lanes, pattern.access_bytes);
    EXPECT_TRUE(counted) << counted.error().message;
    if (counted) total += counted->wavefronts;
  }
  return total;
}

matile::SharedAlloc unswizzled(matile::SharedAlloc alloc) {
  alloc.layout.swizzle = layout::Swizzle{};
  return alloc;
}

TEST(BankGridModel, SwizzledLdmatrixReadsAreConflictFreeAndUnswizzledOnesAreNot) {
  const matile::Kernel& kernel = attention_kernel();
  int ldmatrix_patterns = 0;
  for (const char* name : {"Q_smem", "K_smem", "V_smem"}) {
    const int alloc = alloc_named(kernel, name);
    ASSERT_GE(alloc, 0) << name;
    const matile::SharedAlloc& shared = kernel.shared[static_cast<size_t>(alloc)];
    ASSERT_FALSE(shared.layout.swizzle.is_identity()) << name;
    for (const SharedAccessPattern& pattern : shared_access_patterns(kernel, alloc)) {
      if (pattern.instruction.rfind("ldmatrix", 0) != 0) continue;
      ++ldmatrix_patterns;
      const Result<BankGrid> swizzled = bank_grid(shared, pattern);
      ASSERT_TRUE(swizzled) << pattern.label << ": " << swizzled.error().message;
      EXPECT_EQ(swizzled->conflicts(), 0) << pattern.label;
      EXPECT_EQ(swizzled->conflicting_phases(), 0) << pattern.label;
      // Four phases (one 8x8 matrix each) per ldmatrix.x4.
      EXPECT_EQ(static_cast<size_t>(swizzled->ideal_wavefronts), 4 * pattern.instructions.size());
      EXPECT_EQ(core_wavefronts(*swizzled, pattern), swizzled->wavefronts) << pattern.label;

      // Without the swizzle the eight rows of a phase share four banks: 8 wavefronts each.
      const Result<BankGrid> plain = bank_grid(unswizzled(shared), pattern);
      ASSERT_TRUE(plain) << plain.error().message;
      EXPECT_EQ(plain->conflicting_phases(), static_cast<int64_t>(plain->phases.size())) << pattern.label;
      EXPECT_EQ(plain->wavefronts, 8 * plain->ideal_wavefronts) << pattern.label;
      EXPECT_EQ(core_wavefronts(*plain, pattern), plain->wavefronts) << pattern.label;
      const BankPhase& phase = plain->phases.front();
      EXPECT_EQ(phase.conflicting_banks.size(), 4u);  // one 16-byte chunk column = 4 banks
      EXPECT_EQ(phase.conflict_cells.size(), 64u);    // all 8x8 elements of the matrix
    }
  }
  EXPECT_GE(ldmatrix_patterns, 9);  // Q once; K and V four k steps each
}

TEST(BankGridModel, QTileTotalsMatchTheLoweringsSwizzleChoice) {
  // The lowering picks the swizzle by counting ldmatrix wavefronts of the whole tile read as
  // 16x16 blocks (core/matile/lower_shared.cpp); the Q read covers exactly those blocks.
  const matile::Kernel& kernel = attention_kernel();
  const int alloc = alloc_named(kernel, "Q_smem");
  ASSERT_GE(alloc, 0);
  const matile::SharedAlloc& q = kernel.shared[static_cast<size_t>(alloc)];
  const auto patterns = shared_access_patterns(kernel, alloc);
  const auto read = std::find_if(patterns.begin(), patterns.end(),
                                 [](const SharedAccessPattern& p) { return p.instruction == "ldmatrix.x4"; });
  ASSERT_NE(read, patterns.end());
  const auto blocks = layout::tile_tv_layout(layout::ldmatrix_x4_addresses(),
                                             layout::tuple_of(q.shape[0], q.shape[1]));
  ASSERT_TRUE(blocks);
  for (const matile::SharedAlloc& variant : {q, unswizzled(q)}) {
    const auto expected = layout::count_bank_conflicts(variant.layout, 2, *blocks, 8);
    ASSERT_TRUE(expected) << expected.error().message;
    const Result<BankGrid> grid = bank_grid(variant, *read);
    ASSERT_TRUE(grid) << grid.error().message;
    EXPECT_EQ(grid->wavefronts, expected->wavefronts);
    // Every element of Q is read exactly once.
    std::vector<int> reads(static_cast<size_t>(grid->rows * grid->cols), 0);
    for (const BankPhase& phase : grid->phases) {
      for (const PhaseLane& lane : phase.lanes) {
        for (int64_t cell : lane.cells) ++reads[static_cast<size_t>(cell)];
      }
    }
    EXPECT_TRUE(std::all_of(reads.begin(), reads.end(), [](int n) { return n == 1; }));
  }
}

TEST(BankGridModel, BanksFollowTheSwizzledAddress) {
  const matile::Kernel& kernel = attention_kernel();
  const int alloc = alloc_named(kernel, "K_smem");
  ASSERT_GE(alloc, 0);
  const matile::SharedAlloc& k = kernel.shared[static_cast<size_t>(alloc)];
  const auto patterns = shared_access_patterns(kernel, alloc);
  ASSERT_FALSE(patterns.empty());
  for (int stage = 0; stage < k.stages; ++stage) {
    const Result<BankGrid> grid = bank_grid(k, patterns.front(), stage);
    ASSERT_TRUE(grid) << grid.error().message;
    for (int64_t r = 0; r < grid->rows; ++r) {
      for (int64_t c = 0; c < grid->cols; ++c) {
        const int64_t offset = *k.layout.evaluate(layout::tuple_of(r, c));
        const int64_t byte = k.byte_offset + (stage * k.stage_elements + offset) * 2;
        EXPECT_EQ(grid->cells[static_cast<size_t>(r * grid->cols + c)].bank, (byte / 4) % 32);
      }
    }
    // Row 1's first chunk moved by the swizzle: (1, 0) is not in bank (64 * 2 / 4) % 32 == 0.
    EXPECT_NE(grid->cells[static_cast<size_t>(grid->cols)].bank, 0);
  }
}

TEST(BankGridModel, CopiesWriteWholeRowsWithoutConflicts) {
  const matile::Kernel& kernel = attention_kernel();
  int copies = 0;
  for (size_t alloc = 0; alloc < kernel.shared.size(); ++alloc) {
    for (const SharedAccessPattern& pattern : shared_access_patterns(kernel, static_cast<int>(alloc))) {
      if (pattern.instruction != "cp.async") continue;
      ++copies;
      EXPECT_TRUE(pattern.writes);
      EXPECT_EQ(pattern.access_bytes, 16);
      const Result<BankGrid> grid = bank_grid(kernel.shared[alloc], pattern);
      ASSERT_TRUE(grid) << pattern.label << ": " << grid.error().message;
      EXPECT_EQ(grid->conflicts(), 0) << pattern.label;
    }
  }
  EXPECT_GE(copies, 3);
}

TEST(BankGridModel, BadAccessesAreReported) {
  const matile::Kernel& kernel = attention_kernel();
  const int alloc = alloc_named(kernel, "Q_smem");
  ASSERT_GE(alloc, 0);
  const matile::SharedAlloc& q = kernel.shared[static_cast<size_t>(alloc)];
  SharedAccessPattern pattern = shared_access_patterns(kernel, alloc).front();
  EXPECT_FALSE(bank_grid(q, pattern, 5));  // no stage 5
  SharedAccessPattern odd = pattern;
  odd.access_bytes = 12;
  EXPECT_FALSE(bank_grid(q, odd));
  SharedAccessPattern outside = pattern;
  outside.instructions.front().lane_starts.front() = {q.shape[0], 0};
  const Result<BankGrid> grid = bank_grid(q, outside);
  ASSERT_FALSE(grid);
  EXPECT_NE(grid.error().message.find("outside"), std::string::npos) << grid.error().message;
  SharedAccessPattern misaligned = pattern;
  misaligned.instructions.front().lane_starts.front() = {0, 1};
  EXPECT_FALSE(bank_grid(q, misaligned));
}

TEST(TileChoices, SharedAllocationsFirstThenEveryRegisterValueOnce) {
  const matile::Kernel& kernel = attention_kernel();
  const auto choices = tile_choices(kernel);
  ASSERT_GT(choices.size(), kernel.shared.size());
  for (size_t i = 0; i < kernel.shared.size(); ++i) {
    EXPECT_EQ(choices[i].alloc, static_cast<int>(i));
    EXPECT_EQ(choices[i].label.rfind(kernel.shared[i].name, 0), 0u) << choices[i].label;
  }
  std::set<const matile::ValueNode*> seen;
  for (size_t i = kernel.shared.size(); i < choices.size(); ++i) {
    ASSERT_TRUE(choices[i].value);
    EXPECT_TRUE(seen.insert(choices[i].value.get()).second) << choices[i].label;
  }
  EXPECT_TRUE(value_named(kernel, "Mx_i"));  // loop block arguments are offered too
}

// ---- Every asset -----------------------------------------------------------------------------

// The panels must draw whatever the compiler produces: every register value of every asset's
// kernels has a grid, every modelled access pattern a bank grid, and every kernel a timeline or a
// reason.
class EveryAsset : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryAsset, HasGridsAndATimelineOrAReason) {
  const std::string asset = GetParam();
  const matile::ModulePtr module = testing::compile_to_matile(asset, nautilus::testing::small_sizes(asset));
  ASSERT_TRUE(module) << asset;
  int timelines = 0;
  for (const matile::KernelPtr& kernel : module->kernels) {
    for (const TileChoice& choice : tile_choices(*kernel)) {
      if (choice.value) {
        const auto grid = layout_grid(choice.value->layout, choice.value->type.shape);
        EXPECT_TRUE(grid) << asset << " " << choice.label << ": " << grid.error().message;
        continue;
      }
      for (const SharedAccessPattern& pattern : shared_access_patterns(*kernel, choice.alloc)) {
        const auto grid = bank_grid(kernel->shared[static_cast<size_t>(choice.alloc)], pattern);
        EXPECT_TRUE(grid) << asset << " " << pattern.label << ": " << grid.error().message;
      }
    }
    const cost::PipelineTimeline timeline = cost::timeline_from_kernel(*kernel);
    if (!timeline.error.empty()) {
      EXPECT_NE(timeline.error.find("no loop"), std::string::npos) << asset << ": " << timeline.error;
      continue;
    }
    ++timelines;
    EXPECT_FALSE(timeline.bars.empty()) << asset;
    for (const cost::TimelineBar& bar : timeline.bars) {
      EXPECT_LE(bar.start, bar.end) << asset << " " << bar.label;
      EXPECT_GE(bar.row, 0);
      EXPECT_LT(bar.row, static_cast<int>(timeline.rows.size()));
    }
  }
  if (asset.find("attention") != std::string::npos || asset.find("gemm") != std::string::npos) {
    EXPECT_GT(timelines, 0) << asset << ": its dot products run in a loop";
  }
}

INSTANTIATE_TEST_SUITE_P(Assets, EveryAsset, ::testing::ValuesIn(nautilus::testing::asset_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

// ---- Warp-specialized attention (sm_90a) ------------------------------------------------------

const TileChoice* choice_where(const std::vector<TileChoice>& choices, const std::string& statement,
                               const std::string& use) {
  for (const TileChoice& choice : choices) {
    if (choice.value && choice.statement == statement && choice.use == use) return &choice;
  }
  return nullptr;
}

// The wgmma fragments of a consumer role of 2 warpgroups: warpgroup g (role threads 128g..)
// holds rows 64g..64g+63, and within it the PTX m16n8k16 fragment thread formula holds per warp
// (C: thread 32w + 4(r%8) + (c%8)/2 for row r, column c; the A fragment the same over 16-row
// warps). Returns the first element held otherwise, or "".
std::string mismatch_with_warpgroup_rows(const LayoutGrid& grid, int64_t warps_m) {
  const int64_t rows_per_warp = grid.rows / warps_m;
  for (int64_t r = 0; r < grid.rows; ++r) {
    for (int64_t c = 0; c < grid.cols; ++c) {
      const auto& holders = grid.at(r, c);
      if (holders.size() != 1) return "(" + std::to_string(r) + ", " + std::to_string(c) + ") not held once";
      const int64_t warp = r / rows_per_warp;
      const int64_t thread = 32 * warp + 4 * (r % 8) + (c % 8) / 2;
      if (holders[0].thread != thread || holders[0].thread / 128 != r / 64) {
        return "(" + std::to_string(r) + ", " + std::to_string(c) + ") held by T" +
               std::to_string(holders[0].thread) + ", expected T" + std::to_string(thread);
      }
    }
  }
  return "";
}

// What a kernel engineer looks for in FlashAttention-3: S and O in the wgmma accumulator of the
// consumer warpgroups, P handed to the second GEMM from registers (the RS form), each labelled
// with its statement and role, in the role's own thread numbering (CTA threads 128..383).
TEST(TileChoices, WarpSpecializedAttentionShowsSPAndOAsWgmmaFragments) {
  const matile::ModulePtr module = testing::warp_specialized_attention_module();
  ASSERT_TRUE(module);
  ASSERT_EQ(module->arch, "sm_90a");
  const std::vector<TileChoice> choices = tile_choices(*module->kernels[0], testing::attention_statement_names());
  const TileChoice* s = choice_where(choices, "S", "wgmma accumulator");
  const TileChoice* o = choice_where(choices, "O", "wgmma accumulator");
  const TileChoice* p = nullptr;
  for (const TileChoice& choice : choices) {
    if (choice.value && choice.use == "wgmma A operand from registers (RS)") p = &choice;
  }
  ASSERT_TRUE(s && o && p);
  for (const TileChoice* choice : {s, o, p}) {
    SCOPED_TRACE(choice->label);
    EXPECT_EQ(choice->role, "consumers");
    EXPECT_EQ(choice->role_warpgroups, 2);
    EXPECT_EQ(choice->first_thread, 128);  // after the producer warpgroup
    EXPECT_NE(choice->label.find("role consumers"), std::string::npos);
    const Result<LayoutGrid> grid = layout_grid(choice->value->layout, choice->value->type.shape);
    ASSERT_TRUE(grid) << grid.error().message;
    EXPECT_EQ(grid->threads, 256);
    EXPECT_EQ(mismatch_with_warpgroup_rows(*grid, choice->value->layout.warps_m), "");
  }
  EXPECT_EQ(s->value->layout.kind, matile::LayoutKind::MmaC);
  EXPECT_EQ(s->value->type.shape, (std::vector<int64_t>{128, 128}));  // 128 queries x 128 keys
  EXPECT_EQ(o->value->type.shape, (std::vector<int64_t>{128, 64}));   // 128 queries x d 64
  EXPECT_EQ(p->value->layout.kind, matile::LayoutKind::MmaA);
  EXPECT_EQ(p->value->type.dtype, DType::BF16);
  EXPECT_NE(s->label.find("S, wgmma accumulator"), std::string::npos) << s->label;
  // Without warp specialization nothing is in a role.
  for (const TileChoice& choice : tile_choices(attention_kernel())) EXPECT_EQ(choice.role, "");
}

}  // namespace
}  // namespace nautilus::views::gl