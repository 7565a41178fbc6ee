#include "tests/common/hopper_kernels.h"

#include <string>
#include <vector>

#include "core/matile/hopper.h"
#include "core/matile/layouts.h"
#include "core/support/rng.h"

namespace nautilus::matile::testing {
namespace {

using scalar::BufferRole;
using scalar::MemoryScope;

constexpr int64_t kTileM = 128, kTileK = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

ModulePtr hopper_gemm(const HopperGemmShape& shape, HopperBug bug) {
  const Buffer A = scalar::make_buffer("A", {shape.m, shape.k}, DType::BF16, MemoryScope::Global,
                                       BufferRole::Input);
  const Buffer B = scalar::make_buffer("B", {shape.n, shape.k}, DType::BF16, MemoryScope::Global,
                                       BufferRole::Input);
  const Buffer C = scalar::make_buffer("C", {shape.m, shape.n}, DType::BF16, MemoryScope::Global,
                                       BufferRole::Output);
  const int S = shape.stages;
  const int64_t KT = ceil_div(shape.k, kTileK);
  const int64_t kTileN = shape.tile_n;
  const bool tma_epilogue = kTileN == 64;

  Builder b(12);
  const Value pid_m = b.grid("pid_m", ceil_div(shape.m, kTileM));
  const Value pid_n = b.grid("pid_n", ceil_div(shape.n, kTileN));
  const int as = b.shared("As", DType::BF16, {kTileM, kTileK},
                          *tma_box_layout(DType::BF16, {kTileM, kTileK}, 128), S, "A stages");
  const int bs = b.shared("Bs", DType::BF16, {kTileN, kTileK},
                          *tma_box_layout(DType::BF16, {kTileN, kTileK}, 128), S, "B stages");
  const int cs = tma_epilogue ? b.shared("Cs", DType::BF16, {kTileM, kTileN},
                                         *tma_box_layout(DType::BF16, {kTileM, kTileN}, 128), 1,
                                         "C tile")
                              : -1;
  const int full = b.mbarrier("full", S, 1, "stage loaded");
  const int empty = shape.cooperative
                        ? b.mbarrier("empty", S, 1, "stage released by the consumers")
                        : b.mbarrier("empty", S, 2, "stage released by both consumers");
  const int tm_a = b.tma_map("tmA", A, {kTileM, kTileK}, 128);
  const int tm_b = b.tma_map("tmB", B, {kTileN, kTileK}, 128);
  const int tm_c = tma_epilogue ? b.tma_map("tmC", C, {kTileM, kTileN}, 128) : -1;

  // Uniform index scalars of the region being built (the CTA's or a role's threads).
  const auto constant = [&](int64_t value, const std::string& name = "") {
    return b.full(static_cast<double>(value), vrtile::index_scalar(),
                  uniform_layout({}, b.threads()), name);
  };
  const auto binary = [&](BinaryOp op, const Value& x, int64_t y, const std::string& name = "") {
    return b.binary(op, x, constant(y), name);
  };

  b.mbarrier_init(full);
  b.mbarrier_init(empty);
  b.barrier();
  const Value m0 = binary(BinaryOp::Mul, pid_m, kTileM, "m0");
  const Value n0 = binary(BinaryOp::Mul, pid_n, kTileN, "n0");
  // The second consumer's first row, for the st.global epilogue (a CTA-wide scalar).
  const Value m1 = tma_epilogue ? nullptr : binary(BinaryOp::Add, m0, 64, "m1");
  const int64_t box_bytes = (kTileM + kTileN) * kTileK * 2;

  const auto producer = [&] {
    b.for_loop("k", KT, {}, [&](const Value& k, const std::vector<Value>&) {
      const Value s = binary(BinaryOp::Mod, k, S, "s");
      const Value round = binary(BinaryOp::FloorDiv, k, S, "round");
      const Value phase = binary(BinaryOp::Mod, round, 2, "phase");
      const Value released = bug == HopperBug::WrongProducerParity
                                 ? phase
                                 : b.binary(BinaryOp::Sub, constant(1), phase, "released");
      if (bug != HopperBug::ProducerSkipsEmptyWait) b.mbarrier_wait(BarrierRef{empty, s}, released);
      const int64_t tx = bug == HopperBug::MissingExpectTx     ? 0
                         : bug == HopperBug::ExpectTxTooLarge ? box_bytes + 1024
                         : bug == HopperBug::ExpectTxTooSmall ? box_bytes - 1024
                                                              : box_bytes;
      b.mbarrier_arrive(BarrierRef{full, s}, tx);
      const Value k0 = binary(BinaryOp::Mul, k, kTileK, "k0");
      b.tma_load(SharedRef{as, s, {0, 0}, false}, tm_a, {m0, k0}, BarrierRef{full, s});
      b.tma_load(SharedRef{bs, s, {0, 0}, false}, tm_b, {n0, k0}, BarrierRef{full, s});
      return std::vector<Value>{};
    });
  };

  // Consumer `g` of `count` (or the cooperative role: g = 0, 2 warpgroups) owns `rows` rows.
  const auto consumer = [&](int g, int warpgroups) {
    const int64_t rows = 64 * warpgroups;
    const RegisterLayout acc_layout = *wgmma_accumulator_layout(rows, kTileN, warpgroups);
    const Value acc0 = b.full(0.0, TileType{DType::F32, {rows, kTileN}}, acc_layout, "acc0");
    if (bug != HopperBug::MissingWgmmaFence) b.wgmma_fence();
    const auto a_stage = [&](const Value& s) { return SharedRef{as, s, {64 * g, 0}, false}; };
    const auto b_stage = [&](const Value& s) { return SharedRef{bs, s, {0, 0}, true}; };
    const Value first = constant(0, "first");
    // Ping-pong: warpgroup g waits on barrier 1 + g for its turn and passes it to the other.
    const bool pingpong = shape.pingpong && warpgroups == 2;
    const auto take_turn = [&] {
      if (pingpong) b.warpgroup_barrier({1, 2}, 256, false);
    };
    const auto pass_turn = [&] {
      if (pingpong) b.warpgroup_barrier({2, 1}, 256, true);
    };
    if (pingpong && bug != HopperBug::PingPongMissingSeed) b.warpgroup_barrier({0, 1}, 256, true);
    b.mbarrier_wait(BarrierRef{full, first}, first);
    take_turn();
    const Value acc_first = b.wgmma(a_stage(first), nullptr, b_stage(first), kTileK, acc0, "acc_k0");
    b.wgmma_commit_group();
    pass_turn();
    const bool releases = !(bug == HopperBug::ConsumerNeverReleases && g == 1);
    const bool early = bug == HopperBug::ConsumerReleasesEarly;
    if (early) b.mbarrier_arrive(BarrierRef{empty, first});
    const std::vector<Value> acc = b.for_loop(
        "j", KT - 1, {acc_first},
        [&](const Value& j, const std::vector<Value>& carried) {
          const Value k = binary(BinaryOp::Add, j, 1, "k");
          const Value s = binary(BinaryOp::Mod, k, S, "s");
          const Value phase = binary(BinaryOp::Mod, binary(BinaryOp::FloorDiv, k, S), 2, "phase");
          b.mbarrier_wait(BarrierRef{full, s}, phase);
          take_turn();
          const Value next = b.wgmma(a_stage(s), nullptr, b_stage(s), kTileK, carried[0], "acc_k");
          b.wgmma_commit_group();
          pass_turn();
          if (early) b.mbarrier_arrive(BarrierRef{empty, s});
          b.wgmma_wait_group(1);
          // The previous stage's wgmma has retired: release it.
          if (releases && !early) {
            b.mbarrier_arrive(BarrierRef{empty, binary(BinaryOp::Mod, j, S, "previous")});
          }
          return std::vector<Value>{next};
        },
        {"acc"}, {"acc_i"});
    if (bug != HopperBug::AccumulatorBeforeWait) b.wgmma_wait_group(0);
    if (pingpong && bug != HopperBug::PingPongMissingDrain) b.warpgroup_barrier({1, 0}, 256, false);
    if (releases && !early) b.mbarrier_arrive(BarrierRef{empty, constant((KT - 1) % S, "last")});
    const Value c16 = b.cast(acc[0], DType::BF16, "c16");
    if (!tma_epilogue) {
      // st.global of the role's rows straight from the accumulator layout.
      GlobalAccess access;
      access.offsets = {g == 0 ? m0 : m1, n0};
      access.tile_axes = {0, 1};
      access.bounds = {shape.m, shape.n};
      b.global_store(C, access, {}, c16);
      if (bug == HopperBug::AccumulatorBeforeWait) b.wgmma_wait_group(0);
      return;
    }
    b.stmatrix(SharedRef{cs, nullptr, {64 * g, 0}, false}, c16);
    if (bug != HopperBug::MissingProxyFence) b.fence_proxy_async();
    if (bug == HopperBug::EpilogueBarrierPerWarpgroup && warpgroups == 2) {
      b.warpgroup_barrier({4, 5}, kWarpgroupThreads, false);
    } else {
      b.named_barrier(shape.pingpong ? 3 : 1, 256);
    }
    if (g == 0) {
      b.tma_store(tm_c, {m0, n0}, SharedRef{cs, nullptr, {0, 0}, false});
      b.bulk_commit_group();
      b.bulk_wait_group(0, true);
    }
    if (bug == HopperBug::AccumulatorBeforeWait) b.wgmma_wait_group(0);
  };

  const int consumer_registers = bug == HopperBug::RegisterBudgetOver ? 240 : 232;
  if (shape.cooperative) {
    b.roles({{"producer", 1, 40, producer},
             {"consumers", 2, consumer_registers, [&] { consumer(0, 2); }}});
  } else {
    b.roles({{"producer", 1, 40, producer},
             {"consumer0", 1, consumer_registers, [&] { consumer(0, 1); }},
             {"consumer1", 1, consumer_registers, [&] { consumer(1, 1); }}});
  }

  Module module;
  module.name = "hopper_gemm";
  module.arch = "sm_90a";
  module.params = {A, B, C};
  module.kernels.push_back(b.finish_kernel("gemm_ws", {A, B, C}));
  return std::make_shared<const Module>(std::move(module));
}

TensorMap hopper_gemm_inputs(const HopperGemmShape& shape, uint64_t seed, bool nonzero) {
  SplitMix64 rng(seed);
  TensorMap inputs;
  for (const auto& [name, rows] : {std::pair{"A", shape.m}, std::pair{"B", shape.n}}) {
    TensorData data{{rows, shape.k}, DType::BF16, {}};
    for (int64_t i = 0; i < rows * shape.k; ++i) {
      double value = round_to(DType::BF16, rng.uniform(-1.0, 1.0));
      while (nonzero && value == 0.0) value = round_to(DType::BF16, rng.uniform(-1.0, 1.0));
      data.values.push_back(value);
    }
    inputs[name] = data;
  }
  return inputs;
}

}  // namespace nautilus::matile::testing
