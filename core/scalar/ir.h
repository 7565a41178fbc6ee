// Scalar IR: explicit loop nests around blocks with a scalar body.
//
// General notes on the semantics of scalar IR nodes
// -------------------------------------------------
// A `Program` is one operator: its parameter buffers (inputs, then outputs), the intermediate
// buffers it allocates, and a body statement. All shapes and loop extents are concrete integers
// (sizes are bound before lowering).
//
// Statements:
//   For(var, extent, body)       runs body for var = 0, 1, ..., extent - 1, in order.
//   Seq(stmts)                   runs stmts in order.
//   Store(buffer, indices, v)    buffer[indices] = v; v's dtype must equal the buffer's dtype
//                                (conversions are explicit Casts).
//   Block(...)                   one instance of a spec computation. A block has iteration
//                                variables, each spatial or reduce, with an extent, and one
//                                binding per iteration variable: an index expression over the
//                                enclosing loop variables. When executed, the bindings are
//                                evaluated; if the predicate (absent = true) is false nothing
//                                happens; otherwise, if the block has an `init` statement and
//                                every reduce variable is bound to 0, `init` runs first; then
//                                `body` runs. Inside init/body only the block's own iteration
//                                variables are visible (a block is opaque to its loop nest, so
//                                loops can be split, reordered or fused by changing bindings).
//                                The predicate, like the bindings, is over the enclosing loop
//                                variables; when it holds, every binding must lie in
//                                [0, extent) of its iteration variable (the interpreter checks).
//
//   Example (one reduction statement of a spec, unoptimized):
//     for m in 0..64:
//       for n in 0..64:
//         for d in 0..32:
//           block S(m = m, n = n; reduce d = d):
//             init: S[m, n] = 0.0f
//             S[m, n] = S[m, n] + f32(Q[m, d]) * f32(K[n, d])
//
// Expressions are typed (support/dtype.h). Index expressions (loop and iteration variables,
// integer immediates, +, -, *, floordiv, mod) have dtype Index; comparisons and logical ops have
// dtype Bool; float operations have the dtype of their operands, which must agree. Float
// operations on f32 are evaluated in f32 (each result rounded to f32).
//
// Nodes are immutable and shared (`std::shared_ptr<const ...>`); a pass builds new nodes with the
// `make` functions and reuses unchanged subtrees, so snapshots of every stage can be kept and
// handed to other threads without copying. Every node carries `Provenance`: the spec statement
// and source range it comes from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/support/dtype.h"
#include "core/support/source.h"

namespace nautilus::scalar {

// Where a node comes from: index of the spec statement (into spec::Program::statements, -1 when
// synthesized) and the source range of the construct it implements.
struct Provenance {
  int statement = -1;
  SourceRange range;
};

enum class MemoryScope { Global, Shared, Register };
const char* memory_scope_name(MemoryScope scope);

// Workspace: scratch a kernel keeps for itself between its CTAs (the dynamic tile scheduler's
// counter), zeroed by the launcher before every launch; never an input or output of the operator.
enum class BufferRole { Input, Output, Intermediate, Workspace };
const char* buffer_role_name(BufferRole role);

struct BufferNode {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  MemoryScope scope = MemoryScope::Global;
  BufferRole role = BufferRole::Intermediate;
  Provenance provenance;
  // A shared-scope row copy that may be longer than a CTA's shared memory
  // (`cache_read(..., readers=all, tail=global)`): the MA lowering keeps its leading stages on
  // chip and its readers read the stages past them from the copied tensor in global memory.
  bool tail_in_global = false;

