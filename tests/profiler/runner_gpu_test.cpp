// nautilus-runner on a real GPU (label gpu): packages compiled here with NVRTC from small CUDA
// kernels, run by the runner process through the client. Checks that a correct kernel
// validates against a differently written reference and is timed with CUPTI, that a wrong one
// is caught, that an out-of-bounds store comes back as an illegal memory access while the parent
// survives and the GPU stays usable, and that a kernel that never ends comes back as a timeout.
//
// Without a GPU (CI, the build machines) the packages are still built and the runner must answer
// "no GPU"; then the tests skip with that message. NAUTILUS_PROFILER_KEEP_PACKAGES=DIR keeps
// the packages in DIR for running the runner by hand.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "core/codegen/nvrtc.h"
#include "profiler/device_info.h"
#include "profiler/runner_client.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using codegen::GpuArch;
using testing::TempDir;

constexpr int kRows = 1000;  // 1000 x 333: no multiple of the 256-thread blocks
constexpr int kCols = 333;

// Y[m, n] = X[m, n] * w[n] + 1 with X in bf16, w and Y in f32; four variants of the same kernel
// interface (X, w, Y).
const char* kSource = R"(
#include <cuda_bf16.h>
#define ROWS 1000
#define COLS 333
// One thread per element.
extern "C" __global__ void scale_rows(const __nv_bfloat16* X, const float* w, float* Y) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long)ROWS * COLS) Y[i] = __bfloat162float(X[i]) * w[i % COLS] + 1.0f;
}
// The reference: one block per row, a strided loop over the columns.
extern "C" __global__ void scale_rows_reference(const __nv_bfloat16* X, const float* w, float* Y) {
  for (int n = threadIdx.x; n < COLS; n += blockDim.x) {
    long i = (long)blockIdx.x * COLS + n;
    Y[i] = fmaf(__bfloat162float(X[i]), w[n], 1.0f);
  }
}
// Wrong: the weight of the neighbouring column.
extern "C" __global__ void scale_rows_wrong(const __nv_bfloat16* X, const float* w, float* Y) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long)ROWS * COLS) Y[i] = __bfloat162float(X[i]) * w[(i + 1) % COLS] + 1.0f;
}
// An out-of-bounds store a terabyte past Y: far outside any allocation.
extern "C" __global__ void scale_rows_out_of_bounds(const __nv_bfloat16* X, const float* w, float* Y) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long)ROWS * COLS) Y[i + (1L << 38)] = __bfloat162float(X[i]) * w[i % COLS];
}
// Never ends: the inputs are in [-1, 1), and the volatile read cannot be hoisted.
extern "C" __global__ void scale_rows_forever(const __nv_bfloat16* X, const float* w, float* Y) {
  volatile const float* weights = w;
  while (weights[0] < 100.0f) {
  }
  Y[0] = weights[0];
}
)";

struct Packages {
  std::string good, reference, wrong, out_of_bounds, forever;
};

class RunnerOnGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* keep = std::getenv("NAUTILUS_PROFILER_KEEP_PACKAGES");
    if (keep == nullptr || *keep == '\0') temp_ = std::make_unique<TempDir>();
    root_ = keep != nullptr && *keep != '\0' ? std::string(keep) : temp_->path();
    std::filesystem::create_directories(root_);

    const auto& nvrtc = codegen::Nvrtc::shared();
    if (!nvrtc.ok()) {
      skip_reason_ = nvrtc.error().message;
      return;
    }
    codegen::KernelPackage base;
    base.spec_name = "scale_rows";
    base.sizes = {{"M", kRows}, {"N", kCols}};
    base.arch = GpuArch::Sm80;
    base.nvrtc_version = (*nvrtc)->version();
    base.source = kSource;
    for (GpuArch arch : {GpuArch::Sm80, GpuArch::Sm90a}) {
      codegen::NvrtcOptions options;
      options.arch = arch;
      auto compiled = (*nvrtc)->compile(kSource, "kernel.cu", options);
      if (!compiled.ok()) {
        skip_reason_ = compiled.error().message + "\n" + compiled.error().log;
        return;
      }
      base.cubins[arch] = compiled->cubin;
      base.ptx[arch] = compiled->ptx;
    }
    base.buffers = {{"X", {kRows, kCols}, DType::BF16, "input"},
                    {"w", {kCols}, DType::F32, "input"},
                    {"Y", {kRows, kCols}, DType::F32, "output"}};
    auto write = [&](const std::string& name, const std::string& kernel,
                     std::array<int64_t, 3> grid, std::array<int64_t, 3> block) {
      codegen::KernelPackage package = base;
      package.kernels = {{kernel, grid, block, 0, base.buffers}};
      const std::string dir = root_ + "/" + name;
      auto written = codegen::write_package(package, dir);
      EXPECT_TRUE(written.ok()) << written.error().message;
      return dir;
    };
    const int64_t blocks = (int64_t{kRows} * kCols + 255) / 256;
    packages_.good = write("good", "scale_rows", {blocks, 1, 1}, {256, 1, 1});
    packages_.reference = write("reference", "scale_rows_reference", {kRows, 1, 1}, {128, 1, 1});
    packages_.wrong = write("wrong", "scale_rows_wrong", {blocks, 1, 1}, {256, 1, 1});
    packages_.out_of_bounds =
        write("out_of_bounds", "scale_rows_out_of_bounds", {blocks, 1, 1}, {256, 1, 1});
    packages_.forever = write("forever", "scale_rows_forever", {1, 1, 1}, {32, 1, 1});
  }

  static void TearDownTestSuite() { temp_.reset(); }

  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << "cannot build the test packages: " << skip_reason_;
  }

  static RunResult run(const std::string& package, const std::string& reference,
                       double gpu_timeout = 30) {
    RunRequest request;
    request.package_dir = package;
    request.reference_dir = reference;
    request.seed = 5;
    request.warmup = 3;
    request.repetitions = 20;
    request.gpu_timeout_seconds = gpu_timeout;
    ClientOptions options;
    options.command_template = "'" + testing::runner_path() + "'";
    options.timeout_seconds = 120;
    return run_package(request, options);
  }

  // Skips the calling test when the runner reports no GPU (after checking it said so cleanly).
  static bool no_gpu(const RunResult& result) {
    if (result.status != RunStatus::NoGpu) return false;
    EXPECT_EQ(result.process.exit_code, 3);
    EXPECT_EQ(result.report["errors"][0]["kind"], "no_gpu");
    return true;
  }

  static inline std::unique_ptr<TempDir> temp_;
  static inline std::string root_;
  static inline std::string skip_reason_;
  static inline Packages packages_;
};

TEST_F(RunnerOnGpu, CorrectKernelValidatesAndIsTimedWithCupti) {
  RunResult result = run(packages_.good, packages_.reference);
  if (no_gpu(result)) GTEST_SKIP() << result.message;
  ASSERT_EQ(result.status, RunStatus::Ok) << result.message << "\n" << result.process.stdout_text;
  EXPECT_EQ(result.validation_passed, true);
  EXPECT_LT(result.max_relative_error.value_or(1), 1e-6);
  const auto& timing = result.report["timing"];
  EXPECT_EQ(timing["timer"], "cupti") << timing.dump(2);
  EXPECT_GT(timing["total"]["median_us"].get<double>(), 0.0);
  EXPECT_LE(timing["kernels"][0]["min_us"].get<double>(), timing["kernels"][0]["median_us"].get<double>());
  std::cout << result.process.stdout_text;
}

TEST_F(RunnerOnGpu, WrongKernelIsCaught) {
  RunResult result = run(packages_.wrong, packages_.reference);
  if (no_gpu(result)) GTEST_SKIP() << result.message;
  EXPECT_EQ(result.status, RunStatus::WrongResults) << result.message;
  EXPECT_EQ(result.validation_passed, false);
}

TEST_F(RunnerOnGpu, OutOfBoundsStoreIsAnIllegalMemoryAccessAndTheGpuStaysUsable) {
  RunResult result = run(packages_.out_of_bounds, packages_.reference);
  if (no_gpu(result)) GTEST_SKIP() << result.message;
  EXPECT_EQ(result.status, RunStatus::IllegalMemoryAccess) << result.message << "\n"
                                                           << result.process.stdout_text;
  EXPECT_EQ(result.report["errors"][0]["kernel"], "scale_rows_out_of_bounds");
  std::cout << result.process.stdout_text;
  // The fault died with the runner process: the next run on the same GPU is fine.
  EXPECT_EQ(run(packages_.good, packages_.reference).status, RunStatus::Ok);
}

TEST_F(RunnerOnGpu, KernelThatNeverEndsIsATimeout) {
  RunResult result = run(packages_.forever, "", /*gpu_timeout=*/2);
  if (no_gpu(result)) GTEST_SKIP() << result.message;
  EXPECT_EQ(result.status, RunStatus::Timeout) << result.message;
  EXPECT_EQ(result.report["errors"][0]["kernel"], "scale_rows_forever");
  EXPECT_EQ(run(packages_.good, packages_.reference).status, RunStatus::Ok);
}

}  // namespace
}  // namespace nautilus::profiler
