// `nautilus compile` end to end through the real binary: a scheduled GEMM becomes a package that
// read_package accepts, and bad options fail with status 1 and a one-line reason.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/codegen/nvrtc.h"
#include "core/codegen/package.h"

namespace nautilus::codegen {
namespace {

struct CliRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

CliRun run_cli(const std::string& arguments) {
  const std::string command = std::string(NAUTILUS_CLI_PATH) + " " + arguments + " 2>&1";
  CliRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

const std::string kGemm = std::string(NAUTILUS_SOURCE_DIR) + "/assets/specs/gemm.nt";
const std::string kGemmSchedule = std::string(NAUTILUS_SOURCE_DIR) + "/assets/schedules/gemm.json";

TEST(CompileCommand, WritesAPackageTheReaderAccepts) {
  if (!Nvrtc::shared().ok()) GTEST_SKIP() << "skipped: " << Nvrtc::shared().error().message;
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("nautilus_compile_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(directory);
  CliRun run = run_cli("compile " + kGemm + " --schedule " + kGemmSchedule +
                    " -D M=200 -D N=136 -D K=72 --arch sm_90a -o " + directory.string());
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("compiled gemm for sm_90a"), std::string::npos) << run.output;
  Result<KernelPackage> package = read_package(directory.string());
  ASSERT_TRUE(package.ok()) << package.error().message;
  EXPECT_EQ(package->arch, GpuArch::Sm90a);
  ASSERT_EQ(package->kernels.size(), 1u);
  EXPECT_GT(package->kernels[0].block[0], 0);
  EXPECT_EQ(package->kernels[0].arguments.size(), 3u);
  EXPECT_NE(package->source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(package->report.find(package->kernels[0].name), nullptr);
  std::filesystem::remove_all(directory);
}

// The consumers' ping-pong (warp_spec pingpong=1) through NVRTC for sm_90a: GEMM, attention at
// d 64 and d 128 with and without overlap, and causal attention; each package's source picks
// the turn barriers by warpgroup.
TEST(CompileCommand, CompilesPingPongKernelsForSm90a) {
  if (!Nvrtc::shared().ok()) GTEST_SKIP() << "skipped: " << Nvrtc::shared().error().message;
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("nautilus_pingpong_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  struct Case {
    std::string name, spec, sizes;
    std::vector<std::string> decisions;
  };
  const auto attention = [](bool causal, bool overlap) {
    std::vector<std::string> d = {"rolling_update(O_sum, n, tile=64)", "tile(O_sum_acc, m=128)",
                                  "compute_at(S, Mx, n_o)"};
    if (causal) d.push_back("compute_at(S_sum, S, n_o)");
    d.push_back("reverse_compute_at(O, O_sum, m_o)");
    d.push_back("bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)");
    if (causal) d.push_back("skip_masked(S, n_o)");
    d.push_back(std::string("warp_spec(O_sum_acc, consumers=2, stages=") + (overlap ? "3, overlap=1" : "2") +
                ", pingpong=1)");
    return d;
  };
  const std::string specs = std::string(NAUTILUS_SOURCE_DIR) + "/assets/specs/";
  const std::vector<Case> cases = {
      {"gemm", kGemm, "-D M=512 -D N=512 -D K=512",
       {"tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)",
        "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=4, pingpong=1)"}},
      {"attention_d64", specs + "attention.nt", "-D B=1 -D H=2 -D M=512 -D N=512 -D D=64", attention(false, false)},
      {"attention_d64_overlap", specs + "attention.nt", "-D B=1 -D H=2 -D M=512 -D N=512 -D D=64",
       attention(false, true)},
      {"attention_d128_overlap", specs + "attention.nt", "-D B=1 -D H=2 -D M=512 -D N=512 -D D=128",
       attention(false, true)},
      {"causal_d128", specs + "causal_attention.nt", "-D B=1 -D H=2 -D M=512 -D N=512 -D D=128",
       attention(true, false)},
      {"causal_d64_overlap", specs + "causal_attention.nt", "-D B=1 -D H=2 -D M=512 -D N=512 -D D=64",
       attention(true, true)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::filesystem::path schedule = directory / (c.name + ".json");
    {
      std::ofstream out(schedule);
      out << "{\"decisions\": [";
      for (size_t i = 0; i < c.decisions.size(); ++i) out << (i ? ", " : "") << "\"" << c.decisions[i] << "\"";
      out << "]}\n";
    }
    const std::filesystem::path package_dir = directory / c.name;
    CliRun run = run_cli("compile " + c.spec + " --schedule " + schedule.string() + " " + c.sizes +
                         " --arch sm_90a -o " + package_dir.string());
    ASSERT_EQ(run.status, 0) << run.output;
    Result<KernelPackage> package = read_package(package_dir.string());
    ASSERT_TRUE(package.ok()) << package.error().message;
    EXPECT_NE(package->source.find("named_barrier_sync((tid / 128 == 0 ? 1 : 2), 256);"), std::string::npos);
  }
  std::filesystem::remove_all(directory);
}

// Persistent CTAs with the dynamic tile scheduler (the default of `persistent`): the package is
// version 3 and declares the tile counter as a 4-byte workspace the kernel takes last.
TEST(CompileCommand, ADynamicPersistentKernelDeclaresItsWorkspace) {
  if (!Nvrtc::shared().ok()) GTEST_SKIP() << "skipped: " << Nvrtc::shared().error().message;
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("nautilus_compile_dynamic_" + std::to_string(getpid()));
  std::filesystem::remove_all(directory);
  CliRun run = run_cli("compile " + kGemm + " --schedule " + kGemmSchedule +
                       " --pin 'warp_spec(C_sum, consumers=2, stages=3)' --pin 'persistent(C_sum)'"
                       " -D M=600 -D N=520 -D K=200 --arch sm_90a -o " + directory.string());
  ASSERT_EQ(run.status, 0) << run.output;
  Result<KernelPackage> package = read_package(directory.string());
  ASSERT_TRUE(package.ok()) << package.error().message;
  ASSERT_EQ(package->kernels.size(), 1u);
  EXPECT_TRUE(package->kernels[0].persistent);
  EXPECT_EQ(package->kernels[0].grid, (std::array<int64_t, 3>{25, 1, 1}));  // 5 x 5 tiles
  const KernelArgument& counter = package->kernels[0].arguments[3];  // after A, B, C; maps follow
  EXPECT_EQ(counter.role, "workspace");
  EXPECT_EQ(counter.dtype, DType::I8);
  EXPECT_EQ(counter.shape, (std::vector<int64_t>{4}));
  bool listed = false;
  for (const KernelArgument& buffer : package->buffers) listed |= buffer.same_buffer(counter);
  EXPECT_TRUE(listed);
  EXPECT_NE(package->source.find("atomicAdd("), std::string::npos);
  std::ifstream launch(directory / "launch.json");
  const std::string text((std::istreambuf_iterator<char>(launch)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"version\": 3"), std::string::npos) << text.substr(0, 200);
  std::filesystem::remove_all(directory);
}

TEST(CompileCommand, UserErrorsExitWithStatusOne) {
  CliRun bad_arch = run_cli("compile " + kGemm + " --schedule " + kGemmSchedule + " --arch sm_90 -o /tmp/x");
  EXPECT_EQ(bad_arch.status, 1);
  EXPECT_NE(bad_arch.output.find("unknown --arch 'sm_90'; expected sm_80, sm_90a"), std::string::npos)
      << bad_arch.output;
  CliRun no_output = run_cli("compile " + kGemm + " --schedule " + kGemmSchedule + " --arch sm_80");
  EXPECT_EQ(no_output.status, 1);
  EXPECT_NE(no_output.output.find("-o DIR is required"), std::string::npos) << no_output.output;
  CliRun no_file = run_cli("compile --arch sm_80 -o /tmp/x");
  EXPECT_EQ(no_file.status, 1);
  CliRun help = run_cli("help compile");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("--arch"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::codegen
