#include "views/run_history_model.h"

#include <QDateTime>

namespace nautilus::views {
namespace {

std::optional<double> number_at(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  return object[key].get<double>();
}

void put(nlohmann::ordered_json& json, const char* key, const std::optional<double>& value) {
  if (value) json[key] = *value;
}

QString number_text(const std::optional<double>& value, int decimals) {
  return value ? QString::number(*value, 'f', decimals) : QString();
}

}  // namespace

std::optional<double> tensor_peak_flops(const nlohmann::json& device) {
  const auto sms = number_at(device, "sm_count");
  const auto clock_khz = number_at(device, "sm_clock_khz");
  if (!sms || !clock_khz || !device.contains("compute_capability") ||
      !device["compute_capability"].is_string()) {
    return std::nullopt;
  }
  // Dense 16-bit tensor-core FLOPs per clock per SM (multiply-add = 2): 2048 on sm_80 (A100,
  // 312 TFLOP/s at 1.41 GHz x 108 SMs), 4096 on sm_90 (H100 SXM, 989 TFLOP/s at 1.83 GHz x 132).
  const std::string capability = device["compute_capability"].get<std::string>();
  double per_clock = 0;
  if (capability.rfind("8.0", 0) == 0) per_clock = 2048;
  else if (capability.rfind("8.", 0) == 0) per_clock = 1024;  // sm_86/89: half the A100 rate
  else if (capability.rfind("9.", 0) == 0 || capability.rfind("10.", 0) == 0) per_clock = 4096;
  if (per_clock == 0) return std::nullopt;
  return *sms * *clock_khz * 1e3 * per_clock;
}

RunRecord record_from_result(const profiler::RunResult& result, const std::string& schedule) {
  RunRecord record;
  record.time = QDateTime::currentDateTime().toString(Qt::ISODate).toStdString();
  record.schedule = schedule;
  record.status = profiler::run_status_name(result.status);
  record.message = result.message;
  record.report = result.report;
  record.total_median_us = result.total_median_us;
  const nlohmann::json& report = result.report;
  if (!report.is_object()) return record;
  if (report.contains("device") && report["device"].is_object()) {
    const nlohmann::json& device = report["device"];
    if (device.contains("name") && device["name"].is_string()) {
      record.device = device["name"].get<std::string>();
    }
    record.peak_bytes_per_s = number_at(device, "peak_memory_bandwidth_bytes_per_s");
    record.peak_flops_per_s = tensor_peak_flops(device);
  }
  if (report.contains("timing") && report["timing"].is_object()) {
    const nlohmann::json& timing = report["timing"];
    if (timing.contains("kernels") && timing["kernels"].is_array()) {
      for (const nlohmann::json& kernel : timing["kernels"]) {
        KernelTiming entry;
        if (kernel.contains("name") && kernel["name"].is_string()) {
          entry.name = kernel["name"].get<std::string>();
        }
        entry.median_us = number_at(kernel, "median_us").value_or(0.0);
        entry.tflops = number_at(kernel, "tflops");
        entry.gbps = number_at(kernel, "gbps");
        record.kernels.push_back(entry);
      }
    }
    if (timing.contains("total") && timing["total"].is_object()) {
      const nlohmann::json& total = timing["total"];
      if (!record.total_median_us) record.total_median_us = number_at(total, "median_us");
      record.tflops = number_at(total, "tflops");
      record.gbps = number_at(total, "gbps");
      record.flops = number_at(total, "flops");
      record.bytes = number_at(total, "bytes");
    }
  }
  return record;
}

nlohmann::ordered_json run_record_to_json(const RunRecord& record) {
  nlohmann::ordered_json json = {{"time", record.time},     {"schedule", record.schedule},
                                 {"status", record.status}, {"message", record.message},
                                 {"device", record.device}};
  put(json, "total_median_us", record.total_median_us);
  put(json, "tflops", record.tflops);
  put(json, "gbps", record.gbps);
  put(json, "flops", record.flops);
  put(json, "bytes", record.bytes);
  put(json, "peak_bytes_per_s", record.peak_bytes_per_s);
  put(json, "peak_flops_per_s", record.peak_flops_per_s);
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const KernelTiming& kernel : record.kernels) {
    nlohmann::ordered_json entry = {{"name", kernel.name}, {"median_us", kernel.median_us}};
    put(entry, "tflops", kernel.tflops);
    put(entry, "gbps", kernel.gbps);
    kernels.push_back(entry);
  }
  json["kernels"] = kernels;
  json["report"] = record.report;
  return json;
}

RunRecord run_record_from_json(const nlohmann::json& json) {
  RunRecord record;
  if (!json.is_object()) return record;
  const auto text = [&json](const char* key) {
    return json.contains(key) && json[key].is_string() ? json[key].get<std::string>()
                                                      : std::string();
  };
  record.time = text("time");
  record.schedule = text("schedule");
  record.status = text("status");
  record.message = text("message");
  record.device = text("device");
  record.total_median_us = number_at(json, "total_median_us");
  record.tflops = number_at(json, "tflops");
  record.gbps = number_at(json, "gbps");
  record.flops = number_at(json, "flops");
  record.bytes = number_at(json, "bytes");
  record.peak_bytes_per_s = number_at(json, "peak_bytes_per_s");
  record.peak_flops_per_s = number_at(json, "peak_flops_per_s");
  if (json.contains("kernels") && json["kernels"].is_array()) {
    for (const nlohmann::json& kernel : json["kernels"]) {
      KernelTiming entry;
      if (kernel.contains("name") && kernel["name"].is_string()) {
        entry.name = kernel["name"].get<std::string>();
      }
      entry.median_us = number_at(kernel, "median_us").value_or(0.0);
      entry.tflops = number_at(kernel, "tflops");
      entry.gbps = number_at(kernel, "gbps");
      record.kernels.push_back(entry);
    }
  }
  if (json.contains("report")) record.report = json["report"];
  return record;
}

RunHistoryModel::RunHistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunHistoryModel::append(RunRecord record) {
  const int row = rowCount();
  beginInsertRows({}, row, row);
  records_.push_back(std::move(record));
  endInsertRows();
}

void RunHistoryModel::set_records(std::vector<RunRecord> records) {
  beginResetModel();
  records_ = std::move(records);
  endResetModel();
}

void RunHistoryModel::clear() { set_records({}); }

int RunHistoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(records_.size());
}

int RunHistoryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant RunHistoryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const RunRecord& record = records_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Time: {
        const QDateTime time = QDateTime::fromString(QString::fromStdString(record.time), Qt::ISODate);
        return time.isValid() ? time.toString(QStringLiteral("HH:mm:ss"))
                              : QString::fromStdString(record.time);
      }
      case Schedule:
        return record.schedule.empty() ? tr("(unscheduled)") : QString::fromStdString(record.schedule);
      case Status: return QString::fromStdString(record.status);
      case TotalUs: return number_text(record.total_median_us, 1);
      case Tflops: return number_text(record.tflops, 1);
      case Gbps: return number_text(record.gbps, 1);
      case Message: return QString::fromStdString(record.message);
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    return QString::fromStdString(record.schedule + "\n" + record.message);
  }
  return {};
}

QVariant RunHistoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Time: return tr("When");
    case Schedule: return tr("Schedule");
    case Status: return tr("Status");
    case TotalUs: return tr("Total µs");
    case Tflops: return tr("TFLOP/s");
    case Gbps: return tr("GB/s");
    case Message: return tr("Message");
    default: return {};
  }
}

}  // namespace nautilus::views
