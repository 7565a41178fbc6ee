// Register splits between warp roles (matile/role_registers.h): the alternatives a package build
// tries when ptxas spills a Hopper kernel, the rewrite that moves registers between the producer
// and the consumers, and the package build that uses it on the held-out ALiBi attention, whose
// searched schedule spilled at the lowering's split.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "core/driver/kernel_package.h"
#include "core/driver/pipeline.h"
#include "core/matile/printer.h"
#include "core/matile/role_registers.h"
#include "core/matile/verifier.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::expect_stage_matches_reference;
using nautilus::testing::roles_op;

driver::Compilation attention_on(int consumers) {
  return compile_for_arch("assets/specs/attention.nt",
                          nautilus::testing::warp_spec_attention({.consumers = consumers, .stages = 2}),
                          {"B=1", "H=2", "M=" + std::to_string(64 * consumers), "N=200", "D=64"});
}

TEST(RoleRegisters, AlternativesAreLegalSplitsNearestFirst) {
  const driver::Compilation two = attention_on(2);
  ASSERT_TRUE(two.ma_module) << two.schedule_error;
  const Kernel& kernel = *two.ma_module->kernels.at(0);
  ASSERT_EQ(roles_op(kernel)->roles.at(1).max_registers, 232);
  // 248 is above the 240 a consumer may take.
  EXPECT_EQ(consumer_register_alternatives(kernel), (std::vector<int>{240, 224, 216}));

  const driver::Compilation three = attention_on(3);
  ASSERT_TRUE(three.ma_module) << three.schedule_error;
  const Kernel& wide = *three.ma_module->kernels.at(0);
  ASSERT_EQ(roles_op(wide)->roles.at(1).max_registers, 160);
  // 168 and 176 leave the producer fewer than 24 of the 512.
  EXPECT_EQ(consumer_register_alternatives(wide), (std::vector<int>{152, 144}));

  // A kernel without roles has none.
  const driver::Compilation plain = compile_for_arch("assets/specs/gemm.nt", {}, {"M=64", "N=64", "K=64"});
  ASSERT_TRUE(plain.ma_module) << plain.schedule_error;
  EXPECT_TRUE(consumer_register_alternatives(*plain.ma_module->kernels.at(0)).empty());
  EXPECT_EQ(with_consumer_registers(plain.ma_module->kernels.at(0), 240), nullptr);
}

TEST(RoleRegisters, TheRebalancedKernelOnlyMovesRegistersAndKeepsItsResult) {
  driver::Compilation compilation = attention_on(2);
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const KernelPtr& kernel = compilation.ma_module->kernels.at(0);
  EXPECT_EQ(with_consumer_registers(kernel, 248), nullptr) << "above 240";
  EXPECT_EQ(with_consumer_registers(kernel, 236), nullptr) << "not a multiple of 8";
  const KernelPtr rebalanced = with_consumer_registers(kernel, 240);
  ASSERT_NE(rebalanced, nullptr);
  EXPECT_EQ(roles_op(*rebalanced)->roles.at(0).max_registers, 24);
  EXPECT_EQ(roles_op(*rebalanced)->roles.at(1).max_registers, 240);
  EXPECT_EQ(roles_op(*kernel)->roles.at(1).max_registers, 232) << "the input is left alone";
  ASSERT_FALSE(rebalanced->notes.empty());
  EXPECT_EQ(rebalanced->notes.back(),
            "registers: producer 24, consumers 240 (setmaxnreg; the lowering chose 40 / 232, at which "
            "ptxas spilled)");
  // Apart from the two budgets and the note, the kernel prints the same.
  std::string before = print_kernel(*kernel), after = print_kernel(*rebalanced);
  const auto drop = [](std::string text, const std::string& what) {
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what)) text.erase(at, what.size());
    return text;
  };
  before = drop(drop(before, "registers 40 "), "registers 232");
  after = drop(drop(drop(after, "registers 240"), "registers 24 "), "  // " + rebalanced->notes.back() + "\n");
  EXPECT_EQ(before, after);

  auto module = std::make_shared<Module>(*compilation.ma_module);
  module->kernels[0] = rebalanced;
  EXPECT_TRUE(verify(*module).empty());
  compilation.ma_module = module;
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 7, "producer 24, consumers 240");
}

// The lowering gives the consumers more than the default split when its estimate of their main
// loop needs it: a 128 x 128 overlapped tile at d 128 over keys that end in a partial tile (the
// held-out GQA variant at 8191 keys) takes 240, the producer 24; over whole tiles, 232 suffice.
// The compilation's sm_90a package, checked to build and not to spill (nullopt, with the test
// failed, otherwise).
std::optional<codegen::KernelPackage> package_without_spills(const driver::Compilation& compilation,
                                                             const driver::PackageOptions& options = {}) {
  EXPECT_TRUE(compilation.ma_module) << compilation.schedule_error;
  if (!compilation.ma_module) return std::nullopt;
  codegen::Result<codegen::KernelPackage> package =
      driver::build_kernel_package(compilation, compilation.ma_module, {codegen::GpuArch::Sm90a}, options);
  EXPECT_TRUE(package.ok()) << (package.ok() ? std::string() : package.error().message);
  if (!package.ok()) return std::nullopt;
  EXPECT_FALSE(package->report.any_spills());
  return std::move(package).value();
}

