// Runs of kernel packages through nautilus-runner, as the profiler panel keeps them: one
// RunRecord per run (ok or not), newest last, and a table model over them for comparison.
//
//   when      schedule                  status   total µs   TFLOP/s   GB/s    message
//   10:42:03  rolling_update(...); ...  ok       412.3      266.7     312.0
//   10:40:11  (unscheduled)             no_gpu                                  no GPU: cannot ...
//
// A record is built from the runner client's RunResult (`record_from_result`) and serializes to
// JSON for sessions (the runner's whole report is kept, so nothing measured is lost).
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/runner_client.h"

namespace nautilus::views {

struct KernelTiming {
  std::string name;
  double median_us = 0;
  std::optional<double> tflops;
  std::optional<double> gbps;
};

struct RunRecord {
  std::string time;      // ISO 8601, local time
  std::string schedule;  // the decisions, "; "-separated ("" for the unscheduled program)
  std::string status;    // run_status_name(), or "build_error" when no package was built
  std::string message;
  std::string device;    // the GPU's name when the runner found one
  std::optional<double> total_median_us;
  std::optional<double> tflops;
  std::optional<double> gbps;
  std::optional<double> flops;  // the work of the operator (package launch.json)
  std::optional<double> bytes;
  std::optional<double> peak_bytes_per_s;  // the device's DRAM ceiling from the report
  std::optional<double> peak_flops_per_s;  // the device's tensor-core ceiling (arch table)
  std::vector<KernelTiming> kernels;
  nlohmann::json report;  // the runner's report (null when it printed none)

  bool ok() const { return status == "ok"; }
};

// The record of one runner call. `schedule` labels it.
RunRecord record_from_result(const profiler::RunResult& result, const std::string& schedule);
// Dense bf16/f16 tensor-core FLOP/s of a device from its report ("compute_capability",
// "sm_count", "sm_clock_khz"), or nullopt when the report has no device.
std::optional<double> tensor_peak_flops(const nlohmann::json& device);

nlohmann::ordered_json run_record_to_json(const RunRecord& record);
RunRecord run_record_from_json(const nlohmann::json& json);

class RunHistoryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Time, Schedule, Status, TotalUs, Tflops, Gbps, Message, ColumnCount };

  explicit RunHistoryModel(QObject* parent = nullptr);

  void append(RunRecord record);
  void set_records(std::vector<RunRecord> records);
  void clear();
  const std::vector<RunRecord>& records() const { return records_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<RunRecord> records_;
};

}  // namespace nautilus::views
