#include "core/layout/wgmma.h"

#include <optional>
#include <utility>
#include <sstream>
#include <string>
#include <vector>

#include "core/layout/printer.h"

namespace nautilus::layout {

namespace {

constexpr int64_t kChunkBytes = 16;          // a core matrix row: 16 bytes
constexpr int64_t kOperandKBytes = 32;       // the k extent of one wgmma, in bytes
constexpr int64_t kDescriptorFieldLimit = int64_t{1} << 18;  // 14 bits of (bytes >> 4)

Layout scaled(const Layout& layout, int64_t factor) {
  std::vector<int64_t> strides = leaves(layout.stride());
  for (int64_t& d : strides) d *= factor;
  return Layout(layout.shape(), unflatten(strides, layout.stride()));
}

// The stride of a sublayout that must step at one stride (a tiler leaf of the canonical form,
// possibly refined by composition into several modes); nullopt when it has a single element and
// so no stride at all.
Result<std::optional<int64_t>> single_stride(const Layout& sub, const std::string& what) {
  const Layout simple = coalesce(sub);
  if (simple.size() == 1) return std::optional<int64_t>();
  if (simple.shape().is_tuple()) {
    return layout_error(what + " do not step at one stride (" + to_string(sub) + ")");
  }
  return std::optional<int64_t>(simple.stride().value());
}

// The (rows, cols) extents of a rank-2 tile shape.
Result<std::pair<int64_t, int64_t>> extents_2d(const IntTuple& tile, const std::string& context) {
  if (tile.rank() != 2) return layout_error(context + ": the tile must have rank 2");
  return std::pair<int64_t, int64_t>{product(tile.mode(0)), product(tile.mode(1))};
}

}  // namespace

const char* operand_major_name(OperandMajor major) {
  return major == OperandMajor::K ? "K-major" : "MN-major";
}

// ---- Register fragments ---------------------------------------------------------------------

Result<TVLayout> tile_over_thread_groups(const TVLayout& atom, int64_t groups_m, int64_t groups_n,
                                         const IntTuple& tile) {
  const std::string context = "spreading " + to_string(atom) + " over " +
                              std::to_string(groups_m) + "x" + std::to_string(groups_n) +
                              " thread groups on " + to_string(tile);
  Result<std::pair<int64_t, int64_t>> atom_extent = extents_2d(atom.tile, context);
  if (!atom_extent) return atom_extent.error();
  Result<std::pair<int64_t, int64_t>> extent = extents_2d(tile, context);
  if (!extent) return extent.error();
  const auto [r, c] = *atom_extent;
  const auto [rows, cols] = *extent;
  if (groups_m < 1 || groups_n < 1) return layout_error(context + ": group counts must be >= 1");
  if (rows % (r * groups_m) != 0 || cols % (c * groups_n) != 0) {
    return layout_error(context + ": the tile is not a multiple of the groups' " +
                        std::to_string(r * groups_m) + "x" + std::to_string(c * groups_n) +
                        " block");
  }
  // 1. The atom's (row, col) -> index of the big tile: +1 row is +1, +1 col is +rows.
  const Layout embed(tuple_of(r, c), tuple_of(1, rows));
  Result<Layout> placed = composition(embed, atom.layout);
  if (!placed) return layout_error(context + ": " + placed.error().message);
  // 2. Group (gi, gj) starts at block (gi, gj) of atom tiles; 3. the whole group grid repeats.
  const Layout groups(tuple_of(groups_m, groups_n), tuple_of(r, c * rows));
  const Layout repeats(tuple_of(rows / (r * groups_m), cols / (c * groups_n)),
                       tuple_of(r * groups_m, c * groups_n * rows));
  const Layout tv = concatenate({concatenate({placed->mode(0), groups}),
                                 concatenate({placed->mode(1), repeats})});
  return TVLayout{coalesce(tv, tuple_of(1, 1)), tuple_of(rows, cols)};
}

Result<TVLayout> wgmma_accumulator(int64_t n) {
  if (n < 8 || n > 256 || n % 8 != 0) {
    return layout_error("wgmma m64nNk16 accumulator: N = " + std::to_string(n) +
                        " is not one of 8, 16, ..., 256");
  }
  // Warp w of the warpgroup holds rows 16w..16w+15 as an m16n8 mma.sync accumulator would, and
  // the n8 fragment repeats along N in the value mode.
  return tile_over_thread_groups(mma_m16n8k16_c(), 4, 1, tuple_of(64, n));
}

TVLayout wgmma_a_registers() {
  // Four warps of the mma.sync m16n8k16 A fragment stacked along M; it cannot fail.
  return tile_over_thread_groups(mma_m16n8k16_a(), 4, 1, tuple_of(64, 16)).value();
}

// ---- Canonical shared-memory layouts -----------------------------------------------------------

Result<IntTuple> wgmma_shared_atom_shape(OperandMajor major, SwizzleMode swizzle,
                                         int element_bytes) {
  const bool readable = major == OperandMajor::K
                            ? (element_bytes == 1 || element_bytes == 2 || element_bytes == 4)
                            : element_bytes == 2;
  if (!readable) {
    return layout_error(std::string("wgmma does not read ") + operand_major_name(major) + " " +
                        std::to_string(element_bytes) +
                        "-byte operands (K-major: 1, 2 or 4 bytes; MN-major: 16-bit only)");
  }
  const int64_t row = swizzle_span_bytes(swizzle) / element_bytes;  // W/e elements
  return major == OperandMajor::K ? tuple_of(8, row) : tuple_of(row, 8);
}

Result<ComposedLayout> wgmma_shared_layout(OperandMajor major, SwizzleMode swizzle,
                                           int element_bytes, int64_t mn, int64_t k) {
  Result<IntTuple> atom = wgmma_shared_atom_shape(major, swizzle, element_bytes);
  if (!atom) return atom.error();
  const int64_t atom_mn = atom->mode(0).value(), atom_k = atom->mode(1).value();
  if (mn < 1 || k < 1 || mn % atom_mn != 0 || k % atom_k != 0) {
    return layout_error(std::string("wgmma ") + operand_major_name(major) + " " +
                        swizzle_mode_name(swizzle) + " tile (" + std::to_string(mn) + "," +
                        std::to_string(k) + ") is not a multiple of its atom " + to_string(*atom));
  }
  const int64_t row = swizzle_span_bytes(swizzle) / element_bytes;  // W/e
  Layout layout;
  if (major == OperandMajor::K) {
    // Rows of W bytes; 8-row atoms stacked along mn, then the next W bytes of k after all rows.
    layout = Layout(tuple_of(tuple_of(8, mn / 8), tuple_of(row, k / row)),
                    tuple_of(tuple_of(row, 8 * row), tuple_of(1, mn * row)));
  } else {
    // k-rows of W bytes of mn; 8-row atoms stacked along k, then the next W bytes of mn.
    layout = Layout(tuple_of(tuple_of(row, mn / row), tuple_of(8, k / 8)),
                    tuple_of(tuple_of(1, k * row), tuple_of(row, 8 * row)));
  }
  Result<Swizzle> swizzle_in_elements = to_element_units(byte_swizzle(swizzle), element_bytes);
  if (!swizzle_in_elements) return swizzle_in_elements.error();
  return ComposedLayout{*swizzle_in_elements, coalesce(layout, tuple_of(1, 1))};
}

// ---- Descriptors -------------------------------------------------------------------------------

namespace {

// The 2-bit layout type of the descriptor (PTX ISA "Matrix Descriptor Format").
uint64_t layout_type_bits(SwizzleMode mode) {
  switch (mode) {
    case SwizzleMode::None: return 0;
    case SwizzleMode::B128: return 1;
    case SwizzleMode::B64: return 2;
    case SwizzleMode::B32: return 3;
  }
  return 0;
}

SwizzleMode mode_of_layout_type(uint64_t bits) {
  switch (bits & 3) {
    case 1: return SwizzleMode::B128;
    case 2: return SwizzleMode::B64;
    case 3: return SwizzleMode::B32;
    default: return SwizzleMode::None;
  }
}

constexpr uint64_t field(int64_t bytes) { return (static_cast<uint64_t>(bytes) >> 4) & 0x3FFF; }

// The tile split into blocks of (mn_extent, k_extent): ((mn_extent, mn_blocks), (k_extent,
// k_blocks)) by mode, with the checks every caller needs.
struct Blocks {
  Layout block;        // (mn, k) inside one block -> element offset from the block's start
  Layout mn_blocks;    // mn block index -> element offset of its start
  Layout k_blocks;     // k block index -> element offset of its start
  SwizzleMode swizzle;
};

Result<Blocks> split_into_blocks(const ComposedLayout& tile, int element_bytes,
                                 OperandMajor major, int64_t mn_extent,
                                 const std::string& context) {
  // Element sizes and major-ness that wgmma cannot read at all fail here, with the reason.
  Result<IntTuple> atom = wgmma_shared_atom_shape(major, SwizzleMode::None, element_bytes);
  if (!atom) return layout_error(context + ": " + atom.error().message);
  Result<SwizzleMode> mode = swizzle_mode_of(tile.swizzle, element_bytes);
  if (!mode) return layout_error(context + ": " + mode.error().message);
  if (tile.layout.rank() != 2) {
    return layout_error(context + ": the tile layout must have rank 2, (mn, k)");
  }
  const int64_t mn = tile.layout.mode(0).size(), k = tile.layout.mode(1).size();
  const int64_t k_extent = wgmma_k_extent(element_bytes);
  if (mn_extent < 8 || mn_extent % 8 != 0 || mn % mn_extent != 0) {
    return layout_error(context + ": the block's mn extent " + std::to_string(mn_extent) +
                        " must be a multiple of 8 that divides the tile's " + std::to_string(mn));
  }
  if (k % k_extent != 0) {
    return layout_error(context + ": the tile's k extent " + std::to_string(k) +
                        " is not a multiple of one wgmma's " + std::to_string(k_extent));
  }
  Result<Layout> divided =
      logical_divide(tile.layout, Tiler{Layout(mn_extent, 1), Layout(k_extent, 1)});
  if (!divided) return layout_error(context + ": " + divided.error().message);
  return Blocks{concatenate({divided->mode(0).mode(0), divided->mode(1).mode(0)}),
                divided->mode(0).mode(1), divided->mode(1).mode(1), *mode};
}

}  // namespace

uint64_t WgmmaDescriptor::encode() const {
  return field(start_address) | field(leading_byte_offset) << 16 |
         field(stride_byte_offset) << 32 | (static_cast<uint64_t>(base_offset) & 7) << 49 |
         layout_type_bits(swizzle) << 62;
}

WgmmaDescriptor WgmmaDescriptor::decode(uint64_t bits) {
  WgmmaDescriptor d;
  d.start_address = static_cast<int64_t>(bits & 0x3FFF) << 4;
  d.leading_byte_offset = static_cast<int64_t>((bits >> 16) & 0x3FFF) << 4;
  d.stride_byte_offset = static_cast<int64_t>((bits >> 32) & 0x3FFF) << 4;
  d.base_offset = static_cast<int>((bits >> 49) & 7);
  d.swizzle = mode_of_layout_type(bits >> 62);
  return d;
}

std::string to_string(const WgmmaDescriptor& d) {
  std::ostringstream text;
  text << "start 0x" << std::hex << d.start_address << std::dec << " LBO "
       << d.leading_byte_offset << " SBO " << d.stride_byte_offset << " base " << d.base_offset
       << " " << swizzle_mode_name(d.swizzle);
  return text.str();
}

int64_t wgmma_k_extent(int element_bytes) {
  return element_bytes > 0 ? kOperandKBytes / element_bytes : 0;
}

Result<WgmmaDescriptor> wgmma_descriptor(const ComposedLayout& tile, int element_bytes,
                                         OperandMajor major, int64_t tile_start_address,
                                         int64_t mn_extent, int64_t mn_block, int64_t k_block) {
  const std::string context = std::string("wgmma descriptor of ") + operand_major_name(major) +
                              " tile " + to_string(tile) + " (" +
                              std::to_string(element_bytes) + "-byte elements, block " +
                              std::to_string(mn_extent) + "x" +
                              std::to_string(wgmma_k_extent(element_bytes)) + " at (" +
                              std::to_string(mn_block) + "," + std::to_string(k_block) + "))";
  Result<Blocks> blocks = split_into_blocks(tile, element_bytes, major, mn_extent, context);
  if (!blocks) return blocks.error();
  const SwizzleMode mode = blocks->swizzle;
  if (mn_block < 0 || mn_block >= blocks->mn_blocks.size() || k_block < 0 ||
      k_block >= blocks->k_blocks.size()) {
    return layout_error(context + ": the block lies outside the tile");
  }
  const int64_t alignment = swizzle_repeat_bytes(mode);
  if (tile_start_address < 0 || tile_start_address % alignment != 0) {
    return layout_error(context + ": the tile starts at byte " +
                        std::to_string(tile_start_address) + ", not a multiple of " +
                        std::to_string(alignment) + " (the " + swizzle_mode_name(mode) +
                        " pattern repeats every " + std::to_string(alignment) +
                        " bytes and must start at such an address)");
  }

  // 1. Split the block into the modes of its canonical form (PTX ISA "Canonical Layouts").
  const int64_t e = element_bytes;
  const int64_t chunk = kChunkBytes / e;                    // T: elements of 16 bytes
  const int64_t span = swizzle_span_bytes(mode);            // W
  const int64_t row = span / e;                             // W/e: elements of one W-byte row
  const int64_t k_extent = wgmma_k_extent(element_bytes);   // always 2 chunks of k
  Tiler canonical;
  if (major == OperandMajor::K) {
    canonical = {Layout(tuple_of(8, mn_extent / 8), tuple_of(1, 8)),
                 Layout(tuple_of(chunk, k_extent / chunk), tuple_of(1, chunk))};
  } else {
    if (mn_extent % row != 0) {
      return layout_error(context + ": an MN-major " + swizzle_mode_name(mode) +
                          " block spans whole " + std::to_string(span) + "-byte rows of mn (" +
                          std::to_string(row) + " elements); " + std::to_string(mn_extent) +
                          " is not a multiple");
    }
    canonical = {Layout(tuple_of(chunk, row / chunk, mn_extent / row), tuple_of(1, chunk, row)),
                 Layout(tuple_of(8, k_extent / 8), tuple_of(1, 8))};
  }
  Result<Layout> split = composition(blocks->block, canonical);
  if (!split) {
    return layout_error(context + ": not a canonical wgmma layout: " + split.error().message);
  }
  // 2. Read the stride of each canonical mode (in elements).
  auto stride_of = [&](int outer, int inner,
                       const std::string& what) -> Result<std::optional<int64_t>> {
    Result<std::optional<int64_t>> s = single_stride(split->mode(outer).mode(inner), what);
    if (!s) return layout_error(context + ": not canonical: " + s.error().message);
    if (s->has_value() && **s < 0) {
      return layout_error(context + ": not canonical: " + what + " step backwards");
    }
    return s;
  };
  auto expect = [&](const std::optional<int64_t>& stride, int64_t wanted,
                    const std::string& what) -> std::optional<LayoutError> {
    if (!stride.has_value() || *stride == wanted) return std::nullopt;
    return layout_error(context + ": not canonical for " + swizzle_mode_name(mode) + ": " + what +
                        " are " + std::to_string(*stride * e) + " bytes apart, not " +
                        std::to_string(wanted * e));
  };
  // 3. The fixed strides must be the canonical ones; LBO and SBO are the free ones, in bytes. A
  //    free mode of a single step (one 8-row group, one W-byte row of mn) is never used by the
  //    hardware and gets the compact value.
  WgmmaDescriptor descriptor;
  descriptor.swizzle = mode;
  if (major == OperandMajor::K) {
    Result<std::optional<int64_t>> rows = stride_of(0, 0, "the 8 rows of a core matrix");
    Result<std::optional<int64_t>> groups = stride_of(0, 1, "the 8-row groups along mn");
    Result<std::optional<int64_t>> elements = stride_of(1, 0, "the elements of a 16-byte chunk");
    Result<std::optional<int64_t>> chunks = stride_of(1, 1, "the 16-byte chunks along k");
    for (const auto* r : {&rows, &groups, &elements, &chunks}) {
      if (!*r) return r->error();
    }
    if (auto bad = expect(*elements, 1, "the elements of a 16-byte chunk")) return *bad;
    if (auto bad = expect(*rows, row, "the rows of a core matrix")) return *bad;
    // Swizzled: the k16 slice is 32 consecutive bytes of a W-byte row (the hardware ignores
    // LBO); interleaved: the second chunk is anywhere, LBO away.
    if (mode != SwizzleMode::None) {
      if (auto bad = expect(*chunks, chunk, "the two 16-byte chunks of k")) return *bad;
    }
    descriptor.leading_byte_offset = chunks->value_or(chunk) * e;
    descriptor.stride_byte_offset = groups->value_or(8 * row) * e;
  } else {
    Result<std::optional<int64_t>> elements = stride_of(0, 0, "the elements of a 16-byte chunk");
    Result<std::optional<int64_t>> chunks = stride_of(0, 1, "the 16-byte chunks of an mn row");
    Result<std::optional<int64_t>> spans = stride_of(0, 2, "the W-byte rows along mn");
    Result<std::optional<int64_t>> rows = stride_of(1, 0, "the 8 k-rows of a core matrix");
    Result<std::optional<int64_t>> groups = stride_of(1, 1, "the 8-row groups along k");
    for (const auto* r : {&elements, &chunks, &spans, &rows, &groups}) {
      if (!*r) return r->error();
    }
    if (auto bad = expect(*elements, 1, "the elements of a 16-byte chunk")) return *bad;
    if (auto bad = expect(*chunks, chunk, "the 16-byte chunks of an mn row")) return *bad;
    if (auto bad = expect(*rows, row, "the k-rows of a core matrix")) return *bad;
    // The roles of LBO and SBO swap between the interleaved and the swizzled MN-major types.
    const int64_t span_step = spans->value_or(8 * row) * e;
    const int64_t group_step = groups->value_or(8 * row) * e;
    descriptor.leading_byte_offset = mode == SwizzleMode::None ? group_step : span_step;
    descriptor.stride_byte_offset = mode == SwizzleMode::None ? span_step : group_step;
  }
  descriptor.start_address =
      tile_start_address + (blocks->mn_blocks(mn_block) + blocks->k_blocks(k_block)) * e;
  // 4. What the descriptor can encode: 16-byte multiples in 14-bit fields.
  for (auto [value, name] : {std::pair{descriptor.start_address, "start address"},
                             std::pair{descriptor.leading_byte_offset, "LBO"},
                             std::pair{descriptor.stride_byte_offset, "SBO"}}) {
    if (value % kChunkBytes != 0 || value >= kDescriptorFieldLimit) {
      return layout_error(context + ": the " + std::string(name) + " of " +
                          std::to_string(value) +
                          " bytes is not a multiple of 16 below 256 KiB, as the descriptor needs");
    }
  }
  // 5. Read every element back the way the hardware will. The stride checks above imply this;
  //    it stays as the guarantee that no descriptor which reads other data is ever returned.
  const int64_t mn0 = mn_block * mn_extent, k0 = k_block * k_extent;
  for (int64_t kk = 0; kk < k_extent; ++kk) {
    for (int64_t m = 0; m < mn_extent; ++m) {
      Result<int64_t> offset = tile.evaluate(tuple_of(mn0 + m, k0 + kk));
      if (!offset) return layout_error(context + ": " + offset.error().message);
      const int64_t expected = tile_start_address + e * *offset;
      const int64_t read = wgmma_descriptor_address(descriptor, major, element_bytes, m, kk);
      if (read != expected) {
        return layout_error(context + ": not canonical: the hardware would read element (" +
                            std::to_string(mn0 + m) + "," + std::to_string(k0 + kk) +
                            ") at byte " + std::to_string(read) + ", the layout holds it at " +
                            std::to_string(expected));
      }
    }
  }
  return descriptor;
}

Result<Layout> wgmma_block_offsets(const ComposedLayout& tile, int element_bytes,
                                   OperandMajor major, int64_t mn_extent) {
  const std::string context = std::string("wgmma block offsets of ") +
                              operand_major_name(major) + " tile " + to_string(tile);
  Result<Blocks> blocks = split_into_blocks(tile, element_bytes, major, mn_extent, context);
  if (!blocks) return blocks.error();
  // Only tiles whose first block wgmma can read have offsets worth giving.
  Result<WgmmaDescriptor> first = wgmma_descriptor(tile, element_bytes, major, 0, mn_extent);
  if (!first) return first.error();
  return coalesce(scaled(concatenate({blocks->mn_blocks, blocks->k_blocks}), element_bytes),
                  tuple_of(1, 1));
}

int64_t wgmma_descriptor_address(const WgmmaDescriptor& d, OperandMajor major,
                                 int element_bytes, int64_t mn, int64_t k) {
  const int64_t e = element_bytes;
  const int64_t chunk = kChunkBytes / e;
  const int64_t span = swizzle_span_bytes(d.swizzle);
  const int64_t lbo = d.leading_byte_offset, sbo = d.stride_byte_offset;
  int64_t offset = 0;
  if (major == OperandMajor::K) {
    offset = d.swizzle == SwizzleMode::None
                 ? (mn % 8) * kChunkBytes + (mn / 8) * sbo + (k % chunk) * e + (k / chunk) * lbo
                 : (mn % 8) * span + (mn / 8) * sbo + k * e;
  } else {
    const int64_t row = span / e;
    offset = d.swizzle == SwizzleMode::None
                 ? (mn % chunk) * e + (mn / chunk) * sbo + (k % 8) * kChunkBytes + (k / 8) * lbo
                 : (mn % row) * e + (mn / row) * lbo + (k % 8) * span + (k / 8) * sbo;
  }
  return byte_swizzle(d.swizzle)(d.start_address + offset);
}

}  // namespace nautilus::layout
