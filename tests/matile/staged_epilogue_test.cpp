// The staged epilogue (lower.h rule 7, core/matile/lower_epilogue.cpp): a warp-specialized
// kernel stores its 16-bit accumulator tile through a swizzled shared tile -- stmatrix, a named
// barrier of the consumers, a row-wise ld.shared -- and then with coalesced global stores as
// wide as the row pitch allows. The MA interpreter (roles interleaved, every shared access
// race-checked) reproduces the float64 reference at ragged sizes and odd pitches; the emitted
// CUDA reads the tile back 16 bytes at a time and stores ragged rows wide where they fit; kernels
// where it does not apply say why in their notes and keep the fragment store.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/driver/pipeline.h"
#include "core/matile/interpreter.h"
#include "core/matile/ir.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "core/support/tensor.h"
#include "tests/common/golden.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::expect_stage_matches_reference;
using nautilus::testing::source_path;

driver::Compilation compile(const std::string& spec, const std::vector<std::string>& decisions,
                            const std::vector<std::string>& sizes, bool stage_epilogue = true,
                            driver::Stage last = driver::Stage::MATile, bool realign_rows = false,
                            LowerOptions::TmaStore tma_store = LowerOptions::TmaStore::Persistent) {
  driver::CompileOptions options;
  options.last_stage = last;
  options.matile.arch = "sm_90a";
  options.matile.stage_epilogue = stage_epilogue;
  options.matile.realign_rows = realign_rows;
  options.matile.tma_store = tma_store;
  return nautilus::testing::compile_scheduled(spec, decisions, sizes, options);
}

std::vector<std::string> gemm_schedule(int tile_m, int tile_n, int stages, int consumers) {
  return {"tile(C_sum, m=" + std::to_string(tile_m) + ", n=" + std::to_string(tile_n) + ", k=64)",
          "reverse_compute_at(C, C_sum, n_o)", "bind(C_sum, m_o=grid.y, n_o=grid.x)",
          "warp_spec(C_sum, consumers=" + std::to_string(consumers) + ", stages=" + std::to_string(stages) + ")"};
}

// The lm_head schedule the search finds (bench/out-variants): Logits = X Wteᵀ, 128 x 128 tiles.
std::vector<std::string> lm_head_schedule() {
  return {"tile(Logits_sum, t=128, v=128, h=64)", "reverse_compute_at(Logits, Logits_sum, v_o)",
          "bind(Logits_sum, v_o=grid.y, t_o=grid.x)", "warp_spec(Logits_sum, consumers=2, stages=4)"};
}

using nautilus::testing::count_kind;
using nautilus::testing::count_ops;

const SharedAlloc* staging_of(const Kernel& kernel) {
  for (const SharedAlloc& alloc : kernel.shared) {
    if (alloc.purpose.find("staged epilogue") != std::string::npos) return &alloc;
  }
  return nullptr;
}

// The layout the staged tile is read back in (the SharedLoad before the store).
const Op* staged_read(const Region& region) {
  return nautilus::testing::first_op(region, [](const Op& op) { return op.kind == OpKind::SharedLoad; });
}

TEST(StagedEpilogue, AnOddPitchIsStoredRowWiseOneElementPerThreadAndMatchesTheReference) {
  // V = 301: a row pitch of 602 bytes, so no row but the first is 4-byte aligned; 3 column
  // tiles, the last ragged; T = 200 leaves a ragged row tile; H = 136 a k tail.
  const driver::Compilation compilation =
      compile("bench/variants/lm_head_gemm.nt", lm_head_schedule(), {"T=200", "H=136", "V=301"});
  ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_TRUE(kernel.notes.empty()) << kernel.notes.front();
  const SharedAlloc* staging = staging_of(kernel);
  ASSERT_TRUE(staging);
  EXPECT_EQ(staging->shape, (std::vector<int64_t>{128, 128}));
  EXPECT_NE(staging->purpose.find("2-byte runs (row pitch 301 elements"), std::string::npos) << staging->purpose;
  EXPECT_EQ(count_kind(kernel, OpKind::StMatrix), 1);
  const Op* read = staged_read(*kernel.body);
  ASSERT_TRUE(read);
  // Consecutive threads on consecutive columns: a warp's store is 64 contiguous bytes.
  EXPECT_EQ(read->results[0]->layout, blocked_layout({128, 128}, 256, 1));
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 11);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 12);
}

// The global store after the staged read.
const Op* staged_store(const Region& region) {
  bool after_read = false;
  return nautilus::testing::first_op(region, [&](const Op& op) {
    after_read = after_read || op.kind == OpKind::SharedLoad;
    return after_read && op.kind == OpKind::GlobalStore;
  });
}

