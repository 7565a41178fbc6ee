// VR tile IR: the body of one CTA as SSA tile values held in virtual registers.
//
// General notes on the semantics of VR tile IR
// --------------------------------------------
// A `Kernel` runs once per point of its grid (the CTA index space, like CUDA's blockIdx): the
// grid variables are index scalars visible everywhere in the body. Grid points are independent
// by contract (no two write the same element, none reads what another writes), so they may run
// in any order; the interpreter runs them in row-major order of the grid axes. The kernels of a
// `Module` run one after another, and exchange data only through global buffers.
//
// The body is a `Region`, a list of operations in program order; each operation produces at most
// one SSA `Value` (a `For` produces one per carried value). Values are never mutated: a loop
// carries tiles from one iteration to the next through `iter_args` and `yield`, which is how
// running maxima, running sums and accumulators appear (FlashAttention's loop is one `For`
// carrying three tiles). A value is visible after its definition in its region and in the
// regions nested there; a For's loop variable and block arguments only inside its body.
//
// Every value is a tile: a dtype and a static shape of positive extents (rank 0 is a scalar).
// Element-wise operations require operands of equal type (dtype and shape); `broadcast` makes
// shapes match explicitly (it adds axes, of any extent, including 1), so no implicit
// broadcasting rule is needed to read a program. Index tiles hold integers (loop and grid
// variables, iota, index arithmetic), Bool tiles masks. Float arithmetic rounds each result
// element to its dtype, as the scalar IR does; index arithmetic is exact (overflow is an error).
//
//   Load(buffer, indices..., mask?)   reads global memory: one Index tile per buffer axis, all
//                                     of the result's shape, as is the Bool mask. The result has
//                                     the buffer's dtype. Where the mask is false nothing is
//                                     read (the indices may be out of bounds there) and the
//                                     element is `other` (`constant`, rounded to the dtype).
//   Store(buffer, indices..., value, mask?)   writes `value` (of the buffer's dtype; conversions
//                                     are explicit casts) where the mask holds, element by
//                                     element in row-major order of the tile.
//   Dot(a, b, acc?)                  a:[M,K] × b:[K,N] (+ acc:[M,N] f32) → f32[M,N]. a and b
//                                    are f16, bf16 or f32, of one dtype. Each output element
//                                    starts at acc (or 0) and adds a[m,k]·b[k,n] for k = 0, 1,
//                                    ..., K-1 in order, rounding to f32 after every step: one
//                                    fused multiply-add per step, as FFMA and the tensor cores'
//                                    f32 accumulation do. (Products of f16/bf16 values are exact
//                                    in f32, so this also equals a separate multiply and add.)
//   Reduce(op, value, axis)          sum/max/min of a float tile along one axis; the result
//                                    drops that axis. Elements combine in index order, starting
//                                    from 0 (sum), -inf (max) or +inf (min), rounding each step.
//   Broadcast(value, shape, dims)    dims[i] = the result axis of value's axis i (strictly
//                                    increasing, extents equal); other result axes replicate.
//   Permute(value, order)            transposition: result axis i is value's axis order[i].
//   Iota(n)                          the Index tile [0, 1, ..., n-1].
//   Full(value, type)                a constant tile; `constant` rounded to the dtype (Index:
//                                    an integer, Bool: 0 or 1).
//   Unary/Binary/Compare/Logical/Select/Cast   element-wise, as in scalar IR: floats take every
//                                    unary and add/sub/mul/div/max/min (max/min ignore a NaN
//                                    operand, like fmaxf); Index takes neg/abs and
//                                    add/sub/mul/floordiv/mod/max/min (floor division, modulo
//                                    with the divisor's sign); comparisons give Bool; logical
//                                    ops take Bool; Select(cond, a, b) picks per element (both
//                                    a and b are already computed: tiles have no lazy lanes);
//                                    Cast converts to the result's dtype (to Index truncates,
//                                    to Bool tests != 0).
//   For(var, extent, iter_args, body) runs body for var = 0..extent-1; body's block arguments
//                                    are the carried values; its last op is Yield(values) (also
//                                    when nothing is carried) giving the next iteration's
//                                    values; the For's results are the values after the last
//                                    iteration (the initial ones when extent = 0). An
//                                    optional `trip_count` (an index scalar computed before
//                                    the loop) stops it early: var runs over
//                                    0..min(extent, max(trip_count, 0))-1, e.g. the last key
//                                    tile a causal query tile can see.
//
//   Example (softmax rows after rolling_update and tile, one CTA per 4 rows; printer.h gives the
//   full text format):
//     kernel softmax(X, Y) grid(r_o: 2) {
//       %rows = ... : index[4]
//       ...
//       %mx, %l = for c_o in 0..3 iter_args(%mx_i = %mx0, %l_i = %l0) {
//         %x = load X[%x_rows, %x_cols] mask %x_mask other 0.0 : bf16[4, 16]
//         ...
//         %rowmax = reduce max %xm, axis 1 : f32[4]
//         %mx1 = max %mx_i, %rowmax : f32[4]
//         ...
//         yield %mx1, %l1
//       }
//       ...
//     }
//
// Values, operations and kernels are immutable and shared like scalar IR nodes (a pass builds
// new ones and reuses unchanged ones); every operation carries `Provenance` back to its spec
// statement. verifier.h checks all of the rules above; interpreter.h executes them exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
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

  int rank() const { return static_cast<int>(shape.size()); }
  // The product of the extents; saturates at INT64_MAX instead of overflowing.
  int64_t element_count() const;
  bool operator==(const TileType&) const = default;
};
std::string type_text(const TileType& type);  // "f32[64, 128]", "index"
TileType index_scalar();                      // index, the type of grid and loop variables

