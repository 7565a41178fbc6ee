// nautilus-studio [--schedule S.json] [--arch sm_80|sm_90a] [--theme light|dark] [--db PATH] [FILE]
// nautilus-studio --screenshot OUT.png [--panel NAME] [--show NAME]... [--stage STAGE]
//                 [--tab text|graph|diff] [--pass N] [--size WxH] [--schedule S.json] [--search]
//                 [--compare S.json] [--profile current|S.json]... [--theme light|dark] FILE
//
// Opens the main window with FILE loaded when given: a .nt spec, or a session (.json). A spec from
// the shipped examples (assets/specs) is opened with its schedule from assets/schedules, like the
// Examples menu does; --schedule names another one. --arch sets the MA lowering's target
// (Pipeline > Target): sm_90a shows warp-specialized Hopper kernels (TMA producer, wgmma
// consumers) where the schedule asks for them. --db names the tuning database of the Search
// panel's Measure and the History panel (default the CLI's, tune::default_database_path()).
//
// With --screenshot the window is rendered offscreen (unless QT_QPA_PLATFORM names a platform):
// once the pipeline has delivered its result
// for FILE (and the panel's own background work is done: the graph laid out, NVRTC's report, the
// GPU query), the window — or with --panel one panel, alone at the window's size — is saved as
// OUT.png and the program exits 0. --stage picks the pass log entry shown (the last of that
// stage), --pass one entry of the pass log, --tab the stage view's tab, --search runs the auto-scheduler first (its chosen schedule
// is then compiled and shown). This is how the documentation images are made and how CI
// sees the window without a display. --show brings panels to the front of their tab groups.
// --profile times schedules through the Profiler panel before the picture, in the order given:
// `current` is the schedule FILE opened with, a file is loaded first (the pipeline reruns); each
// run's status line is printed ("profile current: 805.9 µs, 1 kernel, ..."), and the run history
// holds them all. On a machine without a GPU each run ends "no GPU: ...".
//
// The Layouts and Pipeline panels draw with OpenGL, which the offscreen platform cannot show (they
// are placeholders there). Their screenshots need an X server: `xvfb-run -a env
// QT_QPA_PLATFORM=xcb nautilus-studio --screenshot out.png --panel layouts FILE`; asked for
// offscreen, they fail with a one-line reason.
#include <QApplication>
#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QLabel>
#include <QPixmap>
#include <QString>
#include <QTimer>

#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

#include "views/compare_panel.h"
#include "views/cuda_view.h"
#include "views/gl/imgui_panel.h"
#include "views/gl/layout_panel.h"
#include "views/gl/pipeline_panel.h"
#include "views/main_window.h"
#include "views/profiler_panel.h"
#include "views/search_panel.h"
#include "views/stage_view.h"
#include "views/teaching_panel.h"
#include "views/tuning_history_panel.h"
#include "views/theme.h"

namespace {

// The longest a screenshot run waits for the pipeline and the panel before giving up.
constexpr int kScreenshotTimeoutMs = 120'000;

// True when the run shows no window: a screenshot, or help/version text. Decided on argv before
// QApplication exists, which is when the platform must be chosen; without it those runs would
// fail on a machine without a display. (A platform named in QT_QPA_PLATFORM is kept: xcb under
// xvfb-run is how the OpenGL panels are screenshot.)
bool needs_no_display(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--screenshot") == 0 || std::strncmp(arg, "--screenshot=", 13) == 0 ||
        std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0 ||
        std::strcmp(arg, "--help-all") == 0 || std::strcmp(arg, "-v") == 0 ||
        std::strcmp(arg, "--version") == 0) {
      return true;
    }
  }
  return false;
}

