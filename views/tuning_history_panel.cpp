#include "views/tuning_history_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/cost/device_models.h"
#include "core/cost/roofline.h"
#include "core/driver/pipeline.h"
#include "core/search/search.h"
#include "core/tune/tuner.h"
#include "profiler/local_executor.h"
#include "views/task_runner.h"
#include "views/tuning_chart.h"
#include "views/tuning_history_model.h"

namespace nautilus::views {
namespace {

// The fastest validated record of `device` among `records` (ties: the earlier record).
std::optional<tune::TuningRecord> fastest(const std::vector<tune::TuningRecord>& records,
                                          const std::string& device) {
  const tune::TuningRecord* best = nullptr;
  for (const tune::TuningRecord& record : records) {
    if (record.key.device_name != device || !record.usable()) continue;
    if (best == nullptr || *record.median_us < *best->median_us ||
        (*record.median_us == *best->median_us && record.id < best->id)) {
      best = &record;
    }
  }
  return best ? std::optional<tune::TuningRecord>(*best) : std::nullopt;
}

}  // namespace

QString best_measured_origin(const tune::TuningRecord& record) {
  return QObject::tr("best measured: record %1, %2 µs on %3")
      .arg(record.id)
      .arg(record.median_us.value_or(0), 0, 'f', 2)
      .arg(QString::fromStdString(record.key.device_name));
}

TuningHistoryPanel::TuningHistoryPanel(QWidget* parent) : QWidget(parent) {
  worker_ = new TaskRunner(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* bar = new QHBoxLayout();
  device_ = new QComboBox(this);
  device_->setObjectName(QStringLiteral("history_device"));
  device_->setMinimumContentsLength(24);
  device_->setToolTip(tr("The device whose measurements are shown"));
  refresh_ = new QPushButton(tr("Refresh"), this);
  use_best_ = new QPushButton(tr("Use best measured"), this);
  use_best_->setObjectName(QStringLiteral("use_best_measured"));
  use_best_->setToolTip(tr("Compile the fastest validated schedule of this device"));
  use_best_->setEnabled(false);
  database_label_ = new QLabel(this);
  database_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  bar->addWidget(new QLabel(tr("Device"), this));
  bar->addWidget(device_);
  bar->addWidget(refresh_);
  bar->addWidget(use_best_);
  bar->addWidget(database_label_, 1);
  layout->addLayout(bar);
  status_ = new QLabel(tr("Open a spec to see its measurements."), this);
  status_->setObjectName(QStringLiteral("history_status"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(status_);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  model_ = new TuningHistoryModel(this);
  table_ = new QTableView(splitter);
  table_->setObjectName(QStringLiteral("history_table"));
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->setWordWrap(false);  // one line per record; the tooltip has the whole schedule
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  for (int column : {TuningHistoryModel::Order, TuningHistoryModel::Time, TuningHistoryModel::Median,
                     TuningHistoryModel::Estimate, TuningHistoryModel::Validation,
                     TuningHistoryModel::Registers}) {
    table_->horizontalHeader()->setSectionResizeMode(column, QHeaderView::ResizeToContents);
  }
  table_->horizontalHeader()->setSectionResizeMode(TuningHistoryModel::Schedule, QHeaderView::Stretch);
  chart_ = new TuningChart(splitter);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  layout->addWidget(splitter, 1);

  debounce_ = new QTimer(this);
  debounce_->setSingleShot(true);
  debounce_->setInterval(400);
  connect(debounce_, &QTimer::timeout, this, &TuningHistoryPanel::refresh);
  connect(refresh_, &QPushButton::clicked, this, &TuningHistoryPanel::refresh);
  connect(use_best_, &QPushButton::clicked, this, &TuningHistoryPanel::use_best);
  connect(device_, &QComboBox::currentTextChanged, this, [this] { show_records(); });
  set_database_path(QString::fromStdString(tune::default_database_path()));
}

TuningHistoryPanel::~TuningHistoryPanel() {
  // Wait for a read in flight while the panel is whole.
  delete worker_;
}

void TuningHistoryPanel::set_spec(const std::string& path, const std::string& text,
                                  std::vector<spec::SizeOverride> sizes) {
  const bool same_sizes =
      sizes.size() == sizes_.size() &&
      std::equal(sizes.begin(), sizes.end(), sizes_.begin(), [](const auto& a, const auto& b) {
        return a.name == b.name && a.value == b.value;
      });
  if (path == path_ && text == text_ && same_sizes) return;
  path_ = path;
  text_ = text;
  sizes_ = std::move(sizes);
  debounce_->start();
}

void TuningHistoryPanel::set_driver_library(const std::string& library) {
  if (library == driver_library_) return;
  driver_library_ = library;
  local_device_known_ = false;
}

void TuningHistoryPanel::set_database_path(const QString& path) {
  database_path_ = path;
  database_label_->setText(tr("database: %1").arg(path.isEmpty() ? tr("none") : path));
}

bool TuningHistoryPanel::busy() const { return worker_->busy() || debounce_->isActive(); }

void TuningHistoryPanel::refresh() {
  debounce_->stop();
  struct Snapshot {
    QString note;
    std::vector<tune::TuningRecord> records;
    std::string local_device;
    std::map<std::string, Roofline> rooflines;
  };
  const std::string path = path_.empty() ? std::string("untitled.nt") : path_;
  const std::string text = text_;
  const std::vector<spec::SizeOverride> sizes = sizes_;
  const std::string db_path = database_path_.toStdString();
  const std::string driver = driver_library_;
  const std::string preset = device_preset_;
  const std::optional<std::string> known_device =
      local_device_known_ ? std::optional<std::string>(local_device_) : std::nullopt;
  worker_->post([this, path, text, sizes, db_path, driver, preset,
                 known_device]() -> TaskRunner::Continuation {
    Snapshot snapshot;
    try {
      std::string why;
      snapshot.local_device =
          known_device ? *known_device : profiler::local_device_name(driver, 0, &why);
      search::SearchInput input;
      input.file = std::make_shared<const SourceFile>(path, text);
      input.sizes = sizes;
      std::string error;
      const std::optional<tune::SpecIdentity> identity =
          text.empty() ? std::nullopt : tune::identify_spec(input, &error);
      std::unique_ptr<tune::TuningDatabase> db;
      if (text.empty()) {
        snapshot.note = tr("Open a spec to see its measurements.");
      } else if (!identity) {
        snapshot.note = tr("The spec does not check: no measurements to look up.");
      } else if (db_path.empty()) {
        snapshot.note = tr("No tuning database: set XDG_DATA_HOME or HOME.");
      } else if (!std::filesystem::exists(db_path)) {
        snapshot.note = tr("No tuning database at %1 yet: Measure in the Search panel, or "
                           "nautilus tune, creates it.").arg(QString::fromStdString(db_path));
      } else if (!(db = tune::TuningDatabase::open(db_path, false, &error))) {
        snapshot.note = QString::fromStdString(error);
      } else {
        tune::RecordFilter filter;
        filter.spec_hash = identity->spec_hash;
        filter.sizes = identity->sizes;
        snapshot.records = db->list(filter);
        // A duplicate is a schedule whose code another record measured: not a measurement of
        // its own, so not a point of the history.
        std::erase_if(snapshot.records,
                      [](const tune::TuningRecord& record) { return record.is_duplicate(); });
        // The roofline bound of the math on each device's cost model.
        driver::CompileOptions options;
        options.last_stage = driver::Stage::Spec;
        options.sizes = sizes;
        const driver::Compilation compilation = driver::compile(input.file, options);
        std::set<std::string> devices;
        for (const tune::TuningRecord& record : snapshot.records) devices.insert(record.key.device_name);
        for (const std::string& device : devices) {
          std::optional<cost::DeviceModel> model = cost::device_model_for(device);
          QString basis = QString::fromStdString(device);
          if (!model) {
            model = cost::device_model_for(preset);
            basis = tr("the %1 preset").arg(QString::fromStdString(preset).toUpper());
          }
          if (!model || !compilation.spec) continue;
          const cost::RooflineBound bound = cost::math_roofline(*compilation.spec, *model);
          snapshot.rooflines[device] =
              Roofline{bound.microseconds,
                       tr("%1 on %2").arg(QString::fromStdString(cost::describe(bound)), basis)};
        }
      }
    } catch (const std::exception& error) {
      snapshot.note = tr("internal error: %1").arg(QString::fromUtf8(error.what()));
    }
    return [this, driver, snapshot = std::move(snapshot)]() mutable {
      records_ = std::move(snapshot.records);
      if (driver == driver_library_) {
        local_device_ = std::move(snapshot.local_device);
        local_device_known_ = true;
      }
      rooflines_ = std::move(snapshot.rooflines);
      note_ = snapshot.note;
      // The device list: every device with records, the local GPU first, then by the newest
      // record; the device shown stays when it is still there.
      std::vector<std::string> devices;
      const bool local_has_records =
          std::any_of(records_.begin(), records_.end(),
                      [this](const auto& r) { return r.key.device_name == local_device_; });
      if (!local_device_.empty() && local_has_records) devices.push_back(local_device_);
      for (auto record = records_.rbegin(); record != records_.rend(); ++record) {
        if (std::find(devices.begin(), devices.end(), record->key.device_name) == devices.end()) {
          devices.push_back(record->key.device_name);
        }
      }
      const QString previous = device_->currentText();
      QString shown = devices.empty() ? QString() : QString::fromStdString(devices.front());
      for (const std::string& device : devices) {
        if (QString::fromStdString(device) == previous) shown = previous;
      }
      {
        const QSignalBlocker blocker(device_);
        device_->clear();
        for (const std::string& device : devices) device_->addItem(QString::fromStdString(device));
        device_->setCurrentText(shown);
      }
      show_records();
      Q_EMIT refreshed();
    };
  });
}

QString TuningHistoryPanel::shown_device() const { return device_->currentText(); }

void TuningHistoryPanel::show_device(const QString& device) { device_->setCurrentText(device); }

void TuningHistoryPanel::show_records() {
  const std::string device = device_->currentText().toStdString();
  std::vector<tune::TuningRecord> shown;
  for (const tune::TuningRecord& record : records_) {
    if (record.key.device_name == device) shown.push_back(record);
  }
  model_->set_records(std::move(shown));
  std::vector<std::optional<double>> medians;
  for (const tune::TuningRecord& record : model_->records()) {
    medians.push_back(record.usable() ? record.median_us : std::nullopt);
  }
  chart_->set_series(std::move(medians), model_->best_so_far());
  const auto roofline = rooflines_.find(device);
  if (roofline != rooflines_.end()) {
    chart_->set_roofline(roofline->second.microseconds, roofline->second.label);
  } else {
    chart_->set_roofline(std::nullopt, QString());
  }
  const std::optional<tune::TuningRecord> best = best_record();
  use_best_->setEnabled(best.has_value());
  if (!note_.isEmpty()) {
    status_->setText(note_);
    return;
  }
  if (model_->rowCount() == 0) {
    status_->setText(
        tr("No measurements of this spec at these sizes%1 yet: Measure in the Search panel.")
            .arg(local_device_.empty() ? QString()
                                       : tr(" on %1").arg(QString::fromStdString(local_device_))));
    return;
  }
  int failed = 0;
  for (const tune::TuningRecord& record : model_->records()) failed += !record.usable();
  QString text = tr("%1 records (%2 without a time)").arg(model_->rowCount()).arg(failed);
  if (best) {
    text += tr(" · best: record %1, %2 µs").arg(best->id).arg(*best->median_us, 0, 'f', 2);
    if (best->estimate_us) text += tr(" (estimate %1 µs)").arg(*best->estimate_us, 0, 'f', 1);
  }
  if (roofline != rooflines_.end()) {
    text += tr(" · roofline bound %1").arg(roofline->second.label);
  }
  status_->setText(text);
}

std::optional<tune::TuningRecord> TuningHistoryPanel::best_record() const {
  return fastest(records_, device_->currentText().toStdString());
}

std::optional<tune::TuningRecord> TuningHistoryPanel::local_best() const {
  if (local_device_.empty()) return std::nullopt;
  return fastest(records_, local_device_);
}

bool TuningHistoryPanel::use_best() {
  const std::optional<tune::TuningRecord> best = best_record();
  if (!best) {
    status_->setText(tr("No validated measurement to use on this device."));
    return false;
  }
  std::string error;
  const std::optional<sched::Schedule> schedule = sched::schedule_from_json(
      nlohmann::json::parse(best->schedule_json, nullptr, false), &error);
  if (!schedule) {
    status_->setText(tr("Record %1 holds an unreadable schedule: %2")
                         .arg(best->id)
                         .arg(QString::fromStdString(error)));
    return false;
  }
  Q_EMIT schedule_chosen(*schedule, best_measured_origin(*best));
  return true;
}

}  // namespace nautilus::views
