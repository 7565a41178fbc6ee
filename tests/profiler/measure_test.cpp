// Measuring a schedule (profiler/measure.h) with a stand-in runner (a shell script that records
// its arguments and prints a report): the packages it builds, the reference built once per spec
// and sizes, and the build errors that stop it before the runner.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <fstream>
#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "core/codegen/package.h"
#include "profiler/local_executor.h"
#include "profiler/measure.h"
#include "tests/common/golden.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using testing::TempDir;
using testing::write_script;

const char* kReport =
    R"({"format": "nautilus-runner-report", "version": 1, "status": "ok", "timing": {"total": {"median_us": 7.5}}, "validation": {"status": "passed", "passed": true, "max_relative_error": 0.002}, "errors": []})";

// A runner that appends its arguments (one line per call) to DIR/calls.txt and reports ok.
ClientOptions recording_runner(const TempDir& dir) {
  ClientOptions client;
  client.command_template = write_script(
      dir, "runner.sh", "echo \"$*\" >> " + dir.file("calls.txt") + "\necho '" + kReport + "'");
  client.timeout_seconds = 60;
  return client;
}

std::vector<std::string> calls(const TempDir& dir) {
  std::ifstream in(dir.file("calls.txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

SourceFilePtr gemm() {
  std::string error;
  SourceFilePtr file =
      SourceFile::read(nautilus::testing::source_path("assets/specs/gemm.nt"), &error);
  EXPECT_TRUE(file) << error;
  return file;
}

sched::Schedule gemm_schedule() {
  std::string error;
  std::optional<sched::Schedule> schedule = sched::read_schedule_file(
      nautilus::testing::source_path("assets/schedules/gemm.json"), &error);
  EXPECT_TRUE(schedule) << error;
  return schedule.value_or(sched::Schedule{});
}

const std::vector<spec::SizeOverride> kSizes = {{"M", 64}, {"N", 64}, {"K", 64}};

TEST(ScheduleMeasurer, BuildsBothPackagesRunsThemAndReusesTheReference) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  TempDir runner_dir;
  TempDir packages;
  MeasureOptions options;
  options.client = recording_runner(runner_dir);
  options.run.repetitions = 5;
  options.directory = packages.path();
  ScheduleMeasurer measurer(options);
  EXPECT_EQ(measurer.directory(), packages.path());

  const Measurement first = measurer.measure(gemm(), kSizes, gemm_schedule());
  ASSERT_TRUE(first.built()) << first.build_error;
  EXPECT_TRUE(first.ok()) << first.run.message;
  EXPECT_DOUBLE_EQ(first.run.total_median_us.value_or(0), 7.5);
  EXPECT_EQ(first.package_dir, packages.file("package"));
  EXPECT_EQ(first.reference_dir, packages.file("reference"));
  for (const std::string& dir : {first.package_dir, first.reference_dir}) {
    const codegen::Result<codegen::KernelPackage> package = codegen::read_package(dir);
    ASSERT_TRUE(package) << dir << ": " << package.error().message;
    EXPECT_EQ(package->cubins.size(), 2u) << "sm_90a and sm_80";
  }
  // The reference is the unscheduled lowering: it has a kernel per loop nest, the schedule one.
  EXPECT_GT(codegen::read_package(first.reference_dir)->kernels.size(),
            codegen::read_package(first.package_dir)->kernels.size());

  // A second schedule of the same spec and sizes gets its own package and the same reference,
  // which is not rebuilt.
  const auto reference_time =
      std::filesystem::last_write_time(packages.file("reference/launch.json"));
  const Measurement second = measurer.measure(gemm(), kSizes, sched::Schedule{});
  ASSERT_TRUE(second.built()) << second.build_error;
  EXPECT_EQ(second.package_dir, packages.file("package-2"));
  EXPECT_EQ(second.reference_dir, first.reference_dir);
  EXPECT_EQ(std::filesystem::last_write_time(packages.file("reference/launch.json")),
            reference_time);

  const std::vector<std::string> runs = calls(runner_dir);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].rfind(first.package_dir + " --reference " + first.reference_dir, 0), 0u)
      << runs[0];
  EXPECT_NE(runs[0].find("--reps 5"), std::string::npos) << runs[0];
  EXPECT_EQ(runs[1].rfind(second.package_dir + " --reference " + first.reference_dir, 0), 0u)
      << runs[1];
}

