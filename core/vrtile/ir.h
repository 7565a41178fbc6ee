// VR tile IR: the body of one CTA as SSA tile values held in virtual registers.
//
// General notes on the semantics of VR tile IR
// --------------------------------------------
// A `Kernel` runs once per point of its grid (the CTA index space, like CUDA's blockIdx): the
// grid variables are index scalars visible everywhere in the body. The body is a `Region`, a list
// of operations in program order; each operation produces at most one SSA `Value` (a `For`
// produces one per carried value). Values are never mutated: a loop carries tiles from one
// iteration to the next through `iter_args` and `yield`, which is how running maxima, running sums
// and accumulators appear (FlashAttention's loop is one `For` carrying three tiles).
//
// Every value is a tile: a dtype and a static shape (rank 0 is a scalar). Element-wise operations
// require equal shapes; `broadcast` and `expand` make shapes match explicitly, so no implicit
// broadcasting rule is needed to read a program. Arithmetic on f32 rounds each result to f32, as
// the scalar IR does.
//
//   Load(buffer, indices..., mask?)   reads global memory. Each index is an Index tile; all
//                                     indices and the mask have the result's shape. Where the
//                                     mask is false nothing is read and the element is `other`.
//   Store(buffer, indices..., value, mask?)   writes where the mask holds.
//   Dot(a, b, acc?)                  a:[M,K] × b:[K,N] (+ acc:[M,N]), accumulated in f32.
//   Reduce(op, value, axis)          sum/max/min along one axis; the result drops that axis.
//   Broadcast(value, shape, dims)    dims[i] = the result axis of value's axis i; other result
//                                    axes are replicated.
//   Iota(n)                          the Index tile [0, 1, ..., n-1].
//   Full(value, type)                a constant tile.
//   Unary/Binary/Compare/Logical/Select/Cast   element-wise, as in scalar IR.
//   Permute(value, order)            transposition (order[i] = source axis of result axis i).
//   For(var, extent, iter_args, body) runs body for var = 0..extent-1; body's block arguments are
//                                    the carried values; its last op is Yield(values) giving the
//                                    next iteration's values; the For's results are the values
//                                    after the last iteration (the initial ones when extent = 0).
//
//   Example (softmax row block after rolling_update and tile, one CTA per 4 rows):
//     kernel softmax grid(r_o: 2)
//       %0 = iota(4) : index[4]
//       ...
//       %mx, %l = for c_o in 0..8 iter_args(%m = %minf, %s = %zero):
//         %x = load X[%rows, %cols] mask %in_bounds : f32[4, 16]
//         %m2 = max(%m, reduce max(%x, axis 1))
//         ...
//         yield %m2, %s2
//
// Values, operations and kernels are immutable and shared like scalar IR nodes; every operation
// carries `Provenance` back to its spec statement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/support/dtype.h"

namespace nautilus::vrtile {

using scalar::Buffer;
using scalar::Provenance;
using scalar::UnaryOp;
using scalar::BinaryOp;
using scalar::CompareOp;
using scalar::LogicalOp;

struct TileType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // empty: a scalar

  int64_t element_count() const;
  bool operator==(const TileType&) const = default;
};
std::string type_text(const TileType& type);  // "f32[64, 128]", "index"

// An SSA value: the result of one operation, a block argument of a For body, a loop variable or
// a grid variable. Identity is the node's address; the name is for printing.
struct ValueNode {
  std::string name;
  TileType type;
};
using Value = std::shared_ptr<const ValueNode>;
Value make_value(std::string name, TileType type);

enum class ReduceOp { Sum, Max, Min };
const char* reduce_op_name(ReduceOp op);

#define NAUTILUS_VRTILE_OPS(X) \
  X(Load)                      \
  X(Store)                     \
  X(Dot)                       \
  X(Reduce)                    \
  X(Broadcast)                 \
  X(Permute)                   \
  X(Iota)                      \
  X(Full)                      \
  X(Unary)                     \
  X(Binary)                    \
  X(Compare)                   \
  X(Logical)                   \
  X(Select)                    \
  X(Cast)                      \
  X(For)                       \
  X(Yield)

enum class OpKind {
#define NAUTILUS_ENUM_ENTRY(name) name,
  NAUTILUS_VRTILE_OPS(NAUTILUS_ENUM_ENTRY)
#undef NAUTILUS_ENUM_ENTRY
};
const char* op_kind_name(OpKind kind);

struct Region;
using RegionPtr = std::shared_ptr<const Region>;

// One operation. Which fields are used depends on `kind` (documented above); unused ones are
// empty. `results` has one value for every op except Store and Yield (none) and For (one per
// iter_arg).
struct Op {
  OpKind kind = OpKind::Full;
  std::vector<Value> results;
  std::vector<Value> operands;  // Load: indices..., [mask]; Store: indices..., value, [mask];
                                // Dot: a, b, [acc]; element-wise ops: their operands;
                                // For: initial iter_args; Yield: yielded values
  Buffer buffer;                // Load / Store
  bool has_mask = false;        // Load / Store: the last index-side operand is a mask
  double constant = 0.0;        // Full: the value; Load: `other` where masked
  int64_t extent = 0;           // Iota: n; For: trip count
  int axis = 0;                 // Reduce
  std::vector<int> dims;        // Broadcast: source axis → result axis; Permute: order
  ReduceOp reduce_op = ReduceOp::Sum;
  UnaryOp unary_op = UnaryOp::Neg;
  BinaryOp binary_op = BinaryOp::Add;
  CompareOp compare_op = CompareOp::LT;
  LogicalOp logical_op = LogicalOp::And;
  Value loop_var;               // For: the induction variable (an index scalar)
  std::vector<Value> block_args;  // For: the carried values inside the body
  RegionPtr body;               // For
  Provenance provenance;
};
using OpPtr = std::shared_ptr<const Op>;

struct Region {
  std::vector<OpPtr> ops;
};

struct GridAxis {
  Value var;       // an index scalar, 0 <= var < extent
  int64_t extent;
};

struct Kernel {
  std::string name;
  std::vector<Buffer> params;       // global buffers: inputs, outputs and any intermediates
  std::vector<GridAxis> grid;
  RegionPtr body;
  Provenance provenance;
};
using KernelPtr = std::shared_ptr<const Kernel>;

// A whole operator at this level: kernels launched in order, with the global buffers they
// exchange (intermediates a schedule did not fuse away).
struct Module {
  std::string name;
  std::vector<Buffer> params;          // the operator's inputs, then outputs
  std::vector<Buffer> allocations;     // global intermediates shared between kernels
  std::vector<KernelPtr> kernels;
};
using ModulePtr = std::shared_ptr<const Module>;

}  // namespace nautilus::vrtile
