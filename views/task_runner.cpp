#include "views/task_runner.h"

#include <QMetaObject>

#include <exception>

namespace nautilus::views {

TaskRunner::TaskRunner(QObject* parent) : QObject(parent) {
  worker_ = std::thread([this] { worker_loop(); });
}

TaskRunner::~TaskRunner() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    next_.reset();
  }
  wake_.notify_all();
  worker_.join();
}

uint64_t TaskRunner::post(Work work) {
  const uint64_t generation = ++generation_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    next_ = Job{generation, std::move(work)};
  }
  wake_.notify_one();
  Q_EMIT busy_changed(true);
  return generation;
}

void TaskRunner::cancel() {
  const bool was_busy = busy();
  delivered_ = ++generation_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    next_.reset();
  }
  if (was_busy) Q_EMIT busy_changed(false);
}

void TaskRunner::worker_loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || next_.has_value(); });
      if (stopping_) return;
      job = std::move(*next_);
      next_.reset();
    }
    Continuation continuation;
    try {
      continuation = job.work();
    } catch (const std::exception&) {
      continuation = nullptr;  // the work reports its own errors; an escape is dropped
    }
    QMetaObject::invokeMethod(
        this,
        [this, generation = job.generation, continuation = std::move(continuation)] {
          if (generation != generation_) return;  // stale
          delivered_ = generation;
          if (continuation) continuation();
          Q_EMIT busy_changed(false);
        },
        Qt::QueuedConnection);
  }
}

}  // namespace nautilus::views
