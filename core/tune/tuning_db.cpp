#include "core/tune/tuning_db.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

namespace nautilus::tune {
namespace {

// A writer waits this long for another process's transaction before giving up: tuners write a
// record every few hundred milliseconds, so a wait of more than a few seconds means a stuck peer.
constexpr int kBusyTimeoutMs = 30000;
// Opening retries a lost race to switch a new file to WAL this often, this long apart (a few
// seconds in all: the winner's switch and migration take milliseconds).
constexpr int kOpenAttempts = 200;
constexpr int kOpenRetryMs = 20;

// A prepared statement, finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  std::string error() const { return sqlite3_errmsg(db_); }
  void bind(int index, const std::string& text) {
    sqlite3_bind_text(stmt_, index, text.c_str(), -1, SQLITE_TRANSIENT);
  }
  void bind(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }
  void bind(int index, const std::optional<double>& value) {
    if (value) sqlite3_bind_double(stmt_, index, *value);
    else sqlite3_bind_null(stmt_, index);
  }
  void bind(int index, const std::optional<int64_t>& value) {
    if (value) sqlite3_bind_int64(stmt_, index, *value);
    else sqlite3_bind_null(stmt_, index);
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return stmt_ ? sqlite3_step(stmt_) : SQLITE_ERROR; }
  std::string text(int column) const {
    const unsigned char* value = sqlite3_column_text(stmt_, column);
    return value ? reinterpret_cast<const char*>(value) : "";
  }
  int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  bool null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::optional<double> real(int column) const {
    if (null(column)) return std::nullopt;
    return sqlite3_column_double(stmt_, column);
  }
  std::optional<int64_t> optional_integer(int column) const {
    if (null(column)) return std::nullopt;
    return integer(column);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

bool exec(sqlite3* db, const std::string& sql, std::string* error) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK) return true;
  if (error) *error = message ? message : sqlite3_errmsg(db);
  sqlite3_free(message);
  return false;
}

const char* kColumns =
    "id, created_unix, spec_hash, sizes, schedule, device_name, sm_count, sm_clock_khz, "
    "memory_clock_khz, driver_version, compiler_version, spec_path, spec_name, schedule_json, "
    "code_hash, status, message, validation, max_relative_error, median_us, min_us, max_us, "
    "kernels_json, registers, spill_bytes, estimate_us, source, duplicate_of";

nlohmann::json kernels_to_json(const std::vector<KernelTiming>& kernels) {
  nlohmann::json out = nlohmann::json::array();
  for (const KernelTiming& kernel : kernels) {
    nlohmann::json entry = {{"name", kernel.name}};
    if (kernel.median_us) entry["median_us"] = *kernel.median_us;
    if (kernel.min_us) entry["min_us"] = *kernel.min_us;
    if (kernel.max_us) entry["max_us"] = *kernel.max_us;
    if (kernel.registers) entry["registers"] = *kernel.registers;
    if (kernel.spill_bytes) entry["spill_bytes"] = *kernel.spill_bytes;
    out.push_back(entry);
  }
  return out;
}

std::vector<KernelTiming> kernels_from_json(const std::string& text) {
  std::vector<KernelTiming> kernels;
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_array()) return kernels;
  for (const nlohmann::json& entry : json) {
    if (!entry.is_object()) continue;
    KernelTiming kernel;
    kernel.name = entry.value("name", "");
    auto number = [&](const char* name) -> std::optional<double> {
      if (!entry.contains(name) || !entry[name].is_number()) return std::nullopt;
      return entry[name].get<double>();
    };
    kernel.median_us = number("median_us");
    kernel.min_us = number("min_us");
    kernel.max_us = number("max_us");
    if (auto registers = number("registers")) kernel.registers = static_cast<int>(*registers);
    if (auto spills = number("spill_bytes")) kernel.spill_bytes = static_cast<int64_t>(*spills);
    kernels.push_back(kernel);
  }
  return kernels;
}

