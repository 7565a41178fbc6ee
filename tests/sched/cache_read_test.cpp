// cache_read: golden before/after, exact interpreter equivalence on several assets at sizes the
// tiles do not divide, a stale copy caught, and the failure reasons.
#include "core/sched/cache_read.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "core/sched/loop_nest.h"
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

TEST(CacheRead, GemmTilesIntoSharedMemoryGolden) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto after = testing::expect_golden_schedule(
      gemm, "sched/cache_read_gemm.txt", {"tile(C_sum, m=4, n=4, k=8)"},
      {"cache_read(C_sum, A, shared, at=k_o)", "cache_read(C_sum, B, register, at=k_o)"});
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("alloc A_shared : bf16[4, 8] shared"), std::string::npos) << text;
  EXPECT_NE(text.find("alloc B_reg : bf16[8, 4] register"), std::string::npos) << text;
  EXPECT_NE(text.find("f32(A_shared[m % 4, k % 8]) * f32(B_reg[k % 8, n % 4])"),
            std::string::npos)
      << text;
  // N = 10 is not a multiple of 4: the copy of the last column tile is masked.
  EXPECT_NE(text.find("block B_reg(k = k_o * 8 + k, n = n_o * 4 + n) if n_o * 4 + n < 10:"),
            std::string::npos)
      << text;
}

TEST(CacheRead, KeyAndValueTilesPerStepOfTheRollingLoop) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=3", "N=20", "D=8"});
  // Against the rolling program, so that the copies are checked to change no bit.
  testing::LoweredAsset rolled = attention;
  rolled.program = apply_decisions(attention.program, {"rolling_update(O_sum, n, tile=8)"});
  auto after = apply_decisions(rolled.program, {"cache_read(O_sum_acc, V, shared, at=n_o)",
                                                "cache_read(S, K, shared, at=m)"});
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("alloc V_shared : bf16[8, 8] shared"), std::string::npos) << text;
  EXPECT_NE(text.find("f32(V_shared[n % 8, d])"), std::string::npos) << text;
  EXPECT_NE(text.find("alloc K_shared : bf16[20, 8] shared"), std::string::npos) << text;
  expect_same_results(rolled, after);
  testing::LoweredAsset causal = lower_asset("causal_attention", {"B=1", "H=1", "M=7", "N=7", "D=4"});
  causal.program = apply_decisions(causal.program, {"rolling_update(O_sum, n, tile=3)"});
  expect_same_results(causal, apply_decisions(causal.program,
                                              {"cache_read(O_sum_acc, V, shared, at=n_o)"}));
}

TEST(CacheRead, SeveralAssetsAtSizesThatDoNotDivide) {
  testing::expect_cases_same_results({
      {"gemm",
       {"M=13", "N=10", "K=23"},
       {"tile(C_sum, m=4, n=3, k=8)", "cache_read(C_sum, A, shared, at=k_o)",
        "cache_read(C_sum, B, shared, at=k_o)"}},
      // A whole tensor, copied once before the nest.
      {"gemm", {"M=5", "N=3", "K=7"}, {"cache_read(C_sum, B, shared)"}},
      {"batched_gemm",
       {"Z=2", "M=6", "N=5", "K=16"},
       {"tile(C_sum, m=4, k=6)", "cache_read(C_sum, A, shared, at=k_o)"}},
      // K[b, h / 4, n, d]: the head of the shared K is fixed in each iteration of h.
      {"gqa_attention",
       {"B=1", "H=8", "KH=2", "M=3", "N=10", "D=4"},
       {"cache_read(S, K, shared, at=h)", "cache_read(O_sum, V, register, at=m)"}},
      {"softmax", {"R=5", "C=33"}, {"tile(Mx, c=8)", "cache_read(Mx, X, register, at=c_o)"}},
      {"layernorm", {"T=3", "H=40"}, {"cache_read(Y, G, shared)", "cache_read(Y, Bt, shared)"}},
      {"gated_mlp", {"T=5", "H=16", "F=24"}, {"cache_read(G, Wg, shared, at=t)"}},
  });
}

TEST(CacheRead, AStaleCopyIsCaught) {
  // The same copy placed after its reader in each k_o iteration: the block reads the previous
  // tile (or nothing), which the interpreter reports.
  auto gemm = lower_asset("gemm", {"M=8", "N=8", "K=16"});
  auto after = apply_decisions(gemm.program, {"tile(C_sum, m=4, n=4, k=8)",
                                              "cache_read(C_sum, A, shared, at=k_o)"});
  EXPECT_EQ(testing::worst_output_error(gemm, after), 0.0);
  const For& k_o = *find_block(after->body, "C_sum")->stmts[3]->as<For>();
  ASSERT_EQ(k_o.var->name, "k_o");
  const std::vector<Stmt> children = loop_children(k_o);
  ASSERT_EQ(children.size(), 2u);
  const Stmt swapped = make_for(k_o.var, k_o.extent, make_seq({children[1], children[0]}));
  auto broken = with_body(after, replace_at(*find_block(after->body, "C_sum"), 3, swapped));
  EXPECT_GT(testing::worst_output_error(gemm, broken), 1e-2);
}

