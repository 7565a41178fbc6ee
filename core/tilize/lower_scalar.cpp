#include "core/tilize/lower_scalar.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "core/scalar/affine.h"
#include "core/scalar/visitor.h"
#include "core/scalar/printer.h"
#include "core/sched/loop_nest.h"

namespace nautilus::tilize {

namespace vr = vrtile;
using scalar::Affine;
using scalar::affine_of;
using scalar::BinaryOp;
using scalar::Block;
using scalar::Buffer;
using scalar::BufferNode;
using scalar::BufferRole;
using scalar::Expr;
using scalar::ExprKind;
using scalar::For;
using scalar::IterKind;
using scalar::Stmt;
using scalar::VarNode;

namespace {

// Thrown inside the lowering and turned into TilizeResult::error at the top: the recursion is
// deep and every failure ends the whole lowering, so unwinding is the simplest honest path.
struct Unsupported {
  std::string reason;
};

[[noreturn]] void fail(std::string reason) { throw Unsupported{std::move(reason)}; }

enum class LoopRole { Grid, Serial, Vector };

std::string affine_text(const Affine& affine) {
  // Variables are compared by identity; names make the text readable in messages.
  std::vector<std::pair<const VarNode*, int64_t>> terms(affine.coeffs.begin(),
                                                        affine.coeffs.end());
  std::sort(terms.begin(), terms.end(), [](const auto& x, const auto& y) {
    return std::tie(x.first->name, x.first) < std::tie(y.first->name, y.first);
  });
  std::ostringstream out;
  for (const auto& [var, c] : terms) out << c << "*" << var->name << "@" << var << "+";
  out << affine.constant;
  return out.str();
}

// How one index of an access moves over the tile: along one vector loop (`base + var`), or not
// at all (`base`). Anything else (a vector loop with a stride, two loops) is `general`: such an
// access is loaded or stored through index tiles but never matched to a register region.
struct DimAccess {
  bool general = false;
  const VarNode* var = nullptr;  // the vector loop, or null
  int64_t extent = 1;
  Affine base;                   // over grid and serial loop variables, when `affine`
  bool affine = true;            // false: a scalar index such as GQA's `h / 8`, kept as `index`
  Expr index;                    // the index over loop variables
};

// A tile value: its SSA value and, per axis, the vector loop variable it runs along, in the
// order of the enclosing loops (outermost first).
struct Tile {
  vr::Value value;
  std::vector<const VarNode*> dims;
};

// The part of a buffer held in registers: the tile runs along the buffer's vector-indexed
// dimensions in increasing order.
struct Region {
  Buffer buffer;
  std::vector<DimAccess> access;
  vr::Value value;
};

double reduce_identity(BinaryOp op) {
  switch (op) {
    case BinaryOp::Max: return -INFINITY;
    case BinaryOp::Min: return INFINITY;
    default: return 0.0;
  }
}

vr::ReduceOp reduce_op_of(BinaryOp op) {
  switch (op) {
    case BinaryOp::Max: return vr::ReduceOp::Max;
    case BinaryOp::Min: return vr::ReduceOp::Min;
    default: return vr::ReduceOp::Sum;
  }
}

std::vector<Expr> conjuncts(const Expr& predicate) {
  if (!predicate) return {};
  if (const auto* logical = predicate->as<scalar::Logical>();
      logical && logical->op == scalar::LogicalOp::And) {
    std::vector<Expr> out = conjuncts(logical->a);
    for (Expr& e : conjuncts(logical->b)) out.push_back(std::move(e));
    return out;
  }
  return {predicate};
}

// Facts gathered over the whole program by a first lowering and used by the second: which
// buffers some access reads from global memory (so their writers must store them), and in which
// serial loops (so stores of values carried by that loop cannot wait until after it).
struct GlobalReads {
  bool recording = true;  // first lowering: store every write
  std::set<const BufferNode*> buffers;
  std::set<std::pair<const For*, const BufferNode*>> inside_loop;
};

struct LoopFrame {
  const For* loop;
  std::set<std::string> sunk_keys;  // regions this loop carries whose store waits until after it
};

class KernelLowering {
 public:
  KernelLowering(const scalar::Program& program, GlobalReads& reads)
      : program_(program), reads_(reads) {}

  vr::KernelPtr lower_nest(const Stmt& nest, const std::string& name) {
    assign_roles(nest);
    Stmt inner = nest;
    std::vector<const For*> grid_loops;
    while (const For* loop = inner->as<For>()) {
      if (roles_.at(loop->var.get()) != LoopRole::Grid) break;
      grid_loops.push_back(loop);
      inner = loop->body;
    }
    // Grid axes in CUDA order: the loop bound to grid.x first, then y, then z, then loops the
    // schedule left unbound. CTAs are launched x-fastest, so the bind decides which CTAs run
    // side by side (attention binds query tiles to x: the CTAs of one head share K and V in L2).
    auto grid_rank = [](const For* loop) {
      switch (loop->for_kind) {
        case scalar::ForKind::GridX: return 0;
        case scalar::ForKind::GridY: return 1;
        case scalar::ForKind::GridZ: return 2;
        default: return 3;
      }
    };
    std::stable_sort(grid_loops.begin(), grid_loops.end(), [&](const For* a, const For* b) {
      return grid_rank(a) < grid_rank(b);
    });
    for (const For* loop : grid_loops) {
      scalars_[loop->var.get()] = builder_.grid(loop->var->name, loop->extent);
      extents_[loop->var.get()] = loop->extent;
    }
    lower_stmt(inner);
    std::vector<Buffer> params;
    for (const std::vector<Buffer>* list : {&program_.params, &program_.allocations}) {
      for (const Buffer& buffer : *list) {
        if (touched_.count(buffer.get())) params.push_back(buffer);
      }
    }
    return builder_.finish_kernel(name, params);
  }

  const std::set<const BufferNode*>& touched() const { return touched_; }

 private:
  // ---- loop roles --------------------------------------------------------------------------

  void assign_roles(const Stmt& nest) {
    std::vector<const For*> chain;
    Stmt s = nest;
    while (const For* loop = s->as<For>()) {
      chain.push_back(loop);
      s = loop->body;
    }
    const std::vector<const Block*> blocks = sched::collect_blocks(nest);
    const auto is_reduction_loop_of = [](const Block& block, const VarNode* var) {
      for (size_t i = 0; i < block.iter_vars.size(); ++i) {
        if (block.iter_vars[i].kind == IterKind::Reduce && sched::uses_var(block.bindings[i], var))
          return true;
      }
      return false;
    };
    const auto spatial_for_all = [&](const For* loop) {
      return std::none_of(blocks.begin(), blocks.end(), [&](const Block* block) {
        return is_reduction_loop_of(*block, loop->var.get());
      });
    };
    size_t grid_count = 0;
    bool bound = false;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (scalar::is_grid(chain[i]->for_kind)) {
        grid_count = i + 1;
        bound = true;
      }
    }
    if (bound) {
      for (size_t i = 0; i < grid_count; ++i) {
        if (!spatial_for_all(chain[i])) {
          fail("loop " + chain[i]->var->name + " encloses loops bound to the grid but iterates a "
               "reduction axis; bind it or move it inside the CTA's loops");
        }
      }
    } else {
      while (grid_count < chain.size() && spatial_for_all(chain[grid_count])) ++grid_count;
    }
    for (size_t i = 0; i < grid_count; ++i) roles_[chain[i]->var.get()] = LoopRole::Grid;
    bound_ = bound;
    assign_inner_roles(grid_count == 0 ? nest : chain[grid_count - 1]->body, {});
  }

  void assign_inner_roles(const Stmt& stmt, std::vector<const For*> path) {
    if (const auto* seq = stmt->as<scalar::Seq>()) {
      for (const Stmt& child : seq->stmts) assign_inner_roles(child, path);
      return;
    }
    if (const auto* block = stmt->as<Block>()) {
      block_paths_[block] = path;
      return;
    }
    const For* loop = stmt->as<For>();
    if (!loop) return;
    if (scalar::is_grid(loop->for_kind)) {
      fail("loop " + loop->var->name + " is bound to the grid inside the CTA's loops; only the "
           "outermost loops of a nest can be");
    }
    path.push_back(loop);
    assign_inner_roles(loop->body, path);
    // Decide after the children, whose paths are now known.
    const std::vector<const Block*> under = sched::collect_blocks(loop->body);
    LoopRole role = LoopRole::Vector;
    for (const Block* block : under) {
      const std::vector<const For*>& block_path = block_paths_.at(block);
      for (size_t i = 0; i < block->iter_vars.size(); ++i) {
        if (block->iter_vars[i].kind != IterKind::Reduce) continue;
        if (!sched::uses_var(block->bindings[i], loop->var.get())) continue;
        if (!bound_) {
          role = LoopRole::Serial;
          continue;
        }
        const auto self = std::find(block_path.begin(), block_path.end(), loop);
        for (auto below = self + 1; below != block_path.end(); ++below) {
          if (sched::uses_var(block->bindings[i], (*below)->var.get())) role = LoopRole::Serial;
        }
      }
    }
    // A spatial loop the schedule split into tiles inside the CTA (`c_o` of
    // `c = c_o * 2048 + c_i`, the loop above a vector loop of the same binding) steps over the
    // tiles: one tile per iteration, stored before the next (a row written in tiles after its
    // statistics, in the CTA that computed them). As a vector loop the block's index would be
    // a sum of two tile axes, which no tile store can take.
    if (role == LoopRole::Vector) {
      for (const Block* block : under) {
        const std::vector<const For*>& block_path = block_paths_.at(block);
        const auto self = std::find(block_path.begin(), block_path.end(), loop);
        for (size_t i = 0; i < block->iter_vars.size(); ++i) {
          if (block->iter_vars[i].kind == IterKind::Reduce) continue;
          if (!sched::uses_var(block->bindings[i], loop->var.get())) continue;
          for (auto below = self + 1; below != block_path.end(); ++below) {
            if (sched::uses_var(block->bindings[i], (*below)->var.get())) role = LoopRole::Serial;
          }
        }
      }
    }
    // A reduction loop around several blocks is a fused loop whose blocks read each other's
    // running values: it must run in order, one element at a time.
    if (role == LoopRole::Vector && under.size() > 1) {
      for (const Block* block : under) {
        for (size_t i = 0; i < block->iter_vars.size(); ++i) {
          if (block->iter_vars[i].kind == IterKind::Reduce &&
              sched::uses_var(block->bindings[i], loop->var.get())) {
            role = LoopRole::Serial;
          }
        }
      }
    }
    roles_[loop->var.get()] = role;
  }

