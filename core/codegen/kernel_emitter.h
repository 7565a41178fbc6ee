// The CUDA emitter's kernel printer, shared by the files that print each kind of MA op
// (emit_cuda.h says what every construct becomes; nothing here is used outside core/codegen).
//
// One KernelEmitter prints one MA kernel. It walks the kernel with matile::Visitor and prints
// each op after a comment with its MA text; the work is split by what is printed:
//   emit_cuda.cpp           the entry point and the kernel frame: names, register storage,
//                           thread coordinates of layouts, shared-memory addresses, regions
//                           and loops
//   emit_elementwise.cpp    element-wise ops and the index ranges of uniform scalars
//   emit_register_move.cpp  broadcasts, permutes, slices and layout conversions
//   emit_reduce.cpp         reductions: per thread, shuffle butterfly, across warps
//   emit_mma.cpp            mma.sync and the CUDA-core fma fallback
//   emit_copy.cpp           global loads and stores, cp.async, ldmatrix, shared loads/stores
//   emit_hopper.cpp         sm_90a: warp roles, mbarriers, TMA, wgmma, stmatrix, named barriers
//   emit_text.cpp           C++ text of names, constants, casts and separable coordinates
//   cuda_prelude.h          the device helpers every translation unit starts with
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/codegen/cuda_prelude.h"
#include "core/codegen/emit_cuda.h"
#include "core/layout/int_tuple.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"

namespace nautilus::codegen::detail {

using matile::Kernel;
using matile::LayoutKind;
using matile::Module;
using matile::Op;
using matile::OpKind;
using matile::RegisterLayout;
using matile::SharedAlloc;
using matile::SharedRef;
using matile::Value;

// Thrown inside the emitter and turned into a CodegenError at the entry point, so that deep
// helpers need not thread a Result through every string they build.
struct EmitFailure {
  CodegenError::Kind kind;
  std::string message;
};
[[noreturn]] void unsupported(const std::string& message);
[[noreturn]] void invalid(const std::string& message);

// ---------------------------------------------------------------------------------------------
// Text helpers

std::string sanitize(const std::string& name);
std::string str(int64_t value);

// `expression` wrapped in parentheses unless it is a single name or number, so that it can be
// multiplied safely.
std::string parenthesized(const std::string& expression);

// A float literal that round-trips through f32, with the special values spelled as bit patterns
// (NVRTC has no INFINITY macro without extra headers).
std::string float_literal(double value);
const char* c_type(DType dtype);
bool is_narrow_float(DType dtype);

// `expr` (of `dtype`) as a float.
std::string to_float(const std::string& expr, DType dtype);

// A float expression converted (rounded to nearest even) to `dtype`.
std::string from_float(const std::string& expr, DType dtype);
std::string constant_of(double value, DType dtype);

// "((t / 4) % 8) * 16" with the trivial parts left out.
std::string term_text(const std::string& index, int64_t position, int64_t extent, int64_t scale,
                      int64_t bound);

// ---------------------------------------------------------------------------------------------
// Separable coordinates of a TV layout: tile coordinate k of (thread t, slot v) is
//   sum over thread leaves ((t / p) % s) * c  +  sum over slot leaves ((v / p) % s) * c,
// each leaf moving along exactly one axis. Checked against the layout on every (t, v).

struct Term {
  int64_t position = 1;  // product of the extents of the leaves before this one
  int64_t extent = 1;
  int64_t scale = 1;     // coordinate units per step along its axis
};

struct SeparableCoords {
  std::vector<std::vector<Term>> thread_terms;  // per axis
  std::vector<std::vector<Term>> slot_terms;    // per axis
  int64_t threads = 1;
  int64_t slots = 1;
};
int64_t evaluate_terms(const std::vector<Term>& terms, int64_t index);

// Assigns each leaf of `mode` to the tile axis it moves along; false when a leaf straddles axes.
bool split_mode(const layout::Layout& mode, const std::vector<int64_t>& shape,
                std::vector<std::vector<Term>>* terms);
std::optional<SeparableCoords> separable_coords(const layout::TVLayout& tv,
                                                const std::vector<int64_t>& shape);

// The values a uniform index scalar can take: grid and loop variables, constants and the
// arithmetic on them, widened by interval arithmetic (lo <= value <= hi). Used to drop bounds
// checks that can never fail.
struct IndexRange {
  int64_t lo = 0;
  int64_t hi = 0;
};
std::optional<IndexRange> binary_range(scalar::BinaryOp binary, IndexRange a, IndexRange b);
std::string axis_suffix(size_t axis, size_t rank);

// ---------------------------------------------------------------------------------------------
// The printer of one kernel.

class KernelEmitter : public matile::Visitor {
 public:
  KernelEmitter(const Kernel& kernel, std::string symbol, const EmitOptions& options)
      : kernel_(kernel), symbol_(std::move(symbol)), options_(options) {}
  std::string emit(EmittedKernel* launch);
 private:

