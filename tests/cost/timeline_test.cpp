// The per-warp timeline of an MA tile kernel's inner loop (core/cost/timeline.h): every MMA on
// every warp in every iteration, copies of the next stage in flight during this stage's MMAs,
// barriers and waits, and bars sized by the analytical model's work of each op; for a
// warp-specialized Hopper kernel, each role on its own warps meeting the others at mbarriers,
// TMA boxes in flight per stage and the wgmmas queued on the tensor cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/cost/analytical_model.h"
#include "core/cost/timeline.h"
#include "core/matile/layouts.h"
#include "tests/common/hopper_kernels.h"
#include "tests/cost/cost_test_util.h"

namespace nautilus::cost {
namespace {

// Attention at small sizes with its hand schedule: one CTA, a 128x64 Q tile, three n_o
// iterations of 64 keys (the last one issues no copies), head dimension 64.
const matile::Kernel& attention_kernel() {
  static const matile::Kernel empty;
  static const matile::ModulePtr module =
      testing::compile_ma("attention", {"B=1", "H=1", "M=128", "N=192", "D=64"},
                          testing::hand_schedule("attention"));
  return module && !module->kernels.empty() ? *module->kernels[0] : empty;
}

// The For of the inner loop (attention has one).
const matile::Op* inner_loop(const matile::Kernel& kernel) {
  for (const matile::OpPtr& op : kernel.body->ops) {
    if (op->kind == matile::OpKind::For) return op.get();
  }
  return nullptr;
}

// mma.sync issues per warp of an Mma op, from the PTX shape: (M / 16 / warps_m) x
// (N / 8 / warps_n) x (K / 16).
int64_t mma_instructions(const matile::Kernel& kernel, const matile::Op& mma) {
  (void)kernel;
  const auto& a = mma.operands[0]->type.shape;
  const auto& c = mma.operands[2]->type.shape;
  return (a[0] / 16 / mma.warps_m) * (c[1] / 8 / mma.warps_n) * (a[1] / 16);
}

TEST(PipelineTimelineModel, EveryMmaOfTheLoopHasABarOnEveryWarpInEveryIteration) {
  const matile::Kernel& kernel = attention_kernel();
  const matile::Op* loop = inner_loop(kernel);
  ASSERT_TRUE(loop);
  const PipelineTimeline timeline = timeline_from_kernel(kernel);
  ASSERT_EQ(timeline.error, "");
  EXPECT_EQ(timeline.loop_var, "n_o");
  EXPECT_EQ(timeline.iterations, 3);
  EXPECT_EQ(timeline.pipeline_stages, 2);
  ASSERT_EQ(timeline.iteration_spans.size(), 3u);
  std::vector<int> mma_ops;
  for (size_t i = 0; i < loop->body->ops.size(); ++i) {
    if (loop->body->ops[i]->kind == matile::OpKind::Mma) mma_ops.push_back(static_cast<int>(i));
  }
  ASSERT_EQ(mma_ops.size(), 8u);  // 4 k steps of Q K^T, 4 of P V
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (int warp = 0; warp < kernel.warps; ++warp) {
      std::vector<int> seen;
      for (const TimelineBar& bar : timeline.bars) {
        if (bar.row == warp && bar.iteration == iteration && bar.op_class == OpClass::Mma) {
          seen.push_back(bar.op_index);
          EXPECT_GT(bar.end, bar.start);
          EXPECT_EQ(bar.instructions, mma_instructions(kernel, *loop->body->ops[static_cast<size_t>(bar.op_index)]))
              << bar.label;
          EXPECT_GE(bar.start, timeline.iteration_spans[static_cast<size_t>(iteration)].first);
        }
      }
      EXPECT_EQ(seen, mma_ops) << "iteration " << iteration << " warp " << warp;
    }
  }
}

TEST(PipelineTimelineModel, NextStagesCopiesFlyDuringThisStagesMmas) {
  const PipelineTimeline timeline = timeline_from_kernel(attention_kernel());
  ASSERT_EQ(timeline.error, "");
  // Rows: the warps, then a copy row per stage.
  const size_t warps = static_cast<size_t>(attention_kernel().warps);
  ASSERT_EQ(timeline.rows.size(), warps + 2);
  EXPECT_EQ(timeline.rows[warps - 1].name, "warp " + std::to_string(warps - 1));
  EXPECT_EQ(timeline.rows[warps].name, "cp.async stage 0");
  EXPECT_EQ(timeline.rows[warps + 1].name, "cp.async stage 1");
  for (int iteration = 0; iteration < 2; ++iteration) {
    const int next_stage = (iteration + 1) % 2;
    int flights = 0;
    for (const TimelineBar& flight : timeline.bars) {
      if (flight.iteration != iteration || timeline.rows[static_cast<size_t>(flight.row)].kind !=
                                               TimelineRow::Kind::Copies) {
        continue;
      }
      ++flights;
      EXPECT_EQ(flight.stage, next_stage) << flight.label;
      // Some MMA of this iteration runs while the copy is in flight.
      const bool overlaps = std::any_of(timeline.bars.begin(), timeline.bars.end(), [&](const TimelineBar& b) {
        return b.iteration == iteration && b.op_class == OpClass::Mma && b.start < flight.end &&
               flight.start < b.end;
      });
      EXPECT_TRUE(overlaps) << flight.label;
    }
    EXPECT_EQ(flights, 2) << "K and V of iteration " << iteration;
  }
  // The last iteration has no next tile: its copies are predicated off and do not fly.
  int off = 0;
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.iteration == 2 && bar.op_class == OpClass::AsyncCopy) {
      EXPECT_TRUE(bar.predicated_off) << bar.label;
      EXPECT_EQ(bar.start, bar.end);
      off += bar.predicated_off;
    }
  }
  EXPECT_EQ(off, 2 * attention_kernel().warps);
}

