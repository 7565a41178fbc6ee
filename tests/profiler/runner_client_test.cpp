// The runner client against fake runners (shell scripts) and the real runner without a GPU:
// every way a child can end becomes a typed RunResult, and the parent always survives.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "profiler/child_process.h"
#include "profiler/runner_client.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using testing::TempDir;
using testing::write_script;

// A report as the runner prints it, with `status` and (for errors) one error entry.
std::string report_json(const std::string& status, const std::string& extra_error_fields = "") {
  std::string errors = "[]";
  if (status != "ok") {
    errors = R"([{"kind": ")" + status + R"(", "message": "details of )" + status + "\"" +
             extra_error_fields + "}]";
  }
  return R"({"format": "nautilus-runner-report", "version": 1, "status": ")" + status +
         R"(", "timing": {"total": {"median_us": 12.5}}, "validation": {"status": "passed", "passed": true, "max_relative_error": 0.001}, "errors": )" +
         errors + "}";
}

// Runs `script_body` as the runner (the script ignores the arguments it is given).
RunResult run_script(const TempDir& dir, const std::string& body, double timeout = 20) {
  const std::string script = write_script(dir, "runner.sh", body);
  RunRequest request;
  request.package_dir = dir.path();
  ClientOptions options;
  options.command_template = script;
  options.timeout_seconds = timeout;
  return run_package(request, options);
}

TEST(ChildProcess, CapturesBothStreamsAndTheExitCode) {
  ChildResult child = run_child({"sh", "-c", "echo out; echo err 1>&2; exit 7"}, {});
  ASSERT_TRUE(child.started) << child.spawn_error;
  EXPECT_EQ(child.exit_code, 7);
  EXPECT_EQ(child.signal, 0);
  EXPECT_EQ(child.stdout_text, "out\n");
  EXPECT_EQ(child.stderr_text, "err\n");
  EXPECT_FALSE(child.timed_out);
}

TEST(ChildProcess, LargeOutputOnBothStreamsDoesNotDeadlock) {
  // 1 MiB on each stream: far more than a pipe buffer, so the parent must read both as they fill.
  ChildResult child = run_child(
      {"sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' a; head -c 1048576 /dev/zero 1>&2"}, {});
  ASSERT_TRUE(child.started);
  EXPECT_EQ(child.exit_code, 0);
  EXPECT_EQ(child.stdout_text.size(), 1048576u);
  EXPECT_EQ(child.stderr_text.size(), 1048576u);
}

TEST(ChildProcess, OutputBeyondTheLimitIsDropped) {
  ChildOptions options;
  options.max_output_bytes = 1000;
  ChildResult child = run_child({"sh", "-c", "head -c 5000 /dev/zero"}, options);
  EXPECT_EQ(child.stdout_text.size(), 1000u);
  EXPECT_TRUE(child.output_truncated);
}

TEST(ChildProcess, TimeoutKillsTheWholeProcessGroup) {
  TempDir dir;
  const std::string pid_file = dir.file("sleeper.pid");
  // The script starts a grandchild that would outlive it, records its pid, then waits forever.
  ChildOptions options;
  options.timeout_seconds = 0.5;
  const auto start = std::chrono::steady_clock::now();
  ChildResult child = run_child(
      {"sh", "-c", "sleep 1000 & echo $! > " + pid_file + "; wait"}, options);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(child.timed_out);
  EXPECT_EQ(child.signal, SIGKILL);
  EXPECT_LT(elapsed, 10.0);
  pid_t sleeper = 0;
  std::ifstream(pid_file) >> sleeper;
  ASSERT_GT(sleeper, 0);
  // The grandchild got SIGKILL with the group; once its parent (the shell) is gone it is reaped
  // by init, so within a short while it no longer exists.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ::kill(sleeper, 0) != 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the grandchild " << sleeper << " survived the timeout";
}