  // -------------------------------------------------------------------------------------------
  // Names
  std::string unique(const std::string& wanted);
  std::string buffer_name(const scalar::Buffer& buffer);
  std::string shared_name(const SharedAlloc& alloc);
  const std::string& name_of(const Value& value);
  std::string declare(const Value& value);
  static std::string slots_suffix(const Value& value);
  std::string at(const Value& value, const std::string& slot);

  // -------------------------------------------------------------------------------------------
  // Output
  void line(const std::string& text);
  void for_slots(int64_t slots, const std::function<void(const std::string&)>& body);

  // -------------------------------------------------------------------------------------------
  // Grid
  std::vector<std::string> grid_mapping(EmittedKernel* launch);
  std::vector<std::string> grouped_grid_mapping(EmittedKernel* launch, bool direct);
  std::string launch_coordinate(size_t axis, const std::string& in_order) const;
  void band_coordinates(const std::string& launched, const std::string& rest, bool rest_is_axis2,
                        std::vector<std::string>* out);
  // `tile`: the launch index variable of a dynamic tile loop (its first carried value); empty
  // for the static walk.
  void tile_loop_header(const std::string& var, const std::string& tile = "");

  // -------------------------------------------------------------------------------------------
  // Layout coordinates

  struct LayoutInfo {
    SeparableCoords coords;
    std::vector<std::string> thread_vars;  // per axis
  };
  const LayoutInfo& layout_info(const layout::TVLayout& tv, const std::vector<int64_t>& shape,
                                const std::string& what);
  static std::string coordinate(const LayoutInfo& info, size_t axis, const std::string& slot);
  std::vector<std::string> coordinates(const Value& value, const std::string& slot,
                                       const std::string& what);
  std::string element_index(const Value& value, const std::string& slot, const std::string& what);

  // -------------------------------------------------------------------------------------------
  // Shared memory addressing
  const SharedAlloc& alloc_of(const SharedRef& ref);
  std::string shared_offset(const SharedRef& ref, const std::vector<std::string>& tile);
  std::string hoisted(const std::string& type, const std::string& wanted, const std::string& expression);
  std::string shared_window_base(const SharedAlloc& alloc);

  // Tile coordinates of one access split into a per-thread part and a constant: axis a is
  // thread_exprs[a] (valid at the top of the kernel; thread_value(t, a) its value in thread t)
  // plus constants[a].
  struct SplitCoords {
    std::vector<std::string> thread_exprs;
    std::function<int64_t(int64_t, size_t)> thread_value;
    int64_t threads = 1;
    std::vector<int64_t> constants;
  };
  std::vector<int64_t> shared_strides(const SharedAlloc& alloc);
  bool panel_strides(const SharedAlloc& alloc, const SharedRef& ref, const SplitCoords& coords,
                     std::vector<int64_t>* strides, std::vector<int64_t>* constants);
  std::string shared_address_of(const SharedRef& ref, const SplitCoords& coords);
  void check_device_swizzle(const layout::Swizzle& swizzle);

  // -------------------------------------------------------------------------------------------
  // Regions and ops

