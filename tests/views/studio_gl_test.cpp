// The Layouts and Pipeline docks of the real main window.
//
// The test binary runs offscreen, where a shown QOpenGLWidget crashes (STACK.md): there the docks
// hold placeholders, which the offscreen tests check, with the one-line refusal of
// `nautilus-studio --screenshot --panel layouts`. The GL docks themselves are tested by running
// this binary again under a private Xvfb with the xcb platform (main.cpp reads
// NAUTILUS_VIEWS_PLATFORM), where the StudioWindowUnderX tests drive the real window: both docks
// fed with the attention kernel's MA tile IR, drawing, following recompilations, and the graph's
// node selection. Without xvfb-run those tests skip and say why.
#include <QApplication>
#include <QDockWidget>
#include <QImage>
#include <QRegularExpression>
#include <QLabel>
#include <QPlainTextEdit>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QSet>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "tests/common/event_loop.h"
#include "tests/common/golden.h"
#include "views/gl/imgui_panel.h"
#include "views/gl/layout_panel.h"
#include "views/gl/pipeline_panel.h"
#include "views/graph_view.h"
#include "views/main_window.h"
#include "views/shape_panel.h"
#include "views/stage_view.h"

namespace nautilus::views {
namespace {

using nautilus::testing::wait_until;

int distinct_colours(const QImage& image) {
  QSet<QRgb> colours;
  for (int y = 0; y < image.height(); y += 2) {
    for (int x = 0; x < image.width(); x += 2) colours.insert(image.pixel(x, y));
  }
  return colours.size();
}

QString attention_path() {
  return QString::fromStdString(nautilus::testing::source_path("assets/specs/attention.nt"));
}

// Opens the attention example (with its schedule) and waits for its compilation.
void open_attention(MainWindow& window) {
  int finished = 0;
  const auto connection = QObject::connect(&window, &MainWindow::pipeline_finished,
                                           [&finished](bool ok) { finished += ok ? 1 : 0; });
  QString error;
  ASSERT_TRUE(window.open_example(attention_path(), &error)) << error.toStdString();
  ASSERT_TRUE(wait_until([&] { return finished > 0 && !window.pipeline()->running(); }))
      << window.status_label()->text().toStdString();
  QObject::disconnect(connection);
  ASSERT_TRUE(window.compilation() && window.compilation()->ma_module);
}

struct ProcessResult {
  int exit_code = -1;
  QString output;  // stdout and stderr
};

ProcessResult run_process(const QString& program, const QStringList& arguments,
                          const QProcessEnvironment& environment, int timeout_ms) {
  QProcess process;
  process.setProcessEnvironment(environment);
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.start(program, arguments);
  ProcessResult result;
  if (!process.waitForFinished(timeout_ms)) {
    process.kill();
    process.waitForFinished();
    result.output = QStringLiteral("timed out after %1 ms: ").arg(timeout_ms);
  }
  result.output += QString::fromUtf8(process.readAll());
  if (process.exitStatus() == QProcess::NormalExit) result.exit_code = process.exitCode();
  return result;
}

QProcessEnvironment studio_environment(const QTemporaryDir& directory) {
  QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
  environment.insert(QStringLiteral("NAUTILUS_STUDIO_SETTINGS"), directory.filePath(QStringLiteral("studio.ini")));
  return environment;
}

// Runs `command` on a private X server, or returns false when xvfb-run is missing.
bool have_xvfb() { return !QStandardPaths::findExecutable(QStringLiteral("xvfb-run")).isEmpty(); }

QStringList under_xvfb(const QString& program, const QStringList& arguments) {
  return QStringList{QStringLiteral("-a"), QStringLiteral("-s"), QStringLiteral("-screen 0 1600x1100x24"),
                     QStringLiteral("env"), QStringLiteral("QT_QPA_PLATFORM=xcb"), program} +
         arguments;
}

// ---- Offscreen: placeholders and the screenshot's refusal ----------------------------------

TEST(StudioGlDocks, OffscreenDocksSayWhyTheyHaveNoPicture) {
  ASSERT_FALSE(gl_panels_supported()) << "this binary runs offscreen";
  MainWindow window;
  window.resize(1600, 1000);
  window.show();
  EXPECT_EQ(window.layout_panel(), nullptr);
  EXPECT_EQ(window.pipeline_panel(), nullptr);
  for (const QString& name : {QStringLiteral("layouts"), QStringLiteral("pipeline")}) {
    QDockWidget* dock = window.dock(name);
    ASSERT_NE(dock, nullptr) << name.toStdString();
    const auto* label = qobject_cast<QLabel*>(dock->widget());
    ASSERT_NE(label, nullptr) << name.toStdString();
    EXPECT_TRUE(label->text().contains(QStringLiteral("\"offscreen\" platform cannot show")))
        << label->text().toStdString();
    EXPECT_TRUE(label->text().contains(QStringLiteral("xvfb-run"))) << label->text().toStdString();
  }
  // A compilation reaches the window without touching the missing panels.
  open_attention(window);
  EXPECT_EQ(window.dock(QStringLiteral("layouts"))->windowTitle(), QStringLiteral("Layouts"));
}

TEST(StudioGlDocks, ScreenshotOfAGlPanelOffscreenFailsWithOneLine) {
  QTemporaryDir directory;
  QProcessEnvironment environment = studio_environment(directory);
  environment.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  for (const QString& panel : {QStringLiteral("layouts"), QStringLiteral("pipeline")}) {
    const ProcessResult result = run_process(
        QStringLiteral(NAUTILUS_STUDIO_PATH),
        {QStringLiteral("--screenshot"), directory.filePath(panel + QStringLiteral(".png")),
         QStringLiteral("--panel"), panel, attention_path()},
        environment, 20'000);
    EXPECT_EQ(result.exit_code, 1) << result.output.toStdString();
    QStringList lines = result.output.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    lines.removeIf([](const QString& line) { return line.startsWith(QStringLiteral("QStandardPaths:")); });
    ASSERT_EQ(lines.size(), 1) << result.output.toStdString();
    EXPECT_TRUE(lines.front().startsWith(QStringLiteral("nautilus-studio: the ") + panel +
                                         QStringLiteral(" panel draws with OpenGL")))
        << lines.front().toStdString();
    EXPECT_TRUE(lines.front().contains(QStringLiteral("xvfb-run -a"))) << lines.front().toStdString();
    EXPECT_FALSE(QFile::exists(directory.filePath(panel + QStringLiteral(".png"))));
  }
}

// --profile times two schedules through the Profiler panel before the picture; here, without a
// GPU, each run ends "no GPU: ..." and the history holds both (on a GPU machine the lines carry
// the medians instead, which is how bench/RESULTS.md's studio run was made).
TEST(StudioCommandLine, ProfileTimesEachScheduleInTurn) {
  QTemporaryDir directory;
  QProcessEnvironment environment = studio_environment(directory);
  environment.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  const QString other = directory.filePath(QStringLiteral("gemm_64.json"));
  {
    QFile file(other);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    file.write(R"json({"decisions": ["tile(C_sum, m=64, n=64, k=32)", "reverse_compute_at(C, C_sum, n_o)",
      "bind(C_sum, m_o=grid.y, n_o=grid.x)", "launch(C_sum, warps=4, stages=2)"]})json");
  }
  const QString png = directory.filePath(QStringLiteral("profiler.png"));
  const ProcessResult result = run_process(
      QStringLiteral(NAUTILUS_STUDIO_PATH),
      {QStringLiteral("--screenshot"), png, QStringLiteral("--panel"), QStringLiteral("profiler"),
       QStringLiteral("--profile"), QStringLiteral("current"), QStringLiteral("--profile"), other,
       QString::fromStdString(nautilus::testing::source_path("assets/specs/gemm.nt"))},
      environment, 120'000);
  ASSERT_EQ(result.exit_code, 0) << result.output.toStdString();
  const QStringList lines = result.output.split(QLatin1Char('\n'), Qt::SkipEmptyParts)
                                .filter(QRegularExpression(QStringLiteral("^profile ")));
  ASSERT_EQ(lines.size(), 2) << result.output.toStdString();
  EXPECT_TRUE(lines[0].startsWith(QStringLiteral("profile current: "))) << lines[0].toStdString();
  EXPECT_TRUE(lines[1].startsWith(QStringLiteral("profile ") + other + QStringLiteral(": ")))
      << lines[1].toStdString();
  for (const QString& line : lines) {
    // Either a measured run (a GPU is present) or the runner's own no-GPU answer.
    EXPECT_TRUE(line.contains(QStringLiteral("no GPU: ")) || line.contains(QStringLiteral("µs")))
        << line.toStdString();
  }
  EXPECT_FALSE(QImage(png).isNull());
}

// ---- Under Xvfb ----------------------------------------------------------------------------

// Runs the StudioWindowUnderX tests in this binary on a private X server.
TEST(StudioGlDocks, RealWindowUnderXvfb) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (apt-get install xvfb)";
  QTemporaryDir directory;
  QProcessEnvironment environment = studio_environment(directory);
  environment.insert(QStringLiteral("NAUTILUS_VIEWS_PLATFORM"), QStringLiteral("xcb"));
  environment.remove(QStringLiteral("QT_QPA_PLATFORM"));
  const ProcessResult result = run_process(
      QStringLiteral("xvfb-run"),
      {QStringLiteral("-a"), QStringLiteral("-s"), QStringLiteral("-screen 0 1600x1100x24"),
       QApplication::applicationFilePath(), QStringLiteral("--gtest_filter=StudioWindowUnderX.*")},
      environment, 90'000);
  EXPECT_EQ(result.exit_code, 0) << result.output.toStdString();
  // Skips would pass silently: every test of the suite must have run.
  EXPECT_TRUE(result.output.contains(QStringLiteral("[  PASSED  ] 2 tests."))) << result.output.toStdString();
  EXPECT_FALSE(result.output.contains(QStringLiteral("[  SKIPPED ]"))) << result.output.toStdString();
}

TEST(StudioGlDocks, ScreenshotOfAGlPanelUnderXvfb) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (apt-get install xvfb)";
  QTemporaryDir directory;
  for (const QString& panel : {QStringLiteral("layouts"), QStringLiteral("pipeline")}) {
    const QString png = directory.filePath(panel + QStringLiteral(".png"));
    const ProcessResult result = run_process(
        QStringLiteral("xvfb-run"),
        under_xvfb(QStringLiteral(NAUTILUS_STUDIO_PATH),
                   {QStringLiteral("--screenshot"), png, QStringLiteral("--panel"), panel,
                    QStringLiteral("--size"), QStringLiteral("900x600"), attention_path()}),
        studio_environment(directory), 60'000);
    ASSERT_EQ(result.exit_code, 0) << result.output.toStdString();
    const QImage image(png);
    ASSERT_FALSE(image.isNull()) << png.toStdString();
    EXPECT_EQ(image.size(), QSize(900, 600));
    // Thread colours of the layout grid, or the timeline's bar colours: a placeholder label or
    // an empty GL surface has a handful of colours.
    EXPECT_GT(distinct_colours(image), 60) << panel.toStdString();
  }
}

// A schedule that does not lower leaves the GL panels without an MA module: the screenshot is
// taken at once with their placeholder, not after the 120 s limit.
TEST(StudioGlDocks, AScheduleThatDoesNotLowerIsShotAtOnce) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (apt-get install xvfb)";
  QTemporaryDir directory;
  // Three consumer warpgroups at d 128 with overlap: more registers than their 160.
  const QString schedule = directory.filePath(QStringLiteral("refused.json"));
  {
    QFile file(schedule);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    file.write(R"json({"decisions": ["rolling_update(O_sum, n, tile=128)", "compute_at(S, Mx, n_o)",
      "tile(O_sum_acc, m=192)", "reverse_compute_at(O, O_sum, m_o)",
      "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)",
      "warp_spec(O_sum_acc, consumers=3, stages=3, overlap=1)"]})json");
  }
  const QString png = directory.filePath(QStringLiteral("pipeline.png"));
  QElapsedTimer clock;
  clock.start();
  const ProcessResult result = run_process(
      QStringLiteral("xvfb-run"),
      under_xvfb(QStringLiteral(NAUTILUS_STUDIO_PATH),
                 {QStringLiteral("--screenshot"), png, QStringLiteral("--panel"), QStringLiteral("pipeline"),
                  QStringLiteral("--arch"), QStringLiteral("sm_90a"), QStringLiteral("--schedule"), schedule,
                  QStringLiteral("--size"), QStringLiteral("600x300"), attention_path()}),
      studio_environment(directory), 60'000);
  ASSERT_EQ(result.exit_code, 0) << result.output.toStdString();
  EXPECT_LT(clock.elapsed(), 30'000);
  EXPECT_FALSE(QImage(png).isNull()) << png.toStdString();
}

class StudioWindowUnderX : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gl_panels_supported()) {
      GTEST_SKIP() << "needs an X display: StudioGlDocks.RealWindowUnderXvfb runs these under Xvfb";
    }
  }
};