TEST(PipelineTimelineModel, BarriersReleaseEveryWarpTogetherAndWaitsCoverTheCopies) {
  const PipelineTimeline timeline = timeline_from_kernel(attention_kernel());
  ASSERT_EQ(timeline.error, "");
  std::map<std::pair<int, int>, std::set<int64_t>> barrier_ends;  // (iteration, op) -> ends
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.label == "bar.sync") barrier_ends[{bar.iteration, bar.op_index}].insert(bar.end);
    EXPECT_LE(bar.start, bar.end) << bar.label;
    EXPECT_LE(bar.end, timeline.total_cycles);
  }
  ASSERT_FALSE(barrier_ends.empty());
  for (const auto& [at, ends] : barrier_ends) EXPECT_EQ(ends.size(), 1u);
  // Iteration 1 reads stage 1: its wait_group ends no earlier than stage 1's copies land.
  int64_t stage1_lands = 0;
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.iteration == 0 && bar.stage == 1 &&
        timeline.rows[static_cast<size_t>(bar.row)].kind == TimelineRow::Kind::Copies) {
      stage1_lands = std::max(stage1_lands, bar.end);
    }
  }
  ASSERT_GT(stage1_lands, 0);
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.iteration == 1 && bar.op_class == OpClass::Wait && bar.label.find("wait_group") != std::string::npos) {
      EXPECT_GE(bar.end, stage1_lands);
    }
  }
}

TEST(PipelineTimelineModel, SlowerCopiesShowAsLongerWaits) {
  // The same kernel with copies ten times slower: the exposed latency must appear as wait time.
  auto wait_cycles = [](const PipelineTimeline& t) {
    int64_t total = 0;
    for (const TimelineBar& bar : t.bars) {
      if (bar.op_class == OpClass::Wait && bar.row == 0) total += bar.end - bar.start;
    }
    return total;
  };
  TimelineOptions slow;
  slow.costs.copy_latency *= 10;
  const PipelineTimeline fast_timeline = timeline_from_kernel(attention_kernel());
  const PipelineTimeline slow_timeline = timeline_from_kernel(attention_kernel(), slow);
  EXPECT_GT(wait_cycles(slow_timeline), wait_cycles(fast_timeline) + 9 * 500);
  EXPECT_GT(slow_timeline.total_cycles, fast_timeline.total_cycles);
}

TEST(PipelineTimelineModel, WarpsRunningTheSameBarsFormOneGroup) {
  PipelineTimeline timeline = timeline_from_kernel(attention_kernel());
  ASSERT_EQ(timeline.error, "");
  const int warps = attention_kernel().warps;
  std::vector<int> all(static_cast<size_t>(warps));
  for (int w = 0; w < warps; ++w) all[static_cast<size_t>(w)] = w;
  EXPECT_EQ(identical_warp_rows(timeline), std::vector<std::vector<int>>{all});
  // One warp's bar moved: that warp is a group of its own.
  for (TimelineBar& bar : timeline.bars) {
    if (bar.row == 1 && bar.op_class == OpClass::Mma) {
      bar.end += 5;
      break;
    }
  }
  const auto groups = identical_warp_rows(timeline);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1], std::vector<int>{1});
}

