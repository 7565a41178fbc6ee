// The emitter on a small MA kernel built by hand through matile::Builder: row sums and row
// normalization of X (37 x 128, rows in blocks of 4, the last one partial), which exercises masked
// window loads and stores, a reduce across lanes and warps (shuffles + shared scratch), a
// broadcast back to the tile, element-wise arithmetic and provenance comments.
#include <gtest/gtest.h>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/matile/interpreter.h"
#include "core/matile/layouts.h"

namespace nautilus::codegen {
namespace {

using matile::Builder;
using matile::GlobalAccess;
using matile::Value;

constexpr const char* kSpec =
    "input X[R, C] : f32\n"
    "S[r] = sum(c) X[r, c]\n"
    "output Y[r, c] : f32 = X[r, c] / S[r]\n";

struct HandBuilt {
  SourceFilePtr file = std::make_shared<SourceFile>("rownorm.nt", kSpec);
  matile::ModulePtr module;
};

HandBuilt row_normalize(int warps = 4) {
  HandBuilt built;
  const int64_t rows = 37, cols = 128, block_rows = 4;
  scalar::Buffer x = scalar::make_buffer("X", {rows, cols}, DType::F32, scalar::MemoryScope::Global,
                                         scalar::BufferRole::Input);
  scalar::Buffer y = scalar::make_buffer("Y", {rows, cols}, DType::F32, scalar::MemoryScope::Global,
                                         scalar::BufferRole::Output);
  Builder b(warps);
  const int64_t threads = b.threads();
  const std::string& text = built.file->text();
  const uint32_t line2 = static_cast<uint32_t>(text.find("S[r]"));
  const uint32_t line3 = static_cast<uint32_t>(text.find("output"));
  b.set_provenance({1, SourceRange::at(line2, line2 + 20)});
  Value r_o = b.grid("r_o", (rows + block_rows - 1) / block_rows);
  const matile::RegisterLayout scalar_layout = matile::uniform_layout({}, threads);
  Value block = b.full(static_cast<double>(block_rows), {DType::Index, {}}, scalar_layout, "block");
  Value row0 = b.binary(scalar::BinaryOp::Mul, r_o, block, "row0");
  // Lanes and then warps along the columns, each thread holding its column's 4 rows: the row
  // sums need a butterfly across lanes and a combine across warps.
  using layout::IntTuple;
  matile::RegisterLayout tile_layout;
  tile_layout.kind = matile::LayoutKind::Derived;
  tile_layout.tv = layout::make_tv_layout(
                       layout::Layout(IntTuple::tuple({IntTuple::tuple({32, threads / 32}), block_rows}),
                                      IntTuple::tuple({IntTuple::tuple({block_rows, 32 * block_rows}), 1})),
                       IntTuple::tuple({block_rows, cols}))
                       .value();
  GlobalAccess access;
  access.offsets = {row0, nullptr};
  access.tile_axes = {0, 1};
  access.bounds = {rows, cols};
  Value tile = b.global_load(x, access, {}, 0.0, {DType::F32, {block_rows, cols}}, tile_layout, "x");
  auto sliced = matile::slice_layout(tile_layout, {block_rows, cols}, 1);
  auto plan = matile::reduce_plan(tile_layout, {block_rows, cols}, 1);
  EXPECT_TRUE(sliced.ok()) << sliced.error().message;
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->cross_warp);
  int scratch = -1;
  if (plan->cross_warp) {
    scratch = b.shared("sum_scratch", DType::F32, {warps, block_rows},
                       matile::row_major_shared({warps, block_rows}, layout::Swizzle{}), 1,
                       "scratch of reduce %s");
  }
  Value sums = b.reduce(vrtile::ReduceOp::Sum, tile, 1, *sliced, plan->xor_masks, scratch, "s");
  b.set_provenance({2, SourceRange::at(line3, line3 + 30)});
  Value wide = b.broadcast(sums, {block_rows, cols}, {0}, tile_layout, "s_wide");
  Value normalized = b.binary(scalar::BinaryOp::Div, tile, wide, "y");
  b.global_store(y, access, {}, normalized);
  auto module = std::make_shared<matile::Module>();
  module->name = "rownorm";
  module->params = {x, y};
  module->kernels = {b.finish_kernel("rownorm_Y", {x, y})};
  built.module = module;
  return built;
}

TEST(EmitHandBuilt, ModuleIsValidForTheInterpreter) {
  // The hand-built module itself is right: the MA interpreter agrees with the math.
  HandBuilt built = row_normalize();
  TensorMap inputs;
  TensorData x;
  x.dtype = DType::F32;
  x.shape = {37, 128};
  for (int i = 0; i < 37 * 128; ++i) x.values.push_back(0.5 + ((i * 7919) % 101) / 101.0);
  inputs["X"] = x;
  matile::InterpretResult result = matile::interpret(*built.module, inputs);
  ASSERT_TRUE(result.ok) << result.error;
  const TensorData& y = result.outputs.at("Y");
  for (int r = 0; r < 37; ++r) {
    double sum = 0;
    for (int c = 0; c < 128; ++c) sum += x.values[static_cast<size_t>(r * 128 + c)];
    EXPECT_NEAR(y.values[static_cast<size_t>(r * 128 + 5)], x.values[static_cast<size_t>(r * 128 + 5)] / sum, 1e-6);
  }
}

TEST(EmitHandBuilt, SourceReadsLikeTheIr) {
  HandBuilt built = row_normalize();
  EmitOptions options;
  options.source = built.file.get();
  Result<EmittedModule> emitted = emit_cuda(*built.module, options);
  ASSERT_TRUE(emitted.ok()) << emitted.error().message;
  const std::string& source = emitted->source;
  // Provenance: each section quotes its spec line.
  EXPECT_NE(source.find("// spec rownorm.nt:2  S[r] = sum(c) X[r, c]"), std::string::npos) << source;
  EXPECT_NE(source.find("// spec rownorm.nt:3  output Y[r, c] : f32 = X[r, c] / S[r]"),
            std::string::npos);
  // Names come from the IR; scalars are single definitions; the partial block is masked.
  EXPECT_NE(source.find("extern \"C\" __global__ void __launch_bounds__(128) rownorm_Y("),
            std::string::npos);
  EXPECT_NE(source.find("const int row0 = r_o * block;"), std::string::npos);
  EXPECT_NE(source.find("< 37"), std::string::npos);
  EXPECT_NE(source.find("__shfl_xor_sync(0xffffffffu, "), std::string::npos);
  EXPECT_NE(source.find("// 3. across warps through sum_scratch"), std::string::npos);
  ASSERT_EQ(emitted->kernels.size(), 1u);
  EXPECT_EQ(emitted->kernels[0].grid[0], 10);

  const auto& loaded = Nvrtc::shared();
  if (!loaded.ok()) GTEST_SKIP() << "skipped: " << loaded.error().message;
  for (GpuArch arch : all_archs()) {
    NvrtcOptions nvrtc_options;
    nvrtc_options.arch = arch;
    Result<CompiledProgram> compiled = (*loaded)->compile(source, "rownorm.cu", nvrtc_options);
    ASSERT_TRUE(compiled.ok()) << compiled.error().log << source;
    const KernelResources* resources = compiled->report.find("rownorm_Y");
    ASSERT_NE(resources, nullptr);
    EXPECT_FALSE(resources->spills());
    EXPECT_EQ(resources->stack_frame_bytes, 0);
    EXPECT_NE(compiled->ptx.find("shfl.sync.bfly"), std::string::npos);
  }
}

TEST(EmitHandBuilt, UnverifiedModuleIsRefused) {
  HandBuilt built = row_normalize();
  auto broken = std::make_shared<matile::Module>(*built.module);
  auto kernel = std::make_shared<matile::Kernel>(*broken->kernels[0]);
  kernel->params.pop_back();  // Y is stored but no longer a parameter
  broken->kernels[0] = kernel;
  Result<EmittedModule> emitted = emit_cuda(*broken);
  ASSERT_FALSE(emitted.ok());
  EXPECT_EQ(emitted.error().kind, CodegenError::Kind::InvalidInput);
  EXPECT_NE(emitted.error().message.find("does not verify"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::codegen