TuningRecord read_record(const Statement& row) {
  TuningRecord record;
  int c = 0;
  record.id = row.integer(c++);
  record.created_unix = row.integer(c++);
  record.key.spec_hash = row.text(c++);
  record.key.sizes = row.text(c++);
  record.key.schedule = row.text(c++);
  record.key.device_name = row.text(c++);
  record.key.sm_count = static_cast<int>(row.integer(c++));
  record.key.sm_clock_khz = static_cast<int>(row.integer(c++));
  record.key.memory_clock_khz = static_cast<int>(row.integer(c++));
  record.key.driver_version = static_cast<int>(row.integer(c++));
  record.key.compiler_version = row.text(c++);
  record.spec_path = row.text(c++);
  record.spec_name = row.text(c++);
  record.schedule_json = row.text(c++);
  record.code_hash = row.text(c++);
  record.status = row.text(c++);
  record.message = row.text(c++);
  record.validation = parse_validation(row.text(c++)).value_or(Validation::NotRun);
  record.max_relative_error = row.real(c++);
  record.median_us = row.real(c++);
  record.min_us = row.real(c++);
  record.max_us = row.real(c++);
  record.kernels = kernels_from_json(row.text(c++));
  if (auto registers = row.optional_integer(c++)) record.registers = static_cast<int>(*registers);
  record.spill_bytes = row.optional_integer(c++);
  record.estimate_us = row.real(c++);
  record.source = row.text(c++);
  record.duplicate_of = row.optional_integer(c++);
  return record;
}

// The WHERE clause of a filter; its parameters are bound in order by bind_filter.
std::string where_clause(const RecordFilter& filter) {
  std::string where = " WHERE 1";
  if (!filter.spec_hash.empty()) where += " AND spec_hash = ?";
  if (!filter.sizes.empty()) where += " AND sizes = ?";
  if (!filter.device_name.empty()) where += " AND device_name = ?";
  if (filter.older_than_unix) where += " AND created_unix < ?";
  if (filter.usable_only) {
    where += " AND status = 'ok' AND validation = 'passed' AND median_us IS NOT NULL";
  }
  return where;
}

int bind_filter(Statement& statement, const RecordFilter& filter, int index = 1) {
  if (!filter.spec_hash.empty()) statement.bind(index++, filter.spec_hash);
  if (!filter.sizes.empty()) statement.bind(index++, filter.sizes);
  if (!filter.device_name.empty()) statement.bind(index++, filter.device_name);
  if (filter.older_than_unix) statement.bind(index++, *filter.older_than_unix);
  return index;
}

}  // namespace

const char* validation_name(Validation validation) {
  switch (validation) {
    case Validation::Passed: return "passed";
    case Validation::Failed: return "failed";
    case Validation::Skipped: return "skipped";
    case Validation::NotRun: return "not-run";
  }
  return "not-run";
}

std::optional<Validation> parse_validation(const std::string& text) {
  for (Validation v : {Validation::Passed, Validation::Failed, Validation::Skipped,
                       Validation::NotRun}) {
    if (text == validation_name(v)) return v;
  }
  return std::nullopt;
}

std::string spec_text_hash(const std::string& spec_text) {
  std::string normalized;
  std::istringstream lines(spec_text);
  for (std::string line; std::getline(lines, line);) {
    line = line.substr(0, line.find('#'));
    std::string collapsed;
    bool blank = false;
    for (char c : line) {
      if (c == ' ' || c == '\t' || c == '\r') {
        blank = true;
        continue;
      }
      if (blank && !collapsed.empty()) collapsed += ' ';
      blank = false;
      collapsed += c;
    }
    if (collapsed.empty()) continue;
    normalized += collapsed;
    normalized += '\n';
  }
  return hash_text(normalized);
}

std::string canonical_sizes(std::vector<std::pair<std::string, int64_t>> sizes) {
  std::sort(sizes.begin(), sizes.end());
  std::string out;
  for (const auto& [name, value] : sizes) {
    if (!out.empty()) out += ',';
    out += name + "=" + std::to_string(value);
  }
  return out;
}

std::optional<sched::Schedule> record_schedule(const TuningRecord& record, std::string* error) {
  if (!record.schedule_json.empty()) {
    const nlohmann::json json = nlohmann::json::parse(record.schedule_json, nullptr, false);
    if (auto schedule = sched::schedule_from_json(json, error)) return schedule;
  }
  sched::Schedule schedule;
  const std::string& text = record.key.schedule;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find("; ", start);
    if (end == std::string::npos) end = text.size();
    const std::string piece = text.substr(start, end - start);
    if (!piece.empty()) {
      sched::DecisionParseError parse_error;
      auto decision = sched::parse_decision(piece, &parse_error);
      if (!decision) {
        *error = "schedule '" + piece + "': " + sched::to_string(parse_error);
        return std::nullopt;
      }
      schedule.decisions.push_back(*decision);
    }
    start = end + 2;
  }
  return schedule;
}