TEST(PipelineTimelineModel, AKernelWithoutALoopSaysSo) {
  matile::Builder builder(4);
  builder.barrier();
  const matile::KernelPtr kernel = builder.finish_kernel("flat", {});
  const PipelineTimeline timeline = timeline_from_kernel(*kernel);
  EXPECT_NE(timeline.error.find("has no loop"), std::string::npos) << timeline.error;
  EXPECT_TRUE(timeline.bars.empty());
}


TEST(PipelineTimelineModel, BarsAreTheCostModelsWorkOfEachOpPerWarp) {
  const matile::Kernel& kernel = attention_kernel();
  const matile::Op* loop = inner_loop(kernel);
  ASSERT_TRUE(loop);
  const TimelineOptions options;
  const PipelineTimeline timeline = timeline_from_kernel(kernel, options);
  ASSERT_EQ(timeline.error, "");
  const double warps = kernel.warps;
  int mmas = 0, exp2s = 0;
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.iteration != 0 || bar.row != 0) continue;
    const matile::Op& op = *loop->body->ops[static_cast<size_t>(bar.op_index)];
    const OpWork work = op_work(kernel, op);
    if (op.kind == matile::OpKind::Mma) {
      // Every mma.m16n8k16 is 4096 of the model's tensor FLOPs, spread over the warps.
      EXPECT_DOUBLE_EQ(static_cast<double>(bar.instructions) * 4096.0 * warps, work.tensor_flops);
      EXPECT_EQ(bar.end - bar.start, bar.instructions * options.costs.mma);
      ++mmas;
    }
    if (op.kind == matile::OpKind::Unary && op.unary_op == matile::UnaryOp::Exp2 &&
        !op.results[0]->type.shape.empty()) {
      // The model's MUFU lane operations, 32 per warp instruction.
      const double lanes = warps * matile::kWarpSize;
      const int64_t sfu = static_cast<int64_t>(std::ceil(work.special_ops / lanes - 1e-9));
      const int64_t alu = static_cast<int64_t>(std::ceil(work.alu_ops / lanes - 1e-9));
      EXPECT_GT(sfu, 0);
      EXPECT_EQ(bar.op_class, OpClass::ElementWise);
      EXPECT_EQ(bar.end - bar.start, sfu * options.costs.sfu + alu * options.costs.alu);
      ++exp2s;
    }
  }
  EXPECT_EQ(mmas, 8);
  EXPECT_GT(exp2s, 0);
  // Doubling the model's per-instruction MMA cost doubles exactly the MMA bars.
  TimelineOptions slower = options;
  slower.costs.mma *= 2;
  const PipelineTimeline slow = timeline_from_kernel(kernel, slower);
  for (size_t i = 0; i < timeline.bars.size() && i < slow.bars.size(); ++i) {
    if (timeline.bars[i].op_class != OpClass::Mma) continue;
    EXPECT_EQ(slow.bars[i].end - slow.bars[i].start,
              2 * (timeline.bars[i].end - timeline.bars[i].start));
  }
}

// ---------------------------------------------------------------------------------------------
// Warp specialization: the hand-built TMA + wgmma GEMM (producer warps 0-3, consumer0 4-7,
// consumer1 8-11), 16 k steps per CTA.
matile::ModulePtr ws_gemm(int stages) {
  return matile::testing::hopper_gemm(matile::testing::HopperGemmShape{512, 512, 1024, stages});
}

bool has_bar(const PipelineTimeline& timeline, int row, const std::string& label_start) {
  return std::any_of(timeline.bars.begin(), timeline.bars.end(), [&](const TimelineBar& bar) {
    return bar.row == row && bar.label.rfind(label_start, 0) == 0;
  });
}

int row_named(const PipelineTimeline& timeline, const std::string& name) {
  for (size_t r = 0; r < timeline.rows.size(); ++r) {
    if (timeline.rows[r].name == name) return static_cast<int>(r);
  }
  return -1;
}

