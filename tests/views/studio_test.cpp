// Nautilus Studio's models, workers and panels, offscreen: the pass log, decisions and run history
// models under QAbstractItemModelTester, the golden pass log of the attention example, graph
// layout off the UI thread, unified diffs, sessions, the profiler panel without a GPU, and the real
// window driven through the attention example.
#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QRegularExpression>
#include <QSet>
#include <QSpinBox>
#include <QTextEdit>
#include <QTableWidget>
#include <QTextBlock>
#include <QTemporaryDir>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <stop_token>
#include <thread>

#include "core/driver/render.h"
#include "core/sched/decision.h"
#include "core/support/source.h"
#include "profiler/device_info.h"
#include "tests/common/event_loop.h"
#include "tests/common/golden.h"
#include "views/compare_panel.h"
#include "views/cuda_view.h"
#include "views/decisions_model.h"
#include "views/decisions_panel.h"
#include "views/graph_layout.h"
#include "views/graph_view.h"
#include "views/main_window.h"
#include "views/pass_log_model.h"
#include "views/pipeline_runner.h"
#include "views/profiler_panel.h"
#include "views/roofline_widget.h"
#include "views/run_history_model.h"
#include "views/search_panel.h"
#include "views/search_tree_model.h"
#include "views/session.h"
#include "views/shape_panel.h"
#include "views/snapshot_text.h"
#include "views/stage_view.h"
#include "views/teaching_panel.h"

namespace nautilus::views {
namespace {

using nautilus::testing::wait_until;

// QAbstractItemModelTester reports through qWarning in Warning mode; count its failures.
class ModelCheck {
 public:
  explicit ModelCheck(QAbstractItemModel* model) {
    failures() = 0;
    previous_ = qInstallMessageHandler(&ModelCheck::handler);
    tester_ = std::make_unique<QAbstractItemModelTester>(
        model, QAbstractItemModelTester::FailureReportingMode::Warning);
  }
  ~ModelCheck() {
    tester_.reset();
    qInstallMessageHandler(previous_);
  }
  int failures_so_far() const { return failures(); }

