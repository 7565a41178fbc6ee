#include "core/support/text_diff.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string_view>
#include <vector>

namespace nautilus {
namespace {

std::vector<std::string_view> split_lines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text.data() + start, end - start);
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_name, const std::string& after_name,
                         int context) {
  if (before == after) return {};
  const std::vector<std::string_view> a = split_lines(before);
  const std::vector<std::string_view> b = split_lines(after);
  // 1. Common prefix and suffix: passes change a few lines of long texts, so this leaves a small
  //    middle for the quadratic step.
  size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  const size_t n = a.size() - prefix - suffix;
  const size_t m = b.size() - prefix - suffix;
  // 2. Longest common subsequence of the middle (table of suffix lengths).
  std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
  const auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      at(i, j) = a[prefix + i] == b[prefix + j] ? at(i + 1, j + 1) + 1
                                                 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  // 3. The edit script over the whole texts: ' ' kept, '-' removed, '+' added.
  struct Edit {
    char op;
    size_t a_line;  // index into a (kept, removed) or the a position before it (added)
    size_t b_line;
  };
  std::vector<Edit> edits;
  for (size_t i = 0; i < prefix; ++i) edits.push_back({' ', i, i});
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[prefix + i] == b[prefix + j]) {
      edits.push_back({' ', prefix + i, prefix + j});
      ++i, ++j;
    } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
      // Removals first on a tie, so a changed line reads "-old" then "+new".
      edits.push_back({'-', prefix + i, prefix + j});
      ++i;
    } else {
      edits.push_back({'+', prefix + i, prefix + j});
      ++j;
    }
  }
  for (size_t k = 0; k < suffix; ++k) {
    edits.push_back({' ', prefix + n + k, prefix + m + k});
  }
  // 4. Hunks: runs of changes with `context` kept lines around them, merged when they touch.
  std::ostringstream out;
  out << "--- " << before_name << "\n+++ " << after_name << "\n";
  const size_t total = edits.size();
  size_t k = 0;
  const auto ctx = static_cast<size_t>(std::max(0, context));
  while (k < total) {
    while (k < total && edits[k].op == ' ') ++k;
    if (k == total) break;
    size_t begin = k >= ctx ? k - ctx : 0;
    size_t end = k;
    // Extend while the next change is within 2 * context kept lines.
    while (true) {
      while (end < total && edits[end].op != ' ') ++end;
      size_t next = end;
      while (next < total && edits[next].op == ' ') ++next;
      if (next < total && next - end <= 2 * ctx) {
        end = next;
        continue;
      }
      end = std::min(total, end + ctx);
      break;
    }
    size_t a_count = 0, b_count = 0;
    for (size_t e = begin; e < end; ++e) {
      if (edits[e].op != '+') ++a_count;
      if (edits[e].op != '-') ++b_count;
    }
    const size_t a_start = edits[begin].a_line + (a_count > 0 ? 1 : 0);
    const size_t b_start = edits[begin].b_line + (b_count > 0 ? 1 : 0);
    out << "@@ -" << a_start << "," << a_count << " +" << b_start << "," << b_count << " @@\n";
    for (size_t e = begin; e < end; ++e) {
      const Edit& edit = edits[e];
      out << edit.op << (edit.op == '+' ? b[edit.b_line] : a[edit.a_line]) << "\n";
    }
    k = end;
  }
  return out.str();
}

}  // namespace nautilus
