// Entry point of the Dear ImGui panel tests. The panels are QOpenGLWidgets, which crash when
// shown on Qt's offscreen platform (STACK.md), so CTest runs this binary under xvfb-run
// (run_under_xvfb.sh) and it uses the xcb platform there. The platform is chosen here, before
// QApplication exists, because gtest_discover_tests runs the binary without CTest's ENVIRONMENT.
// Without an X display (a plain run) it falls back to offscreen: the model tests run and the GL
// tests skip, saying why.
#include <QApplication>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  const bool has_display = !qEnvironmentVariableIsEmpty("DISPLAY");
  qputenv("QT_QPA_PLATFORM", has_display ? "xcb" : "offscreen");
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
