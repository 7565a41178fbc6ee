// A Nautilus Studio session: everything needed to reopen a piece of work as it was.
//
//   {
//     "format": "nautilus-studio-session", "version": 1,
//     "spec": {"path": "/abs/attention.nt", "name": "attention.nt", "text": "let B = 2 ..."},
//     "sizes": {"M": 1024, "N": 1024},
//     "schedule": {"decisions": ["rolling_update(O_sum, n, tile=64)", ...]},
//     "pins": [true, false, ...],
//     "runner_command": "ssh gpuhost nautilus-runner",
//     "runs": [RunRecord JSON (run_history_model.h), ...]
//   }
//
// The spec's text is always stored (a session reopens even when the file moved or changed); the
// path says where it came from. Sizes are the `-D` bindings the user set (only those that differ
// from the spec's `let` values). The window layout is not part of the file: it is per user
// (QSettings), like the recent-files list.
#pragma once

#include <QString>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sched/decision.h"
#include "views/run_history_model.h"

namespace nautilus::views {

inline constexpr const char* kSessionFormat = "nautilus-studio-session";
inline constexpr int kSessionVersion = 1;

struct Session {
  std::string spec_path;
  std::string spec_name;
  std::string spec_text;
  std::vector<std::pair<std::string, int64_t>> sizes;
  sched::Schedule schedule;
  std::vector<bool> pins;
  std::string runner_command;
  std::vector<RunRecord> runs;
  std::string arch = "sm_80";  // the MA lowering's target (optional in the file; sm_80 when absent)
};

nlohmann::ordered_json session_to_json(const Session& session);
// Fails with `error` for a document that is not a session of a known version or whose schedule
// does not parse.
bool session_from_json(const nlohmann::json& json, Session* session, std::string* error);

bool save_session(const QString& path, const Session& session, QString* error);
bool load_session(const QString& path, Session* session, QString* error);

}  // namespace nautilus::views