TEST(RoleRegisters, ConsumersTakeMoreWhenTheirMainLoopNeedsIt) {
  for (const int keys : {1024, 1000}) {
    SCOPED_TRACE(keys);
    const driver::Compilation compilation = compile_for_arch(
        "assets/specs/attention.nt",
        nautilus::testing::warp_spec_attention({.key_tile = 128, .consumers = 2, .stages = 2, .overlap = true}),
        {"B=1", "H=1", "M=128", "N=" + std::to_string(keys), "D=128"});
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    const bool partial = keys % 128 != 0;
    EXPECT_EQ(roles_op(kernel)->roles.at(0).max_registers, partial ? 24 : 40);
    EXPECT_EQ(roles_op(kernel)->roles.at(1).max_registers, partial ? 240 : 232);
    const bool noted = std::any_of(kernel.notes.begin(), kernel.notes.end(), [](const std::string& n) {
      return n.rfind("registers: consumers 240, producer 24 (setmaxnreg): the main loop needs about", 0) == 0;
    });
    EXPECT_EQ(noted, partial);
    if (partial) expect_stage_matches_reference(compilation, driver::Stage::MATile, 11, "consumers 240");
  }
}

// The held-out ALiBi attention with the schedule `nautilus schedule` found for it (two consumers,
// overlap, persistent, ping-pong): ptxas spilled 4 bytes at the lowering's 40 / 232 split (NVRTC
// 13.0). The package build compiles it without spills, at whichever split it needed.
TEST(RoleRegisters, TheAlibiVariantsSearchedScheduleBuildsWithoutSpills) {
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc.ok()) GTEST_SKIP() << nvrtc.error().message;
  const driver::Compilation compilation = compile_for_arch(
      "bench/variants/alibi_causal.nt",
      {"rolling_update(O_sum, n, tile=128)", "compute_at(S, Mx, n_o)", "compute_at(S_sum, S, n_o)",
       "tile(O_sum_acc, m=128)", "reverse_compute_at(O, O_sum, m_o)",
       "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)", "skip_masked(S, n_o)",
       "tile_order(O_sum_acc, reverse=m_o)", "warp_spec(O_sum_acc, consumers=2, stages=3, overlap=1)",
       "persistent(O_sum_acc)", "pipeline(O_sum_acc, stages=3, consumers=2, pingpong=1)"},
      {});
  const std::optional<codegen::KernelPackage> package = package_without_spills(compilation);
  ASSERT_TRUE(package);
  for (const std::string& note : package->notes) {
    EXPECT_NE(note.find("registers: producer"), std::string::npos) << note;
  }
}

// FlashAttention-3's d 64 form (three consumers of 160 registers, a 192-row tile, overlap,
// persistent) sits at ptxas' edge: with exp2 on the SFU alone it spills 4 bytes at ptxas' default
// register usage level (NVRTC 13.0) and at every register split. The package build then lowers the
// level before it falls back to the guarded exp2f, which cost 12.7% at S 16384 (bench/NOTES.md).
// Whatever the toolkit, the package builds without spills, and a note says what changed where
// something did; with NVRTC 13.0 the SFU-only exp2 stays.
TEST(RoleRegisters, ThreeConsumersAtTheirEdgeBuildWithoutSpills) {
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc.ok()) GTEST_SKIP() << nvrtc.error().message;
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/attention.nt",
      {"rolling_update(O_sum, n, tile=128)", "compute_at(S, Mx, n_o)", "tile(O_sum_acc, m=192)",
       "reverse_compute_at(O, O_sum, m_o)", "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)",
       "warp_spec(O_sum_acc, consumers=3, stages=3, overlap=1)", "persistent(O_sum_acc)"},
      {"B=8", "H=32", "M=2048", "N=2048", "D=64"});
  const std::optional<codegen::KernelPackage> package = package_without_spills(compilation);
  ASSERT_TRUE(package);
  const bool guarded = package->source.find("= exp2f(") != std::string::npos;
  const bool noted = std::any_of(package->notes.begin(), package->notes.end(), [](const std::string& n) {
    return n.find("exp2 as exp2f") != std::string::npos;
  });
  EXPECT_EQ(guarded, noted) << "the guarded exp2 is used only where a note says why";
  const bool lowered = std::any_of(package->nvrtc_options.begin(), package->nvrtc_options.end(),
                                   [](const std::string& o) { return o.find("--register-usage-level") != std::string::npos; });
  const bool lowered_noted = std::any_of(package->notes.begin(), package->notes.end(), [](const std::string& n) {
    return n.find("ptxas at register usage level") != std::string::npos;
  });
  EXPECT_EQ(lowered, lowered_noted) << "the lowered register usage level is used only where a note says why";
  if (package->nvrtc_version == "13.0") {
    EXPECT_FALSE(guarded) << "NVRTC 13.0 fits the SFU-only exp2 at a lower register usage level";
    EXPECT_TRUE(lowered);
  }
  // Asked for, the guarded form is used everywhere, without a note.
  driver::PackageOptions options;
  options.approximate_exp2 = false;
  const codegen::Result<codegen::KernelPackage> everywhere =
      driver::build_kernel_package(compilation, compilation.ma_module, {codegen::GpuArch::Sm90a}, options);
  ASSERT_TRUE(everywhere.ok()) << everywhere.error().message;
  EXPECT_EQ(everywhere->source.find("= exp2_approx("), std::string::npos);
  EXPECT_TRUE(everywhere->notes.empty());
}

}  // namespace
}  // namespace nautilus::matile
