// nautilus-studio [FILE]
// nautilus-studio --screenshot OUT.png [FILE]
//
// Opens the main window, with FILE loaded when given. With --screenshot the window is rendered
// offscreen: once the check of FILE has finished, the window is saved as OUT.png and the program
// exits (0 when the image was written). This is how documentation images are made and how CI sees
// the window without a display.
#include <QApplication>
#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QPixmap>
#include <QString>
#include <QTimer>

#include <cstdio>
#include <cstring>

#include "views/main_window.h"

namespace {

// The longest a screenshot run waits for the first check before giving up.
constexpr int kScreenshotTimeoutMs = 60'000;

// True when the run shows no window: a screenshot, or help/version text. Decided on argv before
// QApplication exists, which is when the platform must be chosen; without it those runs would
// fail on a machine without a display.
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

}  // namespace

int main(int argc, char** argv) {
  if (needs_no_display(argc, argv)) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Nautilus Studio"));
  QApplication::setApplicationVersion(QStringLiteral(NAUTILUS_VERSION));

  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("Nautilus Studio: write tensor operators as math and watch them compile."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption screenshot_option(
      QStringLiteral("screenshot"),
      QStringLiteral("Render the window offscreen to <png> once FILE is checked, then exit."),
      QStringLiteral("png"));
  parser.addOption(screenshot_option);
  parser.addPositionalArgument(QStringLiteral("FILE"), QStringLiteral("A .nt spec to open."),
                               QStringLiteral("[FILE]"));
  parser.process(app);

  const QStringList files = parser.positionalArguments();
  if (files.size() > 1) {
    std::fprintf(stderr, "nautilus-studio: expected at most one FILE, got %lld\n",
                 static_cast<long long>(files.size()));
    return 1;
  }

  nautilus::views::MainWindow window;
  const QString screenshot = parser.value(screenshot_option);
  if (!screenshot.isEmpty()) {
    // Connected before the file is opened so that the first result is not missed. The grab is
    // deferred by one event-loop turn so that the output pane has laid out its new text.
    QObject::connect(
        &window, &nautilus::views::MainWindow::check_finished, &app,
        [&window, screenshot] {
          QTimer::singleShot(0, &window, [&window, screenshot] {
            const QPixmap pixmap = window.grab();
            if (pixmap.isNull() || !pixmap.save(screenshot, "PNG")) {
              std::fprintf(stderr, "nautilus-studio: cannot write %s\n",
                           qPrintable(screenshot));
              QApplication::exit(1);
              return;
            }
            QApplication::exit(0);
          });
        },
        Qt::SingleShotConnection);
    QTimer::singleShot(kScreenshotTimeoutMs, &app, [] {
      std::fprintf(stderr, "nautilus-studio: the spec check did not finish in %d s\n",
                   kScreenshotTimeoutMs / 1000);
      QApplication::exit(1);
    });
  }

  if (!files.isEmpty()) {
    QString error;
    if (!window.open_file(files.front(), &error)) {
      std::fprintf(stderr, "nautilus-studio: %s\n", qPrintable(error));
      return 1;
    }
  }
  window.show();
  return QApplication::exec();
}
