#include "core/sched/compute_with.h"

#include <algorithm>

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "compute_with(BLOCK, OTHER, LOOP)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_two_names(decision, kSignature, "OTHER and LOOP");
  if (!reason.empty()) return ApplyResult::failure(reason);
  const std::vector<const DecisionArg*> args = decision.positional();
  return compute_with(program, decision.target, args[0]->as_name(), args[1]->as_name());
}

// The buffers the blocks of `stmt` read and write.
BlockAccesses nest_accesses(const Stmt& stmt) {
  BlockAccesses all;
  for (const Block* block : collect_blocks(stmt)) {
    const BlockAccesses one = block_accesses(*block);
    for (const BufferNode* read : one.reads) {
      if (!all.reads_buffer(read)) all.reads.push_back(read);
    }
    for (const BufferNode* written : one.writes) {
      if (!all.writes_buffer(written)) all.writes.push_back(written);
    }
  }
  return all;
}

// Empty when `a` and `b` can run in either order: neither writes what the other reads or writes.
// Otherwise the reason, naming the tensor.
std::string conflict(const BlockAccesses& a, const std::string& a_name, const BlockAccesses& b,
                     const std::string& b_name) {
  for (const BufferNode* written : a.writes) {
    if (b.reads_buffer(written) || b.writes_buffer(written)) {
      return a_name + " writes " + written->name + ", which " + b_name +
             (b.writes_buffer(written) ? " writes" : " reads");
    }
  }
  for (const BufferNode* written : b.writes) {
    if (a.reads_buffer(written)) return b_name + " writes " + written->name + ", which " + a_name + " reads";
  }
  return {};
}

}  // namespace

