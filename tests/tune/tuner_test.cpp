// The tuner (core/tune/tuner.h) with an in-process executor whose times are a fixed function of
// the schedule text: it measures the search's leaves first, then mutations of the best measured
// schedules, reports the fastest, never measures a key twice, and stops when asked or when no
// GPU is there.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/tune/tuner.h"
#include "tests/common/golden.h"

namespace nautilus::tune {
namespace {

class ScriptedExecutor : public Executor {
 public:
  bool no_gpu = false;
  int batch_size = 1;  // parallelism()
  std::vector<std::string> measured;  // schedule texts, in order
  // When > 0, the schedules lower to only this many distinct kernels: the "generated code" of a
  // schedule is its text's hash modulo distinct_codes. Duplicates of a batch are reported before
  // its measured candidates, as a real executor may (the tuner must hold them back until the
  // record they duplicate exists).
  int distinct_codes = 0;
  std::vector<std::string> measured_codes;
  // The compiler the identity names, and text that changes every generated code (a compiler
  // whose changes reach the kernels).
  std::string compiler = "test";
  std::string code_salt;

  static std::string code_of(const std::string& schedule, int distinct_codes, const std::string& salt = "") {
    return "code-" + salt + std::to_string(std::stoull(hash_text(schedule).substr(0, 8), nullptr, 16) %
                                           static_cast<uint64_t>(distinct_codes));
  }

  int parallelism() const override { return batch_size; }

  static double time_of(const std::string& schedule) {
    return 10.0 + static_cast<double>(std::stoull(hash_text(schedule).substr(0, 8), nullptr, 16) %
                                      900) / 10.0;
  }

  std::optional<MachineIdentity> identity(std::string*) override {
    return MachineIdentity{"Scripted GPU", 132, 1980000, 2619000, 13000, compiler};
  }
  void measure(const std::vector<sched::Schedule>& batch,
               const std::function<void(size_t, const CandidateOutcome&)>& on_result) override {
    if (distinct_codes > 0) return measure_with_codes(batch, on_result);
    for (size_t i = 0; i < batch.size(); ++i) {
      // As the local executor does between candidates: nothing more once the run is to end.
      if (should_stop_starting()) return;
      CandidateOutcome outcome;
      if (no_gpu) {
        outcome.no_gpu = true;
        outcome.message = "no device";
        on_result(i, outcome);
        continue;
      }
      const std::string text = sched::print_decisions(batch[i].decisions, "; ");
      measured.push_back(text);
      outcome.status = "ok";
      outcome.validation = Validation::Passed;
      outcome.median_us = outcome.min_us = outcome.max_us = time_of(text);
      on_result(i, outcome);
    }
  }

  void measure_with_codes(const std::vector<sched::Schedule>& batch,
                          const std::function<void(size_t, const CandidateOutcome&)>& on_result) {
    std::vector<std::pair<size_t, CandidateOutcome>> timed;
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::string text = sched::print_decisions(batch[i].decisions, "; ");
      const std::string code = code_of(text, distinct_codes, code_salt);
      if (code_already_measured(code)) {
        on_result(i, duplicate_outcome(code));
        continue;
      }
      measured.push_back(text);
      measured_codes.push_back(code);
      CandidateOutcome outcome;
      outcome.code_hash = code;
      outcome.status = "ok";
      outcome.validation = Validation::Passed;
      outcome.median_us = outcome.min_us = outcome.max_us = time_of(text);
      timed.emplace_back(i, outcome);
    }
    for (const auto& [i, outcome] : timed) on_result(i, outcome);
  }
};

class TunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "tuner-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    std::string error;
    db_ = TuningDatabase::open(dir_ + "/tuning.db", true, &error);
    ASSERT_TRUE(db_) << error;
    input_.file = SourceFile::read(nautilus::testing::source_path("assets/specs/gemm.nt"), &error);
    ASSERT_TRUE(input_.file) << error;
    input_.sizes = {{"M", 12}, {"N", 10}, {"K", 24}};
  }
  void TearDown() override {
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  TuneResult tune(ScriptedExecutor& executor, TuneOptions options) {
    return run_tune(input_, *model_, *db_, executor, options);
  }

  std::string dir_;
  std::unique_ptr<TuningDatabase> db_;
  search::SearchInput input_;
  std::unique_ptr<cost::CostModel> model_ =
      cost::make_analytical_model(*cost::device_model_for("h100"));
};

