// A wgmma whose A fragment comes from registers (the RS form) must retire before its loop's
// iteration ends: the emitted body declares its values afresh each iteration and ptxas gives the
// next A fragment the same registers, which the tensor cores may still be reading. Found on the
// H100: the gated MLP's down projection, whose A is silu(G) * U computed in registers, kept one
// wgmma group in flight across iterations and produced NaN rows now and then. The lowering now
// waits for every group at the end of such an iteration, and the MA interpreter reports a loop
// that does not (operand_in_flight).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/matile/interpreter.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::expect_stage_matches_reference;

const std::vector<std::string> kGatedMlp = {
    "tile(Y_sum, t=128, e=256, f=64)",   "tile(U, t=128, f=256, h=64)",
    "tile(G, t=128, f=256, h=64)",       "reverse_compute_at(Y, Y_sum, e_o)",
    "bind(G, t_o=grid.y, f_o=grid.x)",   "bind(U, t_o=grid.y, f_o=grid.x)",
    "bind(Y_sum, e_o=grid.y, t_o=grid.x)", "warp_spec(G, consumers=2, stages=3)",
    "warp_spec(U, consumers=2, stages=4)", "warp_spec(Y_sum, consumers=2, stages=4)",
    "persistent(Y_sum)",
};

bool is_rs_wgmma(const Op& op) { return op.kind == OpKind::Wgmma && op.operands.size() == 2; }

// The last wgmma.wait_group of every loop body that issues an RS wgmma, rewritten to keep
// `pending` groups in flight; returns how many it rewrote.
RegionPtr rewrite_waits(const RegionPtr& region, int64_t pending, int* rewritten) {
  std::vector<OpPtr> ops = region->ops;
  const bool issues_rs = std::any_of(ops.begin(), ops.end(), [](const OpPtr& op) { return is_rs_wgmma(*op); });
  if (issues_rs) {
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      if ((*it)->kind != OpKind::WgmmaWaitGroup) continue;
      auto copy = std::make_shared<Op>(**it);
      copy->extent = pending;
      *it = std::move(copy);
      ++*rewritten;
      break;
    }
  }
  for (OpPtr& op : ops) {
    if (!op->body && op->roles.empty()) continue;
    auto copy = std::make_shared<Op>(*op);
    if (copy->body) copy->body = rewrite_waits(copy->body, pending, rewritten);
    for (WarpRole& role : copy->roles) role.body = rewrite_waits(role.body, pending, rewritten);
    op = std::move(copy);
  }
  return make_region(std::move(ops));
}

TEST(RegisterOperand, AnRsWgmmaRetiresBeforeItsIterationEnds) {
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/gated_mlp.nt", kGatedMlp, {"T=256", "H=128", "F=512"}, "sm_90a");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const Module& module = *compilation.ma_module;
  ASSERT_EQ(module.kernels.size(), 3u);
  const Kernel& down = *module.kernels.back();
  ASSERT_NE(nautilus::testing::first_op(*down.body, is_rs_wgmma), nullptr)
      << "the down projection's A is not in registers";
  for (uint64_t seed : {1, 2}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed);

  // The same kernel keeping one group in flight across the iteration's end, as a GEMM whose A
  // sits in shared memory does: the interpreter names the hazard.
  auto racy = std::make_shared<Module>(module);
  auto kernel = std::make_shared<Kernel>(down);
  int rewritten = 0;
  kernel->body = rewrite_waits(kernel->body, 1, &rewritten);
  ASSERT_EQ(rewritten, 1);
  racy->kernels.back() = kernel;
  const InterpretResult result = interpret(*racy, nautilus::testing::module_inputs(*racy, 3));
  ASSERT_FALSE(result.ok);
  EXPECT_EQ(result.error_kind, InterpretErrorKind::OperandInFlight) << result.error;
  EXPECT_NE(result.error.find("reads its A operand from registers the next iteration overwrites"),
            std::string::npos)
      << result.error;
}

}  // namespace
}  // namespace nautilus::matile
