#include "core/tune/calibration.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pipeline.h"
#include "core/search/search.h"
#include "core/support/parallel.h"

namespace nautilus::tune {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string spec_label(const TuningRecord& record) {
  if (!record.spec_name.empty()) return record.spec_name;
  if (!record.spec_path.empty()) return std::filesystem::path(record.spec_path).stem().string();
  return record.key.spec_hash.substr(0, 8);
}

// "K=64,M=64" -> the -D bindings; nullopt with the reason.
std::optional<std::vector<spec::SizeOverride>> parse_sizes(const std::string& text,
                                                           std::string* error) {
  std::vector<spec::SizeOverride> sizes;
  std::istringstream parts(text);
  for (std::string part; std::getline(parts, part, ',');) {
    if (part.empty()) continue;
    auto binding = spec::parse_size_override(part, error);
    if (!binding) return std::nullopt;
    sizes.push_back(*binding);
  }
  return sizes;
}

// The spec file of a record: its path, else a file of the same name in one of `dirs`.
std::string locate_spec(const TuningRecord& record, const std::vector<std::string>& dirs) {
  std::error_code ec;
  if (!record.spec_path.empty() && std::filesystem::is_regular_file(record.spec_path, ec)) {
    return record.spec_path;
  }
  const std::string file_name = std::filesystem::path(record.spec_path).filename().string();
  if (file_name.empty()) return "";
  for (const std::string& dir : dirs) {
    const std::filesystem::path candidate = std::filesystem::path(dir) / file_name;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
  }
  return "";
}

// One distinct program to compile: a spec file at sizes under a schedule.
struct Program {
  SourceFilePtr file;
  std::vector<spec::SizeOverride> sizes;
  sched::Schedule schedule;
  matile::ModulePtr module;
  std::string error;
};

void compile_programs(std::vector<Program>& programs, const std::string& arch, int threads) {
  parallel_for_each(static_cast<int64_t>(programs.size()), threads, [&](int64_t i) {
    Program& program = programs[static_cast<size_t>(i)];
    driver::CompileOptions options;
    options.sizes = program.sizes;
    options.last_stage = driver::Stage::MATile;
    options.schedule = program.schedule;
    options.matile.arch = arch;
    const driver::Compilation compilation = driver::compile(program.file, options);
    if (!compilation.internal_error.empty()) {
      program.error = "internal compiler error: " + compilation.internal_error;
    } else if (!compilation.schedule_error.empty()) {
      program.error = compilation.schedule_error;
    } else if (!compilation.ok() || !compilation.ma_module) {
      program.error = "the spec does not compile at these sizes";
    } else {
      program.module = compilation.ma_module;
    }
  });
}

// Whether `selector` (--hold-out's word) names the spec of `record`.
bool names_spec(const std::string& selector, const TuningRecord& record) {
  if (selector.empty()) return false;
  if (selector == record.spec_name || selector == record.spec_path) return true;
  if (selector == spec_label(record)) return true;
  return selector.size() >= 4 && record.key.spec_hash.rfind(selector, 0) == 0;
}

}  // namespace

