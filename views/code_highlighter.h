// Highlighting for the read-only code views: IR text of each stage, CUDA C++ and unified diffs.
//
// Each language is a short list of line rules (regular expressions compiled once), applied in
// order so later rules win: comments last, so a `%name` inside a comment stays a comment.
//   IR      keywords of the printers (kernel, for, block, param, alloc, shared, yield, ...),
//           `%values`, `#L` layout references, dtypes, numbers, `#` comments
//   CUDA    C++/CUDA keywords, types, `__global__`-style qualifiers, intrinsics, numbers,
//           `//` comments (the emitter's provenance comments stand out in their own colour)
//   Diff    `+` lines green, `-` lines red, `@@` hunk headers blue
// Colours follow the palette's lightness so both themes stay readable.
#pragma once

#include <QRegularExpression>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>

#include <vector>

namespace nautilus::views {

enum class CodeLanguage { IR, Cuda, Diff, Plain };

class CodeHighlighter : public QSyntaxHighlighter {
 public:
  CodeHighlighter(QTextDocument* document, CodeLanguage language);
  void set_language(CodeLanguage language);
  CodeLanguage language() const { return language_; }
  // Rebuilds the formats from the application palette (after a theme change).
  void refresh_colors();

 protected:
  void highlightBlock(const QString& text) override;

 private:
  struct Rule {
    QRegularExpression pattern;
    QTextCharFormat format;
  };
  void build_rules();

  CodeLanguage language_;
  std::vector<Rule> rules_;
};

}  // namespace nautilus::views
