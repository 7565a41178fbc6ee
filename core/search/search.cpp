#include "core/search/search.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <cmath>
#include <iomanip>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/codegen/emit_cuda.h"
#include "core/driver/pipeline.h"
#include "core/matile/ir.h"
#include "core/scalar/printer.h"
#include "core/sched/launch.h"
#include "core/support/parallel.h"
#include "core/support/rng.h"

namespace nautilus::search {

const char* node_status_name(NodeStatus status) {
  switch (status) {
    case NodeStatus::Expanded: return "expanded";
    case NodeStatus::Pruned: return "pruned";
    case NodeStatus::Leaf: return "leaf";
    case NodeStatus::Chosen: return "chosen";
    case NodeStatus::Failed: return "failed";
    case NodeStatus::Open: return "open";
  }
  return "?";
}

namespace {

// Tiling's second stage combines this many sizes of each axis (2: at most 8 tiles for a GEMM).
constexpr size_t kTileSizesCombinedPerAxis = 2;
// Rounds of single-axis changes and two-axis steps around the best tile after the combinations
// (expand_tiling, stage 3).
constexpr int kTileRefinementRounds = 3;

using Clock = std::chrono::steady_clock;
using sched::Decision;

std::string format_us(double us) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(us < 10 ? 2 : 1) << us << " µs";
  return out.str();
}

sched::Schedule concat(const sched::Schedule& a, const std::vector<Decision>& b) {
  sched::Schedule out = a;
  out.decisions.insert(out.decisions.end(), b.begin(), b.end());
  return out;
}

// What compiling one completed schedule gave.
struct Evaluation {
  bool ok = false;
  bool internal = false;  // an internal compiler error, not a property of the schedule
  std::string reason;
  cost::CostEstimate estimate;
  // Launch decisions the evaluation added to make the completion fit (see fit_shared_memory).
  std::vector<Decision> added;
  // warp_spec decisions of the completion the evaluation left out because their kernel's
  // lowering refused the warp-specialized form (see compile_and_estimate).
  std::vector<Decision> dropped;
  // The estimated module, kept only until the raster orders of the same program are estimated.
  matile::ModulePtr module;
  // Why the module cannot be emitted as CUDA although it lowers and the model estimates it (a
  // register tile past the register file); a complete schedule with it is dropped.
  std::string unbuildable;
};

// `module` with the grid of the kernel whose grid axes are the loops `bind` names reordered as
// `bind` binds them (grid.x first); nullptr when no kernel has exactly those axes. Tilize
// orders a kernel's grid by the bind and nothing else in the kernel depends on that order, so
// this is the module the other raster order compiles to.
matile::ModulePtr with_raster(const matile::Module& module, const Decision& bind) {
  static const char* const kDims[] = {"grid.x", "grid.y", "grid.z"};
  std::vector<std::string> order;
  for (const char* dim : kDims) {
    for (const sched::DecisionArg& arg : bind.args) {
      if (!arg.is_int() && arg.as_name() == dim) order.push_back(arg.key);
    }
  }
  for (size_t k = 0; k < module.kernels.size(); ++k) {
    const matile::Kernel& kernel = *module.kernels[k];
    std::vector<matile::GridAxis> grid;
    for (const std::string& name : order) {
      for (const matile::GridAxis& axis : kernel.grid) {
        if (axis.var && axis.var->name == name) grid.push_back(axis);
      }
    }
    if (grid.size() != order.size()) continue;
    for (const matile::GridAxis& axis : kernel.grid) {
      if (std::find(order.begin(), order.end(), axis.var ? axis.var->name : "") == order.end()) {
        grid.push_back(axis);
      }
    }
    auto permuted = std::make_shared<matile::Kernel>(kernel);
    permuted->grid = std::move(grid);
    auto out = std::make_shared<matile::Module>(module);
    out->kernels[k] = permuted;
    return out;
  }
  return nullptr;
}

// The bind in which `variant` differs from `base` when that is their only difference.
std::optional<Decision> only_bind_difference(const std::vector<Decision>& base,
                                             const std::vector<Decision>& variant) {
  if (base.size() != variant.size()) return std::nullopt;
  std::optional<Decision> differing;
  for (size_t i = 0; i < base.size(); ++i) {
    if (base[i] == variant[i]) continue;
    if (differing || base[i].kind != "bind" || variant[i].kind != "bind" ||
        base[i].target != variant[i].target) {
      return std::nullopt;
    }
    differing = variant[i];
  }
  return differing;
}

// The groups the search offers to the tile order of kernels with a 2-D grid of tiles
// (tile_order; 1, the plain order, is every completion's own). G = 4 measured within 1% of 8
// on the GEMMs of bench/RESULTS.md, so two groups keep the search short.
constexpr int kTileOrderGroups[] = {8, 16};

// Whether a tile order can change the estimate of `module`: some kernel with two or more grid
// axes launches more CTAs than one per SM (with a single wave, every CTA shares L2 with every
// other whatever the order). Saves the search the estimates that would only repeat the plain
// order's.
bool groups_can_matter(const matile::Module& module, int sm_count) {
  for (const matile::KernelPtr& kernel : module.kernels) {
    if (kernel->grid.size() < 2) continue;
    int64_t ctas = 1;
    for (const matile::GridAxis& axis : kernel->grid) ctas *= axis.extent;
    if (ctas > sm_count) return true;
  }
  return false;
}

// The tile order's group of each top-level nest of `program` (one kernel each), 1 where none.
std::vector<int> nest_tile_groups(const scalar::Program& program) {
  std::vector<int> groups;
  for (const scalar::Stmt& stmt : top_level_statements(program)) {
    const auto* loop = stmt->as<scalar::For>();
    groups.push_back(loop && loop->launch ? loop->launch->group : 1);
  }
  return groups;
}

// `module` with its kernels launched in the tile orders `groups` (one per kernel, as
// nest_tile_groups gives them): the module the completion with those tile_order decisions
// compiles to, since the decision changes nothing else in a kernel and the lowering applies it
// to kernels of two or more grid axes. nullptr when the kernels do not match the nests.
matile::ModulePtr with_tile_groups(const matile::Module& module, const std::vector<int>& groups) {
  if (groups.size() != module.kernels.size()) return nullptr;
  auto out = std::make_shared<matile::Module>(module);
  for (size_t k = 0; k < out->kernels.size(); ++k) {
    matile::KernelPtr& kernel = out->kernels[k];
    const int group = kernel->grid.size() >= 2 ? groups[k] : 1;
    if (kernel->tile_group == group) continue;
    auto grouped = std::make_shared<matile::Kernel>(*kernel);
    grouped->tile_group = group;
    kernel = grouped;
  }
  return out;
}

// The completion in the grouped tile order of each of `groups` on every nest whose grid.x and
// grid.y loops both iterate tiles (the CTAs of a 2-D grid of output tiles share operand tiles);
// none when there is no such nest, a nest already has a tile order (a pin), or a decision is
// forbidden. One analysis of the program serves every group.
std::vector<Completion> with_tile_orders(const Completion& completion, const int* groups,
                                         size_t group_count, const std::vector<Decision>& forbids) {
  std::vector<Completion> out;
  if (!completion.program) return out;
  const ProgramFacts facts = analyze_program(*completion.program);
  std::vector<std::string> targets;
  for (const NestFacts& nest : facts.nests) {
    if (nest.principal < 0) continue;
    bool x_tiles = false, y_tiles = false;
    for (const LoopFacts& loop : nest.chain) {
      if (loop.loop->launch && loop.loop->launch->group > 1) return out;
      x_tiles |= loop.tile_outer && loop.loop->for_kind == scalar::ForKind::GridX;
      y_tiles |= loop.tile_outer && loop.loop->for_kind == scalar::ForKind::GridY;
    }
    if (x_tiles && y_tiles) targets.push_back(nest.principal_block().block->name);
  }
  if (targets.empty()) return out;
  for (size_t g = 0; g < group_count; ++g) {
    Completion variant = completion;
    bool forbidden = false;
    for (const std::string& target : targets) {
      const Decision order{"tile_order", target, {{"group", int64_t{groups[g]}}}};
      if (is_forbidden(forbids, order)) {
        forbidden = true;
        break;
      }
      sched::ApplyResult applied = sched::apply_decision(variant.program, order);
      if (!applied.ok()) continue;
      variant.program = applied.program;
      variant.decisions.push_back(order);
      variant.pinned.push_back(false);
    }
    if (!forbidden && variant.decisions.size() > completion.decisions.size()) {
      out.push_back(std::move(variant));
    }
  }
  return out;
}

// The completion with every warp-specialized nest's kernel run as persistent CTAs with the
// dynamic tile scheduler (`persistent(BLOCK)` on each warp_spec target); none when there is no
// warp_spec, a nest is persistent already (a pin) or the decision is forbidden.
std::optional<Completion> with_persistent_ctas(const Completion& completion, const sched::Schedule& schedule,
                                               const std::vector<Decision>& forbids) {
  if (!completion.program) return std::nullopt;
  std::vector<std::string> targets;
  for (const std::vector<Decision>* list : {&schedule.decisions, &completion.decisions}) {
    for (const Decision& d : *list) {
      if (d.kind == "persistent") return std::nullopt;
      if (d.kind == "warp_spec" && std::find(targets.begin(), targets.end(), d.target) == targets.end()) {
        targets.push_back(d.target);
      }
    }
  }
  if (targets.empty()) return std::nullopt;
  Completion variant = completion;
  for (const std::string& target : targets) {
    const Decision persistent{"persistent", target, {}};
    if (is_forbidden(forbids, persistent)) return std::nullopt;
    sched::ApplyResult applied = sched::apply_decision(variant.program, persistent);
    if (!applied.ok()) continue;
    variant.program = applied.program;
    variant.decisions.push_back(persistent);
    variant.pinned.push_back(false);
  }
  if (variant.decisions.size() == completion.decisions.size()) return std::nullopt;
  return variant;
}

// `module` with its warp-specialized kernels (those with roles) persistent with the dynamic tile
// scheduler: what the model sees of the completion with_persistent_ctas gives, since the
// decision computes nothing differently and the model estimates a tile loop's body once per tile
// (as one CTA per tile), counting the ring's fill once per CTA; the scheduler's fetch per tile
// (one atomic the producer issues ahead of the tile's copies) is left out. The tile ring's shared
// memory is counted: its 16 bytes, plus up to 1008 bytes of padding when an allocation after it
// (the TMA-staged epilogue's tile) must start at a 1024-byte swizzle atom, so a kernel near the
// limit is not estimated in a form that does not fit. nullptr when no kernel changes.
matile::ModulePtr with_persistent_kernels(const matile::Module& module) {
  auto out = std::make_shared<matile::Module>(module);
  bool changed = false;
  for (matile::KernelPtr& kernel : out->kernels) {
    if (kernel->persistent || !kernel->body) continue;
    const bool specialized = std::any_of(kernel->body->ops.begin(), kernel->body->ops.end(),
                                         [](const matile::OpPtr& op) { return op->kind == matile::OpKind::Roles; });
    if (!specialized) continue;
    auto persistent = std::make_shared<matile::Kernel>(*kernel);
    persistent->persistent = true;
    persistent->dynamic_tiles = true;
    constexpr int64_t kTileRingBytes = 1024 + 16;
    persistent->shared_bytes += kTileRingBytes;
    kernel = persistent;
    changed = true;
  }
  return changed ? matile::ModulePtr(out) : nullptr;
}

// `decisions` without their tile_order decisions and the persistent decisions the search added
// (`pinned` false; with_persistent_ctas), the group those give (1 when none) and whether there
// was such a persistent decision.
std::vector<Decision> without_tile_order(const std::vector<Decision>& decisions, const std::vector<bool>& pinned,
                                         int* group, bool* persistent) {
  std::vector<Decision> out;
  *group = 1;
  *persistent = false;
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& d = decisions[i];
    if (d.kind == "persistent" && !(i < pinned.size() && pinned[i])) {
      *persistent = true;
      continue;
    }
    if (d.kind != "tile_order") {
      out.push_back(d);
      continue;
    }
    for (const sched::DecisionArg& arg : d.args) {
      if (arg.key == "group" && arg.is_int()) *group = static_cast<int>(arg.as_int());
    }
  }
  return out;
}