CalibrationReport calibrate(TuningDatabase& db, const CalibrationRequest& request) {
  CalibrationReport report;
  RecordFilter usable_filter;
  usable_filter.usable_only = true;
  std::vector<TuningRecord> all = db.list(usable_filter);
  // Oldest first: the report's order follows the order of measurement.
  std::reverse(all.begin(), all.end());

  // 1. The device.
  std::map<std::string, int> per_device;
  for (const TuningRecord& record : all) ++per_device[record.key.device_name];
  auto device_list = [&] {
    std::string out;
    for (const auto& [name, count] : per_device) {
      out += (out.empty() ? "" : ", ") + name + " (" + std::to_string(count) + ")";
    }
    return out;
  };
  if (per_device.empty()) {
    report.error = "no validated, timed records in " + db.path() +
                   " (nautilus tune writes them; see nautilus db list)";
    return report;
  }
  if (request.device.empty()) {
    if (per_device.size() > 1) {
      report.error = "the database has validated records of several devices: " + device_list() +
                     "; choose one with --device NAME";
      return report;
    }
    report.device_name = per_device.begin()->first;
  } else if (per_device.count(request.device)) {
    report.device_name = request.device;
  } else {
    std::vector<std::string> matches;
    for (const auto& [name, count] : per_device) {
      if (lower(name).find(lower(request.device)) != std::string::npos) matches.push_back(name);
    }
    if (matches.size() != 1) {
      report.error = "no validated records for device '" + request.device + "' in " + db.path() +
                     (matches.empty() ? "" : " (it matches several devices)") +
                     "; devices with records: " + device_list();
      return report;
    }
    report.device_name = matches.front();
  }
  std::vector<TuningRecord> records;
  for (TuningRecord& record : all) {
    if (record.key.device_name == report.device_name) records.push_back(std::move(record));
  }
  report.validated_records = static_cast<int>(records.size());
  const std::optional<cost::DeviceModel> preset = cost::device_model_for(report.device_name);
  if (!preset) {
    report.error = "no cost-model preset for device '" + report.device_name +
                   "' (known: " + cost::known_device_models() + "), so nothing to calibrate";
    return report;
  }
  report.base = *preset;
  const std::unique_ptr<cost::CostModel> preset_model = cost::make_analytical_model(*preset);
  const std::string arch = search::lowering_arch(search::SearchOptions{}, *preset_model);

  // 2. The programs, each distinct one compiled once.
  const auto compile_start = std::chrono::steady_clock::now();
  std::vector<Program> programs;
  std::map<std::string, size_t> program_index;  // (spec file, sizes, schedule) -> programs[i]
  std::map<std::string, SourceFilePtr> files;   // by path
  std::vector<std::pair<const TuningRecord*, size_t>> assigned;  // record -> its program
  auto skip = [&](const TuningRecord& record, const std::string& reason, int* counter) {
    report.skipped.push_back({record.id, spec_label(record), reason});
    ++*counter;
  };
  for (const TuningRecord& record : records) {
    const std::string path = locate_spec(record, request.spec_dirs);
    if (path.empty()) {
      skip(record,
           record.spec_path.empty() ? std::string("the record names no spec file")
                                    : "spec file " + record.spec_path + " is missing",
           &report.missing_spec);
      continue;
    }
    auto file_it = files.find(path);
    if (file_it == files.end()) {
      std::string error;
      SourceFilePtr file = SourceFile::read(path, &error);
      file_it = files.emplace(path, file).first;
    }
    if (!file_it->second) {
      skip(record, "spec file " + path + " cannot be read", &report.missing_spec);
      continue;
    }
    if (spec_text_hash(file_it->second->text()) != record.key.spec_hash) {
      skip(record, "spec file " + path + " changed since the record was measured",
           &report.changed_spec);
      continue;
    }
    std::string error;
    const auto sizes = parse_sizes(record.key.sizes, &error);
    const auto schedule = sizes ? record_schedule(record, &error) : std::nullopt;
    if (!sizes || !schedule) {
      skip(record, "unreadable record: " + error, &report.not_compiled);
      continue;
    }
    const std::string key = path + "\n" + record.key.sizes + "\n" +
                            sched::print_decisions(schedule->decisions, "; ");
    auto [it, fresh] = program_index.emplace(key, programs.size());
    if (fresh) programs.push_back({file_it->second, *sizes, *schedule, nullptr, ""});
    assigned.emplace_back(&record, it->second);
  }
  const int threads = request.threads > 0
                          ? request.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  compile_programs(programs, arch, threads);
  report.programs = static_cast<int>(programs.size());
  report.compile_seconds = seconds_since(compile_start);

  // 3. Fitted and held-out specs.
  std::vector<std::pair<const TuningRecord*, const Program*>> compiled;
  for (const auto& [record, index] : assigned) {
    const Program& program = programs[index];
    if (!program.module) {
      skip(*record, "does not compile: " + program.error, &report.not_compiled);
      continue;
    }
    compiled.emplace_back(record, &program);
  }
  std::set<std::string> held_out_hashes;
  std::map<std::string, std::string> label_of_hash;
  for (const auto& [record, program] : compiled) {
    label_of_hash.emplace(record->key.spec_hash, spec_label(*record));
  }
  if (request.hold_out) {
    report.hold_out_rule = request.hold_out->empty() ? "none held out: --hold-out none"
                                                     : "the specs --hold-out names";
    for (const std::string& selector : *request.hold_out) {
      bool found = false;
      for (const TuningRecord& record : records) {
        if (!names_spec(selector, record)) continue;
        held_out_hashes.insert(record.key.spec_hash);
        found = true;
      }
      if (!found) {
        report.error = "--hold-out " + selector + ": no record of " + report.device_name +
                       " has that spec (a spec name, a spec-hash prefix or a spec path)";
        return report;
      }
    }
  } else {
    // Every third spec, in order of its hash: fixed for a database, unrelated to the specs'
    // names or the order they were tuned in.
    std::vector<std::string> hashes;
    for (const auto& [hash, label] : label_of_hash) hashes.push_back(hash);
    if (hashes.size() < 3) {
      report.hold_out_rule = "none held out: the default split needs 3 specs or more";
    } else {
      report.hold_out_rule = "every third spec by hash; --hold-out chooses others";
      for (size_t i = 2; i < hashes.size(); i += 3) held_out_hashes.insert(hashes[i]);
    }
  }
  for (const std::string& hash : held_out_hashes) {
    auto it = label_of_hash.find(hash);
    if (it != label_of_hash.end()) report.held_out_specs.push_back(it->second);
  }
  std::vector<cost::CalibrationSample> samples;
  int fitted = 0;
  for (const auto& [record, program] : compiled) {
    cost::CalibrationSample sample;
    sample.module = program->module;
    sample.measured_us = *record->median_us;
    // Per problem: the schedules of one spec at one set of sizes are what a ranking compares.
    sample.group = spec_label(*record) + " " + record->key.sizes;
    sample.held_out = held_out_hashes.count(record->key.spec_hash) > 0;
    fitted += !sample.held_out;
    samples.push_back(std::move(sample));
  }
  if (fitted < request.min_records) {
    std::ostringstream error;
    error << "only " << fitted << " record" << (fitted == 1 ? "" : "s") << " of "
          << report.device_name << " to fit on (" << report.validated_records << " validated, "
          << report.skipped.size() << " skipped, " << samples.size() - static_cast<size_t>(fitted)
          << " held out); calibration needs at least " << request.min_records
          << " (tune more specs or schedules with nautilus tune)";
    report.error = error.str();
    return report;
  }

  // 4. The fit.
  const auto fit_start = std::chrono::steady_clock::now();
  cost::FitOptions fit_options = request.fit;
  fit_options.threads = std::max(fit_options.threads, threads);
  report.fit = cost::fit_calibration(report.base, samples, fit_options);
  report.fit_seconds = seconds_since(fit_start);
  if (!report.fit.ok) {
    report.error = "cannot calibrate " + report.device_name + ": " + report.fit.error;
    return report;
  }
  if (report.fit.fitted_samples < request.min_records) {
    report.error = "only " + std::to_string(report.fit.fitted_samples) + " records of " +
                   report.device_name + " have a feasible estimate to fit on (" +
                   std::to_string(report.fit.infeasible_samples) +
                   " infeasible under the preset); calibration needs at least " +
                   std::to_string(request.min_records);
    return report;
  }
  report.calibrated = cost::calibrated_device(report.base, report.fit.factors);
  report.ok = true;
  return report;
}