  int64_t element_count() const;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, std::vector<int64_t> shape, DType dtype, MemoryScope scope,
                   BufferRole role, Provenance provenance = {});

// A loop or iteration variable. Identity is the node's address; names are for printing. Two
// variables visible at the same point never share a name (no shadowing; the verifier checks),
// but separate loop nests and blocks reuse names freely (every statement's nest uses `m`).
struct VarNode {
  std::string name;
};
using Var = std::shared_ptr<const VarNode>;
Var make_var(std::string name);

// ---------------------------------------------------------------------------------------------
// Expressions

#define NAUTILUS_SCALAR_EXPR_NODES(X) \
  X(IntImm)                           \
  X(FloatImm)                         \
  X(VarRef)                           \
  X(Load)                             \
  X(Cast)                             \
  X(Unary)                            \
  X(Binary)                           \
  X(Compare)                          \
  X(Logical)                          \
  X(Select)

enum class ExprKind {
#define NAUTILUS_ENUM_ENTRY(name) name,
  NAUTILUS_SCALAR_EXPR_NODES(NAUTILUS_ENUM_ENTRY)
#undef NAUTILUS_ENUM_ENTRY
};

enum class UnaryOp { Neg, Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Tanh, Sigmoid, Abs };
enum class BinaryOp { Add, Sub, Mul, Div, FloorDiv, Mod, Max, Min };
enum class CompareOp { LT, LE, GT, GE, EQ, NE };
enum class LogicalOp { And, Or };
const char* unary_op_name(UnaryOp op);      // "neg", "exp", ...
const char* binary_op_name(BinaryOp op);    // "add", "sub", ..., "floordiv", "mod", "max", "min"
const char* compare_op_name(CompareOp op);  // "<", "<=", ...
const char* logical_op_name(LogicalOp op);  // "and", "or"

struct ExprNode {
  ExprNode(ExprKind kind, DType dtype, Provenance provenance)
      : kind(kind), dtype(dtype), provenance(provenance) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DType dtype;
  const Provenance provenance;

  template <typename T>
  const T* as() const {
    return kind == T::kKind ? static_cast<const T*>(this) : nullptr;
  }
};
using Expr = std::shared_ptr<const ExprNode>;

struct IntImm : ExprNode {
  static constexpr ExprKind kKind = ExprKind::IntImm;
  IntImm(int64_t value, Provenance p) : ExprNode(kKind, DType::Index, p), value(value) {}
  const int64_t value;
};
struct FloatImm : ExprNode {  // may be ±inf
  static constexpr ExprKind kKind = ExprKind::FloatImm;
  FloatImm(double value, DType dtype, Provenance p) : ExprNode(kKind, dtype, p), value(value) {}
  const double value;
};
struct VarRef : ExprNode {
  static constexpr ExprKind kKind = ExprKind::VarRef;
  VarRef(Var var, Provenance p) : ExprNode(kKind, DType::Index, p), var(std::move(var)) {}
  const Var var;
};
struct Load : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Load;
  Load(Buffer buffer, std::vector<Expr> indices, Provenance p)
      : ExprNode(kKind, buffer->dtype, p), buffer(std::move(buffer)), indices(std::move(indices)) {}
  const Buffer buffer;
  const std::vector<Expr> indices;
};
struct Cast : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Cast;
  Cast(DType dtype, Expr value, Provenance p) : ExprNode(kKind, dtype, p), value(std::move(value)) {}
  const Expr value;
};
struct Unary : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Unary;
  Unary(UnaryOp op, Expr a, Provenance p) : ExprNode(kKind, a->dtype, p), op(op), a(std::move(a)) {}
  const UnaryOp op;
  const Expr a;
};
struct Binary : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Binary;
  Binary(BinaryOp op, Expr a, Expr b, Provenance p)
      : ExprNode(kKind, a->dtype, p), op(op), a(std::move(a)), b(std::move(b)) {}
  const BinaryOp op;
  const Expr a, b;
};
struct Compare : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Compare;
  Compare(CompareOp op, Expr a, Expr b, Provenance p)
      : ExprNode(kKind, DType::Bool, p), op(op), a(std::move(a)), b(std::move(b)) {}
  const CompareOp op;
  const Expr a, b;
};
struct Logical : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Logical;
  Logical(LogicalOp op, Expr a, Expr b, Provenance p)
      : ExprNode(kKind, DType::Bool, p), op(op), a(std::move(a)), b(std::move(b)) {}
  const LogicalOp op;
  const Expr a, b;
};
struct Select : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Select;
  Select(Expr condition, Expr if_true, Expr if_false, Provenance p)
      : ExprNode(kKind, if_true->dtype, p),
        condition(std::move(condition)),
        if_true(std::move(if_true)),
        if_false(std::move(if_false)) {}
  const Expr condition, if_true, if_false;
};