TEST(ChildProcess, MissingProgramIsASpawnFailure) {
  ChildResult child = run_child({"nautilus-no-such-runner-program"}, {});
  EXPECT_FALSE(child.started);
  EXPECT_NE(child.spawn_error.find("nautilus-no-such-runner-program"), std::string::npos);
}

TEST(RunnerClient, SplitsCommandTemplatesLikeAShell) {
  std::string error;
  auto words = split_command_template(R"(ssh -o 'Batch Mode=yes' gpu\ host "a \"b\"" runner)", &error);
  ASSERT_TRUE(words.has_value()) << error;
  EXPECT_EQ(*words, (std::vector<std::string>{"ssh", "-o", "Batch Mode=yes", "gpu host", "a \"b\"",
                                              "runner"}));
  EXPECT_FALSE(split_command_template("ssh 'host", &error).has_value());
  EXPECT_NE(error.find("unterminated"), std::string::npos);
  EXPECT_FALSE(split_command_template("   ", &error).has_value());
}

TEST(RunnerClient, BuildsTheRunnerArguments) {
  RunRequest request;
  request.package_dir = "pkg";
  request.reference_dir = "ref";
  request.seed = 3;
  request.repetitions = 20;
  request.flush_l2 = false;
  request.gpu_timeout_seconds = 2.5;
  EXPECT_EQ(runner_arguments(request),
            (std::vector<std::string>{"pkg", "--reference", "ref", "--seed", "3", "--reps", "20",
                                      "--no-flush", "--timeout", "2.5"}));
}

TEST(RunnerClient, DefaultCommandIsARunnerBesideThisExecutableOrOnPath) {
  // The test binary has no runner beside it, so the default falls back to PATH.
  std::string command = default_runner_command();
  EXPECT_TRUE(command == "nautilus-runner" || command.ends_with("/nautilus-runner")) << command;
}

TEST(RunnerClient, OkReportIsOk) {
  TempDir dir;
  RunResult result = run_script(dir, "cat <<'EOF'\n" + report_json("ok") + "\nEOF");
  EXPECT_EQ(result.status, RunStatus::Ok) << result.message;
  ASSERT_TRUE(result.total_median_us.has_value());
  EXPECT_DOUBLE_EQ(*result.total_median_us, 12.5);
  EXPECT_EQ(result.validation_passed, true);
  EXPECT_DOUBLE_EQ(result.max_relative_error.value_or(-1), 0.001);
  EXPECT_EQ(result.command.back(), dir.path());
}

TEST(RunnerClient, EveryReportedErrorKindIsTyped) {
  struct Case {
    std::string status;
    std::string extra;
    int exit_code;
    RunStatus expected;
  };
  const std::vector<Case> cases = {
      {"no_gpu", "", 3, RunStatus::NoGpu},
      {"compile_error", "", 4, RunStatus::CompileError},
      {"load_error", "", 4, RunStatus::LoadError},
      {"launch_error", R"(, "cuda_error": 700)", 5, RunStatus::IllegalMemoryAccess},
      {"launch_error", R"(, "cuda_error": 719)", 5, RunStatus::LaunchError},
      {"timeout", "", 6, RunStatus::Timeout},
      {"wrong_results", "", 1, RunStatus::WrongResults},
      {"usage_error", "", 2, RunStatus::UsageError},
      {"internal_error", "", 70, RunStatus::RunnerCrashed},
      {"some_future_kind", "", 9, RunStatus::MalformedOutput},
  };
  TempDir dir;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.status + c.extra);
    RunResult result = run_script(dir, "cat <<'EOF'\n" + report_json(c.status, c.extra) +
                                           "\nEOF\nexit " + std::to_string(c.exit_code));
    EXPECT_EQ(result.status, c.expected) << run_status_name(result.status) << ": " << result.message;
    if (c.expected != RunStatus::MalformedOutput) {
      EXPECT_NE(result.message.find("details of " + c.status), std::string::npos) << result.message;
    }
    EXPECT_FALSE(result.report.is_null());
  }
}