std::optional<ProblemRanking> mean_problem_ranking(const cost::FitResult& fit) {
  ProblemRanking ranking;
  for (const cost::GroupAgreement& group : fit.groups) {
    if (!group.before.spearman || !group.after.spearman) continue;
    ranking.before += *group.before.spearman;
    ranking.after += *group.after.spearman;
    ++ranking.problems;
  }
  if (ranking.problems == 0) return std::nullopt;
  ranking.before /= ranking.problems;
  ranking.after /= ranking.problems;
  return ranking;
}

std::string calibration_regression(const CalibrationReport& report) {
  const cost::FitResult& fit = report.fit;
  std::ostringstream why;
  why << std::fixed << std::setprecision(3);
  const double held_before = fit.held_out_before.mean_abs_log_error;
  const double held_after = fit.held_out_after.mean_abs_log_error;
  if (fit.held_out_samples > 0 && held_after > 1.1 * held_before && held_after > held_before + 0.02) {
    why << "it estimates the held-out records worse than the preset (mean |log error| " << held_before
        << " -> " << held_after << "): the fitted specs do not represent them";
    return why.str();
  }
  if (const std::optional<ProblemRanking> ranking = mean_problem_ranking(fit);
      ranking && ranking->after < ranking->before - 0.05) {
    why << "it orders the schedules of a problem worse than the preset (mean rank correlation "
        << ranking->before << " -> " << ranking->after << " over " << ranking->problems << " problems)";
    return why.str();
  }
  return "";
}

StoredCalibration stored_calibration(const CalibrationReport& report) {
  StoredCalibration stored;
  stored.device_name = report.device_name;
  stored.model = cost::make_analytical_model(report.base)->name();
  stored.compiler_version = std::string("nautilus ") + NAUTILUS_VERSION;
  stored.factors = report.fit.factors;
  stored.fitted_records = report.fit.fitted_samples;
  stored.held_out_records = report.fit.held_out_samples;
  stored.spearman_before = report.fit.fitted_before.spearman;
  stored.spearman_after = report.fit.fitted_after.spearman;
  stored.held_out_spearman_before = report.fit.held_out_before.spearman;
  stored.held_out_spearman_after = report.fit.held_out_after.spearman;
  return stored;
}

std::optional<FoundCalibration> find_calibration(TuningDatabase& db,
                                                 const cost::DeviceModel& device) {
  auto found = [&](const StoredCalibration& calibration, bool same_name) {
    FoundCalibration out;
    out.calibration = calibration;
    out.device = cost::calibrated_device(device, calibration.factors);
    out.same_name = same_name;
    return out;
  };
  if (auto exact = db.calibration(device.name)) return found(*exact, true);
  for (const StoredCalibration& calibration : db.calibrations()) {  // newest first
    const std::optional<cost::DeviceModel> preset = cost::device_model_for(calibration.device_name);
    if (preset && preset->arch == device.arch) return found(calibration, false);
  }
  return std::nullopt;
}

}  // namespace nautilus::tune
