// `nautilus tune --executor slurm`'s command line, without a cluster: the option checks, and a
// machine without Slurm's client, which must be a one-line error before anything is measured
// (tests/slurm/run_slurm_test.sh runs the executor against real daemons).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "tests/common/golden.h"
#include "tests/common/shell_run.h"
#include "tests/common/temp_dir.h"

namespace {

using nautilus::testing::TempDir;

using CliRun = nautilus::testing::ShellRun;
CliRun run(const std::string& command) { return nautilus::testing::run_shell(command); }

std::string tune(const TempDir& dir, const std::string& args) {
  return std::string(NAUTILUS_CLI_PATH) + " tune " +
         nautilus::testing::source_path("assets/specs/gemm.nt") +
         " -D M=12 -D N=10 -D K=24 --driver " + NAUTILUS_FAKE_LIBCUDA + " --db " +
         dir.file("tuning.db") + " " + args;
}

TEST(TuneExecutor, BadExecutorOptionsAreOneLineErrors) {
  TempDir dir("tune-executor");
  struct Case {
    std::string args;
    std::string expected;
  };
  const Case cases[] = {
      {"--executor cloud", "unknown --executor 'cloud'; expected local or slurm"},
      {"--slurm-partition gpu", "--slurm-partition needs --executor slurm"},
      {"--executor slurm --slurm-jobs 0", "--slurm-jobs expects an integer from 1 to 10000"},
      {"--executor slurm --slurm-wait soon", "--slurm-wait expects a duration"},
      {"--executor slurm --gpu-index 1", "--gpu-index is for --executor local"},
      {"--executor slurm --devices 0,1", "--devices is for --executor local"},
  };
  for (const Case& c : cases) {
    const CliRun result = run(tune(dir, c.args));
    EXPECT_EQ(result.status, 1) << c.args << "\n" << result.out;
    EXPECT_NE(result.out.find(c.expected), std::string::npos) << c.args << "\n" << result.out;
  }
}

TEST(TuneExecutor, WithoutSlurmTheRunStopsBeforeMeasuring) {
  TempDir dir("tune-executor");
  // No sbatch on PATH: the device query's job cannot be submitted.
  const CliRun result = run("env PATH=" + dir.path() + " " +
                            tune(dir, "--executor slurm --slurm-dir " + dir.file("shared")));
  EXPECT_EQ(result.status, 1) << result.out;
  EXPECT_NE(result.out.find("cannot submit to Slurm: cannot start 'sbatch'"), std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find("tune: ["), std::string::npos) << "nothing measured";
  const CliRun help = run(std::string(NAUTILUS_CLI_PATH) + " help tune");
  EXPECT_EQ(help.status, 0);
  for (const char* option : {"--executor", "--slurm-partition", "--slurm-gres", "--slurm-time",
                             "--slurm-jobs", "--slurm-wait", "--slurm-dir", "--slurm-arg"}) {
    EXPECT_NE(help.out.find(option), std::string::npos) << option;
  }
}

}  // namespace