TEST_F(StudioWindowUnderX, BothDocksShowTheAttentionKernelAndFollowRecompilation) {
  MainWindow window;
  window.resize(1600, 1000);
  window.show();
  LayoutPanel* layouts = window.layout_panel();
  PipelinePanel* pipeline = window.pipeline_panel();
  ASSERT_NE(layouts, nullptr);
  ASSERT_NE(pipeline, nullptr);
  EXPECT_EQ(window.dock(QStringLiteral("layouts"))->widget(), layouts);
  EXPECT_EQ(window.dock(QStringLiteral("pipeline"))->widget(), pipeline);
  open_attention(window);

  // Both panels hold the compilation's own MA module.
  const matile::ModulePtr first = window.compilation()->ma_module;
  EXPECT_EQ(layouts->module(), first);
  EXPECT_EQ(pipeline->module(), first);
  EXPECT_FALSE(layouts->tiles().empty());
  EXPECT_TRUE(layouts->error().empty()) << layouts->error();
  EXPECT_TRUE(layouts->layout_grid() || layouts->bank_grid());
  const cost::PipelineTimeline& timeline = pipeline->timeline();
  EXPECT_TRUE(timeline.error.empty()) << timeline.error;
  EXPECT_EQ(timeline.loop_var, "n_o");
  EXPECT_TRUE(std::any_of(timeline.bars.begin(), timeline.bars.end(),
                          [](const cost::TimelineBar& bar) { return bar.op_class == cost::OpClass::Mma; }));

  // Shown in their docks, both draw real pictures.
  for (QDockWidget* dock : {window.dock(QStringLiteral("layouts")), window.dock(QStringLiteral("pipeline"))}) {
    dock->show();
    dock->raise();
  }
  ASSERT_TRUE(wait_until([&] { return layouts->frames_drawn() > 0 && pipeline->frames_drawn() > 0; }));
  EXPECT_GT(distinct_colours(layouts->grabFramebuffer()), 60);
  EXPECT_GT(distinct_colours(pipeline->grabFramebuffer()), 30);
  EXPECT_GT(distinct_colours(window.grab().toImage()), 100);

  // A recompilation (a size override) replaces the module and keeps the selected tile.
  ASSERT_TRUE(layouts->select_tile("K_smem"));
  int finished = 0;
  QObject::connect(&window, &MainWindow::pipeline_finished, [&finished](bool ok) { finished += ok ? 1 : 0; });
  QSpinBox* m = window.shape_panel()->spin_box(QStringLiteral("M"));
  ASSERT_NE(m, nullptr);
  m->setValue(1024);
  ASSERT_TRUE(wait_until([&] { return finished > 0 && !window.pipeline()->running(); }));
  ASSERT_NE(window.compilation()->ma_module, first);
  EXPECT_EQ(layouts->module(), window.compilation()->ma_module);
  EXPECT_EQ(pipeline->module(), window.compilation()->ma_module);
  ASSERT_GE(layouts->tile_index(), 0);
  EXPECT_EQ(layouts->tiles()[static_cast<size_t>(layouts->tile_index())].value, nullptr);
  EXPECT_TRUE(layouts->bank_grid()) << "K_smem is a shared tile";

  // A spec that stops before MA tile IR leaves the last pictures, and the titles say so.
  const matile::ModulePtr good = window.compilation()->ma_module;
  finished = 0;
  int failed = 0;
  QObject::connect(&window, &MainWindow::pipeline_finished, [&failed](bool ok) { failed += ok ? 0 : 1; });
  window.editor()->setPlainText(window.editor()->toPlainText() + QStringLiteral("\noutput Z[b] : f32 = nope[b]\n"));
  ASSERT_TRUE(wait_until([&] { return failed > 0 && !window.pipeline()->running(); }));
  EXPECT_EQ(layouts->module(), good);
  EXPECT_EQ(window.dock(QStringLiteral("layouts"))->windowTitle(), QStringLiteral("Layouts (last MA tile IR)"));
  EXPECT_EQ(window.dock(QStringLiteral("pipeline"))->windowTitle(), QStringLiteral("Pipeline (last MA tile IR)"));
}

