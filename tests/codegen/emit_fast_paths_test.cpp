// The emitter's cheap inner-loop addressing (docs/codegen.md, "Inner-loop addressing"):
// swizzled shared addresses split into a hoisted lane part plus an XOR/immediate per access,
// bounds checks only where a window's index can reach its bound, paired global accesses, and
// the instruction count of the attention and GEMM main loops in NVRTC's PTX.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <regex>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/driver/pipeline.h"
#include "core/layout/swizzle.h"
#include "core/sched/decision.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::codegen {
namespace {

using testing::source_path;

std::function<int64_t(int64_t)> swizzle_of(int bits, int base, int shift) {
  const layout::Swizzle swizzle = *layout::Swizzle::make(bits, base, shift);
  return [swizzle](int64_t offset) { return swizzle(offset); };
}

// Element offsets of the rows lanes hand to ldmatrix.x4 in a 128-element-wide bf16 tile with
// the 128-byte swizzle (Sw<3,3,3> in elements): lane 8j + r reads row r + 8 (j % 2), column
// 8 (j / 2), for 8 warps stacked 16 rows apart.
std::vector<int64_t> ldmatrix_bases() {
  std::vector<int64_t> bases;
  for (int64_t tid = 0; tid < 256; ++tid) {
    const int64_t lane = tid % 32, warp = tid / 32;
    bases.push_back((warp * 16 + 8 * ((lane / 8) % 2) + lane % 8) * 128 + 8 * (lane / 16));
  }
  return bases;
}

TEST(SwizzleSplit, RowStepsAreAddedColumnStepsXored) {
  const auto swizzle = swizzle_of(3, 3, 3);
  const std::vector<int64_t> bases = ldmatrix_bases();
  // 16 rows further: the XOR reads row bits 0..2 only, which 16 rows leave alone.
  auto rows = split_swizzled_offset(swizzle, bases, {16 * 128, 0});
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->xor_part, 0);
  EXPECT_EQ(rows->add_part, 16 * 128);
  // 16 columns further: bits 4 and 5 of the column, which the lane part never sets, so the
  // swizzled offset XORs with a constant; adding it would be wrong for some lane.
  auto columns = split_swizzled_offset(swizzle, bases, {0, 16});
  ASSERT_TRUE(columns);
  EXPECT_EQ(columns->xor_part, 16);
  EXPECT_EQ(columns->add_part, 0);
  // Both at once: the row part is the immediate, the column part the XOR.
  auto both = split_swizzled_offset(swizzle, bases, {32 * 128, 48});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->add_part, 32 * 128);
  EXPECT_EQ(both->xor_part, 48);
}

// The deliberately wrong shortcut (swizzle(base + c) == swizzle(base) + c for a column step) is
// caught: it differs from the layout algebra for some lane, so the split never claims it.
TEST(SwizzleSplit, AddingAColumnStepIsWrongAndNotChosen) {
  const auto swizzle = swizzle_of(3, 3, 3);
  const std::vector<int64_t> bases = ldmatrix_bases();
  int wrong = 0;
  for (int64_t base : bases) wrong += swizzle(base + 16) != swizzle(base) + 16;
  EXPECT_GT(wrong, 0);
  auto split = split_swizzled_offset(swizzle, bases, {0, 16});
  ASSERT_TRUE(split);
  EXPECT_NE(split->xor_part, 0);
}

TEST(SwizzleSplit, StepsThatCarryIntoSwizzledBitsHaveNoSplit) {
  const auto swizzle = swizzle_of(3, 3, 3);
  // Column 4 + 8 carries into bit 3 for lanes at column 8 and not for those at 0.
  std::vector<int64_t> bases;
  for (int64_t row = 0; row < 8; ++row) {
    for (int64_t column : {0, 4, 8, 12}) bases.push_back(row * 128 + column);
  }
  EXPECT_FALSE(split_swizzled_offset(swizzle, bases, {0, 4}));
  EXPECT_FALSE(split_swizzled_offset(swizzle, {-8}, {0, 0}));
}