  // Every op is preceded by its MA text as a comment (and its spec statement when that
  // changes). A Yield prints nothing: its For assigns the carried values after the body.
  using matile::Visitor::visit;
  void visit(const Op& op) override;
  void provenance_comment(const Op& op);
  void op_comment(const Op& op);

  void visit_elementwise(const Op& op) override { elementwise(op); }
  void visit_register_move(const Op& op) override { register_move(op); }
  void visit_ConvertLayout(const Op& op) override {
    return op.via_shared ? convert_via_shared(op) : register_move(op);
  }
  void visit_Reduce(const Op& op) override { reduce(op); }
  void visit_Mma(const Op& op) override { mma(op); }
  void visit_FmaDot(const Op& op) override { fma_dot(op); }
  void visit_GlobalLoad(const Op& op) override { global_load(op); }
  void visit_GlobalStore(const Op& op) override { global_store(op); }
  void visit_AsyncCopy(const Op& op) override { async_copy(op); }
  void visit_CommitGroup(const Op&) override { line("cp_async_commit();"); }
  void visit_WaitGroup(const Op& op) override { line("cp_async_wait<" + str(op.extent) + ">();"); }
  void visit_Barrier(const Op&) override { line("__syncthreads();"); }
  void visit_SharedLoad(const Op& op) override { shared_load(op); }
  void visit_SharedStore(const Op& op) override { shared_store(op); }
  void visit_For(const Op& op) override { for_loop(op); }
  void visit(const matile::Region& region) override;
  // Hopper (emit_hopper.cpp)
  void visit_Roles(const Op& op) override;
  void visit_MBarrierInit(const Op& op) override;
  void visit_MBarrierArrive(const Op& op) override;
  void visit_MBarrierWait(const Op& op) override;
  void visit_NamedBarrier(const Op& op) override;
  void visit_FenceProxyAsync(const Op& op) override;
  void visit_TmaLoad(const Op& op) override;
  void visit_TmaStore(const Op& op) override;
  void visit_BulkCommitGroup(const Op& op) override;
  void visit_BulkWaitGroup(const Op& op) override;
  void visit_WgmmaFence(const Op& op) override;
  void visit_Wgmma(const Op& op) override;
  void visit_WgmmaCommitGroup(const Op& op) override;
  void visit_WgmmaWaitGroup(const Op& op) override;
  void visit_StMatrix(const Op& op) override;
  void visit_CtaIndex(const Op& op) override;
  void visit_TileFetch(const Op& op) override;
  void visit_TileRead(const Op& op) override;
  // The int slot of the tile ring a TileFetch / TileRead names.
  std::string tile_ring_slot(const Op& op);
  // Every kind above has its CUDA; an op reaching here is a kind without any.
  void visit_op(const Op& op) override {
    unsupported(std::string("no CUDA for MA op kind ") + matile::op_kind_name(op.kind));
  }

  // Element-wise ops and index ranges (emit_elementwise.cpp)
  std::string unary_expression(scalar::UnaryOp unary, const std::string& x, DType dtype);
  std::string binary_expression(scalar::BinaryOp binary, const std::string& a, const std::string& b,
                                DType dtype);
  void elementwise(const Op& op);
  bool paired_narrowing(const Op& op);
  bool paired_int8_widening(const Op& op);
  bool paired_int4_widening(const Op& op);
  std::optional<IndexRange> range_given(const Value& value, const Value& predicate);
  void track_range(const Op& op);
  std::optional<IndexRange> range_of(const Value& value);
  std::optional<int64_t> largest_by_grid_cases(const Value& value);
  // Index tiles known as one per-thread expression plus a constant per slot (affine_index).
  struct AffineIndex {
    std::string base;              // the same in every slot: const scalars and thread coordinates
    std::vector<int64_t> offsets;  // per slot; one for a uniform scalar
    int64_t offset(int64_t slot) const {
      return offsets.size() == 1 ? offsets[0] : offsets[static_cast<size_t>(slot)];
    }
  };
  const AffineIndex* affine_index(const Value& value);
  void record_affine_index(const Op& op);
  bool affine_compare(const Op& op);
  // Index tiles read only by affine compares (or by other such tiles) are never written out:
  // their affine form is all the compares need.
  bool has_affine_form(const Value& value) const;
  bool is_affine_compare(const Op& op) const;
  void find_folded_index_tiles();
  std::set<const matile::ValueNode*> folded_index_tiles_;
  // The bytes of an int8 tile that a grouped shared read loaded (shared_load), and the nibbles
  // of an int4 tile read in runs from global memory (planned_int4_load): per slot, the 32-bit
  // word it arrived in and its byte (or nibble) there, so that a widening cast takes them from
  // the words (paired_int8_widening, paired_int4_widening) instead of from extracted,
  // sign-extended slots. The words are locals of the block the load was emitted in, so the
  // entries hold for the next op only: visit() moves them to previous_loaded_bytes_ and clears
  // them (a register move passes them on to its result).
  struct LoadedByte {
    std::string word;
    int byte = 0;
    int nibble = -1;  // an int4 slot: its nibble 0..7 of `word`
  };
  std::map<const matile::ValueNode*, std::vector<LoadedByte>> loaded_bytes_, previous_loaded_bytes_;

