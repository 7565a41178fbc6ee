// Line-based unified diffs of two texts, as `diff -u` prints them.
//
// The pass log shows what each pass did as a diff of the printed IR before and after it; the
// CLI (`nautilus lower --diff-after-all`), the studio's stage view and its compare panel use the
// same function, so the same two texts always give the same hunks.
#pragma once

#include <string>

namespace nautilus {

// A unified diff ("--- a", "+++ b", "@@ -l,n +l,n @@" hunks with `context` lines around each
// change) of two texts, line by line; empty when they are equal. Removals come before additions
// in a changed run, so a changed line reads "-old" then "+new". An empty `before` gives one hunk
// "@@ -0,0 +1,N @@" adding every line, as patch expects for a new file.
std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_name, const std::string& after_name,
                         int context = 3);

}  // namespace nautilus