// Whatever split is returned holds for every base, on random swizzles, bases and steps.
TEST(SwizzleSplit, ReturnedSplitsHoldForEveryBase) {
  std::mt19937_64 random(7);
  int found = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int bits = 1 + static_cast<int>(random() % 3), base = static_cast<int>(random() % 4);
    const int shift = bits + static_cast<int>(random() % 3);
    const auto swizzle = swizzle_of(bits, base, shift);
    const int64_t width = int64_t{8} << (random() % 4);
    std::vector<int64_t> bases;
    for (int i = 0; i < 32; ++i) {
      bases.push_back(static_cast<int64_t>(random() % 16) * width + static_cast<int64_t>(random() % 4) * 8);
    }
    const std::vector<int64_t> steps = {static_cast<int64_t>(random() % 4) * 8 * width,
                                        static_cast<int64_t>(random() % 8) * 8};
    const auto split = split_swizzled_offset(swizzle, bases, steps);
    if (!split) continue;
    ++found;
    for (int64_t b : bases) {
      ASSERT_EQ(swizzle(b + steps[0] + steps[1]), (swizzle(b) ^ split->xor_part) + split->add_part)
          << "trial " << trial;
    }
  }
  EXPECT_GT(found, 50);
}

// ---------------------------------------------------------------------------------------------
// The emitted source of asset kernels

