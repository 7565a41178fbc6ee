// The tuner (core/tune/tuner.h) with an in-process executor whose times are a fixed function of
// the schedule text: it measures the search's leaves first, then mutations of the best measured
// schedules, reports the fastest, never measures a key twice, and stops when asked or when no
// GPU is there.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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

  int parallelism() const override { return batch_size; }

  static double time_of(const std::string& schedule) {
    return 10.0 + static_cast<double>(std::stoull(hash_text(schedule).substr(0, 8), nullptr, 16) %
                                      900) / 10.0;
  }

  std::optional<MachineIdentity> identity(std::string*) override {
    return MachineIdentity{"Scripted GPU", 132, 1980000, 2619000, 13000, "test"};
  }
  void measure(const std::vector<sched::Schedule>& batch,
               const std::function<void(size_t, const CandidateOutcome&)>& on_result) override {
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

}  // namespace
}  // namespace nautilus::tune
