// `nautilus run`: compiles the scheduled and the reference package and hands them to the runner
// in a child process. CI has no GPU, so these check what a user without one sees (a clear "no
// GPU", exit 1, no crash) and that the packages are complete; tests/profiler runs packages on a
// GPU when there is one.
#include <filesystem>

#include <gtest/gtest.h>

#include "app/cli/cli.h"
#include "core/codegen/nvrtc.h"
#include "core/codegen/package.h"
#include "tests/common/cli_run.h"
#include "tests/common/golden.h"

namespace nautilus::cli {
namespace {

using testing::source_path;

using testing::CliRun;
using testing::machine_has_gpu;

CliRun run(const std::vector<std::string>& args) { return testing::run_cli_in_process(args); }

TEST(Run, WithoutAGpuSaysSoAndKeepsTheCompiledPackages) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a GPU (tests/profiler runs there)";
  const std::string dir = (std::filesystem::temp_directory_path() / "nautilus-run-test").string();
  std::filesystem::remove_all(dir);
  const CliRun result =
      run({"run", source_path("assets/specs/gemm.nt"), "--schedule",
           source_path("assets/schedules/gemm.json"), "-D", "M=64", "-D", "N=64", "-D", "K=64",
           "--runner", NAUTILUS_RUNNER, "--output", dir});
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.err.find("nautilus: error: no_gpu: no GPU"), std::string::npos) << result.err;
  // Both packages were written, with cubins for both archs.
  for (const char* which : {"package", "reference"}) {
    const codegen::Result<codegen::KernelPackage> package =
        codegen::read_package(dir + "/" + which);
    ASSERT_TRUE(package) << which << ": " << package.error().message;
    EXPECT_EQ(package->cubins.size(), 2u) << which;
  }
  std::filesystem::remove_all(dir);
}

TEST(Run, UsageErrors) {
  const CliRun reps = run({"run", source_path("assets/specs/gemm.nt"), "--reps", "many",
                           "--no-reference", "--runner", NAUTILUS_RUNNER});
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  EXPECT_EQ(reps.status, 1);
  EXPECT_NE(reps.err.find("--reps expects a non-negative integer, got 'many'"), std::string::npos)
      << reps.err;
  const CliRun missing = run({"run", "/nonexistent/spec.nt"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("cannot open '/nonexistent/spec.nt'"), std::string::npos)
      << missing.err;
  const CliRun runner = run({"run", source_path("assets/specs/gemm.nt"), "-D", "M=16", "-D",
                             "N=16", "-D", "K=16", "--no-reference", "--runner",
                             "/nonexistent/nautilus-runner"});
  EXPECT_EQ(runner.status, 1);
  EXPECT_NE(runner.err.find("nautilus: error: spawn_failed"), std::string::npos) << runner.err;
  const CliRun arch = run({"run", source_path("assets/specs/gemm.nt"), "--arch", "sm_70"});
  EXPECT_EQ(arch.status, 1);
  EXPECT_NE(arch.err.find("unknown --arch 'sm_70'; expected sm_80, sm_90a"), std::string::npos)
      << arch.err;
}

// --arch sm_90a lowers the schedule for Hopper (TMA, wgmma, warp roles where it asks for them):
// the package is compiled for sm_90a alone and its warp-specialized kernel runs on wgmma.
TEST(Run, ArchSm90aRunsTheHopperLowering) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a GPU (tests/gpu runs there)";
  const std::string dir = (std::filesystem::temp_directory_path() / "nautilus-run-sm90a-test").string();
  std::filesystem::remove_all(dir);
  const CliRun result =
      run({"run", source_path("assets/specs/gemm.nt"), "--schedule",
           source_path("assets/schedules/gemm.json"), "--pin",
           "warp_spec(C_sum, consumers=2, stages=3)", "--arch", "sm_90a", "-D", "M=256", "-D",
           "N=256", "-D", "K=256", "--runner", NAUTILUS_RUNNER, "--output", dir});
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.err.find("nautilus: error: no_gpu: no GPU"), std::string::npos) << result.err;
  const codegen::Result<codegen::KernelPackage> package = codegen::read_package(dir + "/package");
  ASSERT_TRUE(package) << package.error().message;
  ASSERT_EQ(package->cubins.size(), 1u);
  EXPECT_EQ(package->cubins.begin()->first, codegen::GpuArch::Sm90a);
  EXPECT_NE(package->source.find("wgmma"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nautilus::cli