 private:
  static int& failures() {
    static int count = 0;
    return count;
  }
  static void handler(QtMsgType type, const QMessageLogContext&, const QString& message) {
    if (type == QtWarningMsg && message.contains(QStringLiteral("FAIL"))) {
      ++failures();
      std::fprintf(stderr, "model tester: %s\n", qPrintable(message));
    }
  }
  QtMessageHandler previous_ = nullptr;
  std::unique_ptr<QAbstractItemModelTester> tester_;
};

std::string read_asset(const std::string& relative) {
  return nautilus::testing::read_text(nautilus::testing::source_path(relative));
}

sched::Schedule asset_schedule(const std::string& name) {
  std::string error;
  auto schedule = sched::read_schedule_file(
      nautilus::testing::source_path("assets/schedules/" + name + ".json"), &error);
  EXPECT_TRUE(schedule.has_value()) << error;
  return schedule.value_or(sched::Schedule{});
}

// The attention example with its schedule, compiled to CUDA (at the spec's own sizes: the
// pipeline never touches data, so sizes cost nothing).
std::shared_ptr<const driver::Compilation> compile_attention() {
  PipelineInputs inputs;
  inputs.path = "attention.nt";
  inputs.text = read_asset("assets/specs/attention.nt");
  inputs.schedule = asset_schedule("attention");
  PipelineResult result = run_pipeline(inputs);
  EXPECT_TRUE(result.compilation && result.compilation->ok())
      << (result.compilation ? result.compilation->schedule_error + result.compilation->internal_error
                             : result.error.toStdString());
  return result.compilation;
}

PipelineInputs attention_inputs() {
  PipelineInputs inputs;
  inputs.path = "attention.nt";
  inputs.text = read_asset("assets/specs/attention.nt");
  inputs.schedule = asset_schedule("attention");
  return inputs;
}

TEST(PipelineRunner, ReportsEachPassAsItFinishesThenTheCompilation) {
  PipelineRunner runner(nullptr, std::chrono::milliseconds(0));
  QStringList passes;
  QStringList stages;
  std::shared_ptr<const driver::Compilation> delivered;
  QObject::connect(&runner, &PipelineRunner::pass_finished,
                   [&](quint64, const QString& stage, const QString& pass) {
                     EXPECT_FALSE(delivered) << "a pass reported after its compilation";
                     stages << stage;
                     passes << pass;
                   });
  QObject::connect(&runner, &PipelineRunner::finished,
                   [&](const PipelineResult& result) { delivered = result.compilation; });
  runner.set_inputs(attention_inputs());
  runner.run_now();
  ASSERT_TRUE(wait_until([&] { return delivered != nullptr; }, 30'000));
  ASSERT_TRUE(delivered->ok());
  ASSERT_EQ(passes.size(), static_cast<int>(delivered->log.size()));
  for (size_t i = 0; i < delivered->log.size(); ++i) {
    EXPECT_EQ(passes[static_cast<int>(i)].toStdString(), delivered->log[i].pass);
    EXPECT_EQ(stages[static_cast<int>(i)].toStdString(), driver::stage_name(delivered->log[i].stage));
  }
}

TEST(PipelineRunner, AStoppedCompileEndsBeforeItsNextPassAndACancelledOneDeliversNothing) {
  std::stop_source stop;
  stop.request_stop();
  const PipelineResult stopped = run_pipeline(attention_inputs(), stop.get_token());
  ASSERT_TRUE(stopped.compilation);
  EXPECT_TRUE(stopped.compilation->cancelled);
  EXPECT_TRUE(stopped.compilation->log.empty());
  EXPECT_FALSE(stopped.compilation->ok());

  PipelineRunner runner(nullptr, std::chrono::milliseconds(0));
  int finished = 0, cancelled = 0;
  QObject::connect(&runner, &PipelineRunner::finished, [&](const PipelineResult&) { ++finished; });
  QObject::connect(&runner, &PipelineRunner::cancelled, [&] { ++cancelled; });
  runner.set_inputs(attention_inputs());
  runner.run_now();
  runner.cancel();
  EXPECT_EQ(cancelled, 1);
  EXPECT_FALSE(runner.running());
  // Whatever the worker was doing, nothing is delivered for the cancelled generation.
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < 1000) QApplication::processEvents(QEventLoop::AllEvents, 20);
  EXPECT_EQ(finished, 0);
  // The next request compiles normally.
  runner.run_now();
  ASSERT_TRUE(wait_until([&] { return finished == 1; }, 30'000));
}

TEST(PassLogModel, PassesTheModelTesterAndPrintsTheGoldenAttentionLog) {
  PassLogModel model;
  ModelCheck check(&model);
  auto compilation = compile_attention();
  ASSERT_TRUE(compilation);
  model.set_compilation(compilation);
  EXPECT_EQ(model.rowCount(), static_cast<int>(compilation->log.size()));
  // Times differ between runs; everything else is the pipeline's stable log.
  nautilus::testing::expect_golden("views/attention_pass_log.txt",
                                   print_table_model(model, {PassLogModel::Milliseconds}).toStdString());
  const int all = model.rowCount();
  model.set_hide_unchanged(true);
  EXPECT_LT(model.rowCount(), all) << "launch(...) leaves the scalar IR unchanged";
  for (int row = 0; row < model.rowCount(); ++row) {
    const int index = model.snapshot_index(row);
    const bool first_of_stage =
        index == 0 || compilation->log[static_cast<size_t>(index - 1)].stage !=
                          compilation->log[static_cast<size_t>(index)].stage;
    EXPECT_TRUE(!compilation->log[static_cast<size_t>(index)].unchanged || first_of_stage);
    EXPECT_EQ(model.row_of(index), row);
  }
  model.set_compilation(nullptr);
  EXPECT_EQ(model.rowCount(), 0);
  EXPECT_EQ(check.failures_so_far(), 0);
}

TEST(DecisionsModel, InvalidEditsShowTheReasonAndLeaveTheScheduleUnchanged) {
  DecisionsModel model;
  ModelCheck check(&model);
  const std::string spec_text = read_asset("assets/specs/attention.nt");
  // The validator the window installs: apply the schedule to the spec (to VR tile IR).
  model.set_validator([&spec_text](const sched::Schedule& schedule) {
    PipelineInputs inputs;
    inputs.path = "attention.nt";
    inputs.text = spec_text;
    inputs.schedule = schedule;
    inputs.last_stage = driver::Stage::VRTile;
    return run_pipeline(inputs).compilation->schedule_error;
  });
  const sched::Schedule original = asset_schedule("attention");
  model.set_schedule(original);
  ASSERT_EQ(model.rowCount(), static_cast<int>(original.decisions.size()));
  QStringList rejected;
  int changes = 0;
  QObject::connect(&model, &DecisionsModel::edit_rejected,
                   [&rejected](const QString& reason) { rejected << reason; });
  QObject::connect(&model, &DecisionsModel::schedule_changed, [&changes] { ++changes; });

  // A parse error: the parser's column.
  EXPECT_FALSE(model.setData(model.index(1, DecisionsModel::Decision),
                             QStringLiteral("tile(O_sum_acc, m=128"), Qt::EditRole));
  ASSERT_EQ(rejected.size(), 1);
  EXPECT_TRUE(rejected.back().contains(QStringLiteral("column"))) << rejected.back().toStdString();
  EXPECT_EQ(model.schedule().decisions, original.decisions);
  // A decision that parses but does not apply: the compiler's reason.
  EXPECT_FALSE(model.replace(1, QStringLiteral("tile(O_sum_acc, q=4)")));
  ASSERT_EQ(rejected.size(), 2);
  EXPECT_TRUE(rejected.back().contains(QStringLiteral("q"))) << rejected.back().toStdString();
  EXPECT_EQ(model.last_error(), rejected.back());
  EXPECT_EQ(model.schedule().decisions, original.decisions);
  EXPECT_EQ(changes, 0);

  // A valid edit applies, and a move that breaks the order is refused.
  ASSERT_TRUE(model.replace(1, QStringLiteral("tile(O_sum_acc, m=64)"))) << model.last_error().toStdString();
  EXPECT_EQ(sched::print_decision(model.schedule().decisions[1]), "tile(O_sum_acc, m=64)");
  EXPECT_TRUE(model.last_error().isEmpty());
  EXPECT_EQ(changes, 1);
  EXPECT_FALSE(model.move(0, 5)) << "rolling_update must come before the decisions that use O_sum_acc";
  model.set_pinned(2, true);
  EXPECT_EQ(model.data(model.index(2, DecisionsModel::Pin), Qt::CheckStateRole).toInt(), Qt::Checked);
  // Removing the last decision is always valid; pins follow their rows.
  ASSERT_TRUE(model.remove(model.rowCount() - 1)) << model.last_error().toStdString();
  EXPECT_FALSE(model.insert(0, QStringLiteral("launch(O_sum_acc, warps=4)")))
      << "O_sum_acc does not exist before rolling_update";
  ASSERT_TRUE(model.insert(model.rowCount(), QStringLiteral("launch(O_sum_acc, warps=4)")))
      << model.last_error().toStdString();
  ASSERT_EQ(model.rowCount(), 6);
  EXPECT_TRUE(model.pins()[2]);
  EXPECT_FALSE(model.pins()[5]);
  // The new row moves up past bind (valid), carrying its pin state.
  model.set_pinned(5, true);
  ASSERT_TRUE(model.move(5, 4)) << model.last_error().toStdString();
  EXPECT_TRUE(model.pins()[4]);
  EXPECT_EQ(model.schedule().decisions[4].kind, "launch");
  EXPECT_EQ(check.failures_so_far(), 0);
}

TEST(DecisionsModel, AnAsynchronousValidatorChecksOnAWorkerAndAnswersLater) {
  DecisionsModel model;
  ModelCheck check(&model);
  const std::string spec_text = read_asset("assets/specs/attention.nt");
  TaskRunner worker;
  std::thread::id checked_on;
  int checks = 0;
  // What the window installs: the schedule applied to the spec on a worker.
  model.set_async_validator([&](const sched::Schedule& schedule, DecisionsModel::ValidationDone done) {
    ++checks;
    PipelineInputs inputs;
    inputs.path = "attention.nt";
    inputs.text = spec_text;
    inputs.schedule = schedule;
    inputs.last_stage = driver::Stage::VRTile;
    worker.post([&checked_on, inputs, done]() -> TaskRunner::Continuation {
      checked_on = std::this_thread::get_id();
      const std::string reason = run_pipeline(inputs).compilation->schedule_error;
      return [done, reason] { done(reason); };
    });
  });
  const sched::Schedule original = asset_schedule("attention");
  model.set_schedule(original);
  QStringList rejected;
  int changes = 0;
  QObject::connect(&model, &DecisionsModel::edit_rejected,
                   [&rejected](const QString& reason) { rejected << reason; });
  QObject::connect(&model, &DecisionsModel::schedule_changed, [&changes] { ++changes; });

  // A parse error is refused at once; the worker never sees it.
  EXPECT_FALSE(model.replace(1, QStringLiteral("tile(O_sum_acc, m=128")));
  EXPECT_EQ(checks, 0);
  EXPECT_FALSE(model.validating());
  // A valid edit waits for the answer; meanwhile the schedule is unchanged and other edits wait.
  ASSERT_TRUE(model.replace(1, QStringLiteral("tile(O_sum_acc, m=64)")));
  EXPECT_TRUE(model.validating());
  EXPECT_EQ(model.schedule().decisions, original.decisions);
  EXPECT_FALSE(model.remove(0));
  EXPECT_TRUE(rejected.back().contains(QStringLiteral("still being checked"))) << rejected.back().toStdString();
  ASSERT_TRUE(wait_until([&] { return !model.validating(); }, 30'000));
  EXPECT_NE(checked_on, std::this_thread::get_id()) << "the schedule was checked on the UI thread";
  EXPECT_EQ(sched::print_decision(model.schedule().decisions[1]), "tile(O_sum_acc, m=64)");
  EXPECT_EQ(changes, 1);
  // A decision that does not apply is refused when the answer arrives, with the compiler's reason.
  const sched::Schedule edited = model.schedule();
  ASSERT_TRUE(model.replace(1, QStringLiteral("tile(O_sum_acc, q=4)")));
  ASSERT_TRUE(wait_until([&] { return !model.validating(); }, 30'000));
  EXPECT_TRUE(rejected.back().contains(QStringLiteral("q"))) << rejected.back().toStdString();
  EXPECT_EQ(model.last_error(), rejected.back());
  EXPECT_EQ(model.schedule().decisions, edited.decisions);
  EXPECT_EQ(changes, 1);
  // A schedule loaded while a check runs drops its answer.
  ASSERT_TRUE(model.remove(model.rowCount() - 1));
  model.set_schedule(original);
  EXPECT_FALSE(model.validating());
  ASSERT_TRUE(wait_until([&] { return !worker.busy(); }, 30'000));
  EXPECT_EQ(model.schedule().decisions, original.decisions);
  EXPECT_EQ(check.failures_so_far(), 0);
}

TEST(DecisionsPanel, ShowsTheRefusalReasonInThePanel) {
  DecisionsPanel panel;
  panel.model()->set_schedule(asset_schedule("attention"));
  panel.show();
  panel.new_decision_edit()->setText(QStringLiteral("tile(O, m=)"));
  EXPECT_FALSE(panel.add_from_field());
  EXPECT_TRUE(panel.error_label()->isVisible());
  EXPECT_TRUE(panel.error_label()->text().contains(QStringLiteral("column")))
      << panel.error_label()->text().toStdString();
  EXPECT_EQ(panel.model()->rowCount(), 6);
}

TEST(RunHistoryModel, PassesTheModelTesterAndRoundTripsRecords) {
  RunHistoryModel model;
  ModelCheck check(&model);
  profiler::RunResult no_gpu;
  no_gpu.status = profiler::RunStatus::NoGpu;
  no_gpu.message = "cannot load libcuda.so.1";
  model.append(record_from_result(no_gpu, "tile(O, m=64)"));
  profiler::RunResult ok;
  ok.status = profiler::RunStatus::Ok;
  ok.report = nlohmann::json::parse(R"({
    "device": {"name": "NVIDIA H100", "compute_capability": "9.0", "sm_count": 132,
               "sm_clock_khz": 1830000, "peak_memory_bandwidth_bytes_per_s": 3.35e12},
    "timing": {"kernels": [{"name": "attention_O", "median_us": 41.5, "tflops": 26.0}],
               "total": {"median_us": 41.5, "flops": 1.07e9, "tflops": 25.8, "bytes": 2.0e7, "gbps": 481.9}}})");
  model.append(record_from_result(ok, ""));
  ASSERT_EQ(model.rowCount(), 2);
  EXPECT_EQ(model.data(model.index(0, RunHistoryModel::Status)).toString(), QStringLiteral("no_gpu"));
  EXPECT_EQ(model.data(model.index(1, RunHistoryModel::TotalUs)).toString(), QStringLiteral("41.5"));
  EXPECT_EQ(model.data(model.index(1, RunHistoryModel::Schedule)).toString(),
            QStringLiteral("(unscheduled)"));
  const RunRecord& record = model.records()[1];
  ASSERT_TRUE(record.peak_flops_per_s);
  EXPECT_NEAR(*record.peak_flops_per_s, 132 * 1.83e9 * 4096, 1e9);  // ≈ 989 TFLOP/s
  const RunRecord back = run_record_from_json(run_record_to_json(record));
  EXPECT_EQ(back.kernels.size(), 1u);
  EXPECT_EQ(back.kernels[0].name, "attention_O");
  EXPECT_EQ(back.total_median_us, record.total_median_us);
  EXPECT_EQ(back.bytes, record.bytes);
  model.clear();
  EXPECT_EQ(model.rowCount(), 0);
  EXPECT_EQ(check.failures_so_far(), 0);
}

TEST(GraphLayout, LaysOutOffTheUiThreadWithOneItemPerDotNode) {
  auto compilation = compile_attention();
  ASSERT_TRUE(compilation);
  const driver::Snapshot* scalar = compilation->final_snapshot(driver::Stage::Scalar);
  ASSERT_NE(scalar, nullptr);
  const std::string dot = driver::render(*scalar, driver::RenderFormat::Dot);
  const int dot_nodes = count_dot_nodes(dot);
  ASSERT_GT(dot_nodes, 5);

  GraphLayouter layouter;
  GraphLayoutPtr delivered;
  QObject::connect(&layouter, &GraphLayouter::laid_out,
                   [&delivered](const QString&, GraphLayoutPtr layout) { delivered = layout; });
  layouter.request(QStringLiteral("scalar"), dot);
  EXPECT_TRUE(layouter.busy());
  ASSERT_TRUE(wait_until([&] { return delivered != nullptr; }));
  EXPECT_NE(delivered->thread, std::this_thread::get_id()) << "the layout ran on the UI thread";
  EXPECT_EQ(delivered->nodes.size(), dot_nodes);
  EXPECT_FALSE(delivered->edges.isEmpty());
  EXPECT_FALSE(delivered->clusters.isEmpty()) << "each loop nest is a cluster";

  GraphView view;
  view.set_layout(delivered);
  EXPECT_EQ(view.node_count(), dot_nodes);
  // Find and select: the block of statement S, then its provenance is highlighted.
  EXPECT_TRUE(view.find_next(QStringLiteral("block:S")));
  EXPECT_EQ(view.selected_node(), QStringLiteral("block:S"));
  EXPECT_FALSE(view.find_next(QStringLiteral("no such node anywhere")));
  const double zoom = view.zoom();
  view.zoom_by(2.0);
  EXPECT_NEAR(view.zoom(), zoom * 2.0, 1e-9);

  // A cached layout is delivered again without a worker run; a broken DOT gives a reason.
  delivered.reset();
  layouter.request(QStringLiteral("scalar"), std::string());
  ASSERT_TRUE(wait_until([&] { return delivered != nullptr; }));
  QString failure;
  QObject::connect(&layouter, &GraphLayouter::failed,
                   [&failure](const QString&, const QString& reason) { failure = reason; });
  layouter.request(QStringLiteral("broken"), "digraph { \"a\" -> ");
  ASSERT_TRUE(wait_until([&] { return !failure.isEmpty(); }));
  EXPECT_TRUE(failure.contains(QStringLiteral("Graphviz")));
}

TEST(SnapshotText, NodeOriginsCoverTheGraphsOfEveryStage) {
  auto compilation = compile_attention();
  ASSERT_TRUE(compilation);
  for (driver::Stage stage : {driver::Stage::Spec, driver::Stage::Scalar, driver::Stage::VRTile,
                              driver::Stage::MATile}) {
    const driver::Snapshot* snapshot = compilation->final_snapshot(stage);
    ASSERT_NE(snapshot, nullptr);
    const NodeOrigins origins = node_origins(*snapshot);
    std::string error;
    GraphLayoutPtr layout = layout_dot(driver::render(*snapshot, driver::RenderFormat::Dot), &error);
    ASSERT_TRUE(layout) << error;
    // Every statement node or op node has a known origin (grid/loop values take their loop's).
    int known = 0;
    for (const LayoutNode& node : layout->nodes) {
      if (origins.count(node.id.toStdString()) && origins.at(node.id.toStdString()).statement >= 0) ++known;
    }
    EXPECT_GT(known, layout->nodes.size() / 2) << driver::stage_name(stage);
  }
}

TEST(SnapshotText, CudaProvenanceComments) {
  EXPECT_EQ(cuda_spec_line("  // spec attention.nt:11  Mx[b, h, m]   = max(n) S[b, h, m, n]"), 11);
  EXPECT_EQ(cuda_spec_line("  float x = 1;  // not a spec comment"), 0);
  EXPECT_EQ(cuda_ma_value("    // %acc1 = mma.m16n8k16 %a, %b"), "acc1");
  EXPECT_EQ(cuda_ma_value("    acc1[0] = 0;"), "");
}

TEST(Session, SaveThenOpenRoundTrips) {
  QTemporaryDir directory;
  ASSERT_TRUE(directory.isValid());
  Session session;
  session.spec_path = "/somewhere/attention.nt";
  session.spec_name = "attention.nt";
  session.spec_text = read_asset("assets/specs/attention.nt");
  session.sizes = {{"M", 256}, {"N", 512}};
  session.schedule = asset_schedule("attention");
  session.pins = {true, false, false, true, false, false};
  session.runner_command = "ssh gpuhost 'nautilus-runner'";
  session.arch = "sm_90a";
  profiler::RunResult no_gpu;
  no_gpu.status = profiler::RunStatus::NoGpu;
  no_gpu.message = "no driver";
  session.runs.push_back(record_from_result(no_gpu, "tile(O, m=64)"));
  const QString path = directory.filePath(QStringLiteral("s.json"));
  QString error;
  ASSERT_TRUE(save_session(path, session, &error)) << error.toStdString();
  Session loaded;
  ASSERT_TRUE(load_session(path, &loaded, &error)) << error.toStdString();
  EXPECT_EQ(loaded.spec_path, session.spec_path);
  EXPECT_EQ(loaded.spec_text, session.spec_text);
  EXPECT_EQ(loaded.sizes, session.sizes);
  EXPECT_EQ(loaded.schedule.decisions, session.schedule.decisions);
  EXPECT_EQ(loaded.pins, session.pins);
  EXPECT_EQ(loaded.runner_command, session.runner_command);
  EXPECT_EQ(loaded.arch, "sm_90a");
  ASSERT_EQ(loaded.runs.size(), 1u);
  EXPECT_EQ(loaded.runs[0].status, "no_gpu");
  EXPECT_EQ(session_to_json(loaded), session_to_json(session));

  // Not a session, and a session whose schedule does not parse: clear reasons.
  Session untouched;
  EXPECT_FALSE(session_from_json(nlohmann::json{{"format", "other"}}, &untouched, nullptr));
  nlohmann::json broken = session_to_json(session);
  broken["schedule"]["decisions"][0] = "tile(O, m=";
  std::string reason;
  EXPECT_FALSE(session_from_json(broken, &untouched, &reason));
  EXPECT_NE(reason.find("schedule"), std::string::npos) << reason;
  EXPECT_FALSE(load_session(directory.filePath(QStringLiteral("missing.json")), &untouched, &error));
  // Sessions saved before the target was kept compile for sm_80; an unknown target is refused.
  nlohmann::json older = session_to_json(session);
  older.erase("arch");
  Session old_session;
  ASSERT_TRUE(session_from_json(older, &old_session, &reason)) << reason;
  EXPECT_EQ(old_session.arch, "sm_80");
  nlohmann::json unknown = session_to_json(session);
  unknown["arch"] = "sm_70";
  EXPECT_FALSE(session_from_json(unknown, &untouched, &reason));
  EXPECT_NE(reason.find("arch"), std::string::npos) << reason;
}

TEST(ProfilerPanel, SaysNoGpuHereAndRunsReportIt) {
  if (profiler::query_devices().has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  ProfilerPanel panel;
  ASSERT_TRUE(wait_until([&] { return panel.device_known(); }));
  EXPECT_TRUE(panel.device_text().startsWith(QStringLiteral("no GPU: "))) << panel.device_text().toStdString();
  EXPECT_FALSE(panel.run()) << "nothing compiled yet";

  // A small GEMM compiled to MA tile IR: the panel builds both packages and runs the runner,
  // which reports no_gpu.
  PipelineInputs inputs;
  inputs.path = "gemm.nt";
  inputs.text = read_asset("assets/specs/gemm.nt");
  inputs.schedule = asset_schedule("gemm");
  inputs.sizes = {{"M", 128}, {"N", 128}, {"K", 64}};
  PipelineResult result = run_pipeline(inputs);
  ASSERT_TRUE(result.compilation && result.compilation->ok()) << result.compilation->schedule_error;
  panel.set_compilation(result.compilation, inputs);
  // The cost model's estimate arrives from the panel's worker and goes on the roofline.
  ASSERT_TRUE(wait_until([&] { return panel.estimate().has_value(); }));
  EXPECT_TRUE(panel.estimate()->feasible) << panel.estimate()->infeasible_reason;
  EXPECT_TRUE(panel.estimate_label()->text().contains(QStringLiteral("predicted")));
  ASSERT_FALSE(panel.roofline()->points().empty());
  EXPECT_TRUE(panel.roofline()->points().front().estimate);
  EXPECT_GT(panel.roofline()->points().front().flops_per_s, 0);
  QString status;
  QObject::connect(&panel, &ProfilerPanel::run_finished, [&status](const QString& s) { status = s; });
  ASSERT_TRUE(panel.run());
  ASSERT_TRUE(wait_until([&] { return !status.isEmpty(); }, 60'000));
  EXPECT_EQ(status, QStringLiteral("no_gpu")) << panel.status_label()->text().toStdString();
  EXPECT_TRUE(panel.status_label()->text().startsWith(QStringLiteral("no GPU: ")));
  ASSERT_EQ(panel.history()->rowCount(), 1);
  EXPECT_EQ(panel.history()->records()[0].schedule.find("tile"), 0u);
}

// The chosen schedule is register-checked and completed by the pipeline solver on the search's
// worker, as `nautilus schedule` does: the GEMM's warp-specialized kernel gets its pipeline
// decision and the status line names it; both unchecked, the search's schedule is handed over
// as it is.
TEST(SearchPanel, ThePipelineSolverCompletesTheChosenSchedule) {
  SearchPanel panel;
  panel.set_spec("gemm.nt", read_asset("assets/specs/gemm.nt"), {{"M", 512}, {"N", 512}, {"K", 512}});
  std::vector<sched::Schedule> found;
  QObject::connect(&panel, &SearchPanel::schedule_found,
                   [&found](const sched::Schedule& schedule) { found.push_back(schedule); });
  const auto pipeline_decisions = [](const sched::Schedule& schedule) {
    return std::count_if(schedule.decisions.begin(), schedule.decisions.end(),
                         [](const sched::Decision& d) { return d.kind == "pipeline"; });
  };
  ASSERT_TRUE(panel.pipeline_solver_box()->isChecked());
  ASSERT_TRUE(panel.start());
  ASSERT_TRUE(wait_until([&] { return found.size() == 1; }, 120'000));
  EXPECT_EQ(pipeline_decisions(found[0]), 1);
  EXPECT_NE(panel.pipeline_summary().find("pipeline: kernel C"), std::string::npos) << panel.pipeline_summary();
  EXPECT_TRUE(panel.progress_label()->text().contains(QStringLiteral("solver: pipeline(C_sum, stages=")))
      << panel.progress_label()->text().toStdString();
  // The register check compiled the pick first (NVRTC on the CPU; it says so where NVRTC is
  // missing).
  ASSERT_TRUE(panel.register_check_box()->isChecked());
  EXPECT_EQ(panel.pipeline_summary().find("register check: "), 0u) << panel.pipeline_summary();

  panel.pipeline_solver_box()->setChecked(false);
  panel.register_check_box()->setChecked(false);
  ASSERT_TRUE(panel.start());
  ASSERT_TRUE(wait_until([&] { return found.size() == 2; }, 120'000));
  EXPECT_EQ(pipeline_decisions(found[1]), 0);
  EXPECT_TRUE(panel.pipeline_summary().empty());
}

TEST(SearchPanel, SearchesShowsTheTreeAndReRunsWithPinsAndForbids) {
  SearchPanel panel;
  ModelCheck check(panel.model());
  panel.set_beam(1);
  EXPECT_FALSE(panel.start()) << "no spec yet";
  panel.set_spec("rmsnorm.nt", read_asset("assets/specs/rmsnorm.nt"), {});
  int finished = 0;
  bool last_ok = false;
  std::vector<sched::Schedule> found;
  QObject::connect(&panel, &SearchPanel::finished, [&](bool ok) {
    ++finished;
    last_ok = ok;
  });
  QObject::connect(&panel, &SearchPanel::schedule_found,
                   [&found](const sched::Schedule& schedule) { found.push_back(schedule); });
  // The tree grows while the search runs: rows arrive before the result does.
  int rows_inserted_before_result = 0;
  QObject::connect(panel.model(), &QAbstractItemModel::rowsInserted, [&] {
    if (panel.result().nodes.empty()) ++rows_inserted_before_result;  // no result yet
  });
  ASSERT_TRUE(panel.start());
  ASSERT_TRUE(wait_until([&] { return finished == 1; }, 60'000));
  ASSERT_TRUE(last_ok) << panel.progress_label()->text().toStdString();
  EXPECT_GE(panel.tree_updates(), 2) << "live trees before the result";
  EXPECT_GT(rows_inserted_before_result, 1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].decisions.empty());
  SearchTreeModel* model = panel.model();
  ASSERT_EQ(model->rowCount(), 1) << "one root";
  EXPECT_EQ(model->data(model->index(0, SearchTreeModel::Decision)).toString(), QStringLiteral("(root)"));
  EXPECT_EQ(static_cast<int>(model->nodes().size()), panel.result().stats.nodes);
  const QString tree = print_tree(*model, {SearchTreeModel::Estimate, SearchTreeModel::Measured,
                                           SearchTreeModel::Reason});
  EXPECT_TRUE(tree.contains(QStringLiteral("| chosen |"))) << tree.toStdString();
  EXPECT_TRUE(tree.contains(QStringLiteral("| pruned |"))) << tree.toStdString();
  // Every node of the tree is a row (depth-first walk of the model).
  EXPECT_EQ(tree.count(QLatin1Char('\n')), static_cast<int>(model->nodes().size()));

  // Forbid the chosen path's first decision: the search runs again and avoids it.
  const int chosen = model->chosen();
  int first = chosen;
  while (first >= 0 && model->nodes()[static_cast<size_t>(first)].parent > 0) {
    first = model->nodes()[static_cast<size_t>(first)].parent;
  }
  ASSERT_GT(first, 0);
  const sched::Decision forbidden = *model->nodes()[static_cast<size_t>(first)].decision;
  panel.forbid(first);
  ASSERT_EQ(panel.forbids().size(), 1u);
  ASSERT_TRUE(wait_until([&] { return finished == 2; }, 60'000));
  for (const search::SearchNode& node : model->nodes()) {
    if (node.decision) {
      EXPECT_FALSE(*node.decision == forbidden) << "a forbidden decision was tried";
    }
  }
  // Pin a path: the result keeps the pinned decisions.
  panel.clear_constraints();
  int pinned_node = -1;
  for (const search::SearchNode& node : model->nodes()) {
    if (node.decision && node.status != search::NodeStatus::Pruned) pinned_node = node.id;
  }
  ASSERT_GE(pinned_node, 0);
  const sched::Schedule pinned = model->nodes()[static_cast<size_t>(pinned_node)].schedule;
  panel.pin_path(pinned_node);
  ASSERT_TRUE(wait_until([&] { return finished == 3; }, 60'000));
  if (last_ok) {
    for (const sched::Decision& decision : pinned.decisions) {
      EXPECT_NE(std::find(found.back().decisions.begin(), found.back().decisions.end(), decision),
                found.back().decisions.end())
          << sched::print_decision(decision);
    }
  }
  // Cancel stops a search at once.
  ASSERT_TRUE(panel.start());
  panel.cancel();
  ASSERT_TRUE(wait_until([&] { return finished == 4; }, 60'000));
  EXPECT_FALSE(panel.running());
  EXPECT_EQ(check.failures_so_far(), 0);
}

TEST(ComparePanel, ShowsDecisionIrAndKernelDifferencesOfTwoSchedules) {
  ComparePanel panel;
  PipelineInputs inputs;
  inputs.path = "softmax.nt";
  inputs.text = read_asset("assets/specs/softmax.nt");
  panel.set_spec(inputs);
  int compared = 0;
  QObject::connect(&panel, &ComparePanel::compared, [&compared] { ++compared; });
  const sched::Schedule scheduled = asset_schedule("softmax");
  panel.set_slot(ComparePanel::A, scheduled, QStringLiteral("the asset's schedule"));
  panel.set_slot(ComparePanel::B, {}, QStringLiteral("unscheduled"),
                 {KernelTiming{"softmax_Y", 12.5, std::nullopt, std::nullopt}});
  ASSERT_TRUE(wait_until([&] { return compared > 0 && !panel.busy(); }));
  const QString decisions = panel.decisions_diff()->toPlainText();
  // Every decision of A is a removed line of the A → B diff.
  for (const sched::Decision& decision : scheduled.decisions) {
    EXPECT_TRUE(decisions.contains(QStringLiteral("-") + QString::fromStdString(sched::print_decision(decision))))
        << decisions.toStdString();
  }
  EXPECT_TRUE(panel.stage_diff()->toPlainText().startsWith(QStringLiteral("--- A matile")))
      << panel.stage_diff()->toPlainText().toStdString();
  ASSERT_GE(panel.kernels()->rowCount(), 2) << "the fused kernel and the unscheduled kernels";
  bool measured_shown = false;
  for (int row = 0; row < panel.kernels()->rowCount(); ++row) {
    if (panel.kernels()->item(row, 6)->text() == QStringLiteral("12.5")) measured_shown = true;
  }
  EXPECT_TRUE(measured_shown);
  // The same schedule on both sides: no difference at any level.
  compared = 0;
  panel.set_slot(ComparePanel::B, scheduled, QStringLiteral("same"));
  ASSERT_TRUE(wait_until([&] { return compared > 0 && !panel.busy(); }));
  EXPECT_TRUE(panel.decisions_diff()->toPlainText().contains(QStringLiteral("same decisions")));
  EXPECT_TRUE(panel.stage_diff()->toPlainText().contains(QStringLiteral("identical")));
}

// The number of distinct colours of an image (sampled on a grid).
int distinct_colors(const QImage& image) {
  QSet<QRgb> colors;
  for (int y = 0; y < image.height(); y += 2) {
    for (int x = 0; x < image.width(); x += 2) colors.insert(image.pixel(x, y));
  }
  return colors.size();
}

// Pipeline > Target: the auto-scheduler's H100 schedule (warp_spec) lowers to the warp-specialized
// Hopper kernel only for sm_90a; the target recompiles, is kept in sessions and checks its menu
// entry.
TEST(StudioWindow, TargetSm90aCompilesTheWarpSpecializedKernel) {
  QTemporaryDir directory;
  ASSERT_TRUE(directory.isValid());
  const QString schedule = directory.filePath(QStringLiteral("attention_h100.json"));
  {
    QFile file(schedule);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    file.write(R"json({"decisions": ["rolling_update(O_sum, n, tile=128)", "compute_at(S, Mx, n_o)",
      "tile(O_sum_acc, m=128)", "reverse_compute_at(O, O_sum, m_o)",
      "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)", "warp_spec(O_sum_acc, consumers=2, stages=2)"]})json");
  }
  MainWindow window;
  window.resize(1400, 900);
  window.show();
  QString error;
  ASSERT_TRUE(window.open_example(
      QString::fromStdString(nautilus::testing::source_path("assets/specs/attention.nt")), &error))
      << error.toStdString();
  ASSERT_TRUE(window.load_schedule(schedule, &error)) << error.toStdString();
  auto has_roles = [&] {
    const auto& compilation = window.compilation();
    if (!compilation || !compilation->ma_module || compilation->ma_module->kernels.empty()) return false;
    const matile::Kernel& kernel = *compilation->ma_module->kernels[0];
    return std::any_of(kernel.body->ops.begin(), kernel.body->ops.end(),
                       [](const matile::OpPtr& op) { return op->kind == matile::OpKind::Roles; });
  };
  auto compiled_for = [&](const std::string& arch) {
    return !window.pipeline()->running() && window.compilation() && window.compilation()->ma_module &&
           window.compilation()->ma_module->arch == arch;
  };
  ASSERT_TRUE(wait_until([&] { return compiled_for("sm_80"); }));
  EXPECT_FALSE(has_roles()) << "sm_80 keeps the cp.async kernel";
  EXPECT_EQ(window.target_arch(), "sm_80");

  window.set_target_arch("sm_90a");
  ASSERT_TRUE(wait_until([&] { return compiled_for("sm_90a"); }, 60'000)) << window.status_label()->text().toStdString();
  EXPECT_TRUE(has_roles()) << "a TMA producer and wgmma consumers";
  auto* checked = window.findChild<QAction*>(QStringLiteral("target_sm_90a"));
  ASSERT_NE(checked, nullptr);
  EXPECT_TRUE(checked->isChecked());
  EXPECT_FALSE(window.findChild<QAction*>(QStringLiteral("target_sm_80"))->isChecked());
  EXPECT_EQ(window.current_session().arch, "sm_90a");
}

TEST(StudioWindow, OpensAttentionWalksTheStagesAndLinksProvenance) {
  MainWindow window;
  window.resize(1600, 1000);
  window.show();
  int finished = 0;
  QObject::connect(&window, &MainWindow::pipeline_finished, [&finished](bool ok) {
    if (ok) ++finished;
  });
  QString error;
  ASSERT_TRUE(window.open_example(
      QString::fromStdString(nautilus::testing::source_path("assets/specs/attention.nt")), &error))
      << error.toStdString();
  ASSERT_TRUE(wait_until([&] { return finished > 0 && !window.pipeline()->running(); }))
      << window.status_label()->text().toStdString();
  EXPECT_EQ(window.decisions_panel()->model()->rowCount(), 6) << "the example's schedule";
  ASSERT_TRUE(window.compilation());
  ASSERT_TRUE(window.compilation()->cuda);
  EXPECT_TRUE(window.status_label()->text().startsWith(QStringLiteral("compiled"))) << window.status_label()->text().toStdString();

  // Every stage has text; every stage but cuda a graph laid out on the worker.
  StageView* stages = window.stage_view();
  stages->show_tab(StageView::GraphTab);
  for (driver::Stage stage : driver::all_stages()) {
    ASSERT_TRUE(stages->select_stage(stage)) << driver::stage_name(stage);
    EXPECT_FALSE(stages->text_view()->toPlainText().isEmpty()) << driver::stage_name(stage);
    if (stage == driver::Stage::Cuda || stage == driver::Stage::MATile) continue;
    ASSERT_TRUE(wait_until([&] { return !stages->graph_pending(); })) << driver::stage_name(stage);
    EXPECT_EQ(stages->graph_view()->node_count(), count_dot_nodes(stages->current_dot()));
  }
  EXPECT_TRUE(stages->text_view()->toPlainText().contains(QStringLiteral("__global__")));

  // Next/previous pass, and the diff of a decision.
  ASSERT_TRUE(stages->select_stage(driver::Stage::Scalar));
  const int before = stages->current_snapshot();
  stages->next_pass();
  EXPECT_EQ(stages->current_snapshot(), before + 1);
  stages->previous_pass();
  EXPECT_EQ(stages->current_snapshot(), before);
  stages->select_snapshot(2);  // rolling_update(O_sum, n, tile=64)
  EXPECT_TRUE(stages->diff_view()->toPlainText().startsWith(QStringLiteral("--- before")));
  // Teaching mode follows: the pass's description and what it did to the cost estimate (the
  // fused online softmax is far cheaper than the unfused program it replaces).
  TeachingPanel* teaching = window.teaching_panel();
  EXPECT_TRUE(teaching->explanation()->toPlainText().contains(QStringLiteral("online softmax")));
  EXPECT_EQ(teaching->diff()->toPlainText(), stages->diff_view()->toPlainText());
  ASSERT_TRUE(wait_until([&] { return !teaching->estimating(); }, 30'000));
  const QString estimate = teaching->estimate_label()->text();
  const QRegularExpression numbers(QStringLiteral("default\\): ([0-9.]+) µs · before this pass: ([0-9.]+) µs"));
  const QRegularExpressionMatch match = numbers.match(estimate);
  ASSERT_TRUE(match.hasMatch()) << estimate.toStdString();
  EXPECT_LT(match.captured(1).toDouble(), match.captured(2).toDouble()) << estimate.toStdString();

  // Provenance: select the block of statement S in the scalar graph.
  ASSERT_TRUE(stages->select_stage(driver::Stage::Scalar));
  ASSERT_TRUE(wait_until([&] { return !stages->graph_pending(); }));
  ASSERT_TRUE(stages->graph_view()->select_node(QStringLiteral("block:S")));
  const QList<QTextEdit::ExtraSelection> marks = window.editor()->extraSelections();
  ASSERT_FALSE(marks.isEmpty()) << "the spec range of S is not marked";
  EXPECT_TRUE(marks.front().cursor.selectedText().startsWith(QStringLiteral("S[b, h, m, n]")))
      << marks.front().cursor.selectedText().toStdString();
  EXPECT_FALSE(stages->graph_view()->highlighted().isEmpty());
  // Statement S (spec line 10) has sections in the CUDA source.
  EXPECT_GT(window.cuda_view()->show_spec_line(10), 0);
  // An MA op node leads to its own CUDA lines (the emitter's comment quotes the op's text).
  ASSERT_TRUE(stages->select_stage(driver::Stage::MATile));
  ASSERT_TRUE(wait_until([&] { return !stages->graph_pending(); }, 30'000));
  QString mma_node;
  for (const LayoutNode& node : stages->graph_view()->graph_layout()->nodes) {
    if (node.label.contains(QStringLiteral(" = mma."))) mma_node = node.id;
  }
  ASSERT_FALSE(mma_node.isEmpty()) << "the attention kernel has mma ops";
  ASSERT_TRUE(stages->graph_view()->select_node(mma_node));
  const QList<QTextEdit::ExtraSelection> cuda_marks = window.cuda_view()->source_view()->extraSelections();
  ASSERT_GE(cuda_marks.size(), 2);
  EXPECT_TRUE(cuda_marks.front().cursor.block().text().contains(QStringLiteral("// %")))
      << cuda_marks.front().cursor.block().text().toStdString();
  EXPECT_TRUE(cuda_marks.front().cursor.block().text().contains(QStringLiteral("mma.")));

  // Sizes: an override recompiles with the new value.
  finished = 0;
  QSpinBox* m = window.shape_panel()->spin_box(QStringLiteral("M"));
  ASSERT_NE(m, nullptr);
  m->setValue(1024);
  ASSERT_TRUE(wait_until([&] { return finished > 0 && !window.pipeline()->running(); }));
  EXPECT_EQ(window.compilation()->spec->sizes[2], (std::pair<std::string, int64_t>("M", 1024)));

  // Themes and the screenshot: a real picture, not a blank window.
  window.set_theme(Theme::Dark);
  window.set_theme(Theme::Light);
  const QImage image = window.grab().toImage();
  EXPECT_GE(image.width(), 1200);
  EXPECT_GE(image.height(), 800);
  EXPECT_GT(distinct_colors(image), 60);
}

TEST(StudioWindow, SearchPinsADecisionAndTheTreeChanges) {
  MainWindow window;
  window.show();
  int compiled = 0;
  QObject::connect(&window, &MainWindow::pipeline_finished, [&compiled](bool ok) {
    if (ok) ++compiled;
  });
  QString error;
  ASSERT_TRUE(window.open_example(
      QString::fromStdString(nautilus::testing::source_path("assets/specs/rmsnorm.nt")), &error));
  ASSERT_TRUE(wait_until([&] { return compiled > 0 && !window.pipeline()->running(); }));
  SearchPanel* search = window.search_panel();
  search->set_beam(1);
  int searched = 0;
  QObject::connect(search, &SearchPanel::finished, [&searched] { ++searched; });
  window.decisions_panel()->model()->set_schedule({});
  ASSERT_TRUE(search->start());
  ASSERT_TRUE(wait_until([&] { return searched == 1; }, 60'000));
  // The chosen schedule became the current one and compiled.
  ASSERT_TRUE(wait_until([&] { return !window.pipeline()->running() && compiled > 1; }));
  const sched::Schedule chosen = window.decisions_panel()->model()->schedule();
  ASSERT_FALSE(chosen.decisions.empty());
  EXPECT_EQ(chosen.decisions, search->result().schedule.decisions);
  // Pin the first decision in the Decisions panel and search again: the root's child is the pin.
  window.decisions_panel()->model()->set_pinned(0, true);
  ASSERT_TRUE(search->start());
  ASSERT_TRUE(wait_until([&] { return searched == 2; }, 60'000));
  const auto& nodes = search->model()->nodes();
  ASSERT_GT(nodes.size(), 1u);
  ASSERT_EQ(nodes[0].children.size(), 1u) << "a pin is its parent's only child";
  const search::SearchNode& child = nodes[static_cast<size_t>(nodes[0].children[0])];
  EXPECT_TRUE(child.pinned);
  ASSERT_TRUE(child.decision.has_value());
  EXPECT_EQ(*child.decision, chosen.decisions[0]);
  EXPECT_TRUE(search->model()->data(search->model()->index_of(child.id).siblingAtColumn(SearchTreeModel::Status))
                  .toString().contains(QStringLiteral("pinned")));
}

TEST(StudioWindow, SessionsAndLayoutAreRestored) {
  QTemporaryDir directory;
  ASSERT_TRUE(directory.isValid());
  const QString session_path = directory.filePath(QStringLiteral("work.json"));
  {
    MainWindow window;
    int finished = 0;
    QObject::connect(&window, &MainWindow::pipeline_finished, [&finished] { ++finished; });
    QString error;
    ASSERT_TRUE(window.open_example(
        QString::fromStdString(nautilus::testing::source_path("assets/specs/softmax.nt")), &error));
    ASSERT_TRUE(wait_until([&] { return finished > 0 && !window.pipeline()->running(); }));
    window.decisions_panel()->model()->set_pinned(0, true);
    window.dock(QStringLiteral("teaching"))->hide();
    ASSERT_TRUE(window.save_session_to(session_path, &error)) << error.toStdString();
    window.close();  // saves the layout
  }
  MainWindow window;
  EXPECT_TRUE(window.dock(QStringLiteral("teaching"))->isHidden()) << "the layout was not restored";
  EXPECT_TRUE(window.recent_files().contains(session_path));
  QString error;
  int finished = 0;
  QObject::connect(&window, &MainWindow::pipeline_finished, [&finished] { ++finished; });
  ASSERT_TRUE(window.open_session(session_path, &error)) << error.toStdString();
  ASSERT_TRUE(wait_until([&] { return finished > 0 && !window.pipeline()->running(); }));
  EXPECT_EQ(window.document_name(), QStringLiteral("softmax.nt"));
  EXPECT_TRUE(window.editor()->toPlainText().contains(QStringLiteral("output")));
  ASSERT_FALSE(window.decisions_panel()->model()->pins().empty());
  EXPECT_TRUE(window.decisions_panel()->model()->pins()[0]);
  EXPECT_TRUE(window.compilation() && window.compilation()->ok());
  window.dock(QStringLiteral("teaching"))->show();
  // Export: the stage text and the graph.
  window.stage_view()->select_stage(driver::Stage::Scalar);
  EXPECT_TRUE(window.export_stage_text(directory.filePath(QStringLiteral("scalar.txt")), &error));
  window.stage_view()->show_tab(StageView::GraphTab);
  ASSERT_TRUE(wait_until([&] { return !window.stage_view()->graph_pending(); }));
  EXPECT_TRUE(window.export_graph(directory.filePath(QStringLiteral("g.svg")), &error)) << error.toStdString();
  EXPECT_TRUE(window.export_graph(directory.filePath(QStringLiteral("g.png")), &error)) << error.toStdString();
  EXPECT_FALSE(QImage(directory.filePath(QStringLiteral("g.png"))).isNull());
  window.close();
}

}  // namespace
}  // namespace nautilus::views