  // ---- statements --------------------------------------------------------------------------

  void lower_stmt(const Stmt& stmt) {
    if (const auto* seq = stmt->as<scalar::Seq>()) {
      for (const Stmt& child : seq->stmts) lower_stmt(child);
    } else if (const auto* block = stmt->as<Block>()) {
      lower_block(*block);
    } else if (const auto* loop = stmt->as<For>()) {
      extents_[loop->var.get()] = loop->extent;
      if (roles_.at(loop->var.get()) == LoopRole::Vector) {
        vectors_.push_back(loop->var.get());
        lower_stmt(loop->body);
        vectors_.pop_back();
      } else {
        lower_serial(*loop);
      }
    } else {
      fail("a store outside any block cannot be tiled");
    }
  }

  // The blocks under a serial loop and the vector loops between the loop and each of them.
  void scan(const Stmt& stmt, std::vector<const VarNode*> inner,
            std::vector<std::pair<const Block*, std::vector<const VarNode*>>>* out,
            std::set<const VarNode*>* serial_vars) {
    if (const auto* seq = stmt->as<scalar::Seq>()) {
      for (const Stmt& child : seq->stmts) scan(child, inner, out, serial_vars);
    } else if (const auto* block = stmt->as<Block>()) {
      out->push_back({block, inner});
    } else if (const auto* loop = stmt->as<For>()) {
      extents_[loop->var.get()] = loop->extent;
      if (roles_.at(loop->var.get()) == LoopRole::Vector) {
        inner.push_back(loop->var.get());
      } else {
        serial_vars->insert(loop->var.get());
      }
      scan(loop->body, inner, out, serial_vars);
    }
  }

  template <typename F>
  auto with_vectors(const std::vector<const VarNode*>& inner, F&& body) {
    const size_t depth = vectors_.size();
    vectors_.insert(vectors_.end(), inner.begin(), inner.end());
    struct Restore {
      std::vector<const VarNode*>& v;
      size_t depth;
      ~Restore() { v.resize(depth); }
    } restore{vectors_, depth};
    return body();
  }

  void lower_serial(const For& loop) {
    std::vector<std::pair<const Block*, std::vector<const VarNode*>>> blocks;
    std::set<const VarNode*> iteration_vars{loop.var.get()};
    scan(loop.body, {}, &blocks, &iteration_vars);

    // Hoist the init of each reduction this loop is the outermost serial loop of.
    for (const auto& [block, inner] : blocks) {
      if (!block->init || !reduction_starts_at(*block, loop)) continue;
      with_vectors(inner, [&, blk = block] {
        enter_block(*blk);
        const auto* init = blk->init->as<scalar::Store>();
        if (!init) fail("the init of block " + blk->name + " is not a single store");
        lower_write(*init, eval(init->value), nullptr);
        leave_block();
        return 0;
      });
    }

    // The regions this loop carries: written inside, the same in every iteration, and holding a
    // value before the loop.
    std::vector<std::string> carried;
    for (const auto& [block, inner] : blocks) {
      const auto* store = block->body->as<scalar::Store>();
      if (!store) continue;
      std::optional<std::string> key = with_vectors(inner, [&, blk = block] {
        enter_block(*blk);
        std::optional<std::string> k = region_key(*store, access_of(store->indices));
        leave_block();
        return k;
      });
      if (!key || !regions_.count(*key)) continue;
      const Region& region = regions_.at(*key);
      const bool varies = std::any_of(region.access.begin(), region.access.end(),
                                      [&](const DimAccess& dim) {
        return std::any_of(iteration_vars.begin(), iteration_vars.end(),
                           [&](const VarNode* var) {
                             return dim.affine ? dim.base.uses(var)
                                               : sched::uses_var(dim.index, var);
                           });
      });
      if (!varies && std::find(carried.begin(), carried.end(), *key) == carried.end()) {
        carried.push_back(*key);
      }
    }

    LoopFrame frame{&loop, {}};
    for (const std::string& key : carried) {
      const BufferNode* buffer = regions_.at(key).buffer.get();
      if (!reads_.recording && !reads_.inside_loop.count({&loop, buffer})) {
        frame.sunk_keys.insert(key);
      }
    }

    std::vector<std::string> trip_conditions;
    const LoopBounds loop_bounds = bounds_of(loop, blocks, &trip_conditions);
    // From a start, the loop runs j = 0, 1, ... with the loop variable j + start, for
    // end - start iterations (the For op stops at max(trips, 0)).
    std::optional<vr::Value> trip_count = loop_bounds.end;
    if (loop_bounds.start) {
      const vr::Value end = loop_bounds.end.value_or(
          builder_.full(static_cast<double>(loop.extent), vr::index_scalar()));
      trip_count = builder_.binary(BinaryOp::Sub, end, *loop_bounds.start,
                                   loop.var->name + "_trips");
    }

    std::vector<vr::Value> inits;
    std::vector<std::string> names;
    for (const std::string& key : carried) {
      inits.push_back(regions_.at(key).value);
      names.push_back(regions_.at(key).buffer->name);
    }
    std::vector<std::string> arg_names;
    for (const std::string& n : names) arg_names.push_back(n + "_i");
    const std::map<std::string, Region> before = regions_;
    builder_.set_provenance(loop.provenance);
    loops_.push_back(frame);
    const std::vector<vr::Value> results = builder_.for_loop(
        loop.var->name, loop.extent, inits,
        [&](const vr::Value& var, const std::vector<vr::Value>& args) {
          scalars_[loop.var.get()] =
              loop_bounds.start ? builder_.binary(BinaryOp::Add, var, *loop_bounds.start,
                                                  loop.var->name + "_at")
                                : var;
          for (size_t i = 0; i < carried.size(); ++i) regions_.at(carried[i]).value = args[i];
          lower_stmt(loop.body);
          std::vector<vr::Value> yielded;
          for (const std::string& key : carried) {
            auto it = regions_.find(key);
            if (it == regions_.end()) {
              fail("loop " + loop.var->name + " overwrites part of " +
                   regions_.at(key).buffer->name + " it carries");
            }
            yielded.push_back(it->second.value);
          }
          return yielded;
        },
        names, arg_names, trip_count.value_or(nullptr));
    loops_.pop_back();
    for (const std::string& text : trip_conditions) enforced_by_trip_count_.erase(text);
    scalars_.erase(loop.var.get());

    // After the loop: what it carried holds its results; any other region of a buffer written
    // inside is gone (it belonged to one iteration).
    std::set<const BufferNode*> written;
    for (const auto& [block, inner] : blocks) {
      if (const auto* store = block->body->as<scalar::Store>()) written.insert(store->buffer.get());
    }
    std::map<std::string, Region> after;
    for (const auto& [key, region] : before) {
      if (!written.count(region.buffer.get())) after.emplace(key, region);
    }
    for (size_t i = 0; i < carried.size(); ++i) {
      Region region = before.at(carried[i]);
      region.value = results[i];
      after[carried[i]] = region;
    }
    regions_ = std::move(after);
    for (size_t i = 0; i < carried.size(); ++i) {
      if (frame.sunk_keys.count(carried[i]) && !sunk_by_enclosing_loop(carried[i])) {
        store_region(regions_.at(carried[i]));
      }
    }
  }

  // Where a serial loop starts and ends, both computed before it; nullopt: 0, and the extent.
  struct LoopBounds {
    std::optional<vr::Value> start;
    std::optional<vr::Value> end;
  };

