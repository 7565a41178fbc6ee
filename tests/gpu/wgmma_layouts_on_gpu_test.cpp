// The Hopper layouts of core/layout checked on an sm_90 GPU (label gpu): a wrong descriptor or
// accumulator layout gives silently wrong numbers, so each combination is run for real.
//
// For each swizzle mode (none, SW32, SW64, SW128) x operand major-ness (A and B K-major; B
// MN-major; A MN-major) x N, one warpgroup computes D = A[64:128, :] * B (64 x N x 128, bf16 in,
// f32 out) with wgmma.mma_async m64nNk16, one k16 slice after another:
//  - the shared tiles are wgmma_shared_layout() tiles (A 128 x 128, B N x 128), filled by
//    ordinary 2-byte stores at the byte offsets the ComposedLayout gives (shared memory is first
//    poisoned with NaNs, so a read of anything else shows);
//  - A's descriptors are the first block's wgmma_descriptor() moved by wgmma_block_offsets() to
//    m-block 1 and each k slice, B's are wgmma_descriptor() of each k slice;
//  - each thread writes its accumulator registers where wgmma_accumulator(N) says they belong;
//  - the result is compared with a float64 product of the same (never zero) bf16 inputs.
// A second test corrupts one descriptor field at a time (swizzle mode, SBO, start) and expects
// most products to be wrong, so the comparison is known to catch a descriptor mismatch.
// The kernels are compiled with NVRTC for sm_90a. Without NVRTC or an sm_90 GPU the test skips
// and says why; the kernels are still compiled when NVRTC is there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/codegen/nvrtc.h"
#include "core/layout/printer.h"
#include "core/layout/wgmma.h"
#include "profiler/cuda_driver.h"
#include "profiler/gpu_session.h"
#include "tests/gpu/sm90_device.h"