TEST(PipelineTimelineModel, WarpSpecializedRolesRunOnTheirOwnWarps) {
  const matile::ModulePtr module = ws_gemm(3);
  const PipelineTimeline timeline = timeline_from_kernel(*module->kernels[0]);
  ASSERT_EQ(timeline.error, "");
  EXPECT_EQ(timeline.loop_var, "j");  // consumer0's loop (k = 0 peeled), not the producer's
  EXPECT_EQ(timeline.loop_extent, 15);
  EXPECT_EQ(timeline.pipeline_stages, 3);
  EXPECT_EQ(timeline.iteration_spans.size(), 3u);
  ASSERT_GE(timeline.rows.size(), 12u);
  EXPECT_EQ(timeline.rows[0].name, "warp 0 (producer)");
  EXPECT_EQ(timeline.rows[4].name, "warp 4 (consumer0)");
  EXPECT_EQ(timeline.rows[11].name, "warp 11 (consumer1)");
  const int tensor = row_named(timeline, "tensor cores (wgmma)");
  ASSERT_GE(tensor, 0);
  for (int stage = 0; stage < 3; ++stage) {
    EXPECT_GE(row_named(timeline, "tma stage " + std::to_string(stage)), 0) << stage;
  }
  // The producer loads and never multiplies; the consumers multiply and never load.
  EXPECT_TRUE(has_bar(timeline, 0, "tma.load"));
  EXPECT_FALSE(has_bar(timeline, 0, "wgmma"));
  for (int warp : {4, 8}) {
    EXPECT_TRUE(has_bar(timeline, warp, "wgmma %"));
    EXPECT_TRUE(has_bar(timeline, warp, "mbarrier.wait full"));
    EXPECT_FALSE(has_bar(timeline, warp, "tma.load"));
  }
  const auto groups = identical_warp_rows(timeline);
  EXPECT_NE(std::find(groups.begin(), groups.end(), std::vector<int>{0, 1, 2, 3}), groups.end());
  EXPECT_NE(std::find(groups.begin(), groups.end(), std::vector<int>{4, 5, 6, 7}), groups.end());
  // The tensor cores run one wgmma at a time (the consumers' queue), each m64n64k64 for
  // 2 * 64 * 64 * 64 / 4096 cycles, and the first only after stage 0's boxes have landed.
  int64_t first_landing = -1, last_end = -1;
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.row == row_named(timeline, "tma stage 0") && bar.iteration == 0) {
      first_landing = std::max(first_landing, bar.end);
    }
  }
  ASSERT_GT(first_landing, 0);
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.row != tensor) continue;
    EXPECT_EQ(bar.end - bar.start, 2 * 64 * 64 * 64 / 4096) << bar.label;
    EXPECT_GE(bar.start, last_end) << bar.label;
    EXPECT_GE(bar.start, first_landing) << bar.label;
    last_end = bar.end;
  }
}

// Slow copies: a 2-stage ring leaves the consumers waiting for each stage's boxes, a 4-stage one
// has the next stages in flight while the tensor cores work, so its consumers wait less and reach
// the end of the drawn iterations sooner.
TEST(PipelineTimelineModel, ADeeperRingHidesTheCopiesBehindTheWgmmas) {
  TimelineOptions options;
  options.iterations = 6;
  options.costs.copy_latency = 2000;
  struct Drawn {
    int64_t waiting = 0;  // consumer0's mbarrier waits in the drawn iterations
    int64_t end = 0;      // consumer0's last bar
  };
  auto drawn = [&](int stages) {
    const matile::ModulePtr module = ws_gemm(stages);
    const PipelineTimeline timeline = timeline_from_kernel(*module->kernels[0], options);
    EXPECT_EQ(timeline.error, "");
    Drawn result;
    for (const TimelineBar& bar : timeline.bars) {
      if (bar.row != 4) continue;
      result.end = std::max(result.end, bar.end);
      if (bar.label.rfind("mbarrier.wait full", 0) == 0) result.waiting += bar.end - bar.start;
    }
    return result;
  };
  const Drawn shallow = drawn(2), deep = drawn(4);
  EXPECT_LT(deep.waiting, shallow.waiting);
  EXPECT_LT(deep.end, shallow.end);
}