  // A condition every block under `loop` is predicated on that bounds the loop variable from
  // above through values known before the loop (`n_o * 64 <= m_o * 128 + 127`, which
  // skip_masked adds for causal attention) ends the loop early instead: the end is computed
  // before it and the condition is left out of the blocks. Several combine by min. A condition
  // `lower or n_o == 0` with `lower` bounding the loop variable from below (skip_masked's form
  // for a window's lower edge) starts the loop past the iterations it excludes, when the inits
  // of the reductions that start at this loop are hoisted above it (iteration 0 only ran them).
  LoopBounds bounds_of(
      const For& loop,
      const std::vector<std::pair<const Block*, std::vector<const VarNode*>>>& blocks,
      std::vector<std::string>* enforced) {
    LoopBounds bounds;
    if (blocks.empty()) return bounds;
    std::map<std::string, int> counts;
    std::map<std::string, Expr> conditions;
    for (const auto& [block, inner] : blocks) {
      std::set<std::string> seen;
      for (const Expr& condition : conjuncts(block->predicate)) {
        VarReplacementScope scope(*this, *block);
        Expr c = bound(condition);
        const std::string text = scalar::print_expr(c);
        if (seen.insert(text).second) {
          ++counts[text];
          conditions.emplace(text, c);
        }
      }
    }
    const bool inits_hoisted = std::all_of(blocks.begin(), blocks.end(), [&](const auto& entry) {
      const Block& block = *entry.first;
      if (!block.init) return true;
      const bool reduces_over_loop = [&] {
        for (size_t i = 0; i < block.iter_vars.size(); ++i) {
          if (block.iter_vars[i].kind == IterKind::Reduce &&
              sched::uses_var(block.bindings[i], loop.var.get()))
            return true;
        }
        return false;
      }();
      return !reduces_over_loop || reduction_starts_at(block, loop);
    });
    for (const auto& [text, count] : counts) {
      if (count != static_cast<int>(blocks.size())) continue;
      // Invariant floor divisions are computed once here, whichever bound the condition gives.
      const Expr condition = invariant_terms_as_scalars(conditions.at(text), loop);
      if (std::optional<vr::Value> end = upper_trip_count(condition, loop)) {
        bounds.end = bounds.end ? builder_.binary(BinaryOp::Min, *bounds.end, *end) : *end;
      } else if (std::optional<vr::Value> start =
                     inits_hoisted ? lower_start(condition, loop) : std::nullopt) {
        bounds.start =
            bounds.start ? builder_.binary(BinaryOp::Max, *bounds.start, *start) : *start;
      } else {
        continue;
      }
      if (enforced_by_trip_count_.insert(text).second) enforced->push_back(text);
    }
    return bounds;
  }

  // For `lower or var == 0` with lower = `lhs CMP rhs`, lhs - rhs = -a * var + rest (a > 0,
  // rest over variables known before the loop): the first iteration that satisfies `lower`,
  // max(ceil((rest - limit) / a), 0) for `diff <= limit`.
  std::optional<vr::Value> lower_start(const Expr& condition, const For& loop) {
    const auto* either = condition->as<scalar::Logical>();
    if (!either || either->op != scalar::LogicalOp::Or) return std::nullopt;
    const auto is_first_iteration = [&](const Expr& e) {
      const auto* equal = e->as<scalar::Compare>();
      if (!equal || equal->op != scalar::CompareOp::EQ) return false;
      const auto* ref = equal->a->as<scalar::VarRef>();
      const auto* zero = equal->b->as<scalar::IntImm>();
      return ref && ref->var.get() == loop.var.get() && zero && zero->value == 0;
    };
    const Expr lower = is_first_iteration(either->b) ? either->a
                       : is_first_iteration(either->a) ? either->b
                                                       : nullptr;
    if (!lower) return std::nullopt;
    const std::optional<std::pair<Affine, int64_t>> form = as_upper_form(lower);
    if (!form) return std::nullopt;
    Affine diff = form->first;
    const auto self = diff.coeffs.find(loop.var.get());
    if (self == diff.coeffs.end() || self->second >= 0) return std::nullopt;
    const int64_t a = -self->second;
    diff.coeffs.erase(self);
    for (const auto& [var, c] : diff.coeffs) {
      if (!scalars_.count(var)) return std::nullopt;  // not known before the loop
    }
    // -a * var + rest <= limit  <=>  var >= ceil((rest - limit) / a) = floor((rest - limit + a - 1) / a)
    Affine numerator = diff;
    numerator.constant = diff.constant - form->second + a - 1;
    vr::Value first = builder_.binary(BinaryOp::FloorDiv, affine_value(numerator),
                                      builder_.full(static_cast<double>(a), vr::index_scalar()));
    return builder_.binary(BinaryOp::Max, first, builder_.full(0, vr::index_scalar()),
                           loop.var->name + "_start");
  }

  // `condition` with each floor division or modulo that does not use `loop`'s variable, over
  // values known before the loop, replaced by a new variable holding its value (computed here):
  // a document mask's `n_o * 64 + 63 >= 1024 * ((m_o * 128) // 1024)` becomes affine.
  Expr invariant_terms_as_scalars(const Expr& condition, const For& loop) {
    struct Abstraction : scalar::Mutator {
      Abstraction(KernelLowering& lowering, const For& loop) : lowering(lowering), loop(loop) {}
      Expr mutate_Binary(const scalar::Binary& node, const Expr& self) override {
        if (node.op == BinaryOp::FloorDiv || node.op == BinaryOp::Mod) {
          const std::vector<const VarNode*> used = sched::referenced_vars(self);
          const bool invariant = std::all_of(used.begin(), used.end(), [&](const VarNode* v) {
            return v != loop.var.get() && lowering.scalars_.count(v);
          });
          if (invariant) {
            scalar::Var term = scalar::make_var(loop.var->name + "_bound_term");
            lowering.scalars_[term.get()] = lowering.eval(self).value;
            return scalar::var_ref(term);
          }
        }
        return scalar::Mutator::mutate_Binary(node, self);
      }
      KernelLowering& lowering;
      const For& loop;
    };
    Abstraction abstraction(*this, loop);
    return abstraction.mutate(condition);
  }

  // `lhs CMP rhs` (<, <=, >, >=) as (lhs - rhs, limit) with `lhs - rhs <= limit`; the caller
  // has replaced invariant floor divisions by scalars (invariant_terms_as_scalars).
  std::optional<std::pair<Affine, int64_t>> as_upper_form(const Expr& condition) const {
    const auto* compare = condition->as<scalar::Compare>();
    if (!compare) return std::nullopt;
    std::optional<Affine> lhs = affine_of(compare->a), rhs = affine_of(compare->b);
    if (!lhs || !rhs) return std::nullopt;
    switch (compare->op) {
      case scalar::CompareOp::LE: return std::pair{lhs->plus(*rhs, -1), int64_t{0}};
      case scalar::CompareOp::LT: return std::pair{lhs->plus(*rhs, -1), int64_t{-1}};
      case scalar::CompareOp::GE: return std::pair{rhs->plus(*lhs, -1), int64_t{0}};
      case scalar::CompareOp::GT: return std::pair{rhs->plus(*lhs, -1), int64_t{-1}};
      default: return std::nullopt;
    }
  }

  // For `lhs CMP rhs` with lhs - rhs = a * var + rest (a > 0, rest over variables known before
  // the loop): the number of leading iterations that satisfy it, floor(-rest / a) + 1 for <=.
  std::optional<vr::Value> upper_trip_count(const Expr& condition, const For& loop) {
    if (const auto* either = condition->as<scalar::Logical>();
        either && either->op == scalar::LogicalOp::Or) {
      // Either bound admits the iteration (prefix-LM: at or below the diagonal, or in the
      // prefix): the loop runs to the later of the two ends.
      std::optional<vr::Value> a = upper_trip_count(either->a, loop);
      if (!a) return std::nullopt;
      std::optional<vr::Value> b = upper_trip_count(either->b, loop);
      if (!b) return std::nullopt;
      return builder_.binary(BinaryOp::Max, *a, *b, loop.var->name + "_trips");
    }
    const std::optional<std::pair<Affine, int64_t>> form = as_upper_form(condition);
    if (!form) return std::nullopt;
    Affine diff = form->first;
    const int64_t limit = form->second;
    const auto self = diff.coeffs.find(loop.var.get());
    if (self == diff.coeffs.end() || self->second <= 0) return std::nullopt;
    const int64_t a = self->second;
    diff.coeffs.erase(self);
    for (const auto& [var, c] : diff.coeffs) {
      if (!scalars_.count(var)) return std::nullopt;  // not known before the loop
    }
    // a * var + rest <= limit  <=>  var <= floor((limit - rest) / a)
    Affine numerator;
    for (const auto& [var, c] : diff.coeffs) numerator.coeffs[var] = -c;
    numerator.constant = limit - diff.constant;
    vr::Value last = builder_.binary(BinaryOp::FloorDiv, affine_value(numerator),
                                     builder_.full(static_cast<double>(a), vr::index_scalar()));
    return builder_.binary(BinaryOp::Add, last, builder_.full(1, vr::index_scalar()),
                           loop.var->name + "_trips");
  }