// Builders. They do not check types (the verifier does); operand dtype determines result dtype.
Expr int_imm(int64_t value, Provenance p = {});
Expr float_imm(double value, DType dtype, Provenance p = {});
Expr var_ref(const Var& var, Provenance p = {});
Expr load(const Buffer& buffer, std::vector<Expr> indices, Provenance p = {});
Expr cast(DType dtype, Expr value, Provenance p = {});
Expr unary(UnaryOp op, Expr a, Provenance p = {});
Expr binary(BinaryOp op, Expr a, Expr b, Provenance p = {});
Expr compare(CompareOp op, Expr a, Expr b, Provenance p = {});
Expr logical(LogicalOp op, Expr a, Expr b, Provenance p = {});
Expr select(Expr condition, Expr if_true, Expr if_false, Provenance p = {});

// ---------------------------------------------------------------------------------------------
// Statements

#define NAUTILUS_SCALAR_STMT_NODES(X) \
  X(For)                              \
  X(Seq)                              \
  X(Store)                            \
  X(Block)

enum class StmtKind {
#define NAUTILUS_ENUM_ENTRY(name) name,
  NAUTILUS_SCALAR_STMT_NODES(NAUTILUS_ENUM_ENTRY)
#undef NAUTILUS_ENUM_ENTRY
};

struct StmtNode {
  StmtNode(StmtKind kind, Provenance provenance) : kind(kind), provenance(provenance) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
  const Provenance provenance;

  template <typename T>
  const T* as() const {
    return kind == T::kKind ? static_cast<const T*>(this) : nullptr;
  }
};
using Stmt = std::shared_ptr<const StmtNode>;

// How a loop is executed. A serial loop runs its iterations in order. A grid loop is one
// dimension of the CUDA grid (the `bind` decision makes one): each iteration is a CTA, and CTAs
// run concurrently in any order, so a grid loop may only iterate axes that are spatial for every
// block under it (bind checks that; it is a property of the schedule, not of the structure).
// Structurally, grid loops enclose everything else: no serial loop or block encloses a grid
// loop, and each grid dimension appears at most once on a path (the verifier checks both). The
// interpreter runs grid loops in order, like serial ones. Lowering creates only serial loops.
enum class ForKind { Serial, GridX, GridY, GridZ };
const char* for_kind_name(ForKind kind);  // "serial", "grid.x", "grid.y", "grid.z"
bool is_grid(ForKind kind);

// The largest group of the tile order (grid.y rows launched together; a grid dimension is at
// most 65535 CTAs).
inline constexpr int kMaxTileOrderGroup = 65535;

// How the kernel made from one top-level loop nest is launched and pipelined (the `launch`
// decision, core/sched/launch.h): `warps` warps per CTA (1, 2, 4 or 8) and `stages`
// software-pipeline buffers for the copies of its inner loop (1 to 8), and `consumers` > 0 for
// the warp-specialized Hopper form (the `warp_spec` decision, core/sched/warp_spec.h): a TMA
// producer warpgroup and that many consumer warpgroups on wgmma, in place of `warps`; `group` > 1
// for the grouped tile order of its CTAs (the `tile_order` decision, core/sched/tile_order.h). Only the
// outermost loop of a nest carries it (the verifier checks); tilize copies it onto the nest's VR
// kernel and the MA lowering places that kernel with it. A nest without one gets the lowering's
// defaults.
// How a kernel reads register tiles element by element from shared memory (launch's reads=,
// the CLI's --shared-reads; docs/codegen.md "SharedLoad"): grouped (a lane's neighbouring
// elements in one ld.shared at hoisted addresses, matile::Kernel::grouped_shared_reads),
// element by element, or auto (grouped where a widened int8 mma operand is read 4 or more
// bytes at a time, element by element elsewhere).
enum class SharedReads { Auto, Elements, Grouped };
// How a kernel's mma.sync products of 1, 2, 4 or 8 rows run (launch's mma=; docs/matile.md rule
// 2): swapped (B's columns the instruction's 16 rows, matile's mma_swapped_c_layout), direct
// (the rows repeated to 16), or auto (swapped where the product is only accumulated and stored).
enum class MmaForm { Auto, Direct, Swapped };

