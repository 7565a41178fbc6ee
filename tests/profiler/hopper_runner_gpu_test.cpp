// The runner's Hopper plumbing on a real sm_90 GPU (label gpu): a small hand-written sm_90a
// kernel source (inline PTX, compiled here with NVRTC through the Hopper gate) in packages whose
// arguments are TMA tensor maps. Each kernel loads boxes with cp.async.bulk.tensor into shared
// memory, completing on an mbarrier (init, fence.mbarrier_init, arrive.expect_tx,
// try_wait.parity), and copies them back to global memory, undoing the 128-byte swizzle; a plain
// reference kernel computes the same output from pointers. The runner validates each against its
// reference on random data with an exact-match requirement, boxes past the ragged edge
// included (TMA fills them with zeros). Cases: a 2-D map (128B swizzle; the same map without the
// swizzle must fail validation), a 3-D map that splits
// 256-byte rows into 128-byte boxes (64 KiB of dynamic shared memory: the opt-in attribute), a
// cluster launch in which every CTA reads its peer's tile through distributed shared memory
// (wrong without the cluster), an mbarrier that never completes (timeout, the GPU usable after)
// and a store far out of bounds after the TMA load (illegal memory access, the GPU usable after).
//
// This tests the runner, not generated code. Without a GPU the packages are still built and the
// runner must answer "no GPU"; the tests then skip. NAUTILUS_PROFILER_KEEP_PACKAGES=DIR keeps
// the packages.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "core/codegen/nvrtc.h"
#include "core/codegen/package.h"
#include "profiler/runner_client.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using codegen::GpuArch;
using codegen::KernelArgument;
using codegen::TensorMapSwizzle;
using testing::TempDir;

const char* kSource = R"(
#include <cuda_bf16.h>

// The CUtensorMap as a kernel parameter: 128 opaque bytes, 64-byte aligned.
struct __align__(64) TmaMap { unsigned long long words[16]; };

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbarrier_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ bool mbarrier_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaMap* map, int x, int y,
                                            unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];"
               :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TmaMap* map, int x, int y, int z,
                                            unsigned bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
               ::: "memory");
}
// Where TMA's 128-byte swizzle puts byte `offset` of a box with 128-byte rows: the 16-byte chunk
// (bits 4-6) XOR the row modulo 8 (bits 7-9). The box starts 1024-byte aligned.
__device__ __forceinline__ unsigned swizzle128(unsigned offset) {
  return offset ^ (((offset >> 7) & 7u) << 4);
}

extern __shared__ __align__(1024) unsigned char dynamic_smem[];

// The 1024-byte-aligned start of dynamic shared memory (the launch asks for 1 KiB extra).
__device__ __forceinline__ unsigned aligned_tile(const unsigned char** generic) {
  const unsigned base = smem_address(dynamic_smem);
  const unsigned tile = (base + 1023u) & ~1023u;
  *generic = dynamic_smem + (tile - base);
  return tile;
}

// ---- 2-D: X [100, 200] bf16 in boxes of 32 x 64 (128B swizzle); Y [128, 256] holds every box,
// zeros past the edge.
#define ROWS 100
#define COLS 200
#define BOX_ROWS 32
#define BOX_COLS 64
#define OUT_ROWS 128
#define OUT_COLS 256

// Loads this CTA's box of X into `tile` and waits for it; `extra_tx` bytes more are expected
// than arrive (0 in a correct kernel).
__device__ __forceinline__ void load_box_2d(const TmaMap& X, unsigned tile, unsigned bar,
                                            unsigned extra_tx) {
  if (threadIdx.x == 0) mbarrier_init(bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_expect_tx(bar, BOX_ROWS * BOX_COLS * 2 + extra_tx);
    tma_load_2d(tile, &X, blockIdx.x * BOX_COLS, blockIdx.y * BOX_ROWS, bar);
  }
  while (!mbarrier_try_wait(bar, 0)) {
  }
}

