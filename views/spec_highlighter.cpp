#include "views/spec_highlighter.h"

#include <QColor>
#include <QFont>
#include <QStringView>

#include <initializer_list>

namespace nautilus::views {
namespace {

bool is_ident_start(QChar c) { return c.isLetter() || c == u'_'; }
bool is_ident_char(QChar c) { return c.isLetterOrNumber() || c == u'_'; }
bool is_digit(QChar c) { return c >= u'0' && c <= u'9'; }

bool is_one_of(QStringView word, std::initializer_list<const char16_t*> words) {
  for (const char16_t* w : words) {
    if (word == QStringView(w)) return true;
  }
  return false;
}

// Classifies an identifier; false for plain names (tensors, index variables, size symbols).
bool classify_word(QStringView word, SpecTokenKind* kind) {
  if (is_one_of(word, {u"let", u"input", u"output", u"sum", u"max", u"min", u"select", u"and",
                       u"or"})) {
    *kind = SpecTokenKind::Keyword;
  } else if (is_one_of(word, {u"f32", u"f16", u"bf16", u"fp8e4m3", u"fp8e5m2", u"int8", u"int4"})) {
    *kind = SpecTokenKind::Dtype;
  } else if (is_one_of(word, {u"exp", u"exp2", u"log", u"log2", u"sqrt", u"rsqrt", u"tanh",
                              u"sigmoid", u"abs"})) {
    *kind = SpecTokenKind::Function;
  } else if (word == u"inf") {
    *kind = SpecTokenKind::Number;
  } else {
    return false;
  }
  return true;
}

// Length of the number starting at `i`: digits [. digits] [(e|E) [+|-] digits]. An exponent
// marker not followed by digits is not part of the number.
int number_length(const QString& line, int i) {
  const int n = static_cast<int>(line.size());
  int j = i;
  while (j < n && is_digit(line[j])) ++j;
  if (j < n && line[j] == u'.') {
    ++j;
    while (j < n && is_digit(line[j])) ++j;
  }
  if (j < n && (line[j] == u'e' || line[j] == u'E')) {
    int k = j + 1;
    if (k < n && (line[k] == u'+' || line[k] == u'-')) ++k;
    if (k < n && is_digit(line[k])) {
      while (k < n && is_digit(line[k])) ++k;
      j = k;
    }
  }
  return j - i;
}

QTextCharFormat make_format(const QColor& color, bool bold = false, bool italic = false) {
  QTextCharFormat format;
  format.setForeground(color);
  if (bold) format.setFontWeight(QFont::Bold);
  format.setFontItalic(italic);
  return format;
}

}  // namespace

std::vector<SpecToken> scan_spec_line(const QString& line) {
  std::vector<SpecToken> tokens;
  const int n = static_cast<int>(line.size());
  int i = 0;
  while (i < n) {
    const QChar c = line[i];
    if (c == u'#') {
      tokens.push_back({i, n - i, SpecTokenKind::Comment});
      break;
    }
    if (is_ident_start(c)) {
      int j = i + 1;
      while (j < n && is_ident_char(line[j])) ++j;
      SpecTokenKind kind;
      if (classify_word(QStringView(line).mid(i, j - i), &kind)) {
        tokens.push_back({i, j - i, kind});
      }
      i = j;
      continue;
    }
    if (is_digit(c) || (c == u'.' && i + 1 < n && is_digit(line[i + 1]))) {
      int length = number_length(line, i);
      tokens.push_back({i, length, SpecTokenKind::Number});
      i += length;
      // A number glued to letters ("2x") is not valid syntax; skip the rest of the word so it is
      // not half-highlighted as an identifier.
      while (i < n && is_ident_char(line[i])) ++i;
      continue;
    }
    ++i;
  }
  return tokens;
}

SpecHighlighter::SpecHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
  // Colours readable on the default light palette; kinds differ in hue and weight so that they
  // also stay distinguishable for common colour-vision deficiencies.
  formats_[static_cast<size_t>(SpecTokenKind::Keyword)] =
      make_format(QColor(0x1f, 0x3f, 0x9f), true);
  formats_[static_cast<size_t>(SpecTokenKind::Dtype)] = make_format(QColor(0x00, 0x7a, 0x7a));
  formats_[static_cast<size_t>(SpecTokenKind::Function)] = make_format(QColor(0x8a, 0x2b, 0x8f));
  formats_[static_cast<size_t>(SpecTokenKind::Number)] = make_format(QColor(0xa8, 0x50, 0x00));
  formats_[static_cast<size_t>(SpecTokenKind::Comment)] =
      make_format(QColor(0x6a, 0x73, 0x7d), false, true);
}

void SpecHighlighter::highlightBlock(const QString& text) {
  for (const SpecToken& token : scan_spec_line(text)) {
    setFormat(token.start, token.length, format_for(token.kind));
  }
}

}  // namespace nautilus::views
