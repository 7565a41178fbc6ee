// Every asset spec with its hand-written schedule, at the spec's own (realistic) sizes, compiled
// and run on the GPU through `nautilus run`: the runner checks the scheduled kernels against the
// unscheduled lowering of the same spec on the same seeded inputs. Label `gpu`: on a machine
// without one (CI) every case skips and says why; tests/cli checks what `nautilus run` tells
// such a user.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "tests/common/cli_run.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::cli {
namespace {

using testing::source_path;

using testing::CliRun;

CliRun run(const std::vector<std::string>& args) { return testing::run_cli_in_process(args); }

class AssetOnGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(AssetOnGpu, ValidatesAgainstTheUnscheduledLoweringAtItsOwnSizes) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  const CliRun devices = run({"devices"});
  if (devices.status != 0) GTEST_SKIP() << "no GPU: " << devices.err;  // what `devices` says
  const std::string& asset = GetParam();
  const CliRun result = run({"run", source_path("assets/specs/" + asset + ".nt"), "--schedule",
                             source_path("assets/schedules/" + asset + ".json"), "--reps", "3",
                             "--warmup", "1", "--runner", NAUTILUS_RUNNER});
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("validation: passed"), std::string::npos) << result.out << result.err;
  std::cout << result.out;
}

INSTANTIATE_TEST_SUITE_P(Assets, AssetOnGpu, ::testing::ValuesIn(testing::asset_names()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace nautilus::cli
