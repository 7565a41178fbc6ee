// Text, parser, grids and JSON: round trips over the whole family, parse errors, and golden
// text of a set of named layouts (tests/golden/layout/named_layouts.txt).
#include "core/layout/printer.h"

#include <gtest/gtest.h>

#include "tests/common/golden.h"
#include "tests/layout/family.h"

namespace nautilus::layout {
namespace {

Layout L(const char* text) { return parse_layout(text).value(); }

TEST(Printer, RoundTripsEveryLayoutOfTheFamily) {
  for (const Layout& a : testing::small_layouts()) {
    const std::string text = to_string(a);
    const Result<Layout> parsed = parse_layout(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.error().message;
    ASSERT_EQ(*parsed, a) << text;
    ASSERT_EQ(parse_int_tuple(to_string(a.shape())).value(), a.shape());
  }
}

TEST(Printer, ParserAcceptsSpacesAndCuteStaticIntegers) {
  EXPECT_EQ(L(" ( 4 , 8 ) : ( 1 , 4 ) "), L("(4,8):(1,4)"));
  EXPECT_EQ(L("(_4,(_2,_3)):(_1,(_4,_8))"), L("(4,(2,3)):(1,(4,8))"));
  EXPECT_EQ(L("(2,2):(-1,4)").stride(), tuple_of(-1, 4));
  EXPECT_EQ(parse_int_tuple("()").value(), IntTuple::tuple({}));
  EXPECT_EQ(parse_int_tuple("((),3)").value(), tuple_of(IntTuple::tuple({}), 3));
}

TEST(Printer, ParseErrorsNameTheColumn) {
  auto error = [](const char* text) { return parse_layout(text).error().message; };
  EXPECT_EQ(error("(4,8):(1,4"), "column 11: expected ',' or ')' in '(4,8):(1,4'");
  EXPECT_EQ(error("(4,8)(1,4)"), "column 6: expected ':' in '(4,8)(1,4)'");
  EXPECT_EQ(error("(4,x):(1,4)"), "column 4: expected an integer in '(4,x):(1,4)'");
  EXPECT_EQ(error("8:1 extra"), "column 5: unexpected text after the end in '8:1 extra'");
  EXPECT_NE(error("(4,8):(1,4,2)").find("not congruent"), std::string::npos);
  EXPECT_NE(error("(4,0):(1,4)").find("size < 1"), std::string::npos);
  EXPECT_NE(error("99999999999999999999:1").find("out of range"), std::string::npos);
  EXPECT_FALSE(parse_int_tuple("(1,2").ok());
  EXPECT_FALSE(parse_int_tuple("").ok());
}

TEST(Printer, ComposedLayoutsRoundTrip) {
  const ComposedLayout sw{Swizzle{3, 3, 3}, L("(8,64):(64,1)")};
  EXPECT_EQ(to_string(sw), "Sw<3,3,3> o (8,64):(64,1)");
  EXPECT_EQ(parse_composed_layout(to_string(sw)).value(), sw);
  EXPECT_EQ(parse_composed_layout("Sw< 3 , 4 , 3 >o 8:1").value(),
            (ComposedLayout{kSwizzle128B, L("8:1")}));
  EXPECT_EQ(parse_composed_layout("(8,64):(64,1)").value(),
            (ComposedLayout{Swizzle{0, 0, 0}, L("(8,64):(64,1)")}));
  const ComposedLayout none{Swizzle{0, 3, 3}, L("8:1")};
  EXPECT_EQ(parse_composed_layout(to_string(none)).value(), none);
  EXPECT_NE(parse_composed_layout("Sw<3,4,2> o 8:1").error().message.find("|S| must be >= B"),
            std::string::npos);
  EXPECT_NE(parse_composed_layout("Sw<3,4,3> 8:1").error().message.find("expected 'o'"),
            std::string::npos);
}

TEST(Printer, Grids) {
  EXPECT_EQ(render_grid(L("(2,3):(3,1)")).value(),
            "(2,3):(3,1)\n"
            "  | 0 1 2\n"
            "--+------\n"
            "0 | 0 1 2\n"
            "1 | 3 4 5\n");
  EXPECT_FALSE(render_grid(L("8:1")).ok());
  EXPECT_FALSE(render_grid(L("(2,2,2):(1,2,4)")).ok());
  // Hierarchical modes are indexed 1-D along each axis.
  EXPECT_EQ(render_grid(L("((2,2),2):((1,4),2)")).value(),
            "((2,2),2):((1,4),2)\n"
            "  | 0 1\n"
            "--+----\n"
            "0 | 0 2\n"
            "1 | 1 3\n"
            "2 | 4 6\n"
            "3 | 5 7\n");
  EXPECT_EQ(render_grid(ComposedLayout{Swizzle{1, 0, 1}, L("(2,2):(2,1)")}).value(),
            "Sw<1,0,1> o (2,2):(2,1)\n"
            "  | 0 1\n"
            "--+----\n"
            "0 | 0 1\n"
            "1 | 3 2\n");
  // Elements no thread holds print as '.'; replicated ones show their first owner.
  const TVLayout partial = make_tv_layout(L("(2,2):(0,1)"), tuple_of(2, 2)).value();
  EXPECT_EQ(render_grid(partial).value(),
            "(2,2):(0,1) on (2,2)\n"
            "  |    0    1\n"
            "--+----------\n"
            "0 | T0V0    .\n"
            "1 | T0V1    .\n");
  EXPECT_FALSE(render_grid(make_tv_layout(L("(2,2):(1,2)"), IntTuple(4)).value()).ok());
}

TEST(Printer, Json) {
  EXPECT_EQ(
      to_json(L("(4,(2,3)):(1,(4,8))")).dump(),
      R"j({"text":"(4,(2,3)):(1,(4,8))","shape":[4,[2,3]],"stride":[1,[4,8]],"size":24,"cosize":24})j");
  EXPECT_EQ(
      to_json(ComposedLayout{kSwizzle128B, L("8:1")}).dump(),
      R"j({"text":"Sw<3,4,3> o 8:1","swizzle":{"text":"Sw<3,4,3>","bits":3,"base":4,"shift":3},)j"
      R"j("layout":{"text":"8:1","shape":8,"stride":1,"size":8,"cosize":8}})j");
  const TVLayout partial = make_tv_layout(L("(2,2):(0,1)"), tuple_of(2, 2)).value();
  EXPECT_EQ(to_json(partial).dump(),
            R"j({"text":"(2,2):(0,1) on (2,2)","tile":[2,2],"threads":2,"values":2,)j"
            R"j("layout":{"text":"(2,2):(0,1)","shape":[2,2],"stride":[0,1],"size":4,"cosize":2},)j"
            R"j("grid":[[[[0,0],[1,0]],[]],[[[0,1],[1,1]],[]]]})j");
  const auto mma = to_json(mma_m16n8k16_c());
  EXPECT_EQ(mma["threads"], 32);
  EXPECT_EQ(mma["grid"].size(), 16u);
  EXPECT_EQ(mma["grid"][9][3],
            nlohmann::ordered_json::parse("[[5,3]]"));  // row 9, col 3: lane 5, c3
  EXPECT_FALSE(to_json(make_tv_layout(L("(2,2):(1,2)"), IntTuple(4)).value()).contains("grid"));
}

// The golden text: how the named layouts of the design print, as text and as grids.
TEST(Printer, GoldenNamedLayouts) {
  std::string out;
  auto section = [&](const std::string& name, const std::string& body) {
    out += "== " + name + "\n" + body + (body.empty() || body.back() == '\n' ? "" : "\n") + "\n";
  };
  section("column-major 4x8", render_grid(make_layout_left(tuple_of(4, 8))).value());
  section("row-major 4x8", render_grid(make_layout_right(tuple_of(4, 8))).value());
  section("composition (6,2):(8,2) o (4,3):(3,1)",
          to_string(composition(L("(6,2):(8,2)"), L("(4,3):(3,1)")).value()));
  section("logical_divide (4,2,3):(2,1,8) / 4:2",
          to_string(logical_divide(L("(4,2,3):(2,1,8)"), L("4:2")).value()));
  section("logical_product (2,2):(4,1) x 6:1",
          to_string(logical_product(L("(2,2):(4,1)"), L("6:1")).value()));
  section("blocked_product 2x5 row-major over 3x4",
          render_grid(blocked_product(L("(2,5):(5,1)"), L("(3,4):(1,3)")).value()).value());
  section("raked_product 2x5 row-major over 3x4",
          render_grid(raked_product(L("(2,5):(5,1)"), L("(3,4):(1,3)")).value()).value());
  for (const auto& [name, sw] : {std::pair{"SW32", kSwizzle32B}, std::pair{"SW64", kSwizzle64B},
                                 std::pair{"SW128", kSwizzle128B}}) {
    const Swizzle bf16 = to_element_units(sw, 2).value();
    const int64_t row_elements = (int64_t{16} << sw.bits) / 2;
    section(std::string(name) + " bf16 atom",
            to_string(ComposedLayout{bf16, make_layout_right(tuple_of(8, row_elements))}));
  }
  section("SW32 bf16 atom grid",
          render_grid(ComposedLayout{to_element_units(kSwizzle32B, 2).value(),
                                     make_layout_right(tuple_of(8, 16))})
              .value());
  section("mma.m16n8k16 A", render_grid(mma_m16n8k16_a()).value());
  section("mma.m16n8k16 B", render_grid(mma_m16n8k16_b()).value());
  section("mma.m16n8k16 C", render_grid(mma_m16n8k16_c()).value());
  section("ldmatrix.x4 addresses", render_grid(ldmatrix_x4_addresses()).value());
  section("16-byte copy of 8x32 bf16 by 16 threads",
          render_grid(copy_row_major_16b(8, 32, 2, 16).value()).value());
  nautilus::testing::expect_golden("layout/named_layouts.txt", out);
}

}  // namespace
}  // namespace nautilus::layout