namespace nautilus {
namespace {

using layout::ComposedLayout;
using layout::OperandMajor;
using layout::SwizzleMode;

constexpr int64_t kM = 64;          // one wgmma's rows; A holds two such blocks
constexpr int64_t kTileRowsA = 128;
constexpr int64_t kK = 128;         // 8 k16 slices; SW128 K-major tiles hold 2 atoms along k
constexpr int kThreads = 128;

std::string kernel_name(int64_t n, OperandMajor a, OperandMajor b) {
  return "wgmma_n" + std::to_string(n) + "_a" + (a == OperandMajor::MN ? "1" : "0") + "_b" +
         (b == OperandMajor::MN ? "1" : "0");
}

// One kernel per (N, transpose A, transpose B): those are immediates of the instruction. All
// parameters are device pointers (params = {a_count, b_count, k_steps, poisoned halves}).
std::string kernel_source(int64_t n, OperandMajor a, OperandMajor b) {
  std::ostringstream s;
  const int64_t regs = n / 2;
  s << "extern \"C\" __global__ void __launch_bounds__(128, 1) " << kernel_name(n, a, b)
    << "(const unsigned short* a_values, const int* a_offsets, const unsigned short* b_values,\n"
       "    const int* b_offsets, const unsigned long long* a_descriptors,\n"
       "    const unsigned long long* b_descriptors, const int* params, const int* out_index,\n"
       "    float* out) {\n"
       "  extern __shared__ unsigned char shared_raw[];\n"
       "  const unsigned raw = (unsigned)__cvta_generic_to_shared(shared_raw);\n"
       "  const unsigned base = (raw + 1023u) & ~1023u;  // tiles start 1024-B aligned\n"
       "  unsigned char* tiles = shared_raw + (base - raw);\n"
       "  for (int i = threadIdx.x; i < params[3]; i += 128) ((unsigned short*)tiles)[i] = 0x7FC0;\n"
       "  __syncthreads();\n"
       "  for (int i = threadIdx.x; i < params[0]; i += 128)\n"
       "    *(unsigned short*)(tiles + a_offsets[i]) = a_values[i];\n"
       "  for (int i = threadIdx.x; i < params[1]; i += 128)\n"
       "    *(unsigned short*)(tiles + b_offsets[i]) = b_values[i];\n"
       "  asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
       "  __syncthreads();\n"
       "  float d["
    << regs
    << "];\n"
       "#pragma unroll\n"
       "  for (int i = 0; i < "
    << regs
    << "; ++i) d[i] = 0.0f;\n"
       "  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n"
       "  for (int step = 0; step < params[2]; ++step) {\n"
       "    // The descriptors were made for tiles at shared address 0: add the real start.\n"
       "    const unsigned long long da = a_descriptors[step] + (base >> 4);\n"
       "    const unsigned long long db = b_descriptors[step] + (base >> 4);\n"
       "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %"
    << regs + 2 << ", 0;\\nwgmma.mma_async.sync.aligned.m64n" << n
    << "k16.f32.bf16.bf16 {";
  for (int64_t i = 0; i < regs; ++i) s << (i ? ", " : "") << "%" << i;
  s << "}, %" << regs << ", %" << regs + 1 << ", p, 1, 1, "
    << (a == OperandMajor::MN ? 1 : 0) << ", " << (b == OperandMajor::MN ? 1 : 0)
    << ";\\n}\\n\"\n      : ";
  for (int64_t i = 0; i < regs; ++i) s << (i ? ", " : "") << "\"+f\"(d[" << i << "])";
  s << "\n      : \"l\"(da), \"l\"(db), \"r\"(1));\n"
       "  }\n"
       "  asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n"
       "  asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");\n"
       "#pragma unroll\n"
       "  for (int i = 0; i < "
    << regs << "; ++i) out[out_index[threadIdx.x * " << regs << " + i]] = d[i];\n}\n";
  return s.str();
}

struct Combination {
  OperandMajor a, b;
  std::vector<int64_t> ns;
};

// N = 24 only where B is K-major: an MN-major swizzled B needs whole swizzle rows of N.
const std::vector<Combination>& combinations() {
  static const std::vector<Combination> all = {
      {OperandMajor::K, OperandMajor::K, {24, 64, 256}},
      {OperandMajor::K, OperandMajor::MN, {64, 256}},
      {OperandMajor::MN, OperandMajor::K, {64, 256}},
  };
  return all;
}

uint16_t to_bf16_bits(float value) {  // round to nearest even
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float from_bf16_bits(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A bf16 operand tile: values in (mn, k) column-major order and the shared byte offset of each.
struct Operand {
  ComposedLayout tile;
  std::vector<uint16_t> bits;
  std::vector<float> values;
  std::vector<int32_t> offsets;
};

Operand make_operand(OperandMajor major, SwizzleMode mode, int64_t mn, int64_t start,
                     std::mt19937& random) {
  Operand op{layout::wgmma_shared_layout(major, mode, 2, mn, kK).value(), {}, {}, {}};
  std::uniform_real_distribution<float> magnitude(0.25f, 2.0f);
  for (int64_t i = 0; i < mn * kK; ++i) {
    const float v = (random() & 1 ? 1.0f : -1.0f) * magnitude(random);
    op.bits.push_back(to_bf16_bits(v));
    op.values.push_back(from_bf16_bits(op.bits.back()));
    op.offsets.push_back(static_cast<int32_t>(start + 2 * op.tile(i)));
  }
  return op;
}

class WgmmaLayoutsOnGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto& nvrtc = codegen::Nvrtc::shared();
    if (!nvrtc.ok()) {
      skip_reason_ = "NVRTC is not installed: " + nvrtc.error().message;
      return;
    }
    std::string source;
    for (const Combination& c : combinations()) {
      for (int64_t n : c.ns) source += kernel_source(n, c.a, c.b);
    }
    codegen::NvrtcOptions options;
    options.arch = codegen::GpuArch::Sm90a;
    auto compiled = (*nvrtc)->compile(source, "wgmma_layouts.cu", options);
    // A compile failure is a failure of the test, not a reason to skip.
    ASSERT_TRUE(compiled.ok()) << compiled.error().message << "\n" << compiled.error().log;
    cubin_ = compiled->cubin;
    for (const std::string& warning : compiled->report.warnings) std::cout << warning << "\n";

    testing::Sm90Device device = testing::find_sm90_device("wgmma");
    driver_ = device.driver;
    device_name_ = device.name;
    skip_reason_ = device.skip_reason;
  }

  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  }

  static inline std::vector<uint8_t> cubin_;
  static inline std::shared_ptr<const profiler::CudaDriver> driver_;
  static inline std::string device_name_;
  static inline std::string skip_reason_;
};

// What one product gave: elements outside the tolerance, the largest error relative to
// sum |a*b|, and the kernel's registers; `failure` says why it could not run.
struct CaseResult {
  int64_t wrong = 0;
  double worst = 0;
  int registers = 0;
  std::string failure;
};

