// Measured tuning in the studio, offscreen, against the runner's fake CUDA driver ("Nautilus Fake
// GPU 0") and the stand-in runner (tests/common/stand_in_runner.h): the search panel's Measure
// fills the tree's measured column and writes records into a temporary tuning database; Cancel
// stops after the candidates in flight; the History panel lists the records of the spec, sizes
// and device with the best so far and the roofline bound; "Use best measured" hands the best
// record's schedule to the window, which says where it came from, and a freshly opened spec with
// a measured best is offered it.
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QSpinBox>
#include <QToolButton>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/sched/decision.h"
#include "core/support/source.h"
#include "core/tune/tuner.h"
#include "core/tune/tuning_db.h"
#include "tests/common/event_loop.h"
#include "tests/common/golden.h"
#include "tests/common/stand_in_runner.h"
#include "tests/common/temp_dir.h"
#include "views/decisions_model.h"
#include "views/decisions_panel.h"
#include "views/main_window.h"
#include "views/profiler_panel.h"
#include "views/search_panel.h"
#include "views/search_tree_model.h"
#include "views/tuning_chart.h"
#include "views/tuning_history_model.h"
#include "views/tuning_history_panel.h"

namespace nautilus::views {
namespace {

using nautilus::testing::TempDir;
using nautilus::testing::wait_until;

const char* kFakeGpu = "Nautilus Fake GPU 0";

std::string gemm_text() {
  return nautilus::testing::read_text(nautilus::testing::source_path("assets/specs/gemm.nt"));
}

std::vector<spec::SizeOverride> small_sizes() { return {{"M", 12}, {"N", 10}, {"K", 24}}; }

// The complete schedule of a tree node (its decisions, then its default completion) as the
// database keys it.
std::string complete_schedule_text(const search::SearchNode& node) {
  std::vector<sched::Decision> decisions = node.schedule.decisions;
  decisions.insert(decisions.end(), node.completion.decisions.begin(),
                   node.completion.decisions.end());
  return sched::print_decisions(decisions, "; ");
}

std::vector<tune::TuningRecord> all_records(const std::string& path) {
  std::string error;
  auto db = tune::TuningDatabase::open(path, false, &error);
  EXPECT_TRUE(db) << error;
  return db ? db->list({}) : std::vector<tune::TuningRecord>{};
}

// The records that measured their code (not the duplicates of one).
std::vector<tune::TuningRecord> measured_records(const std::string& path) {
  std::vector<tune::TuningRecord> records = all_records(path);
  std::erase_if(records, [](const tune::TuningRecord& record) { return record.is_duplicate(); });
  return records;
}

// The stand-in runner, except that its first call reports wrong results: the tuner's first
// candidate is the search's best estimate, a node of the panel's tree. (One device: the runner's
// calls come one after the other.)
std::string write_runner_failing_first(const TempDir& dir) {
  const std::string stand_in = nautilus::testing::write_stand_in_runner(dir);
  const std::string path = dir.file("failing_first.sh");
  std::ofstream script(path);
  script << "#!/bin/sh\n"
         << "n=$(cat " << dir.file("wrapper_calls") << " 2>/dev/null || echo 0)\n"
         << "n=$((n + 1))\n"
         << "echo $n > " << dir.file("wrapper_calls") << "\n"
         << "if [ $n -eq 1 ]; then\n"
         << "  echo '{\"format\": \"nautilus-runner-report\", \"version\": 1, \"status\": "
            "\"wrong_results\", \"validation\": {\"status\": \"failed\", \"passed\": false, "
            "\"max_relative_error\": 0.5}, \"errors\": [{\"kind\": \"wrong_results\", "
            "\"message\": \"C differs from the reference\"}]}'\n"
         << "  exit 1\nfi\n"
         << "exec " << stand_in << " \"$@\"\n";
  script.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// A search panel on the small GEMM, measuring into DIR/tuning.db through the fake driver.
void set_up_measuring(SearchPanel& panel, const TempDir& dir, const std::string& runner) {
  panel.set_beam(1);
  panel.set_spec("gemm.nt", gemm_text(), small_sizes());
  panel.set_database_path(QString::fromStdString(dir.file("tuning.db")));
  panel.set_driver_library(NAUTILUS_FAKE_LIBCUDA);
  panel.set_runner_command(runner);
}

// What the panel's measure_finished said: how often, whether the last run was ok, its summary.
struct MeasureOutcome {
  int finished = 0;
  bool ok = false;
  QString summary;

  explicit MeasureOutcome(SearchPanel& panel) {
    QObject::connect(&panel, &SearchPanel::measure_finished, [this](bool run_ok, const QString& text) {
      ++finished;
      ok = run_ok;
      summary = text;
    });
  }
};

TEST(SearchPanelMeasure, FillsTheMeasuredColumnWritesTheDatabaseAndHistoryListsIt) {
  TempDir dir("studio-measure");
  // The first candidate (the search's choice) is reported as wrong results.
  const std::string runner = write_runner_failing_first(dir);
  SearchPanel panel;
  QAbstractItemModelTester tester(panel.model(),
                                  QAbstractItemModelTester::FailureReportingMode::Fatal);
  set_up_measuring(panel, dir, runner);
  // A wider beam: at beam 1 the search's two leaves lower to the same kernel, which failed, so
  // nothing validated would be left to mutate.
  panel.set_beam(3);
  EXPECT_TRUE(panel.database_label()->text().contains(QString::fromStdString(dir.file("tuning.db"))));
  int searched = 0;
  QObject::connect(&panel, &SearchPanel::finished, [&searched](bool) { ++searched; });
  ASSERT_TRUE(panel.start());
  ASSERT_TRUE(wait_until([&] { return searched == 1; }, 60'000));

  std::vector<std::pair<QString, QString>> recorded;  // schedule, outcome
  QObject::connect(&panel, &SearchPanel::measurement_recorded,
                   [&recorded](const QString& schedule, const QString& outcome) {
                     recorded.emplace_back(schedule, outcome);
                   });
  MeasureOutcome outcome(panel);
  panel.candidates_box()->setValue(6);
  ASSERT_TRUE(panel.measure());
  EXPECT_TRUE(panel.measuring());
  EXPECT_FALSE(panel.measure()) << "one measurement at a time";
  ASSERT_TRUE(wait_until([&] { return outcome.finished == 1; }, 120'000));
  ASSERT_TRUE(outcome.ok) << outcome.summary.toStdString();
  EXPECT_FALSE(panel.measuring());
  EXPECT_TRUE(outcome.summary.contains(QStringLiteral("6 measured"))) << outcome.summary.toStdString();

  // Six records of this spec, sizes and device, one per measured candidate; the candidates whose
  // code one of them measured are recorded as its duplicates and reported too.
  const std::vector<tune::TuningRecord> records = measured_records(dir.file("tuning.db"));
  ASSERT_EQ(records.size(), 6u);
  const size_t duplicates = all_records(dir.file("tuning.db")).size() - records.size();
  ASSERT_EQ(recorded.size(), 6u + duplicates);
  int duplicates_shown = 0;
  for (const auto& [schedule, shown_outcome] : recorded) {
    duplicates_shown += shown_outcome.startsWith(QStringLiteral("duplicate of record"));
  }
  EXPECT_EQ(duplicates_shown, static_cast<int>(duplicates));
  std::set<std::string> schedules;
  for (const tune::TuningRecord& record : records) {
    EXPECT_EQ(record.key.device_name, kFakeGpu);
    EXPECT_EQ(record.key.sizes, "K=24,M=12,N=10");
    EXPECT_EQ(record.source, "studio");
    schedules.insert(record.key.schedule);
  }
  EXPECT_EQ(schedules.size(), 6u);

  // Each record whose schedule is a node of the tree shows in that node's measured cell: the
  // time when it was validated, else why not.
  const SearchTreeModel* model = panel.model();
  int shown = 0, failed_shown = 0;
  for (const tune::TuningRecord& record : records) {
    for (const search::SearchNode& node : model->nodes()) {
      if (complete_schedule_text(node) != record.key.schedule) continue;
      const QString cell =
          model->data(model->index_of(node.id).siblingAtColumn(SearchTreeModel::Measured)).toString();
      if (record.usable()) {
        EXPECT_EQ(cell, QString::number(*record.median_us, 'f', 1)) << record.key.schedule;
      } else {
        EXPECT_TRUE(cell.startsWith(QStringLiteral("wrong results"))) << cell.toStdString();
        ++failed_shown;
      }
      ++shown;
    }
  }
  EXPECT_GE(shown, 1) << "the search's leaves are the tuner's first candidates";
  int failed = 0;
  for (const tune::TuningRecord& record : records) failed += !record.usable();
  for (const auto& [schedule, shown_outcome] : recorded) {
    if (shown_outcome.startsWith(QStringLiteral("duplicate of record"))) continue;
    const bool usable = std::any_of(records.begin(), records.end(), [&](const auto& r) {
      return r.key.schedule == schedule.toStdString() && r.usable();
    });
    if (!usable) {
      EXPECT_TRUE(shown_outcome.startsWith(QStringLiteral("wrong results"))) << shown_outcome.toStdString();
    }
  }
  EXPECT_EQ(failed, 1);
  EXPECT_GE(failed_shown, 1) << "the first candidate is the search's choice, a node of the tree";

  // The History panel lists them, oldest first, with the best so far.
  TuningHistoryPanel history;
  history.set_database_path(QString::fromStdString(dir.file("tuning.db")));
  history.set_driver_library(NAUTILUS_FAKE_LIBCUDA);
  history.set_spec("gemm.nt", gemm_text(), small_sizes());
  int refreshed = 0;
  QObject::connect(&history, &TuningHistoryPanel::refreshed, [&refreshed] { ++refreshed; });
  history.refresh();
  ASSERT_TRUE(wait_until([&] { return refreshed > 0 && !history.busy(); }, 30'000));
  EXPECT_EQ(history.local_device(), kFakeGpu);
  EXPECT_EQ(history.shown_device().toStdString(), kFakeGpu);
  const TuningHistoryModel* table = history.model();
  ASSERT_EQ(table->rowCount(), 6);
  double best = 1e300;
  for (int row = 0; row < table->rowCount(); ++row) {
    const tune::TuningRecord& record = table->records()[static_cast<size_t>(row)];
    if (row > 0) {
      EXPECT_LT(table->records()[static_cast<size_t>(row - 1)].id, record.id);
    }
    if (record.usable()) best = std::min(best, *record.median_us);
    const std::optional<double>& so_far = table->best_so_far()[static_cast<size_t>(row)];
    if (best < 1e300) {
      ASSERT_TRUE(so_far.has_value()) << row;
      EXPECT_DOUBLE_EQ(*so_far, best) << row;
    } else {
      EXPECT_FALSE(so_far.has_value()) << row;
    }
    EXPECT_EQ(table->data(table->index(row, TuningHistoryModel::Validation)).toString(),
              record.usable() ? QStringLiteral("passed") : QStringLiteral("wrong results"));
  }
  EXPECT_EQ(failed, 6 - static_cast<int>(std::count_if(records.begin(), records.end(),
                                                        [](const auto& r) { return r.usable(); })));
  ASSERT_LT(best, 1e300) << "some candidate validated";
  EXPECT_EQ(history.chart()->medians().size(), 6u);
  ASSERT_TRUE(history.chart()->roofline_us().has_value()) << "the roofline bound of the math";
  EXPECT_GT(*history.chart()->roofline_us(), 0);
  EXPECT_TRUE(history.status_label()->text().contains(QStringLiteral("best: record")))
      << history.status_label()->text().toStdString();

  // A second Measure skips what the database has: the next candidates are new.
  recorded.clear();
  ASSERT_TRUE(panel.measure(2));
  ASSERT_TRUE(wait_until([&] { return outcome.finished == 2; }, 120'000));
  ASSERT_TRUE(outcome.ok) << outcome.summary.toStdString();
  EXPECT_EQ(measured_records(dir.file("tuning.db")).size(), 8u);
  history.refresh();
  ASSERT_TRUE(wait_until([&] { return refreshed > 1 && !history.busy(); }, 30'000));
  EXPECT_EQ(history.model()->rowCount(), 8);
}

TEST(SearchPanelMeasure, CancelStopsAfterTheCandidatesInFlight) {
  TempDir dir("studio-measure-cancel");
  const std::string runner = nautilus::testing::write_stand_in_runner(dir, 0, 0.3);
  SearchPanel panel;
  set_up_measuring(panel, dir, runner);
  int recorded = 0;
  QObject::connect(&panel, &SearchPanel::measurement_recorded,
                   [&recorded](const QString&, const QString&) { ++recorded; });
  MeasureOutcome outcome(panel);
  ASSERT_TRUE(panel.measure(200));
  ASSERT_TRUE(wait_until([&] { return recorded >= 1; }, 120'000));
  panel.cancel();
  ASSERT_TRUE(wait_until([&] { return outcome.finished == 1; }, 120'000));
  ASSERT_TRUE(outcome.ok) << outcome.summary.toStdString();
  EXPECT_TRUE(outcome.summary.contains(QStringLiteral("stopped"))) << outcome.summary.toStdString();
  const size_t written = all_records(dir.file("tuning.db")).size();  // duplicates reported too
  EXPECT_GE(written, 1u);
  EXPECT_LT(written, 200u);
  EXPECT_EQ(static_cast<int>(written), recorded) << "every recorded candidate reached the panel";
}

TEST(SearchPanelMeasure, WithoutAGpuTheRunSaysWhy) {
  TempDir dir("studio-measure-nogpu");
  const std::string runner = nautilus::testing::write_stand_in_runner(dir);
  SearchPanel panel;
  set_up_measuring(panel, dir, runner);
  qputenv("NAUTILUS_FAKE_CUDA_INIT_ERROR", "100");
  MeasureOutcome outcome(panel);
  ASSERT_TRUE(panel.measure(2));
  const bool done = wait_until([&] { return outcome.finished == 1; }, 60'000);
  qunsetenv("NAUTILUS_FAKE_CUDA_INIT_ERROR");
  ASSERT_TRUE(done);
  EXPECT_FALSE(outcome.ok);
  EXPECT_TRUE(panel.measure_label()->text().contains(QStringLiteral("no GPU")))
      << panel.measure_label()->text().toStdString();
}

// Records written straight into a database: two devices, one failure, known times.
struct SeededDatabase {
  std::string path;
  sched::Schedule best_schedule;
  int64_t best_id = 0;
  std::vector<double> fake_gpu_medians;  // in record order; 0 = no time
};

SeededDatabase seed_database(const TempDir& dir, const std::vector<spec::SizeOverride>& sizes) {
  SeededDatabase seeded;
  seeded.path = dir.file("seeded.db");
  std::string error;
  auto db = tune::TuningDatabase::open(seeded.path, true, &error);
  EXPECT_TRUE(db) << error;
  search::SearchInput input;
  input.file = std::make_shared<const SourceFile>("gemm.nt", gemm_text());
  input.sizes = sizes;
  const auto identity = tune::identify_spec(input, &error);
  EXPECT_TRUE(identity) << error;
  // Three schedules the database tells apart; their text is the key.
  std::vector<sched::Schedule> schedules;
  for (int m : {16, 32, 64}) {
    sched::DecisionParseError parse_error;
    const auto decision = sched::parse_decision(
        "tile(C_sum, m=" + std::to_string(m) + ", n=16, k=16)", &parse_error);
    EXPECT_TRUE(decision) << sched::to_string(parse_error);
    schedules.push_back(sched::Schedule{{*decision}});
  }
  struct Row {
    const char* device;
    size_t schedule;
    double median;  // 0: wrong results
  };
  // Fake GPU: 30, wrong, 20 (best), 25; another device: 5 (faster, but not this device).
  const std::vector<Row> rows = {{kFakeGpu, 0, 30.0}, {kFakeGpu, 1, 0.0}, {kFakeGpu, 2, 20.0},
                                 {"NVIDIA H100 80GB HBM3", 0, 5.0}, {kFakeGpu, 1, 25.0}};
  int64_t created = 1'700'000'000;
  for (const Row& row : rows) {
    tune::TuningRecord record;
    record.created_unix = created++;
    record.key.spec_hash = identity->spec_hash;
    record.key.sizes = identity->sizes;
    record.key.schedule = sched::print_decisions(schedules[row.schedule].decisions, "; ");
    record.key.device_name = row.device;
    // Distinct keys for the repeated schedule: another compiler version.
    record.key.compiler_version = "test " + std::to_string(created);
    record.spec_name = "gemm";
    record.schedule_json = sched::schedule_to_json(schedules[row.schedule]).dump();
    record.status = row.median > 0 ? "ok" : "wrong_results";
    record.validation = row.median > 0 ? tune::Validation::Passed : tune::Validation::Failed;
    if (row.median > 0) record.median_us = record.min_us = record.max_us = row.median;
    record.estimate_us = 18.0;
    record.registers = 64;
    record.source = "tune";
    const int64_t id = db->insert(record, &error);
    EXPECT_GT(id, 0) << error;
    if (std::string(row.device) == kFakeGpu) {
      seeded.fake_gpu_medians.push_back(row.median);
      if (row.median == 20.0) {
        seeded.best_id = id;
        seeded.best_schedule = schedules[row.schedule];
      }
    }
  }
  return seeded;
}

TEST(TuningHistoryPanel, ListsTheDevicesRecordsWithTheBestSoFarAndUsesTheBest) {
  TempDir dir("studio-history");
  const SeededDatabase seeded = seed_database(dir, small_sizes());
  TuningHistoryPanel history;
  QAbstractItemModelTester tester(history.model(),
                                  QAbstractItemModelTester::FailureReportingMode::Fatal);
  history.set_database_path(QString::fromStdString(seeded.path));
  history.set_driver_library(NAUTILUS_FAKE_LIBCUDA);
  int refreshed = 0;
  QObject::connect(&history, &TuningHistoryPanel::refreshed, [&refreshed] { ++refreshed; });
  history.set_spec("gemm.nt", gemm_text(), small_sizes());
  EXPECT_TRUE(history.busy()) << "a spec change refreshes after a pause";
  ASSERT_TRUE(wait_until([&] { return refreshed == 1 && !history.busy(); }, 30'000));

  // The local (fake) GPU first; the other device is listed too.
  ASSERT_EQ(history.device_box()->count(), 2);
  EXPECT_EQ(history.device_box()->itemText(0).toStdString(), kFakeGpu);
  EXPECT_EQ(history.shown_device().toStdString(), kFakeGpu);
  const TuningHistoryModel* table = history.model();
  ASSERT_EQ(table->rowCount(), 4);
  const std::vector<std::optional<double>> expected_best = {30.0, 30.0, 20.0, 20.0};
  ASSERT_EQ(table->best_so_far().size(), expected_best.size());
  for (size_t row = 0; row < expected_best.size(); ++row) {
    EXPECT_EQ(table->best_so_far()[row], expected_best[row]) << row;
  }
  EXPECT_EQ(table->best_row(), 2);
  EXPECT_EQ(table->data(table->index(1, TuningHistoryModel::Validation)).toString(),
            QStringLiteral("wrong results"));
  EXPECT_EQ(table->data(table->index(0, TuningHistoryModel::Median)).toString(), QStringLiteral("30.00"));
  EXPECT_EQ(table->data(table->index(0, TuningHistoryModel::Estimate)).toString(), QStringLiteral("18.00"));
  EXPECT_EQ(table->data(table->index(0, TuningHistoryModel::Registers)).toString(), QStringLiteral("64"));
  // The chart: a time per validated record, none for the failure, and the roofline bound.
  const std::vector<std::optional<double>> medians = history.chart()->medians();
  ASSERT_EQ(medians.size(), 4u);
  EXPECT_FALSE(medians[1].has_value());
  EXPECT_EQ(medians[2], 20.0);
  EXPECT_EQ(history.chart()->best_so_far(), table->best_so_far());
  ASSERT_TRUE(history.chart()->roofline_us().has_value());
  // The fake GPU is no model the cost model knows: its bound is the H100 preset's.
  EXPECT_TRUE(history.status_label()->text().contains(QStringLiteral("H100 preset")))
      << history.status_label()->text().toStdString();
  EXPECT_FALSE(history.chart()->grab().isNull());

  // Use best measured: the fastest validated record of the shown device, not the other device's.
  std::vector<std::pair<sched::Schedule, QString>> chosen;
  QObject::connect(&history, &TuningHistoryPanel::schedule_chosen,
                   [&chosen](const sched::Schedule& schedule, const QString& origin) {
                     chosen.emplace_back(schedule, origin);
                   });
  ASSERT_TRUE(history.use_best());
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(sched::print_decisions(chosen[0].first.decisions, "; "),
            sched::print_decisions(seeded.best_schedule.decisions, "; "));
  EXPECT_EQ(chosen[0].second, QStringLiteral("best measured: record %1, 20.00 µs on %2")
                                  .arg(seeded.best_id)
                                  .arg(QString::fromLatin1(kFakeGpu)));

  // The other device: its own records and best.
  history.show_device(QStringLiteral("NVIDIA H100 80GB HBM3"));
  EXPECT_EQ(history.model()->rowCount(), 1);
  ASSERT_TRUE(history.best_record().has_value());
  EXPECT_EQ(*history.best_record()->median_us, 5.0);
  // Its roofline is the H100's own model.
  EXPECT_FALSE(history.status_label()->text().contains(QStringLiteral("preset")));

  // Other sizes: no records.
  history.set_spec("gemm.nt", gemm_text(), {{"M", 64}, {"N", 64}, {"K", 64}});
  ASSERT_TRUE(wait_until([&] { return refreshed == 2 && !history.busy(); }, 30'000));
  EXPECT_EQ(history.model()->rowCount(), 0);
  EXPECT_FALSE(history.use_best());
}

TEST(StudioWindow, OffersTheBestMeasuredScheduleAndUsesIt) {
  TempDir dir("studio-best-measured");
  // The window opens gemm.nt at the spec's own sizes.
  const SeededDatabase seeded = seed_database(dir, {});
  MainWindow window;
  window.set_cuda_driver(NAUTILUS_FAKE_LIBCUDA);
  window.set_tuning_database(QString::fromStdString(seeded.path));
  TuningHistoryPanel* history = window.history_panel();
  ASSERT_NE(history, nullptr);
  ASSERT_NE(window.dock(QStringLiteral("history")), nullptr);
  // Measure runs candidates with the Profiler panel's runner command.
  EXPECT_EQ(window.search_panel()->runner_command(),
            window.profiler_panel()->runner_command().toStdString());
  window.profiler_panel()->set_runner_command(QStringLiteral("ssh gpuhost nautilus-runner"));
  EXPECT_EQ(window.search_panel()->runner_command(), "ssh gpuhost nautilus-runner");
  QString error;
  ASSERT_TRUE(window.open_file(
      QString::fromStdString(nautilus::testing::source_path("assets/specs/gemm.nt")), &error))
      << error.toStdString();
  const QString offer = QStringLiteral("best measured: record %1, 20.00 µs on %2")
                            .arg(seeded.best_id)
                            .arg(QString::fromLatin1(kFakeGpu));
  ASSERT_TRUE(wait_until([&] {
    return window.schedule_origin_label()->text().contains(offer);
  }, 30'000)) << window.schedule_origin_label()->text().toStdString();
  ASSERT_FALSE(window.use_best_measured_button()->isHidden()) << "the offer has a button";

  int compiled = 0;
  QObject::connect(&window, &MainWindow::pipeline_finished, [&compiled](bool) { ++compiled; });
  // Another device shown in History: the offer still uses the local GPU's best.
  history->show_device(QStringLiteral("NVIDIA H100 80GB HBM3"));
  window.use_best_measured_button()->click();
  EXPECT_TRUE(window.use_best_measured_button()->isHidden());
  EXPECT_EQ(window.schedule_origin_label()->text(), offer);
  EXPECT_EQ(sched::print_decisions(window.decisions_panel()->model()->schedule().decisions, "; "),
            sched::print_decisions(seeded.best_schedule.decisions, "; "));
  ASSERT_TRUE(wait_until([&] { return compiled > 0 && !window.pipeline()->running(); }, 60'000));
}

}  // namespace
}  // namespace nautilus::views
