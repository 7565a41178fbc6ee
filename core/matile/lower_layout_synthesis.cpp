// Layout synthesis (lower.h rule 4): the register layouts of a kernel chosen as the cheapest
// consistent assignment under a cost model, not only by the first rule that fires. The rules of
// lower_layouts.cpp (propagation, demand, the blocked default) remain the inference engine; the
// synthesis searches over *pins*, layouts fixed before the rules run, which the rules then
// propagate through every value that follows from them:
//
//   1. Run the rules; price the result (layout_cost): every conversion a consumer needs
//      (register-only or through shared memory), every reduce's shuffles and cross-warp
//      scratch, every global access's instructions (narrow layouts cost more of them), each
//      weighted by how often it runs (the trip counts of the loops around it).
//   2. Each conversion is a conflict between a value's layout and the one a consumer wants.
//      Branch on it: pin the value to the wanted layout, or pin the consumer to the value's,
//      run the rules again and price the whole kernel. Keep a branch only if the kernel got
//      cheaper; otherwise backtrack. Repeat from the new assignment until no branch improves or
//      the budget of evaluations is spent. Deterministic: conflicts are tried in order of cost,
//      then program order.
//
// LayerNorm's statistics kernel (a row loop carrying Σx and Σx² from a constant 0):
//
//   rules alone:                                    synthesized:
//     %Mu_sum_i  blocked (4,32) -- the default,       %Mu_sum_i  the slice of the [4, 1024] tile
//                first unplaced value in program                 (pinned through %25: the
//                order                                           reduce's own result layout)
//     %25 = reduce sum %24  -> converted to blocked   %25 = reduce sum %24 (no conversion)
//       in every iteration                             %Mu_sum = add %Mu_sum_i, %25 (in place)
//     5 shared-memory conversions after the loop      none
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "core/matile/hopper.h"
#include "core/matile/kernel_lowering.h"
#include "core/support/fixed_point.h"