ApplyResult compute_with(const ProgramPtr& program, std::string_view block_name,
                         std::string_view other_name, std::string_view loop_name) {
  std::string reason;
  const std::optional<MovePlace> place =
      find_move_place(*program, block_name, other_name, loop_name, &reason);
  if (!place) return ApplyResult::failure(reason);
  const BlockPath& moved = place->moved;
  const BlockPath& anchor = place->anchor;
  const size_t depth = place->depth;
  const For& loop = *place->loop;
  const std::string& at = place->at;

  // 1. The nests part at some loop p at or above LOOP: the loops of OTHER's nest from p down to
  //    LOOP and as many of BLOCK's, from its loop beside p (a child of the same sequence, under
  //    the same loops), must each be perfectly nested, level by level of the same extent.
  size_t part = 1;
  while (part < depth && part < moved.stmts.size() && moved.stmts[part] == anchor.stmts[part]) ++part;
  const Seq* parent = anchor.stmts[part - 1]->as<Seq>();
  const std::string block(block_name);
  const auto no_sibling = [&] {
    return ApplyResult::failure("block " + block + " has no loop beside " + at +
                                " (a loop in the same sequence, under the same loops); compute_with "
                                "merges two sibling loops: move " + block +
                                " next to it first (compute_at into the same loop)");
  };
  if (!parent || moved.stmts.size() <= depth || moved.stmts[part] == anchor.stmts[part]) return no_sibling();
  std::vector<const For*> loops, siblings_chain;
  for (size_t level = part; level <= depth; ++level) {
    const For* mine = anchor.stmts[level]->as<For>();
    const For* theirs = moved.stmts[level]->as<For>();
    if (!mine) {
      return ApplyResult::failure("the loops of block " + std::string(other_name) + " down to " + at +
                                  " are not perfectly nested under the loop they part at; "
                                  "compute_with merges perfect nests");
    }
    if (!theirs) return no_sibling();
    loops.push_back(mine);
    siblings_chain.push_back(theirs);
  }
  const For* sibling = siblings_chain.front();
  const For& first_loop = *loops.front();
  for (size_t level = 0; level < loops.size(); ++level) {
    const For& mine = *loops[level];
    const For& theirs = *siblings_chain[level];
    const std::string mine_at = "loop " + mine.var->name + " of block " + std::string(other_name);
    const std::string theirs_at = "loop " + theirs.var->name + " of block " + block;
    if (theirs.extent != mine.extent) {
      return ApplyResult::failure(theirs_at + " runs " + std::to_string(theirs.extent) +
                                  " iterations and " + mine_at + " " + std::to_string(mine.extent) +
                                  "; compute_with merges loops of the same extent (tile both alike)");
    }
    if (theirs.for_kind != ForKind::Serial || mine.for_kind != ForKind::Serial || theirs.launch ||
        mine.launch) {
      return ApplyResult::failure(mine_at + " and " + theirs_at +
                                  " must both be serial loops inside a kernel; merge grid loops "
                                  "by binding the nests alike instead");
    }
  }

  // 2. The two nests are independent, and the later one may move up past what stands between.
  const std::vector<Stmt>& children = parent->stmts;
  const auto index_of = [&](const StmtNode* stmt) {
    return static_cast<size_t>(std::find_if(children.begin(), children.end(),
                                            [&](const Stmt& s) { return s.get() == stmt; }) -
                               children.begin());
  };
  const size_t loop_index = index_of(&first_loop), sibling_index = index_of(sibling);
  const size_t first = std::min(loop_index, sibling_index), last = std::max(loop_index, sibling_index);
  const BlockAccesses loop_accesses = nest_accesses(children[loop_index]);
  const BlockAccesses sibling_accesses = nest_accesses(children[sibling_index]);
  reason = conflict(sibling_accesses, "block " + block + "'s nest", loop_accesses,
                    "block " + std::string(other_name) + "'s nest");
  if (!reason.empty()) {
    return ApplyResult::failure(reason + "; compute_with merges independent loops only");
  }
  const BlockAccesses later = nest_accesses(children[last]);
  for (size_t i = first + 1; i < last; ++i) {
    reason = conflict(later, "the later loop", nest_accesses(children[i]), "a statement between the loops");
    if (!reason.empty()) return ApplyResult::failure(reason + "; it cannot move past it");
  }

  // 3. One nest: OTHER's loop variables, the earlier nest's statements first in the innermost
  //    merged loop.
  VarReplacements rename;
  for (size_t level = 0; level < loops.size(); ++level) {
    rename[siblings_chain[level]->var.get()] = var_ref(loops[level]->var);
  }
  const Stmt renamed = substitute_everywhere(siblings_chain.back()->body, rename);
  std::vector<Stmt> sibling_body;
  if (const Seq* seq = renamed->as<Seq>()) {
    sibling_body = seq->stmts;
  } else {
    sibling_body = {renamed};
  }
  const std::vector<Stmt> loop_body = loop_children(loop);
  std::vector<Stmt> body;
  const std::vector<Stmt>& before = loop_index < sibling_index ? loop_body : sibling_body;
  const std::vector<Stmt>& after = loop_index < sibling_index ? sibling_body : loop_body;
  body.insert(body.end(), before.begin(), before.end());
  body.insert(body.end(), after.begin(), after.end());
  Stmt merged = make_for(loop.var, loop.extent, make_seq(std::move(body), loop.provenance),
                         loop.provenance, loop.for_kind);
  for (size_t level = loops.size() - 1; level-- > 0;) {
    const For& outer = *loops[level];
    merged = make_for(outer.var, outer.extent, merged, outer.provenance, outer.for_kind);
  }

  std::vector<Stmt> siblings;
  for (size_t i = 0; i < children.size(); ++i) {
    if (i == sibling_index) continue;
    siblings.push_back(i == loop_index ? merged : children[i]);
  }
  if (first != loop_index) {
    // The merged loop stands where the earlier of the two stood.
    const auto at_merged = std::find(siblings.begin(), siblings.end(), merged);
    siblings.erase(at_merged);
    siblings.insert(siblings.begin() + static_cast<std::ptrdiff_t>(first), merged);
  }
  // A sequence left with one statement (other than the program body) becomes that statement, so
  // that the loops above stay perfectly nested.
  const Stmt replacement = siblings.size() == 1 && part - 1 > 0
                               ? siblings.front()
                               : make_seq(std::move(siblings), parent->provenance);
  return ApplyResult::success(with_body(program, replace_at(anchor, part - 1, replacement)));
}

DecisionKind compute_with_decision() {
  return {
      "compute_with",
      std::string(kSignature),
      "Merge a block's loop into a sibling loop of the same extent, so that one loop computes both.",
      "The nests of BLOCK and OTHER part at a loop at or above LOOP (two children of one "
      "sequence, under the same loops); from there down to LOOP both are perfect nests of the "
      "same extents, and BLOCK's loops go away: their body runs in LOOP's body, in program "
      "order with LOOP's own statements. The two nests must not write what the other reads or "
      "writes. Example: a gated MLP's G = X Wg and "
      "U = X Wu, computed at one tile of A = f(G) * U and tiled alike along h, "
      "compute_with(U, G, h_o) gives `for h_o: (G's tile update; U's tile update)`: one k loop "
      "that reads each tile of X once for both products, in one kernel that computes A from the "
      "two accumulators.",
      apply,
  };
}

}  // namespace nautilus::sched