struct LaunchAttrs {
  int warps = 4;
  int stages = 2;
  int consumers = 0;  // 0: no warp specialization
  // With consumers: the depth of the rings the consumers release in the iteration that reads
  // them (attention's K, docs/matile.md "early release"); 0: `stages`, like the others.
  int early_stages = 0;
  // With consumers: the consumers' loop software-pipelined by one iteration, its last dot
  // issued in the next iteration beside that iteration's first (warp_spec's overlap=1).
  bool overlap = false;
  // With consumers >= 2: the consumer warpgroups take turns issuing their iteration's MMAs
  // through named barriers, so one warpgroup's softmax runs while the other's MMAs occupy the
  // tensor cores (warp_spec's pingpong=1; FlashAttention-3's ping-pong).
  bool pingpong = false;
  // Tile order (the tile_order decision): CTAs launched in groups of `group` rows of grid.y,
  // each group walked column by column (core/support/launch_order.h); 1: plain row-major order.
  int group = 1;
  // Loops of the nest, each bound to a grid axis, whose tiles are launched from the last one
  // down (tile_order's reverse=LOOP; core/support/launch_order.h).
  std::vector<std::string> reversed;
  // Persistent CTAs (the persistent decision): as many CTAs as the GPU holds at once, each
  // walking several tiles in the tile order above; applied to warp-specialized kernels.
  bool persistent = false;
  // How persistent CTAs find their tiles (persistent's scheduler=): dynamically, each further
  // tile from a global counter in launch order (true, the default), or statically, CTA c taking
  // tiles c, c + launched, ... (false). Meaningful only with `persistent`.
  bool dynamic_tiles = true;
  SharedReads shared_reads = SharedReads::Auto;  // launch's reads=
  MmaForm mma_form = MmaForm::Auto;               // launch's mma=
  bool operator==(const LaunchAttrs&) const = default;
};

struct For : StmtNode {
  static constexpr StmtKind kKind = StmtKind::For;
  For(Var var, int64_t extent, ForKind for_kind, Stmt body, Provenance p,
      std::optional<LaunchAttrs> launch = std::nullopt)
      : StmtNode(kKind, p), var(std::move(var)), extent(extent), for_kind(for_kind),
        body(std::move(body)), launch(launch) {}
  const Var var;
  const int64_t extent;
  const ForKind for_kind;
  const Stmt body;
  const std::optional<LaunchAttrs> launch;  // only on the outermost loop of a nest
};
struct Seq : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Seq;
  Seq(std::vector<Stmt> stmts, Provenance p) : StmtNode(kKind, p), stmts(std::move(stmts)) {}
  const std::vector<Stmt> stmts;
};
struct Store : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Store;
  Store(Buffer buffer, std::vector<Expr> indices, Expr value, Provenance p)
      : StmtNode(kKind, p), buffer(std::move(buffer)), indices(std::move(indices)),
        value(std::move(value)) {}
  const Buffer buffer;
  const std::vector<Expr> indices;
  const Expr value;
};

enum class IterKind { Spatial, Reduce };

struct IterVar {
  Var var;
  int64_t extent = 0;
  IterKind kind = IterKind::Spatial;
};

struct Block : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Block;
  Block(std::string name, std::vector<IterVar> iter_vars, std::vector<Expr> bindings,
        Expr predicate, Stmt init, Stmt body, Provenance p)
      : StmtNode(kKind, p), name(std::move(name)), iter_vars(std::move(iter_vars)),
        bindings(std::move(bindings)), predicate(std::move(predicate)), init(std::move(init)),
        body(std::move(body)) {}
  const std::string name;               // unique in the program
  const std::vector<IterVar> iter_vars;
  const std::vector<Expr> bindings;     // one per iter var, over enclosing loop variables
  const Expr predicate;                 // nullptr = always true
  const Stmt init;                      // nullptr = no init
  const Stmt body;
};

Stmt make_for(Var var, int64_t extent, Stmt body, Provenance p = {},
              ForKind kind = ForKind::Serial, std::optional<LaunchAttrs> launch = std::nullopt);
// The same loop with `launch` as its launch attributes (nullopt: none).
Stmt with_launch(const For& loop, std::optional<LaunchAttrs> launch);
Stmt make_seq(std::vector<Stmt> stmts, Provenance p = {});
Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value, Provenance p = {});
Stmt make_block(std::string name, std::vector<IterVar> iter_vars, std::vector<Expr> bindings,
                Expr predicate, Stmt init, Stmt body, Provenance p = {});

// ---------------------------------------------------------------------------------------------
// Program

struct Program {
  std::string name;                  // the spec's name
  std::vector<Buffer> params;        // inputs, then outputs (the kernel arguments)
  std::vector<Buffer> allocations;   // intermediates
  Stmt body;

  const Buffer* find_buffer(const std::string& buffer_name) const;  // nullptr when absent
};
using ProgramPtr = std::shared_ptr<const Program>;

}  // namespace nautilus::scalar
