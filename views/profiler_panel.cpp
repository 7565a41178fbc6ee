#include "views/profiler_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

#include <sstream>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/codegen/package.h"
#include "profiler/device_info.h"
#include "profiler/measure.h"
#include "profiler/runner_client.h"
#include "views/roofline_widget.h"
#include "views/table_cell.h"
#include "views/task_runner.h"

namespace nautilus::views {
namespace {

// The runner built with this app, when it is where the build put it; else the client's default
// (next to this executable, then PATH).
QString default_runner() {
#ifdef NAUTILUS_RUNNER_PATH
  const QString built = QStringLiteral(NAUTILUS_RUNNER_PATH);
  if (QFileInfo(built).isExecutable()) return built;
#endif
  return QString::fromStdString(profiler::default_runner_command());
}


}  // namespace

ProfilerPanel::ProfilerPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  device_ = new QLabel(tr("looking for a GPU…"), this);
  device_->setObjectName(QStringLiteral("device"));
  device_->setWordWrap(true);
  device_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(device_);

  auto* form = new QFormLayout();
  command_ = new QLineEdit(default_runner(), this);
  command_->setObjectName(QStringLiteral("runner_command"));
  command_->setToolTip(tr("The runner command; its arguments are appended. To time on another "
                          "machine: ssh gpuhost nautilus-runner (the package path must exist "
                          "there too)."));
  form->addRow(tr("Runner"), command_);
  connect(command_, &QLineEdit::textChanged, this, &ProfilerPanel::runner_command_changed);
  auto* options = new QHBoxLayout();
  repetitions_ = new QSpinBox(this);
  repetitions_->setRange(1, 100000);
  repetitions_->setValue(100);
  options->addWidget(new QLabel(tr("reps"), this));
  options->addWidget(repetitions_);
  validate_ = new QCheckBox(tr("validate against the unscheduled program"), this);
  validate_->setChecked(true);
  options->addWidget(validate_);
  options->addStretch();
  form->addRow(QString(), options);
  auto* estimate_row = new QHBoxLayout();
  preset_ = new QComboBox(this);
  preset_->setObjectName(QStringLiteral("estimate_device"));
  preset_->addItem(QStringLiteral("H100 SXM"), QStringLiteral("h100"));
  preset_->addItem(QStringLiteral("A100 SXM"), QStringLiteral("a100"));
  estimate_label_ = new QLabel(tr("no estimate yet"), this);
  estimate_label_->setObjectName(QStringLiteral("estimate"));
  estimate_label_->setWordWrap(true);
  estimate_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  estimate_row->addWidget(preset_);
  estimate_row->addWidget(estimate_label_, 1);
  form->addRow(tr("Cost model"), estimate_row);
  layout->addLayout(form);

