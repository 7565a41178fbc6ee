// LowerOptions::explain_layouts (`nautilus lower --explain-layouts`): every register tile of a
// kernel gets a note with its layout, the rule that fixed it and the users that wanted another;
// without the option the kernels carry no such note.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_scheduled;
using nautilus::testing::hand_schedule;

std::vector<std::string> layout_notes(bool explain) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.explain_layouts = explain;
  const driver::Compilation compilation =
      compile_scheduled("assets/specs/attention.nt", hand_schedule("attention"),
                        {"B=1", "H=1", "M=128", "N=128", "D=64"}, options);
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  std::vector<std::string> notes;
  if (!compilation.ok()) return notes;
  for (const KernelPtr& kernel : compilation.ma_module->kernels) {
    for (const std::string& note : kernel->notes) {
      if (note.rfind("layout of %", 0) == 0) notes.push_back(note);
    }
  }
  return notes;
}

bool any_note(const std::vector<std::string>& notes, const std::string& a, const std::string& b = "") {
  for (const std::string& note : notes) {
    if (note.find(a) != std::string::npos && note.find(b) != std::string::npos) return true;
  }
  return false;
}

TEST(ExplainLayouts, EveryRuleThatFixesALayoutIsNamed) {
  EXPECT_TRUE(layout_notes(false).empty());
  const std::vector<std::string> notes = layout_notes(true);
  ASSERT_FALSE(notes.empty());
  // Attention's scores: the mma accumulator; their row max: its slice; the softmax's
  // arithmetic: element-wise from its operands; K's fragment: wanted by the dot.
  EXPECT_TRUE(any_note(notes, "mma_c warps(4,1)", "the accumulator fragment of mma.sync, warps 4 x 1"));
  EXPECT_TRUE(any_note(notes, "the slice along axis 1 of the reduced %"));
  EXPECT_TRUE(any_note(notes, "element-wise: its first placed operand %"));
  EXPECT_TRUE(any_note(notes, "as its B fragment"));
  EXPECT_TRUE(any_note(notes, "carried by loop n_o"));
  // P is kept in the accumulator layout; P·V wants it as its A fragment, which holds the same
  // elements in every thread: read in place, no conversion.
  EXPECT_TRUE(any_note(notes, "wanted mma_a warps(4,1)", "(the same elements per thread: read in place)"));
}

}  // namespace
}  // namespace nautilus::matile
