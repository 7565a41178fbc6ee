// The lowering's entry point: checks the options and the VR module, lowers each kernel by the
// rules of lower.h (kernel_lowering.h says which file implements which rule), removes ops whose
// results nobody reads and verifies the MA module.
#include "core/matile/lower.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/matile/kernel_lowering.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"
#include "core/vrtile/verifier.h"

namespace nautilus::matile {
namespace lowering {

KernelLowering::KernelLowering(const vrtile::Kernel& kernel, const LowerOptions& options,
                               std::set<std::string> wide_output_buffers)
    : vk_(kernel),
      options_(options),
      // Warp-specialized: the consumers' warps plus the producer warpgroup's.
      b_(options.consumers > 0 ? 4 * (options.consumers + 1) : options.warps) {
  wide_output_buffers_ = std::move(wide_output_buffers);
}

// The rules in phases: analysis of the VR kernel, dot plans (rules 1 and 2), register layouts
// (rule 4), then emission in program order (rules 2, 3 and 5 and the rest).
KernelPtr KernelLowering::run() {
  analyze_region(*vk_.body, nullptr);
  refuse_tiles_past_registers();
  refuse_stores_shared_between_ctas();
  plan_row_buffers();
  plan_row_buffer_copies();
  // Layouts are planned for the threads that will hold the values: a warp-specialized kernel's
  // consumer warpgroups.
  if (options_.consumers > 0) layout_threads_ = int64_t{options_.warps} * kWarpSize;
  plan_dots();
  plan_ring_vectors();
  if (options_.consumers > 0) plan_warp_specialization();
  synthesize_layouts();
  if (options_.explain_layouts || options_.record_layout_reasons) explain_layouts();
  layout_threads_ = 0;
  find_overwritten_stores();
  for (const vrtile::GridAxis& axis : vk_.grid) {
    env_[axis.var.get()] = b_.grid(axis.var->name, axis.extent);
  }
  if (vk_.launch && vk_.launch->persistent) {
    if (options_.consumers > 0) {
      ws_.persistent = true;
      ws_.dynamic_tiles = vk_.launch->dynamic_tiles;
      b_.set_persistent(ws_.dynamic_tiles);
      if (ws_.dynamic_tiles) {
        // The counter's 4 bytes: a workspace the launcher zeroes before every launch.
        ws_.tile_counter = scalar::make_buffer(vk_.name + "_tile_counter", {4}, DType::I8,
                                               scalar::MemoryScope::Global,
                                               scalar::BufferRole::Workspace, vk_.provenance);
      }
    } else {
      b_.note("persistent not applied: only a warp-specialized kernel (warp_spec on sm_90a) walks "
              "its tiles; this one keeps one CTA per tile");
    }
  }
  memo_.emplace_back();
  b_.set_provenance(vk_.provenance);
  if (options_.consumers > 0) {
    emit_warp_specialized();
  } else {
    emit_region(*vk_.body);
  }
  b_.set_provenance(vk_.provenance);
  // Buffers held on chip (rule 8) are no longer global parameters.
  std::vector<Buffer> params;
  for (const Buffer& param : vk_.params) {
    if (row_buffers_.count(param.get())) continue;
    if (param->scope == scalar::MemoryScope::Shared) refuse_shared_buffer_in_global(*param);
    params.push_back(param);
  }
  if (ws_.tile_counter) params.push_back(ws_.tile_counter);
  KernelPtr kernel = b_.finish_kernel(vk_.name, std::move(params));
  auto priced = std::make_shared<Kernel>(*kernel);
  priced->layout_cost_rules = layout_cost_rules_;
  priced->layout_cost = layout_cost_;
  priced->layout_reasons = std::move(recorded_reasons_);
  priced->layout_synthesis = synthesis_summary_;
  priced->grouped_shared_reads = grouped_shared_reads();
  priced->register_tiles_without_room = register_tiles_without_room_;
  return priced;
}

// A tile with more elements per thread than kMostElementsPerThread (256 KB of 32-bit values per
// thread, a thousand times a thread's 255 registers) fits no kernel: neither registers nor a
// CTA's 227 KB of shared memory hold it. An untiled search state makes such tiles (the whole
// [50257, 768] weight of a vocabulary projection); refused at once, before layout checks that
// would visit its tens of millions of elements one by one.
void KernelLowering::refuse_tiles_past_registers() {
  constexpr int64_t kMostElementsPerThread = 65536;
  const int64_t threads = int64_t{options_.consumers > 0 ? 4 * (options_.consumers + 1) : options_.warps} * kWarpSize;
  for (const VValue& v : order_) {
    int64_t elements = 1;
    for (int64_t extent : v->type.shape) elements *= extent;
    if (elements / threads > kMostElementsPerThread) {
      fail("the tile %" + v->name + " has " + std::to_string(elements) + " elements, " +
           std::to_string(elements / threads) + " per thread of the CTA's " + std::to_string(threads) +
           ": no kernel holds it in registers or shared memory; tile its loops");
    }
  }
}

std::set<std::string> wide_output_buffers(const vrtile::Module& module) {
  std::set<std::string> wide;
  for (const vrtile::Buffer& buffer : module.params) {
    if (buffer->role == scalar::BufferRole::Output && dtype_bytes(buffer->dtype) > 2) wide.insert(buffer->name);
  }
  // Per kernel, the buffers it loads and those it stores.
  std::vector<std::pair<std::set<std::string>, std::set<std::string>>> accesses;
  for (const vrtile::KernelPtr& kernel : module.kernels) {
    std::set<std::string> loads, stores;
    std::function<void(const vrtile::Region&)> walk = [&](const vrtile::Region& region) {
      for (const vrtile::OpPtr& op : region.ops) {
        if (op->kind == vrtile::OpKind::Load && op->buffer) loads.insert(op->buffer->name);
        if (op->kind == vrtile::OpKind::Store && op->buffer) stores.insert(op->buffer->name);
        if (op->body) walk(*op->body);
      }
    };
    walk(*kernel->body);
    accesses.emplace_back(std::move(loads), std::move(stores));
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [loads, stores] : accesses) {
      if (std::none_of(stores.begin(), stores.end(), [&](const std::string& b) { return wide.count(b) > 0; })) continue;
      for (const std::string& b : loads) changed |= wide.insert(b).second;
    }
  }
  return wide;
}

namespace {

// Ops without effects whose results nobody reads (scalars computed for index tiles that window
// matching made unnecessary) are dropped, repeatedly, so the printed kernel shows only what runs.
bool removable(const Op& op) {
  if (is_hopper(op.kind)) return op.kind == OpKind::Wgmma;  // the others synchronize or copy
  switch (op.kind) {
    case OpKind::GlobalStore:
    case OpKind::AsyncCopy:
    case OpKind::CommitGroup:
    case OpKind::WaitGroup:
    case OpKind::Barrier:
    case OpKind::SharedStore:
    case OpKind::For:
    case OpKind::Yield: return false;
    default: return true;
  }
}

}  // namespace

KernelPtr remove_dead_ops(KernelPtr kernel) {
  while (true) {
    std::unordered_map<const ValueNode*, int> uses;
    for_each_op(*kernel->body, [&](const Op& op) {
      for (const Value& v : used_values(op)) ++uses[v.get()];
    });
    // Rebuilder keeps every op whose body did not change, so an unchanged kernel comes back
    // as itself and ends the loop.
    Rebuilder rebuilder(*kernel);
    KernelPtr rebuilt = rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed,
                                                  Rebuilder& out) {
      if (removable(original) &&
          std::none_of(original.results.begin(), original.results.end(),
                       [&](const Value& r) { return uses.count(r.get()) != 0; })) {
        return;
      }
      out.emit(renamed);
    });
    if (rebuilt == kernel) return kernel;
    kernel = rebuilt;
  }
}

}  // namespace lowering