TEST_F(TunerTest, MeasuresLeavesThenMutationsAndReportsTheFastest) {
  const search::SearchResult searched = search::run_search(input_, *model_, {});
  ASSERT_TRUE(searched.ok);
  std::set<std::string> leaves;
  for (const search::SearchNode& node : searched.nodes) {
    if (node.status == search::NodeStatus::Leaf || node.status == search::NodeStatus::Chosen) {
      leaves.insert(sched::print_decisions(node.schedule.decisions, "; "));
    }
  }
  ScriptedExecutor executor;
  TuneOptions options;
  options.budget = static_cast<int>(leaves.size()) + 6;
  const TuneResult result = tune(executor, options);
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_EQ(result.measured, options.budget);
  ASSERT_EQ(executor.measured.size(), static_cast<size_t>(options.budget));
  // The leaves come first; what follows are mutations, none of them a leaf.
  for (size_t i = 0; i < executor.measured.size(); ++i) {
    EXPECT_EQ(leaves.count(executor.measured[i]) == 1, i < leaves.size()) << executor.measured[i];
  }
  EXPECT_EQ(std::set<std::string>(executor.measured.begin(), executor.measured.end()).size(),
            executor.measured.size());
  double fastest = 1e300;
  std::string fastest_schedule;
  for (const std::string& text : executor.measured) {
    if (ScriptedExecutor::time_of(text) < fastest) {
      fastest = ScriptedExecutor::time_of(text);
      fastest_schedule = text;
    }
  }
  ASSERT_TRUE(result.best);
  EXPECT_DOUBLE_EQ(*result.best->median_us, fastest);
  EXPECT_EQ(result.best->key.schedule, fastest_schedule);
  EXPECT_TRUE(result.analytical_pick_us) << "the search's own choice is among the leaves";

  // A second run skips everything the first measured.
  ScriptedExecutor again;
  options.budget = 3;
  const TuneResult second = tune(again, options);
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_GE(second.skipped, static_cast<int>(leaves.size()));
  for (const std::string& text : again.measured) {
    EXPECT_EQ(std::count(executor.measured.begin(), executor.measured.end(), text), 0) << text;
  }
}

TEST_F(TunerTest, StopsWhenAskedAfterTheCandidatesInFlightAndWithoutAGpu) {
  ScriptedExecutor executor;
  TuneOptions options;
  options.budget = 50;
  options.should_stop = [&] { return executor.measured.size() >= 3; };
  const TuneResult stopped = tune(executor, options);
  ASSERT_TRUE(stopped.ok) << stopped.error;
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.measured, 3);
  EXPECT_EQ(db_->list({}).size(), 3u);

  // Within a batch too: the executor is told to start no further candidate.
  ScriptedExecutor batched;
  batched.batch_size = 8;
  options.should_stop = [&] { return batched.measured.size() >= 3; };
  const TuneResult stopped_in_batch = run_tune(input_, *model_, *db_, batched, options);
  ASSERT_TRUE(stopped_in_batch.ok) << stopped_in_batch.error;
  EXPECT_TRUE(stopped_in_batch.stopped);
  EXPECT_EQ(stopped_in_batch.measured, 3);
  EXPECT_EQ(batched.measured.size(), 3u);
  EXPECT_EQ(db_->list({}).size(), 6u);

  ScriptedExecutor dead;
  dead.no_gpu = true;
  const TuneResult failed = tune(dead, TuneOptions{});
  EXPECT_FALSE(failed.ok);
  EXPECT_NE(failed.error.find("no GPU"), std::string::npos) << failed.error;
  EXPECT_EQ(db_->list({}).size(), 6u) << "nothing recorded for a missing GPU";
}