// Runs D = A[64:128, :] * B for one swizzle mode, pair of major-nesses and N. `corrupt_b`
// rewrites B's descriptors (the negative control); identity otherwise.
CaseResult run_case(profiler::GpuSession& session, profiler::cu::Module module, SwizzleMode mode,
                    const Combination& c, int64_t n, std::mt19937& random,
                    uint64_t (*corrupt_b)(uint64_t) = nullptr) {
  CaseResult result;
  // 1. Tiles: A at shared byte 0, B after it (both multiples of 1024).
  const int64_t a_bytes = kTileRowsA * kK * 2, b_bytes = n * kK * 2;
  const int64_t b_start = (a_bytes + 1023) / 1024 * 1024;
  const int64_t shared_bytes = b_start + b_bytes;
  const Operand a = make_operand(c.a, mode, kTileRowsA, 0, random);
  const Operand b = make_operand(c.b, mode, n, b_start, random);
  // 2. Descriptors: A's m-block 1 reached through the block offsets, B's slice by slice.
  const int64_t k_steps = kK / layout::wgmma_k_extent(2);
  const layout::WgmmaDescriptor a_first = layout::wgmma_descriptor(a.tile, 2, c.a, 0, kM).value();
  const layout::Layout a_steps = layout::wgmma_block_offsets(a.tile, 2, c.a, kM).value();
  std::vector<uint64_t> a_descriptors, b_descriptors;
  for (int64_t s = 0; s < k_steps; ++s) {
    const int64_t step = a_steps.evaluate(layout::tuple_of(1, s)).value();
    a_descriptors.push_back(a_first.encode() + static_cast<uint64_t>(step >> 4));
    const uint64_t b_bits = layout::wgmma_descriptor(b.tile, 2, c.b, b_start, n, 0, s).value().encode();
    b_descriptors.push_back(corrupt_b != nullptr ? corrupt_b(b_bits) : b_bits);
  }
  if (n == 256 || n == 24) {
    std::cout << layout::swizzle_mode_name(mode) << " A " << layout::to_string(a.tile) << ": "
              << layout::to_string(layout::WgmmaDescriptor::decode(a_descriptors[0])) << " | B "
              << layout::to_string(b.tile) << ": "
              << layout::to_string(layout::WgmmaDescriptor::decode(b_descriptors[0])) << "\n";
  }
  // 3. Where each accumulator register goes.
  const layout::TVLayout acc = layout::wgmma_accumulator(n).value();
  std::vector<int32_t> out_index;
  for (int64_t t = 0; t < kThreads; ++t) {
    for (int64_t v = 0; v < n / 2; ++v) {
      const layout::IntTuple e = acc.element(t, v);
      out_index.push_back(static_cast<int32_t>(e.mode(0).value() * n + e.mode(1).value()));
    }
  }
  const std::vector<int32_t> params = {
      static_cast<int32_t>(a.bits.size()), static_cast<int32_t>(b.bits.size()),
      static_cast<int32_t>(k_steps), static_cast<int32_t>(shared_bytes / 2)};
  // 4. Run.
  const std::vector<std::vector<uint8_t>> inputs = {
      bytes_of(a.bits),          bytes_of(a.offsets),       bytes_of(b.bits),
      bytes_of(b.offsets),       bytes_of(a_descriptors),   bytes_of(b_descriptors),
      bytes_of(params),          bytes_of(out_index)};
  profiler::KernelParameters arguments;
  for (const auto& bytes : inputs) {
    profiler::cu::DevicePtr p = 0;
    if (auto failed = session.allocate(bytes.size(), &p)) return {0, 0, 0, failed->message};
    if (auto failed = session.upload(p, bytes)) return {0, 0, 0, failed->message};
    arguments.add_pointer(p);
  }
  profiler::cu::DevicePtr out = 0;
  if (auto failed = session.allocate(kM * n * 4, &out)) return {0, 0, 0, failed->message};
  // NaN everywhere: an element no thread writes cannot pass.
  if (auto failed = session.fill(out, 0xFF, kM * n * 4)) return {0, 0, 0, failed->message};
  arguments.add_pointer(out);
  const int64_t dynamic_shared = shared_bytes + 1024;  // room to align the tiles
  profiler::cu::Function function = nullptr;
  if (auto failed = session.get_function(module, kernel_name(n, c.a, c.b), dynamic_shared,
                                         &function, &result.registers)) {
    return {0, 0, 0, failed->message};
  }
  profiler::LaunchShape shape;
  shape.block = {kThreads, 1, 1};
  shape.dynamic_shared_bytes = dynamic_shared;
  if (auto failed = session.launch(function, shape, arguments)) {
    return {0, 0, 0, failed->message};
  }
  if (auto failed = session.wait(30)) return {0, 0, 0, failed->message};
  std::vector<uint8_t> out_bytes(kM * n * 4);
  if (auto failed = session.download(out, &out_bytes)) return {0, 0, 0, failed->message};
  std::vector<float> d(kM * n);
  std::memcpy(d.data(), out_bytes.data(), out_bytes.size());
  // 5. Compare with the float64 product of A's rows 64..127 and B. f32 accumulation of 128
  //    products stays far inside 1e-4 of sum |a*b|; one misplaced element costs about 1/128.
  for (int64_t m = 0; m < kM; ++m) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < kK; ++k) {
        const double x = a.values[(kM + m) + kTileRowsA * k], y = b.values[j + n * k];
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      const double relative = std::abs(d[m * n + j] - sum) / magnitude;
      if (!(relative <= 1e-4)) ++result.wrong;
      result.worst = std::isnan(relative) ? INFINITY : std::max(result.worst, relative);
    }
  }
  return result;
}