  // Whether `loop` is the outermost serial loop iterating a reduction axis of `block` (so the
  // block's init belongs before it).
  bool reduction_starts_at(const Block& block, const For& loop) const {
    const auto iterates = [&](const VarNode* var) {
      for (size_t i = 0; i < block.iter_vars.size(); ++i) {
        if (block.iter_vars[i].kind == IterKind::Reduce && sched::uses_var(block.bindings[i], var))
          return true;
      }
      return false;
    };
    if (!iterates(loop.var.get())) return false;
    return std::none_of(loops_.begin(), loops_.end(),
                        [&](const LoopFrame& frame) { return iterates(frame.loop->var.get()); });
  }

  // ---- blocks ------------------------------------------------------------------------------

  // Sets the replacements of `block`'s iteration variables for the scope's lifetime.
  struct VarReplacementScope {
    VarReplacementScope(KernelLowering& lowering, const Block& block)
        : lowering(lowering), saved(lowering.replacements_) {
      lowering.replacements_.clear();
      for (size_t i = 0; i < block.iter_vars.size(); ++i) {
        lowering.replacements_[block.iter_vars[i].var.get()] = block.bindings[i];
      }
    }
    ~VarReplacementScope() { lowering.replacements_ = saved; }
    KernelLowering& lowering;
    sched::VarReplacements saved;
  };

  void enter_block(const Block& block) {
    block_ = &block;
    replacements_.clear();
    for (size_t i = 0; i < block.iter_vars.size(); ++i) {
      replacements_[block.iter_vars[i].var.get()] = block.bindings[i];
    }
    builder_.set_provenance(block.provenance);
  }
  void leave_block() { block_ = nullptr; }

  Expr bound(const Expr& expr) const { return sched::substitute(expr, replacements_); }

  // The block's predicate as conditions over loop variables, without those an enclosing loop's
  // trip count already enforces.
  std::vector<Expr> active_conditions(const Block& block) const {
    std::vector<Expr> out;
    for (const Expr& condition : conjuncts(block.predicate)) {
      Expr c = bound(condition);
      if (!enforced_by_trip_count_.count(scalar::print_expr(c))) out.push_back(std::move(c));
    }
    return out;
  }

  void lower_block(const Block& block) {
    enter_block(block);
    const auto* store = block.body->as<scalar::Store>();
    if (!store) fail("block " + block.name + " is not a single store");
    const bool reduction = std::any_of(block.iter_vars.begin(), block.iter_vars.end(),
                                       [](const auto& iter) { return iter.kind == IterKind::Reduce; });
    if (reduction) {
      lower_reduction(block, *store);
    } else {
      const std::vector<Expr> conditions = active_conditions(block);
      const Expr predicate = conditions.empty() ? nullptr : conjoin(conditions);
      lower_write(*store, eval(store->value), predicate);
    }
    leave_block();
  }

  bool is_reduce_var(const VarNode* var) const {
    for (size_t i = 0; i < block_->iter_vars.size(); ++i) {
      if (block_->iter_vars[i].kind == IterKind::Reduce &&
          sched::uses_var(block_->bindings[i], var))
        return true;
    }
    return false;
  }

  // A summand `select(c, identity, x)` (or `select(c, x, identity)`) whose condition does not
  // depend on the reduction: the whole step adds the identity where c holds, so the update
  // becomes `x`'s reduction written only where c fails, and `x` can still be a dot. This is the
  // guard split_k_update puts on a split that has seen only -inf:
  //   O_part += select(Mx_part == -inf, 0, exp(S - Mx_part) * V)   (an FMA reduction)
  //   -> O_part = select(Mx_part != -inf, O_part + dot(exp(S - Mx_part), V), O_part)
  // (the select is applied to the updated value, so it also holds on a first step whose
  // previous value is the init).
  // Only exact negations are taken (== and != always; order comparisons of integers).
  std::vector<Expr> peel_invariant_guards(Expr* term, BinaryOp op) const {
    std::vector<Expr> guards;
    const auto is_identity = [&](const Expr& e) {
      const auto* imm = e->as<scalar::FloatImm>();
      return imm && imm->value == reduce_identity(op);
    };
    const auto negation = [](const scalar::Compare& c) -> Expr {
      const bool exact = c.op == scalar::CompareOp::EQ || c.op == scalar::CompareOp::NE ||
                         (!is_float(c.a->dtype) && !is_float(c.b->dtype));
      if (!exact) return nullptr;
      static const std::map<scalar::CompareOp, scalar::CompareOp> kNegated = {
          {scalar::CompareOp::EQ, scalar::CompareOp::NE}, {scalar::CompareOp::NE, scalar::CompareOp::EQ},
          {scalar::CompareOp::LT, scalar::CompareOp::GE}, {scalar::CompareOp::GE, scalar::CompareOp::LT},
          {scalar::CompareOp::LE, scalar::CompareOp::GT}, {scalar::CompareOp::GT, scalar::CompareOp::LE}};
      return scalar::compare(kNegated.at(c.op), c.a, c.b, c.provenance);
    };
    while (const auto* select = (*term)->as<scalar::Select>()) {
      bool on_reduction = false;
      for (const VarNode* var : sched::referenced_vars(select->condition)) {
        on_reduction |= is_reduce_var(var);
      }
      if (on_reduction) break;
      if (is_identity(select->if_false)) {
        guards.push_back(select->condition);
        *term = select->if_true;
      } else if (const auto* compare = select->condition->as<scalar::Compare>();
                 compare && is_identity(select->if_true)) {
        Expr negated = negation(*compare);
        if (!negated) break;
        guards.push_back(std::move(negated));
        *term = select->if_false;
      } else {
        break;
      }
    }
    return guards;
  }

  void lower_reduction(const Block& block, const scalar::Store& store) {
    const auto* update = store.value->as<scalar::Binary>();
    const auto is_self = [&](const Expr& e) {
      const auto* load = e->as<scalar::Load>();
      if (!load || load->buffer != store.buffer || load->indices.size() != store.indices.size())
        return false;
      for (size_t i = 0; i < load->indices.size(); ++i) {
        if (scalar::print_expr(load->indices[i]) != scalar::print_expr(store.indices[i]))
          return false;
      }
      return true;
    };
    if (!update ||
        (update->op != BinaryOp::Add && update->op != BinaryOp::Max &&
         update->op != BinaryOp::Min) ||
        !(is_self(update->a) || is_self(update->b))) {
      fail("block " + block.name + " reduces with a body that is not `" + store.buffer->name +
           " = " + store.buffer->name + " + term` (or max / min)");
    }
    const BinaryOp op = update->op;
    // Exact quotients simplified first, so that a factor read through `h // 8` counts as
    // invariant along the heads of its group when try_dot sorts factors by their axes.
    Expr term = without_exact_quotients(bound(is_self(update->a) ? update->b : update->a));
    const std::vector<Expr> guards = peel_invariant_guards(&term, op);

    std::vector<const VarNode*> reduce_vectors;
    for (const VarNode* var : vectors_) {
      if (is_reduce_var(var)) reduce_vectors.push_back(var);
    }
    std::vector<Expr> spatial_conditions, reduce_conditions;
    for (const Expr& c : active_conditions(block)) {
      bool on_reduction = false;
      for (const VarNode* var : sched::referenced_vars(c)) on_reduction |= is_reduce_var(var);
      (on_reduction ? reduce_conditions : spatial_conditions).push_back(c);
    }

    const std::vector<DimAccess> access = access_of(store.indices);
    const std::vector<const VarNode*> out_dims = store_dims(access, block.name);

    // The value before this step: the region in registers, the init when the whole reduction
    // happens here, or what global memory holds.
    Tile old;
    bool old_is_identity = false;  // the init is the reduction's identity: nothing to combine
    const bool serial_reduction = std::any_of(loops_.begin(), loops_.end(), [&](const auto& f) {
      return is_reduce_var(f.loop->var.get());
    });
    const std::optional<std::string> key = region_key(store, access);
    if (key && regions_.count(*key)) {
      old = region_tile(regions_.at(*key), access);
    } else if (block.init && !serial_reduction) {
      const auto* init = block.init->as<scalar::Store>();
      if (!init) fail("the init of block " + block.name + " is not a single store");
      old = eval(init->value);
      const auto* imm = init->value->as<scalar::FloatImm>();
      old_is_identity = imm && imm->value == reduce_identity(op);
    } else {
      old = load_global(store.buffer, bound_indices(store.indices));
    }
    old = broadcast_to(old, out_dims);

    Tile updated;
    if (std::optional<Tile> dot = store.buffer->dtype != DType::F32 ? std::nullopt : try_dot(op, term, reduce_vectors, reduce_conditions, out_dims,
                                          old_is_identity ? std::optional<Tile>() : old)) {
      updated = *dot;
    } else {
      std::vector<const VarNode*> all = out_dims;
      for (const VarNode* var : reduce_vectors) all.push_back(var);
      all = in_context_order(all);
      Tile summand = broadcast_to(eval(term), all);
      if (!reduce_conditions.empty()) {
        Tile mask = broadcast_to(eval_all(reduce_conditions), all);
        Tile identity = full(reduce_identity(op), summand.value->type.dtype, all);
        summand = {builder_.select(mask.value, summand.value, identity.value), all};
      }
      for (auto var = reduce_vectors.rbegin(); var != reduce_vectors.rend(); ++var) {
        const auto axis = std::find(summand.dims.begin(), summand.dims.end(), *var);
        const int index = static_cast<int>(axis - summand.dims.begin());
        vr::Value reduced = builder_.reduce(reduce_op_of(op), summand.value, index);
        summand.dims.erase(axis);
        summand.value = reduced;
      }
      summand = broadcast_to(summand, out_dims);
      updated = old_is_identity
                    ? summand
                    : Tile{builder_.binary(op, old.value, summand.value, store.buffer->name),
                           out_dims};
    }
    if (!guards.empty()) {
      // Where a guard fails the step adds the identity: the value stays what it was before.
      Tile keep = broadcast_to(eval_all(guards), out_dims);
      updated = {builder_.select(keep.value, updated.value, old.value), out_dims};
    }
    const Expr predicate = spatial_conditions.empty() ? nullptr : conjoin(spatial_conditions);
    lower_write(store, updated, predicate);
  }