std::string default_database_path() {
  const char* data_home = std::getenv("XDG_DATA_HOME");
  if (data_home && *data_home) return std::string(data_home) + "/nautilus/tuning.db";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/share/nautilus/tuning.db";
  return "";
}

const std::vector<std::string>& TuningDatabase::migrations() {
  static const std::vector<std::string> steps = {
      // 0 -> 1: measurements with their key, outcome and times.
      "CREATE TABLE schema_version (version INTEGER NOT NULL);"
      "INSERT INTO schema_version VALUES (0);"
      "CREATE TABLE measurements ("
      "  id INTEGER PRIMARY KEY AUTOINCREMENT, created_unix INTEGER NOT NULL,"
      "  spec_hash TEXT NOT NULL, sizes TEXT NOT NULL, schedule TEXT NOT NULL,"
      "  device_name TEXT NOT NULL, sm_count INTEGER, sm_clock_khz INTEGER,"
      "  memory_clock_khz INTEGER, driver_version INTEGER, compiler_version TEXT,"
      "  spec_path TEXT, spec_name TEXT, schedule_json TEXT, code_hash TEXT,"
      "  status TEXT NOT NULL, message TEXT, validation TEXT NOT NULL,"
      "  max_relative_error REAL, median_us REAL, min_us REAL, max_us REAL,"
      "  kernels_json TEXT, source TEXT);"
      "CREATE INDEX measurements_by_config ON measurements (spec_hash, sizes, device_name);",
      // 1 -> 2: what the kernels cost in registers and spills, and what the model predicted
      // (calibration compares the estimate with the median).
      "ALTER TABLE measurements ADD COLUMN registers INTEGER;"
      "ALTER TABLE measurements ADD COLUMN spill_bytes INTEGER;"
      "ALTER TABLE measurements ADD COLUMN estimate_us REAL;",
      // 2 -> 3: one calibration of the cost model per device (nautilus db calibrate).
      "CREATE TABLE calibrations ("
      "  device_name TEXT PRIMARY KEY, created_unix INTEGER NOT NULL, model TEXT,"
      "  compiler_version TEXT, factors_json TEXT NOT NULL, fitted_records INTEGER,"
      "  held_out_records INTEGER, spearman_before REAL, spearman_after REAL,"
      "  held_out_spearman_before REAL, held_out_spearman_after REAL);",
      // 3 -> 4: a schedule whose generated code was measured already under another schedule is
      // recorded, not measured, as a duplicate of that record; the index finds a code's record.
      "ALTER TABLE measurements ADD COLUMN duplicate_of INTEGER;"
      "CREATE INDEX measurements_by_code ON measurements (spec_hash, sizes, device_name,"
      "  code_hash);",
  };
  return steps;
}

std::unique_ptr<TuningDatabase> TuningDatabase::open(const std::string& path, bool create,
                                                     std::string* error) {
  std::error_code ec;
  if (path.empty()) {
    *error = "no tuning database path: set XDG_DATA_HOME or HOME, or give --db PATH";
    return nullptr;
  }
  if (!std::filesystem::exists(path, ec)) {
    if (!create) {
      *error = "no tuning database at '" + path + "' (nautilus tune creates it; or give --db)";
      return nullptr;
    }
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  } else if (std::filesystem::is_directory(path, ec)) {
    *error = "'" + path + "' is a directory, not a tuning database";
    return nullptr;
  }
  sqlite3* handle = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &handle, flags, nullptr) != SQLITE_OK) {
    *error = "cannot open tuning database '" + path + "': " +
             (handle ? sqlite3_errmsg(handle) : "out of memory");
    sqlite3_close(handle);
    return nullptr;
  }
  std::unique_ptr<TuningDatabase> db(new TuningDatabase(handle, path));
  sqlite3_busy_timeout(handle, kBusyTimeoutMs);
  std::string sql_error;
  // WAL: readers never block the writer and a killed writer's partial transaction is ignored
  // on the next open. synchronous=FULL: a committed record survives a power cut too.
  // Two processes opening a new file at once both switch it to WAL; SQLite answers the one that
  // loses that race "database is locked" at once instead of waiting (the busy timeout does not
  // apply to the switch), so it tries again after the other has finished.
  for (int attempt = 0;; ++attempt) {
    sql_error.clear();
    if (exec(handle, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", &sql_error) &&
        db->migrate(&sql_error)) {
      return db;
    }
    const int code = sqlite3_errcode(handle) & 0xff;
    if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || attempt >= kOpenAttempts) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kOpenRetryMs));
  }
  *error = "'" + path + "' is not a usable tuning database: " + sql_error;
  return nullptr;
}