TEST_F(WgmmaLayoutsOnGpu, EverySwizzleAndMajorMatchesAFloat64Product) {
  profiler::GpuError error;
  std::unique_ptr<profiler::GpuSession> session = profiler::GpuSession::open(driver_, 0, &error);
  ASSERT_TRUE(session) << error.message;
  profiler::cu::Module module = nullptr;
  if (auto failed = session->load_module(cubin_, &module)) FAIL() << failed->message;
  std::cout << "device: " << device_name_ << "\n";
  std::mt19937 random(2026);
  int cases = 0;
  for (SwizzleMode mode : {SwizzleMode::None, SwizzleMode::B32, SwizzleMode::B64,
                           SwizzleMode::B128}) {
    for (const Combination& c : combinations()) {
      for (int64_t n : c.ns) {
        const std::string name = std::string(layout::swizzle_mode_name(mode)) + " A " +
                                 layout::operand_major_name(c.a) + " B " +
                                 layout::operand_major_name(c.b) + " N " + std::to_string(n);
        const CaseResult r = run_case(*session, module, mode, c, n, random);
        ASSERT_TRUE(r.failure.empty()) << name << ": " << r.failure;
        EXPECT_EQ(r.wrong, 0) << name << ": of " << kM * n << " elements";
        std::cout << name << ": " << (r.wrong == 0 ? "ok" : "WRONG") << ", max error / sum|a*b| "
                  << r.worst << ", " << r.registers << " registers\n";
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 4 * 7);
}

// The check above can fail: descriptors one field off give wrong products on the device.
TEST_F(WgmmaLayoutsOnGpu, DescriptorsOneFieldOffGiveWrongProducts) {
  profiler::GpuError error;
  std::unique_ptr<profiler::GpuSession> session = profiler::GpuSession::open(driver_, 0, &error);
  ASSERT_TRUE(session) << error.message;
  profiler::cu::Module module = nullptr;
  if (auto failed = session->load_module(cubin_, &module)) FAIL() << failed->message;
  std::mt19937 random(7);
  const Combination k_major = combinations()[0];
  struct Corruption {
    SwizzleMode mode;
    const char* what;
    uint64_t (*rewrite)(uint64_t);
  };
  const Corruption corruptions[] = {
      // SW128 read as SW64 (layout type 1 -> 2).
      {SwizzleMode::B128, "SW128 tile read as SW64",
       [](uint64_t bits) { return (bits & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62); }},
      // Interleaved with SBO one 16-byte unit too large: every 8-row group after the first
      // is read 16 bytes late. (Exchanging LBO and SBO instead reads past the tiles: the
      // device reports an illegal address, which ends the context.)
      {SwizzleMode::None, "interleaved tile with SBO 16 bytes too large",
       [](uint64_t bits) { return bits + (uint64_t{1} << 32); }},
      // SW32 with the start one 16-byte chunk late.
      {SwizzleMode::B32, "SW32 tile read 16 bytes late", [](uint64_t bits) { return bits + 1; }},
  };
  for (const Corruption& corruption : corruptions) {
    const CaseResult r = run_case(*session, module, corruption.mode, k_major, 64, random,
                                  corruption.rewrite);
    ASSERT_TRUE(r.failure.empty()) << corruption.what << ": " << r.failure;
    EXPECT_GT(r.wrong, 64 * 64 / 2) << corruption.what;
    std::cout << corruption.what << ": " << r.wrong << " of " << 64 * 64
              << " elements wrong, as expected\n";
  }
}

}  // namespace
}  // namespace nautilus
