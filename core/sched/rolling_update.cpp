#include "core/sched/rolling_update.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "core/sched/finite_stand_in.h"

namespace nautilus::sched {
namespace {

using namespace scalar;

// The granule a one-step tile is rounded up to: the k extent of a 16-bit tensor-core atom
// (m16n8k16, wgmma k16), a multiple of every atom's n extent.
constexpr int64_t kStepGranule = 16;

// ---------------------------------------------------------------------------------------------
// Reading the program as lowered: top-level nests of one loop per iteration variable.

struct Nest {
  size_t index = 0;        // position among the program's top-level statements
  const Block* block = nullptr;
  std::vector<Var> spatial;  // the block's spatial iteration variables, in order
  std::vector<Var> reduce;   // its reduce iteration variables
};

// The block at the bottom of a perfect nest whose loops bind the iteration variables one to
// one, or nullptr.
const Block* perfect_nest_block(const Stmt& stmt) {
  std::vector<const For*> loops;
  Stmt current = stmt;
  while (const For* loop = current->as<For>()) {
    loops.push_back(loop);
    current = loop->body;
  }
  const Block* block = current->as<Block>();
  if (!block || block->predicate || loops.size() != block->iter_vars.size()) return nullptr;
  for (size_t i = 0; i < loops.size(); ++i) {
    const VarRef* ref = block->bindings[i]->as<VarRef>();
    if (!ref || ref->var != loops[i]->var || loops[i]->extent != block->iter_vars[i].extent) {
      return nullptr;
    }
  }
  return block;
}

std::vector<Stmt> top_level(const Program& program) {
  if (const Seq* seq = program.body->as<Seq>()) return seq->stmts;
  return {program.body};
}

// `buffer[v0, v1, ...] = value` where the indices are exactly `vars`.
const Store* store_to_vars(const Stmt& stmt, const std::vector<Var>& vars) {
  const Store* store = stmt ? stmt->as<Store>() : nullptr;
  if (!store || store->indices.size() != vars.size()) return nullptr;
  for (size_t i = 0; i < vars.size(); ++i) {
    const VarRef* ref = store->indices[i]->as<VarRef>();
    if (!ref || ref->var != vars[i]) return nullptr;
  }
  return store;
}

bool same_load(const Expr& expr, const Store& store) {
  const Load* load = expr->as<Load>();
  if (!load || load->buffer != store.buffer || load->indices.size() != store.indices.size()) {
    return false;
  }
  for (size_t i = 0; i < load->indices.size(); ++i) {
    const VarRef* a = load->indices[i]->as<VarRef>();
    const VarRef* b = store.indices[i]->as<VarRef>();
    if (!a || !b || a->var != b->var) return false;
  }
  return true;
}

struct Reduction {
  Buffer buffer;
  BinaryOp combine = BinaryOp::Add;
  Expr value;
};

// Matches `init: B[s] = identity; B[s] = combine(B[s], value)` over the spatial variables.
std::optional<Reduction> match_reduction(const Block& block, const std::vector<Var>& spatial) {
  const Store* init = store_to_vars(block.init, spatial);
  const Store* update = store_to_vars(block.body, spatial);
  if (!init || !update || init->buffer != update->buffer) return std::nullopt;
  const Binary* combine = update->value->as<Binary>();
  if (!combine || !same_load(combine->a, *update)) return std::nullopt;
  const FloatImm* identity = init->value->as<FloatImm>();
  if (!identity) return std::nullopt;
  const double inf = std::numeric_limits<double>::infinity();
  const bool matches = (combine->op == BinaryOp::Add && identity->value == 0.0) ||
                       (combine->op == BinaryOp::Max && identity->value == -inf) ||
                       (combine->op == BinaryOp::Min && identity->value == inf);
  if (!matches) return std::nullopt;
  return Reduction{update->buffer, combine->op, combine->b};
}

double identity_of(BinaryOp combine) {
  const double inf = std::numeric_limits<double>::infinity();
  return combine == BinaryOp::Max ? -inf : combine == BinaryOp::Min ? inf : 0.0;
}

// ---------------------------------------------------------------------------------------------
// Expression utilities.

class Substitute : public Mutator {
 public:
  explicit Substitute(const std::map<const VarNode*, Expr>& map) : map_(map) {}

 protected:
  Expr mutate_VarRef(const VarRef& node, const Expr& self) override {
    auto it = map_.find(node.var.get());
    return it == map_.end() ? self : it->second;
  }

 private:
  const std::map<const VarNode*, Expr>& map_;
};

Expr substitute(const Expr& expr, const std::map<const VarNode*, Expr>& map) {
  return Substitute(map).mutate(expr);
}

class BufferUse : public Visitor {
 public:
  std::set<const BufferNode*> reads, writes;

 protected:
  void visit_Load(const Load& node) override {
    reads.insert(node.buffer.get());
    Visitor::visit_Load(node);
  }
  void visit_Store(const Store& node) override {
    writes.insert(node.buffer.get());
    Visitor::visit_Store(node);
  }
};

BufferUse buffer_use(const Stmt& stmt) {
  BufferUse use;
  use.visit(stmt);
  return use;
}

// Every load in `expr`, outermost first.
std::vector<const Load*> loads_in(const Expr& expr) {
  struct Collector : Visitor {
    std::vector<const Load*> loads;
    void visit_Load(const Load& node) override {
      loads.push_back(&node);
      Visitor::visit_Load(node);
    }
  } collector;
  collector.visit(expr);
  return collector.loads;
}

// No loads and no variables: the same value in every iteration of every loop.
bool is_constant(const Expr& expr) {
  struct Finder : Visitor {
    bool varying = false;
    void visit_Load(const Load&) override { varying = true; }
    void visit_VarRef(const VarRef&) override { varying = true; }
  } finder;
  finder.visit(expr);
  return !finder.varying;
}

Expr product(Expr a, Expr b) {
  if (!a) return b;
  if (!b) return a;
  return binary(BinaryOp::Mul, std::move(a), std::move(b), a->provenance);
}

Expr sum(Expr a, Expr b) {
  if (!a) return b;
  if (!b) return a;
  return binary(BinaryOp::Add, std::move(a), std::move(b), a->provenance);
}

// ---------------------------------------------------------------------------------------------
// The fused reductions ("members") and the decomposition of dependent ones into terms.

struct Factor {
  Expr expr;
  bool inverse = false;  // divide by it instead of multiplying
};

// coefficient × Π iteration factors × Π deferred factors, where exponentials among the iteration
// factors contribute `exponent_r` (base e) / `exponent2_r` (base 2): their running-value parts.
// A running part of an exponent: coefficient × (a product of running reductions and constants).
struct RunningPart {
  double coefficient = 1.0;
  Expr value;
};

struct Term {
  double coefficient = 1.0;
  std::vector<Factor> iteration;
  std::vector<Factor> deferred;
  std::vector<RunningPart> exponent_r;   // base e
  std::vector<RunningPart> exponent2_r;  // base 2
};

struct Member {
  const Block* block = nullptr;
  size_t nest_index = 0;
  Reduction reduction;
  std::vector<Var> spatial;
  Var reduce;
  std::vector<size_t> frame;  // frame position (index into the target's spatial vars) per var
  bool leader = true;         // reads no other member: updated as before
  std::vector<Term> terms;
  std::vector<Buffer> states;  // one per term; the member's own buffer when it needs no final
  bool needs_final = false;
  std::set<size_t> reads_running;   // members whose running value it reads every iteration
  std::set<size_t> reads_final;     // members whose final value its deferred factors read
};

class RollingUpdate {
 public:
  RollingUpdate(const ProgramPtr& program, const Decision& decision)
      : program_(program), decision_(decision) {}