extern "C" __global__ void tma_tile_2d(const __grid_constant__ TmaMap X, __nv_bfloat16* Y) {
  __shared__ __align__(8) unsigned long long barrier;
  const unsigned char* tile_ptr;
  const unsigned tile = aligned_tile(&tile_ptr);
  load_box_2d(X, tile, smem_address(&barrier), 0);
  for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += blockDim.x) {
    const int r = i / BOX_COLS, c = i % BOX_COLS;
    Y[(blockIdx.y * BOX_ROWS + r) * OUT_COLS + blockIdx.x * BOX_COLS + c] =
        *reinterpret_cast<const __nv_bfloat16*>(tile_ptr + swizzle128(i * 2));
  }
}

extern "C" __global__ void tile_2d_reference(const __nv_bfloat16* X, __nv_bfloat16* Y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= OUT_ROWS * OUT_COLS) return;
  const int r = i / OUT_COLS, c = i % OUT_COLS;
  Y[i] = r < ROWS && c < COLS ? X[r * COLS + c] : __float2bfloat16(0.0f);
}

// Launched in clusters of 2 along x: each CTA writes its peer's box, read from the peer's shared
// memory. Outside a cluster of 2 it writes nothing (the runner's NaN poison stays).
extern "C" __global__ void tma_cluster_swap(const __grid_constant__ TmaMap X, __nv_bfloat16* Y) {
  __shared__ __align__(8) unsigned long long barrier;
  const unsigned char* tile_ptr;
  const unsigned tile = aligned_tile(&tile_ptr);
  load_box_2d(X, tile, smem_address(&barrier), 0);
  unsigned ranks, rank;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ranks));
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  cluster_sync();  // every CTA's box has landed
  if (ranks == 2) {
    unsigned peer_tile;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer_tile) : "r"(tile), "r"(rank ^ 1u));
    const unsigned peer_x = blockIdx.x ^ 1u;
    for (int i = threadIdx.x; i < BOX_ROWS * BOX_COLS; i += blockDim.x) {
      const int r = i / BOX_COLS, c = i % BOX_COLS;
      unsigned short bits;
      asm volatile("ld.shared::cluster.u16 %0, [%1];" : "=h"(bits) : "r"(peer_tile + swizzle128(i * 2)));
      Y[(blockIdx.y * BOX_ROWS + r) * OUT_COLS + peer_x * BOX_COLS + c] = __ushort_as_bfloat16(bits);
    }
  }
  cluster_sync();  // the peer reads this CTA's box until here
}

// Expects 16 bytes more than the box: the phase never completes and the kernel never ends.
extern "C" __global__ void tma_expect_tx_too_many(const __grid_constant__ TmaMap X, __nv_bfloat16* Y) {
  __shared__ __align__(8) unsigned long long barrier;
  const unsigned char* tile_ptr;
  const unsigned tile = aligned_tile(&tile_ptr);
  load_box_2d(X, tile, smem_address(&barrier), 16);
  Y[threadIdx.x] = *reinterpret_cast<const __nv_bfloat16*>(tile_ptr);
}

// A correct load, then a store a terabyte past Y.
extern "C" __global__ void tma_then_out_of_bounds(const __grid_constant__ TmaMap X, __nv_bfloat16* Y) {
  __shared__ __align__(8) unsigned long long barrier;
  const unsigned char* tile_ptr;
  const unsigned tile = aligned_tile(&tile_ptr);
  load_box_2d(X, tile, smem_address(&barrier), 0);
  Y[threadIdx.x + (1L << 39)] = *reinterpret_cast<const __nv_bfloat16*>(tile_ptr + threadIdx.x * 2);
}

// ---- 3-D: X3 [300, 128] bf16 read as {64, rows, 2}: two 128-byte halves of each 256-byte row,
// boxes of 2 x 256 x 64 (64 KiB, 128B swizzle); Y3 [512, 128], zeros past row 300.
#define ROWS3 300
#define BOX_ROWS3 256
#define OUT_ROWS3 512

