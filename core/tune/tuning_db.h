// The tuning database: every measurement the tuner (or `schedule --measure`) makes, in one SQLite
// file per user, so that a later run re-uses what an earlier one measured (docs/tuning.md).
//
// A schedule whose generated code is the code of a record measured already (same spec, sizes and
// device) is stored without a measurement, as a duplicate of that record (duplicate_of, schema
// version 4), so that no later run measures it.
//
// A record is keyed by what decides a kernel's time: the spec's normalized text hash, the size
// bindings, the schedule's text, the generated code's hash, and the device (name, SM count,
// clocks, driver) and compiler version. It carries the runner's outcome: validation, total and
// per-kernel median / min / max, registers, spills, and the cost model's estimate at the time
// (so that calibration can later compare the two).
//
// Durability: the file is in WAL mode and every write is one transaction, so a tuner killed with
// SIGKILL loses at most the record in flight and never leaves a corrupt file; several processes
// may write at once (a busy timeout makes a writer wait for the other's transaction instead of
// failing). The schema is versioned: `schema_version` holds the version and `migrations()` the
// steps from an empty file to the current one; opening an older file migrates it in one
// transaction, a newer one is refused with a message (it was written by a newer nautilus).
//
// Besides the measurements, the file keeps one calibration of the cost model per device (the
// factors `nautilus db calibrate` fitted to that device's records, core/tune/calibration.h), which
// the commands that estimate for that device then use.
//
// This library links SQLite; nautilus-runner (GPU hosts may lack SQLite) must not link it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/sched/decision.h"
#include "core/tune/text_hash.h"

struct sqlite3;

namespace nautilus::tune {

// What a measurement is keyed by. Two records with equal keys measured the same kernel source
// on the same machine setup; the tuner does not measure a key twice.
struct MeasurementKey {
  std::string spec_hash;         // spec_text_hash() of the .nt file
  std::string sizes;             // canonical_sizes(): "K=64,M=64,N=64" (sorted by name)
  std::string schedule;          // schedule_text(): the decisions, "; " between them
  std::string device_name;       // e.g. "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  int sm_clock_khz = 0;
  int memory_clock_khz = 0;
  int driver_version = 0;        // CUDA's encoding, 13000 = 13.0
  std::string compiler_version;  // nautilus version and NVRTC version
};

enum class Validation { Passed, Failed, Skipped, NotRun };
const char* validation_name(Validation validation);  // "passed", "failed", "skipped", "not-run"
std::optional<Validation> parse_validation(const std::string& text);

struct KernelTiming {
  std::string name;
  std::optional<double> median_us, min_us, max_us;
  std::optional<int> registers;
  std::optional<int64_t> spill_bytes;
};

struct TuningRecord {
  int64_t id = 0;             // assigned by insert()
  int64_t created_unix = 0;   // seconds since the epoch; insert() fills it when 0
  MeasurementKey key;
  std::string spec_path;      // where the spec was read from (for people; not part of the key)
  std::string spec_name;      // the spec's file stem, e.g. "gemm"
  std::string schedule_json;  // the schedule as `nautilus compile --schedule` reads it
  std::string code_hash;      // hash of the generated CUDA source ("" when nothing was built)
  // "ok" when the runner timed it, else what stopped it: "build-error", a runner status name
  // ("fault", "timeout", ...), "no-gpu".
  std::string status;
  std::string message;        // the reason when status != "ok"
  Validation validation = Validation::NotRun;
  std::optional<double> max_relative_error;
  std::optional<double> median_us, min_us, max_us;  // of the whole launch sequence
  std::vector<KernelTiming> kernels;
  std::optional<int> registers;       // most registers of any kernel
  std::optional<int64_t> spill_bytes; // sum over kernels, when the runner reported it
  std::optional<double> estimate_us;  // the cost model's estimate when it was measured
  std::string source;                 // who measured: "tune", "schedule --measure"
  // Set on a record that was not measured because its generated code (code_hash) is the code of
  // record `duplicate_of`, measured under another schedule; its status is "duplicate". The key
  // keeps the tuner from taking the schedule again; the times are the other record's.
  std::optional<int64_t> duplicate_of;