  static Expr conjoin(const std::vector<Expr>& conditions) {
    Expr out = conditions.front();
    for (size_t i = 1; i < conditions.size(); ++i) {
      out = scalar::logical(scalar::LogicalOp::And, out, conditions[i]);
    }
    return out;
  }

  Tile eval_all(const std::vector<Expr>& conditions) { return eval(conjoin(conditions)); }

  // sum over k of (factors over (i, k)) · (factors over (k, j)) · (factors without k) as one dot.
  std::optional<Tile> try_dot(BinaryOp op, const Expr& term,
                              const std::vector<const VarNode*>& reduce_vectors,
                              const std::vector<Expr>& reduce_conditions,
                              const std::vector<const VarNode*>& out_dims,
                              const std::optional<Tile>& old) {
    if (op != BinaryOp::Add || reduce_vectors.size() != 1 || out_dims.size() != 2 ||
        (old && old->value->type.dtype != DType::F32)) {
      return std::nullopt;
    }
    const VarNode* k = reduce_vectors[0];
    std::vector<Expr> numerators, denominators;
    std::function<void(const Expr&, bool)> flatten = [&](const Expr& e, bool inverted) {
      if (const auto* bin = e->as<scalar::Binary>()) {
        if (bin->op == BinaryOp::Mul) {
          flatten(bin->a, inverted);
          flatten(bin->b, inverted);
          return;
        }
        if (bin->op == BinaryOp::Div) {
          flatten(bin->a, inverted);
          flatten(bin->b, !inverted);
          return;
        }
      }
      (inverted ? denominators : numerators).push_back(e);
    };
    flatten(term, false);
    const auto vector_vars = [&](const Expr& e) {
      std::set<const VarNode*> vars;
      for (const VarNode* var : sched::referenced_vars(e)) {
        if (std::find(vectors_.begin(), vectors_.end(), var) != vectors_.end()) vars.insert(var);
      }
      return vars;
    };
    const auto within = [](const std::set<const VarNode*>& vars,
                           std::initializer_list<const VarNode*> allowed) {
      return std::all_of(vars.begin(), vars.end(), [&](const VarNode* v) {
        return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
      });
    };
    for (const Expr& d : denominators) {
      if (vector_vars(d).count(k)) return std::nullopt;
    }
    // i is the output axis that the factors of the left operand run along.
    const VarNode* i = nullptr;
    const VarNode* j = nullptr;
    std::vector<Expr> left, right, outside;
    for (const Expr& factor : numerators) {
      const std::set<const VarNode*> vars = vector_vars(factor);
      if (!vars.count(k)) {
        outside.push_back(factor);
        continue;
      }
      for (const VarNode* v : vars) {
        if (v == k) continue;
        if (v != out_dims[0] && v != out_dims[1]) return std::nullopt;
        if (!i) {
          i = v;
          j = v == out_dims[0] ? out_dims[1] : out_dims[0];
        }
      }
    }
    if (!i) return std::nullopt;
    for (const Expr& factor : numerators) {
      const std::set<const VarNode*> vars = vector_vars(factor);
      if (!vars.count(k)) continue;
      if (within(vars, {i, k})) {
        left.push_back(factor);
      } else if (within(vars, {k, j})) {
        right.push_back(factor);
      } else {
        return std::nullopt;
      }
    }
    if (left.empty() || right.empty()) return std::nullopt;
    std::vector<Expr> left_conditions, right_conditions;
    for (const Expr& c : reduce_conditions) {
      const std::set<const VarNode*> vars = vector_vars(c);
      if (within(vars, {i, k})) {
        left_conditions.push_back(c);
      } else if (within(vars, {k, j})) {
        right_conditions.push_back(c);
      } else {
        return std::nullopt;
      }
    }
    for (const Expr& factor : outside) {
      if (!within(vector_vars(factor), {i, j})) return std::nullopt;
    }
    const auto operand = [&](const std::vector<Expr>& factors, const std::vector<Expr>& conditions,
                             std::vector<const VarNode*> order) -> std::optional<Tile> {
      Tile product = eval_ordered(factors[0], order);
      for (size_t f = 1; f < factors.size(); ++f) {
        Tile next = eval_ordered(factors[f], order);
        if (next.value->type.dtype != product.value->type.dtype) return std::nullopt;
        product = {builder_.binary(BinaryOp::Mul, product.value, next.value), order};
      }
      std::vector<Expr> kept;
      for (const Expr& c : conditions) {
        if (!bounded_by_a_load(c, factors)) kept.push_back(c);
      }
      if (!kept.empty()) {
        Tile mask = permute_to(broadcast_to(eval_all(kept), in_context_order(order)), order);
        Tile zero = full(0.0, product.value->type.dtype, order);
        product = {builder_.select(mask.value, product.value, zero.value), order};
      }
      return product;
    };
    std::optional<Tile> a = operand(left, left_conditions, {i, k});
    std::optional<Tile> b = operand(right, right_conditions, {k, j});
    if (!a || !b || a->value->type.dtype != b->value->type.dtype) return std::nullopt;
    const std::string name = block_->name;
    Tile result;
    if (outside.empty() && denominators.empty()) {
      vr::Value acc = old ? permute_to(*old, {i, j}).value : nullptr;
      result = {builder_.dot(a->value, b->value, acc, name), {i, j}};
    } else {
      Tile product = {builder_.dot(a->value, b->value), {i, j}};
      for (const Expr& factor : outside) {
        Tile f = permute_to(broadcast_to(eval(factor), in_context_order({i, j})), {i, j});
        product = {builder_.binary(BinaryOp::Mul, product.value, f.value), {i, j}};
      }
      for (const Expr& factor : denominators) {
        Tile f = permute_to(broadcast_to(eval(factor), in_context_order({i, j})), {i, j});
        product = {builder_.binary(BinaryOp::Div, product.value, f.value), {i, j}};
      }
      result = old ? Tile{builder_.binary(BinaryOp::Add, permute_to(*old, {i, j}).value,
                                          product.value, name),
                          {i, j}}
                   : product;
    }
    return permute_to(result, out_dims);
  }

  // ---- writes ------------------------------------------------------------------------------

  // The vector loops a store's tile runs along, in context order; every index must be of the
  // form `base + loop` or not move at all.
  std::vector<const VarNode*> store_dims(const std::vector<DimAccess>& access,
                                         const std::string& block_name) const {
    std::vector<const VarNode*> dims;
    for (const DimAccess& dim : access) {
      if (dim.general) {
        fail("block " + block_name + " writes at an index that is not an offset plus one tile "
             "loop; such a block cannot be tiled");
      }
      if (dim.var) dims.push_back(dim.var);
    }
    std::set<const VarNode*> unique(dims.begin(), dims.end());
    if (unique.size() != dims.size()) {
      fail("block " + block_name + " writes along one tile loop in two dimensions");
    }
    return in_context_order(dims);
  }

  void lower_write(const scalar::Store& store, Tile value, const Expr& predicate) {
    const std::vector<DimAccess> access = access_of(store.indices);
    const std::vector<const VarNode*> dims = store_dims(access, block_->name);
    for (const VarNode* var : value.dims) {
      if (std::find(dims.begin(), dims.end(), var) == dims.end()) {
        fail("block " + block_->name + " computes a different value of " + store.buffer->name +
             " for each iteration of loop " + var->name + " but writes one element");
      }
    }
    value = broadcast_to(value, dims);
    const std::optional<std::string> key = region_key(store, access);
    std::optional<Tile> mask;
    const auto predicate_mask = [&]() -> std::optional<Tile> {
      if (!predicate) return std::nullopt;
      if (!mask) mask = broadcast_to(eval(predicate), dims);
      return mask;
    };
    if (key) {
      const Expr region_predicate = without_store_bounds(predicate, store);
      if (region_predicate && regions_.count(*key)) {
        Tile old = region_tile(regions_.at(*key), access);
        Tile keep = broadcast_to(eval(region_predicate), dims);
        value = {builder_.select(keep.value, value.value, old.value), dims};
      }
      std::erase_if(regions_, [&](const auto& entry) {
        return entry.second.buffer == store.buffer;
      });
      Tile in_buffer_order = permute_to(value, buffer_order(access));
      regions_[*key] = Region{store.buffer, access, in_buffer_order.value};
    } else {
      std::erase_if(regions_, [&](const auto& entry) {
        return entry.second.buffer == store.buffer;
      });
    }
    if (!needs_global(store.buffer.get())) return;
    if (key && sunk_by_enclosing_loop(*key)) return;
    store_global(store.buffer, bound_indices(store.indices), value, predicate_mask());
  }

