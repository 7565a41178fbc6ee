// One worker thread for a panel's long jobs (NVRTC compiles, runner calls, device queries).
//
// `post(work)` queues `work` to run on the worker; `work` returns a continuation that runs on the
// UI thread (through the owner's event loop) — unless a later `post` or `cancel` made the job
// stale, in which case the continuation is dropped. Only the newest queued job waits; a job
// already running finishes (none of the work is interruptible) but its result is dropped when
// stale. The destructor waits for the running job.
#pragma once

#include <QObject>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace nautilus::views {

class TaskRunner : public QObject {
  Q_OBJECT

 public:
  using Continuation = std::function<void()>;
  using Work = std::function<Continuation()>;

  explicit TaskRunner(QObject* parent = nullptr);
  ~TaskRunner() override;
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // Returns the job's generation.
  uint64_t post(Work work);
  void cancel();
  bool busy() const { return delivered_ < generation_; }

 Q_SIGNALS:
  void busy_changed(bool busy);

 private:
  struct Job {
    uint64_t generation = 0;
    Work work;
  };
  void worker_loop();

  uint64_t generation_ = 0;  // UI thread
  uint64_t delivered_ = 0;   // UI thread
  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Job> next_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace nautilus::views
