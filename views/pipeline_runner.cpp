#include "views/pipeline_runner.h"

#include <QMetaObject>

#include <exception>

#include "core/support/source.h"

namespace nautilus::views {

PipelineResult run_pipeline(const PipelineInputs& inputs, std::stop_token stop,
                            driver::SnapshotObserver on_snapshot) {
  const auto start = std::chrono::steady_clock::now();
  PipelineResult result;
  try {
    auto file = std::make_shared<const SourceFile>(inputs.path, inputs.text);
    driver::CompileOptions options;
    options.sizes = inputs.sizes;
    options.schedule = inputs.schedule;
    options.last_stage = inputs.last_stage;
    options.matile.arch = inputs.arch;
    // The Layouts panel says why each register tile has its layout.
    options.matile.record_layout_reasons = true;
    options.stop = std::move(stop);
    options.on_snapshot = std::move(on_snapshot);
    result.compilation =
        std::make_shared<const driver::Compilation>(driver::compile(file, options));
  } catch (const std::exception& error) {
    result.error = QStringLiteral("internal error: %1").arg(QString::fromUtf8(error.what()));
  } catch (...) {
    result.error = QStringLiteral("internal error: unknown exception in the compiler");
  }
  result.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

PipelineRunner::PipelineRunner(QObject* parent, std::chrono::milliseconds debounce)
    : QObject(parent) {
  qRegisterMetaType<PipelineResult>();
  debounce_.setSingleShot(true);
  debounce_.setInterval(debounce);
  connect(&debounce_, &QTimer::timeout, this, &PipelineRunner::submit);
}

PipelineRunner::~PipelineRunner() {
  stop_.request_stop();  // the worker's destructor waits for the compile: let it end at a pass
}

void PipelineRunner::set_inputs(PipelineInputs inputs) {
  stop_.request_stop();  // the compile in flight describes older inputs
  inputs_ = std::move(inputs);
  ++generation_;  // results for the previous inputs are stale from now on
  cancelled_ = false;
  debounce_.start();
}

void PipelineRunner::run_now() {
  debounce_.stop();
  stop_.request_stop();
  ++generation_;
  cancelled_ = false;
  submit();
}

void PipelineRunner::cancel() {
  debounce_.stop();
  stop_.request_stop();
  ++generation_;
  cancelled_ = true;
  worker_.cancel();
  Q_EMIT cancelled();
}

void PipelineRunner::submit() {
  const uint64_t generation = generation_;
  stop_.request_stop();
  stop_ = std::stop_source();
  // Runs on the worker: each logged pass goes to the UI thread, where a stale one is dropped.
  driver::SnapshotObserver report = [this, generation](const driver::Snapshot& snapshot) {
    QMetaObject::invokeMethod(
        this,
        [this, generation, stage = QString::fromLatin1(driver::stage_name(snapshot.stage)),
         pass = QString::fromStdString(snapshot.pass)] {
          if (generation == generation_ && !cancelled_) Q_EMIT pass_finished(generation, stage, pass);
        },
        Qt::QueuedConnection);
  };
  worker_.post([this, generation, inputs = inputs_, stop = stop_.get_token(),
                report = std::move(report)]() -> TaskRunner::Continuation {
    PipelineResult result = run_pipeline(inputs, stop, report);
    result.generation = generation;
    return [this, result = std::move(result)]() mutable { deliver(std::move(result)); };
  });
  Q_EMIT started(generation_);
}

void PipelineRunner::deliver(PipelineResult result) {
  if (result.generation != generation_ || cancelled_) return;  // stale: newer inputs exist
  delivered_ = result.generation;
  Q_EMIT finished(result);
}

}  // namespace nautilus::views
