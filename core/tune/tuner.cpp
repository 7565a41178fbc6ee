#include "core/tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/driver/pass_log.h"
#include "core/driver/pipeline.h"

namespace nautilus::tune {
namespace {

struct Candidate {
  sched::Schedule schedule;
  std::string text;  // the database's schedule key
  std::optional<double> estimate_us;
};

std::string schedule_key(const sched::Schedule& schedule) {
  return sched::print_decisions(schedule.decisions, "; ");
}

// The complete leaves of a search, best estimate first (infeasible ones are not candidates).
std::vector<Candidate> ranked_leaves(const search::SearchResult& result) {
  std::vector<Candidate> leaves;
  for (search::LeafSchedule& leaf : search::complete_leaves(result)) {
    const std::string key = schedule_key(leaf.schedule);
    leaves.push_back({std::move(leaf.schedule), key, leaf.estimate_us});
  }
  return leaves;
}

std::string describe_outcome(const CandidateOutcome& outcome) {
  if (outcome.status == "ok" && outcome.validation == Validation::Passed && outcome.median_us) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(2) << *outcome.median_us << " µs";
    return out.str();
  }
  if (outcome.status == "ok") {
    return std::string("validation ") + validation_name(outcome.validation);
  }
  return outcome.status + (outcome.message.empty() ? "" : ": " + outcome.message);
}

}  // namespace

std::optional<SpecIdentity> identify_spec(const search::SearchInput& input, std::string* error) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::Spec;
  options.sizes = input.sizes;
  const driver::Compilation compilation = driver::compile(input.file, options);
  if (!compilation.spec) {
    *error = "the spec does not check:\n" + compilation.diagnostics->render_all();
    return std::nullopt;
  }
  return SpecIdentity{spec_text_hash(input.file->text()), canonical_sizes(compilation.spec->sizes)};
}