// Realigned rows (LowerOptions::realign_rows, off by default; `--epilogue=realigned`).
TEST(StagedEpilogue, RealignedRowsReadAnOddPitchBackInSixteenByteRunsAndMatchTheReference) {
  // V = 301: a row pitch of 602 bytes, so consecutive rows start at every 2-byte offset of a
  // 16-byte line; 3 column tiles, the last ragged; T = 200 leaves a ragged row tile; H = 136 a
  // k tail. The tile is read back in runs of 8 elements (a row on 16 consecutive lanes) and the
  // store realigns them.
  const driver::Compilation compilation =
      compile("bench/variants/lm_head_gemm.nt", lm_head_schedule(), {"T=200", "H=136", "V=301"}, true,
              driver::Stage::MATile, true);
  ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_TRUE(kernel.notes.empty()) << kernel.notes.front();
  const SharedAlloc* staging = staging_of(kernel);
  ASSERT_TRUE(staging);
  EXPECT_EQ(staging->shape, (std::vector<int64_t>{128, 128}));
  EXPECT_NE(staging->purpose.find("16-byte runs realigned to the row's misalignment (row pitch 301 elements"),
            std::string::npos)
      << staging->purpose;
  EXPECT_EQ(count_kind(kernel, OpKind::StMatrix), 1);
  const Op* read = staged_read(*kernel.body);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->results[0]->layout, blocked_layout({128, 128}, 256, 8));
  const Op* store = staged_store(*kernel.body);
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->access.realign_rows);
  EXPECT_NE(print_kernel(kernel).find("bounds [200, 301] realigned rows"), std::string::npos);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 11);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 12);
}

TEST(StagedEpilogue, RealignedRowsOfTheSearchedLmHeadFormMatchTheReferenceAtOddPitches) {
  // 128 x 256 tiles, 3 stages (the lm_head search's result): a row on one whole warp. Pitches
  // of every odd residue mod 8 and an even one that is not 16-byte aligned (V = 518).
  const std::vector<std::string> schedule = {
      "tile(Logits_sum, t=128, v=256, h=64)", "reverse_compute_at(Logits, Logits_sum, v_o)",
      "bind(Logits_sum, v_o=grid.y, t_o=grid.x)", "warp_spec(Logits_sum, consumers=2, stages=3)"};
  for (const char* v : {"V=517", "V=523", "V=518", "V=263"}) {
    SCOPED_TRACE(v);
    const driver::Compilation compilation =
        compile("bench/variants/lm_head_gemm.nt", schedule, {"T=136", "H=72", v}, true, driver::Stage::MATile, true);
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    const Op* store = staged_store(*kernel.body);
    ASSERT_TRUE(store);
    EXPECT_TRUE(store->access.realign_rows);
    const Op* read = staged_read(*kernel.body);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->results[0]->layout, blocked_layout({128, 256}, 256, 8));
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 13);
  }
}

TEST(StagedEpilogue, TheCudaOfRealignedRowsShufflesRunsAndStoresAlignedVectors) {
  const driver::Compilation compilation = compile("bench/variants/lm_head_gemm.nt", lm_head_schedule(),
                                                  {"T=200", "H=136", "V=301"}, true, driver::Stage::Cuda, true);
  ASSERT_TRUE(compilation.cuda) << compilation.diagnostics->render_all();
  const std::string& cuda = compilation.cuda->source;
  EXPECT_NE(cuda.find("*reinterpret_cast<const uint4*>(&Logits_staged["), std::string::npos);
  EXPECT_NE(cuda.find("= realign_head(run"), std::string::npos);
  EXPECT_NE(cuda.find("= shuffle_down_uint4(mine"), std::string::npos);
  EXPECT_NE(cuda.find("= realign16(mine"), std::string::npos);
  EXPECT_NE(cuda.find("*reinterpret_cast<uint4*>(run"), std::string::npos);
  // No store of one element per slot from the staged value outside the head and tail.
  EXPECT_EQ(cuda.find("*((Logits + Logits_start)"), std::string::npos);
}

