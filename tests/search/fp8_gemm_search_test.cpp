// FP8 GEMMs in the search on the H100 model: the K-major asset (fp8_gemm_nt, torch._scaled_mm's
// layout) gets the warp-specialized form on wgmma's 8-bit instruction from the search alone (no
// pin, nothing keyed on the asset: the lowering's rule is on dtypes and major-ness, and the cost
// model rates the 8-bit form at twice the 16-bit wgmma rate); the N-major asset (fp8_gemm) is
// refused that form and keeps mma.sync on widened operands. Found schedules then run in the MA
// interpreter at ragged sizes against the float64 reference.
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/codegen/emit_cuda.h"
#include "core/driver/evaluate.h"
#include "core/matile/ir.h"
#include "core/search/candidates.h"
#include "core/search/program_facts.h"
#include "tests/common/matile_ops.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

std::string text_of(const sched::Schedule& schedule) {
  std::string text;
  for (const sched::Decision& d : schedule.decisions) text += sched::print_decision(d) + "\n";
  return text;
}

bool has_decision(const sched::Schedule& schedule, const std::string& kind) {
  for (const sched::Decision& d : schedule.decisions) {
    if (d.kind == kind) return true;
  }
  return false;
}

// The instruction of the first wgmma of the module's first kernel, "" when it has none.
std::string wgmma_instruction(const matile::Module& module) {
  const matile::Kernel& kernel = *module.kernels.at(0);
  const matile::Op* wgmma = testing::first_op(*kernel.body, [](const matile::Op& op) {
    return op.kind == matile::OpKind::Wgmma;
  });
  return wgmma ? matile::instruction_name(*wgmma, &kernel) : "";
}

TEST(Fp8GemmSearch, TheKMajorAssetGetsEightBitWgmmaByItself) {
  const search::SearchInput input = testing::asset_input("fp8_gemm_nt", {"M=2048", "N=2048", "K=2048"});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string schedule = text_of(result.schedule);
  EXPECT_TRUE(has_decision(result.schedule, "warp_spec")) << schedule;
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  EXPECT_NE(wgmma_instruction(*compilation.ma_module).find("k32.f32.e4m3.e4m3"), std::string::npos)
      << wgmma_instruction(*compilation.ma_module) << "\n" << schedule;
  ASSERT_TRUE(result.estimate);

  // The same math in bf16 (the bf16 GEMM asset, its B stored [K, N]) searched alike: the fp8
  // kernel's estimate is well under it, as the tensor cores run the 8-bit form twice as fast.
  const search::SearchResult bf16 =
      testing::run(testing::asset_input("gemm", {"M=2048", "N=2048", "K=2048"}));
  ASSERT_TRUE(bf16.ok && bf16.estimate) << bf16.error;
  EXPECT_LT(result.estimate->microseconds, 0.75 * bf16.estimate->microseconds)
      << schedule << text_of(bf16.schedule);

  // The found schedule at sizes that are no tile multiples (rows of A and B 16-byte aligned).
  const search::SearchInput small = testing::asset_input("fp8_gemm_nt", {"M=136", "N=264", "K=208"});
  const driver::Compilation small_compilation = testing::compile(small, result.schedule);
  ASSERT_TRUE(small_compilation.ma_module) << small_compilation.schedule_error << "\n" << schedule;
  EXPECT_NE(wgmma_instruction(*small_compilation.ma_module).find("k32"), std::string::npos);
  testing::expect_stage_matches_reference(small_compilation, driver::Stage::MATile, 2, "searched fp8_gemm_nt ");
}

TEST(Fp8GemmSearch, TheNMajorAssetKeepsMmaSyncOnWidenedOperands) {
  const search::SearchInput input = testing::asset_input("fp8_gemm", {"M=1024", "N=1024", "K=1024"});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const matile::Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(testing::count_kind(kernel, matile::OpKind::Wgmma), 0) << text_of(result.schedule);
  EXPECT_GT(testing::count_kind(kernel, matile::OpKind::Mma), 0) << text_of(result.schedule);
}

