// Entry point of the GUI tests. The platform is forced to "offscreen" here, before QApplication
// exists, because gtest_discover_tests runs this binary to list tests without CTest's ENVIRONMENT
// (and the tests must not need a display anywhere).
#include <QApplication>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