TEST(RunnerClient, HangingRunnerTimesOut) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  RunResult result = run_script(dir, "sleep 1000", /*timeout=*/0.5);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.status, RunStatus::Timeout) << result.message;
  EXPECT_NE(result.message.find("0.5 s"), std::string::npos) << result.message;
  EXPECT_LT(elapsed, 10.0);
}

TEST(RunnerClient, CrashingRunnerIsReportedWithItsSignal) {
  TempDir dir;
  RunResult result = run_script(dir, "echo 'partial {' ; echo 'about to die' 1>&2; kill -SEGV $$");
  EXPECT_EQ(result.status, RunStatus::RunnerCrashed) << result.message;
  EXPECT_EQ(result.process.signal, SIGSEGV);
  EXPECT_NE(result.message.find("signal 11"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("about to die"), std::string::npos) << result.message;
}

TEST(RunnerClient, GarbageOutputIsMalformed) {
  TempDir dir;
  RunResult result = run_script(dir, "echo 'Segmentation fault? no: just words'; exit 0");
  EXPECT_EQ(result.status, RunStatus::MalformedOutput) << result.message;
  EXPECT_NE(result.message.find("just words"), std::string::npos) << result.message;
  EXPECT_TRUE(result.report.is_null());

  // Valid JSON that is not a runner report is malformed too.
  result = run_script(dir, "echo '{\"status\": \"ok\"}'");
  EXPECT_EQ(result.status, RunStatus::MalformedOutput) << result.message;
  // So is a report that contradicts the exit status, both ways.
  result = run_script(dir, "cat <<'EOF'\n" + report_json("ok") + "\nEOF\nexit 1");
  EXPECT_EQ(result.status, RunStatus::MalformedOutput) << result.message;
  result = run_script(dir, "cat <<'EOF'\n" + report_json("wrong_results") + "\nEOF\nexit 0");
  EXPECT_EQ(result.status, RunStatus::MalformedOutput) << result.message;
}

TEST(RunnerClient, EmptyOutputWithAnSshStyleFailureIsMalformedAndShowsStderr) {
  TempDir dir;
  RunResult result = run_script(dir, "echo 'ssh: Could not resolve hostname gpuhost' 1>&2; exit 255");
  EXPECT_EQ(result.status, RunStatus::MalformedOutput);
  EXPECT_NE(result.message.find("Could not resolve hostname"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("255"), std::string::npos) << result.message;
}

TEST(RunnerClient, MissingRunnerIsASpawnFailure) {
  RunRequest request;
  request.package_dir = "pkg";
  ClientOptions options;
  options.command_template = "/nonexistent/nautilus-runner --flag";
  RunResult result = run_package(request, options);
  EXPECT_EQ(result.status, RunStatus::SpawnFailed);
  EXPECT_NE(result.message.find("/nonexistent/nautilus-runner"), std::string::npos);

  options.command_template = "'unterminated";
  EXPECT_EQ(run_package(request, options).status, RunStatus::SpawnFailed);
}

// The template's words come first and the runner's arguments after them.
TEST(RunnerClient, TemplateWordsPrecedeTheRunnerArguments) {
  TempDir dir;
  const std::string script = write_script(dir, "echo_args.sh",
                                          "printf '%s\\n' \"$@\" > " + dir.file("args.txt") +
                                              "\necho '" + report_json("ok") + "'");
  RunRequest request;
  request.package_dir = "the package";
  request.warmup = 2;
  ClientOptions options;
  options.command_template = "sh '" + script + "' --remote-flag";
  RunResult result = run_package(request, options);
  EXPECT_EQ(result.status, RunStatus::Ok) << result.message;
  std::ifstream args(dir.file("args.txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(args, line);) lines.push_back(line);
  EXPECT_EQ(lines, (std::vector<std::string>{"--remote-flag", "the package", "--warmup", "2"}));
}

}  // namespace
}  // namespace nautilus::profiler
