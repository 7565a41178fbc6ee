// The Hopper ops in the MA printers and walkers: the warp-specialized GEMM (hopper_kernels.h)
// against golden text and DOT under tests/golden/matile (NAUTILUS_UPDATE_GOLDEN=1 rewrites
// them), its JSON, and the visitor and rebuilder descending into role bodies.
#include <gtest/gtest.h>

#include "core/matile/interpreter.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"
#include "tests/common/golden.h"
#include "tests/common/hopper_kernels.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::expect_golden;

ModulePtr small_gemm() { return testing::hopper_gemm(testing::HopperGemmShape{72, 40, 200, 2}); }

TEST(HopperPrinter, GemmGoldens) {
  const ModulePtr module = small_gemm();
  ASSERT_TRUE(verify(*module).empty());
  expect_golden("matile/hopper_gemm.txt", print_module(*module));
  expect_golden("matile/hopper_gemm.dot", module_to_dot(*module));
}

TEST(HopperPrinter, JsonCarriesRolesBarriersAndTensorMaps) {
  const nlohmann::ordered_json json = module_to_json(*small_gemm());
  const auto& kernel = json["kernels"][0];
  ASSERT_EQ(kernel["mbarriers"].size(), 2u);
  EXPECT_EQ(kernel["mbarriers"][1]["name"], "empty");
  EXPECT_EQ(kernel["mbarriers"][1]["arrivals"], 2);
  ASSERT_EQ(kernel["tensor_maps"].size(), 3u);
  EXPECT_EQ(kernel["tensor_maps"][0]["buffer"], "A");
  EXPECT_EQ(kernel["tensor_maps"][0]["swizzle_bytes"], 128);
  const nlohmann::ordered_json* roles = nullptr;
  for (const auto& op : kernel["body"]) {
    if (op["kind"] == "roles") roles = &op["roles"];
  }
  ASSERT_NE(roles, nullptr);
  ASSERT_EQ(roles->size(), 3u);
  EXPECT_EQ((*roles)[0]["name"], "producer");
  EXPECT_EQ((*roles)[0]["max_registers"], 40);
  EXPECT_EQ((*roles)[2]["warpgroups"], 1);
  // The producer's loop issues the TMA loads on the full barrier's slot.
  const auto& loop = (*roles)[0]["body"][0];
  ASSERT_EQ(loop["kind"], "for");
  bool saw_tma = false;
  for (const auto& op : loop["body"]) {
    if (op["kind"] != "tma_load") continue;
    saw_tma = true;
    EXPECT_EQ(op["mbarrier"], "full[%s]");
    EXPECT_EQ(op["instruction"],
              "cp.async.bulk.tensor.shared::cluster.global.tile.mbarrier::complete_tx::bytes");
  }
  EXPECT_TRUE(saw_tma);
  const std::string text = json.dump();
  EXPECT_NE(text.find("\"form\":\"ss\""), std::string::npos);
  EXPECT_NE(text.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"), std::string::npos);
}

TEST(HopperWalkers, VisitRoleBodiesAndRebuildThem) {
  const ModulePtr module = small_gemm();
  const Kernel& kernel = *module->kernels[0];
  int wgmmas = 0, waits = 0;
  for_each_op(*kernel.body, [&](const Op& op) {
    wgmmas += op.kind == OpKind::Wgmma;
    waits += op.kind == OpKind::MBarrierWait;
  });
  EXPECT_EQ(wgmmas, 4);  // two per consumer: the peeled first step and the loop's
  EXPECT_EQ(waits, 5);   // the producer's empty wait and two full waits per consumer

  // Keeping every op returns the kernel itself.
  Rebuilder keep(kernel);
  EXPECT_EQ(keep.run(module->kernels[0], keep_op), module->kernels[0]);

  // Renaming the producer's stage scalar reaches the slot index of its TMA loads and waits.
  Rebuilder rename(kernel);
  const KernelPtr renamed = rename.run(module->kernels[0], [](const Op& original, const OpPtr& op,
                                                              Rebuilder& out) {
    if (original.kind == OpKind::Binary && original.results[0]->name == "s") {
      const Value fresh = out.fresh_value(original.results[0], ".stage");
      out.map()[original.results[0].get()] = fresh;
      Op copy = *op;
      copy.results = {fresh};
      out.emit(make_op(std::move(copy)));
      return;
    }
    out.emit(op);
  });
  ASSERT_NE(renamed, module->kernels[0]);
  const std::string text = print_kernel(*renamed);
  EXPECT_NE(text.find("tma.load As[%s.stage][0, 0] <- tmA[%m0, %k0] mbarrier full[%s.stage]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mbarrier.wait empty[%s.stage] parity %released"), std::string::npos);
  Module copy = *module;
  copy.kernels = {renamed};
  EXPECT_TRUE(verify(copy).empty());
}

}  // namespace
}  // namespace nautilus::matile
