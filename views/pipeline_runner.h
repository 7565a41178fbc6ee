// Runs the whole compilation pipeline (spec → scalar → VR tile → MA tile → CUDA) off the UI
// thread for the window's current inputs: the spec text, the `-D` size bindings and the schedule.
//
// `set_inputs` records new inputs and restarts a debounce timer (edits in the editor arrive per
// keystroke); `run_now` skips the wait. Like SpecChecker, every request advances a generation
// counter and a result is delivered only when it belongs to the newest generation, so a slow
// compile of old text can never overwrite the result of newer text. New inputs and `cancel` also
// ask the compile in flight to stop (its stop token): it stops before its next pass instead of
// finishing stages nobody will see. `cancel` advances the generation without a new request, and
// the window stops showing progress. While a compile runs, `pass_finished` reports each pass of
// the newest generation as the pipeline logs it.
//
// The result is an immutable, shared Compilation: snapshots share IR nodes, so every view can read
// it (and hand it to its own workers) without copying.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "core/driver/pipeline.h"
#include "views/task_runner.h"

namespace nautilus::views {

struct PipelineInputs {
  std::string path;  // the name diagnostics and provenance comments use
  std::string text;
  std::vector<spec::SizeOverride> sizes;
  sched::Schedule schedule;
  driver::Stage last_stage = driver::Stage::Cuda;
  // The MA lowering's target (LowerOptions::arch): "sm_80", or "sm_90a" for Hopper's TMA, wgmma
  // and warp-specialized kernels (a warp_spec decision takes effect only there).
  std::string arch = "sm_80";
};

struct PipelineResult {
  uint64_t generation = 0;
  std::shared_ptr<const driver::Compilation> compilation;  // null only when `error` is set
  QString error;       // an exception escaped the compiler (an internal error)
  double elapsed_ms = 0;
};

// Compiles `inputs` synchronously. Never throws. `stop` ends the compile before its next pass
// (the result's compilation then says `cancelled`); `on_snapshot` sees each pass as it is logged,
// on the calling thread.
PipelineResult run_pipeline(const PipelineInputs& inputs, std::stop_token stop = {},
                            driver::SnapshotObserver on_snapshot = {});

class PipelineRunner : public QObject {
  Q_OBJECT

 public:
  static constexpr std::chrono::milliseconds kDefaultDebounce{400};

  explicit PipelineRunner(QObject* parent = nullptr,
                          std::chrono::milliseconds debounce = kDefaultDebounce);
  ~PipelineRunner() override;
  PipelineRunner(const PipelineRunner&) = delete;
  PipelineRunner& operator=(const PipelineRunner&) = delete;

  void set_inputs(PipelineInputs inputs);
  void run_now();
  void cancel();

  const PipelineInputs& inputs() const { return inputs_; }
  uint64_t generation() const { return generation_; }
  bool running() const { return delivered_ < generation_ && !cancelled_; }

 Q_SIGNALS:
  void started(quint64 generation);
  void finished(const nautilus::views::PipelineResult& result);
  void cancelled();
  // A pass of the compile of `generation` finished (delivered on the UI thread, newest only).
  void pass_finished(quint64 generation, const QString& stage, const QString& pass);

 private:
  void submit();
  void deliver(PipelineResult result);

  QTimer debounce_;
  PipelineInputs inputs_;
  uint64_t generation_ = 0;
  uint64_t delivered_ = 0;
  bool cancelled_ = false;
  std::stop_source stop_;  // of the compile submitted last
  TaskRunner worker_;  // the compile thread; only the newest submitted inputs wait
};

}  // namespace nautilus::views

Q_DECLARE_METATYPE(nautilus::views::PipelineResult)
