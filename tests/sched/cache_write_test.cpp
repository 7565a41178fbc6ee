// cache_write: golden before/after, exact interpreter equivalence on several assets (register
// accumulators with and without a write-back, the running statistics of rolling_update), a
// missing write-back caught, and the failure reasons.
#include "core/sched/cache_write.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"
#include "tests/sched/stage_test_util.h"

namespace nautilus::sched {
namespace {

using namespace scalar;
using testing::apply_decisions;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;

TEST(CacheWrite, GemmAccumulatorInRegistersGolden) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto after = testing::expect_golden_schedule(
      gemm, "sched/cache_write_gemm.txt",
      {"tile(C_sum, m=4, n=4, k=8)", "reverse_compute_at(C, C_sum, n_o)"},
      {"cache_write(C_sum, register, at=n_o)"});
  const std::string text = print_program(*after);
  // C, the only reader, is under n_o: the accumulator is never stored.
  EXPECT_EQ(after->find_buffer("C_sum"), nullptr) << text;
  EXPECT_NE(text.find("alloc C_sum_reg : f32[4, 4] register"), std::string::npos) << text;
  EXPECT_NE(text.find("C[m, n] = bf16(C_sum_reg[m % 4, n % 4])"), std::string::npos) << text;
}

TEST(CacheWrite, WriteBackWhenReadAfterTheLoop) {
  auto gemm = lower_asset("gemm", {"M=13", "N=10", "K=24"});
  auto after = apply_decisions(gemm.program, {"tile(C_sum, m=4, n=4, k=8)",
                                              "cache_write(C_sum, shared, at=n_o)"});
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("block C_sum_writeback(m = m_o * 4 + m, n = n_o * 4 + n) if m_o * 4 + m < "
                      "13 and n_o * 4 + n < 10:\n          C_sum[m, n] = C_sum_shared[m % 4, "
                      "n % 4]"),
            std::string::npos)
      << text;
  expect_same_results(gemm, after);
}

TEST(CacheWrite, RunningStatisticsOfTheRollingLoopInRegisters) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=5", "N=20", "D=8"});
  testing::LoweredAsset rolled = attention;
  rolled.program = apply_decisions(attention.program, {"rolling_update(O_sum, n, tile=8)"});
  auto after = apply_decisions(rolled.program, {"cache_write(O_sum_acc, register, at=m)",
                                                "cache_write(L, register, at=m)",
                                                "cache_write(Mx_prev, register, at=m)"});
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("alloc O_sum_acc_reg : f32[8] register"), std::string::npos) << text;
  EXPECT_NE(text.find("O_sum[b, h, m, d] = O_sum_acc_reg[d] / L_reg[0]"), std::string::npos)
      << text;
  EXPECT_EQ(after->find_buffer("O_sum_acc"), nullptr);
  expect_same_results(rolled, after);
}

TEST(CacheWrite, SeveralAssetsAtSizesThatDoNotDivide) {
  testing::expect_cases_same_results({
      {"gemm", {"M=5", "N=3", "K=7"}, {"cache_write(C_sum, register)"}},
      {"batched_gemm",
       {"Z=2", "M=6", "N=5", "K=16"},
       {"tile(C_sum, m=4, n=2)", "reverse_compute_at(C, C_sum, n_o)",
        "cache_write(C_sum, register, at=n_o)", "cache_write(C, shared, at=n_o)"}},
      {"softmax",
       {"R=5", "C=33"},
       {"tile(Y_sum, r=2)", "cache_write(Y_sum, register, at=r_i)"}},
      {"layernorm", {"T=3", "H=40"}, {"tile(Y, t=2, h=16)", "cache_write(Y, shared, at=h_o)"}},
      {"gated_mlp",
       {"T=5", "H=16", "F=24"},
       {"tile(G, t=2, f=8)", "cache_write(G, register, at=f_o)"}},
  });
}

TEST(CacheWrite, AMissingWriteBackIsCaught) {
  auto gemm = lower_asset("gemm", {"M=8", "N=8", "K=16"});
  auto after = apply_decisions(gemm.program, {"tile(C_sum, m=4, n=4, k=8)",
                                              "cache_write(C_sum, register, at=n_o)"});
  EXPECT_EQ(testing::worst_output_error(gemm, after), 0.0);
  auto broken = testing::rewrite_block(after, "C_sum_writeback", [](const Block&) {
    return nullptr;
  });
  EXPECT_GT(testing::worst_output_error(gemm, broken), 1e-2);
}

TEST(CacheWrite, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto tiled = apply_decisions(gemm.program, {"tile(C_sum, m=4, n=4, k=8)"});
  EXPECT_EQ(failure_reason(tiled, "cache_write(C_sum, register, at=k_o)"),
            "the part of C_sum accessed in one iteration of loop k_o does not move with loop "
            "k_o; its iterations would share elements of the local buffer (place the cache "
            "inside the loop that completes them)");
  EXPECT_EQ(failure_reason(tiled, "cache_write(C_sum, register, at=q)"),
            "block C_sum has no loop q around it; its loops are m_o, n_o, k_o, m_i, n_i, k_i");
  EXPECT_EQ(failure_reason(tiled, "cache_write(C_sum, global)"),
            "cache_write(BLOCK, shared|register[, at=LOOP]): the scope is shared or register");
  EXPECT_EQ(failure_reason(tiled, "cache_write(Nope, register)"),
            "program gemm has no block Nope; its blocks are C_sum, C");

  auto attention = lower_asset("attention", {"B=1", "H=1", "M=3", "N=8", "D=4"});
  auto rolled = apply_decisions(attention.program, {"rolling_update(O_sum, n, tile=4)"});
  EXPECT_EQ(failure_reason(rolled, "cache_write(O_sum_acc, register, at=n_o)"),
            "block O_sum_acc_init writes O_sum_acc outside loop n_o; cache_write needs every "
            "write of O_sum_acc under it");
  // L is read whole by the final division but written per step: m is the smallest scope.
  EXPECT_EQ(failure_reason(rolled, "cache_write(L, register, at=d)"),
            "block L has no loop d around it; its loops are b, h, m, n_o, n_i");
}

}  // namespace
}  // namespace nautilus::sched
