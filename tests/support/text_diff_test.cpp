// Unified diffs of two texts: the format `patch` reads, hunks with context, merged neighbours.
#include <gtest/gtest.h>

#include "core/support/text_diff.h"

namespace nautilus {
namespace {

TEST(UnifiedDiff, EqualTextsGiveNoDiff) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "x", "y"), "");
  EXPECT_EQ(unified_diff("", "", "x", "y"), "");
}

TEST(UnifiedDiff, OneChangedLineWithContext) {
  EXPECT_EQ(unified_diff("a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nD\ne\nf\ng\nh\n", "before", "after", 1),
            "--- before\n+++ after\n@@ -3,3 +3,3 @@\n c\n-d\n+D\n e\n");
}

TEST(UnifiedDiff, AddedAndRemovedWholeTexts) {
  EXPECT_EQ(unified_diff("", "x\n", "a", "b"), "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n");
  EXPECT_EQ(unified_diff("x\ny\n", "y\n", "a", "b", 0), "--- a\n+++ b\n@@ -1,1 +0,0 @@\n-x\n");
}

TEST(UnifiedDiff, ChangesCloserThanTwiceTheContextShareOneHunk) {
  // Lines 2 and 6 change; with context 2 the four kept lines between them join the hunks.
  const std::string before = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
  const std::string after = "1\nB\n3\n4\n5\nF\n7\n8\n9\n10\n";
  EXPECT_EQ(unified_diff(before, after, "a", "b", 2),
            "--- a\n+++ b\n@@ -1,8 +1,8 @@\n 1\n-2\n+B\n 3\n 4\n 5\n-6\n+F\n 7\n 8\n");
  // With context 1 they are two hunks.
  EXPECT_EQ(unified_diff(before, after, "a", "b", 1),
            "--- a\n+++ b\n@@ -1,3 +1,3 @@\n 1\n-2\n+B\n 3\n@@ -5,3 +5,3 @@\n 5\n-6\n+F\n 7\n");
}

}  // namespace
}  // namespace nautilus
