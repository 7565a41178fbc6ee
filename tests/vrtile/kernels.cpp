#include "tests/vrtile/kernels.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace nautilus::vrtile::test_kernels {
namespace {

// Builder calls emit ops in call order, and C++ leaves the order in which function arguments
// are evaluated open: so that the golden text does not depend on the compiler, no call here has
// more than one argument that builds ops.

// A broadcast of an optional mask (null stays null).
Value broadcast_mask(Builder& b, const Value& mask, std::vector<int64_t> shape,
                     std::vector<int> dims, const std::string& name) {
  return mask ? b.broadcast(mask, std::move(shape), std::move(dims), name) : nullptr;
}

// The conjunction of two optional masks.
Value both(Builder& b, const Value& x, const Value& y, const std::string& name) {
  if (!x) return y;
  if (!y) return x;
  return b.logical(LogicalOp::And, x, y, name);
}

ModulePtr single_kernel_module(const scalar::Program& program, KernelPtr kernel) {
  return std::make_shared<const Module>(Module{program.name, program.params, {}, {kernel}});
}

}  // namespace

Buffer program_buffer(const scalar::Program& program, const std::string& name) {
  const Buffer* found = program.find_buffer(name);
  if (!found) throw std::invalid_argument("program " + program.name + " has no buffer " + name);
  return *found;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

TileType f32(std::vector<int64_t> shape) { return TileType{DType::F32, std::move(shape)}; }

TileRange tile_range(Builder& b, const Value& tile_var, const Value& iota, int64_t tile,
                     int64_t extent, const std::string& name) {
  const Value size = b.full(static_cast<double>(tile), index_scalar(), name + "_size");
  const Value start = b.binary(BinaryOp::Mul, tile_var, size, name + "_start");
  const Value start_tile = b.broadcast(start, {tile}, {}, name + "_start_t");
  TileRange range{b.binary(BinaryOp::Add, start_tile, iota, name), nullptr};
  if (extent % tile != 0) {
    const Value limit =
        b.full(static_cast<double>(extent), TileType{DType::Index, {tile}}, name + "_extent");
    range.in_bounds = b.compare(CompareOp::LT, range.indices, limit, name + "_ok");
  }
  return range;
}

ModulePtr tiled_gemm(const scalar::Program& program, int64_t BM, int64_t BN, int64_t BK) {
  const Buffer A = program_buffer(program, "A"), B = program_buffer(program, "B"), C = program_buffer(program, "C");
  const int64_t M = A->shape[0], K = A->shape[1], N = B->shape[1];
  Builder b;
  const Value m_o = b.grid("m_o", ceil_div(M, BM));
  const Value n_o = b.grid("n_o", ceil_div(N, BN));
  const TileRange rows = tile_range(b, m_o, b.iota(BM, "m_iota"), BM, M, "rows");
  const TileRange cols = tile_range(b, n_o, b.iota(BN, "n_iota"), BN, N, "cols");
  const Value a_rows = b.broadcast(rows.indices, {BM, BK}, {0}, "a_rows");
  const Value a_rows_ok = broadcast_mask(b, rows.in_bounds, {BM, BK}, {0}, "a_rows_ok");
  const Value b_cols = b.broadcast(cols.indices, {BK, BN}, {1}, "b_cols");
  const Value b_cols_ok = broadcast_mask(b, cols.in_bounds, {BK, BN}, {1}, "b_cols_ok");
  const Value k_iota = b.iota(BK, "k_iota");
  const Value acc0 = b.full(0.0, f32({BM, BN}), "acc0");
  const std::vector<Value> acc = b.for_loop(
      "k_o", ceil_div(K, BK), {acc0},
      [&](const Value& k_o, const std::vector<Value>& carried) {
        const TileRange ks = tile_range(b, k_o, k_iota, BK, K, "ks");
        const Value a_k = b.broadcast(ks.indices, {BM, BK}, {1}, "a_k");
        const Value a_mask =
            both(b, a_rows_ok, broadcast_mask(b, ks.in_bounds, {BM, BK}, {1}, "a_k_ok"), "a_mask");
        const Value b_k = b.broadcast(ks.indices, {BK, BN}, {0}, "b_k");
        const Value b_mask =
            both(b, broadcast_mask(b, ks.in_bounds, {BK, BN}, {0}, "b_k_ok"), b_cols_ok, "b_mask");
        const Value a = b.load(A, {a_rows, a_k}, a_mask, 0.0, "a");
        const Value w = b.load(B, {b_k, b_cols}, b_mask, 0.0, "w");
        return std::vector<Value>{b.dot(a, w, carried[0], "acc1")};
      },
      {"acc"}, {"acc_i"});
  const Value c = b.cast(acc[0], C->dtype, "c");
  const Value c_rows = b.broadcast(rows.indices, {BM, BN}, {0}, "c_rows");
  const Value c_cols = b.broadcast(cols.indices, {BM, BN}, {1}, "c_cols");
  const Value c_rows_ok = broadcast_mask(b, rows.in_bounds, {BM, BN}, {0}, "c_rows_ok");
  const Value c_cols_ok = broadcast_mask(b, cols.in_bounds, {BM, BN}, {1}, "c_cols_ok");
  const Value c_mask = both(b, c_rows_ok, c_cols_ok, "c_mask");
  b.store(C, {c_rows, c_cols}, c, c_mask);
  return single_kernel_module(program, b.finish_kernel("gemm", {A, B, C}));
}

ModulePtr online_softmax(const scalar::Program& program, int64_t BR, int64_t BC) {
  const Buffer X = program_buffer(program, "X"), Y = program_buffer(program, "Y");
  const int64_t R = X->shape[0], C = X->shape[1];
  Builder b;
  const Value r_o = b.grid("r_o", ceil_div(R, BR));
  const TileRange rows = tile_range(b, r_o, b.iota(BR, "r_iota"), BR, R, "rows");
  const Value x_rows = b.broadcast(rows.indices, {BR, BC}, {0}, "x_rows");
  const Value x_rows_ok = broadcast_mask(b, rows.in_bounds, {BR, BC}, {0}, "x_rows_ok");
  const Value c_iota = b.iota(BC, "c_iota");
  const Value neg_inf = C % BC != 0 ? b.full(-INFINITY, f32({BR, BC}), "neg_inf") : nullptr;

  // One column tile of X in f32: its column indices and mask, and the tile with masked
  // columns at -inf (so that they vanish from the max and, through exp, from the sum). Masked
  // rows load as 0 and stay finite; they are never stored.
  struct Columns {
    Value x_cols, mask, x;
  };
  auto load_columns = [&](const Value& c_o) {
    const TileRange cols = tile_range(b, c_o, c_iota, BC, C, "cols");
    Columns tile;
    tile.x_cols = b.broadcast(cols.indices, {BR, BC}, {1}, "x_cols");
    const Value cols_ok = broadcast_mask(b, cols.in_bounds, {BR, BC}, {1}, "x_cols_ok");
    tile.mask = both(b, x_rows_ok, cols_ok, "x_mask");
    const Value x = b.cast(b.load(X, {x_rows, tile.x_cols}, tile.mask, 0.0, "x"), DType::F32,
                           "xf");
    tile.x = cols_ok ? b.select(cols_ok, x, neg_inf, "xm") : x;
    return tile;
  };

  const Value mx0 = b.full(-INFINITY, f32({BR}), "mx0");
  const Value l0 = b.full(0.0, f32({BR}), "l0");
  const int64_t column_tiles = ceil_div(C, BC);
  const std::vector<Value> stats = b.for_loop(
      "c_o", column_tiles, {mx0, l0},
      [&](const Value& c_o, const std::vector<Value>& carried) {
        const Value &mx_i = carried[0], &l_i = carried[1];
        const Columns tile = load_columns(c_o);
        const Value rowmax = b.reduce(ReduceOp::Max, tile.x, 1, "rowmax");
        const Value mx1 = b.binary(BinaryOp::Max, mx_i, rowmax, "mx1");
        const Value shifted =
            b.binary(BinaryOp::Sub, tile.x, b.broadcast(mx1, {BR, BC}, {0}, "mx1_t"), "shifted");
        const Value rowsum = b.reduce(ReduceOp::Sum, b.unary(UnaryOp::Exp, shifted, "e"), 1,
                                      "rowsum");
        const Value alpha =
            b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, mx_i, mx1, "mx_diff"), "alpha");
        const Value l1 =
            b.binary(BinaryOp::Add, b.binary(BinaryOp::Mul, l_i, alpha, "l_scaled"), rowsum, "l1");
        return std::vector<Value>{mx1, l1};
      },
      {"mx", "l"}, {"mx_i", "l_i"});

  const Value mx_t = b.broadcast(stats[0], {BR, BC}, {0}, "mx_t");
  const Value l_t = b.broadcast(stats[1], {BR, BC}, {0}, "l_t");
  b.for_loop("c_o", column_tiles, {}, [&](const Value& c_o, const std::vector<Value>&) {
    const Columns tile = load_columns(c_o);
    const Value e =
        b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, tile.x, mx_t, "shifted"), "e");
    const Value y = b.cast(b.binary(BinaryOp::Div, e, l_t, "y"), Y->dtype, "y_out");
    b.store(Y, {x_rows, tile.x_cols}, y, tile.mask);
    return std::vector<Value>{};
  });
  return single_kernel_module(program, b.finish_kernel("softmax", {X, Y}));
}