namespace {

// `kernel` with the tile order of the schedule's tile_order: the group, or a note saying why it
// keeps the plain order (tilize made a grid of fewer than two axes: a nest whose other tile loop
// stayed serial); the reversed grid axes, found by their loops' names, or a note for a loop that
// is no grid axis of the kernel.
KernelPtr with_tile_order(const KernelPtr& kernel, const scalar::LaunchAttrs& launch) {
  Kernel ordered = *kernel;
  if (launch.group > 1 && kernel->grid.size() < 2) {
    ordered.notes.push_back("tile_order(group=" + std::to_string(launch.group) +
                            ") not applied: the grid has " + std::to_string(kernel->grid.size()) +
                            " axis; CTAs run in the plain order");
  } else if (launch.group > 1) {
    ordered.tile_group = launch.group;
  }
  for (const std::string& loop : launch.reversed) {
    const auto axis = std::find_if(kernel->grid.begin(), kernel->grid.end(), [&](const GridAxis& a) {
      return a.var && a.var->name == loop;
    });
    const size_t index = static_cast<size_t>(axis - kernel->grid.begin());
    if (axis == kernel->grid.end() || index >= 32) {
      ordered.notes.push_back("tile_order(reverse=" + loop + ") not applied: " + loop +
                              " is not a grid axis of this kernel");
      continue;
    }
    ordered.reversed_axes |= uint32_t{1} << index;
  }
  return std::make_shared<const Kernel>(std::move(ordered));
}

// One kernel. A warp-specialized kernel under RingRelease::Auto is lowered with its ring
// released together first; where that ring does not fit, or leaves the staged epilogue no room,
// it is lowered again with early release (whose own ring depth, the schedule's or the deepest
// below `stages` that frees it, may free the room). The choice is noted on the kernel.
KernelPtr lower_kernel(const vrtile::Kernel& kernel, const LowerOptions& options,
                       const std::set<std::string>& wide_buffers) {
  using RingRelease = LowerOptions::RingRelease;
  if (options.ring_release != RingRelease::Auto || options.consumers == 0) {
    return lowering::KernelLowering(kernel, options, wide_buffers).run();
  }
  LowerOptions together = options;
  together.ring_release = RingRelease::Together;
  KernelPtr released_together;
  std::string why;
  try {
    lowering::KernelLowering lowering(kernel, together, wide_buffers);
    released_together = lowering.run();
    if (!lowering.staging_lacked_shared_memory()) return released_together;
    why = "the ring released together left the staged epilogue no shared memory";
  } catch (const lowering::LowerError& error) {
    why = "the ring released together failed: " + error.message;
  }
  LowerOptions early = options;
  early.ring_release = RingRelease::Early;
  lowering::KernelLowering early_lowering(kernel, early, wide_buffers);
  KernelPtr early_kernel;
  try {
    early_kernel = early_lowering.run();
  } catch (const lowering::LowerError&) {
    if (released_together) return released_together;
    throw;
  }
  // Early release at the same depth frees nothing. Unless the schedule gave the early ring its
  // depth, a shallower early ring (down to 2 slots: K's copy overlaps the previous QKᵀ) may: the
  // deepest that makes room is taken, which the pipeline solver then sees and prices (the d 128
  // rows, K on 2 slots and V on 3, measured 135 against 157 µs together at B32 H16 S512;
  // bench/RESULTS.md, 2026-11-28).
  int early_depth = 0;
  if (early_lowering.staging_lacked_shared_memory() && options.early_stages == 0) {
    for (int depth = options.stages - 1; depth >= 2; --depth) {
      LowerOptions shallower = early;
      shallower.early_stages = depth;
      try {
        lowering::KernelLowering shallower_lowering(kernel, shallower, wide_buffers);
        KernelPtr shallower_kernel = shallower_lowering.run();
        if (shallower_lowering.staging_lacked_shared_memory()) continue;
        early_kernel = std::move(shallower_kernel);
        early_depth = depth;
        break;
      } catch (const lowering::LowerError&) {
        continue;
      }
    }
    // The together form stays where it exists and no early depth makes room.
    if (early_depth == 0 && released_together) return released_together;
  }
  Kernel lowered = *early_kernel;
  const bool applied = std::any_of(lowered.mbarriers.begin(), lowered.mbarriers.end(),
                                   [](const MBarrierAlloc& b) { return b.early_release; });
  if (applied) {
    lowered.notes.push_back("early release: " + why +
                            (early_depth > 0 ? "; the early ring takes " + std::to_string(early_depth) +
                                                   " slots, which makes room"
                                             : std::string()));
  }
  return std::make_shared<const Kernel>(std::move(lowered));
}

}  // namespace