struct Entry {
  int node = 0;
  Phase phase = Phase::ReductionFusion;
  bool tied = false;  // in the tie beam (Searcher::select_beam)
};

class Searcher {
 public:
  Searcher(const SearchInput& input, const cost::CostModel& model, const SearchOptions& options,
           SearchObserver* observer, std::stop_token stop, const Measurer& measurer)
      : input_(input), model_(model), options_(options), observer_(observer),
        stop_(std::move(stop)), measurer_(measurer) {
    arch_ = lowering_arch(options, model);
  }

  SearchResult run();

 private:
  // ---- the tree --------------------------------------------------------------------------

  std::string node_key(const SearchNode& node) const {
    // The printed program includes the launch attributes of its nests.
    return scalar::print_program(*node.program) + "\n#pins " + std::to_string(node.pins_applied);
  }

  // Adds the child of `parent` made by `decision`; returns its id, or -1 when the program is
  // one another node already has (the child is recorded as a pruned duplicate, and `existing`
  // receives that node's id).
  int add_child(int parent, const Decision& decision, Phase phase, bool pinned,
                scalar::ProgramPtr program, int* existing = nullptr) {
    SearchNode node;
    node.id = static_cast<int>(nodes_.size());
    node.parent = parent;
    node.decision = decision;
    node.phase = phase;
    node.pinned = pinned;
    node.pins_applied = nodes_[parent].pins_applied + (pinned ? 1 : 0);
    node.schedule = nodes_[parent].schedule;
    node.schedule.decisions.push_back(decision);
    node.program = std::move(program);
    const std::string key = node_key(node);
    auto [it, inserted] = by_key_.emplace(key, node.id);
    if (!inserted) {
      if (existing) *existing = it->second;
      node.reason = "the same program as node " + std::to_string(it->second);
      node.status = NodeStatus::Pruned;
      dropped_.push_back(true);
    } else {
      dropped_.push_back(false);
    }
    complete_.push_back(false);
    failed_.push_back(false);
    tabu_.push_back(tabu_[parent]);
    nodes_[parent].children.push_back(node.id);
    nodes_.push_back(std::move(node));
    return inserted ? nodes_.back().id : -1;
  }

  // Applies the pending pins that apply, in order, as a chain of pinned children.
  int absorb_pins(int id) {
    while (id >= 0 && nodes_[id].pins_applied < options_.pins.size()) {
      const Decision& pin = options_.pins[nodes_[id].pins_applied];
      sched::ApplyResult applied = sched::apply_decision(nodes_[id].program, pin);
      if (!applied.ok()) break;
      const Phase phase = nodes_[id].phase;
      id = add_child(id, pin, phase, true, applied.program);
    }
    return id;
  }

  // The child of `parent` by `decision` when the decision is allowed and applies, with the pins
  // that apply after it; -1 otherwise.
  // `duplicate` is set when the decision applies but gives another node's program, and
  // `existing` (-1 otherwise) to that node's id.
  int try_child(int parent, const Decision& decision, Phase phase, bool* duplicate = nullptr,
                int* existing = nullptr) {
    if (duplicate) *duplicate = false;
    if (existing) *existing = -1;
    if (is_forbidden(options_.forbids, decision)) return -1;
    sched::ApplyResult applied = sched::apply_decision(nodes_[parent].program, decision);
    if (!applied.ok()) return -1;
    const int child = add_child(parent, decision, phase, false, applied.program, existing);
    if (child < 0 && duplicate) *duplicate = true;
    return absorb_pins(child);
  }

  void drop(int id, std::string reason) {
    if (dropped_[id]) return;
    dropped_[id] = true;
    nodes_[id].reason = std::move(reason);
  }

  // A persistent form the search added was estimated on the module compiled without it
  // (with_persistent_kernels): the chosen schedule is compiled as it is, so that its estimate is
  // the one `nautilus compile` and the studio see (the tile ring's exact shared memory and the
  // scheduler's ops). Should that compile fail, the schedule keeps one CTA per tile.
  void settle_derived_persistent(SearchResult* result) {
    const auto search_added = [&](const Decision& d) {
      return d.kind == "persistent" && std::find(options_.pins.begin(), options_.pins.end(), d) == options_.pins.end();
    };
    if (std::none_of(result->schedule.decisions.begin(), result->schedule.decisions.end(), search_added)) return;
    Evaluation compiled = compile_and_estimate(result->schedule, /*retry=*/false);
    if (!compiled.ok) {
      sched::Schedule without;
      for (const Decision& d : result->schedule.decisions) {
        if (!search_added(d)) without.decisions.push_back(d);
      }
      compiled = compile_and_estimate(without, /*retry=*/false);
      if (!compiled.ok) return;
      result->schedule = without;
    }
    result->estimate = compiled.estimate;
    nodes_[static_cast<size_t>(chosen_)].estimate = compiled.estimate;
  }

  // ---- evaluation ------------------------------------------------------------------------

  // `optional_warp_specs` are warp_spec decisions a completion added (not the node's own): when
  // the lowering refuses one kernel's warp-specialized form, the completion is compiled again
  // without that kernel's, so that one kernel of a chain that cannot take it (a dot reading a
  // rounded f32 operand) does not hide the form from the kernels that can.
  Evaluation compile_and_estimate(const sched::Schedule& schedule, bool retry = true,
                                  const std::vector<Decision>& optional_warp_specs = {}) const {
    Evaluation evaluation;
    driver::CompileOptions compile_options;
    compile_options.sizes = input_.sizes;
    compile_options.last_stage = driver::Stage::MATile;
    compile_options.schedule = schedule;
    compile_options.matile.arch = arch_;
    driver::Compilation compilation = driver::compile(input_.file, compile_options);
    if (!compilation.internal_error.empty()) {
      evaluation.internal = true;
      evaluation.reason = "internal compiler error: " + compilation.internal_error;
      return evaluation;
    }
    if (!compilation.schedule_error.empty()) {
      evaluation.reason = compilation.schedule_error;
      std::vector<Decision> refused = refused_warp_specs(compilation, optional_warp_specs);
      if (refused.empty()) return evaluation;
      sched::Schedule without;
      std::vector<Decision> still_optional;
      for (const Decision& d : schedule.decisions) {
        if (std::find(refused.begin(), refused.end(), d) == refused.end()) {
          without.decisions.push_back(d);
        }
      }
      for (const Decision& d : optional_warp_specs) {
        if (std::find(refused.begin(), refused.end(), d) == refused.end()) {
          still_optional.push_back(d);
        }
      }
      Evaluation fewer = compile_and_estimate(without, retry, still_optional);
      fewer.dropped.insert(fewer.dropped.begin(), refused.begin(), refused.end());
      return fewer;
    }
    if (!compilation.ok() || !compilation.ma_module) {
      evaluation.reason = "the spec does not compile";
      return evaluation;
    }
    evaluation.estimate = model_.estimate(*compilation.ma_module);
    if (!evaluation.estimate.feasible) {
      evaluation.reason = "infeasible: " + evaluation.estimate.infeasible_reason;
      if (retry) return fit_shared_memory(schedule, compilation, evaluation);
      return evaluation;
    }
    evaluation.ok = true;
    evaluation.module = compilation.ma_module;
    for (const matile::KernelPtr& kernel : compilation.ma_module->kernels) {
      if (std::optional<std::string> problem = codegen::register_tile_past_the_register_file(*kernel)) {
        evaluation.unbuildable = *problem;
        break;
      }
    }
    return evaluation;
  }

  // The decisions of `optional_warp_specs` that name a block of the kernel whose
  // warp-specialized lowering failed (the placement's error reads "kernel NAME: warp_spec: ...").
  static std::vector<Decision> refused_warp_specs(const driver::Compilation& compilation,
                                                  const std::vector<Decision>& optional_warp_specs) {
    std::vector<Decision> out;
    if (optional_warp_specs.empty() || !compilation.vr_module) return out;
    const std::string& error = compilation.schedule_error;
    const auto& kernels = compilation.vr_module->kernels;
    for (size_t k = 0; k < kernels.size() && k < compilation.kernel_blocks.size(); ++k) {
      if (error.find("kernel " + kernels[k]->name + ": warp_spec: ") == std::string::npos) continue;
      const std::vector<std::string>& blocks = compilation.kernel_blocks[k];
      for (const Decision& d : optional_warp_specs) {
        if (std::find(blocks.begin(), blocks.end(), d.target) != blocks.end()) out.push_back(d);
      }
    }
    return out;
  }

