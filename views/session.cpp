#include "views/session.h"

#include <QFile>
#include <QSaveFile>

namespace nautilus::views {

nlohmann::ordered_json session_to_json(const Session& session) {
  nlohmann::ordered_json sizes = nlohmann::ordered_json::object();
  for (const auto& [name, value] : session.sizes) sizes[name] = value;
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const RunRecord& run : session.runs) runs.push_back(run_record_to_json(run));
  nlohmann::ordered_json pins = nlohmann::ordered_json::array();
  for (bool pinned : session.pins) pins.push_back(pinned);
  return {{"format", kSessionFormat},
          {"version", kSessionVersion},
          {"spec", {{"path", session.spec_path}, {"name", session.spec_name},
                    {"text", session.spec_text}}},
          {"sizes", sizes},
          {"schedule", sched::schedule_to_json(session.schedule)},
          {"pins", pins},
          {"runner_command", session.runner_command},
          {"arch", session.arch},
          {"runs", runs}};
}

bool session_from_json(const nlohmann::json& json, Session* session, std::string* error) {
  const auto fail = [error](const std::string& message) {
    if (error != nullptr) *error = message;
    return false;
  };
  if (!json.is_object() || json.value("format", std::string()) != kSessionFormat) {
    return fail("not a Nautilus Studio session (expected \"format\": \"" +
                std::string(kSessionFormat) + "\")");
  }
  if (!json.contains("version") || !json["version"].is_number_integer() ||
      json["version"].get<int>() != kSessionVersion) {
    return fail("unsupported session version (this build reads version " +
                std::to_string(kSessionVersion) + ")");
  }
  Session parsed;
  if (!json.contains("spec") || !json["spec"].is_object()) return fail("the session has no spec");
  const nlohmann::json& spec = json["spec"];
  for (const auto& [key, field] : {std::pair{"path", &parsed.spec_path},
                                   std::pair{"name", &parsed.spec_name},
                                   std::pair{"text", &parsed.spec_text}}) {
    if (spec.contains(key) && !spec[key].is_string()) {
      return fail(std::string("spec.") + key + " must be a string");
    }
    if (spec.contains(key)) *field = spec[key].get<std::string>();
  }
  if (json.contains("sizes")) {
    if (!json["sizes"].is_object()) return fail("sizes must be an object of NAME: VALUE");
    for (const auto& [name, value] : json["sizes"].items()) {
      if (!value.is_number_integer() || value.get<int64_t>() <= 0) {
        return fail("size " + name + " must be a positive integer");
      }
      parsed.sizes.emplace_back(name, value.get<int64_t>());
    }
  }
  if (json.contains("schedule")) {
    std::string schedule_error;
    auto schedule = sched::schedule_from_json(json["schedule"], &schedule_error);
    if (!schedule) return fail("schedule: " + schedule_error);
    parsed.schedule = *schedule;
  }
  if (json.contains("pins") && json["pins"].is_array()) {
    for (const nlohmann::json& pin : json["pins"]) parsed.pins.push_back(pin.is_boolean() && pin.get<bool>());
  }
  parsed.pins.resize(parsed.schedule.decisions.size(), false);
  if (json.contains("runner_command") && json["runner_command"].is_string()) {
    parsed.runner_command = json["runner_command"].get<std::string>();
  }
  if (json.contains("arch")) {
    const std::string arch = json["arch"].is_string() ? json["arch"].get<std::string>() : std::string();
    if (arch != "sm_80" && arch != "sm_90a") return fail("arch must be \"sm_80\" or \"sm_90a\"");
    parsed.arch = arch;
  }
  if (json.contains("runs") && json["runs"].is_array()) {
    for (const nlohmann::json& run : json["runs"]) parsed.runs.push_back(run_record_from_json(run));
  }
  *session = std::move(parsed);
  return true;
}

bool save_session(const QString& path, const Session& session, QString* error) {
  const std::string text = session_to_json(session).dump(2) + "\n";
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) ||
      file.write(text.data(), static_cast<qint64>(text.size())) < 0 || !file.commit()) {
    if (error != nullptr) *error = QObject::tr("cannot save %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

bool load_session(const QString& path, Session* session, QString* error) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    if (error != nullptr) *error = QObject::tr("cannot open %1: %2").arg(path, file.errorString());
    return false;
  }
  const QByteArray bytes = file.readAll();
  const nlohmann::json json = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (json.is_discarded()) {
    if (error != nullptr) *error = QObject::tr("%1 is not valid JSON").arg(path);
    return false;
  }
  std::string reason;
  if (!session_from_json(json, session, &reason)) {
    if (error != nullptr) *error = QStringLiteral("%1: %2").arg(path, QString::fromStdString(reason));
    return false;
  }
  return true;
}

}  // namespace nautilus::views