// An SSA value: the result of one operation, a block argument of a For body, a loop variable or
// a grid variable. Identity is the node's address; the name (without the `%` of the text form)
// is for printing and unique within a kernel (the verifier checks).
struct ValueNode {
  std::string name;
  TileType type;
};
using Value = std::shared_ptr<const ValueNode>;
Value make_value(std::string name, TileType type);

enum class ReduceOp { Sum, Max, Min };
const char* reduce_op_name(ReduceOp op);  // "sum", "max", "min"

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
const char* op_kind_name(OpKind kind);  // "load", "store", ..., "for", "yield"

// Unary, Binary, Compare, Logical, Select and Cast: one result element per operand element.
bool is_elementwise(OpKind kind);

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
  bool has_mask = false;        // Load / Store: the last operand is a mask
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
  Value trip_count;             // For: optional early stop (an index scalar), see above
  std::vector<Value> block_args;  // For: the carried values inside the body
  RegionPtr body;               // For
  Provenance provenance;
};
using OpPtr = std::shared_ptr<const Op>;

// The parts of a Load's or Store's operand list. They tolerate malformed ops (missing operands
// give empty or null results) so that the verifier and printers can use them before checking.
std::vector<Value> access_indices(const Op& op);  // the index tiles
Value access_mask(const Op& op);                  // nullptr when the access is unmasked
Value stored_value(const Op& op);                 // Store only

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
  // Warps per CTA and pipeline stages chosen for this kernel (tilize copies them from the
  // outermost loop of the scalar nest the kernel comes from); nullopt: the MA lowering's
  // defaults (matile::LowerOptions).
  std::optional<scalar::LaunchAttrs> launch;
};
using KernelPtr = std::shared_ptr<const Kernel>;

// A whole operator at this level: kernels launched in order, with the global buffers they
// exchange (intermediates a schedule did not fuse away).
struct Module {
  std::string name;
  std::vector<Buffer> params;          // the operator's inputs, then outputs
  std::vector<Buffer> allocations;     // global intermediates shared between kernels
  std::vector<KernelPtr> kernels;

  const Buffer* find_buffer(const std::string& buffer_name) const;  // nullptr when absent
};
using ModulePtr = std::shared_ptr<const Module>;

// ---------------------------------------------------------------------------------------------
// Builders of single operations. Each creates its result values with the given names and the
// type the semantics above determine from the operands (element-wise: the operands' shape, with
// Bool for comparisons and the target dtype for casts; reduce drops the axis; dot gives f32[M,N];
// load gives the buffer's dtype at the indices' shape). They do not check operands — verify()
// does — and give a malformed op a best-effort type rather than failing. Names are taken as
// given; `Builder` below makes them unique.

OpPtr make_load(std::string result, Buffer buffer, std::vector<Value> indices, Value mask,
                double other, Provenance p = {});
OpPtr make_store(Buffer buffer, std::vector<Value> indices, Value value, Value mask,
                 Provenance p = {});
OpPtr make_dot(std::string result, Value a, Value b, Value acc, Provenance p = {});
OpPtr make_reduce(std::string result, ReduceOp op, Value value, int axis, Provenance p = {});
OpPtr make_broadcast(std::string result, Value value, std::vector<int64_t> shape,
                     std::vector<int> dims, Provenance p = {});
OpPtr make_permute(std::string result, Value value, std::vector<int> order, Provenance p = {});
OpPtr make_iota(std::string result, int64_t n, Provenance p = {});
OpPtr make_full(std::string result, double value, TileType type, Provenance p = {});
OpPtr make_unary(std::string result, UnaryOp op, Value a, Provenance p = {});
OpPtr make_binary(std::string result, BinaryOp op, Value a, Value b, Provenance p = {});
OpPtr make_compare(std::string result, CompareOp op, Value a, Value b, Provenance p = {});
OpPtr make_logical(std::string result, LogicalOp op, Value a, Value b, Provenance p = {});
OpPtr make_select(std::string result, Value condition, Value if_true, Value if_false,
                  Provenance p = {});
