// DRAM bandwidth of a tiled stream by the width of a CTA's column tile: the cost model's question
// "does a CTA that reads 64 bytes of each row of a row-major [K, N] operand pull the same bandwidth
// as one that reads 128?" (an int8 weight W[K, N] read in 1 x 64 x 128 against 1 x 128 x 128
// tiles). Every CTA walks all K rows of its column band, R rows per step, through a ring of
// cp.async stages, the way the generated GEMM main loop does; each thread then folds the words of
// the landed stage so the copies cannot be dropped. The grid covers all N columns once (blockIdx.x
// fastest along N, as `bind(Y_sum, n_o=grid.x)`), so every byte is read from DRAM once.
// Before each timed launch a 512 MB buffer is read (clean lines: nothing is written back during
// the timed kernel). Build and run on the GPU host:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a dram_runs.cu -o dram_runs && ./dram_runs
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

__device__ unsigned g_sink[1 << 16];

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One CTA per `width`-byte column band; `rows` rows per step; `stages` deep ring.
__global__ void stream_band(const uint8_t* __restrict__ src, int K, int N, int width, int rows,
                            int stages) {
  extern __shared__ __align__(128) uint8_t ring[];
  const int stage_bytes = width * rows;
  const int chunks = stage_bytes / 16;  // 16-byte cp.async per chunk
  const int chunks_per_row = width / 16;
  const size_t column = static_cast<size_t>(blockIdx.x) * width;
  const int steps = K / rows;
  auto issue = [&](int step) {
    if (step < steps) {
      uint8_t* dst = ring + (step % stages) * stage_bytes;
      for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
        const int r = c / chunks_per_row, q = c % chunks_per_row;
        const uint8_t* g = src + (static_cast<size_t>(step) * rows + r) * N + column + q * 16;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst + c * 16)),
                     "l"(g));
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int s = 0; s + 1 < stages; ++s) issue(s);
  unsigned acc = 0;
  for (int step = 0; step < steps; ++step) {
    issue(step + stages - 1);
    // Wait until at most stages-1 groups are in flight: this step's stage has landed.
    switch (stages) {
      case 2: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
      case 3: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
      case 4: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
      default: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    }
    __syncthreads();
    // One word per thread: the stage is consumed (so the copies are waited for) at no cost that
    // would depend on the tile's width.
    const uint32_t* words = reinterpret_cast<const uint32_t*>(ring + (step % stages) * stage_bytes);
    acc += words[threadIdx.x % (stage_bytes / 4)];
    __syncthreads();
  }
  if (acc == 0x12345678u) g_sink[blockIdx.x & 0xffff] = acc;
}

__global__ void read_all(const int4* __restrict__ p, size_t n) {
  int acc = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc ^= p[i].x;
  if (acc == 0x7fffffff) g_sink[0] = acc;
}

int main(int argc, char** argv) {
  const int K = argc > 1 ? atoi(argv[1]) : 8192;
  const int N = argc > 2 ? atoi(argv[2]) : 28672;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs; matrix %d x %d bytes (%.1f MB), L2 flushed by reading 512 MB\n",
         prop.name, prop.multiProcessorCount, K, N, double(K) * N / 1e6);
  uint8_t* src = nullptr;
  CHECK(cudaMalloc(&src, size_t(K) * N));
  CHECK(cudaMemset(src, 1, size_t(K) * N));
  const size_t flush_bytes = size_t(512) << 20;
  int4* flush = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMemset(flush, 0, flush_bytes));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaFuncSetAttribute(stream_band, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  struct Form { int width, rows, warps, stages; };
  std::vector<Form> forms;
  // Each width with one warp per 32 bytes of it (every thread issues 8 copies per stage, as a
  // generated int8 decode tile of 4 atoms per warp does), then with 4 and 8 warps whatever the
  // width, then deeper rings.
  for (int width : {16, 32, 64, 128, 256, 512}) forms.push_back({width, 128, std::max(1, width / 32), 3});
  for (int width : {16, 32, 64, 128, 256, 512}) {
    for (int warps : {4, 8}) forms.push_back({width, 128, warps, 3});
  }
  for (int width : {32, 64, 128}) forms.push_back({width, 128, std::max(1, width / 32), 4});
  for (int width : {32, 64, 128}) forms.push_back({width, 256, std::max(1, width / 32), 3});
  printf("%-6s %-5s %-5s %-6s %-6s %-10s %-8s\n", "width", "rows", "warps", "stages", "CTAs", "us(median)", "GB/s");
  for (const Form& f : forms) {
    if (N % f.width || K % f.rows) continue;
    const int ctas = N / f.width;
    const int shared = f.width * f.rows * f.stages;
    std::vector<float> times;
    for (int rep = 0; rep < 21; ++rep) {
      read_all<<<4 * prop.multiProcessorCount, 512>>>(flush, flush_bytes / 16);
      CHECK(cudaEventRecord(a));
      stream_band<<<ctas, 32 * f.warps, shared>>>(src, K, N, f.width, f.rows, f.stages);
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      CHECK(cudaGetLastError());
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      if (rep > 0) times.push_back(ms * 1000.f);
    }
    std::sort(times.begin(), times.end());
    const float us = times[times.size() / 2];
    printf("RESULT width %-4d rows %-4d warps %-2d stages %d ctas %-6d %8.1f us %7.0f GB/s\n", f.width,
           f.rows, f.warps, f.stages, ctas, us, double(K) * N / (us * 1e-6) / 1e9);
  }
  return 0;
}