TEST(StagedEpilogue, SixteenByteRowsAreStoredInSixteenByteRunsAtRaggedSizes) {
  // N = 264: rows of 528 bytes, 16-byte aligned; the second column tile is ragged (8 columns
  // of 128), M = 200 a ragged row tile. One and two consumer warpgroups.
  for (const auto& [m, n, stages, consumers] :
       std::vector<std::tuple<int, int, int, int>>{{128, 128, 3, 2}, {64, 128, 2, 1}, {128, 64, 4, 2}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + " consumers " + std::to_string(consumers));
    const driver::Compilation compilation =
        compile("assets/specs/gemm.nt", gemm_schedule(m, n, stages, consumers), {"M=200", "N=264", "K=136"},
                true, driver::Stage::MATile, false, LowerOptions::TmaStore::Never);
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    const SharedAlloc* staging = staging_of(kernel);
    ASSERT_TRUE(staging) << (kernel.notes.empty() ? "" : kernel.notes.front());
    EXPECT_NE(staging->purpose.find("16-byte runs"), std::string::npos) << staging->purpose;
    const Op* read = staged_read(*kernel.body);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->results[0]->layout, blocked_layout({m, n}, 128 * consumers, 8));
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 21);
  }
}

TEST(StagedEpilogue, TheCudaReadsTheTileBackSixteenBytesAtATimeAndStoresRaggedRowsWide) {
  const driver::Compilation compilation = compile("assets/specs/gemm.nt", gemm_schedule(128, 128, 3, 2),
                                                  {"M=200", "N=264", "K=136"}, true, driver::Stage::Cuda, false,
                                                  LowerOptions::TmaStore::Never);
  ASSERT_TRUE(compilation.cuda) << compilation.diagnostics->render_all();
  const std::string& cuda = compilation.cuda->source;
  EXPECT_NE(cuda.find("stmatrix_x4((C_staged_addr"), std::string::npos);
  EXPECT_NE(cuda.find("*reinterpret_cast<const uint4*>(&C_staged["), std::string::npos);
  // Columns reach N = 264 only in the last column tile: a run is stored wide when its last
  // element is in bounds, element by element otherwise.
  EXPECT_NE(cuda.find("*reinterpret_cast<uint4*>((C + C_start)"), std::string::npos);
  EXPECT_NE(cuda.find("} else {"), std::string::npos);
}

// The TMA form (the default in persistent kernels, `--epilogue tma` everywhere): the tile is staged in 128-byte
// swizzled 64-column panels and leaves by one TMA store, clipped at the buffer's ragged end.
TEST(StagedEpilogue, SixteenByteRowsLeaveByOneTmaStoreAtRaggedSizes) {
  for (const auto& [m, n, stages, consumers] :
       std::vector<std::tuple<int, int, int, int>>{{128, 128, 3, 2}, {64, 128, 2, 1}, {128, 256, 3, 2}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + " consumers " + std::to_string(consumers));
    const driver::Compilation compilation =
        compile("assets/specs/gemm.nt", gemm_schedule(m, n, stages, consumers), {"M=200", "N=264", "K=136"},
                true, driver::Stage::MATile, false, LowerOptions::TmaStore::Always);
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    EXPECT_TRUE(kernel.notes.empty()) << kernel.notes.front();
    const SharedAlloc* staging = staging_of(kernel);
    ASSERT_TRUE(staging);
    EXPECT_NE(staging->purpose.find("a TMA store out (128-byte swizzled panels)"), std::string::npos)
        << staging->purpose;
    EXPECT_EQ(count_kind(kernel, OpKind::TmaStore), 1);
    EXPECT_EQ(count_kind(kernel, OpKind::FenceProxyAsync), 1);
    EXPECT_EQ(count_kind(kernel, OpKind::GlobalStore), 0);
    EXPECT_EQ(count_kind(kernel, OpKind::BulkWaitGroup), 1);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 23);
  }
  const driver::Compilation cuda = compile("assets/specs/gemm.nt", gemm_schedule(128, 256, 3, 2),
                                           {"M=200", "N=264", "K=136"}, true, driver::Stage::Cuda, false,
                                           LowerOptions::TmaStore::Always);
  ASSERT_TRUE(cuda.cuda) << cuda.diagnostics->render_all();
  EXPECT_NE(cuda.cuda->source.find("tma_store_2d(&tm_C, C_staged_addr + 0u"), std::string::npos);
  EXPECT_NE(cuda.cuda->source.find("bulk_wait_group_read<0>();"), std::string::npos);
}

