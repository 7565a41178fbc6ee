// GEMM chains with element-wise glue (GeGLU / SwiGLU MLPs, gemm -> gelu -> gemm) on the H100
// model: the search gives every GEMM kernel of the chain the warp-specialized (TMA + wgmma) form,
// fuses the element-wise gate into the epilogue of the GEMM that completes its inputs, and keeps
// the intermediate the next GEMM reads in 16 bits. The decisions are checked at sizes where they
// matter to the model; the same schedules then run in the MA interpreter at small ragged sizes
// against the float64 reference.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/cost/analytical_model.h"
#include "core/driver/evaluate.h"
#include "core/rewrite/stored_narrowing.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

// Y = (gelu_tanh(X Wg) * (X Wu)) Wd, the gate written out as users write it.
const char* const kGeglu =
    "input X[T, H] : bf16\ninput Wg[H, F] : bf16\ninput Wu[H, F] : bf16\ninput Wd[F, H] : bf16\n"
    "G[t, f] = sum(h) X[t, h] * Wg[h, f]\n"
    "U[t, f] = sum(h) X[t, h] * Wu[h, f]\n"
    "A[t, f] = 0.5 * G[t, f] * (1 + tanh(0.7978845608028654 * (G[t, f] + 0.044715 * G[t, f] * "
    "G[t, f] * G[t, f]))) * U[t, f]\n"
    "output Y[t, e] : bf16 = sum(f) A[t, f] * Wd[f, e]\n";

// Y = gelu_tanh(X W1) W2: one GEMM, element-wise glue, another GEMM.
const char* const kGemmGeluGemm =
    "input X[T, H] : bf16\ninput W1[H, F] : bf16\ninput W2[F, H] : bf16\n"
    "Z[t, f] = sum(h) X[t, h] * W1[h, f]\n"
    "A[t, f] = 0.5 * Z[t, f] * (1 + tanh(0.7978845608028654 * (Z[t, f] + 0.044715 * Z[t, f] * "
    "Z[t, f] * Z[t, f])))\n"
    "output Y[t, e] : bf16 = sum(f) A[t, f] * W2[f, e]\n";

std::string with_sizes(const std::string& body, int64_t t, int64_t h, int64_t f) {
  return "let T = " + std::to_string(t) + ", H = " + std::to_string(h) +
         ", F = " + std::to_string(f) + "\n" + body;
}

std::string text_of(const sched::Schedule& schedule) {
  std::string text;
  for (const sched::Decision& d : schedule.decisions) text += sched::print_decision(d) + "\n";
  return text;
}

bool has_dot(const vrtile::Region& region) {
  return std::any_of(region.ops.begin(), region.ops.end(), [](const vrtile::OpPtr& op) {
    return op->kind == vrtile::OpKind::Dot || (op->body && has_dot(*op->body));
  });
}

bool has_decision(const sched::Schedule& schedule, const std::string& kind,
                  const std::string& target) {
  return std::any_of(schedule.decisions.begin(), schedule.decisions.end(),
                     [&](const sched::Decision& d) { return d.kind == kind && d.target == target; });
}

