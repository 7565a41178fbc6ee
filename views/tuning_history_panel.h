// The History panel: what the tuning database (core/tune/tuning_db.h) holds for the open spec at
// its sizes, one device at a time — the records measured by the search panel's Measure, by
// `nautilus tune` or by `nautilus schedule --measure`.
//
//   device [Nautilus Fake GPU 0 ▾]  [Refresh]  [Use best measured]   database: ~/.local/...
//   best: record 12, 41.20 µs (estimate 38.7 µs) · roofline bound 9.8 µs (memory ...)
//   ┌ table: # · time · schedule · median µs · estimate µs · validation · registers ┐
//   └ chart: measured time by record, best so far, the roofline bound of the math   ┘
//
// Reading the database, checking the spec (its hash and resolved sizes: the database's key) and
// computing the roofline bound (core/cost/roofline.h, on the device's cost model preset when the
// device is one the cost model knows, else on the search panel's preset) run on the panel's
// worker; a refresh follows every measurement and, debounced, every change of spec or sizes.
// The device list holds the devices the database has records of; the local GPU (queried on the
// worker through the same driver the runner uses, once per driver library) is shown first when it
// has records.
//
// "Use best measured" hands the fastest validated record's schedule to the window, which treats
// it as the search panel's "Use schedule" and says where it came from.
#pragma once

#include <QString>
#include <QWidget>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "core/tune/tuning_db.h"

class QComboBox;
class QLabel;
class QPushButton;
class QTableView;
class QTimer;

namespace nautilus::views {

class TaskRunner;
class TuningChart;
class TuningHistoryModel;

class TuningHistoryPanel : public QWidget {
  Q_OBJECT

 public:
  explicit TuningHistoryPanel(QWidget* parent = nullptr);
  ~TuningHistoryPanel() override;

  // The spec (text named `path`) and size bindings; a change refreshes after a short pause.
  void set_spec(const std::string& path, const std::string& text,
                std::vector<spec::SizeOverride> sizes);
  void set_database_path(const QString& path);
  const QString& database_path() const { return database_path_; }
  // The CUDA driver library that names the local GPU ("": the system's libcuda).
  void set_driver_library(const std::string& library);
  // The cost model preset ("h100", "a100") for the roofline of a device the cost model does not
  // know by name.
  void set_device_preset(const std::string& preset) { device_preset_ = preset; }

  // Reads the database again now (on the worker).
  void refresh();
  bool busy() const;
  // Shows the records of `device` (one of device_box()'s names).
  void show_device(const QString& device);
  QString shown_device() const;

  // The fastest validated record of the shown device / of the local GPU.
  std::optional<tune::TuningRecord> best_record() const;
  std::optional<tune::TuningRecord> local_best() const;
  // The local GPU's name ("" without one) as of the last refresh.
  const std::string& local_device() const { return local_device_; }
  // Emits schedule_chosen with the best record's schedule; false when there is none or its
  // schedule does not parse (the status line says why).
  bool use_best();

  TuningHistoryModel* model() const { return model_; }
  TuningChart* chart() const { return chart_; }
  QComboBox* device_box() const { return device_; }
  QLabel* status_label() const { return status_; }
  QPushButton* use_best_button() const { return use_best_; }

 Q_SIGNALS:
  // A refresh was delivered (the model, chart and device list are current).
  void refreshed();
  // "Use best measured": the schedule and where it came from ("best measured: record 12,
  // 41.20 µs on NVIDIA H100 80GB HBM3").
  void schedule_chosen(const nautilus::sched::Schedule& schedule, const QString& origin);

 private:
  struct Roofline {
    double microseconds = 0;
    QString label;
  };
  void show_records();

  std::string path_;
  std::string text_;
  std::vector<spec::SizeOverride> sizes_;
  QString database_path_;
  std::string driver_library_;
  std::string device_preset_ = "h100";

  // As of the last refresh: every record of the spec and sizes (all devices), the local GPU and
  // the roofline bound per device name.
  std::vector<tune::TuningRecord> records_;
  std::string local_device_;
  // The driver was asked for the local GPU (asked once per driver library: loading the driver
  // and initializing it again on every refresh would cost more than the read).
  bool local_device_known_ = false;
  std::map<std::string, Roofline> rooflines_;
  QString note_;  // why there is nothing to show, or ""

  QComboBox* device_ = nullptr;
  QPushButton* refresh_ = nullptr;
  QPushButton* use_best_ = nullptr;
  QLabel* database_label_ = nullptr;
  QLabel* status_ = nullptr;
  QTableView* table_ = nullptr;
  TuningHistoryModel* model_ = nullptr;
  TuningChart* chart_ = nullptr;
  QTimer* debounce_ = nullptr;
  TaskRunner* worker_ = nullptr;
};

// "best measured: record 12, 41.20 µs on NVIDIA H100 80GB HBM3" — where a schedule came from.
QString best_measured_origin(const tune::TuningRecord& record);

}  // namespace nautilus::views