  // A completion whose kernel without a launch decision needs more shared memory than a CTA
  // may have is tried once more with that kernel's operands single-buffered (stages=1):
  // a FlashDecoding partial over 256-key tiles of a 128-wide head holds 128 KB of keys and
  // values per stage. The search still tries every launch in its launch phase; this only keeps
  // the structure (the fusion, the tile) from being judged by a launch it never chose.
  Evaluation fit_shared_memory(const sched::Schedule& schedule,
                               const driver::Compilation& compilation,
                               const Evaluation& failed) const {
    const int limit = model_.device().shared_bytes_per_cta_max;
    const std::vector<sched::LaunchChoice> choices = sched::launch_choices(schedule);
    std::vector<Decision> added;
    for (size_t k = 0; k < failed.estimate.kernels.size() && k < compilation.kernel_blocks.size();
         ++k) {
      const std::vector<std::string>& blocks = compilation.kernel_blocks[k];
      if (blocks.empty() || failed.estimate.kernels[k].shared_bytes_per_cta <= limit) continue;
      const bool chosen = std::any_of(choices.begin(), choices.end(), [&](const auto& choice) {
        return std::find(blocks.begin(), blocks.end(), choice.block) != blocks.end();
      });
      if (chosen) continue;
      added.push_back(sched::Decision{"launch", blocks.front(),
                                      {{"warps", int64_t{4}}, {"stages", int64_t{1}}}});
    }
    if (added.empty()) return failed;
    sched::Schedule single_buffered = schedule;
    for (const Decision& d : added) single_buffered.decisions.push_back(d);
    Evaluation retried = compile_and_estimate(single_buffered, /*retry=*/false);
    if (!retried.ok) return failed;
    retried.added = std::move(added);
    return retried;
  }

  // Estimates every node of `ids` that has none yet: completes it, compiles each distinct
  // completed program once (on `threads` threads) and records the estimate or the reason.
  void evaluate(const std::vector<int>& ids) {
    // A node's completions: the default and its other raster orders, on sm_90a each of them
    // also with its dot kernels warp-specialized; the best one counts.
    struct Variant {
      std::string key;
      std::vector<Decision> decisions;
      bool compiled = false;  // compiled itself, not estimated as another variant's raster order
    };
    struct Pending {
      int node;
      std::vector<Variant> variants;
    };
    std::vector<Pending> pending;
    std::vector<std::string> to_compile;
    std::unordered_map<std::string, sched::Schedule> schedules;
    std::unordered_map<std::string, std::vector<Decision>> optional_warp_specs;
    // Another raster order or tile order of a compiled variant, or its persistent form:
    // estimated on its module.
    struct Derived {
      std::string key;
      bool persistent = false;
      std::optional<Decision> bind;  // the other raster order, if any
      std::vector<int> groups;       // the tile order's group per kernel (empty: none)
    };
    // compiled key -> the variants derived from it
    std::unordered_map<std::string, std::vector<Derived>> rasters;
    for (int id : ids) {
      SearchNode& node = nodes_[id];
      if (node.estimate || dropped_[id] || evaluated_.count(id)) continue;
      std::vector<Decision> remaining(options_.pins.begin() + static_cast<long>(node.pins_applied),
                                      options_.pins.end());
      Pending entry{id, {}};
      std::vector<Completion> completions =
          complete_program_rasters(node.program, options_.forbids, remaining);
      // Every raster order also warp-specialized: which operand tiles a wave of CTAs shares
      // in L2 decides whether a wgmma kernel is bound by L2 or by DRAM, while the mma.sync form
      // of the same kernel is often latency-bound in either order. Judging the raster orders
      // only in the mma.sync form leaves a warp-specialized GEMM in the order it does not suit
      // (a GEMM chain's up projection: f_o fastest rereads all of W from DRAM per row of tiles).
      if (arch_ == "sm_90a" && !completions.empty()) {
        const size_t orders = completions.size();
        for (size_t order = 0; order < orders; ++order) {
          for (Completion& variant :
               warp_specialized_completions(completions[order], node.schedule, options_.forbids)) {
            completions.push_back(std::move(variant));
          }
        }
      }
      // A tiled product of an 8-bit input whose nest has no launch yet is also estimated with a
      // 3-stage ring on each warp count the launch phase would offer it
      // (launch_lookahead_completions): it runs on mma.sync with cp.async rings, where no
      // warp-specialized completion offers a deeper ring, and at the default launch a wide
      // decode tile loses to a narrow one that it beats once pipelined (70B-class int8 decode,
      // M 16: 128 columns 94.7 µs against 32 columns 88.5 at 2 stages, 58.5 against 76.9 at 3;
      // measured 62.2 against 87.7 on the H200).
      {
        const size_t variants = completions.size();
        for (size_t i = 0; i < variants; ++i) {
          for (Completion& ringed :
               launch_lookahead_completions(completions[i], node.schedule, options_.forbids)) {
            completions.push_back(std::move(ringed));
          }
        }
      }
      // A 192-row tile is estimated only in its warp-specialized form (three consumers).
      completions.erase(std::remove_if(completions.begin(), completions.end(),
                                       [&](const Completion& completion) {
                                         return has_192_row_tile_without_warp_spec(completion,
                                                                                   node.schedule);
                                       }),
                        completions.end());
      if (completions.empty()) {
        evaluated_.insert(id);
        drop(id, "the tiles cannot be placed: a 192-row tile takes three consumer warpgroups of "
                 "wgmma (sm_90a), and its warp-specialized form does not apply here");
        continue;
      }
      // Every variant also in the grouped tile orders (2-D grids of tiles only): which operand
      // tiles a wave shares in L2 depends on it as on the raster order, and like a raster order
      // it is estimated on the compiled module, so it adds no compile.
      {
        const size_t variants = completions.size();
        for (size_t i = 0; i < variants; ++i) {
          for (Completion& grouped : with_tile_orders(completions[i], kTileOrderGroups,
                                                      std::size(kTileOrderGroups),
                                                      options_.forbids)) {
            completions.push_back(std::move(grouped));
          }
        }
      }
      // Every warp-specialized variant also as persistent CTAs with the dynamic tile scheduler:
      // estimated on the compiled module too (with_persistent_kernels), so it adds no compile.
      if (options_.offer_persistent) {
        const size_t variants = completions.size();
        for (size_t i = 0; i < variants; ++i) {
          if (std::optional<Completion> persistent =
                  with_persistent_ctas(completions[i], node.schedule, options_.forbids)) {
            completions.push_back(std::move(*persistent));
          }
        }
      }
      for (Completion& completion : completions) {
        const sched::Schedule full = concat(node.schedule, completion.decisions);
        std::string key;
        // Another raster order or tile order of a compiled variant (the default completion, or
        // its warp-specialized form) is estimated on that variant's compiled module with its
        // grid reordered or grouped, not compiled again.
        int group = 1;
        bool persistent = false;
        const std::vector<Decision> ungrouped =
            without_tile_order(completion.decisions, completion.pinned, &group, &persistent);
        std::optional<Decision> raster;
        bool derived = false;
        std::string base;
        for (const Variant& compiled : entry.variants) {
          if (!compiled.compiled) continue;
          raster = only_bind_difference(compiled.decisions, ungrouped);
          derived = raster || ((group > 1 || persistent) && compiled.decisions == ungrouped);
          if (derived) {
            base = compiled.key;
            break;
          }
        }
        if (!derived) key = scalar::print_program(*completion.program);
        if (derived) {
          key = base + (raster ? "\n#raster " + sched::print_decision(*raster) : "") +
                (group > 1 ? "\n#group " + std::to_string(group) : "") + (persistent ? "\n#persistent" : "");
          if (!cache_.count(key)) {
            rasters[base].push_back(
                {key, persistent, raster, group > 1 ? nest_tile_groups(*completion.program) : std::vector<int>{}});
          }
        } else if (!cache_.count(key) && !schedules.count(key)) {
          schedules.emplace(key, full);
          std::vector<Decision>& optional = optional_warp_specs[key];
          for (size_t i = 0; i < completion.decisions.size(); ++i) {
            const bool pinned = i < completion.pinned.size() && completion.pinned[i];
            if (completion.decisions[i].kind == "warp_spec" && !pinned) {
              optional.push_back(completion.decisions[i]);
            }
          }
          to_compile.push_back(key);
        }
        entry.variants.push_back({std::move(key), completion.decisions, !derived});
      }
      node.completion.decisions = entry.variants.front().decisions;
      pending.push_back(std::move(entry));
    }
    if (!to_compile.empty()) {
      std::vector<std::optional<Evaluation>> results(to_compile.size());
      parallel_for_each(static_cast<int64_t>(to_compile.size()), options_.threads, [&](int64_t i) {
        if (stop_.stop_requested()) return;
        const std::string& key = to_compile[static_cast<size_t>(i)];
        results[static_cast<size_t>(i)] =
            compile_and_estimate(schedules.at(key), true, optional_warp_specs.at(key));
      });
      for (size_t i = 0; i < to_compile.size(); ++i) {
        if (!results[i]) continue;  // cancelled before it ran
        Evaluation& evaluation = *results[i];
        auto others = rasters.find(to_compile[i]);
        if (others != rasters.end()) {
          for (const Derived& derived : others->second) {
            Evaluation other;
            other.reason = derived.bind ? "the raster order " + sched::print_decision(*derived.bind) +
                                              " has no kernel"
                                        : "the tile order changes no kernel: every grid of two "
                                          "or more axes runs in one wave";
            matile::ModulePtr module;
            if (evaluation.ok) {
              module = derived.bind ? with_raster(*evaluation.module, *derived.bind)
                                    : evaluation.module;
              if (module && !derived.groups.empty()) {
                module = groups_can_matter(*module, model_.device().sm_count)
                             ? with_tile_groups(*module, derived.groups)
                             : nullptr;
              }
              if (module && derived.persistent) {
                module = with_persistent_kernels(*module);
                if (!module) other.reason = "persistent CTAs change no kernel: none is warp-specialized";
              }
            }
            if (!evaluation.ok) {
              other = evaluation;
            } else if (module) {
              other.estimate = model_.estimate(*module);
              other.ok = other.estimate.feasible;
              other.added = evaluation.added;
              other.dropped = evaluation.dropped;
              other.unbuildable = evaluation.unbuildable;
              if (!other.ok) other.reason = "infeasible: " + other.estimate.infeasible_reason;
            }
            other.module = nullptr;
            cache_.emplace(derived.key, std::move(other));
          }
        }
        evaluation.module = nullptr;
        cache_.emplace(to_compile[i], std::move(evaluation));
        ++stats_.compiles;
      }
    }
    for (const Pending& p : pending) {
      const Evaluation* chosen = nullptr;
      for (const Variant& variant : p.variants) {
        auto it = cache_.find(variant.key);
        if (it == cache_.end()) continue;  // cancelled
        const Evaluation& evaluation = it->second;
        const bool better_variant =
            !chosen || (evaluation.ok && (!chosen->ok || evaluation.estimate.microseconds <
                                                             chosen->estimate.microseconds));
        if (better_variant) {
          chosen = &evaluation;
          nodes_[p.node].completion.decisions.clear();
          for (const Decision& d : variant.decisions) {
            if (std::find(evaluation.dropped.begin(), evaluation.dropped.end(), d) ==
                evaluation.dropped.end()) {
              nodes_[p.node].completion.decisions.push_back(d);
            }
          }
          for (const Decision& d : evaluation.added) {
            nodes_[p.node].completion.decisions.push_back(d);
          }
        }
      }
      if (!chosen) continue;  // cancelled
      evaluated_.insert(p.node);
      if (!chosen->added.empty()) single_buffered_.insert(p.node);
      const Evaluation& evaluation = *chosen;
      if (evaluation.ok) {
        nodes_[p.node].estimate = evaluation.estimate;
        if (!evaluation.unbuildable.empty()) unbuildable_[p.node] = evaluation.unbuildable;
        note_best(p.node);
      } else {
        if (evaluation.internal) failed_[p.node] = true;
        drop(p.node, evaluation.reason);
      }
    }
    report_progress();
  }

