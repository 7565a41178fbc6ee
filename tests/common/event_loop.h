// For the Qt tests: runs the event loop (queued continuations of the workers, posted progress)
// until a condition holds.
#pragma once

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QThread>

#include <functional>

namespace nautilus::testing {

// Runs the event loop until `done` is true or `timeout_ms` passed; returns `done()`.
inline bool wait_until(const std::function<bool()>& done, int timeout_ms = 20'000) {
  QElapsedTimer timer;
  timer.start();
  while (!done() && timer.elapsed() < timeout_ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(1);
  }
  return done();
}

}  // namespace nautilus::testing
