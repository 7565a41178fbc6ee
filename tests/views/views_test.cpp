// The spec editor's highlighter, the background checker and the main window, offscreen.
#include <QApplication>
#include <QHelpEvent>
#include <QPlainTextEdit>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <QTextCursor>
#include <QToolTip>

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tests/common/event_loop.h"
#include "tests/common/golden.h"
#include "views/main_window.h"
#include "views/spec_checker.h"
#include "views/spec_highlighter.h"

namespace nautilus::views {
namespace {

using nautilus::testing::wait_until;

// The range of `ranges` that covers `column`, or nullptr.
const QTextLayout::FormatRange* format_at(const std::vector<QTextLayout::FormatRange>& ranges,
                                          int column) {
  for (const auto& range : ranges) {
    if (range.start <= column && column < range.start + range.length) return &range;
  }
  return nullptr;
}

std::vector<std::pair<QString, SpecTokenKind>> tokens_of(const QString& line) {
  std::vector<std::pair<QString, SpecTokenKind>> out;
  for (const SpecToken& token : scan_spec_line(line)) {
    out.emplace_back(line.mid(token.start, token.length), token.kind);
  }
  return out;
}

using Tokens = std::vector<std::pair<QString, SpecTokenKind>>;
constexpr auto kKeyword = SpecTokenKind::Keyword;
constexpr auto kDtype = SpecTokenKind::Dtype;
constexpr auto kFunction = SpecTokenKind::Function;
constexpr auto kNumber = SpecTokenKind::Number;
constexpr auto kComment = SpecTokenKind::Comment;

TEST(SpecScanner, ClassifiesKeywordsDtypesFunctionsNumbersAndComments) {
  EXPECT_EQ(tokens_of(QStringLiteral("let B = 2, D = 128  # sizes")),
            (Tokens{{QStringLiteral("let"), kKeyword},
                    {QStringLiteral("2"), kNumber},
                    {QStringLiteral("128"), kNumber},
                    {QStringLiteral("# sizes"), kComment}}));
  EXPECT_EQ(tokens_of(QStringLiteral("input Q[B, D] : bf16")),
            (Tokens{{QStringLiteral("input"), kKeyword}, {QStringLiteral("bf16"), kDtype}}));
  EXPECT_EQ(tokens_of(QStringLiteral("output O[m] : f32 = sum(n) exp2(X[m, n]) * 1e-5")),
            (Tokens{{QStringLiteral("output"), kKeyword},
                    {QStringLiteral("f32"), kDtype},
                    {QStringLiteral("sum"), kKeyword},
                    {QStringLiteral("exp2"), kFunction},
                    {QStringLiteral("1e-5"), kNumber}}));
  EXPECT_EQ(tokens_of(QStringLiteral("S = select(n <= m and m < 4, x, -inf)")),
            (Tokens{{QStringLiteral("select"), kKeyword},
                    {QStringLiteral("and"), kKeyword},
                    {QStringLiteral("4"), kNumber},
                    {QStringLiteral("inf"), kNumber}}));
}

TEST(SpecScanner, NamesThatContainKeywordsOrDigitsAreNotTokens) {
  EXPECT_TRUE(tokens_of(QStringLiteral("Mx[b] = lets2 + input_x + sumd + f32x")).empty());
  // Max as a reduction and as a two-argument function are both the keyword `max`.
  EXPECT_EQ(tokens_of(QStringLiteral("max(a, b) max(n) rsqrt(0.5)")),
            (Tokens{{QStringLiteral("max"), kKeyword},
                    {QStringLiteral("max"), kKeyword},
                    {QStringLiteral("rsqrt"), kFunction},
                    {QStringLiteral("0.5"), kNumber}}));
}

TEST(SpecScanner, NumbersWithExponentsAndNonAsciiComments) {
  EXPECT_EQ(tokens_of(QStringLiteral("x = 2.5E+3 + 3e + .25")),
            (Tokens{{QStringLiteral("2.5E+3"), kNumber},
                    {QStringLiteral("3"), kNumber},
                    {QStringLiteral(".25"), kNumber}}));
  const QString line = QStringLiteral("#   O = softmax(Q Kᵀ / sqrt(D)) V");
  ASSERT_EQ(scan_spec_line(line).size(), 1u);
  EXPECT_EQ(scan_spec_line(line)[0].length, line.size());
}

TEST(SpecHighlighter, FormatsKeywordsInADocument) {
  QTextDocument document;
  SpecHighlighter highlighter(&document);
  document.setPlainText(QStringLiteral("let B = 2\ninput X[B] : f16  # data\nY[b] = exp(X[b])\n"));
  highlighter.rehighlight();

  // Every range the highlighter applied to `line`.
  const auto ranges_of = [&document](int line) {
    const QList<QTextLayout::FormatRange> formats =
        document.findBlockByNumber(line).layout()->formats();
    return std::vector<QTextLayout::FormatRange>(formats.begin(), formats.end());
  };

  const std::vector<QTextLayout::FormatRange> let_ranges = ranges_of(0);
  const QTextLayout::FormatRange* let_format = format_at(let_ranges, 0);
  ASSERT_NE(let_format, nullptr) << "'let' is not highlighted";
  EXPECT_EQ(let_format->start, 0);
  EXPECT_EQ(let_format->length, 3);
  EXPECT_EQ(let_format->format.foreground(), highlighter.format_for(kKeyword).foreground());
  EXPECT_EQ(let_format->format.fontWeight(), highlighter.format_for(kKeyword).fontWeight());
  EXPECT_EQ(format_at(let_ranges, 4), nullptr) << "'B' is a name";

  const QTextBlock input_line = document.findBlockByNumber(1);
  const std::vector<QTextLayout::FormatRange> ranges = ranges_of(1);
  ASSERT_NE(format_at(ranges, 0), nullptr);
  EXPECT_EQ(format_at(ranges, 0)->format.foreground(),
            highlighter.format_for(kKeyword).foreground());
  const int dtype_column = input_line.text().indexOf(QStringLiteral("f16"));
  ASSERT_NE(format_at(ranges, dtype_column), nullptr);
  EXPECT_EQ(format_at(ranges, dtype_column)->format.foreground(),
            highlighter.format_for(kDtype).foreground());
  const int comment_column = input_line.text().indexOf(QLatin1Char('#'));
  ASSERT_NE(format_at(ranges, comment_column), nullptr);
  EXPECT_TRUE(format_at(ranges, comment_column)->format.fontItalic());

  // The kinds are visually distinct.
  EXPECT_NE(highlighter.format_for(kKeyword).foreground(),
            highlighter.format_for(kFunction).foreground());
  EXPECT_NE(highlighter.format_for(kDtype).foreground(),
            highlighter.format_for(kNumber).foreground());
}

constexpr const char* kGoodSpec =
    "let N = 8\n"
    "input X[N] : f32\n"
    "output Y[i] = exp(X[i]) * 2\n";
// `Z` is not a tensor of this spec.
constexpr const char* kBadSpec =
    "let N = 8\n"
    "input X[N] : f32\n"
    "output Y[i] = exp(Z[i]) * 2\n";

TEST(SpecCheck, GoodSpecPrintsTheCheckedSpec) {
  SpecCheckResult result = check_spec_text("good.nt", kGoodSpec);
  EXPECT_TRUE(result.ok) << result.output.toStdString();
  EXPECT_EQ(result.error_count, 0);
  EXPECT_TRUE(result.output.contains(QStringLiteral("input X"))) << result.output.toStdString();
}

TEST(SpecCheck, BadSpecRendersLocatedDiagnostics) {
  SpecCheckResult result = check_spec_text("bad.nt", kBadSpec);
  EXPECT_FALSE(result.ok);
  EXPECT_GE(result.error_count, 1);
  EXPECT_TRUE(result.output.contains(QStringLiteral("bad.nt:3:"))) << result.output.toStdString();
  EXPECT_TRUE(result.output.contains(QStringLiteral("error"))) << result.output.toStdString();
  ASSERT_FALSE(result.diagnostics.empty());
  const EditorDiagnostic& first = result.diagnostics.front();
  EXPECT_EQ(first.line, 2);
  EXPECT_EQ(first.column, QString::fromLatin1("output Y[i] = exp(").size());
  EXPECT_GE(first.length, 1);
}

TEST(SpecChecker, DropsStaleResults) {
  SpecChecker checker(nullptr, std::chrono::milliseconds(0));
  std::vector<SpecCheckResult> results;
  QObject::connect(&checker, &SpecChecker::checked,
                   [&results](const SpecCheckResult& result) { results.push_back(result); });

  // Two requests back to back: whether or not the worker starts on the first, only the result
  // for the second may be delivered.
  checker.set_source(QStringLiteral("a.nt"), QString::fromLatin1(kBadSpec));
  checker.check_now();
  checker.set_source(QStringLiteral("b.nt"), QString::fromLatin1(kGoodSpec));
  checker.check_now();
  EXPECT_TRUE(checker.pending());
  ASSERT_TRUE(wait_until([&] { return !results.empty(); }));
  // Give a possible late (stale) result time to arrive; it must not be delivered.
  wait_until([] { return false; }, 200);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].generation, checker.generation());
  EXPECT_TRUE(results[0].ok) << results[0].output.toStdString();
  EXPECT_FALSE(checker.pending());
}