  double score(int id) const {
    const SearchNode& node = nodes_[id];
    return node.estimate ? node.estimate->microseconds : std::numeric_limits<double>::infinity();
  }
  uint64_t tiebreak(int id) const {
    return SplitMix64(stable_hash(node_key(nodes_[id])) ^ SplitMix64(options_.seed).next()).next();
  }
  bool better(int a, int b) const {
    const double sa = score(a), sb = score(b);
    if (sa != sb) return sa < sb;
    const uint64_t ta = tiebreak(a), tb = tiebreak(b);
    if (ta != tb) return ta < tb;
    return a < b;
  }

  // The number of loop nests (kernels) of a node's program.
  size_t nest_count(int id) const {
    const scalar::Stmt& body = nodes_[id].program->body;
    const scalar::Seq* seq = body->as<scalar::Seq>();
    return seq ? seq->stmts.size() : 1;
  }

  // Fusing looks better than stopping under the default completion, but tiling can turn that
  // round (softmax: the two-kernel form tiles to a better estimate than the fused one). So when
  // the `keep` best entries all have the same number of nests and a candidate with another
  // number exists, the best such candidate takes the last place: the beam keeps one alternative
  // structure alive until tiling has had its say.
  // The entries of the next round from the sorted `candidates`: the `beam` best of the main
  // beam's children, and a second beam of the same width, the tie beam. Estimates within
  // kBeamTie of each other do not rank: early in the search one unfused intermediate can
  // dominate every estimate (28 s of a 28.6 s estimate for a sliding-window attention before S
  // is fused), so siblings that differ in a tile size differ by microseconds of noise, and a cut
  // there would decide the final kernel's tile size by that noise (a leaf the model ranks 40%
  // better was lost when an unrelated term moved by 0.01%). The candidates just past the main
  // cut and tied with it go to the tie beam, which keeps its best among them and its own
  // children. The two beams do not compete: the main beam's path is the one a search without
  // the tie beam takes (unless the tie beam reached one of its programs first), so the tie beam
  // adds leaves and does not lose the ones the main beam finds. The tie beam is twice the main
  // beam's width: with eight rolling steps tied in the first round, a tie beam of three still
  // decided by noise which query tiles reached the leaves (the sliding-window attention lost its
  // 128-row leaf, estimated 327 µs and measured 342 µs on the H200, to 192-row ones, 411 and 401).
  std::vector<Entry> select_beam(std::vector<Entry> candidates) {
    constexpr double kBeamTie = 1e-4;
    constexpr size_t kTieBeamWidthFactor = 2;
    const size_t width = static_cast<size_t>(std::max(1, options_.beam));
    std::vector<Entry> main, tied;
    for (const Entry& e : candidates) (e.tied ? tied : main).push_back(e);
    const size_t keep = std::min(main.size(), width);
    keep_one_other_structure(main, keep);
    if (keep > 0) {
      const double cut = score(main[keep - 1].node);
      for (size_t i = keep; i < main.size() && std::isfinite(cut); ++i) {
        if (score(main[i].node) > cut * (1.0 + kBeamTie)) continue;
        main[i].tied = true;
        tied.push_back(main[i]);
      }
    }
    std::stable_sort(tied.begin(), tied.end(), [&](const Entry& a, const Entry& b) {
      if (a.node == b.node) return a.phase < b.phase;
      return better(a.node, b.node);
    });
    const size_t keep_tied = std::min(tied.size(), kTieBeamWidthFactor * width);
    std::vector<Entry> next(main.begin(), main.begin() + static_cast<long>(keep));
    next.insert(next.end(), tied.begin(), tied.begin() + static_cast<long>(keep_tied));
    const auto drop_below = [&](const std::vector<Entry>& list, size_t kept_count,
                                const char* which) {
      if (kept_count == 0) return;
      const double worst_kept = score(list[kept_count - 1].node);
      for (size_t i = kept_count; i < list.size(); ++i) {
        const int id = list[i].node;
        const bool kept = std::any_of(next.begin(), next.end(),
                                      [&](const Entry& e) { return e.node == id; });
        if (kept || complete_[id]) continue;
        drop(id, std::string("below the ") + which + ": estimate " + format_us(score(id)) +
                     ", the " + which + " kept " + std::to_string(kept_count) + " at or under " +
                     format_us(worst_kept));
      }
    };
    drop_below(main, keep, "beam");
    drop_below(tied, keep_tied, "tie beam");
    return next;
  }

  void keep_one_other_structure(std::vector<Entry>& candidates, size_t keep) const {
    if (keep < 2 || candidates.size() <= keep) return;
    const size_t nests = nest_count(candidates.front().node);
    for (size_t i = 1; i < keep; ++i) {
      if (nest_count(candidates[i].node) != nests) return;
    }
    for (size_t i = keep; i < candidates.size(); ++i) {
      if (nest_count(candidates[i].node) == nests) continue;
      std::rotate(candidates.begin() + static_cast<long>(keep) - 1,
                  candidates.begin() + static_cast<long>(i),
                  candidates.begin() + static_cast<long>(i) + 1);
      return;
    }
  }

  void note_best(int id) {
    if (best_ < 0 || better(id, best_)) best_ = id;
  }

  void report_progress() {
    if (!observer_) return;
    SearchProgress progress;
    progress.seconds = elapsed();
    progress.nodes = static_cast<int>(nodes_.size());
    progress.compiles = stats_.compiles;
    progress.rounds = stats_.rounds;
    progress.phase = current_phase_;
    if (best_ >= 0) {
      progress.best_us = score(best_);
      const sched::Schedule full = concat(nodes_[best_].schedule, nodes_[best_].completion.decisions);
      for (const Decision& d : full.decisions) progress.best_schedule += sched::print_decision(d) + "\n";
    }
    observer_->on_progress(progress);
    if (observer_->wants_tree()) {
      std::vector<SearchNode> tree = nodes_;
      for (SearchNode& node : tree) {
        node.status = status_now(node.id);
        if (node.status != NodeStatus::Pruned && node.status != NodeStatus::Failed) {
          node.reason.clear();
        }
      }
      observer_->on_tree(tree);
    }
  }

  // A node's status while the search runs; finish() settles the open ones.
  NodeStatus status_now(int id) const {
    const SearchNode& node = nodes_[id];
    if (failed_[id]) return NodeStatus::Failed;
    if (complete_[id] && node.estimate) return NodeStatus::Leaf;
    if (!node.children.empty()) return NodeStatus::Expanded;
    if (dropped_[id]) return NodeStatus::Pruned;
    return NodeStatus::Open;
  }