TuningDatabase::~TuningDatabase() { sqlite3_close(db_); }

bool TuningDatabase::migrate(std::string* error) {
  // IMMEDIATE: two processes opening a fresh file at once must not both migrate it.
  if (!exec(db_, "BEGIN IMMEDIATE", error)) return false;
  auto fail = [&](const std::string& message) {
    *error = message;
    exec(db_, "ROLLBACK", nullptr);
    return false;
  };
  int version = 0;
  {
    Statement tables(db_, "SELECT name FROM sqlite_master WHERE type = 'table'");
    if (!tables.ok()) return fail(tables.error());
    bool has_version = false, has_other = false;
    for (int rc; (rc = tables.step()) == SQLITE_ROW;) {
      const std::string name = tables.text(0);
      if (name == "schema_version") has_version = true;
      else if (name.rfind("sqlite_", 0) != 0) has_other = true;
    }
    if (!has_version && has_other) {
      return fail("it is an SQLite file without a schema_version table (not written by nautilus)");
    }
    if (has_version) {
      Statement read(db_, "SELECT version FROM schema_version");
      if (!read.ok() || read.step() != SQLITE_ROW) return fail("its schema_version table is empty");
      version = static_cast<int>(read.integer(0));
    }
  }
  if (version > kSchemaVersion) {
    return fail("it has schema version " + std::to_string(version) +
                ", written by a newer nautilus; this one reads up to version " +
                std::to_string(kSchemaVersion));
  }
  for (int step = version; step < kSchemaVersion; ++step) {
    std::string step_error;
    if (!exec(db_, migrations()[step], &step_error)) {
      return fail("migrating from schema version " + std::to_string(step) + ": " + step_error);
    }
  }
  if (version != kSchemaVersion &&
      !exec(db_, "UPDATE schema_version SET version = " + std::to_string(kSchemaVersion), error)) {
    exec(db_, "ROLLBACK", nullptr);
    return false;
  }
  if (!exec(db_, "COMMIT", error)) {
    exec(db_, "ROLLBACK", nullptr);
    return false;
  }
  schema_version_ = kSchemaVersion;
  return true;
}

int64_t TuningDatabase::insert(TuningRecord record, std::string* error) {
  if (record.created_unix == 0) {
    record.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  }
  // One statement in autocommit mode is one transaction; BEGIN IMMEDIATE takes the write lock
  // up front so that the busy timeout, not a deadlock error, resolves two writers.
  if (!exec(db_, "BEGIN IMMEDIATE", error)) return 0;
  std::string placeholders = "NULL";
  for (int i = 0; i < 27; ++i) placeholders += ", ?";
  Statement statement(db_, std::string("INSERT INTO measurements (") + kColumns + ") VALUES (" +
                               placeholders + ")");
  if (!statement.ok()) {
    if (error) *error = statement.error();
    exec(db_, "ROLLBACK", nullptr);
    return 0;
  }
  const MeasurementKey& key = record.key;
  int i = 1;
  statement.bind(i++, record.created_unix);
  statement.bind(i++, key.spec_hash);
  statement.bind(i++, key.sizes);
  statement.bind(i++, key.schedule);
  statement.bind(i++, key.device_name);
  statement.bind(i++, int64_t{key.sm_count});
  statement.bind(i++, int64_t{key.sm_clock_khz});
  statement.bind(i++, int64_t{key.memory_clock_khz});
  statement.bind(i++, int64_t{key.driver_version});
  statement.bind(i++, key.compiler_version);
  statement.bind(i++, record.spec_path);
  statement.bind(i++, record.spec_name);
  statement.bind(i++, record.schedule_json);
  statement.bind(i++, record.code_hash);
  statement.bind(i++, record.status);
  statement.bind(i++, record.message);
  statement.bind(i++, std::string(validation_name(record.validation)));
  statement.bind(i++, record.max_relative_error);
  statement.bind(i++, record.median_us);
  statement.bind(i++, record.min_us);
  statement.bind(i++, record.max_us);
  statement.bind(i++, kernels_to_json(record.kernels).dump());
  statement.bind(i++, record.registers ? std::optional<int64_t>(*record.registers) : std::nullopt);
  statement.bind(i++, record.spill_bytes);
  statement.bind(i++, record.estimate_us);
  statement.bind(i++, record.source);
  statement.bind(i++, record.duplicate_of);
  if (statement.step() != SQLITE_DONE) {
    if (error) *error = statement.error();
    exec(db_, "ROLLBACK", nullptr);
    return 0;
  }
  const int64_t id = sqlite3_last_insert_rowid(db_);
  if (!exec(db_, "COMMIT", error)) {
    exec(db_, "ROLLBACK", nullptr);
    return 0;
  }
  return id;
}