TEST_F(TunerTest, EachDistinctKernelIsMeasuredOnceAndItsDuplicatesAreRecorded) {
  // Far more candidates than kernels: the run measures every kernel once and ends exhausted.
  ScriptedExecutor executor;
  executor.distinct_codes = 5;
  executor.batch_size = 4;
  TuneOptions options;
  options.budget = 40;
  std::vector<TuneProgress> progress;
  const TuneResult result = run_tune(input_, *model_, *db_, executor, options,
                                     [&](const TuneProgress& p) { progress.push_back(p); });
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.measured, 5);
  ASSERT_EQ(executor.measured_codes.size(), 5u);
  EXPECT_EQ(std::set<std::string>(executor.measured_codes.begin(), executor.measured_codes.end())
                .size(),
            5u)
      << "no kernel is measured twice";
  EXPECT_GT(result.duplicates, 0);
  EXPECT_TRUE(result.exhausted);

  std::map<std::string, int64_t> measured_record;  // code -> record
  int duplicates = 0;
  const std::vector<TuningRecord> records = db_->list({});
  for (const TuningRecord& record : records) {
    if (!record.is_duplicate()) measured_record[record.code_hash] = record.id;
  }
  for (const TuningRecord& record : records) {
    if (!record.is_duplicate()) continue;
    ++duplicates;
    EXPECT_EQ(record.status, "duplicate");
    EXPECT_FALSE(record.usable());
    EXPECT_EQ(record.duplicate_of.value_or(0), measured_record.at(record.code_hash))
        << record.key.schedule << " links to the record of its code";
  }
  EXPECT_EQ(duplicates, result.duplicates);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().duplicates, result.duplicates);
  int duplicate_reports = 0;
  for (const TuneProgress& p : progress) duplicate_reports += p.duplicate_of.has_value();
  EXPECT_EQ(duplicate_reports, result.duplicates) << "each duplicate is reported as it is recorded";

  // A later run, resumed or not, measures none of them again: the schedules are in the
  // database, and any new schedule of a known code is a duplicate of the old record.
  ScriptedExecutor again;
  again.distinct_codes = 5;
  options.resume = true;
  const TuneResult second = run_tune(input_, *model_, *db_, again, options);
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_EQ(second.measured, 0);
  EXPECT_TRUE(again.measured.empty());
  EXPECT_GT(second.skipped, 0);
  for (const TuningRecord& record : db_->list({})) {
    if (record.is_duplicate()) {
      EXPECT_FALSE(db_->get(*record.duplicate_of)->is_duplicate()) << "links go to a measurement";
    }
  }
}

TEST_F(TunerTest, DuplicatesDoNotSpendTheBudget) {
  // More kernels than the budget: the budget buys that many distinct kernels.
  ScriptedExecutor executor;
  executor.distinct_codes = 12;
  executor.batch_size = 3;
  TuneOptions options;
  options.budget = 10;
  const TuneResult result = tune(executor, options);
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.measured, 10);
  EXPECT_EQ(std::set<std::string>(executor.measured_codes.begin(), executor.measured_codes.end())
                .size(),
            10u);
  EXPECT_GT(result.duplicates, 0) << "the space has duplicates for the budget to skip";
  EXPECT_EQ(db_->list({}).size(), static_cast<size_t>(result.measured + result.duplicates));

  // --resume counts the measured records only.
  ScriptedExecutor resumed;
  resumed.distinct_codes = 12;
  options.resume = true;
  options.budget = 11;
  const TuneResult more = tune(resumed, options);
  ASSERT_TRUE(more.ok) << more.error;
  EXPECT_EQ(more.measured, 1);
}

// `base` as another build of the compiler (`hash` in its version), with nothing measured yet.
ScriptedExecutor under_compiler(const ScriptedExecutor& base, const std::string& hash) {
  ScriptedExecutor out = base;
  out.measured.clear();
  out.measured_codes.clear();
  out.compiler = "nautilus 0.1.0 (compiler " + hash + "), NVRTC 13.0";
  return out;
}

