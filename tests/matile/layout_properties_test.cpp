// Properties of layout synthesis over random programs (docs/matile.md, "Layout synthesis"):
// GEMMs of random shapes (tile multiples or not), operand dtypes (f32, f16, bf16, fp8e4m3,
// fp8e5m2, int8, int4, mixed), operand major-ness, output dtypes and schedules that ask for different
// instructions (none: scalar loops; tiles with mma.sync and ldmatrix on sm_80; warp_spec with TMA
// and wgmma on sm_90a), lowered with synthesized layouts. Every case either
//   - lowers, and then every register value's layout holds every element of its tile, checked
//     at every (thread, slot) and every coordinate, and the MA interpreter matches the float64
//     reference on random inputs; or
//   - is refused with a message that names what failed (the spec's line and column, or the
//     schedule's or the lowering's reason), never an internal error.
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/matile/ir.h"
#include "core/matile/verifier.h"
#include "core/matile/visitor.h"
#include "core/support/source.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

struct Case {
  std::string text;
  std::vector<std::string> decisions;
  std::string arch;
  std::string label;
};

template <typename T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& options) {
  return options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
}

Case random_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> operand_types = {"f32", "f16", "bf16", "bf16", "fp8e4m3", "fp8e5m2", "int8", "int4"};
  const std::vector<int64_t> extents = {8, 16, 24, 40, 64, 72, 96, 128};
  const std::string a_type = pick(rng, operand_types);
  const std::string b_type = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? pick(rng, operand_types) : a_type;
  std::string out_type = pick(rng, std::vector<std::string>{"f32", "bf16", "f16"});
  // Two int8 operands (up to 127 x 127 a product) sum past f16's 65504 at k 24: the reference
  // overflows too, and the case would test nothing. bf16 keeps the range.
  if (a_type == "int8" && b_type == "int8" && out_type == "f16") out_type = "bf16";
  const int64_t m = pick(rng, extents), n = pick(rng, extents), k = pick(rng, extents);
  const bool b_k_major = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
  const bool scaled = std::uniform_int_distribution<int>(0, 2)(rng) == 0;
  std::ostringstream text;
  text << "let M = " << m << ", N = " << n << ", K = " << k << "\n";
  text << "input A[M, K] : " << a_type << "\n";
  text << (b_k_major ? "input B[N, K] : " : "input B[K, N] : ") << b_type << "\n";
  if (scaled) text << "input S[1] : f32\n";
  text << "output C[m, n] : " << out_type << " = sum(k) A[m, k] * " << (b_k_major ? "B[n, k]" : "B[k, n]")
       << (scaled ? " * S[0]" : "") << "\n";

  Case c;
  c.text = text.str();
  c.arch = std::uniform_int_distribution<int>(0, 1)(rng) ? "sm_90a" : "sm_80";
  const int form = std::uniform_int_distribution<int>(0, 3)(rng);
  // An f32 product with nothing after the sum is one block, C; otherwise the sum is C_sum and
  // the rounding or scaling epilogue C follows it.
  const std::string block = out_type == "f32" && !scaled ? "C" : "C_sum";
  const auto tile = [&](int64_t tm) {
    const int64_t tn = pick(rng, std::vector<int64_t>{16, 32, 64, 128});
    const int64_t tk = pick(rng, std::vector<int64_t>{16, 32, 64});
    c.decisions.push_back("tile(" + block + ", m=" + std::to_string(tm) + ", n=" + std::to_string(tn) +
                          ", k=" + std::to_string(tk) + ")");
    if (block != "C") c.decisions.push_back("reverse_compute_at(C, C_sum, n_o)");
    c.decisions.push_back("bind(" + block + ", m_o=grid.y, n_o=grid.x)");
  };
  if (form == 1) {
    tile(pick(rng, std::vector<int64_t>{16, 32, 64, 128}));
  } else if (form == 2) {
    tile(pick(rng, std::vector<int64_t>{32, 64, 128}));
    c.decisions.push_back("launch(" + block + ", warps=" + std::to_string(pick(rng, std::vector<int>{2, 4, 8})) +
                          ", stages=" + std::to_string(pick(rng, std::vector<int>{1, 2, 3})) + ")");
  } else if (form == 3) {
    const int consumers = std::uniform_int_distribution<int>(1, 2)(rng);
    tile(64 * consumers);
    c.decisions.push_back("warp_spec(" + block + ", consumers=" + std::to_string(consumers) +
                          ", stages=" + std::to_string(pick(rng, std::vector<int>{2, 3, 4})) + ")");
  }
  c.label = "seed " + std::to_string(seed) + " " + c.arch + "\n" + c.text;
  for (const std::string& d : c.decisions) c.label += "  " + d + "\n";
  return c;
}