  // The predicate less its conjuncts of the form `index < extent` on the store's own indices.
  // A lane such a conjunct turns off lies outside the buffer: no valid program reads it (every
  // reader has the same bound, as a reduction condition or its own store's predicate), so the
  // register copy of the buffer may hold anything there. Dropping them saves a select per
  // update on every partial tile (e.g. the vocabulary tiles of a 50257-wide GEMM).
  Expr without_store_bounds(const Expr& predicate, const scalar::Store& store) const {
    if (!predicate) return nullptr;
    std::vector<Expr> kept;
    for (const Expr& condition : conjuncts(predicate)) {
      const auto* compare = condition->as<scalar::Compare>();
      const auto* extent = compare ? compare->b->as<scalar::IntImm>() : nullptr;
      bool is_bound = false;
      if (compare && compare->op == scalar::CompareOp::LT && extent) {
        const std::string index = scalar::print_expr(compare->a);
        for (size_t d = 0; d < store.indices.size(); ++d) {
          is_bound |= store.buffer->shape[d] == extent->value &&
                      scalar::print_expr(bound(store.indices[d])) == index;
        }
      }
      if (!is_bound) kept.push_back(condition);
    }
    return kept.empty() ? nullptr : conjoin(kept);
  }

  // Whether a reduce condition `index < extent` bounds an axis that one of a dot operand's
  // factors loads directly (up to a cast): that load's own bounds mask (other 0) already zeroes
  // the lanes the condition turns off, so the operand needs no select of its own. Without it the
  // operand stays a plain loaded tile, which TMA and wgmma read as it is (a GEMM whose k extent
  // is not a multiple of its k tile). Values are assumed finite (x · 0 = 0), as elsewhere.
  bool bounded_by_a_load(const Expr& condition, const std::vector<Expr>& factors) const {
    const auto* compare = condition->as<scalar::Compare>();
    const auto* extent = compare ? compare->b->as<scalar::IntImm>() : nullptr;
    if (!compare || compare->op != scalar::CompareOp::LT || !extent) return false;
    const std::string index = scalar::print_expr(bound(compare->a));
    for (Expr factor : factors) {
      while (const auto* cast = factor->as<scalar::Cast>()) factor = cast->value;
      const auto* load = factor->as<scalar::Load>();
      if (!load || load->buffer->scope != scalar::MemoryScope::Global) continue;
      for (size_t d = 0; d < load->indices.size(); ++d) {
        if (load->buffer->shape[d] == extent->value &&
            scalar::print_expr(bound(load->indices[d])) == index) {
          return true;
        }
      }
    }
    return false;
  }

  bool sunk_by_enclosing_loop(const std::string& key) const {
    return std::any_of(loops_.begin(), loops_.end(),
                       [&](const LoopFrame& frame) { return frame.sunk_keys.count(key) > 0; });
  }

  bool needs_global(const BufferNode* buffer) const {
    return reads_.recording || buffer->role == BufferRole::Output || reads_.buffers.count(buffer);
  }

  // The store after a loop of a region it carried: indices from the region's access, masked to
  // the buffer's bounds (the overhang predicates the schedule adds are exactly those bounds).
  void store_region(const Region& region) {
    if (!needs_global(region.buffer.get())) return;
    const std::vector<int64_t> shape = region.value->type.shape;
    std::vector<vr::Value> indices;
    vr::Value mask;
    int axis = 0;
    for (size_t d = 0; d < region.access.size(); ++d) {
      const DimAccess& dim = region.access[d];
      vr::Value base = dim.affine ? affine_value(dim.base) : eval(dim.index).value;
      vr::Value index;
      if (dim.var) {
        vr::Value iota = builder_.iota(dim.extent);
        vr::Value base_tile = builder_.broadcast(base, {dim.extent}, {});
        vr::Value along = builder_.binary(BinaryOp::Add, base_tile, iota);
        index = builder_.broadcast(along, shape, {axis});
        const auto [lo, hi] = range_of(dim.base, dim.extent);
        if (lo < 0 || hi >= region.buffer->shape[d]) {
          vr::Value limit = builder_.full(static_cast<double>(region.buffer->shape[d]),
                                          vr::TileType{DType::Index, shape});
          vr::Value inside = builder_.compare(scalar::CompareOp::LT, index, limit);
          mask = mask ? builder_.logical(scalar::LogicalOp::And, mask, inside) : inside;
        }
        ++axis;
      } else {
        index = builder_.broadcast(base, shape, {});
        // A scalar index can leave the buffer too: the last partial tile of a nest whose tile
        // loops are all grid loops (n_o * 4 + n_i with n = 5).
        const auto [low_ok, high_ok] = bounds_known(dim.index, region.buffer->shape[d]);
        const vr::TileType type{DType::Index, shape};
        if (!low_ok) {
          vr::Value inside = builder_.compare(scalar::CompareOp::GE, index, builder_.full(0, type));
          mask = mask ? builder_.logical(scalar::LogicalOp::And, mask, inside) : inside;
        }
        if (!high_ok) {
          vr::Value limit = builder_.full(static_cast<double>(region.buffer->shape[d]), type);
          vr::Value inside = builder_.compare(scalar::CompareOp::LT, index, limit);
          mask = mask ? builder_.logical(scalar::LogicalOp::And, mask, inside) : inside;
        }
      }
      indices.push_back(index);
    }
    touched_.insert(region.buffer.get());
    builder_.store(region.buffer, indices, region.value, mask);
  }

  // ---- reads -------------------------------------------------------------------------------

  std::vector<Expr> bound_indices(const std::vector<Expr>& indices) const {
    std::vector<Expr> out;
    for (const Expr& index : indices) out.push_back(bound(index));
    return out;
  }

  std::vector<DimAccess> access_of(const std::vector<Expr>& indices) const {
    std::vector<DimAccess> out;
    for (const Expr& index : indices) {
      DimAccess dim;
      dim.index = bound(index);
      std::optional<Affine> affine = affine_of(dim.index);
      if (!affine) {
        // Not affine: a scalar for the tile when no tile loop appears in it, else general.
        dim.affine = false;
        for (const VarNode* var : sched::referenced_vars(dim.index)) {
          if (std::find(vectors_.begin(), vectors_.end(), var) != vectors_.end()) {
            dim.general = true;
          }
        }
        out.push_back(dim);
        continue;
      }
      for (const auto& [var, coeff] : affine->coeffs) {
        if (std::find(vectors_.begin(), vectors_.end(), var) == vectors_.end()) continue;
        if (coeff != 1 || dim.var) {
          dim.general = true;
          break;
        }
        dim.var = var;
        dim.extent = extents_.at(var);
      }
      if (dim.var) affine->coeffs.erase(dim.var);
      dim.base = *affine;
      out.push_back(dim);
    }
    return out;
  }

  std::optional<std::string> region_key(const scalar::Store& store,
                                        const std::vector<DimAccess>& access) const {
    return region_key(store.buffer, access);
  }
  static std::optional<std::string> region_key(const Buffer& buffer,
                                               const std::vector<DimAccess>& access) {
    std::string key = buffer->name;
    std::set<const VarNode*> vars;
    for (const DimAccess& dim : access) {
      if (dim.general) return std::nullopt;
      if (dim.var && !vars.insert(dim.var).second) return std::nullopt;
      key += dim.var ? "|v" + std::to_string(dim.extent) + ":" : "|s:";
      key += dim.affine ? affine_text(dim.base) : "expr:" + scalar::print_expr(dim.index);
    }
    return key;
  }

  std::vector<const VarNode*> buffer_order(const std::vector<DimAccess>& access) const {
    std::vector<const VarNode*> order;
    for (const DimAccess& dim : access) {
      if (dim.var) order.push_back(dim.var);
    }
    return order;
  }

  // A region's tile seen from an access with the same key: its axes renamed to the access's
  // loops and put in context order.
  Tile region_tile(const Region& region, const std::vector<DimAccess>& access) {
    return permute_to(Tile{region.value, buffer_order(access)},
                      in_context_order(buffer_order(access)));
  }

  Tile load_access(const scalar::Load& load) {
    const std::vector<DimAccess> access = access_of(load.indices);
    if (const std::optional<std::string> key = region_key(load.buffer, access)) {
      if (auto it = regions_.find(*key); it != regions_.end()) {
        return region_tile(it->second, access);
      }
    }
    return load_global(load.buffer, bound_indices(load.indices));
  }

