// The state of lowering one VR kernel to MA tile IR, shared by the files that implement the rules
// of lower.h (nothing here is used outside core/matile's lowering).
//
// One KernelLowering lowers one VR kernel. run() applies the rules in phases, each reading what
// the earlier ones recorded in the maps below; the work is split by rule:
//   lower.cpp              the entry point (options, verification, dead-op removal) and run()
//   lower_analysis.cpp     definitions, users, scopes and loops of the VR kernel, the
//                          rematerializable values and affine index windows (rules 2 and 4)
//   lower_dots.cpp         rules 1 and 2: each dot's instruction, warp grid and operand paths
//                          (shared memory, staged prologue tiles, registers), and its emission
//   lower_layouts.cpp      rule 4: the register layout of every value kept in registers
//   lower_layout_synthesis.cpp  rule 4's synthesis: the rules run under pins, the cheapest
//                          assignment found by branching on conversions is kept
//   lower_materialize.cpp  rule 4 at emission: a value in the layout a consumer needs
//                          (rematerialized, taken as placed, or converted)
//   lower_shared.cpp       rule 2: shared allocations and their swizzle, cp.async copies,
//                          ldmatrix reads of staged tiles and of A fragments held in registers
//   lower_pipeline.cpp     rule 3: loops, and the software pipeline of their shared operands
//   lower_hopper.cpp       rule 6: the warp-specialized form (TMA producer, wgmma consumers)
//   lower_epilogue.cpp     rule 7: a warp-specialized kernel's accumulator tile stored through
//                          shared memory (stmatrix, then coalesced row stores)
//   lower_row_buffers.cpp  rule 8: shared-scope buffers of the schedule (a row copied once and
//                          read by every pass over it) as shared allocations of the kernel
//   lower_emit.cpp         rule 5 and the rest: every other VR op, window and gather accesses,
//                          and the uniform index scalars their offsets need
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/layout/tma.h"
#include "core/matile/ir.h"
#include "core/matile/layouts.h"
#include "core/matile/lower.h"
#include "core/vrtile/ir.h"

namespace nautilus::matile::lowering {

using VOp = vrtile::Op;
using VOpKind = vrtile::OpKind;
using VValue = vrtile::Value;
using VNode = vrtile::ValueNode;

// A failure of the lowering: unwinds to lower_to_matile, which returns it as the reason.
struct LowerError {
  std::string message;
};

// An index tile as constant + sum(coef * rank-0 value) + sum(coefs[k] * coordinate k).
struct Affine {
  int64_t constant = 0;
  std::vector<std::pair<const VNode*, int64_t>> atoms;  // in first-seen order
  std::vector<int64_t> coefs;