TEST_F(TunerTest, AChangedCompilerMeasuresOnlyTheKernelsItChanged) {
  // Another compiler (another source hash in its version) walks the candidates again: the
  // schedules whose generated code did not change are the earlier measurements carried over,
  // which --resume counts against the budget; code that changed is measured.
  ScriptedExecutor first = under_compiler(ScriptedExecutor{}, "aaaaaaaaaaaa");
  first.distinct_codes = 1 << 20;  // every schedule its own kernel
  TuneOptions options;
  options.budget = 6;
  const TuneResult measured = tune(first, options);
  ASSERT_TRUE(measured.ok) << measured.error;
  ASSERT_EQ(measured.measured, 6);

  ScriptedExecutor same_code = under_compiler(first, "bbbbbbbbbbbb");
  options.resume = true;
  const TuneResult carried = tune(same_code, options);
  ASSERT_TRUE(carried.ok) << carried.error;
  EXPECT_EQ(carried.measured, 0);
  EXPECT_TRUE(same_code.measured.empty());
  EXPECT_EQ(carried.carried_over, 6);
  EXPECT_EQ(carried.skipped, 0) << "the earlier compiler's keys are not this compiler's";

  // Resumed again under the second compiler: nothing left, and nothing walked again.
  ScriptedExecutor again = same_code;
  const TuneResult resumed = tune(again, options);
  ASSERT_TRUE(resumed.ok) << resumed.error;
  EXPECT_EQ(resumed.measured, 0);
  EXPECT_EQ(resumed.duplicates, 0);

  ScriptedExecutor changed = under_compiler(first, "cccccccccccc");
  changed.code_salt = "new-";
  const TuneResult remeasured = tune(changed, options);
  ASSERT_TRUE(remeasured.ok) << remeasured.error;
  EXPECT_EQ(remeasured.measured, 6);
  EXPECT_EQ(remeasured.carried_over, 0);
}

TEST_F(TunerTest, AnEarlierMeasurementIsCarriedOverOnceHoweverManySchedulesShareItsCode) {
  // Three kernels in the whole space: the first compiler measures all three. Under the next
  // compiler every schedule is a duplicate of one of them; the three are carried over once each,
  // so the budget still has room, and a resumed run under that compiler finds nothing to do.
  ScriptedExecutor first = under_compiler(ScriptedExecutor{}, "aaaaaaaaaaaa");
  first.distinct_codes = 3;
  TuneOptions options;
  options.budget = 10;
  const TuneResult measured = tune(first, options);
  ASSERT_TRUE(measured.ok) << measured.error;
  ASSERT_EQ(measured.measured, 3);

  ScriptedExecutor next = under_compiler(first, "bbbbbbbbbbbb");
  options.resume = true;
  const TuneResult carried = tune(next, options);
  ASSERT_TRUE(carried.ok) << carried.error;
  EXPECT_EQ(carried.measured, 0);
  EXPECT_EQ(carried.carried_over, 3);
  EXPECT_GT(carried.duplicates, 3) << "several schedules share each kernel";

  ScriptedExecutor again = next;
  const TuneResult resumed = tune(again, options);
  ASSERT_TRUE(resumed.ok) << resumed.error;
  EXPECT_EQ(resumed.measured, 0);
  EXPECT_EQ(resumed.carried_over, 0);
}

TEST_F(TunerTest, CandidatesEstimatedFarSlowerThanThePickAreNotMeasured) {
  // With no limit every leaf and mutation is measured; with the limit at the pick's own
  // estimate, only candidates the model rates no slower than the pick are.
  const search::SearchResult searched = search::run_search(input_, *model_, {});
  ASSERT_TRUE(searched.ok);
  ScriptedExecutor everything;
  TuneOptions options;
  options.budget = 12;
  options.skip_estimate_ratio = 0;
  const TuneResult all = tune(everything, options);
  ASSERT_TRUE(all.ok) << all.error;
  EXPECT_EQ(all.hopeless, 0);
  double pick_estimate = 0;
  for (const TuningRecord& record : db_->list({})) {
    if (record.key.schedule == sched::print_decisions(searched.schedule.decisions, "; ")) {
      pick_estimate = record.estimate_us.value_or(0);
    }
  }
  ASSERT_GT(pick_estimate, 0) << "the pick is measured first";
  int slower = 0;
  for (const TuningRecord& record : db_->list({})) slower += record.estimate_us.value_or(0) > pick_estimate;
  ASSERT_GT(slower, 0) << "the space has candidates the model rates slower than the pick";

  TearDown();
  SetUp();
  ScriptedExecutor limited;
  options.skip_estimate_ratio = 1.0;
  const TuneResult kept = tune(limited, options);
  ASSERT_TRUE(kept.ok) << kept.error;
  EXPECT_GT(kept.hopeless, 0);
  for (const TuningRecord& record : db_->list({})) {
    EXPECT_LE(record.estimate_us.value_or(0), pick_estimate * (1 + 1e-9)) << record.key.schedule;
  }
}

}  // namespace
}  // namespace nautilus::tune