  auto* buttons = new QHBoxLayout();
  run_button_ = new QPushButton(tr("Run on GPU"), this);
  run_button_->setObjectName(QStringLiteral("run"));
  cancel_button_ = new QPushButton(tr("Cancel"), this);
  cancel_button_->setEnabled(false);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("run_status"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  buttons->addWidget(run_button_);
  buttons->addWidget(cancel_button_);
  buttons->addWidget(status_, 1);
  layout->addLayout(buttons);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  auto* top = new QSplitter(Qt::Horizontal, splitter);
  kernels_ = new QTableWidget(0, 4, top);
  kernels_->setObjectName(QStringLiteral("kernels"));
  kernels_->setHorizontalHeaderLabels({tr("Kernel"), tr("Median µs"), tr("TFLOP/s"), tr("GB/s")});
  kernels_->verticalHeader()->hide();
  kernels_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  roofline_ = new RooflineWidget(top);
  top->addWidget(kernels_);
  top->addWidget(roofline_);
  history_ = new RunHistoryModel(this);
  history_view_ = new QTableView(splitter);
  history_view_->setObjectName(QStringLiteral("run_history"));
  history_view_->setModel(history_);
  history_view_->verticalHeader()->hide();
  history_view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  history_view_->horizontalHeader()->setStretchLastSection(true);
  splitter->addWidget(top);
  splitter->addWidget(history_view_);
  layout->addWidget(splitter, 1);
  auto* compare_row = new QHBoxLayout();
  for (int slot = 0; slot < 2; ++slot) {
    auto* button = new QPushButton(slot == 0 ? tr("Compare run as A") : tr("Compare run as B"), this);
    compare_row->addWidget(button);
    connect(button, &QPushButton::clicked, this, [this, slot] {
      const QModelIndex index = history_view_->currentIndex();
      if (!index.isValid() || index.row() >= static_cast<int>(history_->records().size())) return;
      const RunRecord& record = history_->records()[static_cast<size_t>(index.row())];
      // The record keeps the schedule as printed decisions joined by "; ".
      sched::Schedule schedule;
      for (const QString& text : QString::fromStdString(record.schedule)
                                     .split(QStringLiteral("; "), Qt::SkipEmptyParts)) {
        sched::DecisionParseError error;
        if (auto decision = sched::parse_decision(text.toStdString(), &error)) {
          schedule.decisions.push_back(*decision);
        }
      }
      Q_EMIT compare_requested(slot, schedule,
                               tr("run %1").arg(history_->data(history_->index(index.row(), 0)).toString()),
                               record.kernels);
    });
  }
  compare_row->addStretch();
  layout->addLayout(compare_row);

  worker_ = new TaskRunner(this);
  device_worker_ = new TaskRunner(this);
  estimate_worker_ = new TaskRunner(this);
  connect(preset_, &QComboBox::currentIndexChanged, this, &ProfilerPanel::estimate_current);
  connect(run_button_, &QPushButton::clicked, this, &ProfilerPanel::run);
  connect(cancel_button_, &QPushButton::clicked, this, &ProfilerPanel::cancel);
  connect(worker_, &TaskRunner::busy_changed, this, [this](bool busy) {
    run_button_->setEnabled(!busy);
    cancel_button_->setEnabled(busy);
  });
  connect(history_view_, &QTableView::clicked, this, [this](const QModelIndex& index) {
    if (index.row() < static_cast<int>(history_->records().size())) {
      show_record(history_->records()[static_cast<size_t>(index.row())]);
    }
  });

  device_worker_->post([this]() -> TaskRunner::Continuation {
    const profiler::DeviceQuery query = profiler::query_devices();
    QString text;
    std::optional<double> bandwidth;
    QString name;
    if (!query.has_gpu()) {
      text = tr("no GPU: %1").arg(QString::fromStdString(query.no_gpu->message));
    } else {
      const profiler::DeviceInfo& device = query.devices.front();
      name = QString::fromStdString(device.name);
      bandwidth = device.peak_memory_bandwidth_bytes_per_s();
      text = tr("%1 (%2, %3 SMs, %4 GB/s DRAM), driver %5")
                 .arg(name, QString::fromStdString(device.arch()))
                 .arg(device.sm_count)
                 .arg(*bandwidth * 1e-9, 0, 'f', 0)
                 .arg(QString::fromStdString(profiler::format_driver_version(query.driver_version)));
    }
    return [this, text, bandwidth, name] {
      device_->setText(text);
      device_known_ = true;
      if (bandwidth) device_peak_bytes_ = bandwidth;
      device_name_ = name;
      refresh_roofline();
      Q_EMIT device_queried();
    };
  });
}

void ProfilerPanel::set_compilation(std::shared_ptr<const driver::Compilation> compilation,
                                    const PipelineInputs& inputs) {
  compilation_ = std::move(compilation);
  inputs_ = inputs;
  estimate_current();
}

void ProfilerPanel::estimate_current() {
  if (!compilation_ || !compilation_->ma_module) {
    estimate_worker_->cancel();
    estimate_.reset();
    estimate_label_->setText(tr("no MA tile IR to estimate"));
    refresh_roofline();
    return;
  }
  const matile::ModulePtr module = compilation_->ma_module;
  const std::string preset = preset_->currentData().toString().toStdString();
  estimate_worker_->post([this, module, preset]() -> TaskRunner::Continuation {
    const std::optional<cost::DeviceModel> device = cost::device_model_for(preset);
    if (!device) return [this] { estimate_label_->setText(tr("unknown device preset")); };
    const cost::CostEstimate estimate = cost::make_analytical_model(*device)->estimate(*module);
    return [this, estimate, device] {
      estimate_ = estimate;
      estimate_device_ = device;
      estimate_label_->setText(
          estimate.feasible
              ? tr("%1 µs predicted on %2 (%3)")
                    .arg(estimate.microseconds, 0, 'f', 1)
                    .arg(QString::fromStdString(device->name),
                         QString::fromStdString(estimate.kernels.empty() ? std::string()
                                                                         : estimate.kernels.front().bound + "-bound"))
              : tr("infeasible on %1: %2")
                    .arg(QString::fromStdString(device->name),
                         QString::fromStdString(estimate.infeasible_reason)));
      refresh_roofline();
    };
  });
}

QString ProfilerPanel::runner_command() const { return command_->text(); }

void ProfilerPanel::set_runner_command(const QString& command) {
  command_->setText(command.isEmpty() ? default_runner() : command);
}

QString ProfilerPanel::device_text() const { return device_->text(); }

bool ProfilerPanel::busy() const { return worker_->busy(); }

bool ProfilerPanel::run() {
  if (!compilation_ || !compilation_->ok() || !compilation_->ma_module) {
    status_->setText(tr("Nothing to run: the spec does not compile to MA tile IR."));
    return false;
  }
  std::string split_error;
  if (!profiler::split_command_template(command_->text().toStdString(), &split_error)) {
    status_->setText(tr("Runner command: %1").arg(QString::fromStdString(split_error)));
    return false;
  }
  status_->setText(tr("building packages and running…"));
  std::shared_ptr<const driver::Compilation> compilation = compilation_;
  const bool validate = validate_->isChecked();
  const std::string command = command_->text().toStdString();
  const int repetitions = repetitions_->value();
  const std::string label = sched::print_decisions(inputs_.schedule.decisions, "; ");
  worker_->post([=, this]() -> TaskRunner::Continuation {
    // Packages in a temporary directory, removed with the measurer.
    profiler::MeasureOptions options;
    options.validate = validate;
    options.run.repetitions = repetitions;
    options.client.command_template = command;
    options.client.timeout_seconds = 600;
    profiler::ScheduleMeasurer measurer(options);
    const profiler::Measurement measured = measurer.measure(*compilation);
    RunRecord record;
    if (!measured.built()) {
      record.status = "build_error";
      record.message = measured.build_error;
      if (!measured.build_log.empty()) record.message += "\n" + measured.build_log;
      record.schedule = label;
      record.time = QDateTime::currentDateTime().toString(Qt::ISODate).toStdString();
    } else {
      record = record_from_result(measured.run, label);
    }
    return [this, record] {
      history_->append(record);
      show_record(record);
      refresh_roofline();
      Q_EMIT run_finished(QString::fromStdString(record.status));
    };
  });
  return true;
}

void ProfilerPanel::cancel() {
  worker_->cancel();
  status_->setText(tr("cancelled (a runner already started finishes in the background; its "
                      "result is dropped)"));
}

void ProfilerPanel::show_record(const RunRecord& record) {
  QString text;
  if (record.status == "no_gpu") {
    // The runner client's message already reads "no GPU: <reason>".
    const QString message = QString::fromStdString(record.message);
    text = message.startsWith(QStringLiteral("no GPU")) ? message : tr("no GPU: %1").arg(message);
  } else if (record.ok()) {
    text = tr("ok: %1 µs median").arg(record.total_median_us.value_or(0), 0, 'f', 1);
    if (!record.device.empty()) text += tr(" on %1").arg(QString::fromStdString(record.device));
  } else {
    text = QStringLiteral("%1: %2").arg(QString::fromStdString(record.status),
                                         QString::fromStdString(record.message));
  }
  status_->setText(text);
  kernels_->setRowCount(static_cast<int>(record.kernels.size()));
  for (int row = 0; row < static_cast<int>(record.kernels.size()); ++row) {
    const KernelTiming& kernel = record.kernels[static_cast<size_t>(row)];
    // The runner rates the operator's work as a whole; a single kernel does all of it.
    std::optional<double> tflops = kernel.tflops, gbps = kernel.gbps;
    if (record.kernels.size() == 1) {
      if (!tflops) tflops = record.tflops;
      if (!gbps) gbps = record.gbps;
    }
    kernels_->setItem(row, 0, table_cell(QString::fromStdString(kernel.name), false));
    kernels_->setItem(row, 1, table_cell(QString::number(kernel.median_us, 'f', 1)));
    kernels_->setItem(row, 2, table_cell(tflops ? QString::number(*tflops, 'f', 1) : QString()));
    kernels_->setItem(row, 3, table_cell(gbps ? QString::number(*gbps, 'f', 1) : QString()));
  }
}

void ProfilerPanel::refresh_roofline() {
  std::optional<double> flops_ceiling = device_peak_flops_;
  std::optional<double> bytes_ceiling = device_peak_bytes_;
  QString device = device_name_;
  std::vector<RooflinePoint> points;
  // The cost model's kernels first (a measured device below replaces the preset's ceilings).
  if (estimate_ && estimate_device_ && estimate_->feasible) {
    if (!bytes_ceiling) bytes_ceiling = estimate_device_->dram_bytes_per_s;
    if (!flops_ceiling) flops_ceiling = estimate_device_->tensor_tflops_16bit * 1e12;
    if (device.isEmpty()) device = QString::fromStdString(estimate_device_->name) + tr(" (model)");
    for (const cost::KernelCost& kernel : estimate_->kernels) {
      const double flops = kernel.tensor_flops + kernel.cuda_core_flops;
      if (kernel.global_bytes <= 0 || kernel.microseconds <= 0 || flops <= 0) continue;
      points.push_back({tr("%1: %2 µs est.").arg(QString::fromStdString(kernel.kernel))
                            .arg(kernel.microseconds, 0, 'f', 1),
                        flops / kernel.global_bytes, flops / (kernel.microseconds * 1e-6), true});
    }
  }
  for (const RunRecord& record : history_->records()) {
    // The newest run that reached a device gives the ceilings (it may be a remote GPU).
    if (record.peak_bytes_per_s) bytes_ceiling = record.peak_bytes_per_s;
    if (record.peak_flops_per_s) flops_ceiling = record.peak_flops_per_s;
    if (!record.device.empty()) device = QString::fromStdString(record.device);
    if (record.ok() && record.flops && record.bytes && record.total_median_us &&
        *record.bytes > 0 && *record.total_median_us > 0) {
      points.push_back({QStringLiteral("%1 µs").arg(*record.total_median_us, 0, 'f', 1),
                        *record.flops / *record.bytes,
                        *record.flops / (*record.total_median_us * 1e-6)});
    }
  }
  roofline_->set_ceilings(flops_ceiling, bytes_ceiling, device);
  roofline_->set_points(std::move(points));
}

}  // namespace nautilus::views
