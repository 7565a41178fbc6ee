// skip_masked: golden before/after on causal attention, equivalence with the unscheduled program
// at sizes the tiles do not divide, the trip count tilize derives from the condition, and every
// reason the decision refuses.
#include "core/sched/skip_masked.h"

#include <gtest/gtest.h>

#include "core/scalar/lower_spec.h"
#include "core/spec/sema.h"
#include "core/tilize/lower_scalar.h"
#include "core/vrtile/printer.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using testing::apply_decisions;
using testing::expect_same_outputs;
using testing::failure_reason;
using testing::lower_asset;

const std::vector<std::string> kCausalFlash = {
    "rolling_update(O_sum, n, tile=4)", "tile(O_sum_acc, m=8)", "compute_at(S, Mx, n_o)",
    "compute_at(S_sum, S, n_o)",        "reverse_compute_at(O, O_sum, m_o)",
    "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)"};

TEST(SkipMasked, CausalAttentionGolden) {
  auto causal = lower_asset("causal_attention", {"B=1", "H=2", "M=13", "N=13", "D=4"});
  scalar::ProgramPtr after;
  testing::expect_golden("sched/skip_masked_causal.txt",
                         testing::before_after(causal, kCausalFlash, {"skip_masked(S, n_o)"},
                                               &after));
  // rolling_update regroups the sums; the skipped iterations change no output (they leave the
  // scores of masked tiles unwritten).
  expect_same_outputs(causal, after, 1e-5, {1, 5, 11});
}

TEST(SkipMasked, KeysLongerThanQueries) {
  // More keys than queries: the last query tile still stops at its own diagonal.
  auto causal = lower_asset("causal_attention", {"B=1", "H=1", "M=9", "N=21", "D=2"});
  std::vector<std::string> decisions = kCausalFlash;
  decisions.push_back("skip_masked(S, n_o)");
  expect_same_outputs(causal, apply_decisions(causal.program, decisions), 1e-5);
}

TEST(SkipMasked, TilizeBoundsTheKeyTileLoop) {
  auto causal = lower_asset("causal_attention", {"B=1", "H=1", "M=16", "N=16", "D=4"});
  std::vector<std::string> decisions = kCausalFlash;
  decisions.push_back("skip_masked(S, n_o)");
  const scalar::ProgramPtr scheduled = apply_decisions(causal.program, decisions);
  const tilize::TilizeResult tiled = tilize::lower_to_vrtile(*scheduled);
  ASSERT_TRUE(tiled.module) << tiled.error;
  const std::string text = vrtile::print_module(*tiled.module);
  // 16 keys in tiles of 4, query tiles of 8 rows: tile m_o sees key tiles 0..2*m_o+1.
  EXPECT_NE(text.find("for n_o in 0..min(4, %n_o_trips)"), std::string::npos) << text;
  // The bound replaces the condition: no block inside tests it any more.
  EXPECT_EQ(text.find("n_o * 4 <= m_o * 8 + 7"), std::string::npos);
}

testing::LoweredAsset lower_text(const std::string& text, const std::vector<std::string>& sizes);
std::string masked_attention(const std::string& condition, const std::string& value);

// Attention under `mask` with kCausalFlash and skip_masked(S, n_o): checks that the scalar IR
// still computes the unscheduled outputs, and returns the tilized kernel's text.
std::string skipped_vrtile(const std::string& mask) {
  auto masked = lower_text(masked_attention(mask, "-inf"), {});
  std::vector<std::string> decisions = kCausalFlash;
  decisions.push_back("skip_masked(S, n_o)");
  const scalar::ProgramPtr scheduled = apply_decisions(masked.program, decisions);
  expect_same_outputs(masked, scheduled, 1e-5, {1, 5});
  const tilize::TilizeResult tiled = tilize::lower_to_vrtile(*scheduled);
  EXPECT_TRUE(tiled.module) << tiled.error;
  return tiled.module ? vrtile::print_module(*tiled.module) : std::string();
}

TEST(SkipMasked, AWindowsLowerEdgeStartsTheKeyTileLoopPastIt) {
  // Query m sees keys m - 5 < n <= m: a query tile's leading key tiles are masked entirely, the
  // first one included (which runs the inits: it keeps running in the scalar IR, as
  // `... or n_o == 0`), and tilize starts the loop past them since the inits are hoisted.
  for (const char* mask : {"n <= m and m - n < 5", "n >= m"}) {
    const std::string text = skipped_vrtile(mask);
    EXPECT_NE(text.find("%n_o_start = max"), std::string::npos) << mask << "\n" << text;
    EXPECT_NE(text.find("%n_o_at = add %n_o, %n_o_start"), std::string::npos) << text;
  }
}

