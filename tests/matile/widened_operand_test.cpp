// 8-bit mma operands that a dot widens (lower_dots.cpp widened_byte_load, OperandPlan::widened):
// bf16 activations times int8 weights. The weight tile goes through a shared window like a
// 16-bit operand -- a 16-byte cp.async copy, issued ahead in a pipelined loop -- and each k step
// reads its bytes from there into the fragment layout and widens them, instead of loading every
// element from global memory at a whole row's stride. The swizzle is the one under which those
// byte reads are conflict-free, and the MA interpreter matches the float64 reference at sizes
// that are no tile multiples.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/layout/bank_conflicts.h"
#include "core/matile/ir.h"
#include "core/matile/layouts.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::count_ops;
using nautilus::testing::expect_stage_matches_reference;
using nautilus::testing::first_op;

std::vector<std::string> weight_gemm_schedule(int tile_m, int tile_n, int tile_k, int stages) {
  return {"tile(Y_sum, m=" + std::to_string(tile_m) + ", n=" + std::to_string(tile_n) + ", k=" +
              std::to_string(tile_k) + ")",
          "reverse_compute_at(Y, Y_sum, n_o)", "bind(Y_sum, m_o=grid.y, n_o=grid.x)",
          "pipeline(Y_sum, stages=" + std::to_string(stages) + ")"};
}

// The grouped shared reads (LowerOptions::shared_reads, `--shared-reads grouped`).
driver::Compilation compile_grouped(const std::vector<std::string>& decisions, const std::vector<std::string>& sizes,
                                    const std::string& arch) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = arch;
  options.matile.shared_reads = scalar::SharedReads::Grouped;
  return nautilus::testing::compile_scheduled("assets/specs/int8_weight_gemm.nt", decisions, sizes, std::move(options));
}

bool reads_int8_from_shared(const Op& op) {
  return op.kind == OpKind::SharedLoad && op.results[0]->type.dtype == DType::I8;
}

TEST(WidenedOperand, Int8WeightsAreCopiedToSharedAndReadPerKStepIntoFragments) {
  for (const std::string& arch : {std::string("sm_80"), std::string("sm_90a")}) {
    SCOPED_TRACE(arch);
    // 70 rows, 80 columns, 384 = 3 groups of k: a partial tile on m and n. A k tile of one scale
    // group leaves one scale per column and tile, applied to the product (the weights' cast is
    // then the whole operand). The element-wise reads (reads=elements: by default 4 atoms per
    // warp get the grouped ones, tested below).
    std::vector<std::string> schedule = weight_gemm_schedule(64, 64, 128, 3);
    schedule.insert(schedule.end() - 1, "launch(Y_sum, warps=4, stages=3, reads=elements)");
    const driver::Compilation compilation =
        compile_for_arch("assets/specs/int8_weight_gemm.nt", schedule, {"M=70", "N=80", "K=384", "G=128", "KG=3"}, arch);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    // No element of W is loaded from global memory into registers: the copies move it.
    EXPECT_EQ(count_ops(*kernel.body, [](const Op& op) {
                return op.kind == OpKind::GlobalLoad && op.buffer && op.buffer->name == "W";
              }),
              0);
    EXPECT_GE(count_ops(*kernel.body, [](const Op& op) {
                return op.kind == OpKind::AsyncCopy && op.buffer && op.buffer->name == "W";
              }),
              1);
    // One [16, 64] byte read per k step (128 / 16 = 8), each widened to bf16 for the mma.
    const Op* read = first_op(*kernel.body, reads_int8_from_shared);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->shared_read, SharedRead::Scalar);
    EXPECT_EQ(read->results[0]->type.shape, (std::vector<int64_t>{16, 64}));
    EXPECT_EQ(read->results[0]->layout.kind, LayoutKind::MmaB);
    EXPECT_EQ(count_ops(*kernel.body, reads_int8_from_shared), 8);
    // The scaled product is only accumulated and stored: the warps split both m and n (each
    // reads half of W's columns instead of all of them).
    EXPECT_EQ(read->results[0]->layout.warps_m, 2);
    EXPECT_EQ(read->results[0]->layout.warps_n, 2);

    // The swizzle makes each warp instruction of the byte reads one wavefront.
    const SharedAlloc& tile = kernel.shared.at(static_cast<size_t>(read->shared.alloc));
    EXPECT_NE(tile.purpose.find("byte-read wavefronts"), std::string::npos) << tile.purpose;
    const RegisterLayout& fragment = read->results[0]->layout;
    EXPECT_EQ(fragment.column_interleave, 1);  // the grouped reads' interleave only
    for (int64_t slot = 0; slot < fragment.slots(); ++slot) {
      std::vector<int64_t> addresses;
      for (int64_t lane = 0; lane < 32; ++lane) {
        const int64_t index = fragment.tv.index(lane, slot);  // (k, n) in the [16, 64] step
        addresses.push_back(tile.layout((index % 16) + (index / 16) * tile.shape[0]));
      }
      const auto conflicts = layout::count_bank_conflicts(addresses, 1);
      ASSERT_TRUE(conflicts.ok());
      EXPECT_EQ(conflicts->wavefronts, 1) << "slot " << slot;
    }
    for (uint64_t seed : {3, 4}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, arch + " ");
  }
}