  double elapsed() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }

  // ---- expansion -------------------------------------------------------------------------

  Phase after_fusion(int id) const {
    const ProgramFacts facts = analyze_program(*nodes_[id].program);
    return next_tile_plan(facts, {}) ? Phase::Tiling : Phase::Binding;
  }

  // Children by each candidate, continuing in `phase`; the node itself goes on to `next`. A
  // candidate whose child is worse than the node (or does not compile) becomes tabu below it.
  // Returns the children that improved on the node.
  std::vector<int> expand_multi_step(const Entry& entry, const std::vector<Decision>& candidates,
                                     Phase next, std::vector<Entry>& out) {
    std::vector<std::pair<std::string, int>> children;
    std::vector<int> improved;
    if (steps_in_phase(entry.node, entry.phase) >= kMaxStepsPerPhase) {
      out.push_back({entry.node, next});
      return improved;
    }
    for (const Decision& decision : candidates) {
      if (stop_.stop_requested()) return improved;
      const std::string text = sched::print_decision(decision);
      if (tabu_[entry.node]->count(text)) continue;
      const int child = try_child(entry.node, decision, entry.phase);
      if (child >= 0) {
        out.push_back({child, entry.phase});
        children.emplace_back(text, child);
      }
    }
    std::vector<int> ids;
    for (const auto& [text, id] : children) ids.push_back(id);
    evaluate(ids);
    auto tabu = std::make_shared<std::set<std::string>>(*tabu_[entry.node]);
    for (const auto& [text, id] : children) {
      if (!nodes_[id].estimate || better(entry.node, id)) {
        tabu->insert(text);
      } else {
        improved.push_back(id);
      }
    }
    if (tabu->size() != tabu_[entry.node]->size()) {
      std::shared_ptr<const std::set<std::string>> shared = tabu;
      tabu_[entry.node] = shared;
      for (const auto& [text, id] : children) propagate_tabu(id, shared);
    }
    out.push_back({entry.node, next});
    return improved;
  }

  // A producer fused into a rolling loop (a decode step's scores computed per key tile) adds
  // its operands to every step's working set: the step the reduction-fusion phase chose before
  // the fusion may now leave shared memory for one stage only, where a smaller step keeps the
  // copies pipelined. So each fusion child, improving or not, that fits only single-buffered
  // has its decisions since the path's rolling_update replayed on that decision's siblings with
  // smaller steps (the tree holds them: the reduction-fusion phase tried them); the replays
  // compete in the beam like any child. Each (rolling_update, replayed decisions) pair is tried
  // once.
  //
  // A launch that gives each warp its own 16 rows (launch_candidates: a decode step's heads)
  // is replayed the same way, whatever its buffering: with fewer warps per CTA a key tile's
  // chain is longer, and the step chosen for four warps sharing the rows is often too large
  // (mqa_decode on the H200: 128-key tiles ran 40.8 µs with 2 warps, 64-key tiles 36.1 µs).
  // Replays of fusion children continue from the fusion phase; replays of a launch, the last
  // decision of a path, are complete. A launch's replay meets programs the smaller step's own
  // path already reached (its split, its fusions): it goes on from those nodes.
  void replay_on_smaller_steps(const std::vector<int>& fused, std::vector<Entry>& out,
                               bool launch = false) {
    std::vector<int> last_ids;
    for (int child : fused) {
      if (!nodes_[child].estimate) continue;  // did not compile, infeasible or a duplicate
      // Only where the step no longer leaves room for pipelined copies: elsewhere the step the
      // reduction-fusion phase chose stands, and replays would only crowd the beam.
      if (!launch && !single_buffered_.count(child)) continue;
      std::vector<Decision> replay;
      int rolling = child;
      while (rolling > 0 && nodes_[rolling].decision &&
             nodes_[rolling].decision->kind != "rolling_update") {
        // Pins are not replayed: the siblings absorbed them already, as every node does.
        if (!nodes_[rolling].pinned) replay.insert(replay.begin(), *nodes_[rolling].decision);
        rolling = nodes_[rolling].parent;
      }
      if (rolling <= 0 || !nodes_[rolling].decision || nodes_[rolling].pinned) continue;
      const Decision& chosen = *nodes_[rolling].decision;
      const sched::DecisionArg* step = chosen.find("tile");
      if (!step || !step->is_int()) continue;
      if (!replayed_.insert(std::to_string(rolling) + ":" + sched::print_decisions(replay, ";")).second) {
        continue;
      }
      for (int sibling : nodes_[nodes_[rolling].parent].children) {
        if (!nodes_[sibling].decision) continue;
        const Decision& other = *nodes_[sibling].decision;
        const sched::DecisionArg* other_step = other.find("tile");
        const auto same_positional = [&] {
          const auto a = other.positional(), b = chosen.positional();
          return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                            [](const auto* x, const auto* y) { return *x == *y; });
        };
        if (sibling == rolling || other.kind != chosen.kind || other.target != chosen.target ||
            !same_positional() || !other_step || !other_step->is_int() ||
            other_step->as_int() >= step->as_int() || !nodes_[sibling].program) {
          continue;
        }
        int at = sibling;
        while (nodes_[at].children.size() == 1 && nodes_[nodes_[at].children.front()].pinned) {
          at = nodes_[at].children.front();
        }
        for (const Decision& decision : replay) {
          if (stop_.stop_requested()) return;
          int existing = -1;
          const int next = try_child(at, decision, Phase::Fusion, nullptr, &existing);
          at = next < 0 && launch ? existing : next;
          if (at < 0) break;
        }
        if (at >= 0) last_ids.push_back(at);
      }
    }
    evaluate(last_ids);
    for (int id : last_ids) out.push_back({id, launch ? Phase::Done : Phase::Fusion});
  }

  // A consumer moved into a loop of its producer's nest (`reverse_compute_at(Lse, Lse_sum, r)`)
  // takes its own consumers along into the same loop, one after the other
  // (`reverse_compute_at(Y, Lse, r)`): a row's statistics, then its output, in one CTA. The
  // steps between often estimate no better than their parent (the statistics' nest grows
  // while the output still reads them back from memory), so the beam would drop the chain
  // before its end; its end competes in the beam like any child. Returns the chain's last
  // node (`at` itself when no candidate moves another consumer into `loop` of that nest).
  int follow_consumer_chain(int at, std::string moved, const std::string& loop,
                            std::vector<std::string>* all_moved = nullptr) {
    if (all_moved) all_moved->push_back(moved);
    for (int step = 0; step < kMaxStepsPerPhase && !stop_.stop_requested(); ++step) {
      const ProgramFacts facts = analyze_program(*nodes_[at].program);
      const NestFacts* nest = facts.nest_of_block(moved);
      if (!nest) break;
      int next = -1;
      for (const Decision& candidate : fusion_candidates(facts, /*untiled_rows=*/true)) {
        if (candidate.kind != "reverse_compute_at") continue;
        const auto args = candidate.positional();
        if (args.size() < 2 || args[0]->is_int() || args[1]->is_int() ||
            args[1]->as_name() != loop || facts.nest_of_block(args[0]->as_name()) != nest) {
          continue;
        }
        next = try_child(at, candidate, Phase::Fusion);
        if (next >= 0) {
          moved = candidate.target;
          if (all_moved) all_moved->push_back(moved);
          break;
        }
      }
      if (next < 0) break;
      at = next;
    }
    return at;
  }

  // The last node of the chain of pinned children below `id` (absorb_pins applies the pending
  // pins right after a decision): new children go there, so a pinned node stays its parent's
  // only child.
  int past_pins(int id) const {
    while (nodes_[id].children.size() == 1 && nodes_[nodes_[id].children.front()].pinned) {
      id = nodes_[id].children.front();
    }
    return id;
  }

  // Whether one of the `moved` consumers reads a row that a reduction of its new nest reads
  // too: with `stepped`, an input of the nest (log-softmax's output reading X after the
  // statistics did), and only where the default completion steps the consumer over the row
  // (a row the reduction takes in one step, 8 experts in a step of 8, is no second pass);
  // without, also a row the nest itself writes (a residual sum written, then reduced and
  // normalized from the registers that hold it). Only such chains become entries: elsewhere
  // (a decode step's normalization after its rolled accumulator) the plain fusion candidates
  // cover them, and extra entries would crowd the beam.
  bool rereads_a_row(int id, const std::vector<std::string>& moved, bool stepped) const {
    const scalar::Program& program = *nodes_[id].program;
    const ProgramFacts facts = analyze_program(program);
    std::set<std::string> stepped_blocks;
    for (const Decision& tile : row_step_tiles(facts)) stepped_blocks.insert(tile.target);
    for (const std::string& name : moved) {
      const NestFacts* nest = facts.nest_of_block(name);
      if (!nest) continue;
      const BlockFacts* consumer = nullptr;
      for (const BlockFacts& block : nest->blocks) {
        if (block.block->name == name) consumer = &block;
      }
      if (!consumer) continue;
      // The row's output itself (not an intermediate such as attention's probabilities, whose
      // consumers are sums that a rolled loop already takes tile by tile).
      const bool writes_output =
          std::any_of(consumer->writes.begin(), consumer->writes.end(), [&](const std::string& w) {
            const scalar::Buffer* buffer = program.find_buffer(w);
            return buffer && (*buffer)->role == scalar::BufferRole::Output;
          });
      if (!writes_output || (stepped && !stepped_blocks.count(name))) continue;
      for (const BlockFacts& block : nest->blocks) {
        if (!block.reduction || &block == consumer) continue;
        for (const std::string& tensor : consumer->reads) {
          const bool written_here = std::any_of(
              nest->blocks.begin(), nest->blocks.end(), [&](const BlockFacts& other) {
                return std::find(other.writes.begin(), other.writes.end(), tensor) !=
                       other.writes.end();
              });
          if ((!written_here || !stepped) &&
              std::find(block.reads.begin(), block.reads.end(), tensor) !=
                                   block.reads.end()) {
            return true;
          }
        }
      }
    }
    return false;
  }

  // The end of the consumer chain that `candidate` (the reverse_compute_at of a consumer into a
  // row loop) starts below `at`, when that end keeps a row on chip (rereads_a_row); else -1.
  int row_kernel_end(int at, const Decision& candidate, bool stepped) {
    const int child = try_child(at, candidate, Phase::Fusion);
    if (child < 0) return -1;
    std::vector<std::string> moved;
    const int end = follow_consumer_chain(child, candidate.target,
                                          candidate.positional()[1]->as_name(), &moved);
    return rereads_a_row(end, moved, stepped) ? end : -1;
  }

  // Chain ends, estimated, as entries of the fusion phase.
  void add_fusion_ends(const std::vector<int>& ends, std::vector<Entry>& out) {
    evaluate(ends);
    for (int id : ends) out.push_back({id, Phase::Fusion});
  }

  // The chains above for each new reverse_compute_at child of `parent` (its children from
  // `first` on).
  void follow_consumer_chains(int parent, size_t first, std::vector<Entry>& out) {
    std::vector<int> ends;
    const std::vector<int> children(nodes_[parent].children.begin() + static_cast<long>(first),
                                    nodes_[parent].children.end());
    for (int child : children) {
      if (!nodes_[child].decision || nodes_[child].decision->kind != "reverse_compute_at") continue;
      const auto positional = nodes_[child].decision->positional();
      if (positional.size() < 2 || positional[1]->is_int()) continue;
      std::vector<std::string> moved;
      const int start = past_pins(child);
      const int end = follow_consumer_chain(start, nodes_[child].decision->target,
                                            positional[1]->as_name(), &moved);
      if (end != start && rereads_a_row(end, moved, /*stepped=*/false)) ends.push_back(end);
    }
    add_fusion_ends(ends, out);
  }

  // A rolled reduction (`rolling_update(Lse_sum, c, tile=2048)`: a row's statistics in one
  // pass) is judged by the default completion with its consumers in kernels of their own,
  // which read the statistics and the row back from memory. So beside it the search tries the
  // row kernel at once: the consumers moved into the rolled nest's row loop, in a chain as
  // above, each such end a Fusion entry. Rolling children of `parent` from `first` on.
  void fuse_rows_of_rolled(int parent, size_t first, std::vector<Entry>& out) {
    std::vector<int> ends;
    const std::vector<int> children(nodes_[parent].children.begin() + static_cast<long>(first),
                                    nodes_[parent].children.end());
    for (int rolled : children) {
      if (!nodes_[rolled].decision || nodes_[rolled].decision->kind != "rolling_update") continue;
      const int at = past_pins(rolled);
      const ProgramFacts facts = analyze_program(*nodes_[at].program);
      const NestFacts* nest = facts.nest_of_block(nodes_[rolled].decision->target);
      if (!nest) continue;
      for (const Decision& candidate : fusion_candidates(facts, /*untiled_rows=*/true)) {
        if (stop_.stop_requested()) return;
        if (candidate.kind != "reverse_compute_at") continue;
        const auto args = candidate.positional();
        if (args.size() < 2 || args[0]->is_int() || args[1]->is_int() ||
            facts.nest_of_block(args[0]->as_name()) != nest) {
          continue;
        }
        const int end = row_kernel_end(at, candidate, /*stepped=*/true);
        if (end >= 0) ends.push_back(end);
      }
    }
    add_fusion_ends(ends, out);
  }

  // A reduction over the rows of an element-wise nest (the sum of squares of a residual sum
  // that is also an output) is judged with the rows written and read back; fused into the
  // element-wise nest's row loop with its consumers (`reverse_compute_at(R_sum, Hs, t)`, then
  // the norm and the normalized output), the row stays in registers. The reduction-fusion
  // phase's splits win the beam before the fusion phase would try it, so each node of that
  // phase also builds the row kernel at once; its chain's end competes in the beam.
  void fuse_rows_of_elementwise(int parent, std::vector<Entry>& out) {
    parent = past_pins(parent);
    const ProgramFacts facts = analyze_program(*nodes_[parent].program);
    std::vector<int> ends;
    const scalar::Program& program = *nodes_[parent].program;
    for (const Decision& candidate : fusion_candidates(facts, /*untiled_rows=*/true)) {
      if (stop_.stop_requested()) return;
      if (candidate.kind != "reverse_compute_at") continue;
      const auto args = candidate.positional();
      if (args.size() < 2 || args[0]->is_int() || args[1]->is_int()) continue;
      // The element-wise rows must be an output (written to memory anyway: a residual sum);
      // an intermediate (attention's scores) is inlined or computed per tile instead.
      const scalar::Buffer* written = nullptr;
      for (const NestFacts& nest : facts.nests) {
        for (const BlockFacts& block : nest.blocks) {
          if (block.block->name == args[0]->as_name() && !block.writes.empty()) {
            written = program.find_buffer(block.writes.front());
          }
        }
      }
      if (!written || (*written)->role != scalar::BufferRole::Output) continue;
      const NestFacts* from = facts.nest_of_block(args[0]->as_name());
      if (!from || from->has_reduction || from->tiled || from->bound || from->chain.size() < 2 ||
          from->chain[from->chain.size() - 2].name != args[1]->as_name()) {
        continue;
      }
      const int end = row_kernel_end(parent, candidate, /*stepped=*/false);
      if (end >= 0) ends.push_back(end);
    }
    add_fusion_ends(ends, out);
  }

  // Decisions of `phase` on the path to `id` since the path last entered it. Each multi-step
  // phase is bounded, so a decision that keeps applying to its own output (a split of a split)
  // cannot make the tree infinite.
  static constexpr int kMaxStepsPerPhase = 8;
  int steps_in_phase(int id, Phase phase) const {
    int steps = 0;
    while (id > 0 && nodes_[id].phase == phase) {
      if (!macro_steps_.count(id)) ++steps;  // a macro counts once, at its last node
      id = nodes_[id].parent;
    }
    return steps;
  }

  // A fusion that takes several decisions before it pays (shared_operand_reduction_fusions):
  // the intermediate nodes enter the tree as the path's steps, and only the last one is
  // estimated and competes in the beam.
  void expand_macros(const Entry& entry, const std::vector<std::vector<Decision>>& macros,
                     std::vector<Entry>& out) {
    std::vector<int> finals;
    for (const std::vector<Decision>& macro : macros) {
      if (stop_.stop_requested()) break;
      int at = entry.node;
      std::vector<int> steps;
      for (const Decision& decision : macro) {
        const int child = try_child(at, decision, entry.phase);
        if (child < 0) {
          at = -1;
          break;
        }
        steps.push_back(child);
        at = child;
      }
      if (at < 0 || steps.empty()) continue;
      macro_steps_.insert(steps.begin(), steps.end() - 1);
      finals.push_back(at);
    }
    evaluate(finals);
    for (int id : finals) out.push_back({id, entry.phase});
  }

  // Gives `tabu` to `id` and the pinned chain below it (created before the tabu was known).
  void propagate_tabu(int id, const std::shared_ptr<const std::set<std::string>>& tabu) {
    while (true) {
      tabu_[id] = tabu;
      const SearchNode& node = nodes_[id];
      if (node.children.size() != 1 || !nodes_[node.children.front()].pinned) return;
      id = node.children.front();
    }
  }

  // Reductions with fewer outputs than this leave the GPU idle unless split (two waves of
  // 128 x 128 tiles).
  int64_t split_k_below() const {
    return int64_t{2} * std::max(1, model_.device().sm_count) * 128 * 128;
  }

  // Stage 1: every candidate with its default step; stage 2: the other steps of the
  // rolling_update child with the best estimate.
  void expand_reduction_fusion(const Entry& entry, std::vector<Entry>& out) {
    if (steps_in_phase(entry.node, entry.phase) >= kMaxStepsPerPhase) {
      out.push_back({entry.node, Phase::Fusion});
      return;
    }
    const SearchNode& node = nodes_[entry.node];
    const ProgramFacts facts = analyze_program(*node.program);
    const ReductionFusionCandidates candidates =
        reduction_fusion_candidates(*node.program, facts, split_k_below());
    const size_t children_before = nodes_[entry.node].children.size();
    std::vector<int> first(candidates.first.size(), -1);
    for (size_t i = 0; i < candidates.first.size(); ++i) {
      if (stop_.stop_requested()) return;
      first[i] = try_child(entry.node, candidates.first[i], entry.phase);
      if (first[i] >= 0) out.push_back({first[i], entry.phase});
    }
    std::vector<int> ids;
    for (int id : first) {
      if (id >= 0) ids.push_back(id);
    }
    evaluate(ids);
    const std::vector<Decision>* best_steps = nullptr;
    int best = -1;
    for (const auto& [index, others] : candidates.step_variations) {
      const int id = first[index];
      if (id < 0 || !nodes_[id].estimate) continue;
      if (best < 0 || better(id, best)) {
        best = id;
        best_steps = &others;
      }
    }
    if (best_steps) {
      for (const Decision& decision : *best_steps) {
        if (stop_.stop_requested()) return;
        const int child = try_child(entry.node, decision, entry.phase);
        if (child >= 0) out.push_back({child, entry.phase});
      }
    }
    fuse_rows_of_rolled(entry.node, children_before, out);
    fuse_rows_of_elementwise(entry.node, out);
    out.push_back({entry.node, Phase::Fusion});
  }

  void expand_tiling(const Entry& entry, std::vector<Entry>& out) {
    const ProgramFacts facts = analyze_program(*nodes_[entry.node].program);
    std::optional<TilePlan> plan = next_tile_plan(facts, {});
    if (!plan) {
      out.push_back({entry.node, Phase::Binding});
      return;
    }
    const std::vector<int64_t> base = plan->defaults();
    const auto decision_of = [&](const std::vector<int64_t>& sizes) {
      std::optional<Decision> decision = plan->decision(sizes);
      return decision ? decision : plan->keep;
    };
    // Stage 1: the default and every single-axis change of it.
    struct Tried {
      std::vector<int64_t> sizes;
      int node;
    };
    std::vector<Tried> tried;
    const auto add = [&](const std::vector<int64_t>& sizes) {
      if (!plan->valid(sizes)) return;
      std::optional<Decision> decision = decision_of(sizes);
      if (!decision) return;
      const int child = try_child(entry.node, *decision, Phase::Tiling);
      if (child < 0) return;
      tried.push_back({sizes, child});
      out.push_back({child, Phase::Fusion});
    };
    add(base);
    for (size_t axis = 0; axis < plan->axes.size(); ++axis) {
      for (int64_t size : plan->axes[axis].sizes) {
        if (size == base[axis]) continue;
        std::vector<int64_t> sizes = base;
        sizes[axis] = size;
        add(sizes);
      }
    }
    if (tried.empty()) {
      // Nothing applies (forbidden or refused): leave the nest to the binding phase.
      out.push_back({entry.node, Phase::Binding});
      return;
    }
    // Stage 2: every combination of each axis's two best sizes (by the estimates of stage 1,
    // the default counting as a size of every axis). Axes interact -- a GEMM's 128x128x64 tile
    // beats 64x64x32 although no single-axis change of the default shows it, while the
    // combination of each axis's best alone (256x256x128) does not fit in shared memory.
    std::vector<int> ids;
    for (const Tried& t : tried) ids.push_back(t.node);
    evaluate(ids);
    std::vector<std::vector<int64_t>> kept(plan->axes.size());
    for (size_t axis = 0; axis < plan->axes.size(); ++axis) {
      std::vector<const Tried*> along;
      for (const Tried& t : tried) {
        bool only_this_axis = true;
        for (size_t other = 0; other < base.size(); ++other) {
          if (other != axis && t.sizes[other] != base[other]) only_this_axis = false;
        }
        if (only_this_axis && nodes_[t.node].estimate) along.push_back(&t);
      }
      std::sort(along.begin(), along.end(),
                [&](const Tried* a, const Tried* b) { return better(a->node, b->node); });
      for (size_t i = 0; i < along.size() && i < kTileSizesCombinedPerAxis; ++i) {
        kept[axis].push_back(along[i]->sizes[axis]);
      }
      if (kept[axis].empty()) kept[axis].push_back(base[axis]);
    }
    std::vector<int64_t> sizes(plan->axes.size());
    const std::function<void(size_t)> combine = [&](size_t axis) {
      if (axis == sizes.size()) {
        const bool seen = std::any_of(tried.begin(), tried.end(),
                                      [&](const Tried& t) { return t.sizes == sizes; });
        if (!seen) add(sizes);
        return;
      }
      for (int64_t size : kept[axis]) {
        sizes[axis] = size;
        combine(axis + 1);
      }
    };
    combine(0);
    // Stage 3: every single-axis change of the best tile so far, and every step of two axes at
    // once to their neighbouring sizes, repeated from the new best until it stays (a few rounds
    // at most). Stage 1 ranks each axis's sizes at the other axes' defaults, where a size can
    // lose that wins beside another axis's change: an int8 decode step's 128 columns lose to 32
    // at 32 steps of k (too little per stage to hide the copy's latency) and win at 128, so no
    // combination of stage 2 holds them; and from 64 x 64 neither 128 x 64 nor 64 x 128 is
    // better, but 128 x 128 is (M 16: 66.98 µs, 67.94, 67.48 against 64.0 after fusion).
    std::vector<int64_t> center = base;
    for (int round = 0; round < kTileRefinementRounds; ++round) {
      std::vector<int> ids_so_far;
      for (const Tried& t : tried) ids_so_far.push_back(t.node);
      evaluate(ids_so_far);
      const Tried* best = nullptr;
      for (const Tried& t : tried) {
        if (nodes_[t.node].estimate && (!best || better(t.node, best->node))) best = &t;
      }
      if (!best || best->sizes == center) return;
      center = best->sizes;
      const auto try_sizes = [&](const std::vector<int64_t>& around) {
        const bool seen = std::any_of(tried.begin(), tried.end(),
                                      [&](const Tried& t) { return t.sizes == around; });
        if (!seen) add(around);
      };
      for (size_t axis = 0; axis < plan->axes.size(); ++axis) {
        for (int64_t size : plan->axes[axis].sizes) {
          std::vector<int64_t> around = center;
          around[axis] = size;
          try_sizes(around);
        }
      }
      // The tiled sizes next to an axis's size at the center (none for an untiled axis).
      const auto neighbours = [&](size_t axis) {
        std::vector<int64_t> out;
        const std::vector<int64_t>& sizes = plan->axes[axis].sizes;
        const auto at = std::find(sizes.begin(), sizes.end(), center[axis]);
        if (center[axis] <= 0 || at == sizes.end()) return out;
        if (at != sizes.begin() && *(at - 1) > 0) out.push_back(*(at - 1));
        if (at + 1 != sizes.end()) out.push_back(*(at + 1));
        return out;
      };
      for (size_t a = 0; a < plan->axes.size(); ++a) {
        for (size_t b = a + 1; b < plan->axes.size(); ++b) {
          for (int64_t size_a : neighbours(a)) {
            for (int64_t size_b : neighbours(b)) {
              std::vector<int64_t> around = center;
              around[a] = size_a;
              around[b] = size_b;
              try_sizes(around);
            }
          }
        }
      }
    }
  }

  // Every nest bound in its default raster order, and beside it each other raster order of one
  // nest (raster_alternatives) with the rest as default.
  void expand_binding(const Entry& entry, std::vector<Entry>& out) {
    const ProgramFacts facts = analyze_program(*nodes_[entry.node].program);
    const std::vector<Decision> binds = binding_decisions(facts);
    // One nest's raster order per round: the nests before the first one that has other raster
    // orders are bound as they are, then that nest in its default order and, as siblings, in
    // each other order; the next round binds the next nest. The beam then keeps the order each
    // kernel suits in the form its completion estimates best (warp-specialized or not), nest by
    // nest, where binding every nest at once could only compare one nest's change against all
    // defaults and never combine two changes (the gate and up projections of a GEMM chain both
    // want the other order).
    std::vector<std::pair<size_t, Decision>> alternatives = raster_alternatives(facts);
    size_t last = binds.size();  // the last nest bound this round
    if (!alternatives.empty()) last = alternatives.front().first + 1;
    const bool more = last < binds.size();
    const auto bind_prefix = [&](const Decision* final_bind) {
      int current = entry.node;
      for (size_t i = 0; i < last; ++i) {
        const Decision& bind = final_bind && i + 1 == last ? *final_bind : binds[i];
        bool duplicate = false;
        const int child = try_child(current, bind, Phase::Binding, &duplicate);
        if (duplicate) return;  // the bound program is another node's: that path carries on
        if (child >= 0) current = child;
      }
      if (current == entry.node && more) {
        // Nothing applied: bind the remaining nests as they are rather than loop on this one.
        for (size_t i = last; i < binds.size(); ++i) {
          const int child = try_child(current, binds[i], Phase::Binding);
          if (child >= 0) current = child;
        }
        out.push_back({current, Phase::Masking});
        return;
      }
      out.push_back({current, more ? Phase::Binding : Phase::Masking});
    };
    bind_prefix(nullptr);
    for (const auto& [position, alternative] : alternatives) {
      if (position + 1 == last) bind_prefix(&alternative);
    }
  }

  void expand(const Entry& entry, std::vector<Entry>& out) {
    const SearchNode& node = nodes_[entry.node];
    switch (entry.phase) {
      case Phase::ReductionFusion: expand_reduction_fusion(entry, out); return;
      case Phase::Fusion: {
        const ProgramFacts facts = analyze_program(*node.program);
        std::vector<Decision> candidates = fusion_candidates(facts);
        // A split pays off only once a producer is fused into the reduction (a decode step's
        // scores computed per key tile): before that the unfused producer dominates every
        // estimate and the reduction-fusion phase drops the split. split_k_update applies
        // after compute_at, so the splits come back here.
        if (steps_in_phase(entry.node, Phase::Fusion) > 0) {
          for (Decision& split : reduction_fusion_candidates(*node.program, facts, split_k_below())
                                     .first) {
            if (split.kind == "split_k_update") candidates.push_back(std::move(split));
          }
        }
        expand_macros(entry, shared_operand_reduction_fusions(node.program), out);
        const size_t children_before = nodes_[entry.node].children.size();
        expand_multi_step(entry, candidates, after_fusion(entry.node), out);
        // Every new fusion child, improving or not, may be replayed: one that fits only
        // single-buffered is judged at a step too large for it, and its parent can look better
        // only because the parent's unfused producer got cheaper elsewhere (a decode step's
        // scores kernel without its dead initial store looks better than the fused split).
        const std::vector<int>& all_children = nodes_[entry.node].children;
        replay_on_smaller_steps(std::vector<int>(all_children.begin() + static_cast<long>(children_before),
                                                 all_children.end()),
                                out);
        follow_consumer_chains(entry.node, children_before, out);
        return;
      }
      case Phase::Tiling: expand_tiling(entry, out); return;
      case Phase::Binding: expand_binding(entry, out); return;
      case Phase::Masking: {
        const ProgramFacts facts = analyze_program(*node.program);
        std::vector<Decision> candidates = masking_candidates(facts);
        for (Decision& reverse : reverse_order_candidates(facts)) candidates.push_back(std::move(reverse));
        expand_multi_step(entry, candidates, Phase::Launch, out);
        return;
      }
      case Phase::Launch: {
        const ProgramFacts facts = analyze_program(*node.program);
        const size_t children_before = nodes_[entry.node].children.size();
        expand_multi_step(entry, launch_candidates(facts, node.schedule, arch_ == "sm_90a"),
                          Phase::Done, out);
        std::vector<int> row_owning;
        const std::vector<int>& children = nodes_[entry.node].children;
        for (size_t i = children_before; i < children.size(); ++i) {
          const std::optional<Decision>& decision = nodes_[children[i]].decision;
          const sched::DecisionArg* warps = decision ? decision->find("warps") : nullptr;
          if (decision && decision->kind == "launch" && warps && warps->is_int() && warps->as_int() < 4) {
            row_owning.push_back(children[i]);
          }
        }
        replay_on_smaller_steps(row_owning, out, /*launch=*/true);
        return;
      }
      case Phase::Done: out.push_back(entry); return;
    }
  }

  // ---- results ---------------------------------------------------------------------------

  // The best complete node by estimate; estimates within kNearTie of the best count as equal
  // (the model is not that precise) and the shortest schedule among them wins, i.e. the one
  // that leaves the most to the compiler's defaults.
  int choose_by_estimate() const {
    constexpr double kNearTie = 0.01;
    int best = -1;
    for (const SearchNode& node : nodes_) {
      if (!complete_[node.id] || !node.estimate || failed_[node.id]) continue;
      if (best < 0 || better(node.id, best)) best = node.id;
    }
    if (best < 0) return -1;
    int chosen = best;
    const double limit = score(best) * (1.0 + kNearTie);
    for (const SearchNode& node : nodes_) {
      if (!complete_[node.id] || !node.estimate || failed_[node.id] || score(node.id) > limit) {
        continue;
      }
      const size_t length = node.schedule.decisions.size();
      const size_t chosen_length = nodes_[chosen].schedule.decisions.size();
      if (length < chosen_length || (length == chosen_length && better(node.id, chosen))) {
        chosen = node.id;
      }
    }
    return chosen;
  }

  std::string pin_text(size_t index) const {
    return "pin " + std::to_string(index + 1) + " " + sched::print_decision(options_.pins[index]);
  }

  // Why no node carries every pin: the first pin no node applies, after the one before it.
  std::string pin_conflict() const {
    size_t most = 0;
    int where = 0;
    for (const SearchNode& node : nodes_) {
      if (node.pins_applied > most) {
        most = node.pins_applied;
        where = node.id;
      }
    }
    if (most >= options_.pins.size()) return {};
    sched::ApplyResult applied = sched::apply_decision(nodes_[where].program, options_.pins[most]);
    std::string reason = applied.ok() ? "no complete schedule reaches it" : applied.reason;
    if (most == 0) return pin_text(0) + " does not apply: " + reason;
    return pin_text(most) + " does not apply after " + pin_text(most - 1) + ": " + reason;
  }

  void measure(SearchResult& result) {
    std::vector<int> leaves;
    for (const SearchNode& node : nodes_) {
      if (complete_[node.id] && node.estimate && !failed_[node.id]) leaves.push_back(node.id);
    }
    std::sort(leaves.begin(), leaves.end(), [&](int a, int b) { return better(a, b); });
    if (leaves.size() > static_cast<size_t>(options_.measure)) leaves.resize(options_.measure);
    if (!measurer_) {
      result.warnings.push_back("no measurer: chose by the estimate");
      return;
    }
    int best_measured = -1;
    for (int id : leaves) {
      if (stop_.stop_requested()) break;
      Measurement measurement =
          measurer_(concat(nodes_[id].schedule, nodes_[id].completion.decisions));
      if (measurement.status == Measurement::Status::NoGpu) {
        result.warnings.push_back("no GPU: " + measurement.message +
                                  "; chose by the estimate instead");
        break;
      }
      if (measurement.status == Measurement::Status::Failed) {
        failed_[id] = true;
        nodes_[id].reason = "measurement failed: " + measurement.message;
        continue;
      }
      nodes_[id].measured_us = measurement.microseconds;
      if (best_measured < 0 || measurement.microseconds < *nodes_[best_measured].measured_us) {
        best_measured = id;
      }
    }
    if (best_measured >= 0) {
      chosen_ = best_measured;
      return;
    }
    // Nothing measured: the best leaf by the estimate whose measurement did not fail.
    if (failed_[chosen_]) chosen_ = choose_by_estimate();
  }

  void finish(SearchResult& result) {
    for (SearchNode& node : nodes_) {
      const int id = node.id;
      if (id == chosen_) {
        node.status = NodeStatus::Chosen;
        node.reason.clear();
      } else if (failed_[id]) {
        node.status = NodeStatus::Failed;
      } else if (complete_[id] && node.estimate) {
        node.status = NodeStatus::Leaf;
        node.reason.clear();
      } else if (!node.children.empty()) {
        node.status = NodeStatus::Expanded;
        node.reason.clear();
      } else {
        node.status = NodeStatus::Pruned;
        if (node.reason.empty()) {
          node.reason = stats_.cancelled ? "the search was cancelled before expanding it"
                                         : "not expanded";
        }
      }
      switch (node.status) {
        case NodeStatus::Expanded: ++stats_.expanded; break;
        case NodeStatus::Pruned: ++stats_.pruned; break;
        case NodeStatus::Leaf:
        case NodeStatus::Chosen: ++stats_.leaves; break;
        case NodeStatus::Failed: ++stats_.failed; break;
        case NodeStatus::Open: break;  // settled above: never left open
      }
    }
    stats_.nodes = static_cast<int>(nodes_.size());
    stats_.seconds = elapsed();
    result.stats = stats_;
    result.nodes = std::move(nodes_);
  }

  const SearchInput& input_;
  const cost::CostModel& model_;
  const SearchOptions& options_;
  SearchObserver* observer_;
  std::stop_token stop_;
  const Measurer& measurer_;
  std::string arch_;
  Clock::time_point start_ = Clock::now();

  std::vector<SearchNode> nodes_;
  std::vector<bool> dropped_, complete_, failed_;
  std::unordered_map<int, std::string> unbuildable_;  // node -> Evaluation::unbuildable
  // Per node: fusion decisions that made an ancestor's estimate worse (or did not compile);
  // they are not tried again below it.
  std::vector<std::shared_ptr<const std::set<std::string>>> tabu_;
  std::unordered_map<std::string, int> by_key_;
  std::unordered_map<std::string, Evaluation> cache_;
  std::set<int> evaluated_;
  SearchStats stats_;
  int best_ = -1;
  int chosen_ = -1;
  std::set<int> macro_steps_;  // nodes inside a macro step (expand_macros), all but its last
  std::string current_phase_ = phase_name(Phase::ReductionFusion);
  std::set<std::string> replayed_;  // replay_on_smaller_steps: (rolling node, decisions) done
  std::set<int> single_buffered_;   // nodes whose completion fit only single-buffered
};