// Searches the chain at 1024 tokens (large enough that the form of each GEMM decides the
// estimate), checks the decisions, then runs the found schedule at small ragged sizes in the MA
// interpreter against the float64 reference.
void expect_warp_specialized_chain(const std::string& body, const std::string& gate,
                                   const std::string& gate_producer) {
  const search::SearchInput input = testing::text_input(with_sizes(body, 1024, 512, 2048), {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string schedule = text_of(result.schedule);

  // The gate is computed in the epilogue of the GEMM whose tile completes its last input, or,
  // where two GEMMs feed it, of the one kernel that computes both (compute_with).
  const bool in_producer_epilogue = std::any_of(
      result.schedule.decisions.begin(), result.schedule.decisions.end(), [&](const sched::Decision& d) {
        return d.kind == "reverse_compute_at" && d.target == gate && !d.args.empty() &&
               d.args[0].as_name() == gate_producer;
      });
  const bool with_both_producers =
      has_decision(result.schedule, "compute_with", gate_producer) &&
      std::any_of(result.schedule.decisions.begin(), result.schedule.decisions.end(), [&](const sched::Decision& d) {
        return d.kind == "compute_at" && d.target == gate_producer && !d.args.empty() &&
               d.args[0].as_name() == gate;
      });
  EXPECT_TRUE(in_producer_epilogue || with_both_producers) << schedule;

  // Every kernel with a dot is warp-specialized.
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  int dot_kernels = 0;
  for (const vrtile::KernelPtr& kernel : compilation.vr_module->kernels) {
    if (!has_dot(*kernel->body)) continue;
    ++dot_kernels;
    EXPECT_TRUE(kernel->launch && kernel->launch->consumers > 0)
        << "kernel " << kernel->name << " is not warp-specialized:\n" << schedule;
  }
  EXPECT_GE(dot_kernels, 2) << schedule;
  // The intermediate the last GEMM reads is stored in bf16 (every reader rounds it anyway).
  const vrtile::Buffer* stored = compilation.vr_module->find_buffer(gate);
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ((*stored)->dtype, DType::BF16);

  // The same schedule at small sizes with partial tiles (rows stay multiples of 16 bytes for TMA).
  const search::SearchInput small = testing::text_input(with_sizes(body, 136, 72, 264), {});
  const driver::Compilation small_compilation = testing::compile(small, result.schedule);
  ASSERT_TRUE(small_compilation.ok())
      << small_compilation.schedule_error << small_compilation.internal_error << "\n" << schedule;
  testing::expect_stage_matches_reference(small_compilation, driver::Stage::MATile, 5, schedule);
}

TEST(GemmChain, GegluTakesTheWarpSpecializedFormOnEveryGemmAndFusesTheGate) {
  expect_warp_specialized_chain(kGeglu, "A", "U");
}

TEST(GemmChain, GemmGeluGemmTakesTheWarpSpecializedFormOnBothGemms) {
  expect_warp_specialized_chain(kGemmGeluGemm, "A", "Z");
}

// At the geglu variant's own sizes the gate and up projections run in one warp-specialized
// kernel (compute_with: one k loop reads each tile of X once for both, and the kernel computes
// the gate A from the two accumulators): measured on the H200 (2026-11-29, bench/RESULTS.md),
// 2394.3 us against 2852.1 us as two GEMMs and an element-wise kernel. Its token tiles run
// fastest (a wave shares each weight panel in L2; the other order rereads the weights from DRAM
// for every row of tiles), unless a grouped tile order gives that sharing too.
TEST(GemmChain, TheProjectionsRunInOneKernelWithTheirTokenTilesFastest) {
  const search::SearchInput input = testing::text_input(with_sizes(kGeglu, 4096, 3072, 24576), {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string schedule = text_of(result.schedule);
  EXPECT_TRUE(has_decision(result.schedule, "compute_with", "U")) << schedule;
  const auto bind = std::find_if(result.schedule.decisions.begin(), result.schedule.decisions.end(),
                                 [&](const sched::Decision& d) {
                                   return d.kind == "bind" && (d.target == "U" || d.target == "G" || d.target == "A");
                                 });
  ASSERT_NE(bind, result.schedule.decisions.end()) << schedule;
  const sched::DecisionArg* t_o = bind->find("t_o");
  ASSERT_NE(t_o, nullptr) << schedule;
  if (!has_decision(result.schedule, "tile_order", bind->target)) {
    EXPECT_EQ(t_o->as_name(), "grid.x") << schedule;
  }
  EXPECT_TRUE(has_decision(result.schedule, "warp_spec", bind->target)) << schedule;
}

// The gated MLP as the asset writes it: the down projection reads G and U inside its sum (Y =
// sum(f) silu(G) U Wd), so no gate tensor exists. The search factors silu(G) * U out of the down
// projection's update (factor) and computes it with both projections in one warp-specialized
// kernel (compute_with), which stores it in bf16 for the down projection: on the H200 model
// 1493 us against 2071 us for the schedule it found before (G and U stored in f32 and read by
// every column tile of the down projection; measured 2131.8 us, bench/RESULTS.md).
TEST(GemmChain, AGatedMlpFactorsItsGateOutOfTheDownProjection) {
  const search::SearchInput input = testing::asset_input("gated_mlp", {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string schedule = text_of(result.schedule);
  EXPECT_TRUE(has_decision(result.schedule, "factor", "Y_sum")) << schedule;
  EXPECT_TRUE(has_decision(result.schedule, "compute_with", "U")) << schedule;
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  EXPECT_EQ(compilation.vr_module->kernels.size(), 2u) << schedule;

  // The same schedule at small ragged sizes.
  const search::SearchInput small = testing::asset_input("gated_mlp", {"T=136", "H=72", "F=264"});
  const driver::Compilation small_compilation = testing::compile(small, result.schedule);
  ASSERT_TRUE(small_compilation.ok())
      << small_compilation.schedule_error << small_compilation.internal_error << "\n" << schedule;
  testing::expect_stage_matches_reference(small_compilation, driver::Stage::MATile, 5, schedule);
}

// The down projection tiled, so that it is a dot (which rounds its f32 operand to bf16).
sched::Schedule tiled_down_projection(const std::string& block) {
  sched::Schedule schedule;
  for (const std::string text :
       {"tile(" + block + ", t=16, e=16, f=16)", "reverse_compute_at(Y, " + block + ", e_o)",
        "bind(" + block + ", t_o=grid.y, e_o=grid.x)"}) {
    sched::DecisionParseError error;
    schedule.decisions.push_back(*sched::parse_decision(text, &error));
  }
  return schedule;
}

// The consumers of a warp-specialized kernel run under a setmaxnreg budget of 232: a plain
// 128 x 256 GEMM fits, the same GEMM with the gate in its epilogue (the accumulator and G's f32
// tile per thread) does not, and the model charges that kernel for spills.
TEST(RoleRegisters, AFusedGateEpilogueAt128x256ExceedsTheConsumerBudget) {
  const search::SearchInput input = testing::text_input(with_sizes(kGeglu, 256, 128, 512), {});
  sched::Schedule schedule;
  for (const std::string text :
       {"tile(U, t=128, f=256, h=64)", "tile(G, t=128, f=256, h=64)",
        "reverse_compute_at(A, U, f_o)", "bind(G, f_o=grid.y, t_o=grid.x)",
        "bind(U, f_o=grid.y, t_o=grid.x)", "warp_spec(G, consumers=2, stages=4)",
        "warp_spec(U, consumers=2, stages=4)"}) {
    sched::DecisionParseError error;
    schedule.decisions.push_back(*sched::parse_decision(text, &error));
  }
  const driver::Compilation compilation = testing::compile(input, schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  std::map<std::string, int> consumers;
  for (const matile::KernelPtr& kernel : compilation.ma_module->kernels) {
    const std::vector<int> roles = cost::estimate_role_registers(*kernel);
    if (roles.size() == 2) consumers[kernel->name] = roles[1];
  }
  ASSERT_EQ(consumers.count("G"), 1u);
  ASSERT_EQ(consumers.count("A"), 1u);  // U's kernel, named after the gate it ends with
  EXPECT_LE(consumers["G"], 232);
  EXPECT_GT(consumers["A"], 232);
}

// narrow-stored-intermediates is exact: the rounded intermediate is the value every reader
// rounded before; the interpreters still match the float64 reference.
TEST(StoredNarrowing, AnIntermediateEveryReaderRoundsIsStoredIn16Bits) {
  const std::string text = with_sizes(kGeglu, 40, 24, 48);
  const search::SearchInput input = testing::text_input(text, {});
  const driver::Compilation compilation =
      testing::compile(input, tiled_down_projection("Y_sum"), driver::Stage::MATile);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const vrtile::Buffer* a = compilation.vr_module->find_buffer("A");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ((*a)->dtype, DType::BF16);
  // G and U are read in f32 by the gate: they stay f32.
  EXPECT_EQ((*compilation.vr_module->find_buffer("G"))->dtype, DType::F32);
  EXPECT_EQ((*compilation.vr_module->find_buffer("U"))->dtype, DType::F32);
  testing::expect_stage_matches_reference(compilation, driver::Stage::VRTile, 3, "geglu");
  testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 3, "geglu");
  // Running the pass again changes nothing.
  EXPECT_EQ(rewrite::narrow_stored_intermediates(compilation.vr_module), compilation.vr_module);
}

TEST(StoredNarrowing, AnIntermediateAlsoReadInF32KeepsF32) {
  // A feeds the GEMM (rounded) and an f32 output (not rounded): it stays f32.
  const std::string text =
      "let T = 40, H = 24, F = 48\n"
      "input X[T, H] : bf16\ninput W1[H, F] : bf16\ninput W2[F, H] : bf16\n"
      "Z[t, f] = sum(h) X[t, h] * W1[h, f]\n"
      "A[t, f] = Z[t, f] * sigmoid(Z[t, f])\n"
      "output Y[t, e] : bf16 = sum(f) A[t, f] * W2[f, e]\n"
      "output S[t] : f32 = sum(f) A[t, f]\n";
  const search::SearchInput input = testing::text_input(text, {});
  const driver::Compilation compilation =
      testing::compile(input, tiled_down_projection("Y_sum"), driver::Stage::VRTile);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const vrtile::Buffer* a = compilation.vr_module->find_buffer("A");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ((*a)->dtype, DType::F32);
  testing::expect_stage_matches_reference(compilation, driver::Stage::VRTile, 3, "two readers");
}

}  // namespace
}  // namespace nautilus
