// Text, grid and JSON forms of layouts, and the parser of the text form.
//
// Text is CuTe's notation and round-trips through the parser:
//   IntTuple        8   (4,8)   (2,(3,4))   ()
//   Layout          Shape:Stride, e.g. 8:1   (4,8):(1,4)   ((2,2),3):((24,2),8)
//   Swizzle         Sw<B,M,S>, e.g. Sw<3,4,3>
//   ComposedLayout  Sw<B,M,S> o Layout, e.g. Sw<3,3,3> o (8,64):(64,1)
//   TVLayout        Layout on Tile, e.g. ((4,8),(2,2)):((32,1),(16,8)) on (16,8)
// The printer writes no spaces except around " o " and " on "; the parser accepts spaces
// between any two tokens and CuTe's static-integer prefix (`_4` reads as 4), so CuTe's own
// print() output parses.
//
// Grids show a 2-D layout as a table: the row index down the left, the column index across the
// top, and in each cell what sits at (row, col) -- the offset for a layout, the owning thread and
// value `T<t>V<v>` for a TV layout. For (2,3):(3,1):
//
//   (2,3):(3,1)
//     | 0 1 2
//   --+------
//   0 | 0 1 2
//   1 | 3 4 5
//
// JSON (for the GUI's layout and thread/value views):
//   Layout          {"text", "shape", "stride", "size", "cosize"}; shapes and strides are
//                   numbers or nested arrays.
//   Swizzle         {"text", "bits", "base", "shift"}
//   ComposedLayout  {"text", "swizzle", "layout"}
//   TVLayout        {"text", "tile", "threads", "values", "layout", "grid"}; for a 2-D tile
//                   grid[row][col] lists the [thread, value] pairs holding that element
//                   (empty when none does, several when threads replicate it).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/layout/int_tuple.h"
#include "core/layout/layout.h"
#include "core/layout/result.h"
#include "core/layout/swizzle.h"
#include "core/layout/tv_layout.h"

namespace nautilus::layout {

std::string to_string(const Layout& layout);
std::string to_string(const Swizzle& swizzle);
std::string to_string(const ComposedLayout& layout);
std::string to_string(const TVLayout& layout);

// Parsers of the text forms above; errors name the column (1-based) and what was expected.
Result<IntTuple> parse_int_tuple(std::string_view text);
Result<Layout> parse_layout(std::string_view text);
// Also accepts a plain layout, as the identity swizzle Sw<0,0,0> o layout. (The printer always
// writes the swizzle, identity or not, so printed text round-trips exactly.)
Result<ComposedLayout> parse_composed_layout(std::string_view text);

// Grids of rank-2 layouts (an error for any other rank). Lines end in '\n'; columns are
// right-aligned to the widest cell.
Result<std::string> render_grid(const Layout& layout);
Result<std::string> render_grid(const ComposedLayout& layout);
// The first owner (lowest thread, then value) of each element; "." where no thread holds it.
Result<std::string> render_grid(const TVLayout& layout);

nlohmann::ordered_json to_json(const IntTuple& tuple);
nlohmann::ordered_json to_json(const Layout& layout);
nlohmann::ordered_json to_json(const Swizzle& swizzle);
nlohmann::ordered_json to_json(const ComposedLayout& layout);
nlohmann::ordered_json to_json(const TVLayout& layout);

}  // namespace nautilus::layout