TEST(SpecChecker, DebouncesEdits) {
  SpecChecker checker(nullptr, std::chrono::milliseconds(50));
  int started = 0;
  int checked = 0;
  QObject::connect(&checker, &SpecChecker::started, [&started] { ++started; });
  QObject::connect(&checker, &SpecChecker::checked, [&checked] { ++checked; });
  for (int i = 0; i < 5; ++i) {
    checker.set_source(QStringLiteral("x.nt"), QString::fromLatin1(kGoodSpec).left(10 + i));
  }
  EXPECT_EQ(started, 0) << "a check started before the debounce delay";
  ASSERT_TRUE(wait_until([&] { return checked == 1; }));
  EXPECT_EQ(started, 1);
}

TEST(MainWindow, ShowsDiagnosticsForABadSpecAndTheSpecWhenFixed) {
  MainWindow window;
  window.show();
  int finished = 0;
  bool last_ok = false;
  QObject::connect(&window, &MainWindow::check_finished, [&](bool ok) {
    ++finished;
    last_ok = ok;
  });

  window.editor()->setPlainText(QString::fromLatin1(kBadSpec));
  ASSERT_TRUE(wait_until([&] { return finished > 0; })) << "no check result";
  EXPECT_FALSE(last_ok);
  const QString diagnostics = window.output()->toPlainText();
  EXPECT_TRUE(diagnostics.contains(QStringLiteral("error"))) << diagnostics.toStdString();
  EXPECT_TRUE(diagnostics.contains(QStringLiteral("untitled.nt:3:"))) << diagnostics.toStdString();
  EXPECT_FALSE(window.editor()->extraSelections().isEmpty()) << "the error is not underlined";

  // Hovering the underlined name shows the diagnostic's message.
  QTextCursor at_error(window.editor()->document()->findBlockByNumber(2));
  at_error.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor,
                        static_cast<int>(QStringLiteral("output Y[i] = exp(").size()));
  const QPoint point = window.editor()->cursorRect(at_error).center() + QPoint(2, 0);
  QWidget* viewport = window.editor()->viewport();
  QHelpEvent hover(QEvent::ToolTip, point, viewport->mapToGlobal(point));
  QApplication::sendEvent(viewport, &hover);
  EXPECT_TRUE(QToolTip::text().contains(QStringLiteral("'Z'"))) << QToolTip::text().toStdString();
  QToolTip::hideText();

  // Fixing the text replaces the diagnostics with the checked spec.
  finished = 0;
  window.editor()->setPlainText(QString::fromLatin1(kGoodSpec));
  ASSERT_TRUE(wait_until([&] { return finished > 0; }));
  EXPECT_TRUE(last_ok) << window.output()->toPlainText().toStdString();
  EXPECT_TRUE(window.output()->toPlainText().contains(QStringLiteral("input X")));
  EXPECT_TRUE(window.editor()->extraSelections().isEmpty());
  EXPECT_TRUE(window.output()->isReadOnly());
}

TEST(MainWindow, OpensAShippedExampleAsACopy) {
  MainWindow window;
  const QString path =
      QString::fromStdString(nautilus::testing::source_path("assets/specs/attention.nt"));
  QString error;
  ASSERT_TRUE(window.open_example(path, &error)) << error.toStdString();
  EXPECT_TRUE(window.file_path().isEmpty()) << "saving must not overwrite the example";
  EXPECT_EQ(window.document_name(), QStringLiteral("attention.nt"));
  EXPECT_TRUE(window.editor()->toPlainText().contains(QStringLiteral("output O")));
  EXPECT_TRUE(window.windowTitle().startsWith(QStringLiteral("attention.nt")));
  EXPECT_FALSE(window.open_file(QStringLiteral("/nonexistent/spec.nt"), &error));
  EXPECT_TRUE(error.contains(QStringLiteral("/nonexistent/spec.nt")));
}

}  // namespace
}  // namespace nautilus::views