// The roles meet at mbarriers: every full[s] hand-off starts where stage s's boxes land and ends
// at a consumer going on; every empty[s] hand-off starts at a consumer's release and ends at the
// producer going on to refill the stage. No waiter goes on before its phase completed.
TEST(PipelineTimelineModel, StagesAreHandedFromTheLandingBoxesToTheConsumersAndBack) {
  TimelineOptions options;
  options.iterations = 4;
  const matile::ModulePtr module = ws_gemm(2);
  const PipelineTimeline timeline = timeline_from_kernel(*module->kernels[0], options);
  ASSERT_EQ(timeline.error, "");
  EXPECT_EQ(timeline.rows[0].role, "producer");
  EXPECT_EQ(timeline.rows[5].role, "consumer0");
  EXPECT_EQ(timeline.rows[5].warpgroup, 0);
  EXPECT_EQ(timeline.rows[9].role, "consumer1");
  int full = 0, empty = 0;
  for (const TimelineHandoff& handoff : timeline.handoffs) {
    ASSERT_GE(handoff.from_row, 0);
    ASSERT_GE(handoff.to_row, 0);
    EXPECT_FALSE(handoff.named_barrier);
    EXPECT_LE(handoff.from_cycle, handoff.to_cycle) << handoff.label;
    const TimelineRow& from = timeline.rows[static_cast<size_t>(handoff.from_row)];
    const TimelineRow& to = timeline.rows[static_cast<size_t>(handoff.to_row)];
    if (handoff.label.rfind("full[", 0) == 0) {
      ++full;
      EXPECT_EQ(from.name, "tma stage " + handoff.label.substr(5, 1)) << handoff.label;
      EXPECT_EQ(to.role.rfind("consumer", 0), 0u) << handoff.label;
    } else if (handoff.label.rfind("empty[", 0) == 0) {
      ++empty;
      EXPECT_EQ(from.role.rfind("consumer", 0), 0u) << handoff.label;
      EXPECT_EQ(to.role, "producer") << handoff.label;
    }
  }
  // Both consumers receive every drawn stage; the producer refills released stages.
  EXPECT_GE(full, 2 * options.iterations);
  EXPECT_GE(empty, 1);
  // The consumers' rows alternate tensor-core phases (wgmma until its group retired) with
  // waiting for the next stage; the producer's row issues copies.
  bool consumer_tensor = false, producer_copies = false;
  for (const RolePhase& phase : role_phases(timeline)) {
    EXPECT_LE(phase.start, phase.end);
    if (phase.row == 4 && phase.kind == RolePhase::Kind::TensorCore) {
      consumer_tensor = true;
      EXPECT_NE(phase.label.find("wgmma %"), std::string::npos) << phase.label;
    }
    if (phase.row == 0) {
      EXPECT_NE(phase.kind, RolePhase::Kind::TensorCore);
      producer_copies = producer_copies || phase.kind == RolePhase::Kind::Copy;
    }
  }
  EXPECT_TRUE(consumer_tensor);
  EXPECT_TRUE(producer_copies);
}