int fail(const QString& message) {
  std::fprintf(stderr, "nautilus-studio: %s\n", qPrintable(message));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (needs_no_display(argc, argv) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("Nautilus"));
  QApplication::setApplicationName(QStringLiteral("Nautilus Studio"));
  QApplication::setApplicationVersion(QStringLiteral(NAUTILUS_VERSION));

  using nautilus::views::MainWindow;
  using nautilus::views::StageView;
  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("Nautilus Studio: write tensor operators as math and watch them compile."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption screenshot_option(
      QStringLiteral("screenshot"),
      QStringLiteral("Render offscreen to <png> once FILE is compiled, then exit."),
      QStringLiteral("png"));
  const QCommandLineOption panel_option(
      QStringLiteral("panel"),
      QStringLiteral("With --screenshot: render only this panel: %1.")
          .arg(MainWindow::panel_names().join(QStringLiteral(", "))),
      QStringLiteral("name"));
  const QCommandLineOption show_option(
      QStringLiteral("show"),
      QStringLiteral("Bring this panel to the front of its tab group (repeatable)."),
      QStringLiteral("name"));
  const QCommandLineOption stage_option(
      QStringLiteral("stage"), QStringLiteral("Show the last pass of this stage (spec, scalar, vrtile, matile, cuda)."),
      QStringLiteral("stage"));
  const QCommandLineOption pass_option(
      QStringLiteral("pass"), QStringLiteral("Show pass log entry N (0-based; overrides --stage)."),
      QStringLiteral("N"));
  const QCommandLineOption tab_option(QStringLiteral("tab"),
                                      QStringLiteral("The stage view's tab: text, graph or diff."),
                                      QStringLiteral("tab"));
  const QCommandLineOption size_option(QStringLiteral("size"),
                                       QStringLiteral("With --screenshot: the image size, WxH."),
                                       QStringLiteral("size"));
  const QCommandLineOption schedule_option(QStringLiteral("schedule"),
                                           QStringLiteral("A schedule file to compile FILE with."),
                                           QStringLiteral("json"));
  const QCommandLineOption search_option(
      QStringLiteral("search"),
      QStringLiteral("Run the auto-scheduler once FILE is compiled (implied by --panel search)."));
  const QCommandLineOption compare_option(
      QStringLiteral("compare"),
      QStringLiteral("With --panel compare: compare the current schedule (A) with this schedule "
                     "file (B); without it B is the unscheduled program."),
      QStringLiteral("json"));
  const QCommandLineOption profile_option(
      QStringLiteral("profile"),
      QStringLiteral("With --screenshot: time a schedule in the Profiler panel first (repeatable): "
                     "'current' or a schedule file."),
      QStringLiteral("schedule"));
  const QCommandLineOption arch_option(
      QStringLiteral("arch"), QStringLiteral("The MA lowering's target: sm_80 (default) or sm_90a."),
      QStringLiteral("arch"));
  const QCommandLineOption theme_option(QStringLiteral("theme"),
                                        QStringLiteral("light or dark."), QStringLiteral("theme"));
  const QCommandLineOption db_option(
      QStringLiteral("db"),
      QStringLiteral("The tuning database of Measure and History (default "
                     "$XDG_DATA_HOME/nautilus/tuning.db, else ~/.local/share/nautilus/tuning.db)."),
      QStringLiteral("path"));
  for (const auto* option : {&screenshot_option, &panel_option, &show_option, &stage_option, &pass_option, &tab_option,
                             &size_option, &schedule_option, &search_option, &compare_option,
                             &profile_option, &arch_option, &theme_option, &db_option}) {
    parser.addOption(*option);
  }
  parser.addPositionalArgument(QStringLiteral("FILE"),
                               QStringLiteral("A .nt spec or a session .json to open."),
                               QStringLiteral("[FILE]"));
  parser.process(app);

  const QStringList files = parser.positionalArguments();
  if (files.size() > 1) return fail(QStringLiteral("expected at most one FILE, got %1").arg(files.size()));
  const QString screenshot = parser.value(screenshot_option);
  if (screenshot.isEmpty() && parser.isSet(profile_option)) {
    return fail(QStringLiteral("--profile needs --screenshot (in the window, use the Profiler panel's "
                               "Run on GPU)"));
  }
  const QString panel = parser.value(panel_option);
  if (!panel.isEmpty() && !MainWindow::panel_names().contains(panel) &&
      panel != QStringLiteral("window")) {
    return fail(QStringLiteral("unknown panel '%1'; expected one of %2")
                    .arg(panel, MainWindow::panel_names().join(QStringLiteral(", "))));
  }
  const QStringList shown_panels = parser.values(show_option);
  for (const QString& name : shown_panels) {
    if (!MainWindow::panel_names().contains(name)) {
      return fail(QStringLiteral("unknown panel '%1' for --show; expected one of %2")
                      .arg(name, MainWindow::panel_names().join(QStringLiteral(", "))));
    }
  }
  const bool gl_panel = panel == QStringLiteral("layouts") || panel == QStringLiteral("pipeline");
  if (!screenshot.isEmpty() && gl_panel && !nautilus::views::gl_panels_supported()) {
    return fail(QStringLiteral("the %1 panel draws with OpenGL, which Qt's '%2' platform cannot show; "
                               "run under xvfb-run -a with QT_QPA_PLATFORM=xcb")
                    .arg(panel, QGuiApplication::platformName()));
  }
  std::optional<nautilus::driver::Stage> stage;
  if (parser.isSet(stage_option)) {
    stage = nautilus::driver::parse_stage(parser.value(stage_option).toStdString());
    if (!stage) {
      return fail(QStringLiteral("unknown stage '%1'; expected %2")
                      .arg(parser.value(stage_option),
                           QString::fromStdString(nautilus::driver::stage_names())));
    }
  }
  const QString tab = parser.value(tab_option);
  if (!tab.isEmpty() && tab != QStringLiteral("text") && tab != QStringLiteral("graph") &&
      tab != QStringLiteral("diff")) {
    return fail(QStringLiteral("unknown tab '%1'; expected text, graph or diff").arg(tab));
  }
  QSize size(1600, 1000);
  if (parser.isSet(size_option)) {
    const QStringList parts = parser.value(size_option).split(QLatin1Char('x'));
    if (parts.size() != 2 || parts[0].toInt() < 100 || parts[1].toInt() < 100) {
      return fail(QStringLiteral("--size expects WxH, e.g. 1600x1000"));
    }
    size = QSize(parts[0].toInt(), parts[1].toInt());
  }

  MainWindow window;
  if (parser.isSet(db_option)) window.set_tuning_database(parser.value(db_option));
  if (parser.isSet(theme_option)) {
    window.set_theme(nautilus::views::parse_theme(parser.value(theme_option)));
  }
  bool finished = false;
  int pipeline_runs = 0;  // results delivered by the pipeline (each schedule change reruns it)
  const bool search = parser.isSet(search_option) || panel == QStringLiteral("search");
  bool searched = !search;
  QObject::connect(window.search_panel(), &nautilus::views::SearchPanel::finished, &window,
                   [&searched] { searched = true; });
  const bool compare = panel == QStringLiteral("compare");
  bool compared = !compare;
  QObject::connect(window.compare_panel(), &nautilus::views::ComparePanel::compared, &window,
                   [&compared] { compared = true; });
  QObject::connect(&window, &MainWindow::pipeline_finished, &window, [&] {
    if (stage) window.stage_view()->select_stage(*stage);
    if (parser.isSet(pass_option)) window.stage_view()->select_snapshot(parser.value(pass_option).toInt());
    if (search && !finished) window.search_panel()->start();
    if (compare && !finished) {
      nautilus::sched::Schedule other;
      QString origin = QStringLiteral("unscheduled");
      if (parser.isSet(compare_option)) {
        std::string reason;
        auto loaded = nautilus::sched::read_schedule_file(parser.value(compare_option).toStdString(), &reason);
        if (loaded) other = *loaded;
        origin = QFileInfo(parser.value(compare_option)).fileName();
      }
      using nautilus::views::ComparePanel;
      window.compare_panel()->set_slot(ComparePanel::A, window.compilation() ? window.pipeline()->inputs().schedule
                                                                              : nautilus::sched::Schedule{},
                                       QStringLiteral("current schedule"));
      window.compare_panel()->set_slot(ComparePanel::B, other, origin);
    }
    finished = true;
    ++pipeline_runs;
  });
  if (!tab.isEmpty()) {
    window.stage_view()->show_tab(tab == QStringLiteral("graph")  ? StageView::GraphTab
                                  : tab == QStringLiteral("diff") ? StageView::DiffTab
                                                                  : StageView::TextTab);
  }

  if (parser.isSet(arch_option)) {
    const QString arch = parser.value(arch_option);
    if (arch != QStringLiteral("sm_80") && arch != QStringLiteral("sm_90a")) {
      return fail(QStringLiteral("unknown arch '%1'; expected sm_80 or sm_90a").arg(arch));
    }
    window.set_target_arch(arch.toStdString());
  }

  if (!files.isEmpty()) {
    const QString& file = files.front();
    QString error;
    bool opened = false;
    if (file.endsWith(QStringLiteral(".json"))) {
      opened = window.open_session(file, &error);
    } else {
      // Shipped examples come with their schedule (assets/specs/X.nt, assets/schedules/X.json).
      const QFileInfo info(file);
      const bool example = info.dir().dirName() == QStringLiteral("specs") &&
                           QFileInfo::exists(info.dir().filePath(QStringLiteral("../schedules/") +
                                                                 info.completeBaseName() +
                                                                 QStringLiteral(".json")));
      opened = window.open_file(file, &error);
      if (opened && example && !parser.isSet(schedule_option)) {
        window.load_schedule(info.dir().filePath(QStringLiteral("../schedules/") +
                                                 info.completeBaseName() + QStringLiteral(".json")),
                             &error);
      }
    }
    if (!opened) return fail(error);
    // The command line's target wins over a session's.
    if (parser.isSet(arch_option)) window.set_target_arch(parser.value(arch_option).toStdString());
  }
  if (parser.isSet(schedule_option)) {
    QString error;
    if (!window.load_schedule(parser.value(schedule_option), &error)) return fail(error);
  }

  for (const QString& name : shown_panels) {
    window.dock(name)->show();
    window.dock(name)->raise();
  }

  if (!screenshot.isEmpty()) {
    window.resize(size);
    window.show();
    QWidget* target = &window;
    if (!panel.isEmpty() && panel != QStringLiteral("window")) {
      // The panel alone: its dock floats at the screenshot's size.
      QDockWidget* dock = window.dock(panel);
      dock->show();
      dock->setFloating(true);
      dock->resize(size);
      dock->raise();
      target = dock;
    }
    // Each panel's own background work that the picture should include.
    const std::function<bool()> panel_ready = [&window, &panel, &tab] {
      if ((panel == QStringLiteral("stages") || panel.isEmpty() || panel == QStringLiteral("window")) &&
          tab == QStringLiteral("graph")) {
        return !window.stage_view()->graph_pending();
      }
      if (panel == QStringLiteral("cuda")) return !window.cuda_view()->compiling();
      if (panel == QStringLiteral("profiler")) return window.profiler_panel()->device_known();
      if (panel == QStringLiteral("teaching")) return !window.teaching_panel()->estimating();
      if (panel == QStringLiteral("history")) return !window.history_panel()->busy();
      // The ImGui panels draw once they have the MA module (null: the placeholder is shown).
      // A schedule that does not lower gives none: the panels then show the placeholder, and
      // the window the error, at once.
      const bool lowered = window.compilation() && window.compilation()->ma_module;
      if (!lowered) return true;
      if (window.layout_panel() != nullptr && !window.layout_panel()->module()) return false;
      if (window.pipeline_panel() != nullptr && !window.pipeline_panel()->module()) return false;
      return true;
    };
    // --profile: one entry at a time; a schedule file first reruns the pipeline.
    QStringList profiles = parser.values(profile_option);
    bool profiling = false;
    QObject::connect(window.profiler_panel(), &nautilus::views::ProfilerPanel::run_finished, &window,
                     [&](const QString&) {
                       if (!profiling) return;
                       profiling = false;
                       std::printf("profile %s: %s\n", qPrintable(profiles.front()),
                                   qPrintable(window.profiler_panel()->status_label()->text()));
                       std::fflush(stdout);
                       profiles.pop_front();
                     });
    int profile_loaded_at = -1;  // pipeline_runs when the front entry's schedule was loaded
    auto* poll = new QTimer(&window);
    QElapsedTimer clock;
    clock.start();
    int settle = 0;  // event-loop turns after everything is ready, for layouts to settle
    QObject::connect(poll, &QTimer::timeout, &window, [&, poll] {
      if (clock.elapsed() > kScreenshotTimeoutMs) {
        poll->stop();
        std::fprintf(stderr, "nautilus-studio: the pipeline did not finish in %d s\n",
                     kScreenshotTimeoutMs / 1000);
        QApplication::exit(1);
        return;
      }
      if (!finished || !searched || !compared || window.pipeline()->running() || !panel_ready() ||
          profiling) {
        settle = 0;
        return;
      }
      if (!profiles.isEmpty()) {
        settle = 0;
        const QString entry = profiles.front();
        if (entry != QStringLiteral("current") && profile_loaded_at < 0) {
          QString error;
          if (!window.load_schedule(entry, &error)) {
            poll->stop();
            std::fprintf(stderr, "nautilus-studio: --profile %s: %s\n", qPrintable(entry),
                         qPrintable(error));
            QApplication::exit(1);
            return;
          }
          profile_loaded_at = pipeline_runs;
          return;
        }
        if (profile_loaded_at >= 0 && pipeline_runs == profile_loaded_at) return;  // compiling it
        profile_loaded_at = -1;
        profiling = window.profiler_panel()->run();
        if (!profiling) {
          std::printf("profile %s: %s\n", qPrintable(entry),
                      qPrintable(window.profiler_panel()->status_label()->text()));
          profiles.pop_front();
        }
        return;
      }
      if (++settle < 3) return;
      poll->stop();
      const QPixmap pixmap = target->grab();
      if (pixmap.isNull() || !pixmap.save(screenshot, "PNG")) {
        std::fprintf(stderr, "nautilus-studio: cannot write %s\n", qPrintable(screenshot));
        QApplication::exit(1);
        return;
      }
      QApplication::exit(0);
    });
    poll->start(50);
    return QApplication::exec();
  }
  window.show();
  return QApplication::exec();
}
