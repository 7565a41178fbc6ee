#include "tests/rewrite/naive_kernels.h"

#include <cmath>
#include <string>
#include <vector>

#include "tests/vrtile/kernels.h"

namespace nautilus::rewrite::test_kernels {
namespace {

using namespace vrtile;
using vrtile::test_kernels::ceil_div;
using vrtile::test_kernels::f32;
using vrtile::test_kernels::program_buffer;
using vrtile::test_kernels::tile_range;
using vrtile::test_kernels::TileRange;

// As in tests/vrtile/kernels.cpp: no Builder call here has more than one argument that emits
// ops, so the printed order does not depend on the compiler's argument evaluation order.

struct Problem {
  Buffer Q, K, V, O;
  int64_t B, H, M, N, D, BM, BN;
};

// What one key tile gives: the K and V tiles (16-bit, as loaded) and the masked scores
// s = (f32(q) f32(k)ᵀ) / sqrt(D) with keys past N at -inf.
struct KeyTile {
  Value s, v;
};

KeyTile key_tile(Builder& b, const Problem& pr, const Value& q, const Value& b_var,
                 const Value& h_var, const Value& n_o) {
  const TileRange cols = tile_range(b, n_o, b.iota(pr.BN, "cols_iota"), pr.BN, pr.N, "cols");
  const Value kb = b.broadcast(b_var, {pr.BN, pr.D}, {}, "kb");
  const Value kh = b.broadcast(h_var, {pr.BN, pr.D}, {}, "kh");
  const Value kn = b.broadcast(cols.indices, {pr.BN, pr.D}, {0}, "kn");
  const Value kd = b.broadcast(b.iota(pr.D, "kd_iota"), {pr.BN, pr.D}, {1}, "kd");
  const Value kv_mask =
      cols.in_bounds ? b.broadcast(cols.in_bounds, {pr.BN, pr.D}, {0}, "kv_mask") : nullptr;
  const Value k = b.load(pr.K, {kb, kh, kn, kd}, kv_mask, 0.0, "k");
  const Value kt = b.permute(b.cast(k, DType::F32, "kf"), {1, 0}, "kt");
  const Value qf = b.cast(q, DType::F32, "qf");
  const Value qk = b.dot(qf, kt, nullptr, "qk");
  const Value sqrt_d = b.full(std::sqrt(static_cast<double>(pr.D)), f32({}), "sqrt_d");
  const Value s = b.binary(BinaryOp::Div, qk, b.broadcast(sqrt_d, {pr.BM, pr.BN}, {}, "sqrt_d_t"),
                           "s");
  KeyTile tile{s, b.load(pr.V, {kb, kh, kn, kd}, kv_mask, 0.0, "v")};
  if (cols.in_bounds) {
    const Value s_mask = b.broadcast(cols.in_bounds, {pr.BM, pr.BN}, {1}, "s_mask");
    const Value neg_inf = b.full(-INFINITY, f32({pr.BM, pr.BN}), "neg_inf");
    tile.s = b.select(s_mask, s, neg_inf, "sm");
  }
  return tile;
}

}  // namespace

ModulePtr naive_attention(const scalar::Program& program, int64_t BM, int64_t BN,
                          Normalization normalization) {
  Problem pr{program_buffer(program, "Q"), program_buffer(program, "K"), program_buffer(program, "V"),
             program_buffer(program, "O"), 0, 0, 0, 0, 0, BM, BN};
  pr.B = pr.Q->shape[0];
  pr.H = pr.Q->shape[1];
  pr.M = pr.Q->shape[2];
  pr.D = pr.Q->shape[3];
  pr.N = pr.K->shape[2];
  Builder b;
  b.set_provenance(pr.O->provenance);
  const Value b_var = b.grid("b", pr.B);
  const Value h_var = b.grid("h", pr.H);
  const Value m_o = b.grid("m_o", ceil_div(pr.M, BM));
  const TileRange rows = tile_range(b, m_o, b.iota(BM, "rows_iota"), BM, pr.M, "rows");
  const Value qb = b.broadcast(b_var, {BM, pr.D}, {}, "qb");
  const Value qh = b.broadcast(h_var, {BM, pr.D}, {}, "qh");
  const Value qm = b.broadcast(rows.indices, {BM, pr.D}, {0}, "qm");
  const Value qd = b.broadcast(b.iota(pr.D, "d"), {BM, pr.D}, {1}, "qd");
  const Value q_mask =
      rows.in_bounds ? b.broadcast(rows.in_bounds, {BM, pr.D}, {0}, "q_mask") : nullptr;
  const Value q = b.load(pr.Q, {qb, qh, qm, qd}, q_mask, 0.0, "q");

  const Value mx0 = b.full(-INFINITY, f32({BM}), "mx0");
  const Value l0 = b.full(0.0, f32({BM}), "l0");
  const Value acc0 = b.full(0.0, f32({BM, pr.D}), "acc0");
  const int64_t key_tiles = ceil_div(pr.N, BN);

  // One online-softmax step: the new max, P = exp(s - max), alpha = exp(max_old - max_new)
  // (written twice, as a lowering that repairs sum and accumulator separately does) and the
  // new sum.
  struct Step {
    Value mx1, p, alpha_l, alpha_acc, l1;
  };
  auto softmax_step = [&](const KeyTile& tile, const Value& mx_i, const Value& l_i) {
    Step step;
    const Value rowmax = b.reduce(ReduceOp::Max, tile.s, 1, "rowmax");
    step.mx1 = b.binary(BinaryOp::Max, mx_i, rowmax, "mx1");
    const Value shifted =
        b.binary(BinaryOp::Sub, tile.s, b.broadcast(step.mx1, {BM, BN}, {0}, "mx1_t"), "shifted");
    step.p = b.unary(UnaryOp::Exp, shifted, "p");
    step.alpha_l =
        b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, mx_i, step.mx1, "mx_diff"), "alpha");
    const Value rowsum = b.reduce(ReduceOp::Sum, step.p, 1, "rowsum");
    const Value l_scaled = b.binary(BinaryOp::Mul, l_i, step.alpha_l, "l_scaled");
    step.l1 = b.binary(BinaryOp::Add, l_scaled, rowsum, "l1");
    step.alpha_acc =
        b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, mx_i, step.mx1, "mx_diff2"), "alpha2");
    return step;
  };

  Value o;
  if (normalization == Normalization::SecondLoop) {
    const std::vector<Value> stats = b.for_loop(
        "n_o", key_tiles, {mx0, l0},
        [&](const Value& n_o, const std::vector<Value>& carried) {
          const KeyTile tile = key_tile(b, pr, q, b_var, h_var, n_o);
          const Step step = softmax_step(tile, carried[0], carried[1]);
          return std::vector<Value>{step.mx1, step.l1};
        },
        {"mx", "l"}, {"mx_i", "l_i"});
    const std::vector<Value> acc = b.for_loop(
        "n_o2", key_tiles, {acc0},
        [&](const Value& n_o, const std::vector<Value>& carried) {
          const KeyTile tile = key_tile(b, pr, q, b_var, h_var, n_o);
          const Value shifted = b.binary(
              BinaryOp::Sub, tile.s, b.broadcast(stats[0], {BM, BN}, {0}, "mx_t"), "shifted");
          const Value p = b.unary(UnaryOp::Exp, shifted, "p");
          const Value pn =
              b.binary(BinaryOp::Div, p, b.broadcast(stats[1], {BM, BN}, {0}, "l_t"), "pn");
          return std::vector<Value>{
              b.dot(pn, b.cast(tile.v, DType::F32, "vf"), carried[0], "acc1")};
        },
        {"acc"}, {"acc_i"});
    o = acc[0];
  } else {
    const bool every_step = normalization == Normalization::EveryStep;
    const std::vector<Value> carried_out = b.for_loop(
        "n_o", key_tiles, {mx0, l0, acc0},
        [&](const Value& n_o, const std::vector<Value>& carried) {
          const Value &mx_i = carried[0], &l_i = carried[1], &acc_i = carried[2];
          const KeyTile tile = key_tile(b, pr, q, b_var, h_var, n_o);
          const Step step = softmax_step(tile, mx_i, l_i);
          const Value vf = b.cast(tile.v, DType::F32, "vf");
          Value acc1;
          if (every_step) {
            // acc' = acc · (l · alpha / l') + (P / l') V
            const Value keep = b.binary(BinaryOp::Mul, l_i, step.alpha_acc, "keep");
            const Value ratio = b.binary(BinaryOp::Div, keep, step.l1, "ratio");
            const Value acc_scaled = b.binary(
                BinaryOp::Mul, acc_i, b.broadcast(ratio, {BM, pr.D}, {0}, "ratio_t"),
                "acc_scaled");
            const Value pn = b.binary(BinaryOp::Div, step.p,
                                      b.broadcast(step.l1, {BM, BN}, {0}, "l1_t"), "pn");
            acc1 = b.dot(pn, vf, acc_scaled, "acc1");
          } else {
            const Value acc_scaled = b.binary(
                BinaryOp::Mul, acc_i, b.broadcast(step.alpha_acc, {BM, pr.D}, {0}, "alpha_t"),
                "acc_scaled");
            acc1 = b.dot(step.p, vf, acc_scaled, "acc1");
          }
          return std::vector<Value>{step.mx1, step.l1, acc1};
        },
        {"mx", "l", "acc"}, {"mx_i", "l_i", "acc_i"});
    o = carried_out[2];
    if (!every_step) {
      o = b.binary(BinaryOp::Div, o, b.broadcast(carried_out[1], {BM, pr.D}, {0}, "l_out"), "o");
    }
  }
  const Value o_out = b.cast(o, pr.O->dtype, "o_out");
  b.store(pr.O, {qb, qh, qm, qd}, o_out, q_mask);
  return std::make_shared<const Module>(
      Module{program.name, program.params, {}, {b.finish_kernel("attention", {pr.Q, pr.K, pr.V, pr.O})}});
}

}  // namespace nautilus::rewrite::test_kernels