  bool scalar_only() const {
    return std::all_of(coefs.begin(), coefs.end(), [](int64_t c) { return c == 0; });
  }
  bool constant_only() const { return atoms.empty() && scalar_only(); }
  void add_atom(const VNode* atom, int64_t coef) {
    for (auto& [a, c] : atoms) {
      if (a == atom) {
        c += coef;
        return;
      }
    }
    atoms.emplace_back(atom, coef);
  }
  bool operator==(const Affine& other) const {
    if (constant != other.constant || coefs != other.coefs) return false;
    auto canonical = [](const Affine& a) {
      std::vector<std::pair<const VNode*, int64_t>> out;
      for (const auto& [atom, coef] : a.atoms) {
        if (coef != 0) out.emplace_back(atom, coef);
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    return canonical(*this) == canonical(other);
  }
};

// A global access matched as a window.
struct Window {
  std::vector<Affine> offsets;  // scalar parts, per buffer axis
  std::vector<int> tile_axes;
  std::vector<int64_t> bounds;
};

// How a dot runs.
struct OperandPlan {
  VValue source;              // the 16-bit tile the operand is (after peeling casts/permute)
  const VOp* load = nullptr;  // when the operand comes through shared memory
  bool transposed = false;    // the load's tile is the operand's transpose
  // The load is an 8-bit tile that `source` widens (a cast to bf16 or f16): each k step reads
  // its slice from shared memory element by element into the fragment layout and widens it
  // there (ldmatrix moves 16-bit elements only).
  bool widened = false;
};
// Who reads a staged tile: ldmatrix.x4 (16-bit operands and staged register tiles), or, for an
// 8-bit operand that a dot widens (OperandPlan::widened), one k step's fragment read a byte per
// lane: `fragment` maps (thread, value) to the step's [rows, columns] window of the tile.
struct TileReader {
  std::optional<layout::TVLayout> fragment;
  std::vector<int64_t> window;
  int64_t vector = 1;  // elements per read: `vector` neighbouring slots of `fragment`
};

struct DotPlan {
  bool mma = false;
  bool wgmma = false;  // rule 6: a warpgroup MMA reading both operands from the TMA ring
  // Rule 6 on 8-bit floats: A and B are fp8 tiles (e4m3 or e5m2) that the dot reads widened to
  // 16 bits (operand_narrowing); wgmma's k32 form reads their bytes as they are from shared
  // memory, both K-major (plan_eight_bit_wgmma).
  bool eight_bit = false;
  int warps_m = 0, warps_n = 0;
  // Read the next k step's fragments from shared memory before this step's MMAs, so ldmatrix
  // latency hides behind tensor-core work (costs one more step of fragment registers).
  bool prefetch_fragments = false;
  // mma.sync atoms with interleaved columns (layouts.h, mma_b_layout): a widened 8-bit B stored
  // [K, N] then reads a thread's bytes of `column_interleave` atoms in one ld.shared.
  int column_interleave = 1;
  // mma.sync k steps interleaved (layouts.h, interleaved_k): both operands are loaded from global
  // memory straight into their fragments and B's rows are contiguous along k, so a lane reads
  // 4 * k_interleave neighbouring k of B (and of A) at once.
  int k_interleave = 1;
  // The swapped product (layouts.h, mma_swapped_c_layout): A is 1, 2, 4 or 8 rows (a decode
  // step), so the instruction's 16 rows are 16 of B's columns instead of A's rows repeated.
  bool swapped = false;
  OperandPlan a, b;
};

// Rule 8: a shared-scope buffer held in a shared allocation of `stages` tiles of `tile`
// elements (lower_row_buffers.cpp).
struct RowBuffer {
  int alloc = -1;
  int64_t tile = 0;
  int64_t stages = 0;
  bool dirty = false;        // copies issued since the last wait and barrier
  bool zero_padded = true;   // every copy is a zero-filling cp.async of whole stages
  // One stage that every access covers whole, its tile the widest access (a tile clamped to a
  // short row beside one that is not): every access is at stage 0, whatever its offset's form.
  bool single_stage = false;
  // tail=global: the leading `resident` stages live on chip (== stages when the row fits);
  // a stage past them is read from `source` (the copy's global load, its window `source_window`
  // with buffer element e at source_window.offsets[source_axis] + e).
  int64_t resident = 0;
  const VOp* source = nullptr;
  Window source_window;
  int source_axis = -1;
};

struct SmemLoad {
  int alloc = -1;
  Value stage;  // the current stage inside a pipelined loop; null for stage 0
};

// The names of the module's global buffers whose contents reach an output of 32 bits or more:
// those outputs, and every buffer a kernel loads that stores into one of them (to a fixed point).
std::set<std::string> wide_output_buffers(const vrtile::Module& module);

// Ops computed from their operands in registers alone (constants, index tiles, broadcasts,
// permutes, element-wise ops, casts): a tile made only of these can be re-emitted in any
// layout (remat), and a held copy's wait may move past them.
bool computes_in_registers(VOpKind kind);

// A ring tile's layout and the swizzle span TMA fills it with (ring_layout below).
struct RingLayout {
  layout::ComposedLayout layout;
  int swizzle_bytes = 0;
};

class KernelLowering {
 public:
  // `wide_output_buffers`: the global buffers whose contents reach an output of 32 bits or more
  // (wide_output_buffers() of the module): a product stored there keeps f32 accuracy.
  KernelLowering(const vrtile::Kernel& kernel, const LowerOptions& options,
                 std::set<std::string> wide_output_buffers = {});

  KernelPtr run();
  // After run(): whether a staged epilogue (rule 7) was refused for want of shared memory.
  bool staging_lacked_shared_memory() const { return staging_lacked_shared_memory_; }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw LowerError{"kernel " + vk_.name + ": " + message};
  }
  int64_t threads() const { return layout_threads_ > 0 ? layout_threads_ : b_.threads(); }
  const VOp* def(const VValue& v) const {
    auto found = def_.find(v.get());
    return found == def_.end() ? nullptr : found->second;
  }

  // -------------------------------------------------------------------------------------------
  // Analysis: definitions, users, scopes, rematerializable values, affine index windows
  // (lower_analysis.cpp)
  void analyze_region(const vrtile::Region& region, const VOp* loop);
  bool remat(const VValue& v);
  std::optional<Affine> affine(const VValue& v);
  bool mask_bounds(const VValue& mask, const std::vector<int>& axis_map,
                   const std::vector<Affine>& indices, size_t rank, std::vector<int64_t>* bounds);
  std::optional<Window> match_window(const VOp& op, const std::vector<int64_t>& tile_shape);
  bool async_copyable(const VOp& load, const Window& window, bool packed_int4 = false);

  // -------------------------------------------------------------------------------------------
  // Dot plans and their emission (lower_dots.cpp)
  OperandPlan peel(const VValue& operand, DType* narrow);
  std::optional<OperandPlan> peel_eight_bit(const VValue& operand);
  void plan_eight_bit_wgmma(const VOp& op, DotPlan* plan);
  bool stored_only_narrow(const VValue& v, int depth = 0);
  bool loop_results_all(const VOp& yield, const VValue& v,
                        const std::function<bool(const VValue&)>& check) const;
  bool peel_reaches_shared(const VValue& operand);
  bool only_accumulated_and_stored(const VValue& v, int depth = 0);
  const VOp* prologue_root(const VValue& source);
  const VOp* widened_byte_load(const VValue& source);
  const VOp* global_load_along(const VValue& operand, int axis, bool* contiguous);
  void stage_prologue_load(const VValue& source);
  void plan_dots();
  Value read_widened_step(const OperandPlan& operand, const std::vector<int64_t>& offsets,
                          const TileType& type, const RegisterLayout& fragment, const std::string& step);
  void emit_dot(const VOp& op);

  // -------------------------------------------------------------------------------------------
  // Register layout assignment (lower_layouts.cpp)
  bool lives_in_registers(const VValue& v);
  RegisterLayout default_layout(const VValue& v) const;
  RegisterLayout reduce_result_layout(const RegisterLayout& source, const VValue& operand, int axis);
  std::optional<RegisterLayout> anchor(const VValue& v);
  bool propagate();
  bool demand();
  void assign_layouts();
  void explain_layouts();
  std::optional<RegisterLayout> mma_fragment(const DotPlan& plan, const VValue& v) const;
  RegisterLayout layout_for(const VValue& v);
  RegisterLayout projected(const RegisterLayout& to, const std::vector<int64_t>& shape,
                           const std::vector<int>& dims, const std::vector<int64_t>& source_shape);

  // -------------------------------------------------------------------------------------------
  // Layout synthesis (lower_layout_synthesis.cpp): the rules above run under pins, and the
  // cheapest assignment found by branching on conflicts is kept.
  struct LayoutConflict {
    const VNode* value = nullptr;  // placed in a layout its consumer does not read in place
    RegisterLayout wanted;         // the layout the consumer needs
    const VNode* consumer = nullptr;  // the value whose layout made it want that (or null)
    double price = 0;
  };
  struct LayoutPricing;
  void synthesize_layouts();
  bool run_layout_rules(const std::map<const VNode*, RegisterLayout>& pins);
  double layout_cost(std::vector<LayoutConflict>* conflicts);
  double convert_price(const RegisterLayout& from, const RegisterLayout& to, const TileType& type);
  void price_region(LayoutPricing& pricing, const vrtile::Region& region, const VOp* loop, double weight);
  void price_use(LayoutPricing& pricing, const VValue& x, const RegisterLayout& to, const VOp* loop,
                 double weight, const VNode* consumer, int depth);
  void price_emission(LayoutPricing& pricing, const VOp& op, const VValue& v, const RegisterLayout& to,
                      const VOp* loop, double weight, const VNode* consumer, int depth);
  bool pinnable(const VNode* node);
  const VNode* emitted_as(const VNode* node) const;
  std::vector<std::pair<const VNode*, RegisterLayout>> pin_group(const VNode* node, const RegisterLayout& layout);
  double layout_cost_rules_ = 0, layout_cost_ = 0;
  std::string synthesis_summary_;  // Kernel::layout_synthesis
  int register_tiles_without_room_ = 0;  // Kernel::register_tiles_without_room
  std::map<std::string, std::string> recorded_reasons_;  // Kernel::layout_reasons

  // -------------------------------------------------------------------------------------------
  // Values in the layout a consumer needs (lower_materialize.cpp)
  bool register_only(const RegisterLayout& from, const RegisterLayout& to, const TileType& type);
  Value convert(const Value& value, const RegisterLayout& to, const std::string& name);
  Value materialize(const VValue& v, const RegisterLayout& to);
  Value emit_compute(const VOp& op, const VValue& v, const RegisterLayout& to);
  // The layout a broadcast or permute `op` reads its (tile) source in when it emits its result
  // `v` in `to`: the broadcast's projection of `to`, or `to` permuted back (uniform when that
  // has no permuted form).
  RegisterLayout moved_source_layout(const VOp& op, const VValue& v, const RegisterLayout& to);
  // How a reduce runs: the layout it reads its operand in (the operand's own, or blocked when
  // the operand is rematerialized or its layout has no slice or plan along the axis), the
  // result's slice of it and the shuffle plan; nullopt with `error` when not even blocked has.
  struct ReduceForm {
    RegisterLayout source, slice;
    ReducePlan plan;
  };
  std::optional<ReduceForm> reduce_form(const VOp& op, std::string* error);
  bool register_only_move(RegisterMove move, const Value& source, const VValue& v,
                          const std::vector<int>& dims, const RegisterLayout& to);
  Value scalar_value(const VValue& v);

  // -------------------------------------------------------------------------------------------
  // Shared operands: allocations, swizzle choice, copies, reads (lower_shared.cpp)
  int scratch(const std::string& name, DType dtype, std::vector<int64_t> shape,
              const std::string& purpose);
  int smem_alloc_for(const VOp& load, int stages);
  TileReader widened_reader(const VOp& load) const;
  void emit_copy(const VOp& load, int alloc, const Value& stage, const VNode* loop_var,
                 const Value& replacement, const Value& predicate,
                 std::optional<int64_t> iteration = std::nullopt);
  Value read_staged(const VOp& load, const SmemLoad& smem);
  void hoist_a_fragments(const VOp& load, int alloc);

  // -------------------------------------------------------------------------------------------
  // Loops and the software pipeline (lower_pipeline.cpp)
  std::vector<const VOp*> pipelinable(const VOp& loop);
  bool known_ahead(const VOp& loop, const Window& window);
  void plan_ring_vectors();
  // What emitting a For starts from: its initial values in the layouts of its block arguments,
  // and the names of its results and block arguments.
  struct LoopStart {
    std::vector<Value> inits;
    std::vector<std::string> result_names, arg_names;
  };
  LoopStart loop_start(const VOp& loop);
  // The values the body of `loop` yields, in the layouts of the values it carries.
  std::vector<Value> yielded_values(const VOp& loop, const std::vector<Value>& carried);
  void emit_for(const VOp& op);
  void emit_pipeline_step(const VOp& loop, const std::vector<const VOp*>& loads, const Value& var,
                          int stages);

  // -------------------------------------------------------------------------------------------
  // Warp specialization on sm_90a (lower_hopper.cpp)
  void refuse_tiles_past_registers();
  // lower_cta_overlap.cpp: fails when CTAs of the launch would write the same elements of a
  // global buffer that the kernel also reads.
  void refuse_stores_shared_between_ctas();
  void plan_warp_specialization();
  void emit_warp_specialized();
  void emit_producer();
  void emit_hopper_loop(const VOp& loop);
  // The ring iteration of the main loop's iteration k: k, plus the earlier tiles' iterations in
  // a persistent kernel.
  Value ring_iteration(const Value& k);
  // The iterations the main loop adds to the ring (its trips; at least 1 with overlap=1).
  Value ring_trips(const VOp& loop);
  // After the consumers' main loop: releases the last iteration's slot (persistent: leaves it
  // to the next tile's first iteration and records the ring's advance instead).
  void finish_ring(const Value& advance);
  // A persistent kernel's tiles copied once (the query tile) are free once the tile's last
  // iteration has retired its reads of them: plan_once_release finds those reads, and
  // release_once_tiles_in_last_iteration arrives on once_empty in that iteration only, after
  // the wait that retired them, so that the producer loads the next tile's under this tile's
  // last softmax, P·V and epilogue.
  void plan_once_release(const VOp& loop);
  // Whether a dot reads an operand of the warp-specialized loop that is copied once per tile.
  bool reads_tile_copied_once(const DotPlan& plan) const;
  void release_once_tiles_in_last_iteration();
  void finish_once_release(const VOp& loop);
  void arrive_once_empty_if(const std::string& name, const Value& trips);
  void emit_persistent_role(const std::function<void()>& body, bool consumers);
  // The dynamic tile scheduler (Kernel::dynamic_tiles): at the start of the CTA's tile `step`
  // the producer fetches the launch index of the CTA's next tile into the tile ring's slot
  // step % 2; at the end of the tile every role reads it there and releases the slot.
  void fetch_next_tile(const Value& step);
  Value read_next_tile(const Value& step);
    std::pair<Value, Value> ring_position(const Value& k, int depth = 0);
  Value slot_before(const Value& k, const std::pair<std::string, std::string>& names);
  Value loop_trips(const VOp& loop);
  struct TmaOperand;
  struct TmaTile {
    std::string refusal;         // why TMA cannot copy the tile ("" when it can)
    std::vector<int> tile_axes;  // the two buffer axes the tile spans
    std::optional<RingLayout> ring;
  };
  TmaTile plan_tma_operand(const VOp& load, const Window& window, const VOp& loop, bool once, bool mn_is_axis0);
  void stage_register_tiles(const VOp& loop);
  void emit_tma_copy(const TmaOperand& operand, const Value& stage, const Value& k, int barrier);
  void retire_wgmma_reads(const VOp& op);
  // pingpong=1 (lower_hopper.cpp): the consumer warpgroups' turns on the tensor cores.
  void pingpong_seed();
  void pingpong_end_loop();
  void pingpong_take_turn();
  void pingpong_pass_turn();
  void pingpong_drain();
  void release_previous_slot();
  // Rule 6's releases by every thread of the role: per warp or per thread (LowerOptions).
  void arrive_released(BarrierRef bar);
  int64_t release_arrivals(int64_t threads) const;
  void plan_early_release(const VOp& loop);
  void begin_early_release(const Value& slot);
  Value wait_ring_stages(const Value& ring_k, const Value& slot, const Value& phase);
  void retire_early_readers(const std::unordered_set<const VNode*>& retired);
  void check_early_release();
  void issue_late_part();
  RegisterLayout carried_layout(const VValue& x, const VOp& reader);
  void plan_overlap(const VOp& loop);
  void emit_overlapped_loop(const VOp& loop);
  std::vector<Value> emit_late_part(const VOp& loop, const Value& k, const std::vector<Value>& late_args,
                                    const std::vector<Value>& deferred);

  // -------------------------------------------------------------------------------------------
  // Emission of the other VR ops and of index scalars (lower_emit.cpp)
  Value index_constant(int64_t value);
  static std::string affine_key(const Affine& a);
  Value placed(const VValue& v);
  Value* memo_find(const VNode* v, const std::string& key);
  Value emit_offset(Affine a, const VNode* loop_var, const Value& replacement,
                    std::optional<int64_t> iteration = std::nullopt);
  Value placed_node(const VNode* node);
  GlobalAccess window_access(const Window& w, const VNode* loop_var, const Value& replacement,
                             std::optional<int64_t> iteration = std::nullopt);
  void emit_region(const vrtile::Region& region);
  bool needed(const VValue& v);
  void emit(const VOp& op);
  void emit_load(const VOp& op);
  GlobalAccess gather_access(const VOp& op, const RegisterLayout& l, std::vector<Value>* gather);
  void emit_store(const VOp& op);

  // -------------------------------------------------------------------------------------------
  // Rule 7: the staged epilogue (lower_epilogue.cpp). Emits the store of `value` (placed in
  // registers) through a shared staging tile and returns true, or notes why not and returns
  // false (the caller then stores `value` directly).
  bool emit_staged_store(const VOp& op, const Window& window, const Value& value);
  // Rule 7's TMA form: the staged tile leaves by a TMA store; "" when it applies, else why not.
  std::string tma_store_refusal(const VOp& op, const Window& window, const Value& value,
                                int64_t vector, layout::ComposedLayout* staged_layout, int* swizzle_bytes,
                                std::vector<int>* tile_axes);
  void emit_tma_store(const VOp& op, const Window& window, const Value& value,
                      const layout::ComposedLayout& staged_layout, int swizzle_bytes,
                      const std::vector<int>& tile_axes);
  std::string staged_store_refusal(const VOp& op, const Window& window, const Value& value,
                                   int64_t* vector);
  // A tile copied once (attention's Q) whose bytes the staging tile of `op` may reuse when it
  // does not fit beside the ring, or -1 with `why` saying why none may.
  int reusable_once_tile(const VOp& op, int64_t staging_bytes, DType dtype, std::string* why) const;
  // The staging tile: an allocation of its own (at a multiple of `alignment` bytes: a TMA
  // store's swizzle atom), or on the bytes of `staging_reuse_`.
  int staging_alloc(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                    const layout::ComposedLayout& layout, const std::string& purpose,
                    int64_t alignment = 128);
  int staging_reuse_ = -1;  // set by staged_store_refusal for the store being emitted
  bool staging_lacked_shared_memory_ = false;  // set by staged_store_refusal
  void emit_reduce(const VOp& op);

  // Rule 8: on-chip buffers (lower_row_buffers.cpp).
  void plan_row_buffers();
  // Fails, with the reason plan_row_buffers() recorded, for a shared-scope buffer that no rule
  // placed on chip: the kernel would access it as global memory, one copy shared by every CTA.
  [[noreturn]] void refuse_shared_buffer_in_global(const scalar::BufferNode& buffer) const;
  void plan_row_buffer_copies();
  Value row_stage(const VOp& op, const RowBuffer& row, Window* window);
  void sync_row_buffers_before(const VOp& op);
  bool copied_into_row_buffer(const VOp& load);
  bool emit_row_buffer_store(const VOp& op);
  bool emit_row_buffer_load(const VOp& op);
  void plan_row_buffer_tails();
  bool reads_row_tail(const VOp& op, const RowBuffer& row);
  void emit_split_row_loop(const VOp& op, int64_t split);

  // The grouped shared reads (Kernel::grouped_shared_reads), decided by plan_dots from
  // requested_shared_reads() and the widened 8-bit B operands: grouped only where each is read
  // kFewestGroupedWeightBytes or more bytes at a time (fewer were slower than the element-wise
  // reads on the H200).
  bool grouped_shared_reads() const { return grouped_shared_reads_; }
  // The CLI's mode over the kernel's launch decision; Auto where neither says.
  scalar::MmaForm requested_mma_form() const {
    if (options_.mma_form != scalar::MmaForm::Auto) return options_.mma_form;
    return vk_.launch ? vk_.launch->mma_form : scalar::MmaForm::Auto;
  }
  scalar::SharedReads requested_shared_reads() const {
    if (options_.shared_reads != scalar::SharedReads::Auto) return options_.shared_reads;
    return vk_.launch ? vk_.launch->shared_reads : scalar::SharedReads::Auto;
  }
  static constexpr int kFewestGroupedWeightBytes = 4;
  bool grouped_shared_reads_ = false;

  const vrtile::Kernel& vk_;
  const LowerOptions& options_;
  Builder b_;
  std::unordered_map<const VNode*, const VOp*> def_;
  std::unordered_map<const VNode*, const VOp*> scope_;       // the For whose body defines it
  std::unordered_map<const VNode*, const VOp*> carried_by_;  // block args and For results
  std::unordered_map<const VOp*, const VOp*> loop_of_yield_;  // Yield -> the For it ends
  std::unordered_map<const VNode*, std::vector<const VOp*>> users_;
  std::vector<VValue> order_;
  std::unordered_map<const VNode*, bool> remat_;
  std::unordered_map<const VOp*, DotPlan> dot_plans_;
  // Dots on fp8 tiles that cannot take wgmma's 8-bit form, and why (rule 6's refusal says it).
  std::unordered_map<const VOp*, std::string> eight_bit_refusals_;
  std::set<std::string> wide_output_buffers_;
  std::map<const VOp*, Window> smem_windows_;
  std::unordered_set<const VOp*> register_loads_;
  std::unordered_set<const VOp*> staged_register_loads_;  // register copies read from shared
  std::unordered_map<const VNode*, RegisterLayout> layouts_;
  std::unordered_map<const VNode*, std::string> layout_reasons_;  // why each layout (explain_layouts)
  std::unordered_map<const VNode*, Value> env_;
  std::vector<std::map<std::pair<const VNode*, std::string>, Value>> memo_;
  int loop_nesting_ = 0;  // the VR loops emit_for is inside, this one included
  std::unordered_map<const VOp*, int> smem_alloc_;
  std::unordered_map<const VOp*, SmemLoad> smem_loads_;
  std::unordered_map<const VOp*, Value> pipelined_stage_;
  std::unordered_map<const VOp*, std::pair<int, int>> fma_allocs_;
  std::unordered_map<const VNode*, bool> needed_;
  std::unordered_map<const VOp*, Value> hoisted_;  // A fragments read once after their copy
  std::unordered_map<const scalar::BufferNode*, RowBuffer> row_buffers_;
  // Why a shared-scope buffer is not a row buffer (plan_row_buffers), for the refusal.
  std::unordered_map<const scalar::BufferNode*, std::string> row_buffer_refusals_;
  std::unordered_set<const VOp*> row_async_copies_;  // row-buffer stores copied by cp.async
  // tail=global: loops over a row's stages emitted in two parts, the iterations before the
  // split reading stages on chip, those after reading the tail from global memory; and the loop
  // variables whose tail part is being emitted.
  std::unordered_map<const VOp*, int64_t> row_loop_splits_;
  std::unordered_set<const VNode*> tail_loop_vars_;
  // Copies of tiles loaded once (attention's Q) whose wait is held back so that the next
  // loop's ring prologue goes out first: the CTA's first key tiles are then requested one
  // DRAM round trip earlier (lower_emit.cpp, emit_load; lower_pipeline.cpp, emit_for).
  struct HeldCopy {
    const VOp* load = nullptr;
    int alloc = -1;
  };
  std::vector<HeldCopy> held_copies_;
  // Top-level stores whose elements a later top-level store of the same kernel writes again,
  // with no load of the buffer in the kernel: not emitted (lower_emit.cpp).
  std::unordered_set<const VOp*> overwritten_stores_;
  void find_overwritten_stores();
  bool holds_copy_across(const VOp& op) const;
  void publish_held_copies(int newer_groups);
  int64_t layout_threads_ = 0;  // > 0 while layouts are planned for other threads than the CTA's

  // Rule 6: the warp-specialized main loop, its TMA-copied operands and their ring.
  struct TmaOperand {
    const VOp* load = nullptr;
    int alloc = -1;
    int map = -1;
    layout::ComposedLayout layout;
    int swizzle_bytes = 0;
    int64_t bytes = 0;
    bool once = false;           // loaded before the main loop: copied once, not into the ring
    bool early = false;          // a ring operand released in its own iteration (plan_early_release)
    std::vector<int> tile_axes;  // the two buffer axes the tile spans
  };
  struct WarpSpecialization {
    const VOp* loop = nullptr;
    std::vector<TmaOperand> operands;
    int full = -1, empty = -1;  // mbarrier arrays
    int once = -1;              // the mbarrier of the tiles copied once (-1: none)
    int64_t tx_bytes = 0;       // all ring operands of one iteration
    // setmaxnreg of each role: the default split, or more for the consumers when their main
    // loop's estimate needs it (lower_hopper.cpp, most_consumer_registers).
    int consumer_registers = 0, producer_registers = 0;
    int64_t once_tx_bytes = 0;
    // Early release (plan_early_release): the ring operands whose wgmma readers all retire at a
    // wait inside their own iteration (attention's K, read by QKᵀ, whose scores the softmax
    // reads) have their own `early_empty` barrier, which the consumers arrive on in that
    // iteration; the other operands (V) keep `empty`, released by the next iteration. `full`
    // `early_full` and `early_empty` index their slots by their own depth, `early_stages` (K may
    // take fewer buffers than V). -1: one group, released together.
    int early_empty = -1, early_full = -1;
    int early_stages = 0;  // the early rings' depth (options' early_stages, or stages)
    int64_t early_tx_bytes = 0;
    std::unordered_set<const VNode*> early_readers;  // the results of the early operands' dots
    // While an iteration is emitted: its slot, the early readers not yet retired in it, and
    // whether it released its early operands.
    Value current_slot;
    std::unordered_set<const VNode*> early_pending;
    bool early_released = false;
    // Block arguments carrying a dot's result from the previous iteration.
    std::vector<const VNode*> carried_in_flight;
    // The consumers' current iteration while it is emitted: the wgmma results not yet waited
    // for, whether the open group has wgmmas, whether the previous slot was released.
    bool in_iteration = false;
    std::unordered_set<const VNode*> in_flight;
    bool uncommitted = false;
    bool released = false;
    // A wgmma reading its A fragment from registers (the RS form) was issued since the last
    // wgmma.wait_group 0: it may not stay in flight past the iteration's end, where the next
    // iteration writes the same registers.
    bool register_operand_in_flight = false;
    Value previous_slot;
    // overlap=1 (plan_overlap): the loop's ops that run one iteration late (attention's rescale
    // of O and P·V: every op that depends on `late_args`, the block arguments of the dots'
    // accumulators), the values of the iteration they read (P and the rescale factors), carried
    // to the next iteration in the layouts their readers take (carried_layout), and while an
    // iteration is emitted the issue of the previous iteration's late ops, which the first read
    // of a wgmma result triggers.
    std::unordered_set<const VOp*> late;
    std::vector<size_t> late_args;
    std::vector<VValue> deferred;
    std::vector<const VOp*> deferred_readers;  // the late op that reads each first
    size_t loop_memo_depth = 0;
    std::function<void()> issue_late;
    // Persistent CTAs (Kernel::persistent): each role walks the CTA's tiles in a tile loop and
    // its ring position continues from tile to tile. While a tile is emitted: the ring
    // iterations of the CTA's earlier tiles (`ring_base`, added to the main loop's k), the tile
    // loop's var, and the iterations this tile's main loop added to the ring (set by the loop).
    bool persistent = false;
    Value ring_base;
    Value tile_step;
    Value ring_advance;
    int once_empty = -1;  // mbarrier: the consumers are done with the tiles copied once
    bool once_released = false;  // this tile's consumers arrived on once_empty already
    // The results of the main loop's wgmma dots that read a tile copied once (attention's
    // QK^T), when every such dot is of the loop's top level and not late: the first wait that
    // retires them all in an iteration is where the last iteration releases the tiles
    // (release_once_tiles_in_last_iteration). Empty: the tiles are released after the loop.
    std::unordered_set<const VNode*> once_readers;
    // Iteration bodies (and overlap=1's peeled first iteration) emitted so far for the current
    // main loop, and how many of them released the tiles copied once in their last iteration.
    int once_release_bodies = 0, once_release_emitted = 0;
    // The dynamic tile scheduler (Kernel::dynamic_tiles): the workspace counter the producer
    // fetches tiles from, and the two-slot ring that hands each fetched index to every role
    // (tile_full: the producer's elected thread wrote it; tile_empty: every thread of both roles
    // read it).
    bool dynamic_tiles = false;
    Buffer tile_counter;
    int tile_ring = -1;
    int tile_full = -1, tile_empty = -1;
    // The consumers issued TMA stores (rule 7's TMA form): the role waits for them before it
    // ends, and a persistent CTA's next tile before it stages again.
    bool bulk_stores = false;
    // pingpong=1: while an iteration is emitted, whether its warpgroup still has to wait for
    // its turn before the next wgmma (the iteration's first), and whether it still has to pass
    // the turn on once that first group of MMAs is issued.
    bool turn_to_take = false, turn_to_pass = false;
    // Whether each main loop seeds the turns and closes them itself (false in a persistent
    // kernel's tile loop, whose consumers do both once, around the tile loop).
    bool pingpong_per_tile = true;
  };
  WarpSpecialization ws_;
};

// A row-major shared tile of `shape` (16-byte rows read or written 8 rows at a time, by
// ldmatrix or stmatrix) with the swizzle that gives the fewest wavefronts; `description`
// names it and its count (lower_shared.cpp).
layout::ComposedLayout fragment_tile_layout(const std::vector<int64_t>& shape, int bytes,
                                            std::string* description);

// The canonical wgmma layout of a [R, C] tile whose axis 1 is contiguous in global memory, with
// the widest swizzle whose atom divides it: K-major when its mn is axis 0, MN-major (panels of
// one swizzle span of columns) otherwise. TMA fills it box by box (lower_hopper.cpp).
layout::Result<RingLayout> ring_layout(int element_bytes, const std::vector<int64_t>& shape, bool mn_is_axis0);
// TMA's boxes for a tile in `tile`'s layout over buffer axis `outer_axis` and the buffer's last
// (the other axes one element each).
layout::Result<layout::TmaTilePlan> plan_buffer_tile(const Buffer& buffer, int outer_axis,
                                                     const layout::ComposedLayout& tile, int element_bytes);

// The kernel without ops that have no effect and whose results nobody reads (lower.cpp).
KernelPtr remove_dead_ops(KernelPtr kernel);

}  // namespace nautilus::matile::lowering