bool TuningDatabase::contains(const MeasurementKey& key) {
  Statement query(db_,
                  "SELECT 1 FROM measurements WHERE spec_hash = ? AND sizes = ? AND schedule = ? "
                  "AND device_name = ? AND sm_count = ? AND compiler_version = ? LIMIT 1");
  query.bind(1, key.spec_hash);
  query.bind(2, key.sizes);
  query.bind(3, key.schedule);
  query.bind(4, key.device_name);
  query.bind(5, int64_t{key.sm_count});
  query.bind(6, key.compiler_version);
  return query.step() == SQLITE_ROW;
}

std::optional<TuningRecord> TuningDatabase::get(int64_t id) {
  Statement query(db_, std::string("SELECT ") + kColumns + " FROM measurements WHERE id = ?");
  query.bind(1, id);
  if (query.step() != SQLITE_ROW) return std::nullopt;
  return read_record(query);
}

std::vector<TuningRecord> TuningDatabase::list(const RecordFilter& filter) {
  Statement query(db_, std::string("SELECT ") + kColumns + " FROM measurements" +
                           where_clause(filter) + " ORDER BY id DESC");
  bind_filter(query, filter);
  std::vector<TuningRecord> records;
  while (query.step() == SQLITE_ROW) records.push_back(read_record(query));
  return records;
}

std::optional<TuningRecord> TuningDatabase::best(const std::string& spec_hash,
                                                 const std::string& sizes,
                                                 const std::string& device_name) {
  RecordFilter filter{spec_hash, sizes, device_name, std::nullopt, true};
  Statement query(db_, std::string("SELECT ") + kColumns + " FROM measurements" +
                           where_clause(filter) + " ORDER BY median_us ASC, id ASC LIMIT 1");
  bind_filter(query, filter);
  if (query.step() != SQLITE_ROW) return std::nullopt;
  return read_record(query);
}

int64_t TuningDatabase::prune(const PruneRequest& request, std::string* error) {
  std::vector<int64_t> doomed;
  const std::vector<TuningRecord> considered = list(request.filter);
  if (!request.keep_best) {
    for (const TuningRecord& record : considered) doomed.push_back(record.id);
  } else {
    // Per (spec, sizes, device): the N fastest usable records stay, everything else goes.
    using Config = std::tuple<std::string, std::string, std::string>;
    std::map<Config, std::vector<const TuningRecord*>> groups;
    for (const TuningRecord& record : considered) {
      groups[{record.key.spec_hash, record.key.sizes, record.key.device_name}].push_back(&record);
    }
    for (auto& [config, records] : groups) {
      std::stable_sort(records.begin(), records.end(), [](const auto* a, const auto* b) {
        if (a->usable() != b->usable()) return a->usable();
        if (!a->usable()) return false;
        return *a->median_us < *b->median_us;
      });
      for (size_t i = 0; i < records.size(); ++i) {
        if (static_cast<int>(i) < *request.keep_best && records[i]->usable()) continue;
        doomed.push_back(records[i]->id);
      }
    }
  }
  if (!exec(db_, "BEGIN IMMEDIATE", error)) return -1;
  for (int64_t id : doomed) {
    Statement one(db_, "DELETE FROM measurements WHERE id = ?");
    one.bind(1, id);
    if (one.step() != SQLITE_DONE) {
      if (error) *error = one.error();
      exec(db_, "ROLLBACK", nullptr);
      return -1;
    }
  }
  if (!exec(db_, "COMMIT", error)) {
    exec(db_, "ROLLBACK", nullptr);
    return -1;
  }
  return static_cast<int64_t>(doomed.size());
}