extern "C" __global__ void tma_split_3d(const __grid_constant__ TmaMap X, __nv_bfloat16* Y) {
  __shared__ __align__(8) unsigned long long barrier;
  const unsigned bar = smem_address(&barrier);
  const unsigned char* tile_ptr;
  const unsigned tile = aligned_tile(&tile_ptr);
  if (threadIdx.x == 0) mbarrier_init(bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_expect_tx(bar, 2 * BOX_ROWS3 * 64 * 2);
    tma_load_3d(tile, &X, 0, blockIdx.y * BOX_ROWS3, 0, bar);
  }
  while (!mbarrier_try_wait(bar, 0)) {
  }
  for (int i = threadIdx.x; i < 2 * BOX_ROWS3 * 64; i += blockDim.x) {
    const int half = i / (BOX_ROWS3 * 64), r = (i / 64) % BOX_ROWS3, c = i % 64;
    Y[(blockIdx.y * BOX_ROWS3 + r) * 128 + half * 64 + c] =
        *reinterpret_cast<const __nv_bfloat16*>(tile_ptr + swizzle128(i * 2));
  }
}

extern "C" __global__ void split_3d_reference(const __nv_bfloat16* X, __nv_bfloat16* Y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= OUT_ROWS3 * 128) return;
  Y[i] = i / 128 < ROWS3 ? X[i] : __float2bfloat16(0.0f);
}
)";

struct Packages {
  std::string tile_2d, tile_2d_unswizzled, tile_2d_reference, cluster, cluster_without_cluster, split_3d,
      split_3d_reference, deadlock, fault;
};

class HopperRunnerOnGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* keep = std::getenv("NAUTILUS_PROFILER_KEEP_PACKAGES");
    if (keep == nullptr || *keep == '\0') temp_ = std::make_unique<TempDir>();
    root_ = keep != nullptr && *keep != '\0' ? std::string(keep) + "/hopper" : temp_->path();
    std::filesystem::create_directories(root_);

    const auto& nvrtc = codegen::Nvrtc::shared();
    if (!nvrtc.ok()) {
      skip_reason_ = nvrtc.error().message;
      return;
    }
    codegen::NvrtcOptions options;
    options.arch = GpuArch::Sm90a;
    auto compiled = (*nvrtc)->compile(kSource, "kernel.cu", options);
    // The source must pass the Hopper gate: a failure here is a test bug, not a skip.
    ASSERT_TRUE(compiled.ok()) << compiled.error().message << "\n" << compiled.error().log;
    codegen::KernelPackage base;
    base.spec_name = "hopper_runner";
    base.arch = GpuArch::Sm90a;
    base.nvrtc_version = (*nvrtc)->version();
    base.nvrtc_options = compiled->options;
    base.source = kSource;
    base.cubins[GpuArch::Sm90a] = compiled->cubin;
    base.ptx[GpuArch::Sm90a] = compiled->ptx;
    base.report = compiled->report;

    const KernelArgument x{"X", {100, 200}, DType::BF16, "input"};
    const KernelArgument y{"Y", {128, 256}, DType::BF16, "output"};
    KernelArgument x_map = x;
    x_map.tensor_map = codegen::row_major_tensor_map(x, {64, 32}, TensorMapSwizzle::B128);
    const KernelArgument x3{"X", {300, 128}, DType::BF16, "input"};
    const KernelArgument y3{"Y", {512, 128}, DType::BF16, "output"};
    KernelArgument x3_map = x3;
    codegen::TensorMap split;
    split.dims = {64, 300, 2};
    split.strides_bytes = {256, 128};
    split.box = {64, 256, 2};
    split.element_strides = {1, 1, 1};
    split.swizzle = TensorMapSwizzle::B128;
    split.l2_promotion = codegen::TensorMapL2Promotion::B128;
    x3_map.tensor_map = split;

    auto write = [&](const std::string& name, const std::string& kernel_name,
                     std::vector<KernelArgument> arguments, std::array<int64_t, 3> grid,
                     int64_t dynamic_shared,
                     std::optional<std::array<int64_t, 3>> cluster = std::nullopt) {
      codegen::KernelPackage package = base;
      for (const KernelArgument& argument : arguments) {
        KernelArgument buffer = argument;
        buffer.tensor_map.reset();
        package.buffers.push_back(buffer);
      }
      codegen::KernelLaunch kernel;
      kernel.name = kernel_name;
      kernel.grid = grid;
      kernel.block = {128, 1, 1};
      kernel.cluster = cluster;
      kernel.dynamic_shared_bytes = dynamic_shared;
      kernel.arguments = std::move(arguments);
      package.kernels = {kernel};
      const std::string dir = root_ + "/" + name;
      auto written = codegen::write_package(package, dir);
      EXPECT_TRUE(written.ok()) << written.error().message;
      return dir;
    };
    const int64_t box_smem = 32 * 64 * 2 + 1024;
    packages_.tile_2d = write("tile_2d", "tma_tile_2d", {x_map, y}, {4, 4, 1}, box_smem);
    // The same kernel over a map without the swizzle its reads undo: the check must see it.
    KernelArgument x_plain = x;
    x_plain.tensor_map = codegen::row_major_tensor_map(x, {64, 32}, TensorMapSwizzle::None);
    packages_.tile_2d_unswizzled =
        write("tile_2d_unswizzled", "tma_tile_2d", {x_plain, y}, {4, 4, 1}, box_smem);
    packages_.tile_2d_reference =
        write("tile_2d_reference", "tile_2d_reference", {x, y}, {256, 1, 1}, 0);
    packages_.cluster = write("cluster", "tma_cluster_swap", {x_map, y}, {4, 4, 1}, box_smem,
                              std::array<int64_t, 3>{2, 1, 1});
    packages_.cluster_without_cluster =
        write("cluster_without_cluster", "tma_cluster_swap", {x_map, y}, {4, 4, 1}, box_smem);
    packages_.split_3d = write("split_3d", "tma_split_3d", {x3_map, y3}, {1, 2, 1},
                               2 * 256 * 64 * 2 + 1024);
    packages_.split_3d_reference =
        write("split_3d_reference", "split_3d_reference", {x3, y3}, {512, 1, 1}, 0);
    packages_.deadlock =
        write("deadlock", "tma_expect_tx_too_many", {x_map, y}, {1, 1, 1}, box_smem);
    packages_.fault = write("fault", "tma_then_out_of_bounds", {x_map, y}, {4, 4, 1}, box_smem);
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
    request.seed = 11;
    request.warmup = 2;
    request.repetitions = 10;
    request.gpu_timeout_seconds = gpu_timeout;
    ClientOptions options;
    options.command_template = "'" + testing::runner_path() + "'";
    options.timeout_seconds = 120;
    return run_package(request, options);
  }

  // Skips the calling test when the runner reports no GPU or a GPU without TMA.
  static std::optional<std::string> skip(const RunResult& result) {
    if (result.status == RunStatus::NoGpu) {
      EXPECT_EQ(result.process.exit_code, 3);
      return result.message;
    }
    const auto& device = result.report.value("device", nlohmann::json());
    if (device.is_object() && device.contains("compute_capability") &&
        device["compute_capability"] != "9.0") {
      return "the GPU is " + device["compute_capability"].get<std::string>() +
             ", not sm_90 (the test cubin is sm_90a)";
    }
    return std::nullopt;
  }

  // An exact copy: every element equal (the normwise error is 0 only if each one is).
  static void expect_exact(const RunResult& result) {
    ASSERT_EQ(result.status, RunStatus::Ok) << result.message << "\n" << result.process.stdout_text;
    EXPECT_EQ(result.validation_passed, true);
    EXPECT_EQ(result.max_relative_error.value_or(1), 0.0) << result.process.stdout_text;
    const auto& output = result.report["validation"]["outputs"][0];
    EXPECT_EQ(output["max_abs_error"], 0.0);
    EXPECT_EQ(output["mismatched_nonfinite"], 0);
    std::cout << result.report["package"]["path"] << ": "
              << result.report["timing"]["kernels"][0].dump() << "\n";
  }

  static inline std::unique_ptr<TempDir> temp_;
  static inline std::string root_;
  static inline std::string skip_reason_;
  static inline Packages packages_;
};

