// Finding blocks and loops in scalar IR and rebuilding a program body after a local rewrite: the
// plumbing every schedule pass shares.
//
// Passes address statements by *path*: the chain of statements from the program body down to a
// block, each a child of the previous one (a loop's body or an element of a sequence). Paths
// never enter a block (blocks are opaque to their loop nest; ir.h). A rewrite replaces one
// statement of a path and rebuilds the ancestors above it; siblings and everything below are
// shared with the input, so unchanged nests stay pointer-identical between snapshots.
//
//   for b in 0..2:              path of block O_sum: [body Seq, for b, for m, for n, block O_sum]
//     for m in 0..12:           path.loops(): b, m, n      path.loop_depth("m") == 2
//       for n in 0..20:
//         block O_sum(...)
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/scalar/ir.h"

namespace nautilus::sched {

struct BlockPath {
  std::vector<scalar::Stmt> stmts;  // front(): the program body; back(): the block

  const scalar::Block& block() const { return *stmts.back()->as<scalar::Block>(); }
  // The loops enclosing the block, outermost first.
  std::vector<const scalar::For*> loops() const;
  // The index into `stmts` of the enclosing loop whose variable is `name` (or `var`); nullopt
  // when there is none.
  std::optional<size_t> loop_depth(std::string_view name) const;
  std::optional<size_t> loop_depth(const scalar::VarNode* var) const;
  // "b, h, m, n": the enclosing loops' names, for reasons.
  std::string loop_names() const;
};

// The path of the block named `name` in `body`; nullopt when there is none.
std::optional<BlockPath> find_block(const scalar::Stmt& body, std::string_view name);
// The same in a program, with the reason "program gemm has no block Q; its blocks are C_sum, C".
std::optional<BlockPath> find_block(const scalar::Program& program, std::string_view name,
                                    std::string* reason);

// The blocks of compute_at and reverse_compute_at: `moved` goes under `anchor`'s loop `depth`.
struct MovePlace {
  BlockPath moved, anchor;
  size_t depth = 0;                   // index into anchor.stmts of the loop
  const scalar::For* loop = nullptr;  // anchor.stmts[depth]
  std::string at;  // "loop n of block C", for reasons
};
// Finds block `moved_name`, then block `anchor_name` and its loop `loop_name`; nullopt with the
// reason when one is missing or the two are the same block.
std::optional<MovePlace> find_move_place(const scalar::Program& program,
                                         std::string_view moved_name,
                                         std::string_view anchor_name,
                                         std::string_view loop_name, std::string* reason);

// Every block in `stmt` (not descending into blocks), in program order.
std::vector<const scalar::Block*> collect_blocks(const scalar::Stmt& stmt);

// Every loop variable in `stmt` (not descending into blocks).
std::vector<const scalar::VarNode*> collect_loop_vars(const scalar::Stmt& stmt);

// The buffers a block loads from and stores to (its init and body), each once, in order of first
// appearance.
struct BlockAccesses {
  std::vector<const scalar::BufferNode*> reads, writes;
  bool reads_buffer(const scalar::BufferNode* buffer) const;
  bool writes_buffer(const scalar::BufferNode* buffer) const;
};
BlockAccesses block_accesses(const scalar::Block& block);

// The blocks of a program body in program order with what each reads and writes: the facts the
// fusion passes check dependences against.
class BlockOrder {
 public:
  explicit BlockOrder(const scalar::Stmt& body);

  const std::vector<const scalar::Block*>& blocks() const { return blocks_; }
  // The index of `block` in program order (blocks().size() when it is not in the body).
  size_t position(const scalar::Block* block) const;
  std::vector<const scalar::Block*> writers(const scalar::BufferNode* buffer) const;
  // Blocks that read `buffer` without writing it (an accumulator reading its own buffer is its
  // writer, not a reader).
  std::vector<const scalar::Block*> readers(const scalar::BufferNode* buffer) const;

