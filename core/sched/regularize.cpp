#include "core/sched/regularize.h"

#include <charconv>

#include "core/scalar/visitor.h"
#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"
#include "core/sched/split.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "regularize(BLOCK, AXIS=SIZE, ...)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_arg_shape(decision, kSignature, {0, 0, true});
  if (!reason.empty()) return ApplyResult::failure(reason);
  std::vector<RegularSize> sizes;
  for (const DecisionArg& arg : decision.args) {
    sizes.push_back({arg.key, arg.is_int() ? std::to_string(arg.as_int()) : arg.as_name()});
  }
  return regularize(program, decision.target, sizes);
}

bool is_power_of_two(int64_t value) { return value > 0 && (value & (value - 1)) == 0; }

// The padded extent of a loop of `extent`; 0 with a reason when `size` is not acceptable.
int64_t padded_extent(const std::string& axis, const std::string& size, int64_t extent,
                      std::string* reason) {
  if (size == "pow2") {
    int64_t padded = 1;
    while (padded < extent) padded *= 2;
    return padded;
  }
  if (size == "mul16") return (extent + 15) / 16 * 16;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), value);
  if (ec != std::errc() || end != size.data() + size.size()) {
    *reason = "the size of " + axis + " is an integer, pow2 or mul16, got " + size;
    return 0;
  }
  if (value < extent) {
    *reason = "loop " + axis + " runs " + std::to_string(extent) + " iterations; it cannot be "
              "padded to " + std::to_string(value);
    return 0;
  }
  if (!is_power_of_two(value) && value % 16 != 0) {
    *reason = "size " + std::to_string(value) + " of " + axis + " is neither a power of two "
              "nor a multiple of 16";
    return 0;
  }
  return value;
}

// Adds `guard` to the predicate of every block under a loop.
class Guard : public Mutator {
 public:
  explicit Guard(Expr guard) : guard_(std::move(guard)) {}

 protected:
  Stmt mutate_Block(const Block& node, const Stmt&) override {
    return make_block(node.name, node.iter_vars, node.bindings,
                      conjunction(node.predicate, guard_), node.init, node.body,
                      node.provenance);
  }

 private:
  Expr guard_;
};

}  // namespace

ApplyResult regularize(const ProgramPtr& program, std::string_view block_name,
                       const std::vector<RegularSize>& sizes) {
  ProgramPtr current = program;
  for (const RegularSize& size : sizes) {
    std::string reason;
    const std::optional<BlockPath> path = find_block(*current, block_name, &reason);
    if (!path) return ApplyResult::failure(reason);
    const std::optional<size_t> depth = find_axis_loop(*path, size.axis, &reason);
    if (!depth) return ApplyResult::failure(reason);
    const For& loop = *path->stmts[*depth]->as<For>();
    const int64_t padded = padded_extent(loop.var->name, size.size, loop.extent, &reason);
    if (padded == 0) return ApplyResult::failure(reason);
    if (padded == loop.extent) continue;
    Guard guard(index_lt(var_ref(loop.var), loop.extent));
    const Stmt padded_loop = make_for(loop.var, padded, guard.mutate(loop.body), loop.provenance,
                                      loop.for_kind);
    current = with_body(current, replace_at(*path, *depth, padded_loop));
  }
  return ApplyResult::success(current);
}

DecisionKind regularize_decision() {
  return {
      "regularize",
      std::string(kSignature),
      "Pad loops of a block's nest to a power of two or a multiple of 16, masking the padded "
      "iterations.",
      "AXIS names a loop as split does (an axis whose binding uses one loop, or a loop name such "
      "as m_i); SIZE is an integer at least the loop's extent E that is a power of two or a "
      "multiple of 16, or pow2 / mul16 for the next one. The loop runs SIZE iterations and every "
      "block under it gets the predicate `x < E`, so padded iterations do nothing. Example: "
      "on gemm after split(C_sum, m, 5), regularize(C_sum, m_i=8) gives `for m_i in 0..8:` and "
      "`block C_sum(m = m_o * 5 + m_i, ...) if m_o * 5 + m_i < 12 and m_i < 5`.",
      apply,
  };
}

}  // namespace nautilus::sched