  Tile load_global(const Buffer& buffer, const std::vector<Expr>& indices,
                   std::optional<std::vector<const VarNode*>> order = std::nullopt) {
    if (buffer->role != BufferRole::Input) {
      reads_.buffers.insert(buffer.get());
      for (const LoopFrame& frame : loops_) reads_.inside_loop.insert({frame.loop, buffer.get()});
    }
    touched_.insert(buffer.get());
    std::vector<Tile> index_tiles;
    std::vector<const VarNode*> dims;
    for (const Expr& index : indices) {
      index_tiles.push_back(eval(index));
      for (const VarNode* var : index_tiles.back().dims) dims.push_back(var);
    }
    dims = in_context_order(dims);
    if (order) {
      // The caller wants the axes in its order (a dot operand); any axis it lists is kept.
      std::vector<const VarNode*> wanted = *order;
      std::erase_if(wanted, [&](const VarNode* v) {
        return std::find(dims.begin(), dims.end(), v) == dims.end();
      });
      dims = wanted;
    }
    std::vector<vr::Value> values;
    vr::Value mask;
    for (size_t d = 0; d < indices.size(); ++d) {
      Tile index = broadcast_any(index_tiles[d], dims);
      values.push_back(index.value);
      const auto [low_ok, high_ok] = bounds_known(indices[d], buffer->shape[d]);
      const vr::TileType type{DType::Index, index.value->type.shape};
      if (!low_ok) {
        vr::Value inside =
            builder_.compare(scalar::CompareOp::GE, index.value, builder_.full(0, type));
        mask = mask ? builder_.logical(scalar::LogicalOp::And, mask, inside) : inside;
      }
      if (!high_ok) {
        vr::Value limit = builder_.full(static_cast<double>(buffer->shape[d]), type);
        vr::Value inside = builder_.compare(scalar::CompareOp::LT, index.value, limit);
        mask = mask ? builder_.logical(scalar::LogicalOp::And, mask, inside) : inside;
      }
    }
    return {builder_.load(buffer, values, mask, 0.0, buffer->name), dims};
  }

  void store_global(const Buffer& buffer, const std::vector<Expr>& indices, const Tile& value,
                    const std::optional<Tile>& predicate) {
    touched_.insert(buffer.get());
    std::vector<vr::Value> values;
    vr::Value mask = predicate ? broadcast_to(*predicate, value.dims).value : nullptr;
    for (size_t d = 0; d < indices.size(); ++d) {
      Tile index = broadcast_to(eval(indices[d]), value.dims);
      values.push_back(index.value);
      if (!predicate && !statically_in_bounds(indices[d], buffer->shape[d])) {
        const vr::TileType type{DType::Index, index.value->type.shape};
        vr::Value limit = builder_.full(static_cast<double>(buffer->shape[d]), type);
        vr::Value inside = builder_.compare(scalar::CompareOp::LT, index.value, limit);
        mask = mask ? builder_.logical(scalar::LogicalOp::And, mask, inside) : inside;
      }
    }
    builder_.store(buffer, values, value.value, mask);
  }

  std::pair<int64_t, int64_t> range_of(const Affine& affine, int64_t extra_extent = 1) const {
    int64_t lo = affine.constant, hi = affine.constant + extra_extent - 1;
    for (const auto& [var, coeff] : affine.coeffs) {
      auto it = extents_.find(var);
      const int64_t top = (it == extents_.end() ? 1 : it->second) - 1;
      (coeff >= 0 ? hi : lo) += coeff * top;
    }
    return {lo, hi};
  }

  // Whether an index is known to be >= 0, and known to be < size, over every iteration.
  std::pair<bool, bool> bounds_known(const Expr& index, int64_t size) const {
    const std::optional<std::pair<int64_t, int64_t>> range = index_range(index);
    if (!range) return {false, false};
    return {range->first >= 0, range->second < size};
  }

  // The smallest and largest value of an index over every iteration: affine expressions, and
  // floor division or modulo of one by a positive constant (GQA's `h / 8`).
  std::optional<std::pair<int64_t, int64_t>> index_range(const Expr& index) const {
    if (std::optional<Affine> affine = affine_of(index)) return range_of(*affine);
    const auto* bin = index->as<scalar::Binary>();
    const auto* divisor = bin ? bin->b->as<scalar::IntImm>() : nullptr;
    if (!divisor || divisor->value <= 0) return std::nullopt;
    const std::optional<std::pair<int64_t, int64_t>> inner = index_range(bin->a);
    if (!inner || inner->first < 0) return std::nullopt;
    if (bin->op == BinaryOp::FloorDiv) {
      return std::pair{inner->first / divisor->value, inner->second / divisor->value};
    }
    if (bin->op == BinaryOp::Mod) return std::pair{int64_t{0}, divisor->value - 1};
    return std::nullopt;
  }

  bool statically_in_bounds(const Expr& index, int64_t size) const {
    const auto [low_ok, high_ok] = bounds_known(index, size);
    return low_ok && high_ok;
  }

  vr::Value affine_value(const Affine& affine) {
    vr::Value sum = builder_.full(static_cast<double>(affine.constant), vr::index_scalar());
    for (const auto& [var, coeff] : affine.coeffs) {
      auto it = scalars_.find(var);
      if (it == scalars_.end()) fail("index variable " + var->name + " is not in scope");
      vr::Value term = it->second;
      if (coeff != 1) {
        term = builder_.binary(BinaryOp::Mul, term,
                               builder_.full(static_cast<double>(coeff), vr::index_scalar()));
      }
      sum = builder_.binary(BinaryOp::Add, sum, term);
    }
    return sum;
  }

  // ---- expressions -------------------------------------------------------------------------

  std::vector<const VarNode*> in_context_order(std::vector<const VarNode*> dims) const {
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    std::vector<const VarNode*> out;
    for (const VarNode* var : vectors_) {
      if (std::binary_search(dims.begin(), dims.end(), var)) out.push_back(var);
    }
    return out;
  }

  std::vector<int64_t> shape_of(const std::vector<const VarNode*>& dims) const {
    std::vector<int64_t> shape;
    for (const VarNode* var : dims) shape.push_back(extents_.at(var));
    return shape;
  }

  // `tile` broadcast to `dims` (a superset of its dims, in context order).
  Tile broadcast_to(const Tile& tile, const std::vector<const VarNode*>& dims) {
    if (tile.dims == dims) return tile;
    return broadcast_any(permute_to(tile, in_context_order(tile.dims)), dims);
  }

  // `tile` broadcast to `dims` in any order that keeps its own axes' relative order.
  Tile broadcast_any(const Tile& tile, const std::vector<const VarNode*>& dims) {
    if (tile.dims == dims) return tile;
    std::vector<int> mapping;
    for (const VarNode* var : tile.dims) {
      const auto it = std::find(dims.begin(), dims.end(), var);
      if (it == dims.end()) fail("internal: a tile axis is missing from its broadcast");
      mapping.push_back(static_cast<int>(it - dims.begin()));
    }
    if (!std::is_sorted(mapping.begin(), mapping.end())) {
      std::vector<const VarNode*> reordered;
      for (const VarNode* var : dims) {
        if (std::find(tile.dims.begin(), tile.dims.end(), var) != tile.dims.end())
          reordered.push_back(var);
      }
      return broadcast_any(permute_to(tile, reordered), dims);
    }
    return {builder_.broadcast(tile.value, shape_of(dims), mapping), dims};
  }

  Tile permute_to(const Tile& tile, const std::vector<const VarNode*>& order) {
    if (tile.dims == order) return tile;
    std::vector<int> permutation;
    for (const VarNode* var : order) {
      const auto it = std::find(tile.dims.begin(), tile.dims.end(), var);
      if (it == tile.dims.end()) fail("internal: a permutation names an axis the tile lacks");
      permutation.push_back(static_cast<int>(it - tile.dims.begin()));
    }
    return {builder_.permute(tile.value, permutation), order};
  }

  Tile full(double value, DType dtype, const std::vector<const VarNode*>& dims) {
    return {builder_.full(value, vr::TileType{dtype, shape_of(dims)}), dims};
  }

  // Evaluates `expr` (over loop variables) with its axes in `order`. A load from memory is
  // issued with its axes in the buffer's dimension order (the innermost axis along the buffer's
  // contiguous dimension, so rows can be copied 16 bytes at a time) and then permuted: a
  // transposed dot operand is `permute(load K[n, d])`, which the placement reads through a
  // transposed window.
  Tile eval_ordered(const Expr& expr, const std::vector<const VarNode*>& order) {
    if (const auto* cast = expr->as<scalar::Cast>()) {
      Tile inner = eval_ordered(cast->value, order);
      return {builder_.cast(inner.value, cast->dtype), inner.dims};
    }
    if (const auto* load = expr->as<scalar::Load>()) {
      const std::vector<DimAccess> access = access_of(load->indices);
      const std::optional<std::string> key = region_key(load->buffer, access);
      if (!key || !regions_.count(*key)) {
        std::vector<const VarNode*> memory_order;
        for (const DimAccess& dim : access) {
          if (dim.var) memory_order.push_back(dim.var);
        }
        const bool simple = std::none_of(access.begin(), access.end(),
                                         [](const DimAccess& dim) { return dim.general; });
        Tile tile = load_global(load->buffer, bound_indices(load->indices),
                                simple ? memory_order : order);
        std::vector<const VarNode*> wanted;
        for (const VarNode* var : order) {
          if (std::find(tile.dims.begin(), tile.dims.end(), var) != tile.dims.end())
            wanted.push_back(var);
        }
        return broadcast_any(permute_to(tile, wanted), order);
      }
    }
    Tile tile = eval(expr);
    return permute_to(broadcast_to(tile, in_context_order(order)), order);
  }