 private:
  std::vector<const scalar::Block*> blocks_;
  std::vector<BlockAccesses> accesses_;
};

// Whether `blocks` holds `block`.
bool contains_block(const std::vector<const scalar::Block*>& blocks, const scalar::Block* block);

// "S", "S and P", "S, P and L".
std::string block_list(const std::vector<const scalar::Block*>& blocks);

// Every load of `buffer` in `stmt` (including inside blocks).
std::vector<const scalar::Load*> collect_loads(const scalar::Stmt& stmt,
                                               const scalar::BufferNode* buffer);

// Whether `expr` refers to `var`.
bool uses_var(const scalar::Expr& expr, const scalar::VarNode* var);
// The variables `expr` refers to, each once, in order of first appearance.
std::vector<const scalar::VarNode*> referenced_vars(const scalar::Expr& expr);

// `expr` with every reference to a key of `replacements` replaced by its value. Returns `expr`
// itself when nothing was replaced.
using VarReplacements = std::unordered_map<const scalar::VarNode*, scalar::Expr>;
scalar::Expr substitute(const scalar::Expr& expr, const VarReplacements& replacements);

// `stmt` with every variable reference replaced (inside block bodies too): renames the iteration
// variables of a statement copied into a new block. nullptr stays nullptr.
scalar::Stmt substitute_everywhere(const scalar::Stmt& stmt, const VarReplacements& replacements);

// The leading `indices` that are plain references to distinct variables: for a producer's store
// `T[i, j] = e`, its iteration variables by dimension. A shorter result than `indices` means the
// store is not in that plain form.
std::vector<const scalar::VarNode*> distinct_index_vars(const std::vector<scalar::Expr>& indices);

// `stmt` with every load `buffer[x0, x1, ...]` replaced by `value` with store_vars[d] replaced by
// x_d: the value a plain store `buffer[store_vars] = value` (see distinct_index_vars) puts
// there, computed in place.
scalar::Stmt inline_loads(const scalar::Stmt& stmt, const scalar::BufferNode* buffer,
                          const std::vector<const scalar::VarNode*>& store_vars,
                          const scalar::Expr& value);

// The body with path.stmts[depth] replaced by `replacement`: the ancestors above it are rebuilt,
// everything else is shared. A sequence child is located by pointer identity.
scalar::Stmt replace_at(const BlockPath& path, size_t depth, scalar::Stmt replacement);

// The body without path.stmts[depth]. Loops left with nothing to run are removed with it (so
// removing a block removes the loops that enclose only it), and a sequence left with one element
// other than the program body is replaced by that element, which keeps the loops above it
// perfectly nested. Removing the whole body leaves an empty sequence.
scalar::Stmt remove_at(const BlockPath& path, size_t depth);

// The body with `stmt` inserted as child `index` of the body of the loop path.stmts[depth]
// (0 = before everything the loop runs; the number of children = after). The loop's body
// becomes a sequence.
scalar::Stmt insert_into_loop(const BlockPath& path, size_t depth, size_t index,
                              scalar::Stmt stmt);

// The statements a loop body runs in order: a sequence's elements, or the body itself.
std::vector<scalar::Stmt> loop_children(const scalar::For& loop);

// The names of the loops on `path` from the outermost down to stmts[depth] inclusive (depth may
// be any index of stmts) together with every loop name in the subtree of stmts[depth]: the names
// a new loop variable at that point must not reuse (no shadowing; verifier.h).
std::set<std::string> names_in_scope(const BlockPath& path, size_t depth);

// `base` when it is not in `taken`, else base2, base3, ...; the result is added to `taken`.
std::string fresh_name(const std::string& base, std::set<std::string>* taken);

// A copy of `program` with a new body.
scalar::ProgramPtr with_body(const scalar::ProgramPtr& program, scalar::Stmt body);

// Index expression builders that print the way a reader writes them: `a * 1` is `a`, `a + 0` is
// `a`, and constants fold.
scalar::Expr index_add(scalar::Expr a, scalar::Expr b);
scalar::Expr index_mul(scalar::Expr a, int64_t factor);
scalar::Expr index_lt(scalar::Expr a, int64_t bound);
// `a and b`, where either may be null (absent = true).
scalar::Expr conjunction(scalar::Expr a, scalar::Expr b);

}  // namespace nautilus::sched
