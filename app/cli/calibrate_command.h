// `nautilus db calibrate` and the calibrated device model of the commands that estimate
// (docs/tuning.md "Calibration", core/tune/calibration.h).
//
//   nautilus db calibrate [--db PATH] [--device NAME] [--hold-out SPEC,...|none] [--spec-dir DIR]
//                         [--dry-run] [--json]
//     fits the cost model's constants to the database's validated records of one device, prints
//     the constants before and after and the rank correlations (fitted, held out, per spec), and
//     stores the factors in the database unless --dry-run.
//   nautilus db calibrate --show [--json]   lists the stored calibrations;
//   nautilus db calibrate --remove DEVICE   deletes one.
//
// `nautilus schedule` and `nautilus tune` estimate with `device_for_estimates`: the preset of
// --device, calibrated when the tuning database holds a calibration for it and --no-calibration
// is not given; they print the note it returns.
#pragma once

#include <iosfwd>
#include <string>

#include "app/cli/options.h"
#include "core/cost/cost_model.h"

namespace nautilus::cli {

int run_db_calibrate(const ParsedOptions& options, std::ostream& out, std::ostream& err);

// `device` with the calibration of the database at `db_path` applied, when there is one and
// --no-calibration is not in `options`; `note` is then one line saying so ("" otherwise). Quiet
// when there is no database.
cost::DeviceModel device_for_estimates(const ParsedOptions& options, const std::string& db_path,
                                       const cost::DeviceModel& device, std::string* note);

// The --no-calibration option of the commands that estimate.
OptionSpec no_calibration_option();

}  // namespace nautilus::cli
