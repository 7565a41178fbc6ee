// The CUDA-core dot (FmaDot) on the GPU: kernels whose products mma.sync cannot take (an N of 4,
// f32 operands), in each form the emitter writes (A read 16 bytes at a time along k, or one
// element at a time for ragged rows; slots in groups sharing the k loop), and the router's gate
// over 8 experts, which mma.sync takes with one n8 atom per warp and B loaded straight into its
// fragments; each checked by `nautilus run` against the unscheduled lowering on the same seeded
// inputs. Label `gpu`: skips without one (tests/codegen/fma_dot_emit_test.cpp checks the text
// and that NVRTC compiles it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "tests/common/cli_run.h"
#include "tests/common/golden.h"

namespace nautilus::cli {
namespace {

using testing::CliRun;

CliRun run(const std::vector<std::string>& args) { return testing::run_cli_in_process(args); }

const std::vector<std::string> kRouterSchedule = {
    "rolling_update(Y_sum, e, tile=8)", "split_k_update(G, k, splits=4)",
    "split_k_update(G_part, k, splits=4)", "bind(Y_sum_acc, t=grid.x)",
    "reverse_compute_at(Y, Y_sum, t)", "compute_at(G, Mx, e_o)", "compute_at(G_part, G, e_o)",
    "tile(G_part_part, t=64)", "bind(G_part_part, k_s2=grid.z, k_s=grid.y, t_o=grid.x)"};

struct Case {
  std::string name;
  std::string spec;  // a path from the source root, or spec text
  std::vector<std::string> decisions;
  std::vector<std::string> sizes;
};

class FmaDotOnGpu : public ::testing::TestWithParam<Case> {};

TEST_P(FmaDotOnGpu, MatchesTheUnscheduledLowering) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << "NVRTC is not installed";
  const CliRun devices = run({"devices"});
  if (devices.status != 0) GTEST_SKIP() << "no GPU: " << devices.err;
  const Case& c = GetParam();
  std::string path = c.spec;
  if (c.spec.find('\n') != std::string::npos) {
    path = (std::filesystem::temp_directory_path() / ("fma_dot_" + c.name + ".nt")).string();
    std::ofstream(path) << c.spec;
  } else {
    path = testing::source_path(c.spec);
  }
  std::vector<std::string> args = {"run", path, "--reps", "3", "--warmup", "1", "--runner",
                                   NAUTILUS_RUNNER};
  for (const std::string& d : c.decisions) args.insert(args.end(), {"--pin", d});
  for (const std::string& s : c.sizes) args.insert(args.end(), {"-D", s});
  const CliRun result = run(args);
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("validation: passed"), std::string::npos) << result.out << result.err;
  std::cout << result.out;
}

INSTANTIATE_TEST_SUITE_P(
    Forms, FmaDotOnGpu,
    ::testing::Values(
        Case{"router_vector", "bench/variants/router_softmax_combine.nt", kRouterSchedule,
             {"T=200", "H=2048"}},
        Case{"router_ragged", "bench/variants/router_softmax_combine.nt", kRouterSchedule,
             {"T=1000", "H=520"}},
        Case{"gemm_bf16_n4",
             "let M = 200, N = 4, K = 2048\ninput A[M, K] : bf16\ninput B[K, N] : bf16\n"
             "output C[m, n] : f32 = sum(k) A[m, k] * B[k, n]\n",
             {"tile(C, m=64, k=128)", "bind(C, m_o=grid.x)"},
             {}},
        Case{"gemm_f32",
             "let M = 200, N = 136, K = 264\ninput A[M, K] : f32\ninput B[K, N] : f32\n"
             "output C[m, n] : f32 = sum(k) A[m, k] * B[k, n]\n",
             {"tile(C, m=64, n=32, k=32)", "bind(C, m_o=grid.y, n_o=grid.x)"},
             {}}),
    [](const auto& test_info) { return test_info.param.name; });

}  // namespace
}  // namespace nautilus::cli