std::string emitted_source(const std::string& asset, const std::vector<std::string>& sizes) {
  std::string error;
  auto schedule = sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  if (!schedule) return "";
  driver::CompileOptions options;
  options.schedule = *schedule;
  options.last_stage = driver::Stage::MATile;
  for (const std::string& size : sizes) options.sizes.push_back(*spec::parse_size_override(size, &error));
  auto file = SourceFile::read(source_path("assets/specs/" + asset + ".nt"), &error);
  EXPECT_TRUE(file) << error;
  if (!file) return "";
  const driver::Compilation compilation = driver::compile(file, options);
  EXPECT_TRUE(compilation.ok() && compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  if (!compilation.ma_module) return "";
  const Result<EmittedModule> emitted = emit_cuda(*compilation.ma_module);
  EXPECT_TRUE(emitted) << emitted.error().message;
  return emitted ? emitted->source : "";
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(EmitFastPaths, WholeTilesHaveNoBoundsChecks) {
  const std::string source = emitted_source("attention", {"B=1", "H=2", "M=1024", "N=1024"});
  ASSERT_FALSE(source.empty());
  const std::string kernel = source.substr(source.find("extern \"C\""));
  // Every cp.async copies 16 bytes unconditionally and the output is stored in pairs.
  EXPECT_EQ(count(kernel, "valid"), 0) << kernel;
  EXPECT_EQ(count(kernel, "< 1024"), 0);
  EXPECT_GT(count(kernel, ", 16);"), 0);
  EXPECT_GT(count(kernel, "= pack2("), 0);
  // Shared addresses: 32-bit window offsets from hoisted lane parts, no per-access swizzle.
  EXPECT_GT(count(kernel, "const unsigned lane_offset"), 0);
  EXPECT_EQ(count(kernel, "shared_address(K_smem +"), 0);
  EXPECT_EQ(count(kernel, "static_cast<long long>"), 0);
  const std::regex in_loop_swizzle(R"(ldmatrix_x4(_trans)?\([^;]*swizzle\()");
  EXPECT_FALSE(std::regex_search(kernel, in_loop_swizzle));
}

TEST(EmitFastPaths, PartialTilesKeepTheirChecks) {
  const std::string source = emitted_source("attention", {"B=1", "H=2", "M=1000", "N=1000"});
  ASSERT_FALSE(source.empty());
  // Key rows past 1000 are zero-filled, query rows and output rows past 1000 are masked.
  EXPECT_GT(count(source, "< 1000) ? 8 : 0"), 0) << source;
  EXPECT_GT(count(source, "< 1000) *((O"), 0);
  // GEMM at 1000: the loaded and stored elements along the partial axes are checked.
  const std::string gemm = emitted_source("gemm", {"M=1000", "N=1000", "K=1000"});
  EXPECT_GT(count(gemm, "< 1000"), 0);
}

TEST(EmitFastPaths, CausalLoopStopsAtItsTripCount) {
  const std::string source = emitted_source("causal_attention", {"B=1", "H=2", "M=1024", "N=1024"});
  ASSERT_FALSE(source.empty());
  EXPECT_TRUE(std::regex_search(source, std::regex(R"(for \(int n_o\w* = 0; n_o\w* < min\(16, )"))) << source;
}

// Masks that compare index tiles built from iotas, broadcast tile origins and constants (a
// causal mask, a sliding window) compare one per-thread difference against a constant per
// element; the index tiles themselves are never written out, so NVRTC warns about none of them.
TEST(EmitFastPaths, AffineMasksCompareOneDifferenceAgainstConstants) {
  const std::string window =
      "let B = 1, H = 2, M = 1024, N = 1024, D = 64, W = 300\n"
      "input Q[B, H, M, D] : bf16\n"
      "input K[B, H, N, D] : bf16\n"
      "input V[B, H, N, D] : bf16\n"
      "S[b, h, m, n] = select(n <= m and m - n < W, (sum(d) Q[b, h, m, d] * K[b, h, n, d]) / sqrt(D), -inf)\n"
      "Mx[b, h, m] = max(n) S[b, h, m, n]\n"
      "P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])\n"
      "L[b, h, m] = sum(n) P[b, h, m, n]\n"
      "output O[b, h, m, d] : bf16 = sum(n) P[b, h, m, n] * V[b, h, n, d] / L[b, h, m]\n";
  std::string error;
  auto schedule = sched::read_schedule_file(source_path("assets/schedules/causal_attention.json"), &error);
  ASSERT_TRUE(schedule) << error;
  struct Case {
    std::string name;
    std::shared_ptr<const SourceFile> file;
    int compares;  // affine compares per masked loop body
  };
  const std::vector<Case> cases = {
      {"causal", SourceFile::read(source_path("assets/specs/causal_attention.nt"), &error), 1},
      {"window", std::make_shared<SourceFile>("window.nt", window), 2}};
  const Result<std::shared_ptr<const Nvrtc>>& nvrtc = Nvrtc::shared();
  for (const Case& c : cases) {
    ASSERT_TRUE(c.file) << error;
    driver::CompileOptions options;
    options.schedule = *schedule;
    options.last_stage = driver::Stage::MATile;
    const driver::Compilation compilation = driver::compile(c.file, options);
    ASSERT_TRUE(compilation.ok() && compilation.ma_module)
        << c.name << ": " << compilation.schedule_error << compilation.internal_error;
    const Result<EmittedModule> emitted = emit_cuda(*compilation.ma_module);
    ASSERT_TRUE(emitted) << emitted.error().message;
    const std::string& source = emitted->source;
    const std::regex compare(R"((\w+)\[s\] = (\w+)_offsets\[s\] (<=|<|>=|>) (\w+)_delta;)");
    int compares = 0;
    for (auto it = std::sregex_iterator(source.begin(), source.end(), compare); it != std::sregex_iterator(); ++it) {
      EXPECT_EQ((*it)[2].str(), (*it)[4].str());
      ++compares;
    }
    EXPECT_GE(compares, c.compares) << c.name << "\n" << source;
    EXPECT_EQ(compares % c.compares, 0) << c.name;
    // No index tile is compared slot by slot any more.
    EXPECT_FALSE(std::regex_search(source, std::regex(R"(\w+\[s\] = \w+\[s\] (<=|<|>=|>) \w+\[s\];)")))
        << c.name << "\n" << source;
    if (!nvrtc) continue;
    const Result<CompiledProgram> compiled = (*nvrtc)->compile(source, c.name + ".cu", NvrtcOptions{});
    ASSERT_TRUE(compiled) << compiled.error().message;
    EXPECT_EQ(compiled->log.find("was set but never used"), std::string::npos) << compiled->log;
  }
}

// A row reduction over bf16: the loop over whole column tiles (split from the partial last
// one) is proven in bounds through its trip count, and its loads are 16 bytes (8 bf16 of one
// thread's run). A row length that is not a multiple of 8 keeps the loads aligned: narrower
// ones where a row starts at an odd element, still without checks.
TEST(EmitFastPaths, RowReductionsLoadWholeRunsUnchecked) {
  const std::string even = emitted_source("logsumexp", {"R=64", "C=32000"});
  ASSERT_FALSE(even.empty());
  const std::string unmasked = even.substr(even.find("for (int c_o = 0;"), even.find("// for c_o.masked") - even.find("for (int c_o = 0;"));
  EXPECT_EQ(count(unmasked, "< 32000"), 0) << unmasked;
  EXPECT_GT(count(unmasked, "const float4"), 0) << unmasked;
  // Only the last, partial tile checks its columns.
  EXPECT_GT(count(even, "< 32000"), 0);
  const std::string bf16 = emitted_source("rmsnorm", {"T=64", "H=4096"});
  ASSERT_FALSE(bf16.empty());
  EXPECT_GT(count(bf16, "const uint4"), 0) << bf16;
  EXPECT_GT(count(bf16, "*reinterpret_cast<uint4*>"), 0) << bf16;
  const std::string odd = emitted_source("rmsnorm", {"T=64", "H=4100"});
  ASSERT_FALSE(odd.empty());
  // Rows of 4100 bf16: every other row starts 8 bytes past a 16-byte boundary.
  EXPECT_GT(count(odd, "const uint2"), 0) << odd;
}

// A split row reduction: the last split has fewer whole tiles than the others, so the loop
// variable's range depends on the split's grid index. Proven split by split, every whole tile
// is in bounds and loaded unchecked.
TEST(EmitFastPaths, SplitReductionsProveTheirWholeTilesSplitBySplit) {
  std::string error;
  auto file = SourceFile::read(source_path("assets/specs/logsumexp.nt"), &error);
  ASSERT_TRUE(file) << error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.sizes.push_back(*spec::parse_size_override("R=64", &error));
  options.sizes.push_back(*spec::parse_size_override("C=32000", &error));
  for (const char* d : {"rolling_update(Lse_sum, c, tile=1024)", "split_k_update(Mx, c, splits=4)",
                        "tile(Lse_sum, r=4)", "tile(Lse_sum_part, r=4)",
                        "bind(Lse_sum_part, c_s=grid.y, r_o=grid.x)", "bind(Lse_sum, r_o=grid.x)"}) {
    sched::DecisionParseError parse_error;
    auto decision = sched::parse_decision(d, &parse_error);
    ASSERT_TRUE(decision) << sched::to_string(parse_error);
    options.schedule.decisions.push_back(*decision);
  }
  const driver::Compilation compilation = driver::compile(file, options);
  ASSERT_TRUE(compilation.ok() && compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Result<EmittedModule> emitted = emit_cuda(*compilation.ma_module);
  ASSERT_TRUE(emitted) << emitted.error().message;
  const std::string& source = emitted->source;
  const size_t begin = source.find("for (int c_o = 0;"), end = source.find("// for c_o.masked");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string unmasked = source.substr(begin, end - begin);
  EXPECT_EQ(count(unmasked, "< 32000"), 0) << unmasked;
  EXPECT_GT(count(unmasked, "const float4"), 0) << unmasked;
  EXPECT_GT(count(source.substr(end), "< 32000"), 0) << "the partial tile keeps its checks";
}

// bf16 in, f32 out (log-softmax's output): each thread's run is one 16-byte f32 store, not two
// stores that split every 32-byte sector between them; the bf16 loads are then 8 bytes.
TEST(EmitFastPaths, RunsFitTheWidestBulkType) {
  const std::string text =
      "let R = 64, C = 4096\n"
      "input X[R, C] : bf16\n"
      "Mx[r] = max(c) X[r, c]\n"
      "output Y[r, c] : f32 = X[r, c] - Mx[r]\n";
  auto file = std::make_shared<SourceFile>("inline.nt", text);
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  for (const char* d : {"tile(Mx, r=4)", "tile(Y, r=4, c=1024)", "bind(Mx, r_o=grid.x)",
                        "bind(Y, r_o=grid.y, c_o=grid.x)"}) {
    sched::DecisionParseError error;
    auto decision = sched::parse_decision(d, &error);
    ASSERT_TRUE(decision) << sched::to_string(error);
    options.schedule.decisions.push_back(*decision);
  }
  const driver::Compilation compilation = driver::compile(file, options);
  ASSERT_TRUE(compilation.ok() && compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Result<EmittedModule> emitted = emit_cuda(*compilation.ma_module);
  ASSERT_TRUE(emitted) << emitted.error().message;
  const std::string& source = emitted->source;
  const std::string y = source.substr(source.rfind("extern \"C\""));
  EXPECT_GT(count(y, "*reinterpret_cast<float4*>"), 0) << y;
  EXPECT_EQ(count(y, "const uint4"), 0) << y;
  EXPECT_GT(count(y, "const uint2"), 0) << y;
  // The reduction kernel stores only a few f32 sums: its bf16 loads stay 16 bytes wide.
  const std::string mx = source.substr(0, source.rfind("extern \"C\""));
  EXPECT_GT(count(mx, "const uint4"), 0) << mx;
}

// ---------------------------------------------------------------------------------------------
// Instruction counts in the PTX of the main loops (the loop that holds the mma.sync)

// The instruction count of the longest loop holding an mma.sync; `mma_count`, when given,
// receives that loop's number of mma.sync instructions.
int main_loop_instructions(const std::string& ptx, int* mma_count = nullptr) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < ptx.size();) {
    size_t end = ptx.find('\n', begin);
    if (end == std::string::npos) end = ptx.size();
    lines.push_back(ptx.substr(begin, end - begin));
    begin = end + 1;
  }
  std::map<std::string, size_t> labels;
  const std::regex label(R"(^\s*(\$L\w+):)"), branch(R"(bra(\.uni)?\s+(\$L\w+);)");
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (std::regex_search(lines[i], m, label)) labels[m[1]] = i;
  }
  int best = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, branch) || !labels.count(m[2]) || labels[m[2]] >= i) continue;
    int instructions = 0, mmas = 0;
    for (size_t j = labels[m[2]]; j <= i; ++j) {
      std::string text = lines[j];
      // Instructions of inline assembly blocks ("{ cvt.rn.bf16.f32 %rs1, %f1;}") count too.
      const size_t open = text.find_first_not_of(" \t");
      if (open != std::string::npos && text[open] == '{' && text.back() == '}' && text.size() > open + 2) {
        text = text.substr(open + 1, text.size() - open - 2);
      }
      const size_t first = text.find_first_not_of(" \t");
      if (first == std::string::npos) continue;
      const char c = text[first];
      if (c == '/' || c == '{' || c == '}' || c == '.' || c == '$' || text.back() == ':') continue;
      ++instructions;
      mmas += text.find("mma.sync") != std::string::npos;
    }
    if (mmas > 0 && instructions > best) {
      best = instructions;
      if (mma_count) *mma_count = mmas;
    }
  }
  return best;
}