TEST_F(StudioWindowUnderX, SelectingAnMaGraphNodeShowsItsTile) {
  MainWindow window;
  window.resize(1600, 1000);
  window.show();
  open_attention(window);
  LayoutPanel* layouts = window.layout_panel();
  ASSERT_NE(layouts, nullptr);
  const matile::Kernel& kernel = *window.compilation()->ma_module->kernels.front();

  StageView* stages = window.stage_view();
  stages->show_tab(StageView::GraphTab);
  ASSERT_TRUE(stages->select_stage(driver::Stage::MATile));
  ASSERT_TRUE(wait_until([&] { return !stages->graph_pending(); }, 30'000));
  // The last ldmatrix-fed mma result and a shared allocation, as the graph names them.
  QString mma_node;
  QString mma_value;
  for (const LayoutNode& node : stages->graph_view()->graph_layout()->nodes) {
    if (node.label.contains(QStringLiteral(" = mma.")) && node.id.startsWith(QStringLiteral("op:"))) {
      mma_node = node.id;
      mma_value = node.id.mid(node.id.indexOf(QLatin1Char('/')) + 1);
    }
  }
  ASSERT_FALSE(mma_node.isEmpty());
  ASSERT_TRUE(stages->graph_view()->select_node(mma_node));
  ASSERT_GE(layouts->tile_index(), 0);
  const gl::TileChoice& value_tile = layouts->tiles()[static_cast<size_t>(layouts->tile_index())];
  ASSERT_NE(value_tile.value, nullptr) << value_tile.label;
  EXPECT_EQ(QString::fromStdString(value_tile.value->name), mma_value);
  EXPECT_TRUE(layouts->layout_grid());

  const QString shared_node = QStringLiteral("shared:%1/%2")
                                  .arg(QString::fromStdString(kernel.name), QString::fromStdString(kernel.shared.back().name));
  ASSERT_TRUE(stages->graph_view()->select_node(shared_node)) << shared_node.toStdString();
  const gl::TileChoice& shared_tile = layouts->tiles()[static_cast<size_t>(layouts->tile_index())];
  EXPECT_EQ(shared_tile.value, nullptr);
  EXPECT_EQ(shared_tile.alloc, static_cast<int>(kernel.shared.size()) - 1);
  EXPECT_TRUE(layouts->bank_grid());

  // A node of another stage leaves the panel alone.
  const int before = layouts->tile_index();
  ASSERT_TRUE(stages->select_stage(driver::Stage::Scalar));
  ASSERT_TRUE(wait_until([&] { return !stages->graph_pending(); }, 30'000));
  ASSERT_TRUE(stages->graph_view()->select_node(QStringLiteral("block:S")));
  EXPECT_EQ(layouts->tile_index(), before);
}

}  // namespace
}  // namespace nautilus::views
