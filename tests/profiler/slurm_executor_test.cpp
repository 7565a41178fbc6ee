// The Slurm executor (profiler/slurm_executor.h) without Slurm: the job script it writes (run
// here with sh), sbatch's arguments, the parsing of sbatch and squeue output, how a job's result
// files become an outcome, the device query's identity; then the whole executor against stand-in
// sbatch / squeue / scancel scripts (a job runs at once in the background), so that results,
// a failed job, a job past its wait and cancellation are checked in a second or two.
// tests/slurm/run_slurm_test.sh runs it against real daemons.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/sched/decision.h"
#include "profiler/device_info.h"
#include "profiler/slurm_executor.h"
#include "tests/common/golden.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using testing::TempDir;
using testing::write_script;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* kOkReport =
    R"({"format": "nautilus-runner-report", "version": 1, "status": "ok", "device": {"name": "Nautilus Fake GPU 0", "sm_count": 132}, "timing": {"kernels": [{"name": "gemm_C", "median_us": 7.5, "min_us": 7.0, "max_us": 9.0, "registers": 40}], "total": {"median_us": 7.5, "min_us": 7.0, "max_us": 9.0}}, "validation": {"status": "passed", "passed": true, "max_relative_error": 0.002}, "errors": []})";

TEST(SlurmJobScript, RunsTheRunnerQuotedAndWritesTheStatusLast) {
  TempDir dir;
  const SlurmJobFiles files = slurm_job_files(dir.path(), "job-1");
  EXPECT_EQ(files.script_path, dir.file("job-1.sh"));
  EXPECT_EQ(files.status_path, dir.file("job-1.status"));
  // A "runner" that echoes its arguments, complains on stderr and fails with status 3.
  const std::string runner =
      write_script(dir, "runner with space.sh", "printf '%s\\n' \"$@\"; echo oops >&2; exit 3");
  const std::string script = slurm_job_script({runner, "it's", "a b", "$HOME"}, files, "c0");
  std::ofstream(files.script_path) << script;
  ASSERT_EQ(std::system(("sh " + files.script_path).c_str()), 0) << "the job itself succeeds";
  EXPECT_EQ(read_text(files.report_path), "it's\na b\n$HOME\n") << "no word split, no expansion";
  EXPECT_EQ(read_text(files.stderr_path), "oops\n");
  EXPECT_EQ(read_text(files.status_path), "3\n");
  EXPECT_FALSE(std::ifstream(files.status_path + ".tmp")) << "renamed into place";
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(SlurmJobScript, SbatchArgumentsCarryTheGpuRequestAndTheSiteOptions) {
  SlurmExecutorOptions options;
  options.partition = "gpu";
  options.time_limit = "5";
  options.extra_arguments = {"--account=proj", "--constraint=h100"};
  const SlurmJobFiles files = slurm_job_files("/shared/run-1", "job-7");
  const std::vector<std::string> expected = {
      "--parsable",         "--job-name=nautilus-tune", "--output=/shared/run-1/job-7.log",
      "--chdir=/shared/run-1", "--ntasks=1",           "--partition=gpu",
      "--gres=gpu:1",       "--time=5",                 "--account=proj",
      "--constraint=h100",  "/shared/run-1/job-7.sh"};
  EXPECT_EQ(sbatch_arguments(options, files), expected);
  options.gres = "";
  options.partition = "";
  options.time_limit = "";
  options.extra_arguments.clear();
  const std::vector<std::string> bare = {"--parsable", "--job-name=nautilus-tune",
                                         "--output=/shared/run-1/job-7.log",
                                         "--chdir=/shared/run-1", "--ntasks=1",
                                         "/shared/run-1/job-7.sh"};
  EXPECT_EQ(sbatch_arguments(options, files), bare) << "no GRES request at all";
}

TEST(SlurmParsing, JobIdsQueueStatesAndFinalStates) {
  EXPECT_EQ(parse_sbatch_job_id("42\n"), 42);
  EXPECT_EQ(parse_sbatch_job_id("42;cluster-a\n"), 42);
  EXPECT_EQ(parse_sbatch_job_id("site notice\n1234\n"), 1234);
  EXPECT_FALSE(parse_sbatch_job_id("Submitted batch job 42\n"));
  EXPECT_FALSE(parse_sbatch_job_id(""));

  const auto jobs = parse_squeue("41|RUNNING|None\n 42|PENDING|Resources\n43|CANCELLED+|None\ngarbage\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs.at(41).state, "RUNNING");
  EXPECT_EQ(jobs.at(42).reason, "Resources");
  EXPECT_TRUE(slurm_state_is_final(jobs.at(43).state));
  for (const char* state : {"COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}) {
    EXPECT_TRUE(slurm_state_is_final(state)) << state;
  }
  for (const char* state : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED"}) {
    EXPECT_FALSE(slurm_state_is_final(state)) << state;
  }
}

TEST(SlurmParsing, AJobsResultFilesBecomeTheRunnersOutcome) {
  tune::MachineIdentity fake;
  fake.device_name = "Nautilus Fake GPU 0";
  fake.sm_count = 132;

  tune::CandidateOutcome ok = outcome_from_job_result("0\n", kOkReport, "", &fake);
  EXPECT_EQ(ok.status, "ok");
  EXPECT_EQ(ok.validation, tune::Validation::Passed);
  EXPECT_EQ(ok.median_us, 7.5);
  EXPECT_EQ(ok.registers, 40);

  const std::string wrong_report =
      R"({"format": "nautilus-runner-report", "version": 1, "status": "wrong_results", "validation": {"status": "failed", "passed": false, "max_relative_error": 0.5}, "errors": [{"kind": "wrong_results", "message": "C differs"}]})";
  tune::CandidateOutcome wrong = outcome_from_job_result("1", wrong_report, "", &fake);
  EXPECT_EQ(wrong.status, "wrong_results");
  EXPECT_EQ(wrong.validation, tune::Validation::Failed);

  tune::CandidateOutcome killed = outcome_from_job_result("137", "", "Killed\n", &fake);
  EXPECT_EQ(killed.status, "runner_crashed");
  EXPECT_NE(killed.message.find("signal 9"), std::string::npos) << killed.message;

  tune::CandidateOutcome missing =
      outcome_from_job_result("127", "", "sh: 1: /opt/nautilus-runner: not found\n", &fake);
  EXPECT_EQ(missing.status, "spawn_failed");
  EXPECT_NE(missing.message.find("not found"), std::string::npos) << missing.message;

  const std::string no_gpu_report =
      R"({"format": "nautilus-runner-report", "version": 1, "status": "no_gpu", "errors": [{"kind": "no_gpu", "message": "no CUDA device"}]})";
  EXPECT_TRUE(outcome_from_job_result("3", no_gpu_report, "", &fake).no_gpu);

  tune::MachineIdentity other = fake;
  other.device_name = "NVIDIA A100-SXM4-80GB";
  other.sm_count = 108;
  tune::CandidateOutcome elsewhere = outcome_from_job_result("0", kOkReport, "", &other);
  EXPECT_EQ(elsewhere.status, "wrong_device");
  EXPECT_FALSE(elsewhere.median_us) << "a time from another GPU is not recorded";
  EXPECT_NE(elsewhere.message.find("ran on Nautilus Fake GPU 0"), std::string::npos);

  EXPECT_EQ(outcome_from_job_result("", "", "", &fake).status, "job_failed");
}

TEST(SlurmParsing, TheDeviceQueryGivesTheNodesIdentity) {
  testing::ScopedEnv driver_version("NAUTILUS_FAKE_CUDA_DRIVER_VERSION", "12080");
  const std::string text = to_json(query_devices(testing::fake_libcuda_path())).dump(2);
  std::string why;
  const auto identity = identity_from_device_query(text, &why);
  ASSERT_TRUE(identity) << why;
  EXPECT_EQ(identity->device_name, "Nautilus Fake GPU 0");
  EXPECT_GT(identity->sm_count, 0);
  EXPECT_GT(identity->sm_clock_khz, 0);
  EXPECT_EQ(identity->driver_version, 12080);

  testing::ScopedEnv no_device("NAUTILUS_FAKE_CUDA_INIT_ERROR", "100");
  const std::string none = to_json(query_devices(testing::fake_libcuda_path())).dump();
  EXPECT_FALSE(identity_from_device_query(none, &why));
  EXPECT_NE(why.find("no GPU on the Slurm node"), std::string::npos) << why;
  EXPECT_FALSE(identity_from_device_query("sh: nautilus-runner: not found", &why));
}

// Stand-ins for Slurm's commands in `dir`: sbatch logs its arguments, prints the next job id
// and (unless DIR/hold exists) runs the job script in the background at once, in a process
// group of its own; squeue prints DIR/squeue.txt (empty: every job already forgotten); scancel
// logs its ids and kills those process groups.
SlurmExecutorOptions fake_slurm(const TempDir& dir) {
  SlurmExecutorOptions options;
  const std::string d = dir.path();
  options.sbatch = write_script(
      dir, "sbatch",
      "echo \"$*\" >> " + d + "/sbatch.txt\n"
      "for last; do :; done\n"
      "n=$(( $(cat " + d + "/next 2>/dev/null || echo 100) + 1 )); echo $n > " + d + "/next\n"
      "if [ ! -e " + d + "/hold ]; then setsid sh \"$last\" > /dev/null 2>&1 & echo $! > " + d +
          "/pid-$n; fi\n"
      "echo $n");
  options.squeue = write_script(dir, "squeue", "cat " + d + "/squeue.txt 2>/dev/null; exit 0");
  options.scancel = write_script(
      dir, "scancel",
      "echo \"$*\" >> " + d + "/scancel.txt\n"
      "for id; do [ -e " + d + "/pid-$id ] && kill -KILL -- -$(cat " + d + "/pid-$id); done; exit 0");
  options.directory = dir.file("shared");
  options.poll_seconds = 0.02;
  options.squeue_seconds = 0.05;
  options.result_grace_seconds = 5;
  options.partition = "gpu";
  options.driver_library = testing::fake_libcuda_path();
  return options;
}

search::SearchInput gemm_input() {
  search::SearchInput input;
  std::string error;
  input.file = SourceFile::read(nautilus::testing::source_path("assets/specs/gemm.nt"), &error);
  EXPECT_TRUE(input.file) << error;
  input.sizes = {{"M", 64}, {"N", 64}, {"K", 64}};
  return input;
}

std::vector<sched::Schedule> two_schedules() {
  std::string error;
  std::optional<sched::Schedule> tuned = sched::read_schedule_file(
      nautilus::testing::source_path("assets/schedules/gemm.json"), &error);
  EXPECT_TRUE(tuned) << error;
  return {sched::Schedule{}, tuned.value_or(sched::Schedule{})};
}

// A runner: the device query goes to the real runner (with the fake driver); a run does `body`.
std::string stand_in_runner(const TempDir& dir, const std::string& body) {
  return write_script(dir, "runner.sh",
                      "if [ \"$1\" = --devices ]; then exec '" + testing::runner_path() +
                          "' \"$@\"; fi\n" + body);
}

TEST(SlurmExecutor, QueriesTheNodeThenRunsEveryCandidateAsAJob) {
  TempDir dir;
  SlurmExecutorOptions options = fake_slurm(dir);
  options.runner_command = stand_in_runner(dir, std::string("echo '") + kOkReport + "'");
  std::string run_directory;
  {
    SlurmExecutor executor(gemm_input(), options);
    std::string why;
    const auto identity = executor.identity(&why);
    ASSERT_TRUE(identity) << why;
    EXPECT_EQ(identity->device_name, "Nautilus Fake GPU 0");
    EXPECT_NE(identity->compiler_version.find("nautilus"), std::string::npos);

    std::vector<std::pair<size_t, tune::CandidateOutcome>> results;
    executor.measure(two_schedules(), [&](size_t index, const tune::CandidateOutcome& outcome) {
      results.emplace_back(index, outcome);
    });
    ASSERT_EQ(results.size(), 2u);
    for (const auto& [index, outcome] : results) {
      EXPECT_EQ(outcome.status, "ok") << index << ": " << outcome.message;
      EXPECT_EQ(outcome.median_us, 7.5);
      EXPECT_EQ(outcome.code_hash.size(), 16u) << "hash of the package built here";
    }
    EXPECT_NE(results[0].first, results[1].first);
    run_directory = executor.run_directory();
    EXPECT_EQ(run_directory.rfind(options.directory + "/run-", 0), 0u) << run_directory;
    // The device query's job and one job per candidate, each asking for a GPU in the partition.
    const std::string sbatch = read_text(dir.file("sbatch.txt"));
    EXPECT_EQ(std::count(sbatch.begin(), sbatch.end(), '\n'), 3) << sbatch;
    EXPECT_NE(sbatch.find("--gres=gpu:1"), std::string::npos) << sbatch;
    EXPECT_NE(sbatch.find("--partition=gpu"), std::string::npos) << sbatch;
    const std::string script = read_text(run_directory + "/job-1.sh");
    EXPECT_NE(script.find("'--reference'"), std::string::npos) << "validated: " << script;
    EXPECT_NE(script.find("'--driver'"), std::string::npos) << script;
  }
  EXPECT_FALSE(std::ifstream(run_directory + "/job-1.sh")) << "the run's directory is removed";
  EXPECT_FALSE(std::ifstream(dir.file("scancel.txt"))) << "nothing was left to cancel";
}

TEST(SlurmExecutor, AJobThatEndsWithoutAResultIsARecordedFailure) {
  TempDir dir;
  SlurmExecutorOptions options = fake_slurm(dir);
  options.runner_command = stand_in_runner(dir, "exit 0");
  SlurmExecutor executor(gemm_input(), options);
  std::string why;
  ASSERT_TRUE(executor.identity(&why)) << why;
  // The next job never runs; the controller says it failed on its node.
  std::ofstream(dir.file("hold")) << "";
  std::ofstream(dir.file("squeue.txt")) << "102|NODE_FAIL|None\n";
  std::vector<tune::CandidateOutcome> results;
  executor.measure({sched::Schedule{}}, [&](size_t, const tune::CandidateOutcome& outcome) {
    results.push_back(outcome);
  });
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, "job_failed");
  EXPECT_NE(results[0].message.find("Slurm job 102 ended NODE_FAIL without a result"),
            std::string::npos)
      << results[0].message;
}

TEST(SlurmExecutor, AJobPastItsWaitIsCancelledAndRecordedAsATimeout) {
  TempDir dir;
  SlurmExecutorOptions options = fake_slurm(dir);
  options.runner_command = stand_in_runner(dir, "exit 0");
  options.wait_seconds = 0.5;
  SlurmExecutor executor(gemm_input(), options);
  std::string why;
  ASSERT_TRUE(executor.identity(&why)) << why;
  std::ofstream(dir.file("hold")) << "";
  std::ofstream(dir.file("squeue.txt")) << "102|PENDING|Resources\n";
  std::vector<tune::CandidateOutcome> results;
  executor.measure({sched::Schedule{}}, [&](size_t, const tune::CandidateOutcome& outcome) {
    results.push_back(outcome);
  });
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, "timeout");
  EXPECT_NE(results[0].message.find("last state PENDING, reason Resources"), std::string::npos)
      << results[0].message;
  EXPECT_EQ(read_text(dir.file("scancel.txt")), "102\n");
}

TEST(SlurmExecutor, CancellingStopsAndCancelsEveryOutstandingJobUnreported) {
  TempDir dir;
  SlurmExecutorOptions options = fake_slurm(dir);
  options.runner_command = stand_in_runner(dir, "sleep 30");
  std::ofstream(dir.file("squeue.txt")) << "102|RUNNING|None\n103|RUNNING|None\n";
  bool armed = false;
  int asked = 0;
  // Answers true once both candidates are submitted (the build loop asks once per candidate).
  options.cancelled = [&] { return armed && ++asked > 2; };
  SlurmExecutor executor(gemm_input(), options);
  std::string why;
  ASSERT_TRUE(executor.identity(&why)) << why;
  armed = true;
  int reported = 0;
  executor.measure(two_schedules(), [&](size_t, const tune::CandidateOutcome&) { ++reported; });
  EXPECT_EQ(reported, 0) << "cancelled candidates are not recorded (a --resume measures them)";
  EXPECT_EQ(read_text(dir.file("scancel.txt")), "102 103\n");
}

}  // namespace
}  // namespace nautilus::profiler