using layout::layout_error;
using lowering::KernelLowering;
using lowering::LowerError;
using lowering::remove_dead_ops;

layout::Result<ModulePtr> lower_to_matile(const vrtile::ModulePtr& module,
                                          const LowerOptions& options) {
  if (!module) return layout_error("lower_to_matile: no module");
  if (options.warps != 1 && options.warps != 2 && options.warps != 4 && options.warps != 8) {
    return layout_error("lower_to_matile: warps must be 1, 2, 4 or 8, not " +
                        std::to_string(options.warps));
  }
  if (options.stages < 1 || options.stages > 8) {
    return layout_error("lower_to_matile: stages must be in 1..8, not " + std::to_string(options.stages));
  }
  if (options.arch != "sm_80" && options.arch != "sm_90a") {
    return layout_error("lower_to_matile: arch must be sm_80 or sm_90a, not " + options.arch);
  }
  const std::vector<std::string> problems = vrtile::verify(*module);
  if (!problems.empty()) {
    return layout_error("lower_to_matile: the VR module does not verify: " + problems.front());
  }
  auto out = std::make_shared<Module>();
  out->name = module->name;
  out->arch = options.arch;
  out->params = module->params;
  out->allocations = module->allocations;
  const std::set<std::string> wide_buffers = lowering::wide_output_buffers(*module);
  try {
    for (const vrtile::KernelPtr& kernel : module->kernels) {
      // A kernel's own launch attributes (the schedule's `launch`) override the defaults.
      LowerOptions kernel_options = options;
      if (kernel->launch) {
        kernel_options.warps = kernel->launch->warps;
        kernel_options.stages = kernel->launch->stages;
        kernel_options.early_stages = kernel->launch->early_stages;
        kernel_options.consumers = kernel->launch->consumers;
        kernel_options.overlap = kernel->launch->overlap;
        kernel_options.pingpong = kernel->launch->pingpong;
      }
      // Warp specialization is Hopper's; elsewhere its consumer warpgroups become plain warps.
      if (kernel_options.consumers > 0 && kernel_options.arch != "sm_90a") {
        kernel_options.warps = std::min(8, 4 * kernel_options.consumers);
        kernel_options.consumers = 0;
      }
      if (kernel_options.consumers > 0) kernel_options.warps = 4 * kernel_options.consumers;
      KernelPtr lowered = remove_dead_ops(lower_kernel(*kernel, kernel_options, wide_buffers));
      if (kernel->launch && (kernel->launch->group > 1 || !kernel->launch->reversed.empty())) {
        lowered = with_tile_order(lowered, *kernel->launch);
      }
      // A kernel's workspace (the dynamic tile scheduler's counter) is a global buffer of the
      // module that no other kernel touches.
      for (const Buffer& param : lowered->params) {
        if (param->role == scalar::BufferRole::Workspace) out->allocations.push_back(param);
      }
      out->kernels.push_back(std::move(lowered));
    }
  } catch (const LowerError& error) {
    return layout_error("lower_to_matile: " + error.message);
  }
  // Shared-scope intermediates that every kernel holds on chip (rule 8) need no global scratch.
  std::erase_if(out->allocations, [&](const Buffer& buffer) {
    if (buffer->scope != scalar::MemoryScope::Shared) return false;
    for (const KernelPtr& kernel : out->kernels) {
      for (const Buffer& param : kernel->params) {
        if (param == buffer) return false;
      }
    }
    return true;
  });
  const std::vector<std::string> errors = verify(*out);
  if (!errors.empty()) {
    return layout_error("lower_to_matile: internal error, the MA module does not verify: " +
                        errors.front());
  }
  return ModulePtr(out);
}

}  // namespace nautilus::matile