  ApplyResult run();

 private:
  std::string fail_reason_;
  bool fail(std::string reason) {
    if (fail_reason_.empty()) fail_reason_ = std::move(reason);
    return false;
  }

  bool collect_nests();
  bool find_target(const std::string& block_name, const std::string& axis);
  Expr inline_elementwise(const Expr& expr, int depth);
  Member make_member(size_t nest_index);
  bool discover_members();
  void discover_from(size_t first);
  bool may_be_infinite(const Expr& expr, int depth) const;
  void add_siblings();
  std::optional<Reduction> reduction_over_axis(const Nest& nest) const;
  std::optional<std::vector<size_t>> sibling_frame(const Member& sibling) const;
  std::optional<std::vector<size_t>> shared_data_frame(const Member& sibling) const;
  std::optional<size_t> member_of_load(const Load& load, const Member& reader) const;
  bool decompose(size_t index);
  std::optional<std::vector<Term>> terms_of(const Expr& expr, const Member& reader);
  bool classify_running_reads();
  std::optional<std::vector<size_t>> member_order();
  Stmt build_fused_nest(const std::vector<size_t>& order);
  std::optional<std::vector<Stmt>> reorder(std::vector<Stmt> statements);

  bool is_member_load(const Expr& expr, const Member& reader) const {
    const Load* load = expr->as<Load>();
    return load && member_of_load(*load, reader).has_value();
  }
  bool mentions_member(const Expr& expr, const Member& reader) const;
  bool only_members_and_constants(const Expr& expr, const Member& reader) const;

  Buffer fresh_buffer(const std::string& base, const Buffer& like);

  const ProgramPtr& program_;
  const Decision& decision_;
  int64_t tile_ = 0;  // 0: step one element at a time