TEST(ScheduleMeasurer, WithoutValidationNoReferenceIsBuiltOrPassed) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  TempDir runner_dir;
  MeasureOptions options;
  options.client = recording_runner(runner_dir);
  options.validate = false;
  std::string directory;
  {
    ScheduleMeasurer measurer(options);
    directory = measurer.directory();
    ASSERT_FALSE(directory.empty());
    const Measurement measured = measurer.measure(gemm(), kSizes, gemm_schedule());
    ASSERT_TRUE(measured.ok()) << measured.build_error << measured.run.message;
    EXPECT_TRUE(measured.reference_dir.empty());
    EXPECT_FALSE(std::filesystem::exists(directory + "/reference"));
    ASSERT_EQ(calls(runner_dir).size(), 1u);
    EXPECT_EQ(calls(runner_dir)[0].find("--reference"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(directory)) << "its temporary directory goes with it";
}

TEST(ScheduleMeasurer, AScheduleThatDoesNotApplyStopsBeforeTheRunner) {
  TempDir runner_dir;
  MeasureOptions options;
  options.client = recording_runner(runner_dir);
  ScheduleMeasurer measurer(options);
  sched::DecisionParseError error;
  sched::Schedule schedule;
  schedule.decisions.push_back(*sched::parse_decision("tile(C, q=4)", &error));
  const Measurement measured = measurer.measure(gemm(), kSizes, schedule);
  EXPECT_FALSE(measured.built());
  EXPECT_FALSE(measured.build_error_is_internal);
  EXPECT_NE(measured.build_error.find("does not apply"), std::string::npos) << measured.build_error;
  EXPECT_TRUE(calls(runner_dir).empty()) << "the runner must not start";
}

// The local executor asks the tuner's duplicate check with each built candidate's code hash
// before running it: a schedule whose code was claimed is reported as a duplicate and never
// reaches the runner, and of two equal kernels in one batch the earlier is the one run, however
// the build threads finish.
TEST(LocalExecutor, RunsEachGeneratedKernelOnceAndReportsTheRestAsDuplicates) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  TempDir runner_dir;
  search::SearchInput input;
  input.file = gemm();
  input.sizes = kSizes;
  LocalExecutorOptions options;
  options.runner_command = recording_runner(runner_dir).command_template;
  options.jobs = 4;
  LocalExecutor executor(input, options);
  std::mutex mutex;
  std::set<std::string> claimed;
  std::vector<std::string> asked;
  executor.skip_code_when([&](const std::string& code_hash) {
    const std::lock_guard<std::mutex> lock(mutex);
    asked.push_back(code_hash);
    return !claimed.insert(code_hash).second;
  });
  const std::vector<sched::Schedule> batch = {gemm_schedule(), sched::Schedule{}, gemm_schedule(),
                                              sched::Schedule{}};
  std::map<size_t, tune::CandidateOutcome> outcomes;
  executor.measure(batch, [&](size_t index, const tune::CandidateOutcome& outcome) {
    EXPECT_TRUE(outcomes.emplace(index, outcome).second) << "one outcome per candidate";
  });
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_EQ(asked.size(), 4u);
  for (size_t i : {0u, 1u}) {
    EXPECT_FALSE(outcomes[i].duplicate) << i;
    EXPECT_EQ(outcomes[i].status, "ok") << i << ": " << outcomes[i].message;
  }
  for (size_t i : {2u, 3u}) {
    EXPECT_TRUE(outcomes[i].duplicate) << i;
    EXPECT_EQ(outcomes[i].status, "duplicate");
    EXPECT_EQ(outcomes[i].code_hash, outcomes[i - 2].code_hash) << "the earlier one's code";
  }
  EXPECT_NE(outcomes[0].code_hash, outcomes[1].code_hash);
  EXPECT_EQ(calls(runner_dir).size(), 2u) << "duplicates never reach the runner";
}

}  // namespace
}  // namespace nautilus::profiler