TEST(StagedEpilogue, WhereItDoesNotApplyTheKernelSaysWhyAndStoresFromTheFragments) {
  // 128 x 256 tiles with a 4-stage ring take 192 KB; the 64 KB staging tile does not fit.
  {
    const driver::Compilation compilation =
        compile("assets/specs/gemm.nt", gemm_schedule(128, 256, 4, 2), {"M=256", "N=512", "K=320"});
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    ASSERT_EQ(kernel.notes.size(), 1u);
    EXPECT_NE(kernel.notes[0].find("64 KB staging tile does not fit beside the kernel's 192 KB"),
              std::string::npos)
        << kernel.notes[0];
    EXPECT_NE(print_kernel(kernel).find("// epilogue %"), std::string::npos);
    EXPECT_EQ(count_kind(kernel, OpKind::StMatrix), 0);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 31);
  }
  // Turned off (for comparisons): the same kernel as before rule 7, and the reason.
  {
    const driver::Compilation compilation = compile("bench/variants/lm_head_gemm.nt", lm_head_schedule(),
                                                    {"T=200", "H=136", "V=301"}, false);
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    ASSERT_EQ(kernel.notes.size(), 1u);
    EXPECT_NE(kernel.notes[0].find("turned off"), std::string::npos) << kernel.notes[0];
    EXPECT_EQ(count_kind(kernel, OpKind::StMatrix), 0);
    EXPECT_FALSE(staging_of(kernel));
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 32);
  }
  // sm_80 keeps mma.sync and the fragment store: rule 7 belongs to warp-specialized kernels.
  {
    std::string error;
    driver::CompileOptions options;
    options.last_stage = driver::Stage::MATile;
    options.matile.arch = "sm_80";
    for (const std::string& text : gemm_schedule(128, 128, 3, 2)) {
      sched::DecisionParseError parse_error;
      options.schedule.decisions.push_back(*sched::parse_decision(text, &parse_error));
    }
    for (const char* text : {"M=200", "N=264", "K=136"}) {
      options.sizes.push_back(*spec::parse_size_override(text, &error));
    }
    const driver::Compilation compilation =
        driver::compile(SourceFile::read(source_path("assets/specs/gemm.nt"), &error), options);
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    EXPECT_EQ(count_kind(*compilation.ma_module->kernels.at(0), OpKind::StMatrix), 0);
    EXPECT_TRUE(compilation.ma_module->kernels.at(0)->notes.empty());
  }
}

TensorMap random_inputs(const Module& module, uint64_t seed) {
  TensorMap inputs;
  for (const scalar::Buffer& buffer : module.params) {
    if (buffer->role == scalar::BufferRole::Input) inputs[buffer->name] = random_tensor(buffer->shape, buffer->dtype, seed++);
  }
  return inputs;
}

// The module with the consumers' named barrier after the stmatrix removed.
ModulePtr without_staging_barrier(const Module& module) {
  const std::function<RegionPtr(const Region&)> rewrite = [&](const Region& region) {
    std::vector<OpPtr> ops;
    bool after_stmatrix = false;
    for (const OpPtr& op : region.ops) {
      if (after_stmatrix && op->kind == OpKind::NamedBarrier) {
        after_stmatrix = false;
        continue;
      }
      after_stmatrix = op->kind == OpKind::StMatrix;
      if (op->roles.empty()) {
        ops.push_back(op);
        continue;
      }
      Op copy = *op;
      for (WarpRole& role : copy.roles) role.body = rewrite(*role.body);
      ops.push_back(make_op(std::move(copy)));
    }
    return make_region(std::move(ops));
  };
  Module out = module;
  for (KernelPtr& kernel : out.kernels) {
    Kernel copy = *kernel;
    copy.body = rewrite(*copy.body);
    kernel = std::make_shared<const Kernel>(std::move(copy));
  }
  return std::make_shared<const Module>(std::move(out));
}

TEST(StagedEpilogue, RandomInterleavingsGiveTheSameBitsAndAMissingBarrierIsARace) {
  const driver::Compilation compilation =
      compile("bench/variants/lm_head_gemm.nt", lm_head_schedule(), {"T=136", "H=72", "V=141"});
  ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  const Module& module = *compilation.ma_module;
  const TensorMap inputs = random_inputs(module, 41);
  const InterpretResult fixed = interpret(module, inputs);
  ASSERT_TRUE(fixed.ok) << fixed.error;
  EXPECT_GT(fixed.instructions.at("stmatrix.x4"), 0u);
  for (uint64_t seed : {1u, 2u, 3u}) {
    InterpretOptions options;
    options.schedule_seed = seed;
    const InterpretResult shuffled = interpret(module, inputs, options);
    ASSERT_TRUE(shuffled.ok) << "seed " << seed << ": " << shuffled.error;
    EXPECT_EQ(shuffled.outputs.at("Logits").values, fixed.outputs.at("Logits").values) << "seed " << seed;
  }
  // Without the barrier a thread reads rows another warp wrote with stmatrix.
  const ModulePtr broken = without_staging_barrier(module);
  const InterpretResult racy = interpret(*broken, inputs);
  ASSERT_FALSE(racy.ok);
  EXPECT_EQ(racy.error_kind, InterpretErrorKind::UnsynchronizedRead) << racy.error;
}

}  // namespace
}  // namespace nautilus::matile
