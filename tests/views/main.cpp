// Entry point of the GUI tests. The platform is forced to "offscreen" here, before QApplication
// exists, because gtest_discover_tests runs this binary to list tests without CTest's ENVIRONMENT
// (and the tests must not need a display anywhere). The one exception is the run that
// studio_gl_test.cpp starts itself under xvfb-run with NAUTILUS_VIEWS_PLATFORM=xcb, to show the
// OpenGL docks (which crash offscreen). The main window's settings (layout, recent files) go to a
// temporary INI file, never to the user's, and the default tuning database
// ($XDG_DATA_HOME/nautilus/tuning.db) to a temporary directory.
#include <QApplication>
#include <QDir>
#include <QTemporaryDir>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  const bool xcb = qgetenv("NAUTILUS_VIEWS_PLATFORM") == "xcb" && !qEnvironmentVariableIsEmpty("DISPLAY");
  qputenv("QT_QPA_PLATFORM", xcb ? "xcb" : "offscreen");
  QTemporaryDir settings;
  qputenv("NAUTILUS_STUDIO_SETTINGS",
          QDir(settings.path()).filePath(QStringLiteral("studio.ini")).toUtf8());
  qputenv("XDG_DATA_HOME", QDir(settings.path()).filePath(QStringLiteral("data")).toUtf8());
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