TuneResult run_tune(const search::SearchInput& input, const cost::CostModel& model,
                    TuningDatabase& db, Executor& executor, const TuneOptions& options,
                    const std::function<void(const TuneProgress&)>& on_progress) {
  TuneResult result;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  std::string error;
  const std::optional<SpecIdentity> spec = identify_spec(input, &error);
  if (!spec) {
    result.error = error;
    return result;
  }
  const std::optional<MachineIdentity> machine = executor.identity(&error);
  if (!machine) {
    result.error = error;
    return result;
  }
  MeasurementKey base;
  base.spec_hash = spec->spec_hash;
  base.sizes = spec->sizes;
  base.device_name = machine->device_name;
  base.sm_count = machine->sm_count;
  base.sm_clock_khz = machine->sm_clock_khz;
  base.memory_clock_khz = machine->memory_clock_khz;
  base.driver_version = machine->driver_version;
  base.compiler_version = machine->compiler_version;
  result.key = base;

  // 1. The search's leaves.
  const search::SearchResult searched = search::run_search(input, model, options.search);
  if (!searched.ok) {
    result.error = searched.error;
    return result;
  }
  std::vector<Candidate> queue = ranked_leaves(searched);
  const std::string analytical_pick = schedule_key(searched.schedule);
  // The pick's estimate (the best leaf's when the pick is not among the leaves).
  auto pick = std::find_if(queue.begin(), queue.end(),
                           [&](const Candidate& leaf) { return leaf.text == analytical_pick; });
  if (pick == queue.end()) pick = queue.begin();
  const std::optional<double> pick_estimate_us = pick != queue.end() ? pick->estimate_us : std::nullopt;
  auto hopeless = [&](const Candidate& candidate) {
    return options.skip_estimate_ratio > 0 && pick_estimate_us && candidate.estimate_us &&
           *candidate.estimate_us > options.skip_estimate_ratio * *pick_estimate_us;
  };

  RecordFilter this_config;
  this_config.spec_hash = base.spec_hash;
  this_config.sizes = base.sizes;
  this_config.device_name = base.device_name;
  // The budget is this compiler's: after a change to the compiler (another source hash in the
  // version) the candidates are walked again, those whose generated code is unchanged become
  // duplicates of the earlier records without a measurement (carried over: each earlier record
  // counts once, however many schedules share its code), and the rest are measured.
  const std::vector<TuningRecord> config_records = db.list(this_config);
  std::map<int64_t, std::string> compiler_of;  // record id -> its compiler
  for (const TuningRecord& record : config_records) compiler_of[record.id] = record.key.compiler_version;
  int already = 0;
  std::set<int64_t> carried;  // other compilers' records that this one's duplicates carry over
  for (const TuningRecord& record : config_records) {
    if (record.key.compiler_version != base.compiler_version || record.source != options.source) continue;
    const bool carries = record.is_duplicate() && compiler_of.count(*record.duplicate_of) &&
                         compiler_of.at(*record.duplicate_of) != base.compiler_version;
    if (!record.is_duplicate() || (carries && carried.insert(*record.duplicate_of).second)) ++already;
  }
  int budget_left = options.budget;
  if (options.resume) budget_left = std::max(0, options.budget - already);

  std::set<std::string> queued;  // schedule keys handed out in this run
  for (const Candidate& candidate : queue) queued.insert(candidate.text);
  std::set<std::string> mutated;  // parents already mutated in this run
  const std::string spec_name = std::filesystem::path(input.file->path()).stem().string();
  int per_decision = options.mutations_per_decision;  // widened when duplicates use leaves up

  // 4. The generated code measured for this spec, sizes and device: the database's records,
  // then this run's. The executor asks from its build threads, hence the mutex.
  std::mutex code_mutex;
  std::map<std::string, int64_t> code_records;  // code hash -> the record that measured it
  std::set<std::string> code_in_flight;          // claimed by a candidate not recorded yet
  // Records of another compiler: a candidate of this one whose code one of them measured is
  // that measurement carried over, and counts against the budget as one.
  std::set<int64_t> other_compiler_records;
  for (const TuningRecord& record : config_records) {
    if (!record.code_hash.empty() && !record.is_duplicate()) {
      code_records.emplace(record.code_hash, record.id);
      if (record.key.compiler_version != base.compiler_version && !carried.count(record.id)) {
        other_compiler_records.insert(record.id);
      }
    }
  }
  executor.skip_code_when([&](const std::string& code_hash) {
    const std::lock_guard<std::mutex> lock(code_mutex);
    if (code_records.count(code_hash) != 0) return true;
    return !code_in_flight.insert(code_hash).second;
  });
  // The executor outlives the run: it must not call into this frame afterwards.
  struct ForgetCodeCheck {
    Executor& executor;
    ~ForgetCodeCheck() { executor.skip_code_when({}); }
  } forget_code_check{executor};

  // 2. Mutations of the best measured schedules not mutated yet.
  auto mutate = [&]() {
    std::vector<Candidate> fresh;
    RecordFilter usable = this_config;
    usable.usable_only = true;
    std::vector<TuningRecord> records = db.list(usable);
    // Equal times are ordered by schedule, not by arrival: with several devices the results of
    // a batch arrive in any order, and the parents must not depend on it.
    std::stable_sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
      if (*a.median_us != *b.median_us) return *a.median_us < *b.median_us;
      return a.key.schedule < b.key.schedule;
    });
    int parents = 0;
    for (const TuningRecord& parent : records) {
      if (parents >= options.parents_per_round) break;
      if (!mutated.insert(parent.key.schedule).second) continue;
      ++parents;
      std::string parse_error;
      const std::optional<sched::Schedule> schedule = record_schedule(parent, &parse_error);
      if (!schedule) continue;
      for (size_t i = 0; i < schedule->decisions.size(); ++i) {
        search::SearchOptions around = options.search;
        around.pins.clear();
        for (size_t j = 0; j < schedule->decisions.size(); ++j) {
          if (j != i) around.pins.push_back(schedule->decisions[j]);
        }
        around.forbids.push_back(schedule->decisions[i]);
        around.measure = 0;
        const search::SearchResult neighbours = search::run_search(input, model, around);
        if (!neighbours.ok) continue;  // nothing else fits at this decision
        int kept = 0;
        for (Candidate& leaf : ranked_leaves(neighbours)) {
          if (kept >= per_decision) break;
          if (!queued.insert(leaf.text).second) continue;
          fresh.push_back(std::move(leaf));
          ++kept;
        }
      }
    }
    std::stable_sort(fresh.begin(), fresh.end(), [](const Candidate& a, const Candidate& b) {
      return a.estimate_us.value_or(1e300) < b.estimate_us.value_or(1e300);
    });
    return fresh;
  };

  auto report_progress = [&](const Candidate& candidate, const std::string& outcome,
                             std::optional<double> median_us,
                             std::optional<int64_t> duplicate_of) {
    if (!on_progress) return;
    TuneProgress progress;
    progress.measured = result.measured;
    progress.budget_left = budget_left;
    progress.skipped = result.skipped;
    progress.duplicates = result.duplicates;
    progress.duplicate_of = duplicate_of;
    progress.seconds = elapsed();
    if (result.measured > 0) progress.eta_seconds = progress.seconds / result.measured * budget_left;
    if (auto best = db.best(base.spec_hash, base.sizes, base.device_name)) {
      progress.best_us = best->median_us;
    }
    progress.schedule = candidate.text;
    progress.outcome = outcome;
    progress.median_us = median_us;
    on_progress(progress);
  };

  // A candidate's record before its outcome: its key, spec, schedule, code and estimate.
  auto candidate_record = [&](const Candidate& candidate, const std::string& code_hash) {
    TuningRecord record;
    record.key = base;
    record.key.schedule = candidate.text;
    record.spec_path = input.file->path();
    record.spec_name = spec_name;
    record.schedule_json = sched::schedule_to_json(candidate.schedule).dump();
    record.code_hash = code_hash;
    record.estimate_us = candidate.estimate_us;
    record.source = options.source;
    return record;
  };

  // Duplicates whose code is measured by a candidate of this run that is not recorded yet wait
  // here for its record.
  std::vector<std::pair<Candidate, std::string>> waiting_duplicates;  // candidate, code hash
  auto record_duplicates = [&]() {
    for (auto it = waiting_duplicates.begin(); it != waiting_duplicates.end();) {
      std::optional<int64_t> original;
      {
        const std::lock_guard<std::mutex> lock(code_mutex);
        if (auto found = code_records.find(it->second); found != code_records.end()) {
          original = found->second;
        }
      }
      if (!original) {
        ++it;
        continue;
      }
      const Candidate& candidate = it->first;
      TuningRecord record = candidate_record(candidate, it->second);
      record.status = "duplicate";
      record.message = "the generated code of record " + std::to_string(*original);
      record.duplicate_of = original;
      std::string insert_error;
      if (db.insert(record, &insert_error) <= 0) {
        result.error = "cannot write to the tuning database: " + insert_error;
        return;
      }
      ++result.duplicates;
      if (other_compiler_records.erase(*original) > 0) {  // each earlier measurement once
        ++result.carried_over;
        --budget_left;
      }
      report_progress(candidate, "duplicate of record " + std::to_string(*original),
                      std::nullopt, original);
      it = waiting_duplicates.erase(it);
    }
  };

  size_t next = 0;
  int duplicates_at_widening = 0;
  while (true) {
    if (budget_left <= 0) break;
    if (options.time_limit_seconds && elapsed() >= *options.time_limit_seconds) break;
    if (options.should_stop && options.should_stop()) {
      result.stopped = true;
      break;
    }
    // 3. The next batch of candidates the database does not have yet.
    std::vector<Candidate> batch;
    while (static_cast<int>(batch.size()) < std::min(executor.parallelism(), budget_left)) {
      if (next == queue.size()) {
        std::vector<Candidate> fresh = mutate();
        // Duplicates spent candidates the budget did not pay for: ask every parent again for
        // more leaves per decision, once per new lot of duplicates, until that gives nothing.
        while (fresh.empty() && result.duplicates > duplicates_at_widening &&
               per_decision < options.max_mutations_per_decision) {
          duplicates_at_widening = result.duplicates;
          per_decision = std::min(per_decision * 2, options.max_mutations_per_decision);
          mutated.clear();
          fresh = mutate();
        }
        if (fresh.empty()) break;
        queue.insert(queue.end(), fresh.begin(), fresh.end());
      }
      Candidate& candidate = queue[next++];
      MeasurementKey key = base;
      key.schedule = candidate.text;
      if (db.contains(key)) {
        ++result.skipped;
        continue;
      }
      if (hopeless(candidate)) {
        ++result.hopeless;
        continue;
      }
      batch.push_back(candidate);
    }
    if (batch.empty()) {
      result.exhausted = true;
      break;
    }
    std::vector<sched::Schedule> schedules;
    for (const Candidate& candidate : batch) schedules.push_back(candidate.schedule);
    bool no_gpu = false;
    // Within a batch the executor starts no further candidate once the run is to end: Ctrl-C,
    // the time limit, no GPU or a database that cannot be written.
    executor.stop_starting_when([&] {
      return no_gpu || !result.error.empty() || (options.should_stop && options.should_stop()) ||
             (options.time_limit_seconds && elapsed() >= *options.time_limit_seconds);
    });
    executor.measure(schedules, [&](size_t index, const CandidateOutcome& outcome) {
      if (outcome.no_gpu) {
        no_gpu = true;
        result.error = "no GPU: " + outcome.message;
        return;
      }
      const Candidate& candidate = batch[index];
      if (outcome.duplicate) {
        waiting_duplicates.emplace_back(candidate, outcome.code_hash);
        record_duplicates();
        return;
      }
      TuningRecord record = candidate_record(candidate, outcome.code_hash);
      record.status = outcome.status;
      record.message = outcome.message;
      record.validation = outcome.validation;
      record.max_relative_error = outcome.max_relative_error;
      record.median_us = outcome.median_us;
      record.min_us = outcome.min_us;
      record.max_us = outcome.max_us;
      record.kernels = outcome.kernels;
      record.registers = outcome.registers;
      record.spill_bytes = outcome.spill_bytes;
      std::string insert_error;
      const int64_t id = db.insert(record, &insert_error);
      if (id <= 0) {
        result.error = "cannot write to the tuning database: " + insert_error;
        return;
      }
      ++result.measured;
      --budget_left;
      if (!record.usable()) ++result.failed;
      report_progress(candidate, describe_outcome(outcome),
                      record.usable() ? record.median_us : std::nullopt, std::nullopt);
      if (!record.code_hash.empty()) {
        {
          const std::lock_guard<std::mutex> lock(code_mutex);
          code_records.emplace(record.code_hash, id);
          code_in_flight.erase(record.code_hash);
        }
        record_duplicates();  // those that waited for this record
      }
    });
    executor.stop_starting_when({});
    if (no_gpu || !result.error.empty()) {
      result.seconds = elapsed();
      return result;
    }
  }

  result.best = db.best(base.spec_hash, base.sizes, base.device_name);
  for (const TuningRecord& record : db.list(this_config)) {
    if (record.key.schedule == analytical_pick && record.usable()) {
      result.analytical_pick_us = record.median_us;
    }
  }
  result.ok = true;
  result.seconds = elapsed();
  return result;
}

}  // namespace nautilus::tune