  std::vector<Stmt> statements_;
  std::vector<Nest> nests_;  // parallel to statements_; block == nullptr for other statements
  std::map<const BufferNode*, size_t> writer_;  // buffer → nest index that writes it
  size_t target_nest_ = 0;
  int64_t axis_extent_ = 0;
  std::vector<Member> members_;
  std::map<const BufferNode*, size_t> member_by_buffer_;
  std::set<const BufferNode*> inlined_;
  std::vector<Buffer> new_buffers_;
  std::set<std::string> names_;  // buffer names in use
};

bool RollingUpdate::collect_nests() {
  statements_ = top_level(*program_);
  nests_.resize(statements_.size());
  for (const Buffer& b : program_->params) names_.insert(b->name);
  for (const Buffer& b : program_->allocations) names_.insert(b->name);
  for (size_t i = 0; i < statements_.size(); ++i) {
    nests_[i].index = i;
    const Block* block = perfect_nest_block(statements_[i]);
    if (!block) continue;
    nests_[i].block = block;
    for (const IterVar& iv : block->iter_vars) {
      (iv.kind == IterKind::Spatial ? nests_[i].spatial : nests_[i].reduce).push_back(iv.var);
    }
    for (const BufferNode* written : buffer_use(statements_[i]).writes) writer_[written] = i;
  }
  return true;
}

bool RollingUpdate::find_target(const std::string& block_name, const std::string& axis) {
  for (const Nest& nest : nests_) {
    if (!nest.block || nest.block->name != block_name) continue;
    target_nest_ = nest.index;
    if (nest.reduce.size() != 1 || nest.reduce[0]->name != axis) {
      std::string reduced;
      for (const Var& v : nest.reduce) reduced += (reduced.empty() ? "" : ", ") + v->name;
      return fail("block " + block_name + " must reduce over exactly the axis " + axis +
                  (reduced.empty() ? " (it is not a reduction)" : " (it reduces over " + reduced + ")"));
    }
    auto reduction = match_reduction(*nest.block, nest.spatial);
    if (!reduction) {
      return fail("block " + block_name + " is not a plain reduction `init: B = identity; B = B op value`");
    }
    if (reduction->combine != BinaryOp::Add) {
      return fail("block " + block_name + " is a max/min reduction; only a sum can be repaired");
    }
    for (const IterVar& iv : nest.block->iter_vars) {
      if (iv.var == nest.reduce[0]) axis_extent_ = iv.extent;
    }
    return true;
  }
  // Distinguish "no such block" from "a block in a nest that was already restructured".
  struct Finder : Visitor {
    std::string name;
    bool found = false;
    void visit_Block(const Block& node) override {
      found |= node.name == name;
      Visitor::visit_Block(node);
    }
  } finder;
  finder.name = block_name;
  finder.visit(program_->body);
  if (finder.found) {
    return fail("block " + block_name + " is not in a loop nest as lowered (one loop per "
                "iteration variable); apply rolling_update before tiling or fusing it");
  }
  return fail("the program has no block " + block_name);
}

// Replaces loads of elementwise intermediates that read some reduction over the axis' extent by
// the intermediate's own expression, so the dependence on running reductions becomes visible.
Expr RollingUpdate::inline_elementwise(const Expr& expr, int depth) {
  struct Inliner : Mutator {
    RollingUpdate* self;
    int depth;
    Expr mutate_Load(const Load& node, const Expr& original) override {
      Expr rebuilt = Mutator::mutate_Load(node, original);
      const Load& load = *rebuilt->as<Load>();
      auto writer = self->writer_.find(load.buffer.get());
      if (writer == self->writer_.end() || load.buffer->role != BufferRole::Intermediate) {
        return rebuilt;
      }
      const Nest& nest = self->nests_[writer->second];
      if (!nest.reduce.empty()) return rebuilt;
      const Store* store = store_to_vars(nest.block->body, nest.spatial);
      if (!store || nest.block->init || depth > 16) return rebuilt;
      Expr inner = self->inline_elementwise(store->value, depth + 1);
      // Only intermediates that depend on a candidate reduction are worth inlining.
      BufferUse use;
      use.visit(make_store(load.buffer, load.indices, inner));
      bool reads_candidate = false;
      for (const BufferNode* read : use.reads) {
        auto w = self->writer_.find(read);
        if (w == self->writer_.end()) continue;
        const Nest& producer = self->nests_[w->second];
        if (producer.reduce.size() != 1 || w->second == self->target_nest_) continue;
        for (const IterVar& iv : producer.block->iter_vars) {
          reads_candidate |= iv.var == producer.reduce[0] && iv.extent == self->axis_extent_;
        }
      }
      if (!reads_candidate) return rebuilt;
      std::map<const VarNode*, Expr> map;
      for (size_t i = 0; i < nest.spatial.size(); ++i) map[nest.spatial[i].get()] = load.indices[i];
      self->inlined_.insert(load.buffer.get());
      return substitute(inner, map);
    }
  } inliner;
  inliner.self = this;
  inliner.depth = depth;
  return inliner.mutate(expr);
}

// A load of a member's buffer indexed only by the reader's spatial variables: the reader uses the
// member's running (or final) value at the reader's point.
std::optional<size_t> RollingUpdate::member_of_load(const Load& load, const Member& reader) const {
  auto it = member_by_buffer_.find(load.buffer.get());
  if (it == member_by_buffer_.end()) return std::nullopt;
  for (const Expr& index : load.indices) {
    const VarRef* ref = index->as<VarRef>();
    if (!ref || std::find(reader.spatial.begin(), reader.spatial.end(), ref->var) ==
                    reader.spatial.end()) {
      return std::nullopt;
    }
  }
  return it->second;
}

bool RollingUpdate::mentions_member(const Expr& expr, const Member& reader) const {
  struct Finder : Visitor {
    const RollingUpdate* self;
    const Member* reader;
    bool found = false;
    void visit_Load(const Load& node) override {
      found |= self->member_of_load(node, *reader).has_value();
      Visitor::visit_Load(node);
    }
  } finder;
  finder.self = this;
  finder.reader = &reader;
  finder.visit(expr);
  return finder.found;
}

bool RollingUpdate::only_members_and_constants(const Expr& expr, const Member& reader) const {
  struct Checker : Visitor {
    const RollingUpdate* self;
    const Member* reader;
    bool ok = true;
    void visit_Load(const Load& node) override {
      if (!self->member_of_load(node, *reader)) ok = false;
    }
    void visit_VarRef(const VarRef&) override { ok = false; }
  } checker;
  checker.self = this;
  checker.reader = &reader;
  checker.visit(expr);
  return checker.ok;
}

Member RollingUpdate::make_member(size_t nest_index) {
  const Nest& nest = nests_[nest_index];
  Member member;
  member.block = nest.block;
  member.nest_index = nest_index;
  member.reduction = *match_reduction(*nest.block, nest.spatial);
  member.spatial = nest.spatial;
  member.reduce = nest.reduce[0];
  member.reduction.value = inline_elementwise(member.reduction.value, 0);
  return member;
}

// Finds every reduction the target depends on along the axis: candidates are reductions with one
// reduce variable of the axis' extent, read at the reader's point (indices = spatial variables).
bool RollingUpdate::discover_members() {
  members_.push_back(make_member(target_nest_));
  member_by_buffer_[members_[0].reduction.buffer.get()] = 0;
  for (size_t i = 0; i < members_[0].spatial.size(); ++i) members_[0].frame.push_back(i);

  discover_from(0);
  add_siblings();
  if (members_.size() == 1) {
    return fail("block " + members_[0].block->name + " reads no other reduction over an axis of "
                "extent " + std::to_string(axis_extent_) + "; there is nothing to fuse");
  }
  return true;
}

// Whether `expr` can be ±inf for finite inputs: it holds an infinite constant, or reads an
// intermediate computed from one (`S = select(n <= m, ..., -inf)`). Overflow is not counted.
bool RollingUpdate::may_be_infinite(const Expr& expr, int depth) const {
  struct Finder : Visitor {
    bool found = false;
    void visit_FloatImm(const FloatImm& node) override { found |= std::isinf(node.value); }
  } finder;
  finder.visit(expr);
  if (finder.found) return true;
  if (depth > 16) return true;  // too deep to follow: assume the worst
  for (const Load* load : loads_in(expr)) {
    auto writer = writer_.find(load->buffer.get());
    if (writer == writer_.end() || load->buffer->role != BufferRole::Intermediate) continue;
    const Block* block = nests_[writer->second].block;
    const Store* store = block && block->body ? block->body->as<Store>() : nullptr;
    if (!store) return true;
    // A reduction reads its own running value: follow only the value it combines.
    Expr value = store->value;
    if (const Binary* combine = value->as<Binary>(); combine && same_load(combine->a, *store)) {
      value = combine->b;
    }
    if (may_be_infinite(value, depth + 1)) return true;
  }
  return false;
}

// Breadth-first over loads of candidate reductions from the values of members_[first, ...).
void RollingUpdate::discover_from(size_t first) {
  for (size_t next = first; next < members_.size(); ++next) {
    for (const Load* load : loads_in(members_[next].reduction.value)) {
      auto w = writer_.find(load->buffer.get());
      if (w == writer_.end() || member_by_buffer_.count(load->buffer.get())) continue;
      const Nest& nest = nests_[w->second];
      if (load->indices.size() != nest.spatial.size() || !reduction_over_axis(nest)) continue;
      // Indexed by the reader's spatial variables: the reader sees one value per point.
      std::vector<size_t> frame;
      for (const Expr& index : load->indices) {
        const VarRef* ref = index->as<VarRef>();
        const Member& reader = members_[next];
        auto pos = ref ? std::find(reader.spatial.begin(), reader.spatial.end(), ref->var)
                       : reader.spatial.end();
        if (pos == reader.spatial.end()) break;
        frame.push_back(reader.frame[static_cast<size_t>(pos - reader.spatial.begin())]);
      }
      if (frame.size() != load->indices.size()) continue;
      Member member = make_member(w->second);
      member.frame = frame;
      member_by_buffer_[load->buffer.get()] = members_.size();
      members_.push_back(std::move(member));
    }
  }
}

// Siblings: other sum reductions over the axis that read a member at their own point although no
// member reads them. `(sum(n) P*V) / (sum(n) P)` gives two such sums, both reading the running
// max through P. In the fused loop they share the running values and the scores; left out, each
// would need a pass over the axis of its own that recomputes (or rereads) the scores. A sibling
// joins only when every one of its spatial variables indexes a member, so it lives in the fused
// loop's frame, and when its value separates into terms (else the fusion proceeds without it).
//
// A sum that reads no member but reads the same data along the axis as a member does joins too
// (`sum(c) T[r, c] * X[r, c]` beside the log-sum-exp of X[r, c]): it needs no repair, and in the
// fused loop each element of the shared data is loaded once for both; left out, it is a pass
// over the axis of its own that reads the shared data again. Its frame comes from those loads.
void RollingUpdate::add_siblings() {
  for (bool added = true; added;) {
    added = false;
    for (const Nest& nest : nests_) {
      if (nest.index == target_nest_) continue;
      auto reduction = reduction_over_axis(nest);
      if (!reduction || reduction->combine != BinaryOp::Add ||
          member_by_buffer_.count(reduction->buffer.get())) {
        continue;
      }
      Member sibling = make_member(nest.index);
      auto frame = sibling_frame(sibling);
      if (!frame) frame = shared_data_frame(sibling);
      if (!frame) continue;
      sibling.frame = *frame;
      const std::string saved_reason = fail_reason_;
      const bool separable = terms_of(sibling.reduction.value, sibling).has_value();
      fail_reason_ = saved_reason;
      if (!separable) continue;
      member_by_buffer_[sibling.reduction.buffer.get()] = members_.size();
      members_.push_back(std::move(sibling));
      discover_from(members_.size() - 1);
      added = true;
    }
  }
}

// The nest's reduction when it is a plain one over a single axis of the fused axis' extent.
std::optional<Reduction> RollingUpdate::reduction_over_axis(const Nest& nest) const {
  if (!nest.block || nest.reduce.size() != 1) return std::nullopt;
  for (const IterVar& iv : nest.block->iter_vars) {
    if (iv.var == nest.reduce[0] && iv.extent != axis_extent_) return std::nullopt;
  }
  return match_reduction(*nest.block, nest.spatial);
}

// The frame positions of a would-be sibling's spatial variables, read off its loads of members:
// `Mx[b2, h2, m2]` maps b2, h2, m2 to the positions Mx's own variables have. Nothing when a
// variable indexes no member, or two loads disagree.
std::optional<std::vector<size_t>> RollingUpdate::sibling_frame(const Member& sibling) const {
  std::vector<std::optional<size_t>> positions(sibling.spatial.size());
  bool reads_member = false, consistent = true;
  for (const Load* load : loads_in(sibling.reduction.value)) {
    auto it = member_by_buffer_.find(load->buffer.get());
    if (it == member_by_buffer_.end()) continue;
    const Member& member = members_[it->second];
    for (size_t i = 0; i < load->indices.size() && i < member.frame.size(); ++i) {
      const VarRef* ref = load->indices[i]->as<VarRef>();
      if (!ref) return std::nullopt;
      auto pos = std::find(sibling.spatial.begin(), sibling.spatial.end(), ref->var);
      if (pos == sibling.spatial.end()) return std::nullopt;
      std::optional<size_t>& slot = positions[static_cast<size_t>(pos - sibling.spatial.begin())];
      consistent &= !slot || *slot == member.frame[i];
      slot = member.frame[i];
      reads_member = true;
    }
  }
  if (!reads_member || !consistent) return std::nullopt;
  std::vector<size_t> frame;
  for (const auto& position : positions) {
    if (!position) return std::nullopt;
    frame.push_back(*position);
  }
  return frame;
}

// The frame positions of a would-be sibling that reads no member, read off its loads of data a
// member also loads along the axis: `T[r2, c2] * X[r2, c2]` beside a member's `X[r, c]` maps r2
// to the position of r. Each index of such a load must be the reduce variable where the member's
// is, and a spatial variable where the member's is one of its own. Everything else the sibling
// reads must be a program input, so the fused loop never waits for a nest that needs its result.
// Nothing when no load is shared, a variable stays unplaced, or two loads disagree.
std::optional<std::vector<size_t>> RollingUpdate::shared_data_frame(const Member& sibling) const {
  std::vector<std::optional<size_t>> positions(sibling.spatial.size());
  bool shares_data = false;
  for (const Load* load : loads_in(sibling.reduction.value)) {
    bool matched = false;
    for (const Member& member : members_) {
      for (const Load* theirs : loads_in(member.reduction.value)) {
        if (theirs->buffer != load->buffer || theirs->indices.size() != load->indices.size()) {
          continue;
        }
        std::vector<std::pair<size_t, size_t>> placed;  // (sibling variable, frame position)
        bool same_pattern = true;
        for (size_t i = 0; i < load->indices.size() && same_pattern; ++i) {
          const VarRef* mine = load->indices[i]->as<VarRef>();
          const VarRef* other = theirs->indices[i]->as<VarRef>();
          if (!mine || !other) {
            same_pattern = false;
          } else if (other->var == member.reduce) {
            same_pattern = mine->var == sibling.reduce;
          } else {
            auto at = std::find(member.spatial.begin(), member.spatial.end(), other->var);
            auto pos = std::find(sibling.spatial.begin(), sibling.spatial.end(), mine->var);
            same_pattern = at != member.spatial.end() && pos != sibling.spatial.end();
            if (same_pattern) {
              placed.push_back({static_cast<size_t>(pos - sibling.spatial.begin()),
                                member.frame[static_cast<size_t>(at - member.spatial.begin())]});
            }
          }
        }
        if (!same_pattern) continue;
        for (const auto& [variable, frame_position] : placed) {
          std::optional<size_t>& slot = positions[variable];
          if (slot && *slot != frame_position) return std::nullopt;
          slot = frame_position;
        }
        matched = true;
        break;
      }
      if (matched) break;
    }
    if (matched) {
      shares_data = true;
    } else if (load->buffer->role != BufferRole::Input) {
      return std::nullopt;
    }
  }
  if (!shares_data) return std::nullopt;
  std::vector<size_t> frame;
  for (const auto& position : positions) {
    if (!position) return std::nullopt;
    frame.push_back(*position);
  }
  return frame;
}

std::optional<std::vector<Term>> RollingUpdate::terms_of(const Expr& expr, const Member& reader) {
  auto negate = [](std::vector<Term> terms) {
    for (Term& t : terms) t.coefficient = -t.coefficient;
    return terms;
  };
  if (!mentions_member(expr, reader)) return std::vector<Term>{Term{1.0, {{expr, false}}, {}, {}, {}}};
  if (is_member_load(expr, reader)) return std::vector<Term>{Term{1.0, {}, {{expr, false}}, {}, {}}};
  auto deferred_product = [](const Term& t) {
    Expr part;
    for (const Factor& f : t.deferred) {
      part = f.inverse ? binary(BinaryOp::Div, part ? part : float_imm(1.0, DType::F32), f.expr)
                       : product(part, f.expr);
    }
    return part;
  };
  const std::string shown = print_expr(expr);
  if (const Cast* c = expr->as<Cast>()) {
    if (c->dtype == c->value->dtype) return terms_of(c->value, reader);
  }
  if (const Unary* u = expr->as<Unary>()) {
    if (u->op == UnaryOp::Neg) {
      auto inner = terms_of(u->a, reader);
      if (!inner) return std::nullopt;
      return negate(*inner);
    }
    if (u->op == UnaryOp::Exp || u->op == UnaryOp::Exp2) {
      // exp(x + r): the exponent must split into a data part and a running part.
      auto exponent = terms_of(u->a, reader);
      if (!exponent) return std::nullopt;
      std::vector<RunningPart> running;
      for (const Term& t : *exponent) {
        // Constant factors (scales such as log2(e)) may multiply either part.
        const bool data = std::any_of(t.iteration.begin(), t.iteration.end(),
                                      [](const Factor& f) { return !is_constant(f.expr); });
        const bool has_running = !t.deferred.empty();
        if (!t.exponent_r.empty() || !t.exponent2_r.empty() || (data && has_running)) {
          fail("cannot separate the exponent of " + shown +
               " into a part of the loop's data plus a part of running reductions");
          return std::nullopt;
        }
        if (!has_running) continue;
        Expr value = deferred_product(t);
        for (const Factor& f : t.iteration) {
          value = binary(f.inverse ? BinaryOp::Div : BinaryOp::Mul, value, f.expr);
        }
        running.push_back({t.coefficient, value});
      }
      Term term{1.0, {{expr, false}}, {}, {}, {}};
      (u->op == UnaryOp::Exp ? term.exponent_r : term.exponent2_r) = running;
      return std::vector<Term>{term};
    }
  }
  if (const Binary* b = expr->as<Binary>()) {
    if (b->op == BinaryOp::Add || b->op == BinaryOp::Sub) {
      auto lhs = terms_of(b->a, reader);
      auto rhs = terms_of(b->b, reader);
      if (!lhs || !rhs) return std::nullopt;
      std::vector<Term> terms = *lhs;
      std::vector<Term> right = b->op == BinaryOp::Sub ? negate(*rhs) : *rhs;
      terms.insert(terms.end(), right.begin(), right.end());
      return terms;
    }
    if (b->op == BinaryOp::Mul) {
      auto lhs = terms_of(b->a, reader);
      auto rhs = terms_of(b->b, reader);
      if (!lhs || !rhs) return std::nullopt;
      if (lhs->size() * rhs->size() > 16) {
        fail("expanding " + shown + " gives more than 16 terms");
        return std::nullopt;
      }
      std::vector<Term> terms;
      for (const Term& x : *lhs) {
        for (const Term& y : *rhs) {
          Term t;
          t.coefficient = x.coefficient * y.coefficient;
          t.iteration = x.iteration;
          t.iteration.insert(t.iteration.end(), y.iteration.begin(), y.iteration.end());
          t.deferred = x.deferred;
          t.deferred.insert(t.deferred.end(), y.deferred.begin(), y.deferred.end());
          t.exponent_r = x.exponent_r;
          t.exponent_r.insert(t.exponent_r.end(), y.exponent_r.begin(), y.exponent_r.end());
          t.exponent2_r = x.exponent2_r;
          t.exponent2_r.insert(t.exponent2_r.end(), y.exponent2_r.begin(), y.exponent2_r.end());
          terms.push_back(std::move(t));
        }
      }
      return terms;
    }
    if (b->op == BinaryOp::Div) {
      auto lhs = terms_of(b->a, reader);
      if (!lhs) return std::nullopt;
      if (!mentions_member(b->b, reader)) {
        for (Term& t : *lhs) t.iteration.push_back({b->b, true});
        return lhs;
      }
      if (only_members_and_constants(b->b, reader)) {
        for (Term& t : *lhs) t.deferred.push_back({b->b, true});
        return lhs;
      }
      fail("the divisor of " + shown + " mixes the loop's data with running reductions");
      return std::nullopt;
    }
  }
  if (only_members_and_constants(expr, reader)) {
    return std::vector<Term>{Term{1.0, {}, {{expr, false}}, {}, {}}};
  }
  fail("cannot separate " + shown + " into factors of the loop's data and of running reductions");
  return std::nullopt;
}

bool RollingUpdate::decompose(size_t index) {
  Member& member = members_[index];
  if (!mentions_member(member.reduction.value, member)) {
    member.leader = true;
    member.states = {member.reduction.buffer};
    return true;
  }
  member.leader = false;
  if (member.reduction.combine != BinaryOp::Add) {
    return fail("block " + member.block->name + " is a max/min reduction that reads another "
                "reduction over the same axis; only sums can be repaired");
  }
  auto terms = terms_of(member.reduction.value, member);
  if (!terms) {
    return fail("block " + member.block->name + ": " + fail_reason_);
  }
  // Merge terms that are the same up to their coefficient (x·mean and mean·x, say).
  std::vector<Term> merged;
  std::vector<std::string> keys;
  for (Term& term : *terms) {
    std::string key;
    for (const Factor& f : term.iteration) key += (f.inverse ? "/" : "*") + print_expr(f.expr);
    key += "|";
    std::vector<std::string> deferred;
    for (const Factor& f : term.deferred) deferred.push_back((f.inverse ? "/" : "*") + print_expr(f.expr));
    std::sort(deferred.begin(), deferred.end());
    for (const std::string& d : deferred) key += d;
    auto found = std::find(keys.begin(), keys.end(), key);
    if (found != keys.end()) {
      merged[static_cast<size_t>(found - keys.begin())].coefficient += term.coefficient;
    } else {
      keys.push_back(key);
      merged.push_back(std::move(term));
    }
  }
  std::erase_if(merged, [](const Term& t) { return t.coefficient == 0.0; });
  member.terms = std::move(merged);
  member.needs_final = member.terms.size() != 1 || !member.terms[0].deferred.empty();
  if (!member.needs_final) {
    member.states = {member.reduction.buffer};
  } else {
    for (size_t k = 0; k < member.terms.size(); ++k) {
      std::string suffix = member.terms.size() == 1 ? "_acc" : "_acc" + std::to_string(k);
      member.states.push_back(fresh_buffer(member.reduction.buffer->name + suffix,
                                           member.reduction.buffer));
    }
  }
  return true;
}

// Records which members each member reads every iteration (in iteration factors and exponents)
// and which only at the end (deferred factors); a running read of a member that needs a final
// combination is impossible: its value is only known after the loop.
bool RollingUpdate::classify_running_reads() {
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& member = members_[i];
    auto record = [&](const Expr& expr, std::set<size_t>& into) {
      struct Collector : Visitor {
        const RollingUpdate* self;
        const Member* reader;
        std::set<size_t>* into;
        void visit_Load(const Load& node) override {
          if (auto m = self->member_of_load(node, *reader)) into->insert(*m);
          Visitor::visit_Load(node);
        }
      } collector;
      collector.self = this;
      collector.reader = &member;
      collector.into = &into;
      collector.visit(expr);
    };
    if (member.leader) continue;
    for (const Term& term : member.terms) {
      for (const Factor& f : term.iteration) record(f.expr, member.reads_running);
      for (const Factor& f : term.deferred) record(f.expr, member.reads_final);
    }
    for (size_t read : member.reads_running) {
      if (members_[read].needs_final) {
        return fail("block " + member.block->name + " needs the running value of " +
                    members_[read].block->name + ", which is only known after the loop");
      }
    }
  }
  return true;
}

std::optional<std::vector<size_t>> RollingUpdate::member_order() {
  std::vector<size_t> order;
  std::vector<int> state(members_.size(), 0);  // 0 new, 1 visiting, 2 done
  std::function<bool(size_t)> visit = [&](size_t i) {
    if (state[i] == 2) return true;
    if (state[i] == 1) return false;
    state[i] = 1;
    std::set<size_t> deps = members_[i].reads_running;
    deps.insert(members_[i].reads_final.begin(), members_[i].reads_final.end());
    for (size_t d : deps) {
      if (d != i && !visit(d)) return false;
    }
    state[i] = 2;
    order.push_back(i);
    return true;
  };
  for (size_t i = members_.size(); i-- > 0;) {
    if (!visit(i)) {
      fail("the reductions fused with " + members_[0].block->name + " depend on each other in a cycle");
      return std::nullopt;
    }
  }
  return order;
}

Buffer RollingUpdate::fresh_buffer(const std::string& base, const Buffer& like) {
  std::string name = base;
  for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
  names_.insert(name);
  Buffer buffer = make_buffer(name, like->shape, DType::F32, MemoryScope::Global,
                              BufferRole::Intermediate, like->provenance);
  new_buffers_.push_back(buffer);
  return buffer;
}

std::string fresh_block_name(std::set<std::string>& names, const std::string& base) {
  std::string name = base;
  for (int k = 1; names.count(name); ++k) name = base + "_" + std::to_string(k);
  names.insert(name);
  return name;
}

Stmt RollingUpdate::build_fused_nest(const std::vector<size_t>& order) {
  const Member& target = members_[0];
  const Provenance provenance = target.block->provenance;
  // Frame variables every member has: the loops around the whole fused computation.
  std::vector<size_t> common;
  for (size_t f = 0; f < target.spatial.size(); ++f) {
    bool everywhere = std::all_of(members_.begin(), members_.end(), [&](const Member& m) {
      return std::find(m.frame.begin(), m.frame.end(), f) != m.frame.end();
    });
    if (everywhere) common.push_back(f);
  }
  std::map<size_t, Var> frame_loop;  // frame position → loop variable of the common loops
  for (size_t f : common) frame_loop[f] = make_var(target.spatial[f]->name);

  // The rolling loop over the axis: one loop, or tile steps with an inner loop in each block.
  const std::string axis = target.reduce->name;
  Var step = make_var(tile_ > 0 ? axis + "_o" : axis);
  const int64_t steps = tile_ > 0 ? (axis_extent_ + tile_ - 1) / tile_ : axis_extent_;

  // Block names of the program, minus those of the nests this pass replaces.
  std::set<std::string> block_names;
  for (const Nest& nest : nests_) {
    if (nest.block) block_names.insert(nest.block->name);
  }
  for (const Member& member : members_) block_names.erase(member.block->name);
  // One block of `member` over its spatial variables (plus the axis when `reduce`), with loops
  // for the variables outside the common frame; `make_body` gets the new iteration variables.
  auto make_block_nest = [&](const Member& member, const std::string& base, bool reduce,
                             const std::function<Stmt(const std::map<const VarNode*, Expr>&)>& make_body,
                             const Stmt& init = nullptr) {
    std::vector<IterVar> iter_vars;
    std::vector<Expr> bindings;
    std::vector<std::pair<Var, int64_t>> inner_loops;
    std::map<const VarNode*, Expr> rename;
    for (size_t i = 0; i < member.spatial.size(); ++i) {
      Var iv = make_var(member.spatial[i]->name);
      int64_t extent = member.reduction.buffer->shape[i];
      iter_vars.push_back({iv, extent, IterKind::Spatial});
      rename[member.spatial[i].get()] = var_ref(iv);
      auto common_loop = frame_loop.find(member.frame[i]);
      if (common_loop != frame_loop.end()) {
        bindings.push_back(var_ref(common_loop->second));
      } else {
        Var loop = make_var(member.spatial[i]->name);
        inner_loops.push_back({loop, extent});
        bindings.push_back(var_ref(loop));
      }
    }
    Expr predicate;
    if (reduce) {
      Var iv = make_var(member.reduce->name);
      iter_vars.push_back({iv, axis_extent_, IterKind::Reduce});
      rename[member.reduce.get()] = var_ref(iv);
      if (tile_ > 0) {
        Var lane = make_var(axis + "_i");
        inner_loops.push_back({lane, tile_});
        Expr axis_index = binary(BinaryOp::Add, binary(BinaryOp::Mul, var_ref(step), int_imm(tile_)),
                                 var_ref(lane));
        bindings.push_back(axis_index);
        if (axis_extent_ % tile_ != 0) {
          predicate = compare(CompareOp::LT, axis_index, int_imm(axis_extent_));
        }
      } else {
        bindings.push_back(var_ref(step));
      }
    }
    Stmt nest = make_block(fresh_block_name(block_names, base), iter_vars, bindings, predicate,
                           init, make_body(rename), member.block->provenance);
    for (size_t i = inner_loops.size(); i-- > 0;) {
      nest = make_for(inner_loops[i].first, inner_loops[i].second, nest, member.block->provenance);
    }
    return nest;
  };
  auto spatial_indices = [](const Member& member, const std::map<const VarNode*, Expr>& rename) {
    std::vector<Expr> indices;
    for (const Var& v : member.spatial) indices.push_back(rename.at(v.get()));
    return indices;
  };

  // Previous running values, for every member an exponent reads.
  std::map<const BufferNode*, Buffer> previous;
  for (const Member& member : members_) {
    for (const Term& term : member.terms) {
      std::vector<RunningPart> parts = term.exponent_r;
      parts.insert(parts.end(), term.exponent2_r.begin(), term.exponent2_r.end());
      for (const RunningPart& part : parts) {
        BufferUse use;
        use.visit(make_store(member.reduction.buffer, {}, part.value));
        for (const BufferNode* read : use.reads) {
          if (member_by_buffer_.count(read) && !previous.count(read)) {
            const Member& source = members_[member_by_buffer_.at(read)];
            previous[read] = fresh_buffer(source.reduction.buffer->name + "_prev",
                                          source.reduction.buffer);
          }
        }
      }
    }
  }
  struct ToPrevious : Mutator {
    const std::map<const BufferNode*, Buffer>* previous;
    Expr mutate_Load(const Load& node, const Expr& self) override {
      auto it = previous->find(node.buffer.get());
      if (it == previous->end()) return Mutator::mutate_Load(node, self);
      return load(it->second, node.indices, node.provenance);
    }
  } to_previous;
  to_previous.previous = &previous;

  // Running values of max and min reductions start at -inf and +inf, and stay there while every
  // value seen so far is masked (a query row whose first key tiles lie outside its window). An
  // exponent reading them raw gives exp(-inf - -inf) = NaN in both the rescale and the new term.
  // So exponents read the current running value as `r == ±inf ? 0 : r` (FlashAttention's row
  // max does the same): wherever r is finite nothing changes, and a masked value gives
  // exp(-inf - 0) = 0. The previous value in a rescale stays raw: it is infinite only when the
  // partial sums are still 0, and exp(-inf - r') = 0 then rescales them to 0, where replacing it
  // by 0 as well would give exp(0 - r'), which overflows for a very negative r' (0 · inf = NaN).
  // Values that cannot be infinite (no ±inf constant anywhere in what they are computed from:
  // plain attention's scores) need no guard.
  std::map<const BufferNode*, double> unbounded;  // running buffer → its infinite start value
  for (const Member& member : members_) {
    if (!member.leader || member.reduction.combine == BinaryOp::Add) continue;
    if (!may_be_infinite(member.reduction.value, 0)) continue;
    unbounded[member.reduction.buffer.get()] = identity_of(member.reduction.combine);
  }
  struct FiniteRunning : Mutator {
    const std::map<const BufferNode*, double>* unbounded;
    Expr mutate_Load(const Load& node, const Expr& self) override {
      auto it = unbounded->find(node.buffer.get());
      if (it == unbounded->end()) return Mutator::mutate_Load(node, self);
      return finite_stand_in(self, it->second);
    }
  } finite_running;
  finite_running.unbounded = &unbounded;

  std::vector<Stmt> before, during, after;
  for (size_t index : order) {
    const Member& member = members_[index];
    const std::string& name = member.block->name;
    // Initialize every state before the loop.
    for (const Buffer& state : member.states) {
      before.push_back(make_block_nest(member, state->name + "_init", false, [&](const auto& rename) {
        return make_store(state, spatial_indices(member, rename),
                          float_imm(identity_of(member.leader ? member.reduction.combine
                                                              : BinaryOp::Add),
                                    DType::F32, member.block->provenance),
                          member.block->provenance);
      }));
    }
    if (previous.count(member.reduction.buffer.get())) {
      const Buffer& prev = previous.at(member.reduction.buffer.get());
      during.push_back(make_block_nest(member, prev->name, false, [&](const auto& rename) {
        auto indices = spatial_indices(member, rename);
        return make_store(prev, indices, load(member.reduction.buffer, indices),
                          member.block->provenance);
      }));
    }
    if (member.leader) {
      during.push_back(make_block_nest(member, name, true, [&](const auto& rename) {
        auto indices = spatial_indices(member, rename);
        Expr value = substitute(member.reduction.value, rename);
        return make_store(member.reduction.buffer, indices,
                          binary(member.reduction.combine, load(member.reduction.buffer, indices),
                                 value, value->provenance),
                          member.block->provenance);
      }));
      continue;
    }
    for (size_t k = 0; k < member.terms.size(); ++k) {
      const Term& term = member.terms[k];
      const Buffer& state = member.states[k];
      // Repair: the term is exp(x + e(r)); when running values move from r to r' every partial
      // sum is rescaled by exp(e(r') - e(r)) = exp(Σ c·(r' - r)), written c·(r_prev - r') for
      // negative c so softmax reads exp(Mx_prev - Mx).
      auto exponent_change = [&](const std::vector<RunningPart>& parts) {
        Expr change;
        for (const RunningPart& part : parts) {
          Expr current = finite_running.mutate(part.value);
          Expr previous_value = to_previous.mutate(part.value);
          Expr delta = part.coefficient < 0 ? binary(BinaryOp::Sub, previous_value, current)
                                            : binary(BinaryOp::Sub, current, previous_value);
          double magnitude = std::abs(part.coefficient);
          if (magnitude != 1.0) delta = product(float_imm(magnitude, DType::F32), delta);
          change = sum(change, delta);
        }
        return change;
      };
      Expr rescale;
      if (!term.exponent_r.empty()) rescale = unary(UnaryOp::Exp, exponent_change(term.exponent_r));
      if (!term.exponent2_r.empty()) {
        rescale = product(rescale, unary(UnaryOp::Exp2, exponent_change(term.exponent2_r)));
      }
      if (rescale) {
        during.push_back(make_block_nest(member, state->name + "_rescale", false, [&](const auto& rename) {
          auto indices = spatial_indices(member, rename);
          return make_store(state, indices,
                            binary(BinaryOp::Mul, load(state, indices), substitute(rescale, rename)),
                            member.block->provenance);
        }));
      }
      Expr value;
      for (const Factor& f : term.iteration) {
        if (f.inverse) {
          value = binary(BinaryOp::Div, value ? value : float_imm(1.0, DType::F32), f.expr);
        } else {
          value = product(value, f.expr);
        }
      }
      if (!value) value = float_imm(1.0, DType::F32);
      value = finite_running.mutate(value);
      if (term.coefficient == -1.0) {
        value = unary(UnaryOp::Neg, value);
      } else if (term.coefficient != 1.0) {
        value = product(float_imm(term.coefficient, DType::F32), value);
      }
      during.push_back(make_block_nest(
          member, member.states.size() == 1 && !member.needs_final ? name : state->name, true,
          [&](const auto& rename) {
            auto indices = spatial_indices(member, rename);
            return make_store(state, indices,
                              binary(BinaryOp::Add, load(state, indices), substitute(value, rename)),
                              member.block->provenance);
          }));
    }
    if (member.needs_final) {
      // Delayed normalization: deferred factors applied once, to the finished sums.
      after.push_back(make_block_nest(member, name, false, [&](const auto& rename) {
        auto indices = spatial_indices(member, rename);
        Expr total;
        for (size_t k = 0; k < member.terms.size(); ++k) {
          Expr part = load(member.states[k], indices);
          for (const Factor& f : member.terms[k].deferred) {
            Expr factor = substitute(f.expr, rename);
            part = binary(f.inverse ? BinaryOp::Div : BinaryOp::Mul, part, factor);
          }
          total = sum(total, part);
        }
        return make_store(member.reduction.buffer, indices, total, member.block->provenance);
      }));
    }
  }
  Stmt loop_body = during.size() == 1 ? during[0] : make_seq(during, provenance);
  before.push_back(make_for(step, steps, loop_body, provenance));
  before.insert(before.end(), after.begin(), after.end());
  Stmt fused = make_seq(before, provenance);
  for (size_t i = common.size(); i-- > 0;) {
    fused = make_for(frame_loop[common[i]], target.reduction.buffer->shape[common[i]], fused,
                     provenance);
  }
  return fused;
}

// Orders top-level statements so every statement follows the ones whose buffers it reads
// (stable: otherwise the original order).
std::optional<std::vector<Stmt>> RollingUpdate::reorder(std::vector<Stmt> statements) {
  const size_t n = statements.size();
  std::vector<BufferUse> uses;
  for (const Stmt& s : statements) uses.push_back(buffer_use(s));
  std::vector<std::set<size_t>> deps(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      for (const BufferNode* read : uses[i].reads) {
        if (uses[j].writes.count(read)) deps[i].insert(j);
      }
    }
  }
  std::vector<Stmt> ordered;
  std::vector<bool> placed(n, false);
  while (ordered.size() < n) {
    bool progress = false;
    for (size_t i = 0; i < n && !progress; ++i) {
      if (placed[i]) continue;
      if (std::all_of(deps[i].begin(), deps[i].end(), [&](size_t d) { return placed[d]; })) {
        placed[i] = true;
        ordered.push_back(statements[i]);
        progress = true;
      }
    }
    if (!progress) {
      fail("the fused loop would have to come both before and after another loop nest");
      return std::nullopt;
    }
  }
  return ordered;
}