SearchResult Searcher::run() {
  SearchResult result;
  result.model = model_.name();
  // Pins that are also forbidden can never hold.
  for (size_t i = 0; i < options_.pins.size(); ++i) {
    for (const Decision& forbid : options_.forbids) {
      if (decision_matches(forbid, options_.pins[i])) {
        result.error = pin_text(i) + " is forbidden by --forbid " + sched::print_decision(forbid);
        return result;
      }
    }
  }
  driver::CompileOptions lower_options;
  lower_options.sizes = input_.sizes;
  lower_options.last_stage = driver::Stage::Scalar;
  driver::Compilation lowered = driver::compile(input_.file, lower_options);
  if (!lowered.ok() || !lowered.program) {
    result.error = !lowered.internal_error.empty() ? "internal compiler error: " + lowered.internal_error
                                                   : lowered.diagnostics->render_all();
    if (result.error.empty()) result.error = "the spec does not compile";
    return result;
  }
  result.roofline = cost::math_roofline(*lowered.spec, model_.device());
  SearchNode root;
  root.program = lowered.program;
  by_key_.emplace(node_key(root), 0);
  nodes_.push_back(std::move(root));
  dropped_.push_back(false);
  complete_.push_back(false);
  failed_.push_back(false);
  tabu_.push_back(std::make_shared<const std::set<std::string>>());

  std::vector<Entry> beam = {{absorb_pins(0), Phase::ReductionFusion}};
  {
    std::vector<int> all;
    for (const SearchNode& node : nodes_) all.push_back(node.id);
    evaluate(all);
  }
  while (!stop_.stop_requested()) {
    const bool done = std::all_of(beam.begin(), beam.end(),
                                  [](const Entry& e) { return e.phase == Phase::Done; });
    if (done) break;
    ++stats_.rounds;
    Phase earliest = Phase::Done;
    for (const Entry& e : beam) earliest = std::min(earliest, e.phase);
    current_phase_ = phase_name(earliest);
    const size_t first_new = nodes_.size();
    std::vector<Entry> next;
    for (const Entry& entry : beam) {
      if (stop_.stop_requested()) break;
      const size_t first_child = next.size();
      expand(entry, next);
      for (size_t i = first_child; i < next.size(); ++i) next[i].tied = entry.tied;
    }
    std::vector<int> fresh;
    for (size_t id = first_new; id < nodes_.size(); ++id) fresh.push_back(static_cast<int>(id));
    evaluate(fresh);
    if (stop_.stop_requested()) break;
    // A complete node must carry every pin.
    std::vector<Entry> candidates;
    for (const Entry& entry : next) {
      // Once every nest is tiled, the tiles are final: a state whose kernel holds a register
      // tile past the register file can only lead to schedules the emitter refuses (an fp8
      // GEMM with its k extent untiled, which the model rated above every k tile). It leaves
      // the beam here, before it takes the place of the tiled states beside it.
      if (entry.phase > Phase::Tiling) {
        if (auto found = unbuildable_.find(entry.node); found != unbuildable_.end()) {
          nodes_[entry.node].estimate.reset();
          drop(entry.node, "cannot emit CUDA: " + found->second);
          continue;
        }
      }
      if (entry.phase == Phase::Done && !complete_[entry.node]) {
        if (nodes_[entry.node].pins_applied < options_.pins.size()) {
          drop(entry.node, pin_text(nodes_[entry.node].pins_applied) + " was never applied");
          continue;
        }
        complete_[entry.node] = true;
      }
      if (!nodes_[entry.node].estimate) continue;  // did not compile, infeasible or a duplicate
      candidates.push_back(entry);
    }
    std::stable_sort(candidates.begin(), candidates.end(), [&](const Entry& a, const Entry& b) {
      if (a.node == b.node) return a.phase < b.phase;
      return better(a.node, b.node);
    });
    beam = select_beam(std::move(candidates));
    report_progress();
    if (beam.empty()) break;
  }
  stats_.cancelled = stop_.stop_requested();

  chosen_ = choose_by_estimate();
  if (chosen_ >= 0 && options_.measure > 0) measure(result);
  if (chosen_ < 0) {
    std::string conflict = pin_conflict();
    if (!conflict.empty()) {
      result.error = conflict;
    } else if (stats_.cancelled) {
      result.error = "the search was cancelled before it completed a schedule";
    } else {
      std::string reason;
      for (auto it = nodes_.rbegin(); it != nodes_.rend() && reason.empty(); ++it) {
        if (!it->reason.empty() && it->reason.rfind("the same program", 0) != 0) reason = it->reason;
      }
      result.error = "no complete schedule compiles" + (reason.empty() ? "" : ": " + reason);
    }
  } else {
    // The persistent CTAs a completion derived are estimated as such only once chosen; when
    // that moves the choice out of the near tie with the best leaf, the choice is made again
    // (each node is settled at most once, so this ends).
    std::map<int, sched::Schedule> settled;  // node -> its schedule once settled
    while (true) {
      const SearchNode& chosen = nodes_[chosen_];
      result.ok = true;
      result.chosen = chosen_;
      result.estimate = chosen.estimate;
      result.measured_us = chosen.measured_us;
      if (auto done = settled.find(chosen_); done != settled.end()) {
        result.schedule = done->second;
        break;
      }
      result.schedule = concat(chosen.schedule, chosen.completion.decisions);
      if (options_.measure > 0) break;
      settle_derived_persistent(&result);
      settled[chosen_] = result.schedule;
      const int again = choose_by_estimate();
      if (again < 0 || again == chosen_) break;
      chosen_ = again;
    }
  }
  finish(result);
  return result;
}

}  // namespace