  // Register moves and layout conversions (emit_register_move.cpp)
  std::vector<int64_t> thread_independent(const std::vector<int32_t>& table, int64_t slots,
                                          const std::string& what);
  void table_copy(const Value& result, const Value& source, const std::vector<int64_t>& table);
  std::vector<int64_t> needed_elements(const Op& op);
  void register_move(const Op& op);
  static bool same_for_every_thread(const std::vector<int32_t>& table, int64_t slots);
  void select_by_element(const Op& op);
  void convert_via_shared(const Op& op);

  // Reductions (emit_reduce.cpp)
  std::string combine(vrtile::ReduceOp reduce_op, DType dtype, const std::string& a,
                      const std::string& b);
  void reduce(const Op& op);
  void cross_warp_reduce(const Op& op, const Value& result, DType dtype, double identity);

  // Tensor-core and CUDA-core dot products (emit_mma.cpp)
  void mma(const Op& op);
  void fma_dot(const Op& op);

  // Global and shared memory accesses (emit_copy.cpp)

  // Buffer indices and validity of tile coordinate `c` of a window access.
  struct WindowIndex {
    std::vector<std::string> indices;
    std::string valid;  // empty: always valid
  };
  WindowIndex window(const Op& op, const std::vector<std::string>& c);
  std::string flat_offset(const scalar::Buffer& buffer, const std::vector<std::string>& indices);
  void global_load(const Op& op);
  std::pair<std::string, std::string> single_writer(const RegisterLayout& layout,
                                                    const std::string& slot);