TEST(EmitFastPaths, MainLoopsStayShort) {
  const Result<std::shared_ptr<const Nvrtc>>& nvrtc = Nvrtc::shared();
  if (!nvrtc) GTEST_SKIP() << nvrtc.error().message;
  // PTX instructions per mma.sync in the main loop. Before the hoisted addressing: attention
  // 1063 per key tile for 128 mma (8.3), GEMM 354 per k tile for 64 mma (5.5). With the
  // FlashAttention-2 shape (4 warps of 32 query rows, Q re-read from shared memory) attention
  // is 1211 for 256 (4.7); GEMM on a 2x2 warp grid with 64-deep k tiles 265 for 128 (2.1).
  const struct {
    const char* asset;
    std::vector<std::string> sizes;
    double most_per_mma;
  } cases[] = {{"attention", {"B=8", "M=2048", "N=2048"}, 5.5}, {"gemm", {}, 2.5}};
  for (const auto& c : cases) {
    const std::string source = emitted_source(c.asset, c.sizes);
    ASSERT_FALSE(source.empty());
    NvrtcOptions options;
    options.arch = GpuArch::Sm90a;
    const Result<CompiledProgram> compiled = (*nvrtc)->compile(source, std::string(c.asset) + ".cu", options);
    ASSERT_TRUE(compiled) << compiled.error().message;
    int mmas = 0;
    const int instructions = main_loop_instructions(compiled->ptx, &mmas);
    ASSERT_GT(mmas, 0) << c.asset;
    EXPECT_LE(static_cast<double>(instructions) / mmas, c.most_per_mma)
        << c.asset << ": " << instructions << " instructions for " << mmas << " mma.sync";
  }
}

// The counter itself: a loop padded with integer work is longer.
TEST(EmitFastPaths, LoopCounterSeesExtraWork) {
  const std::string loop =
      "$L__BB0_1:\n\tmma.sync.aligned.m16n8k16 {%f1}, {%r1}, {%r2}, {%f1};\n\tadd.s32 %r3, %r3, 1;\n"
      "\tsetp.lt.s32 %p1, %r3, 8;\n\t@%p1 bra $L__BB0_1;\n";
  const std::string padded =
      "$L__BB0_1:\n\tmma.sync.aligned.m16n8k16 {%f1}, {%r1}, {%r2}, {%f1};\n\tadd.s32 %r3, %r3, 1;\n"
      "\tshl.b32 %r4, %r3, 4;\n\txor.b32 %r5, %r4, 8;\n\t{  cvt.rn.bf16.f32 %rs1, %f2;}\n"
      "\tsetp.lt.s32 %p1, %r3, 8;\n\t@%p1 bra $L__BB0_1;\n";
  EXPECT_EQ(main_loop_instructions(loop), 4);
  EXPECT_EQ(main_loop_instructions(padded), 7);
}

}  // namespace
}  // namespace nautilus::codegen