TEST_F(HopperRunnerOnGpu, TmaLoadsOf2DBoxesWithSwizzleAndRaggedEdge) {
  RunResult result = run(packages_.tile_2d, packages_.tile_2d_reference);
  if (auto reason = skip(result)) GTEST_SKIP() << *reason;
  expect_exact(result);
  // The swizzle reaches the hardware: without it the same reads land on other elements.
  RunResult unswizzled = run(packages_.tile_2d_unswizzled, packages_.tile_2d_reference);
  EXPECT_EQ(unswizzled.status, RunStatus::WrongResults) << unswizzled.message;
}

TEST_F(HopperRunnerOnGpu, ThreeDimensionalMapSplittingRowsIntoSwizzleSpans) {
  RunResult result = run(packages_.split_3d, packages_.split_3d_reference);
  if (auto reason = skip(result)) GTEST_SKIP() << *reason;
  expect_exact(result);
  EXPECT_EQ(result.report["timing"]["kernels"][0]["dynamic_shared_memory"], 2 * 256 * 64 * 2 + 1024);
}

TEST_F(HopperRunnerOnGpu, ClusterLaunchSharesTilesAcrossCtas) {
  RunResult result = run(packages_.cluster, packages_.tile_2d_reference);
  if (auto reason = skip(result)) GTEST_SKIP() << *reason;
  expect_exact(result);
  EXPECT_EQ(result.report["timing"]["kernels"][0]["cluster"], nlohmann::json({2, 1, 1}));
  // The same kernel launched without the cluster leaves its output unwritten.
  RunResult alone = run(packages_.cluster_without_cluster, packages_.tile_2d_reference);
  EXPECT_EQ(alone.status, RunStatus::WrongResults) << alone.message;
}

TEST_F(HopperRunnerOnGpu, MbarrierThatNeverCompletesIsATimeout) {
  RunResult result = run(packages_.deadlock, "", /*gpu_timeout=*/3);
  if (auto reason = skip(result)) GTEST_SKIP() << *reason;
  EXPECT_EQ(result.status, RunStatus::Timeout) << result.message << "\n" << result.process.stdout_text;
  EXPECT_EQ(result.report["errors"][0]["kernel"], "tma_expect_tx_too_many");
  std::cout << result.process.stdout_text;
  // The hung kernel died with the runner: the GPU runs the next package.
  EXPECT_EQ(run(packages_.tile_2d, packages_.tile_2d_reference).status, RunStatus::Ok);
}

TEST_F(HopperRunnerOnGpu, FaultAfterATmaLoadIsAnIllegalMemoryAccess) {
  RunResult result = run(packages_.fault, packages_.tile_2d_reference);
  if (auto reason = skip(result)) GTEST_SKIP() << *reason;
  EXPECT_EQ(result.status, RunStatus::IllegalMemoryAccess) << result.message << "\n"
                                                           << result.process.stdout_text;
  EXPECT_EQ(result.report["errors"][0]["kernel"], "tma_then_out_of_bounds");
  std::cout << result.process.stdout_text;
  EXPECT_EQ(run(packages_.tile_2d, packages_.tile_2d_reference).status, RunStatus::Ok);
}

}  // namespace
}  // namespace nautilus::profiler