  // Validated and timed: a candidate for --best.
  bool usable() const { return status == "ok" && validation == Validation::Passed && median_us; }
  bool is_duplicate() const { return duplicate_of.has_value(); }
};

// Filters of list(), prune() and best(); empty fields match everything.
struct RecordFilter {
  std::string spec_hash;
  std::string sizes;
  std::string device_name;
  std::optional<int64_t> older_than_unix;  // created before this time
  bool usable_only = false;
};

struct PruneRequest {
  RecordFilter filter;  // which records are considered
  // Keep the N fastest usable records of every (spec, sizes, device) and delete the rest of the
  // considered ones; nullopt: delete every considered record.
  std::optional<int> keep_best;
};

// A calibration of the cost model for one device (core/cost/calibration.h): the factors of the
// preset's constants and how well the fit agreed with the records it came from.
struct StoredCalibration {
  std::string device_name;  // as the records name it
  int64_t created_unix = 0; // save_calibration() fills it when 0
  std::string model;        // the model it was fitted for, e.g. "analytical sm_90"
  std::string compiler_version;  // the nautilus that fitted it
  std::map<std::string, double> factors;  // by parameter name (calibration_parameters())
  int fitted_records = 0;
  int held_out_records = 0;
  std::optional<double> spearman_before, spearman_after;  // of the fitted records
  std::optional<double> held_out_spearman_before, held_out_spearman_after;
};

// The spec's text with comments (`#` to end of line) removed, runs of blanks collapsed to one
// space and blank lines dropped, hashed: reformatting a spec or editing its comments keeps its
// records; changing any token does not.
std::string spec_text_hash(const std::string& spec_text);
// "K=64,M=64,N=64": the bindings sorted by name (order on the command line does not matter).
std::string canonical_sizes(std::vector<std::pair<std::string, int64_t>> sizes);

// The schedule a record measured: its JSON, else its text (decisions joined by "; ");
// nullopt with `error` when neither parses.
std::optional<sched::Schedule> record_schedule(const TuningRecord& record, std::string* error);

// The default database: $XDG_DATA_HOME/nautilus/tuning.db, else $HOME/.local/share/nautilus/
// tuning.db; "" when neither variable is set.
std::string default_database_path();

class TuningDatabase {
 public:
  static constexpr int kSchemaVersion = 4;
  // The SQL of each step, index i migrates from version i to i + 1.
  static const std::vector<std::string>& migrations();

  // Opens (creating it and its directory when `create`) and migrates the database at `path`.
  // nullptr with a one-line `error` when it is missing (and !create), not a database, written by
  // a newer schema, or cannot be written.
  static std::unique_ptr<TuningDatabase> open(const std::string& path, bool create,
                                              std::string* error);
  ~TuningDatabase();
  TuningDatabase(const TuningDatabase&) = delete;
  TuningDatabase& operator=(const TuningDatabase&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }

  // Writes one record in its own transaction; returns its id, or 0 with `error`.
  int64_t insert(TuningRecord record, std::string* error);
  // Whether a record with this key exists (whatever its outcome: a failed candidate is not
  // measured again either). The compiler is part of the key: another compiler's records are
  // found by their generated code instead (the tuner's duplicates).
  bool contains(const MeasurementKey& key);
  std::optional<TuningRecord> get(int64_t id);
  // Newest first.
  std::vector<TuningRecord> list(const RecordFilter& filter);
  // The fastest usable record for the spec, sizes and device (median time).
  std::optional<TuningRecord> best(const std::string& spec_hash, const std::string& sizes,
                                   const std::string& device_name);
  // Deletes as asked; returns how many records were deleted, or -1 with `error`.
  int64_t prune(const PruneRequest& request, std::string* error);
  // Stores the calibration of its device, replacing an earlier one; false with `error`.
  bool save_calibration(StoredCalibration calibration, std::string* error);
  // The calibration of exactly this device name.
  std::optional<StoredCalibration> calibration(const std::string& device_name);
  // Every device's, newest first.
  std::vector<StoredCalibration> calibrations();
  // Deletes the device's calibration; whether there was one.
  bool remove_calibration(const std::string& device_name, std::string* error);
  // SQLite's integrity check: "ok" or its first complaint.
  std::string integrity_check();

 private:
  TuningDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  bool migrate(std::string* error);

  sqlite3* db_;
  std::string path_;
  int schema_version_ = 0;
};

}  // namespace nautilus::tune