TEST(WidenedOperand, TheScalesOfEachGroupJoinTheRingOfThePipelinedLoop) {
  // S[k / 128, n]: one 64-wide row of scales per k tile, copied with the operand tiles
  // stages - 1 iterations ahead and read back from shared memory, instead of a global load that
  // every iteration would wait for.
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/int8_weight_gemm.nt", weight_gemm_schedule(16, 64, 128, 4),
                       {"M=16", "N=208", "K=640", "G=128", "KG=5"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const auto on_s = [](OpKind kind) {
    return [kind](const Op& op) { return op.kind == kind && op.buffer && op.buffer->name == "S"; };
  };
  EXPECT_EQ(count_ops(*kernel.body, on_s(OpKind::GlobalLoad)), 0);
  EXPECT_EQ(count_ops(*kernel.body, on_s(OpKind::AsyncCopy)), 4);  // 3 in the prologue, 1 per iteration
  const Op* loop = first_op(*kernel.body, [](const Op& op) { return op.kind == OpKind::For; });
  ASSERT_TRUE(loop);
  EXPECT_EQ(loop->pipeline_stages, 4);
  const Op* scales = first_op(*loop->body, [](const Op& op) {
    return op.kind == OpKind::SharedLoad && op.results[0]->type.rank() == 1;
  });
  ASSERT_TRUE(scales);
  EXPECT_EQ(scales->results[0]->type.dtype, DType::BF16);
  EXPECT_NE(kernel.shared.at(static_cast<size_t>(scales->shared.alloc)).purpose.find("in the ring"), std::string::npos);
  for (uint64_t seed : {8, 9}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, "scales ");
}

TEST(WidenedOperand, ShortActivationsKeepTheirRegisterPathAndTheWeightsStillGoThroughShared) {
  // A decode step's 8 rows: A is loaded straight into its fragment (ldmatrix reads 16-row atoms),
  // W still goes through shared memory.
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/int8_weight_gemm.nt", weight_gemm_schedule(8, 64, 128, 4),
                       {"M=8", "N=208", "K=256", "G=128", "KG=2"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(count_ops(*kernel.body, reads_int8_from_shared), 128 / 16);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 5, "decode ");
}

TEST(WidenedOperand, FourWarpsShareA32ColumnTileOneAtomEach) {
  // A decode tile of 16 x 32 on 4 warps: 8 columns per warp. ldmatrix.x4.trans would need 16;
  // the byte reads take one n8 atom per warp, so the dot stays on tensor cores (128 CTAs over
  // N = 4096 instead of 64 with 64-column tiles).
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/int8_weight_gemm.nt", weight_gemm_schedule(16, 32, 128, 4),
                       {"M=13", "N=96", "K=384", "G=128", "KG=3"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const Op* mma = first_op(*kernel.body, [](const Op& op) { return op.kind == OpKind::Mma; });
  ASSERT_TRUE(mma);
  EXPECT_EQ(mma->results[0]->layout.warps_n, 4);
  EXPECT_EQ(count_ops(*kernel.body, [](const Op& op) { return op.kind == OpKind::FmaDot; }), 0);
  EXPECT_EQ(count_ops(*kernel.body, reads_int8_from_shared), 128 / 16);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 10, "16 x 32 ");
}

TEST(WidenedOperand, AOneRowDecodeTileKeepsItsProductInRegistersToTheStore) {
  // tile(Y_sum, m=1, ...) keeps a loop of one step along m; reverse_compute_at gives the output
  // block the same loop, so its [1, 32] read matches the product's register tile. Without it the
  // output read Y_sum through global memory (a store, a barrier and a load per CTA). The one
  // activation row, which ldmatrix cannot read, comes through the ring.
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/int8_weight_gemm.nt",
      {"tile(Y_sum, m=1, n=32, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
       "bind(Y_sum, m_o=grid.y, n_o=grid.x)", "pipeline(Y_sum, stages=4)"},
      {"M=3", "N=96", "K=384", "G=128", "KG=3"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  ASSERT_EQ(compilation.ma_module->kernels.size(), 1u);
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const auto on = [](const std::string& buffer, OpKind kind) {
    return [buffer, kind](const Op& op) { return op.kind == kind && op.buffer && op.buffer->name == buffer; };
  };
  EXPECT_EQ(count_ops(*kernel.body, on("Y_sum", OpKind::GlobalStore)), 0);
  EXPECT_EQ(count_ops(*kernel.body, on("Y_sum", OpKind::GlobalLoad)), 0);
  EXPECT_EQ(count_ops(*kernel.body, on("X", OpKind::GlobalLoad)), 0);
  EXPECT_GE(count_ops(*kernel.body, on("X", OpKind::AsyncCopy)), 1);
  EXPECT_EQ(count_ops(*kernel.body, [](const Op& op) { return op.kind == OpKind::Mma; }), 128 / 16);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 11, "one row ");
}

TEST(WidenedOperand, RowsThatACopyCannotAlignKeepTheRegisterPath) {
  // N = 72: a row of W is 72 bytes, so a 16-byte copy of a tile cannot start at every row's
  // beginning; the weights are then loaded into their fragments from global memory, and the
  // result is still right.
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/int8_weight_gemm.nt", weight_gemm_schedule(64, 64, 128, 2),
                       {"M=64", "N=72", "K=256", "G=128", "KG=2"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(count_ops(*kernel.body, reads_int8_from_shared), 0);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 6, "unaligned ");
}

TEST(WidenedOperand, GroupedReadsGiveNeighbouringAtomsNeighbouringColumnsAndReadARowsBytesAtOnce) {
  // 64 x 64 on 2 x 2 warps: 32 columns, 4 n8 atoms per warp. With grouped shared reads the B
  // fragment of atom r takes columns 4g + r (g the lane's group) instead of 8r + g, so a lane's
  // 4 bytes of one k row are neighbours: one 4-byte ld.shared per k row instead of four 1-byte
  // ones, conflict-free under the swizzle chosen for them. The product takes the same column
  // order, and the interpreter's result still matches the reference.
  const driver::Compilation compilation = compile_grouped(weight_gemm_schedule(64, 64, 128, 3),
                                                          {"M=70", "N=80", "K=384", "G=128", "KG=3"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const Op* read = first_op(*kernel.body, reads_int8_from_shared);
  const Op* mma = first_op(*kernel.body, [](const Op& op) { return op.kind == OpKind::Mma; });
  ASSERT_TRUE(read && mma);
  const RegisterLayout& fragment = read->results[0]->layout;
  EXPECT_EQ(fragment.column_interleave, 4);
  EXPECT_EQ(mma->results[0]->layout.column_interleave, 4);
  // Lane 5 (group 1, k pair 2) of warp 0: slot 4 * ni (b_0 of atom ni) is row 2, column 4 + ni.
  for (int64_t ni = 0; ni < 4; ++ni) {
    const int64_t index = fragment.tv.index(5, 4 * ni);
    EXPECT_EQ(index % 16, 2) << "atom " << ni;
    EXPECT_EQ(index / 16, 4 + ni) << "atom " << ni;
  }
  // And c_0 of atom ni in lane 5 (row 1, atom column 2) is tile column 4 * 2 + ni.
  const RegisterLayout& product = mma->results[0]->layout;
  for (int64_t ni = 0; ni < 4; ++ni) {
    const int64_t mt = product.slots() / (4 * 4);
    const int64_t index = product.tv.index(5, 4 * (mt * ni));
    EXPECT_EQ(index % 64, 1) << "atom " << ni;
    EXPECT_EQ(index / 64, 8 + ni) << "atom " << ni;
  }
  // Four reads of 4 bytes per k step and lane, one per k row.
  const SharedAlloc& tile = kernel.shared.at(static_cast<size_t>(read->shared.alloc));
  const SharedReadPlan plan = shared_read_plan(tile, read->shared, fragment, read->results[0]->type.shape, DType::I8);
  ASSERT_EQ(plan.groups.size(), 4u);
  for (const std::vector<int64_t>& group : plan.groups) {
    EXPECT_EQ(group.size(), 4u);
    std::vector<int64_t> addresses;
    for (int64_t lane = 0; lane < 32; ++lane) {
      const int64_t index = fragment.tv.index(lane, group.front());  // (k, n) in the [16, 64] step
      addresses.push_back(tile.layout((index % 16) + (index / 16) * tile.shape[0]));
    }
    const auto conflicts = layout::count_bank_conflicts(addresses, 4);
    ASSERT_TRUE(conflicts.ok());
    EXPECT_EQ(conflicts->wavefronts, 1) << "slot " << group.front();
  }
  EXPECT_TRUE(plan.copies.empty());
  const std::string cuda = nautilus::testing::emitted_cuda(compilation);
  EXPECT_NE(cuda.find("ld_shared_u32((W_smem_addr"), std::string::npos);
  EXPECT_EQ(cuda.find("ld_shared_s8((W_smem_addr"), std::string::npos);
  for (uint64_t seed : {7, 8}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, "interleaved ");
}

TEST(WidenedOperand, TheLaunchDecisionAsksForGroupedReadsAndTheirInt8PairsAreWidenedFromTheWords) {
  // launch(..., reads=grouped) gives the kernel the grouped reads without the compile option,
  // so the search can try them per kernel. Their int8 bytes are widened two at a time straight
  // from the words they were read in (int8x2_to_bf16x2), not one by one from extracted slots;
  // reads=elements (the default) keeps the per-element reads and widening.
  std::vector<std::string> grouped = weight_gemm_schedule(64, 64, 128, 3);
  grouped.insert(grouped.end() - 1, "launch(Y_sum, warps=4, stages=3, reads=grouped)");
  std::vector<std::string> elements = weight_gemm_schedule(64, 64, 128, 3);
  elements.insert(elements.end() - 1, "launch(Y_sum, warps=4, stages=3, reads=elements)");
  const std::vector<std::string> sizes = {"M=70", "N=80", "K=384", "G=128", "KG=3"};
  const driver::Compilation with_reads = compile_for_arch("assets/specs/int8_weight_gemm.nt", grouped, sizes, "sm_90a");
  const driver::Compilation without = compile_for_arch("assets/specs/int8_weight_gemm.nt", elements, sizes, "sm_90a");
  ASSERT_TRUE(with_reads.ma_module) << with_reads.schedule_error << with_reads.internal_error;
  ASSERT_TRUE(without.ma_module) << without.schedule_error << without.internal_error;
  EXPECT_TRUE(with_reads.ma_module->kernels.at(0)->grouped_shared_reads);
  EXPECT_FALSE(without.ma_module->kernels.at(0)->grouped_shared_reads);
  const std::string cuda = nautilus::testing::emitted_cuda(with_reads);
  EXPECT_NE(cuda.find("ld_shared_u32((W_smem_addr"), std::string::npos);
  // Every pair of the fragment from words: no widening of a lone extracted slot is left.
  EXPECT_NE(cuda.find("unpack2(int8x2_to_bf16x2(bits_"), std::string::npos);
  EXPECT_EQ(cuda.find("nautilus_device::int8_to_bf16("), std::string::npos);
  EXPECT_EQ(cuda.find("int8x2_to_bf16x2(static_cast"), std::string::npos);
  const std::string plain = nautilus::testing::emitted_cuda(without);
  EXPECT_EQ(plain.find("unpack2(int8x2_to_bf16x2("), std::string::npos);
  EXPECT_NE(plain.find("nautilus_device::int8_to_bf16("), std::string::npos);
  expect_stage_matches_reference(with_reads, driver::Stage::MATile, 21, "reads=grouped ");
}

TEST(WidenedOperand, ByDefaultAnInt8WeightReadFourBytesAtATimeIsGroupedAndAnFp8OneIsNot) {
  // reads=auto (no launch decision): the int8 weights of 64 x 64 tiles on 2 x 2 warps (4 atoms
  // per warp) are read grouped and widened in pairs; the same tile of an fp8 B, widened one
  // element at a time either way, keeps the element-wise reads. Both match the reference.
  const driver::Compilation int8 =
      compile_for_arch("assets/specs/int8_weight_gemm.nt", weight_gemm_schedule(64, 64, 128, 3),
                       {"M=70", "N=80", "K=384", "G=128", "KG=3"}, "sm_80");
  ASSERT_TRUE(int8.ma_module) << int8.schedule_error << int8.internal_error;
  EXPECT_TRUE(int8.ma_module->kernels.at(0)->grouped_shared_reads);
  EXPECT_NE(nautilus::testing::emitted_cuda(int8).find("unpack2(int8x2_to_bf16x2(bits_"), std::string::npos);
  const driver::Compilation fp8 = compile_for_arch(
      "assets/specs/fp8_gemm.nt",
      {"tile(C_sum, m=64, n=64, k=32)", "reverse_compute_at(C, C_sum, n_o)", "bind(C_sum, m_o=grid.y, n_o=grid.x)"},
      {"M=96", "N=80", "K=96"}, "sm_80");
  ASSERT_TRUE(fp8.ma_module) << fp8.schedule_error << fp8.internal_error;
  EXPECT_FALSE(fp8.ma_module->kernels.at(0)->grouped_shared_reads);
  // Asked for, the fp8 kernel does take them: auto's choice, not a kernel that cannot.
  const driver::Compilation fp8_grouped = compile_for_arch(
      "assets/specs/fp8_gemm.nt",
      {"tile(C_sum, m=64, n=64, k=32)", "reverse_compute_at(C, C_sum, n_o)", "bind(C_sum, m_o=grid.y, n_o=grid.x)",
       "launch(C_sum, warps=4, stages=2, reads=grouped)"},
      {"M=96", "N=80", "K=96"}, "sm_80");
  ASSERT_TRUE(fp8_grouped.ma_module) << fp8_grouped.schedule_error << fp8_grouped.internal_error;
  EXPECT_TRUE(fp8_grouped.ma_module->kernels.at(0)->grouped_shared_reads);
  expect_stage_matches_reference(int8, driver::Stage::MATile, 31, "int8 auto ");
  expect_stage_matches_reference(fp8, driver::Stage::MATile, 32, "fp8 auto ");
}

TEST(WidenedOperand, GroupedReadsReadAOneRowActivationOnceAndCopyItsRepeatedRows) {
  // The one activation row fills the atom's 16 rows with copies of itself (layouts.h): with
  // grouped shared reads a lane reads each element once and copies it into the slots that
  // repeat it.
  // 64 columns on 2 warps: 4 n8 atoms per warp, the weights' bytes read 4 at a time.
  const driver::Compilation compilation = compile_grouped(
      {"tile(Y_sum, m=1, n=64, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
       "bind(Y_sum, m_o=grid.y, n_o=grid.x)", "launch(Y_sum, warps=2, stages=3)", "pipeline(Y_sum, stages=4)"},
      {"M=3", "N=192", "K=384", "G=128", "KG=3"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const Op* read = first_op(*kernel.body, [](const Op& op) {
    return op.kind == OpKind::SharedLoad && op.results[0]->type.dtype == DType::BF16;
  });
  ASSERT_TRUE(read);
  const SharedAlloc& tile = kernel.shared.at(static_cast<size_t>(read->shared.alloc));
  const SharedReadPlan plan =
      shared_read_plan(tile, read->shared, read->results[0]->layout, read->results[0]->type.shape, DType::BF16);
  int64_t read_slots = 0;
  for (const std::vector<int64_t>& group : plan.groups) read_slots += static_cast<int64_t>(group.size());
  EXPECT_EQ(read_slots + static_cast<int64_t>(plan.copies.size()), read->results[0]->layout.slots());
  EXPECT_EQ(read_slots, read->results[0]->layout.slots() / 2);  // rows g and g + 8 are one row
  for (const auto& [slot, source] : plan.copies) {
    for (int64_t thread = 0; thread < read->results[0]->layout.threads(); ++thread) {
      EXPECT_EQ(read->results[0]->layout.tv.index(thread, slot), read->results[0]->layout.tv.index(thread, source));
    }
  }
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 12, "one row ");
}

TEST(WidenedOperand, GroupedReadsAreRefusedWithANoteWhereTheWeightsWouldBeReadFewerThanFourBytesAtATime) {
  // 64 columns on 4 warps: 2 n8 atoms per warp, so a lane's bytes of one k row are 2. Read that
  // way the kernel was slower than element by element (H200), so the kernel keeps the
  // element-wise reads, says why, and still matches the reference.
  const driver::Compilation compilation = compile_grouped(
      {"tile(Y_sum, m=1, n=64, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
       "bind(Y_sum, m_o=grid.y, n_o=grid.x)", "pipeline(Y_sum, stages=4)"},
      {"M=3", "N=192", "K=384", "G=128", "KG=3"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_FALSE(kernel.grouped_shared_reads);
  bool noted = false;
  for (const std::string& note : kernel.notes) {
    noted |= note.find("shared reads element by element, not grouped: the widened 8-bit %W would be read 2 bytes at "
                       "a time (2 n8 atoms per warp); grouped reads pay off from 4") != std::string::npos;
  }
  EXPECT_TRUE(noted);
  const Op* read = first_op(*kernel.body, reads_int8_from_shared);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->results[0]->layout.column_interleave, 1);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 13, "refused ");
}

}  // namespace
}  // namespace nautilus::matile