TEST(Fp8GemmSearch, TheNMajorAssetAtItsOwnSizesGetsASchedulesTheEmitterTakes) {
  // At 4096³ the model rated the untiled-k states (an fp8 B tile of 4096 x 64 in registers, 8 KB
  // per thread) above every k tile; the emitter refuses them, so `nautilus schedule` handed out a
  // schedule that did not compile. Once tiled, such a state leaves the beam.
  const search::SearchInput input = testing::asset_input("fp8_gemm", {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  for (const matile::KernelPtr& kernel : compilation.ma_module->kernels) {
    const std::optional<std::string> problem = codegen::register_tile_past_the_register_file(*kernel);
    EXPECT_FALSE(problem) << *problem << "\n" << text_of(result.schedule);
  }
  bool k_tiled = false;
  for (const sched::Decision& d : result.schedule.decisions) {
    if (d.kind == "tile" && d.target == "C_sum") k_tiled |= sched::print_decision(d).find("k=") != std::string::npos;
  }
  EXPECT_TRUE(k_tiled) << text_of(result.schedule);
}

// The launch phase offers each launch of a matrix product of an 8-bit input also with its
// shared reads grouped (launch's reads=grouped), so the model prices both forms per kernel; a
// 16-bit GEMM, whose operands take ldmatrix, is not offered them.
TEST(Fp8GemmSearch, TheLaunchPhaseOffersGroupedReadsForAProductOfAnEightBitInputOnly) {
  auto launches = [](const std::string& asset, const std::vector<std::string>& sizes,
                     const std::vector<std::string>& decisions) {
    const search::SearchInput input = testing::asset_input(asset, sizes);
    sched::Schedule schedule;
    for (const std::string& text : decisions) {
      sched::DecisionParseError error;
      schedule.decisions.push_back(*sched::parse_decision(text, &error));
    }
    const driver::Compilation compilation = testing::compile(input, schedule);
    EXPECT_TRUE(compilation.program) << compilation.schedule_error;
    std::vector<std::string> out;
    if (!compilation.program) return out;
    for (const sched::Decision& d : search::launch_candidates(search::analyze_program(*compilation.program), schedule, false)) {
      out.push_back(sched::print_decision(d));
    }
    return out;
  };
  const std::vector<std::string> int8 =
      launches("int8_weight_gemm", {"M=1", "N=4096", "K=4096", "KG=32"},
               {"tile(Y_sum, m=1, n=64, k=128)", "reverse_compute_at(Y, Y_sum, n_o)", "bind(Y_sum, m_o=grid.y, n_o=grid.x)"});
  auto count = [](const std::vector<std::string>& texts, const std::string& part) {
    return std::count_if(texts.begin(), texts.end(), [&](const std::string& t) { return t.find(part) != std::string::npos; });
  };
  ASSERT_FALSE(int8.empty());
  EXPECT_GT(count(int8, "reads=grouped"), 0);
  // Every launch both ways, and the default launch (4 warps, 2 stages) grouped.
  EXPECT_EQ(count(int8, "reads=grouped"), count(int8, "launch(") - count(int8, "reads=grouped") + 1);
  EXPECT_EQ(count(int8, "launch(Y_sum, warps=4, stages=2, reads=grouped)"), 1);
  const std::vector<std::string> bf16 =
      launches("gemm", {"M=256", "N=256", "K=256"},
               {"tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)", "bind(C_sum, m_o=grid.y, n_o=grid.x)"});
  ASSERT_FALSE(bf16.empty());
  EXPECT_EQ(count(bf16, "reads="), 0);
}

// `schedule` of a decode step of the int8-weight GEMM at a ragged size (744 columns, 8 scale
// groups) in the MA interpreter, against the float64 reference, for each seed.
void expect_decode_schedule_matches_reference(const sched::Schedule& schedule, std::initializer_list<uint64_t> seeds,
                                              const std::string& rows = "M=1") {
  const search::SearchInput small = testing::asset_input("int8_weight_gemm", {rows, "N=744", "K=1024", "KG=8"});
  const driver::Compilation ragged = testing::compile(small, schedule);
  ASSERT_TRUE(ragged.ok()) << ragged.schedule_error << ragged.internal_error;
  for (uint64_t seed : seeds) {
    driver::EvalOptions options;
    options.stage = driver::Stage::MATile;
    options.seed = seed;
    const driver::EvalResult evaluated = driver::evaluate(ragged, options);
    ASSERT_TRUE(evaluated.ran) << evaluated.error;
    EXPECT_TRUE(evaluated.passed()) << text_of(schedule);
  }
}

// The first kernel of `schedule` at `input`'s sizes runs its product on mma, with no CUDA-core
// dot; returns the number of kernels (0 when it does not lower).
size_t expect_first_kernel_on_mma(const search::SearchInput& input, const sched::Schedule& schedule) {
  const driver::Compilation compilation = testing::compile(input, schedule);
  EXPECT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  if (!compilation.ma_module) return 0;
  const matile::Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_GT(testing::count_kind(kernel, matile::OpKind::Mma), 0) << text_of(schedule);
  EXPECT_EQ(testing::count_kind(kernel, matile::OpKind::FmaDot), 0) << text_of(schedule);
  return compilation.ma_module->kernels.size();
}

// A decode step of the int8-weight GEMM (one activation row, 4096 x 4096 weights) with split-K
// forbidden: the search takes 16-column tiles on 2 warps, one n8 atom each, so the 4096 columns
// make 256 CTAs on mma instead of 128 (4 warps want 32 columns; on 16 they would fall back to
// CUDA-core dots). The found schedule then runs in the MA interpreter at ragged sizes against
// the float64 reference.
// int4 weights stored [K, N] (packed along N; a program no asset has): int4 tiles are read in
// registers (no asynchronous copy takes packed bytes), and a pick that loaded a k split's whole
// 1024 x 64 tile into them, 512 bytes a thread, spilled 14 KB and ran 23x slower than its estimate
// on an H200. The register estimate now counts a tile of more slots than a thread has registers
// in full, and the search tiles k instead: every int4 load of the pick fits a thread's registers.
TEST(Fp8GemmSearch, AnInt4DecodeStepNeverLoadsMoreWeightsAThreadThanItHasRegisters) {
  const search::SearchInput input = testing::text_input(R"(let M = 16, N = 4096, K = 4096
input X[M, K] : bf16
input W[K, N] : int4
input S[N] : bf16
output Y[m, n] : bf16 = sum(k) X[m, k] * W[k, n] * S[n]
)", {});
  static const std::unique_ptr<cost::CostModel> h200 = cost::make_analytical_model(cost::h200_sxm());
  const search::SearchResult result = testing::run(input, {}, *h200);
  ASSERT_TRUE(result.ok) << result.error;
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  int int4_loads = 0;
  for (const matile::KernelPtr& kernel : compilation.ma_module->kernels) {
    matile::for_each_op(*kernel->body, [&](const matile::Op& op) {
      if (op.kind != matile::OpKind::GlobalLoad || !op.buffer || op.buffer->dtype != DType::I4) return;
      ++int4_loads;
      EXPECT_LE(op.results[0]->layout.slots(), 255) << text_of(result.schedule);
    });
  }
  EXPECT_GT(int4_loads, 0) << text_of(result.schedule);
}

TEST(Fp8GemmSearch, AnInt8DecodeStepGivesEachWarpOneAtomOfANarrowTile) {
  const search::SearchInput input =
      testing::asset_input("int8_weight_gemm", {"M=1", "N=4096", "K=4096", "KG=32"});
  search::SearchOptions options;
  sched::DecisionParseError error;
  options.forbids.push_back(*sched::parse_decision("split_k_update(Y_sum, k)", &error));
  const search::SearchResult result = testing::run(input, options);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string text = text_of(result.schedule);
  EXPECT_NE(text.find("tile(Y_sum, m=1, n=16, k=128)"), std::string::npos) << text;
  EXPECT_NE(text.find("launch(Y_sum, warps=2"), std::string::npos) << text;
  EXPECT_EQ(expect_first_kernel_on_mma(input, result.schedule), 1u);
  expect_decode_schedule_matches_reference(result.schedule, {0, 3});
}

// The same decode step searched freely splits K after its tile: split_k_update applies to the
// tiled nest (the fusion phase offers it again after compute_at), the partial kernel keeps its
// tensor-core tile (mma, no CUDA-core dot) and 4 splits give the 4096 columns 4 times the CTAs.
// On the H200 the search's split kernel ran 9.4 µs against 13.5 for the unsplit pick (cuBLAS on
// the dequantized weights 14.3; 2026-11-29, bench/RESULTS.md). The pinned form below, and the
// searched one, run in the MA interpreter at ragged sizes against the float64 reference.
TEST(Fp8GemmSearch, AnInt8DecodeStepSplitsKAfterItsTileAndKeepsTheTensorCores) {
  const search::SearchInput input =
      testing::asset_input("int8_weight_gemm", {"M=1", "N=4096", "K=4096", "KG=32"});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string text = text_of(result.schedule);
  EXPECT_NE(text.find("tile(Y_sum, m=1, n="), std::string::npos) << text;
  EXPECT_NE(text.find("split_k_update(Y_sum, k, splits="), std::string::npos) << text;
  EXPECT_EQ(expect_first_kernel_on_mma(input, result.schedule), 2u);  // the split, the combine
  expect_decode_schedule_matches_reference(result.schedule, {4});

  const sched::Schedule schedule = nautilus::testing::parse_schedule(
      {"tile(Y_sum, m=1, n=32, k=128)", "split_k_update(Y_sum, k, splits=4)",
       "launch(Y_sum_part, warps=4, stages=3)", "tile(Y, n=2)", "compute_at(Y_sum, Y, n_o)",
       "bind(Y_sum_part, k_s=grid.z, m_o=grid.y, n_o=grid.x)", "bind(Y_sum, m=grid.y, n_o=grid.x)"});
  EXPECT_EQ(expect_first_kernel_on_mma(input, schedule), 2u);
  expect_decode_schedule_matches_reference(schedule, {2, 9});
}

// A 70B-class decode step (one or 16 activation rows, K 8192, N 28672) on the H200 model:
// 128-column tiles of 128 k on 4 warps with a 3-stage ring, 4 n8 atoms per warp, so a lane
// reads 4 weight bytes of a row at once and the reads are grouped. The tiling phase reaches
// 128 x 128 only by stepping two axes at once from 64 x 64 and by judging tiles with a 3-stage
// ring; 1 x 256 x 128 (112 CTAs on 132 SMs) loses once a wave on fewer SMs reaches less of the
// DRAM bandwidth. Measured on the H200 (2026-11-29): 57.1 µs at M 1 (88% of the DRAM floor;
// 1 x 256 x 128 67.6, the earlier pick 1 x 64 x 128 on 2 warps 69.2) and 62.2 µs at M 16.
// The found schedule runs in the MA interpreter at ragged sizes against the float64 reference.
TEST(Fp8GemmSearch, ASeventyBClassInt8DecodeStepTakes128ColumnsOnFourWarpsWithGroupedReads) {
  static const std::unique_ptr<cost::CostModel> h200 = cost::make_analytical_model(cost::h200_sxm());
  for (const char* rows : {"M=1", "M=16"}) {
    SCOPED_TRACE(rows);
    const search::SearchInput input =
        testing::asset_input("int8_weight_gemm", {rows, "N=28672", "K=8192", "KG=64"});
    const search::SearchResult result = testing::run(input, {}, *h200);
    ASSERT_TRUE(result.ok) << result.error;
    const std::string text = text_of(result.schedule);
    EXPECT_NE(text.find(std::string("tile(Y_sum, m=") + (rows + 2) + ", n=128, k=128)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("launch(Y_sum, warps=4, stages=3"), std::string::npos) << text;
    const driver::Compilation compilation = testing::compile(input, result.schedule);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
    EXPECT_TRUE(compilation.ma_module->kernels.at(0)->grouped_shared_reads) << text;
    // 16 rows are checked at 11, which the tile's 16 overhang.
    expect_decode_schedule_matches_reference(result.schedule, {5}, rows[2] == '1' && rows[3] == '6' ? "M=11" : "M=1");
  }
}

}  // namespace
}  // namespace nautilus
