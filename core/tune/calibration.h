// Calibration of the cost model from the tuning database (`nautilus db calibrate`,
// docs/tuning.md "Calibration").
//
// The database's validated records of one device are programs with a measured time: each record
// names its spec file (spec_path), its sizes and its schedule. `calibrate`
//   1. picks the device (the one named, or the only one with validated records) and its cost-model
//      preset (device_models.h: by the device's name);
//   2. re-derives every record's program as the search did when it estimated it: the spec read
//      from spec_path (or, when that file is gone, a file of the same name in one of
//      `spec_dirs`), checked against the record's spec hash, the sizes bound with -D, the
//      schedule applied, lowered to MA tile IR for the search's arch of that preset; each distinct
//      program is compiled once, on several threads; records whose spec file is missing or
//      changed, or whose schedule no longer applies, are skipped with the reason;
//   3. splits the specs into fitted and held out: the specs named in `hold_out` (by name, hash
//      prefix or path), or by default every third spec in order of spec hash (none with fewer
//      than three specs), so that the report shows how calibration does on programs it never saw;
//   4. fits the factors (core/cost/calibration.h) to the fitted records and reports the agreement
//      before and after: all, fitted, held out, and per problem (a spec at one set of sizes).
// The caller stores the result (`stored_calibration`, TuningDatabase::save_calibration); the
// commands that estimate then find it with `find_calibration` and estimate with
// `cost::calibrated_device(preset, factors)`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/cost/calibration.h"
#include "core/cost/cost_model.h"
#include "core/tune/tuning_db.h"

namespace nautilus::tune {

// Fewer fitted records than this and eight constants are not worth fitting.
inline constexpr int kMinCalibrationRecords = 8;

struct CalibrationRequest {
  // The device's name as the records have it; also accepted: a case-insensitive part of exactly
  // one device's name. Empty: the only device with validated records.
  std::string device;
  // Specs to hold out (name, spec-hash prefix of at least 4 characters, or spec path); nullopt:
  // the default split (every third spec by hash); an empty list: none.
  std::optional<std::vector<std::string>> hold_out;
  // Where to look for a spec file (by its file name) when a record's spec_path does not exist.
  std::vector<std::string> spec_dirs;
  cost::FitOptions fit;
  int min_records = kMinCalibrationRecords;
  int threads = 0;  // threads that compile the programs and estimate them; 0: the machine's cores
};

struct SkippedRecord {
  int64_t id = 0;
  std::string spec;    // the spec's name
  std::string reason;  // "spec file /x/gemm.nt is missing"
};

struct CalibrationReport {
  bool ok = false;
  std::string error;
  std::string device_name;
  cost::DeviceModel base;        // the preset
  cost::DeviceModel calibrated;  // the preset with the fitted factors
  int validated_records = 0;     // the device's validated, timed records
  std::vector<SkippedRecord> skipped;
  int missing_spec = 0, changed_spec = 0, not_compiled = 0;  // skipped, by cause
  int programs = 0;              // distinct programs compiled
  std::vector<std::string> held_out_specs;
  std::string hold_out_rule;     // how they were chosen, for the report
  cost::FitResult fit;
  double compile_seconds = 0.0, fit_seconds = 0.0;
};

CalibrationReport calibrate(TuningDatabase& db, const CalibrationRequest& request);

// The mean over problems (a spec at one set of sizes) of Spearman's rank correlation between
// estimates and measurements, before and after the fit: how the model orders the schedules the
// search compares. nullopt when no problem has a correlation.
struct ProblemRanking {
  double before = 0.0, after = 0.0;
  int problems = 0;
};
std::optional<ProblemRanking> mean_problem_ranking(const cost::FitResult& fit);

// Why a calibration would make the model worse where it was not fitted, and so is not stored
// without being forced: the held-out records' mean |log error| grows by more than 10% (and by
// more than 0.02), or the mean rank correlation within a problem falls by more than 0.05. Empty
// when neither. On the H200 database of 2026-11-29 (two GEMM-like problems fitted, attention
// held out) the fit cut the fitted error from 0.522 to 0.089 and raised attention's from 0.216
// to 0.749: the factors it found for the wgmma and CUDA-core rates explained two GEMMs' misses
// and broke attention.
std::string calibration_regression(const CalibrationReport& report);

// What save_calibration stores for a successful report.
StoredCalibration stored_calibration(const CalibrationReport& report);

// The calibration the database holds for the device a command estimates with: the one stored
// under the device's own name, else the newest one whose device has the same cost-model preset
// (records name a GPU "NVIDIA H100 80GB HBM3" and `--device h100` means the same chip).
struct FoundCalibration {
  StoredCalibration calibration;
  cost::DeviceModel device;  // `device` with its factors applied
  bool same_name = false;    // stored under the device's own name
};
std::optional<FoundCalibration> find_calibration(TuningDatabase& db,
                                                 const cost::DeviceModel& device);

}  // namespace nautilus::tune