// Two roles taking turns through named barriers (FlashAttention-3's ping-pong between consumer
// warpgroups): `first` waits at bar 1 for `second`'s arrival, works, and arrives at bar 2, on
// which `second` waits before its own work. Their work never overlaps, each turn is a named
// hand-off from the other role, and the phases strictly alternate.
TEST(PipelineTimelineModel, NamedBarriersOrderTheConsumersTurns) {
  matile::Builder builder(8);
  const std::vector<int64_t> shape{64, 64};
  auto work = [&](const std::string& name) {
    const matile::RegisterLayout layout = matile::blocked_layout(shape, builder.threads());
    const matile::Value x = builder.full(1.0, {DType::F32, shape}, layout, name + "_x");
    builder.unary(scalar::UnaryOp::Exp2, x, name + "_exp");
  };
  builder.roles({{"first", 1, 232, [&] {
                    builder.for_loop("i", 4, {}, [&](const matile::Value&, const std::vector<matile::Value>&) {
                      builder.named_barrier(1, 256);
                      work("first");
                      builder.named_barrier(2, 256, true);
                      return std::vector<matile::Value>{};
                    });
                  }},
                 {"second", 1, 232, [&] {
                    builder.named_barrier(1, 256, true);  // the first turn is `first`'s
                    builder.for_loop("j", 4, {}, [&](const matile::Value&, const std::vector<matile::Value>&) {
                      builder.named_barrier(2, 256);
                      work("second");
                      builder.named_barrier(1, 256, true);
                      return std::vector<matile::Value>{};
                    });
                  }}});
  const matile::KernelPtr kernel = builder.finish_kernel("ping_pong", {});
  TimelineOptions options;
  options.iterations = 4;
  const PipelineTimeline timeline = timeline_from_kernel(*kernel, options);
  ASSERT_EQ(timeline.error, "");
  std::vector<std::pair<int64_t, int64_t>> first, second;
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.label.rfind("exp2", 0) != 0 || bar.end <= bar.start) continue;
    if (bar.row == 0) first.emplace_back(bar.start, bar.end);
    if (bar.row == 4) second.emplace_back(bar.start, bar.end);
  }
  ASSERT_EQ(first.size(), 4u);
  ASSERT_EQ(second.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LE(first[i].second, second[i].first) << i;               // first's turn, then second's
    if (i + 1 < 4) {
      EXPECT_LE(second[i].second, first[i + 1].first) << i;  // and back
    }
  }
  int named = 0;
  for (const TimelineHandoff& handoff : timeline.handoffs) {
    EXPECT_TRUE(handoff.named_barrier);
    EXPECT_NE(handoff.from_row, handoff.to_row);
    EXPECT_LE(handoff.from_cycle, handoff.to_cycle);
    ++named;
  }
  EXPECT_GE(named, 7);  // every turn but the very first is handed over
  // Phases: element-wise on each row, alternating in time between the rows.
  std::vector<const RolePhase*> work_phases;
  const std::vector<RolePhase> phases = role_phases(timeline);
  for (const RolePhase& phase : phases) {
    if (phase.kind == RolePhase::Kind::ElementWise && (phase.row == 0 || phase.row == 4)) work_phases.push_back(&phase);
  }
  std::sort(work_phases.begin(), work_phases.end(), [](const RolePhase* a, const RolePhase* b) { return a->start < b->start; });
  ASSERT_EQ(work_phases.size(), 8u);
  for (size_t k = 1; k < work_phases.size(); ++k) EXPECT_NE(work_phases[k]->row, work_phases[k - 1]->row) << k;
}

// The compiler's ping-pong attention (two consumer warpgroups of one role taking turns at
// per-warpgroup named barriers): the timeline runs the role's warpgroups apart, so their
// QKᵀ wgmmas take turns on the tensor cores instead of starting together, and each keeps its
// own ring positions (the producer keeps refilling the stages they release).
TEST(PipelineTimelineModel, PingPongWarpgroupsOfOneRoleTakeTurns) {
  std::vector<std::string> decisions = nautilus::testing::warp_spec_attention(
      {.key_tile = 128, .consumers = 2, .stages = 4, .overlap = true, .pingpong = true});
  const matile::ModulePtr module =
      testing::compile_ma("attention", {"B=1", "H=2", "M=2048", "N=2048", "D=64"}, decisions, "sm_90a");
  ASSERT_TRUE(module);
  TimelineOptions options;
  options.iterations = 4;
  const PipelineTimeline timeline = timeline_from_kernel(*module->kernels.at(0), options);
  ASSERT_EQ(timeline.error, "");
  // Rows 4 and 8: the first warps of the consumers' two warpgroups (row 0 is the producer's).
  std::map<int, std::vector<int64_t>> wgmma_starts;
  int loads = 0;
  for (const TimelineBar& bar : timeline.bars) {
    if (bar.iteration >= 0 && bar.label.rfind("wgmma", 0) == 0 && (bar.row == 4 || bar.row == 8)) {
      wgmma_starts[bar.row].push_back(bar.start);
    }
    if (bar.row == 0 && bar.label.rfind("tma.load", 0) == 0) ++loads;
  }
  ASSERT_FALSE(wgmma_starts[4].empty());
  ASSERT_EQ(wgmma_starts[4].size(), wgmma_starts[8].size());
  for (size_t i = 0; i < wgmma_starts[4].size(); ++i) {
    EXPECT_NE(wgmma_starts[4][i], wgmma_starts[8][i]) << i;
  }
  bool turn_handed_over = false;
  for (const TimelineHandoff& handoff : timeline.handoffs) {
    turn_handed_over |= handoff.named_barrier && handoff.from_row != handoff.to_row;
  }
  EXPECT_TRUE(turn_handed_over);
  EXPECT_GT(loads, 2 * 4) << "the producer refills the ring beyond its first four stages";
}

}  // namespace
}  // namespace nautilus::cost