OpPtr make_cast(std::string result, Value value, DType dtype, Provenance p = {});
// `block_args` are the body's carried values and `body` ends with the Yield; the results take
// the types of `inits`, named by `results` (one per init).
OpPtr make_for(std::vector<std::string> results, Value loop_var, int64_t extent,
               std::vector<Value> inits, std::vector<Value> block_args, RegionPtr body,
               Provenance p = {}, Value trip_count = nullptr);
OpPtr make_yield(std::vector<Value> values, Provenance p = {});
// Any op exactly as given: for passes that copy an op and replace some fields, keeping its
// result values (and so every use of them) intact.
OpPtr make_op(Op op);
RegionPtr make_region(std::vector<OpPtr> ops);
KernelPtr make_kernel(std::string name, std::vector<Buffer> params, std::vector<GridAxis> grid,
                      RegionPtr body, Provenance p = {});

// Builds kernels op by op in program order, appending to the innermost open region and giving
// every value a fresh name: the requested one if no value of the kernel has it yet, else the
// name with `.1`, `.2`, ... appended; an empty request gives the next free number (`%0`,
// `%1`, ...). Each op gets the provenance last set.
//
//   Builder b;
//   Value m_o = b.grid("m_o", 4);
//   Value rows = b.binary(BinaryOp::Add, ..., "rows");
//   std::vector<Value> acc = b.for_loop("k_o", 3, {zero}, [&](const Value& k_o,
//                                                             const std::vector<Value>& carried) {
//     return std::vector<Value>{b.dot(a, w, carried[0], "acc1")};
//   }, {"acc"}, {"acc_i"});
//   KernelPtr kernel = b.finish_kernel("gemm", {A, B, C});
class Builder {
 public:
  // The callback of for_loop: receives the loop variable and the block arguments, emits the
  // body through the same Builder, and returns the values to yield.
  using LoopBody =
      std::function<std::vector<Value>(const Value& var, const std::vector<Value>& carried)>;

  Builder();

  void set_provenance(const Provenance& provenance) { provenance_ = provenance; }

  // Adds an axis to the grid of the kernel being built; returns its variable (an index scalar).
  Value grid(const std::string& name, int64_t extent);

  Value load(const Buffer& buffer, std::vector<Value> indices, const Value& mask = nullptr,
             double other = 0.0, const std::string& name = "");
  void store(const Buffer& buffer, std::vector<Value> indices, const Value& value,
             const Value& mask = nullptr);
  Value dot(const Value& a, const Value& b, const Value& acc = nullptr,
            const std::string& name = "");
  Value reduce(ReduceOp op, const Value& value, int axis, const std::string& name = "");
  Value broadcast(const Value& value, std::vector<int64_t> shape, std::vector<int> dims,
                  const std::string& name = "");
  Value permute(const Value& value, std::vector<int> order, const std::string& name = "");
  Value iota(int64_t n, const std::string& name = "");
  Value full(double value, TileType type, const std::string& name = "");
  Value unary(UnaryOp op, const Value& a, const std::string& name = "");
  Value binary(BinaryOp op, const Value& a, const Value& b, const std::string& name = "");
  Value compare(CompareOp op, const Value& a, const Value& b, const std::string& name = "");
  Value logical(LogicalOp op, const Value& a, const Value& b, const std::string& name = "");
  Value select(const Value& condition, const Value& if_true, const Value& if_false,
               const std::string& name = "");
  Value cast(const Value& value, DType dtype, const std::string& name = "");

  // Appends an op built elsewhere (a copy from another region, or one made with make_op) and
  // reserves the names of the values it defines, in its body too; returns its first result.
  Value append(OpPtr op);

  // Emits a For carrying `inits`: opens its body region, calls `body`, closes the region with a
  // Yield of what `body` returned, and returns the For's results. `result_names` and `arg_names`
  // name the results and block arguments (missing entries get numbers).
  // `trip_count` (optional, an index scalar) stops the loop early (see For above).
  std::vector<Value> for_loop(const std::string& var_name, int64_t extent,
                              std::vector<Value> inits, const LoopBody& body,
                              const std::vector<std::string>& result_names = {},
                              const std::vector<std::string>& arg_names = {},
                              const Value& trip_count = nullptr);

  // Returns the kernel built so far and starts a new, empty one (names restart too). Call it
  // outside for_loop bodies.
  KernelPtr finish_kernel(std::string name, std::vector<Buffer> params);

 private:
  std::string fresh_name(const std::string& requested);
  void reserve_names(const Op& op);
  Value emit(OpPtr op);  // appends `op` to the innermost region; returns its first result

  Provenance provenance_;
  std::vector<GridAxis> grid_;
  std::vector<std::vector<OpPtr>> regions_;  // open regions, outermost (the kernel body) first
  std::set<std::string> used_names_;         // every name given in the current kernel
  int next_number_ = 0;
};

}  // namespace nautilus::vrtile