ModulePtr flash_attention(const scalar::Program& program, int64_t BM, int64_t BN) {
  const Buffer Q = program_buffer(program, "Q"), K = program_buffer(program, "K"), V = program_buffer(program, "V"),
               O = program_buffer(program, "O");
  const int64_t B = Q->shape[0], H = Q->shape[1], M = Q->shape[2], D = Q->shape[3];
  const int64_t N = K->shape[2];
  // Each op carries the provenance of the spec statement it implements, as lowering gives it,
  // found through the buffer the statement defines (an f32 O has no separate O_sum).
  auto statement = [&](const std::string& name) {
    const Buffer* defined = program.find_buffer(name);
    return defined ? (*defined)->provenance : O->provenance;
  };
  Builder b;
  b.set_provenance(statement("O"));
  const Value b_var = b.grid("b", B);
  const Value h_var = b.grid("h", H);
  const Value m_o = b.grid("m_o", ceil_div(M, BM));

  // The query tile [BM, D] of this CTA, loaded once; its indices and mask also address O.
  const TileRange rows = tile_range(b, m_o, b.iota(BM, "m_iota"), BM, M, "rows");
  const Value d = b.iota(D, "d");
  const Value qb = b.broadcast(b_var, {BM, D}, {}, "qb");
  const Value qh = b.broadcast(h_var, {BM, D}, {}, "qh");
  const Value qm = b.broadcast(rows.indices, {BM, D}, {0}, "qm");
  const Value qd = b.broadcast(d, {BM, D}, {1}, "qd");
  const Value q_mask = broadcast_mask(b, rows.in_bounds, {BM, D}, {0}, "q_mask");
  const Value q = b.load(Q, {qb, qh, qm, qd}, q_mask, 0.0, "q");

  // What every key tile shares: the batch, head and d indices of K and V tiles [BN, D], the
  // scale sqrt(D) and, when N has a tail, the -inf that masks scores past N.
  const Value kb = b.broadcast(b_var, {BN, D}, {}, "kb");
  const Value kh = b.broadcast(h_var, {BN, D}, {}, "kh");
  const Value kd = b.broadcast(d, {BN, D}, {1}, "kd");
  const Value n_iota = b.iota(BN, "n_iota");
  const Value sqrt_d = b.full(std::sqrt(static_cast<double>(D)), f32({BM, BN}), "sqrt_d");
  const Value neg_inf = N % BN != 0 ? b.full(-INFINITY, f32({BM, BN}), "neg_inf") : nullptr;

  const Value mx0 = b.full(-INFINITY, f32({BM}), "mx0");
  const Value l0 = b.full(0.0, f32({BM}), "l0");
  const Value acc0 = b.full(0.0, f32({BM, D}), "acc0");
  const std::vector<Value> carried_out = b.for_loop(
      "n_o", ceil_div(N, BN), {mx0, l0, acc0},
      [&](const Value& n_o, const std::vector<Value>& carried) {
        const Value &mx_i = carried[0], &l_i = carried[1], &acc_i = carried[2];
        b.set_provenance(statement("S"));
        const TileRange cols = tile_range(b, n_o, n_iota, BN, N, "cols");
        const Value kn = b.broadcast(cols.indices, {BN, D}, {0}, "kn");
        const Value kv_mask = broadcast_mask(b, cols.in_bounds, {BN, D}, {0}, "kv_mask");

        // S = Q Kᵀ / sqrt(D), with keys past N at -inf.
        const Value k = b.load(K, {kb, kh, kn, kd}, kv_mask, 0.0, "k");
        const Value kt = b.permute(k, {1, 0}, "kt");
        const Value qk = b.dot(q, kt, nullptr, "qk");
        Value s = b.binary(BinaryOp::Div, qk, sqrt_d, "s");
        if (cols.in_bounds) {
          const Value s_mask = b.broadcast(cols.in_bounds, {BM, BN}, {1}, "s_mask");
          s = b.select(s_mask, s, neg_inf, "sm");
        }

        // Online softmax: the new running max, P = exp(S - max), and the factor
        // alpha = exp(max_old - max_new) that repairs the running sum and accumulator.
        b.set_provenance(statement("Mx"));
        const Value rowmax = b.reduce(ReduceOp::Max, s, 1, "rowmax");
        const Value mx1 = b.binary(BinaryOp::Max, mx_i, rowmax, "mx1");
        b.set_provenance(statement("P"));
        const Value shifted =
            b.binary(BinaryOp::Sub, s, b.broadcast(mx1, {BM, BN}, {0}, "mx1_t"), "shifted");
        const Value p = b.unary(UnaryOp::Exp, shifted, "p");
        b.set_provenance(statement("L"));
        const Value alpha =
            b.unary(UnaryOp::Exp, b.binary(BinaryOp::Sub, mx_i, mx1, "mx_diff"), "alpha");
        const Value rowsum = b.reduce(ReduceOp::Sum, p, 1, "rowsum");
        const Value l_scaled = b.binary(BinaryOp::Mul, l_i, alpha, "l_scaled");
        const Value l1 = b.binary(BinaryOp::Add, l_scaled, rowsum, "l1");

        // acc = acc * alpha + P V.
        b.set_provenance(statement("O_sum"));
        const Value acc_scaled = b.binary(
            BinaryOp::Mul, acc_i, b.broadcast(alpha, {BM, D}, {0}, "alpha_t"), "acc_scaled");
        const Value v = b.load(V, {kb, kh, kn, kd}, kv_mask, 0.0, "v");
        const Value acc1 = b.dot(p, b.cast(v, DType::F32, "vf"), acc_scaled, "acc1");
        return std::vector<Value>{mx1, l1, acc1};
      },
      {"mx", "l", "acc"}, {"mx_i", "l_i", "acc_i"});

  // Delayed normalization: one division by the final sum.
  b.set_provenance(statement("O_sum"));
  const Value l_t = b.broadcast(carried_out[1], {BM, D}, {0}, "l_t");
  const Value o = b.binary(BinaryOp::Div, carried_out[2], l_t, "o");
  b.set_provenance(statement("O"));
  const Value o_out = b.cast(o, O->dtype, "o_out");
  b.store(O, {qb, qh, qm, qd}, o_out, q_mask);
  return single_kernel_module(program, b.finish_kernel("attention", {Q, K, V, O}));
}

}  // namespace nautilus::vrtile::test_kernels