std::vector<LeafSchedule> complete_leaves(const SearchResult& result) {
  std::vector<LeafSchedule> leaves;
  for (const SearchNode& node : result.nodes) {
    if (node.status != NodeStatus::Leaf && node.status != NodeStatus::Chosen) continue;
    if (!node.estimate || !node.estimate->feasible) continue;
    leaves.push_back({concat(node.schedule, node.completion.decisions), node.estimate->microseconds});
  }
  std::stable_sort(leaves.begin(), leaves.end(), [](const LeafSchedule& a, const LeafSchedule& b) {
    return a.estimate_us < b.estimate_us;
  });
  return leaves;
}

std::string lowering_arch(const SearchOptions& options, const cost::CostModel& model) {
  if (!options.arch.empty()) return options.arch;
  return model.device().arch.rfind("sm_90", 0) == 0 ? "sm_90a" : "sm_80";
}

SearchResult run_search(const SearchInput& input, const cost::CostModel& model,
                        const SearchOptions& options, SearchObserver* observer,
                        std::stop_token stop, const Measurer& measurer) {
  SearchResult result = Searcher(input, model, options, observer, stop, measurer).run();
  result.beam = options.beam;
  auto ratio = [](const SearchResult& r) {
    return r.ok && r.estimate && r.roofline && r.roofline->microseconds > 0.0
               ? r.estimate->microseconds / r.roofline->microseconds
               : 0.0;
  };
  if (ratio(result) <= kRooflineSuspicion || result.stats.cancelled || options.measure > 0) {
    return result;
  }
  // The wider search's tree starts again from node 0, which an observer drawing the first tree
  // live cannot take as an update: it gets the progress only, and the final tree with the result.
  struct ProgressOnly : SearchObserver {
    SearchObserver* target = nullptr;
    void on_progress(const SearchProgress& progress) override {
      if (target) target->on_progress(progress);
    }
  } progress_only;
  progress_only.target = observer;
  SearchOptions wider = options;
  wider.beam = std::max(12, options.beam * 4);
  SearchResult second = Searcher(input, model, wider, &progress_only, stop, measurer).run();
  second.beam = wider.beam;
  const double seconds = result.stats.seconds + second.stats.seconds;
  const bool better = second.ok && !second.stats.cancelled &&
                      second.estimate->microseconds < result.estimate->microseconds;
  SearchResult& kept = better ? second : result;
  kept.stats.seconds = seconds;
  if (ratio(kept) > kRooflineSuspicion) {
    const std::vector<cost::KernelCost>& kernels = kept.estimate->kernels;
    const auto slowest = std::max_element(
        kernels.begin(), kernels.end(),
        [](const auto& a, const auto& b) { return a.microseconds < b.microseconds; });
    char ratio_text[32];
    std::snprintf(ratio_text, sizeof ratio_text, "%.0f", ratio(kept));
    std::string warning = "the chosen schedule's estimate is " + std::string(ratio_text) +
                          "x the roofline bound of the math, " + cost::describe(*kept.roofline) +
                          ", also with a beam of " + std::to_string(wider.beam);
    if (slowest != kernels.end()) {
      warning += "; kernel " + slowest->kernel + " dominates (" + format_us(slowest->microseconds) +
                 ", " + std::to_string(slowest->ctas) + " CTAs, " + slowest->bound + "-bound)";
    }
    kept.warnings.push_back(warning);
  }
  return std::move(kept);
}

}  // namespace nautilus::search