TEST(SkipMasked, APrefixLmMaskEndsTheKeyTileLoopAtTheLaterOfItsTwoBounds) {
  // Query m sees keys n <= m, and every query sees the prefix n < 6: a key tile is kept when it
  // reaches the diagonal or the prefix, and the loop ends at the later of the two ends.
  const std::string text = skipped_vrtile("n <= m or n < 6");
  EXPECT_NE(text.find("= max %n_o_trips, %n_o_trips.1"), std::string::npos) << text;
}

TEST(SkipMasked, ADocumentMaskVisitsOnlyTheKeyTilesOfItsOwnDocument) {
  // Documents of 6 tokens: query m sees keys n of its own document up to itself. The key loop
  // starts at the tile holding the document's first key and ends at the diagonal.
  const std::string text = skipped_vrtile("m / 6 == n / 6 and n <= m");
  EXPECT_NE(text.find("%n_o_start = max"), std::string::npos) << text;
  EXPECT_NE(text.find("= sub %"), std::string::npos) << text;
  // A block equality with the loop's variable on both sides bounds nothing it can read.
  auto both_sides = lower_text(masked_attention("(m + n) / 6 == n / 6", "-inf"), {});
  EXPECT_NE(failure_reason(apply_decisions(both_sides.program, kCausalFlash), "skip_masked(S, n_o)")
                .find("on both sides"),
            std::string::npos);
}

testing::LoweredAsset lower_text(const std::string& text, const std::vector<std::string>& sizes) {
  testing::LoweredAsset asset;
  asset.file = std::make_shared<SourceFile>("masked.nt", text);
  std::vector<spec::SizeOverride> overrides;
  std::string error;
  for (const std::string& size : sizes) overrides.push_back(*spec::parse_size_override(size, &error));
  DiagnosticEngine diagnostics(asset.file);
  asset.spec = spec::load_spec(asset.file, overrides, diagnostics);
  EXPECT_TRUE(asset.spec) << diagnostics.render_all();
  if (asset.spec) asset.program = scalar::lower_spec(*asset.spec);
  return asset;
}

// Causal attention with another mask: `select(MASK_CONDITION, ..., MASK_VALUE)`.
std::string masked_attention(const std::string& condition, const std::string& value) {
  return "let B = 1, H = 1, M = 16, N = 16, D = 4\n"
         "input Q[B, H, M, D] : bf16\ninput K[B, H, N, D] : bf16\ninput V[B, H, N, D] : bf16\n"
         "S[b, h, m, n] = select(" + condition + ", sum(d) Q[b, h, m, d] * K[b, h, n, d] / "
         "sqrt(D), " + value + ")\n"
         "Mx[b, h, m]   = max(n) S[b, h, m, n]\n"
         "P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])\n"
         "L[b, h, m]    = sum(n) P[b, h, m, n]\n"
         "output O[b, h, m, d] : bf16 = sum(n) P[b, h, m, n] * V[b, h, n, d] / L[b, h, m]\n";
}

TEST(SkipMasked, FailureReasons) {
  auto causal = lower_asset("causal_attention", {"B=1", "H=2", "M=13", "N=13", "D=4"});
  const scalar::ProgramPtr flash = apply_decisions(causal.program, kCausalFlash);
  EXPECT_EQ(failure_reason(flash, "skip_masked(Mx, n_o)"),
            "block Mx does not store `select(condition, value, constant)`; there is no mask to "
            "skip");
  EXPECT_EQ(failure_reason(flash, "skip_masked(S, m_o)"),
            "loop m_o is bound to the grid; only serial loops skip iterations");
  EXPECT_EQ(failure_reason(flash, "skip_masked(S, q)"),
            "block S has no loop q; its loops are b, h, m_o, m_i, n_o, n");
  EXPECT_EQ(failure_reason(flash, "skip_masked(S, 3)"),
            "skip_masked(MASK, LOOP): LOOP is a name, got 3");

  // A masked score of 0 is not neutral: exp(0 - max) adds to the sum.
  auto zero_masked = lower_text(masked_attention("n <= m", "0.0"), {});
  EXPECT_EQ(failure_reason(apply_decisions(zero_masked.program, kCausalFlash),
                           "skip_masked(S, n_o)"),
            "block Mx would change Mx in an iteration where all of S is 0.0f (it would store "
            "max(Mx[b, h, m], 0.0f)), so such iterations cannot be skipped");


  // A mask that does not depend on the key loop.
  auto rows = lower_text(masked_attention("m < 5", "-inf"), {});
  EXPECT_EQ(failure_reason(apply_decisions(rows.program, kCausalFlash), "skip_masked(S, n_o)"),
            "the mask of block S does not depend on loop n_o; no iteration of it is entirely "
            "masked");
}

}  // namespace
}  // namespace nautilus::sched