ApplyResult RollingUpdate::run() {
  auto positional = decision_.positional();
  if (positional.size() != 1 || positional[0]->is_int()) {
    return ApplyResult::failure("rolling_update expects rolling_update(BLOCK, AXIS[, tile=T])");
  }
  for (const DecisionArg& arg : decision_.args) {
    if (arg.key.empty()) continue;
    if (arg.key != "tile" || !arg.is_int() || arg.as_int() <= 0) {
      return ApplyResult::failure("rolling_update takes only tile=T, with T a positive integer");
    }
    tile_ = arg.as_int();
  }
  if (!collect_nests() || !find_target(decision_.target, positional[0]->as_name()) ||
      !discover_members()) {
    return ApplyResult::failure(fail_reason_);
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!decompose(i)) return ApplyResult::failure(fail_reason_);
  }
  if (!classify_running_reads()) return ApplyResult::failure(fail_reason_);
  auto order = member_order();
  if (!order) return ApplyResult::failure(fail_reason_);
  // A tile wider than the axis covers the axis in one step, rounded up to whole granules of
  // kStepGranule elements and masked past its end. The tile loop is still there (one step), so a
  // schedule names the same loops at every size. Rounding keeps the step a valid tensor-core
  // extent: 77 keys (a CLIP prompt) in one step of 77 have no MMA shape and fell back to
  // CUDA-core dot products; one step of 80 is five k16 atoms.
  if (tile_ > axis_extent_) {
    tile_ = std::min(tile_, (axis_extent_ + kStepGranule - 1) / kStepGranule * kStepGranule);
  }

  Stmt fused = build_fused_nest(*order);

  // Replace the members' nests by the fused one, drop inlined intermediates nobody reads any
  // more, and order the rest by data flow.
  std::set<size_t> removed;
  for (const Member& member : members_) removed.insert(member.nest_index);
  std::vector<Stmt> remaining;
  for (size_t i = 0; i < statements_.size(); ++i) {
    if (!removed.count(i)) remaining.push_back(statements_[i]);
  }
  remaining.push_back(fused);
  for (bool dropped = true; dropped;) {
    dropped = false;
    std::set<const BufferNode*> read;
    for (const Stmt& s : remaining) {
      auto use = buffer_use(s);
      read.insert(use.reads.begin(), use.reads.end());
    }
    for (auto it = remaining.begin(); it != remaining.end(); ++it) {
      auto use = buffer_use(*it);
      bool only_dead_intermediates = !use.writes.empty() &&
          std::all_of(use.writes.begin(), use.writes.end(), [&](const BufferNode* b) {
            return inlined_.count(b) && !read.count(b);
          });
      if (only_dead_intermediates) {
        remaining.erase(it);
        dropped = true;
        break;
      }
    }
  }
  auto ordered = reorder(remaining);
  if (!ordered) return ApplyResult::failure(fail_reason_);

  auto result = std::make_shared<Program>(*program_);
  result->body = make_seq(*ordered, program_->body->provenance);
  std::set<const BufferNode*> used;
  for (const Stmt& s : *ordered) {
    auto use = buffer_use(s);
    used.insert(use.reads.begin(), use.reads.end());
    used.insert(use.writes.begin(), use.writes.end());
  }
  result->allocations.clear();
  for (const Buffer& b : program_->allocations) {
    if (used.count(b.get())) result->allocations.push_back(b);
  }
  result->allocations.insert(result->allocations.end(), new_buffers_.begin(), new_buffers_.end());
  return ApplyResult::success(result);
}

}  // namespace

ApplyResult apply_rolling_update(const scalar::ProgramPtr& program, const Decision& decision) {
  return RollingUpdate(program, decision).run();
}

const DecisionKind& rolling_update_decision() {
  static const DecisionKind kind{
      "rolling_update",
      "rolling_update(BLOCK, AXIS[, tile=T])",
      "Fuses a sum reduction with the reductions it depends on along AXIS into one pass, "
      "rescaling partial sums as the running values change (online softmax).",
      "Splits the reduction's value into terms of the loop's data times exponentials of running "
      "reductions, derives each term's repair exp(r - r') from the exponent, defers factors of "
      "finished reductions (1/L) to after the loop, and computes everything in one loop over "
      "AXIS, T elements per step.\n\nExample: rolling_update(O_sum, n) on attention gives, per "
      "step of the loop over n, `Mx = max(Mx, S); L = L*exp(Mx_prev - Mx) + exp(S - Mx); "
      "O_sum_acc = O_sum_acc*exp(Mx_prev - Mx) + exp(S - Mx)*V`, and `O_sum = O_sum_acc / L` "
      "after the loop.",
      apply_rolling_update};
  return kind;
}

}  // namespace nautilus::sched
