// The profiler panel: times the current schedule on a GPU through nautilus-runner.
//
// "Run" measures the current schedule on the panel's worker (never on the UI thread) with
// profiler::ScheduleMeasurer, as `nautilus run` does: build the kernel package of the current
// compilation (emit CUDA, NVRTC for sm_90a and sm_80), build the unscheduled reference package of
// the same spec and sizes (the runner validates against it), write both to a temporary directory
// and run the runner command — a child process, so a
// faulting or hanging kernel cannot take the app down — with the user's command template (e.g.
// `ssh gpuhost nautilus-runner`). The result is a RunRecord: kernels with median time, TFLOP/s
// and GB/s, appended to the run history and drawn on the roofline against the device's ceilings.
//
// The device line comes from profiler::query_devices() (also on the worker): on a machine without
// a GPU the panel says "no GPU: <reason>", and runs report the runner's own no_gpu result; the
// rest of the app is unaffected.
//
// Without any run, the roofline still shows where the cost model (core/cost, analytical) puts
// each kernel of the current compilation on a device preset (H100 or A100): its predicted time,
// bound and work, against that preset's ceilings. A measured run's device replaces the ceilings.
#pragma once

#include <QString>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/driver/pipeline.h"
#include "views/pipeline_runner.h"
#include "views/run_history_model.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableView;
class QTableWidget;

namespace nautilus::views {

class RooflineWidget;
class TaskRunner;

class ProfilerPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ProfilerPanel(QWidget* parent = nullptr);

  // The compilation to run and the inputs that made it (the reference drops the schedule).
  void set_compilation(std::shared_ptr<const driver::Compilation> compilation,
                       const PipelineInputs& inputs);
  // Starts a run; false (with the reason in the status line) when there is nothing to run.
  bool run();
  void cancel();

  QString runner_command() const;
  void set_runner_command(const QString& command);
  // The device line: "NVIDIA H100 ... (sm_90, 132 SMs)" or "no GPU: <reason>".
  QString device_text() const;
  bool device_known() const { return device_known_; }
  QLabel* status_label() const { return status_; }
  RunHistoryModel* history() const { return history_; }
  QTableWidget* kernels_table() const { return kernels_; }
  RooflineWidget* roofline() const { return roofline_; }
  // The cost model's estimate of the current compilation on the chosen device preset (computed
  // on a worker; nullopt until it arrives or when there is no MA tile IR).
  const std::optional<cost::CostEstimate>& estimate() const { return estimate_; }
  QLabel* estimate_label() const { return estimate_label_; }
  bool busy() const;

 Q_SIGNALS:
  void run_finished(const QString& status);
  // "Compare run as A/B" on a history row (slot 0 = A, 1 = B).
  void compare_requested(int slot, const nautilus::sched::Schedule& schedule, const QString& origin,
                         const std::vector<nautilus::views::KernelTiming>& measured);
  void device_queried();
  // The runner command was edited (the search panel's Measure uses the same one).
  void runner_command_changed(const QString& command);

 private:
  void show_record(const RunRecord& record);
  void refresh_roofline();
  void estimate_current();

  std::shared_ptr<const driver::Compilation> compilation_;
  PipelineInputs inputs_;
  bool device_known_ = false;
  std::optional<double> device_peak_bytes_;
  std::optional<double> device_peak_flops_;
  QString device_name_;
  std::optional<cost::CostEstimate> estimate_;
  std::optional<cost::DeviceModel> estimate_device_;

  QLabel* device_ = nullptr;
  QLineEdit* command_ = nullptr;
  QSpinBox* repetitions_ = nullptr;
  QCheckBox* validate_ = nullptr;
  QPushButton* run_button_ = nullptr;
  QPushButton* cancel_button_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* estimate_label_ = nullptr;
  QComboBox* preset_ = nullptr;
  QTableWidget* kernels_ = nullptr;
  QTableView* history_view_ = nullptr;
  RunHistoryModel* history_ = nullptr;
  RooflineWidget* roofline_ = nullptr;
  TaskRunner* worker_ = nullptr;
  TaskRunner* device_worker_ = nullptr;
  TaskRunner* estimate_worker_ = nullptr;
};

}  // namespace nautilus::views