TEST(CacheRead, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, Q, shared)"),
            "program gemm has no tensor Q");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C, A, shared)"),
            "block C does not read A");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, C_sum, shared)"),
            "block C_sum writes C_sum; cache_read localizes a tensor the block only reads "
            "(cache_write localizes what it writes)");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, A, shared, at=q)"),
            "block C_sum has no loop q around it; its loops are m, n, k");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, A, global)"),
            "cache_read(BLOCK, TENSOR, shared|register[, at=LOOP][, readers=all][, tail=global]): the scope is "
            "shared or register, got global");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, A, shared, at=k, x=1)"),
            "cache_read(BLOCK, TENSOR, shared|register[, at=LOOP][, readers=all][, tail=global]): the keywords "
            "are at=LOOP, readers=all and tail=global");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, A, shared, at=k, readers=some)"),
            "cache_read(BLOCK, TENSOR, shared|register[, at=LOOP][, readers=all][, tail=global]): readers takes "
            "the value all, got some");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, A, shared, readers=all)"),
            "cache_read(BLOCK, TENSOR, shared|register[, at=LOOP][, readers=all][, tail=global]): readers=all "
            "needs at=LOOP: the readers share one copy per iteration of it");
  EXPECT_EQ(failure_reason(gemm.program, "cache_read(C_sum, A, shared, at=k, readers=all, tail=dram)"),
            "cache_read(BLOCK, TENSOR, shared|register[, at=LOOP][, readers=all][, tail=global]): "
            "tail takes the value global, got dram");
  // A running value written in the same step is not final when the copy would be made.
  auto attention = lower_asset("attention", {"B=1", "H=1", "M=3", "N=8", "D=4"});
  auto rolled = apply_decisions(attention.program, {"rolling_update(O_sum, n, tile=4)"});
  EXPECT_EQ(failure_reason(rolled, "cache_read(O_sum_acc, Mx, register, at=n_o)"),
            "loop n_o iterates reduction axis n of block Mx, whose values are final only after "
            "it; block Mx_reg cannot read Mx in the same iteration");
  EXPECT_EQ(failure_reason(rolled, "cache_read(Mx_prev, Mx, register)"),
            "block Mx_init writes Mx between the copy and block Mx_prev; the copy would be stale");
}

TEST(CacheRead, AllReadersOfARowShareOneCopy) {
  // Softmax as one kernel per row: the rolled statistics and the output each read row r of X.
  // With readers=all one copy per row serves every pass (the row read from memory once).
  auto softmax = lower_asset("softmax", {"R=3", "C=1030"});
  testing::LoweredAsset rows = softmax;
  rows.program = apply_decisions(
      softmax.program, {"rolling_update(Y_sum, c2, tile=256)", "inline(E)",
                        "reverse_compute_at(Y, Mx_init, r)", "tile(Y, c=256)"});
  auto after = apply_decisions(rows.program, {"cache_read(Mx, X, shared, at=r, readers=all)"});
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("alloc X_shared : bf16[1030] shared"), std::string::npos) << text;
  // One copy, before the statistics; no block reads X itself any more.
  EXPECT_NE(text.find("X_shared[c] = X[r, c]"), std::string::npos) << text;
  EXPECT_EQ(text.find("f32(X[r,"), std::string::npos) << text;
  EXPECT_EQ(text.find("X_shared_1"), std::string::npos) << text;
  expect_same_results(rows, after);
  // The copy stepped like its readers is the same program again.
  expect_same_results(rows, apply_decisions(after, {"tile(X_shared, c=256)"}));
  // Without readers=all only the named block reads the copy: the statistics still read X.
  auto one = apply_decisions(rows.program, {"cache_read(Y, X, shared, at=r)"});
  EXPECT_NE(print_program(*one).find("f32(X[r, c])"), std::string::npos);
}

TEST(CacheRead, SlidingWindowsAreRefused) {
  // Y[i] = sum(j) X[i + j]: consecutive rows read overlapping windows of X.
  namespace hand = testing::hand;
  const Buffer x = hand::input("X", {6});
  const Buffer y = hand::output("Y", {4});
  const Var i = make_var("i"), j = make_var("j");
  const Var iv = make_var("i"), jv = make_var("j");
  const Stmt block = make_block(
      "Y", {{iv, 4, IterKind::Spatial}, {jv, 3, IterKind::Reduce}}, {var_ref(i), var_ref(j)},
      nullptr, make_store(y, {var_ref(iv)}, float_imm(0.0, DType::F32)),
      make_store(y, {var_ref(iv)},
                 binary(BinaryOp::Add, load(y, {var_ref(iv)}),
                        load(x, {binary(BinaryOp::Add, var_ref(iv), var_ref(jv))}))));
  const ProgramPtr program = hand::program({x, y}, {}, {make_for(i, 4, make_for(j, 3, block))});
  EXPECT_EQ(failure_reason(program, "cache_read(Y, X, shared, at=i)"),
            "dimension 0 of X runs over i + [0, 3) in one iteration, so the parts of different "
            "iterations overlap or are closer than their width; it cannot be held in a compact "
            "local buffer");
  // Per step of j the window is one element: that is fine.
  const ProgramPtr cached = testing::apply_decisions(program, {"cache_read(Y, X, register, at=j)"});
  EXPECT_NE(print_program(*cached).find("X_reg[0]"), std::string::npos)
      << print_program(*cached);
}

}  // namespace
}  // namespace nautilus::sched