// Every (thread, slot) of every register value lands inside its tile, and every element of the
// tile is held by some (thread, slot): the layout read at every coordinate, not through the
// verifier's structural shortcut.
void expect_every_layout_holds_its_tile(const matile::Kernel& kernel, const std::string& label) {
  int checked = 0;
  matile::for_each_op(*kernel.body, [&](const matile::Op& op) {
    for (const matile::Value& value : op.results) {
      if (!value || checked > 400) continue;
      const int64_t elements = value->type.element_count();
      const layout::TVLayout& tv = value->layout.tv;
      if (elements <= 0 || elements > (1 << 16) || tv.threads() * tv.values() > (1 << 20)) continue;
      ++checked;
      std::vector<char> held(static_cast<size_t>(elements), 0);
      for (int64_t t = 0; t < tv.threads(); ++t) {
        for (int64_t v = 0; v < tv.values(); ++v) {
          const int64_t index = tv.index(t, v);
          ASSERT_TRUE(index >= 0 && index < elements)
              << value->name << " (thread " << t << ", slot " << v << ") -> " << index << " outside its "
              << elements << " elements\n" << label;
          held[static_cast<size_t>(index)] = 1;
        }
      }
      for (int64_t e = 0; e < elements; ++e) {
        ASSERT_TRUE(held[static_cast<size_t>(e)]) << value->name << ": element " << e << " held by no thread\n" << label;
      }
    }
  });
}

TEST(LayoutProperties, RandomGemmsSynthesizeOrSayWhatFailed) {
  int lowered = 0, refused = 0, wgmma = 0, mma = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const Case c = random_case(seed);
    SCOPED_TRACE(c.label);
    driver::CompileOptions options;
    options.matile.arch = c.arch;
    options.last_stage = driver::Stage::MATile;
    driver::Compilation compilation = testing::compile_scheduled(
        std::make_shared<SourceFile>("random_gemm.nt", c.text), c.decisions, {}, options);
    if (compilation.schedule_error.find("has no block C_sum") != std::string::npos) {
      // The rounding folded into the sum's block (one block, C): the same schedule on it.
      std::vector<std::string> on_c;
      for (const std::string& d : c.decisions) {
        if (d.rfind("reverse_compute_at", 0) == 0) continue;
        std::string text = d;
        text.replace(text.find("C_sum"), 5, "C");
        on_c.push_back(text);
      }
      compilation = testing::compile_scheduled(std::make_shared<SourceFile>("random_gemm.nt", c.text), on_c, {},
                                               options);
    }
    EXPECT_TRUE(compilation.internal_error.empty()) << compilation.internal_error;
    if (!compilation.ok() || !compilation.ma_module) {
      ++refused;
      const bool spec_error = compilation.diagnostics && compilation.diagnostics->has_errors();
      if (spec_error) {
        const std::string text = compilation.diagnostics->render_all();
        EXPECT_NE(text.find("random_gemm.nt:"), std::string::npos) << "a spec error names its place: " << text;
      } else {
        EXPECT_FALSE(compilation.schedule_error.empty()) << "a refusal says why";
        EXPECT_GT(compilation.schedule_error.size(), 20u) << compilation.schedule_error;
      }
      continue;
    }
    ++lowered;
    EXPECT_TRUE(matile::verify(*compilation.ma_module).empty());
    for (const matile::KernelPtr& kernel : compilation.ma_module->kernels) {
      expect_every_layout_holds_its_tile(*kernel, c.label);
      matile::for_each_op(*kernel->body, [&](const matile::Op& op) {
        wgmma += op.kind == matile::OpKind::Wgmma;
        mma += op.kind == matile::OpKind::Mma;
      });
    }
    testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, c.label);
  }
  // The generator reaches every form: most cases lower, and both tensor-core instructions occur.
  EXPECT_GE(lowered, 40) << refused << " refused";
  EXPECT_GT(wgmma, 0);
  EXPECT_GT(mma, 0);
}

}  // namespace
}  // namespace nautilus