  Tile elementwise(const std::vector<Tile>& operands,
                   const std::function<vr::Value(const std::vector<vr::Value>&)>& make) {
    std::vector<const VarNode*> dims;
    for (const Tile& t : operands) dims.insert(dims.end(), t.dims.begin(), t.dims.end());
    dims = in_context_order(dims);
    std::vector<vr::Value> values;
    for (const Tile& t : operands) values.push_back(broadcast_to(t, dims).value);
    return {make(values), dims};
  }

  // `(c * Q + R) // c` as Q when R stays in [0, c) over every iteration: with the query heads
  // of a group in one tile, `(h_o * 8 + h_i) // 8` is `h_o`, so the key/value tile that GQA
  // reads through `h // 8` is loaded once for the tile instead of once per head. More generally
  // `(a * Y + R) // c` is `Y // (c / a)` when a divides c and R stays in [0, a): a k tile of 32
  // reading the scales of 128-row groups, `S[(k_o * 32 + k_i) // 128, n]`, reads row
  // `k_o // 4` for the whole tile, one vector per iteration instead of a row per k.
  std::optional<Expr> exact_quotient(const scalar::Binary& division) const {
    const auto* divisor = division.b->as<scalar::IntImm>();
    if (division.op != BinaryOp::FloorDiv || !divisor || divisor->value <= 1) return std::nullopt;
    const std::optional<Affine> numerator = affine_of(bound(division.a));
    if (!numerator) return std::nullopt;
    const int64_t c = divisor->value;
    // The largest divisor a of c that works (a = c: the quotient is affine).
    for (int64_t a = c; a >= 2; --a) {
      if (c % a != 0) continue;
      Affine quotient, remainder;
      quotient.vars = remainder.vars = numerator->vars;
      bool bounded = true;
      for (const auto& [var, coeff] : numerator->coeffs) {
        if (coeff % a == 0) {
          quotient.coeffs[var] = coeff / a;
        } else if (extents_.count(var)) {
          remainder.coeffs[var] = coeff;
        } else {
          bounded = false;  // its range is unknown here
          break;
        }
      }
      if (!bounded) continue;
      const int64_t floor_constant = numerator->constant / a - (numerator->constant % a < 0 ? 1 : 0);
      quotient.constant = floor_constant;
      remainder.constant = numerator->constant - floor_constant * a;
      const auto [low, high] = range_of(remainder);
      if (low < 0 || high >= a) continue;
      if (a == c) return scalar::affine_expr(quotient);
      return scalar::binary(BinaryOp::FloorDiv, scalar::affine_expr(quotient), scalar::int_imm(c / a));
    }
    return std::nullopt;
  }

  Expr without_exact_quotients(const Expr& expr) const {
    struct Simplifier : scalar::Mutator {
      explicit Simplifier(const KernelLowering& lowering) : lowering(lowering) {}
      Expr mutate_Binary(const scalar::Binary& node, const Expr& self) override {
        Expr rebuilt = scalar::Mutator::mutate_Binary(node, self);
        const auto* binary = rebuilt->as<scalar::Binary>();
        if (!binary) return rebuilt;
        return lowering.exact_quotient(*binary).value_or(rebuilt);
      }
      const KernelLowering& lowering;
    };
    Simplifier simplifier(*this);
    return simplifier.mutate(expr);
  }

  Tile eval(const Expr& expr) {
    switch (expr->kind) {
      case ExprKind::IntImm:
        return {builder_.full(static_cast<double>(expr->as<scalar::IntImm>()->value),
                              vr::index_scalar()),
                {}};
      case ExprKind::FloatImm:
        return {builder_.full(expr->as<scalar::FloatImm>()->value, vr::TileType{expr->dtype, {}}),
                {}};
      case ExprKind::VarRef: {
        const VarNode* var = expr->as<scalar::VarRef>()->var.get();
        if (auto it = replacements_.find(var); it != replacements_.end()) return eval(it->second);
        if (std::find(vectors_.begin(), vectors_.end(), var) != vectors_.end()) {
          return {builder_.iota(extents_.at(var), var->name), {var}};
        }
        if (auto it = scalars_.find(var); it != scalars_.end()) return {it->second, {}};
        fail("variable " + var->name + " is not in scope where block " +
             (block_ ? block_->name : std::string("?")) + " uses it");
      }
      case ExprKind::Load: return load_access(*expr->as<scalar::Load>());
      case ExprKind::Cast: {
        const auto* cast = expr->as<scalar::Cast>();
        Tile inner = eval(cast->value);
        return {builder_.cast(inner.value, cast->dtype), inner.dims};
      }
      case ExprKind::Unary: {
        const auto* unary = expr->as<scalar::Unary>();
        Tile inner = eval(unary->a);
        return {builder_.unary(unary->op, inner.value), inner.dims};
      }
      case ExprKind::Binary: {
        const auto* bin = expr->as<scalar::Binary>();
        if (std::optional<Expr> quotient = exact_quotient(*bin)) return eval(*quotient);
        return elementwise({eval(bin->a), eval(bin->b)}, [&](const auto& v) {
          return builder_.binary(bin->op, v[0], v[1]);
        });
      }
      case ExprKind::Compare: {
        const auto* cmp = expr->as<scalar::Compare>();
        return elementwise({eval(cmp->a), eval(cmp->b)}, [&](const auto& v) {
          return builder_.compare(cmp->op, v[0], v[1]);
        });
      }
      case ExprKind::Logical: {
        const auto* logical = expr->as<scalar::Logical>();
        return elementwise({eval(logical->a), eval(logical->b)}, [&](const auto& v) {
          return builder_.logical(logical->op, v[0], v[1]);
        });
      }
      case ExprKind::Select: {
        const auto* select = expr->as<scalar::Select>();
        return elementwise({eval(select->condition), eval(select->if_true),
                            eval(select->if_false)},
                           [&](const auto& v) { return builder_.select(v[0], v[1], v[2]); });
      }
    }
    fail("internal: unknown expression kind");
  }

  const scalar::Program& program_;
  GlobalReads& reads_;
  vr::Builder builder_;
  bool bound_ = false;
  std::map<const VarNode*, LoopRole> roles_;
  std::map<const Block*, std::vector<const For*>> block_paths_;
  std::map<const VarNode*, vr::Value> scalars_;   // grid and serial loop variables
  std::map<const VarNode*, int64_t> extents_;
  std::vector<const VarNode*> vectors_;           // the enclosing vector loops, outermost first
  std::map<std::string, Region> regions_;
  std::vector<LoopFrame> loops_;                  // the enclosing serial loops
  std::set<const BufferNode*> touched_;
  std::set<std::string> enforced_by_trip_count_;  // conditions of the enclosing loops' bounds
  const Block* block_ = nullptr;
  sched::VarReplacements replacements_;
};

vr::ModulePtr lower_program(const scalar::Program& program, GlobalReads& reads,
                            std::vector<std::vector<std::string>>* kernel_blocks) {
  auto module = std::make_shared<vr::Module>();
  module->name = program.name;
  module->params = program.params;
  std::vector<Stmt> nests;
  if (const auto* seq = program.body->as<scalar::Seq>()) {
    nests = seq->stmts;
  } else {
    nests = {program.body};
  }
  std::set<const BufferNode*> touched;
  std::map<std::string, int> name_uses;
  for (const Stmt& nest : nests) {
    const std::vector<const Block*> blocks = sched::collect_blocks(nest);
    if (blocks.empty()) continue;
    // Kernels are named after the last block of their nest (the statement they complete).
    std::string name = blocks.back()->name;
    if (name_uses[name]++ > 0) name += "_" + std::to_string(name_uses[name] - 1);
    KernelLowering lowering(program, reads);
    vr::KernelPtr kernel = lowering.lower_nest(nest, name);
    // The nest's launch attributes (the `launch` decision) travel with its kernel to placement.
    if (const auto* outermost = nest->as<scalar::For>(); outermost && outermost->launch) {
      vr::Kernel launched = *kernel;
      launched.launch = outermost->launch;
      kernel = std::make_shared<const vr::Kernel>(std::move(launched));
    }
    module->kernels.push_back(std::move(kernel));
    std::vector<std::string> names;
    for (const Block* block : blocks) names.push_back(block->name);
    kernel_blocks->push_back(std::move(names));
    touched.insert(lowering.touched().begin(), lowering.touched().end());
  }
  for (const Buffer& buffer : program.allocations) {
    if (touched.count(buffer.get())) module->allocations.push_back(buffer);
  }
  return module;
}

}  // namespace

TilizeResult lower_to_vrtile(const scalar::Program& program) {
  try {
    GlobalReads reads;
    std::vector<std::vector<std::string>> kernel_blocks;
    lower_program(program, reads, &kernel_blocks);  // finds which buffers are read from memory
    reads.recording = false;
    kernel_blocks.clear();
    vr::ModulePtr module = lower_program(program, reads, &kernel_blocks);
    return {module, "", kernel_blocks};
  } catch (const Unsupported& unsupported) {
    return {nullptr, unsupported.reason, {}};
  }
}

}  // namespace nautilus::tilize