  // A window access of a register tile, slot by slot, in 32-bit indices: the flat index of slot
  // v is `base + slot_flat[v]` (base: the window's uniform offsets plus the hoisted thread part)
  // and slot_check[v] the bounds it can fail (empty: it never can, by the ranges of the offsets
  // and the layout's reach). Slot pairs holding neighbouring elements at even indices in every
  // thread can be accessed together. nullopt for gathers and buffers of 2^31 elements or more.
  struct WindowPlan {
    std::string base;
    std::string start;  // the element offset `base` adds to the buffer ("" for none)
    std::vector<int64_t> slot_flat;
    std::vector<std::string> slot_check;
    int64_t start_alignment = 1;  // base is a multiple of it (elements) in every thread
    // The most elements (a power of two up to `most`) from slot v on that one access of
    // their total width reads or writes: consecutive slots at consecutive addresses, none
    // checked, the first address a multiple of the count (so the access is aligned, given
    // a buffer base aligned to 16 bytes, as every allocation is).
    int64_t vector(int64_t v, int64_t most) const {
      const auto i = static_cast<size_t>(v);
      int64_t n = most;
      for (; n > 1; n /= 2) {
        if (start_alignment % n != 0 || i + static_cast<size_t>(n) > slot_flat.size() || slot_flat[i] % n != 0) continue;
        bool ok = true;
        for (size_t k = 0; k < static_cast<size_t>(n) && ok; ++k) {
          ok = slot_check[i + k].empty() && slot_flat[i + k] == slot_flat[i] + static_cast<int64_t>(k);
        }
        if (ok) break;
      }
      return n;
    }
    // Like vector(), for a run whose slots may be checked: the checks of the axes before the
    // last are the same for every slot and the last axis' index steps by one from slot to slot,
    // so the run is in bounds exactly when its last element is.
    std::vector<std::string> slot_check_rest, slot_check_last;  // slot_check split by axis
    std::vector<int64_t> slot_last;  // the slot's constant index along the last axis
    int64_t checked_vector(int64_t v, int64_t most) const {
      const auto i = static_cast<size_t>(v);
      for (int64_t n = most; n > 1; n /= 2) {
        if (start_alignment % n != 0 || i + static_cast<size_t>(n) > slot_flat.size() || slot_flat[i] % n != 0) continue;
        bool ok = true;
        for (size_t k = 0; k < static_cast<size_t>(n) && ok; ++k) {
          ok = slot_check_rest[i + k] == slot_check_rest[i] &&
               slot_flat[i + k] == slot_flat[i] + static_cast<int64_t>(k) &&
               slot_last[i + k] == slot_last[i] + static_cast<int64_t>(k);
        }
        if (ok) return n;
      }
      return 1;
    }
    std::string at(int64_t v) const {
      const int64_t flat = slot_flat[static_cast<size_t>(v)];
      return flat ? base + " + " + str(flat) : base;
    }
    // Slot v's element offset in the buffer, as an expression.
    std::string offset(int64_t v) const {
      const int64_t flat = slot_flat[static_cast<size_t>(v)];
      if (start.empty()) return str(flat);
      return flat ? "(" + start + " + " + str(flat) + ")" : start;
    }
  };
  std::optional<WindowPlan> window_plan(const Op& op, const Value& value, const Value& predicate = nullptr);
  bool planned_window_store(const Op& op, const Value& value);
  void realigned_row_store(const Op& op, const Value& value, const WindowPlan& plan);
  int64_t shared_vector(const Op& op, const Value& result, int64_t v);
  SplitCoords slot_coords(const LayoutInfo& info, int64_t slot);
  std::string element_of_bits(DType dtype, const std::string& word, int64_t element_in_word);
  bool planned_window_load(const Op& op, const Value& result);
  void planned_int4_load(const Op& op, const Value& result, const WindowPlan& plan);
  void packed_int4_shared_load(const Op& op);
  int64_t consecutive_run(const Op& op, const Value& result, int64_t v, int64_t longest,
                          const std::function<bool(int64_t)>& allowed);
  int64_t alignment_of(const Value& value);
  void global_store(const Op& op);
  void async_copy(const Op& op);
  void shared_load(const Op& op);
  void element_shared_load(const Op& op);
  void ldmatrix(const Op& op);
  void shared_store(const Op& op);
  void for_loop(const Op& op);

  // Hopper (emit_hopper.cpp)
 public:
  // Device functions this kernel needs printed before it (wgmma wrappers, by name).
  const std::map<std::string, std::string>& helpers() const { return helpers_; }
 private:
  bool uses_hopper() const;
  // Numbers every op in walk order and records where each value is defined and last used,
  // so that a wgmma accumulator can be updated in place when nothing reads it afterwards.
  void analyze_uses(const matile::Region& region);
  bool dies_at(const Value& value, const Op& op);
  // The kernel-top lines declaring the mbarrier arrays and their shared addresses.
  std::vector<std::string> hopper_frame_lines(EmittedKernel* launch);
  std::string barrier_address(const matile::BarrierRef& ref);
  std::string elected_thread_guard();
  std::string smem_base();
  const matile::TmaMap& tma_map_of(const Op& op);
  std::string tma_map_name(int map);
  void tma_copy(const Op& op, bool load);
  struct WgmmaOperand {
    std::string description;        // for the comment
    std::string runtime_address;    // bytes added to every descriptor at run time
    std::vector<uint64_t> descriptors;  // per executing warpgroup x k16 step (warpgroup-major)
    bool mn_major = false;
  };
  WgmmaOperand wgmma_operand(const Op& op, const SharedRef& ref, bool is_a, int64_t mn_extent,
                             int64_t k, int warpgroups);
  void fence_accumulators(int64_t pending);

