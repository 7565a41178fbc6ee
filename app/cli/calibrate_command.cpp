#include "app/cli/calibrate_command.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/options.h"
#include "app/cli/tune_command.h"
#include "core/cost/calibration.h"
#include "core/tune/calibration.h"

namespace nautilus::cli {
namespace {


std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string rho(const std::optional<double>& value) {
  return value ? fixed(*value, 3) : std::string("-");
}

// A constant as the report prints it: 4 significant digits, no exponent for everyday values.
std::string constant_text(double value) {
  std::ostringstream out;
  out << std::setprecision(4) << value;
  return out.str();
}

// Whether a fitted factor stopped at one of the fit's bounds (the records pushed it further).
bool at_bound(double factor, const cost::FitOptions& fit) {
  return std::fabs(std::log(factor / fit.lower)) < 1e-3 ||
         std::fabs(std::log(factor / fit.upper)) < 1e-3;
}

nlohmann::ordered_json optional_json(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

nlohmann::ordered_json agreement_json(const cost::Agreement& before, const cost::Agreement& after) {
  return {{"records", before.samples},
          {"spearman_before", optional_json(before.spearman)},
          {"spearman_after", optional_json(after.spearman)},
          {"mean_abs_log_error_before", before.mean_abs_log_error},
          {"mean_abs_log_error_after", after.mean_abs_log_error}};
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream parts(text);
  for (std::string part; std::getline(parts, part, ',');) {
    const size_t start = part.find_first_not_of(' ');
    const size_t end = part.find_last_not_of(' ');
    if (start != std::string::npos) out.push_back(part.substr(start, end - start + 1));
  }
  return out;
}

nlohmann::ordered_json report_json(const tune::CalibrationReport& report,
                                   const cost::FitOptions& bounds, const std::string& db,
                                   bool stored, const std::string& refusal) {
  const cost::FitResult& fit = report.fit;
  nlohmann::ordered_json skipped = nlohmann::ordered_json::array();
  for (const tune::SkippedRecord& s : report.skipped) {
    skipped.push_back({{"id", s.id}, {"spec", s.spec}, {"reason", s.reason}});
  }
  nlohmann::ordered_json constants = nlohmann::ordered_json::array();
  for (const cost::CalibrationParameter& parameter : cost::calibration_parameters()) {
    constants.push_back({{"parameter", parameter.name},
                         {"description", parameter.description},
                         {"fields", parameter.fields},
                         {"before", cost::parameter_value(report.base, parameter)},
                         {"after", cost::parameter_value(report.calibrated, parameter)},
                         {"factor", fit.factors.count(parameter.name)
                                        ? fit.factors.at(parameter.name)
                                        : 1.0},
                         {"at_bound", fit.factors.count(parameter.name) &&
                                          at_bound(fit.factors.at(parameter.name), bounds)}});
  }
  nlohmann::ordered_json specs = nlohmann::ordered_json::array();
  for (const cost::GroupAgreement& group : fit.groups) {
    nlohmann::ordered_json entry = {{"problem", group.group}, {"held_out", group.held_out}};
    entry.update(agreement_json(group.before, group.after));
    specs.push_back(entry);
  }
  return {{"device", report.device_name},
          {"database", db},
          {"stored", stored},
          {"not_stored_because", refusal},
          {"records",
           {{"validated", report.validated_records},
            {"fitted", fit.fitted_samples},
            {"held_out", fit.held_out_samples},
            {"infeasible", fit.infeasible_samples},
            {"skipped", report.skipped.size()},
            {"missing_spec", report.missing_spec},
            {"changed_spec", report.changed_spec},
            {"not_compiled", report.not_compiled},
            {"skipped_records", skipped}}},
          {"hold_out", {{"rule", report.hold_out_rule}, {"specs", report.held_out_specs}}},
          {"constants", constants},
          {"agreement",
           {{"all", agreement_json(fit.all_before, fit.all_after)},
            {"fitted", agreement_json(fit.fitted_before, fit.fitted_after)},
            {"held_out", agreement_json(fit.held_out_before, fit.held_out_after)},
            {"problems", specs}}},
          {"fit",
           {{"programs", report.programs},
            {"evaluations", fit.evaluations},
            {"objective_before", fit.objective_before},
            {"objective_after", fit.objective_after},
            {"compile_seconds", report.compile_seconds},
            {"fit_seconds", report.fit_seconds}}}};
}

// `refusal`: why it was not stored although no --dry-run asked for that (empty otherwise).
void print_report(std::ostream& out, const tune::CalibrationReport& report,
                  const cost::FitOptions& bounds, const std::string& db, bool stored,
                  const std::string& refusal) {
  const cost::FitResult& fit = report.fit;
  out << "calibrating the cost model for " << report.device_name << " from " << db << "\n";
  out << "records: " << report.validated_records << " validated, "
      << fit.fitted_samples + fit.held_out_samples << " used (" << fit.fitted_samples
      << " fitted, " << fit.held_out_samples << " held out), " << report.skipped.size()
      << " skipped";
  if (!report.skipped.empty()) {
    out << " (" << report.missing_spec << " spec file missing, " << report.changed_spec
        << " spec changed, " << report.not_compiled << " not compiled)";
  }
  if (fit.infeasible_samples > 0) out << ", " << fit.infeasible_samples << " infeasible";
  out << "\n";
  constexpr size_t kSkippedShown = 10;
  for (size_t i = 0; i < report.skipped.size() && i < kSkippedShown; ++i) {
    const tune::SkippedRecord& s = report.skipped[i];
    out << "  skipped record " << s.id << " (" << s.spec << "): " << s.reason << "\n";
  }
  if (report.skipped.size() > kSkippedShown) {
    out << "  ... and " << report.skipped.size() - kSkippedShown
        << " more (--json lists them all)\n";
  }
  out << "held out: ";
  for (size_t i = 0; i < report.held_out_specs.size(); ++i) {
    out << (i ? ", " : "") << report.held_out_specs[i];
  }
  out << (report.held_out_specs.empty() ? "" : " ") << "(" << report.hold_out_rule << ")\n";
  out << "fit: " << report.programs << " programs compiled in " << fixed(report.compile_seconds, 1)
      << " s; " << fit.evaluations << " estimates of the fitted set in "
      << fixed(report.fit_seconds, 1) << " s; mean squared log error "
      << fixed(fit.objective_before, 4) << " -> " << fixed(fit.objective_after, 4) << "\n\n";

  out << std::left << std::setw(32) << "constant" << std::setw(32) << "field" << std::right
      << std::setw(12) << "before" << std::setw(12) << "after" << std::setw(10) << "factor"
      << "\n";
  for (const cost::CalibrationParameter& parameter : cost::calibration_parameters()) {
    const double factor = fit.factors.count(parameter.name) ? fit.factors.at(parameter.name) : 1.0;
    out << "  " << std::left << std::setw(30) << parameter.description << std::setw(32)
        << parameter.fields.front() << std::right << std::setw(12)
        << constant_text(cost::parameter_value(report.base, parameter)) << std::setw(12)
        << constant_text(cost::parameter_value(report.calibrated, parameter)) << std::setw(10)
        << ("x" + fixed(factor, 3)) << (at_bound(factor, bounds) ? "  at the bound" : "")
        << "\n";
  }
  // The label column fits the longest "  spec sizes (held out)".
  size_t label_width = 26;
  for (const cost::GroupAgreement& group : fit.groups) {
    label_width = std::max(label_width, group.group.size() + 2 + (group.held_out ? 11 : 0) + 1);
  }
  const int width = static_cast<int>(label_width);
  out << "\n"
      << std::left << std::setw(width + 2) << "agreement" << std::right << std::setw(8)
      << "records" << std::setw(18) << "spearman" << std::setw(22) << "mean |log error|" << "\n"
      << std::setw(width + 28) << "before -> after" << std::setw(22) << "before -> after" << "\n";
  // Spearman over all records mixes programs whose times differ by orders of magnitude; the
  // per-problem rows (a spec at one set of sizes) say how the schedules of one problem are
  // ordered.
  auto row = [&](const std::string& label, const cost::Agreement& before,
                 const cost::Agreement& after) {
    out << "  " << std::left << std::setw(width) << label << std::right << std::setw(8)
        << before.samples << std::setw(18) << (rho(before.spearman) + " -> " + rho(after.spearman))
        << std::setw(22)
        << (fixed(before.mean_abs_log_error, 3) + " -> " + fixed(after.mean_abs_log_error, 3))
        << "\n";
  };
  row("all records", fit.all_before, fit.all_after);
  row("fitted", fit.fitted_before, fit.fitted_after);
  row("held out", fit.held_out_before, fit.held_out_after);
  for (const cost::GroupAgreement& group : fit.groups) {
    row("  " + group.group + (group.held_out ? " (held out)" : ""), group.before, group.after);
  }
  out << "\n";
  // What a reader should not miss: constants the fit pushed to its limits (a term the model
  // lacks is being absorbed, or the records disagree), and a ranking the fit made worse (it
  // minimizes the log error, not the rank correlation).
  int bounded = 0;
  for (const auto& [name, factor] : fit.factors) bounded += at_bound(factor, bounds);
  if (bounded > 0) {
    out << "note: " << bounded << " factor" << (bounded == 1 ? " stopped" : "s stopped")
        << " at the fit's bounds (x" << fixed(bounds.lower, 3) << " .. x" << fixed(bounds.upper, 3)
        << "): the model misses something these records show; check the per-problem rows\n";
  }
  if (fit.fitted_before.spearman && fit.fitted_after.spearman &&
      *fit.fitted_after.spearman < *fit.fitted_before.spearman - 0.01) {
    out << "note: the fit lowered the rank correlation of the fitted records ("
        << rho(fit.fitted_before.spearman) << " -> " << rho(fit.fitted_after.spearman)
        << "); it minimizes the log error, and --dry-run shows this without storing it\n";
  }
  // The ranking that matters to the search is within a problem: the mean over problems.
  if (const std::optional<tune::ProblemRanking> ranking = tune::mean_problem_ranking(fit);
      ranking && ranking->after < ranking->before - 0.01) {
    out << "note: the mean rank correlation within a problem fell (" << fixed(ranking->before, 3)
        << " -> " << fixed(ranking->after, 3) << " over " << ranking->problems
        << " problems): the calibrated model orders the schedules of a problem worse\n";
  }
  if (stored) {
    out << "stored in " << db << ": nautilus schedule and tune estimate with it for "
        << report.device_name << " (--no-calibration turns it off)\n";
  } else if (!refusal.empty()) {
    out << "not stored: " << refusal << " (--force stores it anyway)\n";
  } else {
    out << "dry run: nothing stored\n";
  }
}

}  // namespace

OptionSpec no_calibration_option() {
  return {"no-calibration", "",
          "estimate with the device preset even when the tuning database holds a calibration "
          "for it (nautilus db calibrate)"};
}

cost::DeviceModel device_for_estimates(const ParsedOptions& options, const std::string& db_path,
                                       const cost::DeviceModel& device, std::string* note) {
  note->clear();
  if (options.has("no-calibration") || db_path.empty()) return device;
  std::error_code ec;
  std::string error;
  auto db = tune::TuningDatabase::open(db_path, false, &error);
  if (!db) return device;
  const std::optional<tune::FoundCalibration> found = tune::find_calibration(*db, device);
  if (!found) return device;
  const tune::StoredCalibration& c = found->calibration;
  *note = "cost model: calibrated for " + c.device_name +
          (found->same_name ? "" : " (the same preset as " + device.name + ")") +
          " by the tuning database " + db_path + " (" + date_text(c.created_unix) + " UTC, " +
          std::to_string(c.fitted_records) + " records; --no-calibration uses the preset)";
  return found->device;
}

namespace {

// `db calibrate --show`: every stored calibration.
int show_calibrations(tune::TuningDatabase& db, bool json, std::ostream& out) {
  const std::vector<tune::StoredCalibration> all = db.calibrations();
  if (json) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (const tune::StoredCalibration& c : all) {
      array.push_back({{"device", c.device_name},
                       {"created_unix", c.created_unix},
                       {"model", c.model},
                       {"compiler_version", c.compiler_version},
                       {"factors", c.factors},
                       {"fitted_records", c.fitted_records},
                       {"held_out_records", c.held_out_records},
                       {"spearman_before", optional_json(c.spearman_before)},
                       {"spearman_after", optional_json(c.spearman_after)},
                       {"held_out_spearman_before", optional_json(c.held_out_spearman_before)},
                       {"held_out_spearman_after", optional_json(c.held_out_spearman_after)}});
    }
    out << array.dump(1) << "\n";
    return kExitOk;
  }
  for (const tune::StoredCalibration& c : all) {
    out << c.device_name << ": " << date_text(c.created_unix) << " UTC, " << c.model << ", "
        << c.compiler_version << ", " << c.fitted_records << " records fitted, "
        << c.held_out_records << " held out; spearman " << rho(c.spearman_before) << " -> "
        << rho(c.spearman_after) << " (held out " << rho(c.held_out_spearman_before) << " -> "
        << rho(c.held_out_spearman_after) << ")\n";
    for (const cost::CalibrationParameter& parameter : cost::calibration_parameters()) {
      auto it = c.factors.find(parameter.name);
      out << "  " << std::left << std::setw(30) << parameter.description << std::right << "x"
          << fixed(it == c.factors.end() ? 1.0 : it->second, 3) << "\n";
    }
  }
  out << all.size() << (all.size() == 1 ? " calibration" : " calibrations") << " in " << db.path()
      << "\n";
  return kExitOk;
}

}  // namespace

int run_db_calibrate(const ParsedOptions& options, std::ostream& out, std::ostream& err) {
  if (options.has("show") || options.has("remove")) {
    for (const char* fitting : {"hold-out", "spec-dir", "dry-run", "force"}) {
      if (options.has(fitting)) {
        err << "nautilus: error: --" << fitting << " does not go with --"
            << (options.has("show") ? "show" : "remove") << "\n";
        return kExitFailure;
      }
    }
    if (options.has("show") && options.has("remove")) {
      err << "nautilus: error: give --show or --remove, not both\n";
      return kExitFailure;
    }
    std::string error;
    auto db = tune::TuningDatabase::open(database_path(options), false, &error);
    if (!db) {
      err << "nautilus: error: " << error << "\n";
      return kExitFailure;
    }
    if (options.has("show")) return show_calibrations(*db, options.has("json"), out);
    const std::string device = options.get("remove");
    error.clear();
    if (!db->remove_calibration(device, &error)) {
      if (!error.empty()) {
        err << "nautilus: error: " << error << "\n";
      } else {
        err << "nautilus: error: no calibration of '" << device << "' in " << db->path()
            << " (db calibrate --show lists them)\n";
      }
      return kExitFailure;
    }
    out << "removed the calibration of " << device << " from " << db->path() << "\n";
    return kExitOk;
  }
  tune::CalibrationRequest request;
  if (options.has("device") && options.has("gpu") && options.get("device") != options.get("gpu")) {
    err << "nautilus: error: give --device or --gpu, not both\n";
    return kExitFailure;
  }
  request.device = options.has("device") ? options.get("device") : options.get("gpu");
  if (options.has("hold-out")) {
    const std::string text = options.get("hold-out");
    request.hold_out = text == "none" ? std::vector<std::string>{} : split_list(text);
    if (text != "none" && request.hold_out->empty()) {
      err << "nautilus: error: --hold-out expects a comma-separated list of specs (name, hash "
             "prefix or path) or 'none', got '"
          << text << "'\n";
      return kExitFailure;
    }
  }
  request.spec_dirs = options.all("spec-dir");
  std::string error;
  const std::string path = database_path(options);
  auto db = tune::TuningDatabase::open(path, false, &error);
  if (!db) {
    err << "nautilus: error: " << error << "\n";
    return kExitFailure;
  }
  const tune::CalibrationReport report = tune::calibrate(*db, request);
  if (!report.ok) {
    for (const tune::SkippedRecord& s : report.skipped) {
      err << "nautilus: note: skipped record " << s.id << " (" << s.spec << "): " << s.reason
          << "\n";
    }
    err << "nautilus: error: " << report.error << "\n";
    return kExitFailure;
  }
  // A calibration that makes the model worse where it was not fitted is not stored unless forced.
  const std::string regression = tune::calibration_regression(report);
  const std::string refusal = options.has("dry-run") || options.has("force") ? "" : regression;
  const bool store = !options.has("dry-run") && refusal.empty();
  const std::optional<tune::StoredCalibration> earlier = db->calibration(report.device_name);
  if (store && !db->save_calibration(tune::stored_calibration(report), &error)) {
    err << "nautilus: error: cannot store the calibration in " << db->path() << ": " << error
        << "\n";
    return kExitFailure;
  }
  if (options.has("json")) {
    out << report_json(report, request.fit, db->path(), store, refusal).dump(1) << "\n";
  } else {
    print_report(out, report, request.fit, db->path(), store, refusal);
    if (store && earlier) {
      out << "(it replaces the calibration of " << date_text(earlier->created_unix) << " UTC, from "
          << earlier->fitted_records << " records)\n";
    }
  }
  // Refused: the report above says why; a script sees a failure.
  return refusal.empty() ? kExitOk : kExitFailure;
}

}  // namespace nautilus::cli