namespace {

const char* kCalibrationColumns =
    "device_name, created_unix, model, compiler_version, factors_json, fitted_records, "
    "held_out_records, spearman_before, spearman_after, held_out_spearman_before, "
    "held_out_spearman_after";

StoredCalibration read_calibration(const Statement& row) {
  StoredCalibration c;
  int i = 0;
  c.device_name = row.text(i++);
  c.created_unix = row.integer(i++);
  c.model = row.text(i++);
  c.compiler_version = row.text(i++);
  const nlohmann::json factors = nlohmann::json::parse(row.text(i++), nullptr, false);
  if (factors.is_object()) {
    for (const auto& [name, value] : factors.items()) {
      if (value.is_number()) c.factors[name] = value.get<double>();
    }
  }
  c.fitted_records = static_cast<int>(row.integer(i++));
  c.held_out_records = static_cast<int>(row.integer(i++));
  c.spearman_before = row.real(i++);
  c.spearman_after = row.real(i++);
  c.held_out_spearman_before = row.real(i++);
  c.held_out_spearman_after = row.real(i++);
  return c;
}

}  // namespace

bool TuningDatabase::save_calibration(StoredCalibration calibration, std::string* error) {
  if (calibration.created_unix == 0) {
    calibration.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  }
  nlohmann::json factors = nlohmann::json::object();
  for (const auto& [name, value] : calibration.factors) factors[name] = value;
  if (!exec(db_, "BEGIN IMMEDIATE", error)) return false;
  Statement statement(db_, std::string("INSERT OR REPLACE INTO calibrations (") +
                               kCalibrationColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!statement.ok()) {
    if (error) *error = statement.error();
    exec(db_, "ROLLBACK", nullptr);
    return false;
  }
  int i = 1;
  statement.bind(i++, calibration.device_name);
  statement.bind(i++, calibration.created_unix);
  statement.bind(i++, calibration.model);
  statement.bind(i++, calibration.compiler_version);
  statement.bind(i++, factors.dump());
  statement.bind(i++, int64_t{calibration.fitted_records});
  statement.bind(i++, int64_t{calibration.held_out_records});
  statement.bind(i++, calibration.spearman_before);
  statement.bind(i++, calibration.spearman_after);
  statement.bind(i++, calibration.held_out_spearman_before);
  statement.bind(i++, calibration.held_out_spearman_after);
  if (statement.step() != SQLITE_DONE) {
    if (error) *error = statement.error();
    exec(db_, "ROLLBACK", nullptr);
    return false;
  }
  if (!exec(db_, "COMMIT", error)) {
    exec(db_, "ROLLBACK", nullptr);
    return false;
  }
  return true;
}

std::optional<StoredCalibration> TuningDatabase::calibration(const std::string& device_name) {
  Statement query(db_, std::string("SELECT ") + kCalibrationColumns +
                           " FROM calibrations WHERE device_name = ?");
  query.bind(1, device_name);
  if (query.step() != SQLITE_ROW) return std::nullopt;
  return read_calibration(query);
}

std::vector<StoredCalibration> TuningDatabase::calibrations() {
  Statement query(db_, std::string("SELECT ") + kCalibrationColumns +
                           " FROM calibrations ORDER BY created_unix DESC, device_name ASC");
  std::vector<StoredCalibration> out;
  while (query.step() == SQLITE_ROW) out.push_back(read_calibration(query));
  return out;
}

bool TuningDatabase::remove_calibration(const std::string& device_name, std::string* error) {
  Statement statement(db_, "DELETE FROM calibrations WHERE device_name = ?");
  statement.bind(1, device_name);
  if (statement.step() != SQLITE_DONE) {
    if (error) *error = statement.error();
    return false;
  }
  return sqlite3_changes(db_) > 0;
}

std::string TuningDatabase::integrity_check() {
  Statement check(db_, "PRAGMA integrity_check");
  if (check.step() != SQLITE_ROW) return check.error();
  return check.text(0);
}

}  // namespace nautilus::tune