namespace nautilus::matile::lowering {

namespace {

// Cost units: thread instructions. A global access instruction counts more than a register or
// shared one: a memory-bound kernel's time follows its global instructions, and a narrower
// layout multiplies them.
constexpr double kGlobalAccessCost = 4.0;
// The bar.syncs of a shared-memory exchange (one before the reads, one before the scratch is
// written again): every warp of the CTA waits for the slowest, so they cost far more than the
// few shared accesses of a small tile.
constexpr double kBarrierCost = 32.0;
constexpr double kRegisterMoveCost = 0.25;     // per slot: ptxas renames most of these
constexpr int kEvaluationBudget = 40;          // rule runs per kernel beyond the first
constexpr double kUnknownTrips = 4.0;          // a loop whose trip count is not static
constexpr double kMaxWeight = 1e9;

// A price in the notes: whole instructions, a decimal below 100.
std::string price_text(double value) { return fixed_point(value, value >= 100 ? 0 : 1); }

// Instructions one thread issues to access a tile in `l` along its last axis (a row-major
// buffer): runs of consecutive last-axis elements of up to 16 bytes, in slot order.
double access_instructions(const RegisterLayout& l, const std::vector<int64_t>& shape, int element_bytes) {
  if (shape.empty() || l.slots() == 0) return 1;
  const std::vector<int64_t> elements = slot_elements(l);
  int64_t stride = 1;  // column-major element index: the last axis steps by the others' product
  for (size_t i = 0; i + 1 < shape.size(); ++i) stride *= shape[i];
  const int64_t max_run = std::max<int64_t>(1, 16 / std::max(1, element_bytes));
  const int64_t slots = l.slots();
  double instructions = 0;
  int64_t run = 0;
  for (int64_t s = 0; s < slots; ++s) {
    const bool continues = s > 0 && run < max_run &&
                           elements[static_cast<size_t>(s)] == elements[static_cast<size_t>(s - 1)] + stride;
    if (continues) {
      ++run;
    } else {
      ++instructions;
      run = 1;
    }
  }
  return instructions;
}

}  // namespace

// Everything one pricing of the current layouts_ needs: the memo of conversions already paid
// in a loop body (materialize keeps one per layout and body) and the conflicts found.
struct KernelLowering::LayoutPricing {
  std::vector<LayoutConflict>* conflicts = nullptr;
  std::set<std::tuple<const VNode*, std::string, const VOp*>> paid;
  double total = 0;
};

double KernelLowering::convert_price(const RegisterLayout& from, const RegisterLayout& to,
                                     const TileType& type) {
  if (from == to) return 0;
  if (register_only(from, to, type)) return kRegisterMoveCost * static_cast<double>(to.slots());
  return static_cast<double>(from.slots() + to.slots()) + kBarrierCost;
}

// The value whose layout `node` is emitted in: a For's result is the last iteration's carried
// value, in its block argument's layout; anything else its own.
const VNode* KernelLowering::emitted_as(const VNode* node) const {
  auto carried = carried_by_.find(node);
  if (carried == carried_by_.end()) return node;
  const VOp* owner = carried->second;
  for (size_t i = 0; i < owner->results.size() && i < owner->block_args.size(); ++i) {
    if (owner->results[i].get() == node) return owner->block_args[i].get();
  }
  return node;
}

// The price of using `x` in layout `to` inside `loop`, run `weight` times; a rematerialized
// tile is re-emitted there (price_emission).
void KernelLowering::price_use(LayoutPricing& pricing, const VValue& x, const RegisterLayout& to,
                               const VOp* loop, double weight, const VNode* consumer, int depth) {
  if (x->type.rank() == 0 || depth > 32) return;
  const auto key = std::make_tuple(x.get(), layout_text(to), loop);
  if (!pricing.paid.insert(key).second) return;
  if (remat(x)) {
    if (const VOp* op = def(x)) price_emission(pricing, *op, x, to, loop, weight, consumer, depth);
    return;
  }
  auto placed_layout = layouts_.find(emitted_as(x.get()));
  if (placed_layout == layouts_.end() || placed_layout->second == to) return;
  const double price = weight * convert_price(placed_layout->second, to, x->type);
  pricing.total += price;
  if (pricing.conflicts && price > 0) {
    pricing.conflicts->push_back({x.get(), to, consumer, price});
  }
}

// The price of emitting `op` (an element-wise op, broadcast or permute) with its result `v` in
// `to`, as emit_compute does: the operands are used in the layouts that needs.
void KernelLowering::price_emission(LayoutPricing& pricing, const VOp& op, const VValue& v,
                                    const RegisterLayout& to, const VOp* loop, double weight,
                                    const VNode* consumer, int depth) {
  switch (op.kind) {
    case VOpKind::Broadcast:
    case VOpKind::Permute:
      if (op.operands[0]->type.rank() == 0) return;  // a scalar is used where it was placed
      price_use(pricing, op.operands[0], moved_source_layout(op, v, to), loop, weight, consumer, depth + 1);
      return;
    case VOpKind::Full:
    case VOpKind::Iota: pricing.total += weight * 0.5 * static_cast<double>(to.slots()); return;
    default:
      // One instruction per slot, its operands in `to`.
      pricing.total += weight * static_cast<double>(to.slots());
      for (const VValue& operand : op.operands) price_use(pricing, operand, to, loop, weight, consumer, depth + 1);
      return;
  }
}

void KernelLowering::price_region(LayoutPricing& pricing, const vrtile::Region& region, const VOp* loop,
                                  double weight) {
  for (const vrtile::OpPtr& op_ptr : region.ops) {
    const VOp& op = *op_ptr;
    const VValue result = op.results.empty() ? nullptr : op.results[0];
    switch (op.kind) {
      case VOpKind::For: {
        for (size_t i = 0; i < op.operands.size() && i < op.block_args.size(); ++i) {
          if (layouts_.count(op.block_args[i].get())) {
            price_use(pricing, op.operands[i], layouts_.at(op.block_args[i].get()), loop, weight,
                      op.block_args[i].get(), 0);
          }
        }
        const double trips = op.extent > 0 ? static_cast<double>(op.extent) : kUnknownTrips;
        const double inner = std::min(kMaxWeight, weight * trips);
        price_region(pricing, *op.body, &op, inner);
        break;
      }
      case VOpKind::Yield: {
        const VOp* owner = loop_of_yield_.count(&op) ? loop_of_yield_.at(&op) : nullptr;
        if (!owner) break;
        for (size_t i = 0; i < op.operands.size() && i < owner->block_args.size(); ++i) {
          if (layouts_.count(owner->block_args[i].get())) {
            price_use(pricing, op.operands[i], layouts_.at(owner->block_args[i].get()), loop, weight,
                      owner->block_args[i].get(), 0);
          }
        }
        break;
      }
      case VOpKind::Reduce: {
        const VValue& x = op.operands[0];
        if (!result || !layouts_.count(result.get())) break;
        std::string unused;
        const std::optional<ReduceForm> form = reduce_form(op, &unused);
        if (!form) break;
        price_use(pricing, x, form->source, loop, weight, result.get(), 0);
        // In-thread combining, one shuffle per mask and result slot, the cross-warp exchange.
        double reduce = static_cast<double>(form->source.slots()) +
                        static_cast<double>(form->plan.xor_masks.size() * form->slice.slots());
        if (form->plan.cross_warp) reduce += 2.0 * static_cast<double>(form->slice.slots()) + kBarrierCost;
        pricing.total += weight * reduce;
        const RegisterLayout& wanted = layouts_.at(result.get());
        const double price = weight * convert_price(form->slice, wanted, result->type);
        pricing.total += price;
        // The reduce produces its slice; a result placed otherwise is converted after it.
        if (pricing.conflicts && price > 0) pricing.conflicts->push_back({result.get(), form->slice, nullptr, price});
        break;
      }
      case VOpKind::Dot: {
        if (!result || !dot_plans_.count(&op)) break;
        const DotPlan& plan = dot_plans_.at(&op);
        if (!plan.mma) break;
        const RegisterLayout c = layout_for(result);
        if (op.operands.size() == 3) price_use(pricing, op.operands[2], c, loop, weight, result.get(), 0);
        const int64_t M = result->type.shape[0], N = result->type.shape[1];
        const int64_t K = op.operands[0]->type.shape[1];
        if (plan.wgmma) {
          if (!plan.a.load) {
            Result<RegisterLayout> a = wgmma_a_layout(M, K, options_.consumers);
            if (a) price_use(pricing, plan.a.source, *a, loop, weight, result.get(), 0);
          }
          break;
        }
        if (!plan.a.load) {
          Result<RegisterLayout> a = mma_a_layout(M, K, plan.warps_m, plan.warps_n, plan.k_interleave);
          if (a) price_use(pricing, plan.a.source, *a, loop, weight, result.get(), 0);
        }
        if (!plan.b.load) {
          Result<RegisterLayout> b = mma_b_layout(K, N, plan.warps_m, plan.warps_n, plan.column_interleave,
                                                  plan.k_interleave);
          if (b) price_use(pricing, plan.b.source, *b, loop, weight, result.get(), 0);
        }
        break;
      }
      case VOpKind::Load: {
        if (!result || !lives_in_registers(result) || result->type.rank() == 0 || !layouts_.count(result.get())) break;
        pricing.total += weight * kGlobalAccessCost *
                         access_instructions(layouts_.at(result.get()), result->type.shape,
                                             dtype_bytes(op.buffer->dtype));
        break;
      }
      case VOpKind::Store: {
        const VValue& stored = op.operands.empty() ? nullptr : op.operands.back();
        if (!stored || stored->type.rank() == 0) break;
        const RegisterLayout l = remat(stored) ? blocked_layout(stored->type.shape, threads()) : layout_for(stored);
        price_use(pricing, stored, l, loop, weight, nullptr, 0);
        pricing.total += weight * kGlobalAccessCost *
                         access_instructions(l, stored->type.shape, dtype_bytes(op.buffer->dtype));
        break;
      }
      default: {
        // Element-wise ops, broadcasts and permutes placed at their definition (not
        // rematerialized): emitted once, in the result's layout.
        if (!result || !computes_in_registers(op.kind) || result->type.rank() == 0 || remat(result) ||
            !layouts_.count(result.get())) {
          break;
        }
        price_emission(pricing, op, result, layouts_.at(result.get()), loop, weight, result.get(), 0);
        break;
      }
    }
  }
}

double KernelLowering::layout_cost(std::vector<LayoutConflict>* conflicts) {
  LayoutPricing pricing;
  pricing.conflicts = conflicts;
  price_region(pricing, *vk_.body, nullptr, 1.0);
  if (conflicts) {
    // Costliest first, then program order (stable sort over the walk's order).
    std::stable_sort(conflicts->begin(), conflicts->end(),
                     [](const LayoutConflict& a, const LayoutConflict& b) { return a.price > b.price; });
  }
  return pricing.total;
}

// A value the synthesis may pin: kept in registers, a tile, and not fixed by an instruction (a
// dot's accumulator fragment is the MMA's own).
bool KernelLowering::pinnable(const VNode* node) {
  if (!node || node->type.rank() == 0) return false;
  for (const VValue& v : order_) {
    if (v.get() != node) continue;
    if (!lives_in_registers(v) || remat(v)) return false;
    const VOp* op = def(v);
    return !op || op->kind != VOpKind::Dot;
  }
  return false;
}

// A pin of `node` to `layout`, extended to every value its loop carries with it (a block
// argument and the For's result at the same index take one layout).
std::vector<std::pair<const VNode*, RegisterLayout>> KernelLowering::pin_group(const VNode* node,
                                                                                const RegisterLayout& layout) {
  std::vector<std::pair<const VNode*, RegisterLayout>> group{{node, layout}};
  auto carried = carried_by_.find(node);
  if (carried == carried_by_.end()) return group;
  const VOp* loop = carried->second;
  for (size_t i = 0; i < loop->block_args.size(); ++i) {
    const bool here = loop->block_args[i].get() == node ||
                      (i < loop->results.size() && loop->results[i].get() == node);
    if (!here) continue;
    for (const VNode* other : {loop->block_args[i].get(),
                               i < loop->results.size() ? loop->results[i].get() : nullptr}) {
      if (other && other != node) group.emplace_back(other, layout);
    }
  }
  return group;
}

bool KernelLowering::run_layout_rules(const std::map<const VNode*, RegisterLayout>& pins) {
  layouts_.clear();
  layout_reasons_.clear();
  for (const auto& [node, layout] : pins) {
    layouts_[node] = layout;
    layout_reasons_[node] = "synthesis";
  }
  try {
    assign_layouts();
  } catch (const LowerError&) {
    return false;
  }
  return true;
}

void KernelLowering::synthesize_layouts() {
  std::map<const VNode*, RegisterLayout> pins;
  run_layout_rules(pins);
  std::vector<LayoutConflict> conflicts;
  const double rules_cost = layout_cost(&conflicts);
  layout_cost_rules_ = rules_cost;
  layout_cost_ = rules_cost;
  if (!options_.synthesize_layouts || conflicts.empty()) return;

  // What the rules gave each value, for the explanation of what synthesis changed.
  const std::unordered_map<const VNode*, RegisterLayout> rules_layouts = layouts_;
  const std::unordered_map<const VNode*, std::string> rules_reasons = layout_reasons_;
  auto name_of = [](const VNode* node) { return "%" + node->name; };

  double best = rules_cost;
  int evaluations = 0;
  std::set<std::string> tried;
  std::vector<std::string> accepted, rejected;
  bool improved = true;
  while (improved && evaluations < kEvaluationBudget) {
    improved = false;
    // Each conflict gives two branches: the value takes the wanted layout, or the consumer
    // takes the value's.
    std::vector<std::pair<const VNode*, RegisterLayout>> branches;
    for (const LayoutConflict& c : conflicts) {
      branches.emplace_back(c.value, c.wanted);
      const VNode* placed = emitted_as(c.value);
      if (c.consumer && c.consumer->type.shape == c.value->type.shape && layouts_.count(placed)) {
        branches.emplace_back(c.consumer, layouts_.at(placed));
      }
    }
    for (const auto& [node, layout] : branches) {
      if (evaluations >= kEvaluationBudget) break;
      if (!pinnable(node)) continue;
      const std::string key = node->name + " " + layout_text(layout);
      if (!tried.insert(key).second) continue;
      auto current = layouts_.find(emitted_as(node));
      if (current != layouts_.end() && current->second == layout) continue;
      std::map<const VNode*, RegisterLayout> trial = pins;
      for (const auto& [member, l] : pin_group(node, layout)) trial[member] = l;
      ++evaluations;
      std::vector<LayoutConflict> trial_conflicts;
      const bool ok = run_layout_rules(trial);
      const double cost = ok ? layout_cost(&trial_conflicts) : std::numeric_limits<double>::infinity();
      if (cost < best - 1e-6) {
        accepted.push_back(name_of(node) + " in " + layout_text(layout) + ": " + price_text(best) + " -> " + price_text(cost));
        best = cost;
        pins = std::move(trial);
        conflicts = std::move(trial_conflicts);
        improved = true;
        break;
      }
      rejected.push_back(name_of(node) + " in " + layout_text(layout) + ": " +
                         (ok ? price_text(cost) + " (+" + price_text(cost - best) + ")" : std::string("refused by the rules")));
    }
    if (!improved) break;
  }
  run_layout_rules(pins);
  layout_cost_ = layout_cost(nullptr);
  // Say why each value the synthesis moved off the rules' layout has its layout.
  for (const VValue& v : order_) {
    auto found = layouts_.find(v.get());
    auto before = rules_layouts.find(v.get());
    if (found == layouts_.end() || before == rules_layouts.end() || found->second == before->second) continue;
    const std::string& reason = layout_reasons_[v.get()];
    layout_reasons_[v.get()] =
        "synthesis: " + (reason == "synthesis" ? std::string("pinned") : reason) + ", instead of the rules' " +
        layout_text(before->second) + " (" + rules_reasons.at(v.get()) + ")";
  }
  if (!pins.empty()) {
    std::string text = "layout synthesis: register layouts cost " + price_text(rules_cost) + " by the rules, " +
                       price_text(layout_cost_) + " synthesized (" + std::to_string(evaluations) +
                       " alternatives priced); pinned ";
    for (size_t i = 0; i < accepted.size(); ++i) text += (i ? "; " : "") + accepted[i];
    b_.note(text);
    synthesis_summary_ = text;
  }
  if (options_.explain_layouts) {
    if (pins.empty()) {
      b_.note("layout synthesis: the rules' layouts cost " + price_text(rules_cost) +
              " thread instructions; no alternative of " + std::to_string(evaluations) + " was cheaper");
    }
    for (const std::string& r : rejected) b_.note("layout synthesis: considered " + r);
  }
}

}  // namespace nautilus::matile::lowering