  std::map<std::string, std::string> helpers_;
  std::vector<std::string> barrier_names_;   // per Kernel::mbarriers entry: its address variable
  std::vector<std::string> tma_names_;       // per Kernel::tma_maps entry: its parameter
  int64_t role_threads_ = 0;                 // threads executing the current region
  std::vector<const matile::Region*> regions_;  // the regions being printed, innermost last
  std::map<const Op*, int64_t> op_index_;
  std::vector<const Op*> ops_in_order_;                                  // analyze_uses
  std::map<const matile::ValueNode*, const Op*> defining_op_;             // analyze_uses
  std::map<const matile::ValueNode*, std::vector<const Op*>> readers_;   // analyze_uses
  std::map<const matile::ValueNode*, int64_t> last_use_;
  std::map<const matile::ValueNode*, const matile::Region*> def_region_;
  std::set<const matile::ValueNode*> wgmma_values_;
  std::set<const matile::ValueNode*> wgmma_accumulator_inputs_;  // the c of some Wgmma
  // Per wgmma.fence: the register A operands of the wgmmas it opens (up to the commit). Their
  // fragments are packed into 32-bit registers above the fence, and the wgmmas read the packed
  // names (packed_a_, cleared at the commit): packed between the wgmmas, ptxas has to inject a
  // warpgroup.arrive before each of them (C7519).
  std::map<const Op*, std::vector<const matile::ValueNode*>> fence_register_a_;
  std::map<const matile::ValueNode*, std::string> packed_a_;
  // Zero tiles (`full 0.0`) read only as wgmma accumulators: left unwritten, the wgmmas that
  // read them start with scale-d 0 (the accumulator's old value ignored).
  std::set<const matile::ValueNode*> wgmma_zero_accumulators_;
  std::set<const matile::ValueNode*> zero_tiles_;      // f32 tiles of `full 0.0`
  std::set<const matile::ValueNode*> read_otherwise_;  // values read other than as a wgmma's c
  // Accumulators that wgmmas may be writing, with the wgmma group (counted in program text) of
  // their last write: fenced at the wgmma.wait_group that retires it.
  struct Accumulator {
    std::string name;
    int64_t slots = 0;
    int64_t group = 0;
  };
  std::vector<Accumulator> accumulators_;
  int64_t committed_groups_ = 0;
  std::set<int> used_barrier_ids_;  // named barrier ids the kernel's ops use
  int role_barrier_id_ = 0;         // the current multi-warpgroup role's own barrier (0: none)

  const Kernel& kernel_;
  std::string symbol_;
  const EmitOptions& options_;
  std::ostringstream body_;
  int indent_ = 1;
  int last_statement_ = -1;
  bool uses_warp_ = false;
  std::set<std::string> used_;
  std::map<const matile::ValueNode*, std::string> names_;
  std::map<const scalar::BufferNode*, std::string> buffer_names_;
  std::map<const SharedAlloc*, std::string> shared_names_;
  std::map<std::string, LayoutInfo> layouts_;
  std::vector<std::string> layout_lines_;
  std::vector<std::string> hoisted_lines_;
  std::map<std::string, std::string> hoisted_names_;  // expression -> hoisted variable
  std::set<std::tuple<int, int, int>> checked_swizzles_;  // (bits, base, shift) of swizzles checked
  std::map<const matile::ValueNode*, IndexRange> ranges_;
  std::map<const matile::ValueNode*, const Op*> definitions_;  // uniform scalars
  std::map<const matile::ValueNode*, AffineIndex> affine_indices_;  // see affine_index
  std::map<const matile::ValueNode*, const Op*> loop_of_var_;  // a For's variable -> the For
  std::map<const matile::ValueNode*, int64_t> grid_extents_;   // grid variables
  std::map<const matile::ValueNode*, int64_t> alignments_;     // see alignment_of
};

}  // namespace nautilus::codegen::detail
