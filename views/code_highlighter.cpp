#include "views/code_highlighter.h"

#include <QApplication>
#include <QColor>
#include <QFont>
#include <QPalette>

namespace nautilus::views {
namespace {

QTextCharFormat char_format(const QColor& color, bool bold = false, bool italic = false) {
  QTextCharFormat out;
  out.setForeground(color);
  if (bold) out.setFontWeight(QFont::Bold);
  out.setFontItalic(italic);
  return out;
}

QRegularExpression words(const char* alternatives) {
  return QRegularExpression(QStringLiteral("\\b(?:%1)\\b").arg(QLatin1String(alternatives)));
}

}  // namespace

CodeHighlighter::CodeHighlighter(QTextDocument* document, CodeLanguage language)
    : QSyntaxHighlighter(document), language_(language) {
  build_rules();
}

void CodeHighlighter::set_language(CodeLanguage language) {
  if (language == language_) return;
  language_ = language;
  build_rules();
  rehighlight();
}

void CodeHighlighter::refresh_colors() {
  build_rules();
  rehighlight();
}

void CodeHighlighter::build_rules() {
  rules_.clear();
  const bool dark = QApplication::palette().color(QPalette::Base).lightness() < 128;
  const QColor keyword = dark ? QColor(0xc6, 0x78, 0xdd) : QColor(0x8e, 0x24, 0xaa);
  const QColor type = dark ? QColor(0x56, 0xb6, 0xc2) : QColor(0x00, 0x6d, 0x7a);
  const QColor value = dark ? QColor(0xe5, 0xc0, 0x7b) : QColor(0x9a, 0x5b, 0x00);
  const QColor number = dark ? QColor(0xd1, 0x9a, 0x66) : QColor(0xb0, 0x35, 0x00);
  const QColor comment = dark ? QColor(0x7f, 0x84, 0x8e) : QColor(0x6a, 0x73, 0x7d);
  const QColor provenance = dark ? QColor(0x98, 0xc3, 0x79) : QColor(0x2e, 0x7d, 0x32);
  const QColor function = dark ? QColor(0x61, 0xaf, 0xef) : QColor(0x1a, 0x56, 0xb8);
  switch (language_) {
    case CodeLanguage::IR:
      rules_.push_back({words("kernel|for|in|block|init|param|alloc|shared|yield|iter_args|"
                              "pipeline|stages|grid|warps|reduce|if|bounds|copy|vec|via|trips|"
                              "global|input|output|let|sum|max|min|select"),
                        char_format(keyword, true)});
      rules_.push_back({words("f32|f16|bf16|i32|i64|index|bool"), char_format(type)});
      rules_.push_back({QRegularExpression(QStringLiteral("\\b(?:mma\\.[\\w.]+|ldmatrix[\\w.]*|"
                                                          "cp\\.async[\\w.]*|bar\\.sync|"
                                                          "global_load|global_store|ld\\.shared|"
                                                          "st\\.shared|fma_dot|convert_layout|"
                                                          "exp2?|dot|load|store)\\b")),
                        char_format(function)});
      rules_.push_back({QRegularExpression(QStringLiteral("%[\\w.]+")), char_format(value)});
      rules_.push_back({QRegularExpression(QStringLiteral("#L\\d+")), char_format(type, true)});
      rules_.push_back({QRegularExpression(QStringLiteral("\\b-?\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?f?\\b")),
                        char_format(number)});
      rules_.push_back({QRegularExpression(QStringLiteral("(?:^|\\s)#(?!L\\d).*$")),
                        char_format(comment, false, true)});
      rules_.push_back({QRegularExpression(QStringLiteral("//.*$")), char_format(comment, false, true)});
      break;
    case CodeLanguage::Cuda:
      rules_.push_back({words("if|else|for|while|return|const|constexpr|static|inline|extern|"
                              "struct|template|typename|unsigned|asm|volatile|sizeof|auto|"
                              "namespace|using|do|break|continue"),
                        char_format(keyword, true)});
      rules_.push_back({QRegularExpression(QStringLiteral(
                            "\\b(?:__global__|__device__|__shared__|__forceinline__|"
                            "__restrict__|__launch_bounds__|__syncthreads|#pragma|#include)\\b|"
                            "#pragma|#include")),
                        char_format(keyword)});
      rules_.push_back({words("void|int|float|bool|char|uint32_t|int32_t|int64_t|uint64_t|"
                              "__nv_bfloat16|__nv_bfloat162|__half|__half2|float2|float4|"
                              "uint2|uint4|size_t|dim3"),
                        char_format(type)});
      rules_.push_back({QRegularExpression(QStringLiteral(
                            "\\b(?:__shfl_xor_sync|__float2bfloat16\\w*|__bfloat162float|"
                            "exp2f|__expf|fmaxf|fminf|threadIdx|blockIdx|blockDim|"
                            "mma_\\w+|ldmatrix_\\w+|cp_async_\\w+)\\b")),
                        char_format(function)});
      rules_.push_back({QRegularExpression(QStringLiteral("\\b\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?[fuU]?\\b")),
                        char_format(number)});
      rules_.push_back({QRegularExpression(QStringLiteral("\"(?:[^\"\\\\]|\\\\.)*\"")), char_format(value)});
      rules_.push_back({QRegularExpression(QStringLiteral("//.*$")), char_format(comment, false, true)});
      rules_.push_back({QRegularExpression(QStringLiteral("// spec .*$")), char_format(provenance, true)});
      break;
    case CodeLanguage::Diff:
      rules_.push_back({QRegularExpression(QStringLiteral("^\\+.*$")),
                        char_format(dark ? QColor(0x98, 0xc3, 0x79) : QColor(0x1a, 0x7f, 0x37))});
      rules_.push_back({QRegularExpression(QStringLiteral("^-.*$")),
                        char_format(dark ? QColor(0xe0, 0x6c, 0x75) : QColor(0xc6, 0x28, 0x28))});
      rules_.push_back({QRegularExpression(QStringLiteral("^@@.*$")), char_format(function, true)});
      rules_.push_back({QRegularExpression(QStringLiteral("^(?:\\+\\+\\+|---) .*$")),
                        char_format(keyword, true)});
      break;
    case CodeLanguage::Plain:
      break;
  }
}

void CodeHighlighter::highlightBlock(const QString& text) {
  for (const Rule& rule : rules_) {
    auto matches = rule.pattern.globalMatch(text);
    while (matches.hasNext()) {
      const QRegularExpressionMatch match = matches.next();
      setFormat(static_cast<int>(match.capturedStart()), static_cast<int>(match.capturedLength()),
                rule.format);
    }
  }
}

}  // namespace nautilus::views
