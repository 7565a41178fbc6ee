// Syntax highlighting for the `.nt` spec language in the editor.
//
// The language has no multi-line tokens (comments run to the end of the line), so each line is
// highlighted on its own by a small hand-written scanner rather than a list of regular
// expressions: one pass per line, and the scanner can be tested without a document.
#pragma once

#include <QSyntaxHighlighter>
#include <QTextCharFormat>

#include <array>
#include <vector>

class QTextDocument;

namespace nautilus::views {

enum class SpecTokenKind {
  Keyword,   // let input output sum max min select and or
  Dtype,     // f32 f16 bf16
  Function,  // exp exp2 log log2 sqrt rsqrt tanh sigmoid abs
  Number,    // 2, 0.5, 1e-5, inf
  Comment,   // '#' to end of line
};
inline constexpr int kSpecTokenKindCount = 5;

struct SpecToken {
  int start = 0;   // in UTF-16 code units of the line (QString indexing)
  int length = 0;
  SpecTokenKind kind = SpecTokenKind::Keyword;
};

// The highlighted tokens of one line, left to right. Identifiers that are neither keywords,
// dtypes nor functions (tensor names, index variables) are not tokens. `max` and `min` are
// keywords: whether they reduce or compare two values is decided by the parser, not here.
std::vector<SpecToken> scan_spec_line(const QString& line);

class SpecHighlighter : public QSyntaxHighlighter {
 public:
  explicit SpecHighlighter(QTextDocument* document);

  const QTextCharFormat& format_for(SpecTokenKind kind) const {
    return formats_[static_cast<size_t>(kind)];
  }

 protected:
  void highlightBlock(const QString& text) override;

 private:
  std::array<QTextCharFormat, kSpecTokenKindCount> formats_;
};

}  // namespace nautilus::views
