// Kernel packages with TMA tensor maps and thread-block clusters (launch.json version 2): the
// row-major map of a buffer, every rule check_tensor_map enforces (one broken rule at a time),
// the round trip, defaults on reading, and version 1 packages read as before.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include "core/codegen/package.h"

namespace nautilus::codegen {
namespace {

namespace fs = std::filesystem;

const KernelArgument kA{"A", {100, 64}, DType::BF16, "input"};     // rows of 128 bytes
const KernelArgument kC{"C", {100, 72}, DType::F32, "output"};      // rows of 288 bytes

TEST(TensorMap, RowMajorMapReversesTheShape) {
  TensorMap map = row_major_tensor_map(kA, {64, 32}, TensorMapSwizzle::B128);
  EXPECT_EQ(map.dims, (std::vector<int64_t>{64, 100}));
  EXPECT_EQ(map.strides_bytes, (std::vector<int64_t>{128}));
  EXPECT_EQ(map.box, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(map.element_strides, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(map.offset_bytes, 0);
  EXPECT_EQ(map.swizzle, TensorMapSwizzle::B128);
  EXPECT_EQ(check_tensor_map(map, kA), "");

  const KernelArgument batched{"X", {3, 100, 64}, DType::F16, "input"};
  TensorMap three = row_major_tensor_map(batched, {64, 16, 1});
  EXPECT_EQ(three.dims, (std::vector<int64_t>{64, 100, 3}));
  EXPECT_EQ(three.strides_bytes, (std::vector<int64_t>{128, 12800}));
  EXPECT_EQ(check_tensor_map(three, batched), "");
}

TEST(TensorMap, ASplitInnerDimensionIsAValidView) {
  // A [100, 128] bf16 tile read as 128-byte boxes: {64, rows, 2} with strides {256, 128}.
  const KernelArgument wide{"K", {100, 128}, DType::BF16, "input"};
  TensorMap map;
  map.dims = {64, 100, 2};
  map.strides_bytes = {256, 128};
  map.box = {64, 32, 2};
  map.element_strides = {1, 1, 1};
  map.swizzle = TensorMapSwizzle::B128;
  EXPECT_EQ(check_tensor_map(map, wide), "");
}

TEST(TensorMap, EveryRuleTmaHasIsChecked) {
  struct Case {
    const char* what;
    std::function<void(TensorMap&)> edit;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"rank 6", [](TensorMap& m) { m.dims = {1, 1, 1, 1, 1, 1}; }, "rank 6 is not in 1..5"},
      {"strides count", [](TensorMap& m) { m.strides_bytes = {}; }, "strides has 0 entries"},
      {"box count", [](TensorMap& m) { m.box = {64}; }, "box has 1 entries"},
      {"element strides count", [](TensorMap& m) { m.element_strides = {1}; }, "element_strides has 1"},
      {"zero dim", [](TensorMap& m) { m.dims[1] = 0; }, "dims[1] = 0 is not in [1, 2^32]"},
      {"stride not 16-B", [](TensorMap& m) { m.strides_bytes[0] = 120; },
       "strides[0] = 120 bytes is not a positive multiple of 16"},
      {"misaligned start", [](TensorMap& m) { m.offset_bytes = 8; }, "16-byte-aligned start"},
      {"outside the buffer", [](TensorMap& m) { m.offset_bytes = 128; },
       "the view ends at byte 12928, past the buffer's 12800 bytes"},
      {"box too large", [](TensorMap& m) { m.box[1] = 257; }, "box[1] = 257 is not in [1, 256]"},
      {"inner box not 16-B", [](TensorMap& m) { m.box[0] = 12; },
       "box[0] is 12 bf16 = 24 bytes, not a multiple of 16"},
      {"inner box over the swizzle span",
       [](TensorMap& m) {
         m.swizzle = TensorMapSwizzle::B64;
       },
       "box[0] is 64 bf16 = 128 bytes, more than the 64B swizzle span"},
      {"element stride", [](TensorMap& m) { m.element_strides[1] = 9; },
       "element_strides[1] = 9 is not in [1, 8]"},
  };
  for (const Case& c : cases) {
    TensorMap map = row_major_tensor_map(kA, {64, 32}, TensorMapSwizzle::B128);
    c.edit(map);
    const std::string why = check_tensor_map(map, kA);
    EXPECT_NE(why.find(c.expected), std::string::npos) << c.what << ": " << why;
  }
  // The same inner box fits the 128B span, and no swizzle has no span limit.
  TensorMap no_swizzle = row_major_tensor_map(kC, {72, 8});
  EXPECT_EQ(check_tensor_map(no_swizzle, kC), "");
  no_swizzle.swizzle = TensorMapSwizzle::B128;
  EXPECT_NE(check_tensor_map(no_swizzle, kC).find("288 bytes, more than the 128B"), std::string::npos);
}

KernelPackage hopper_package() {
  KernelPackage package;
  package.spec_name = "tma";
  package.arch = GpuArch::Sm90a;
  package.compiler_version = "0.1.0";
  package.source = "// hand-written\n";
  package.cubins[GpuArch::Sm90a] = {0x7f, 'E', 'L', 'F'};
  package.buffers = {kA, kC};
  KernelLaunch kernel;
  kernel.name = "tma_kernel";
  kernel.grid = {4, 2, 1};
  kernel.block = {128, 1, 1};
  kernel.cluster = std::array<int64_t, 3>{2, 1, 1};
  kernel.dynamic_shared_bytes = 100 << 10;
  KernelArgument a = kA;
  a.tensor_map = row_major_tensor_map(kA, {64, 32}, TensorMapSwizzle::B128);
  a.tensor_map->l2_promotion = TensorMapL2Promotion::B128;
  a.tensor_map->oob_fill = TensorMapOobFill::NanRequestZeroFma;
  kernel.arguments = {a, kC};
  package.kernels = {kernel};
  return package;
}

class TensorMapPackageTest : public testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() /
                 ("nautilus_tensor_map_test_" + std::to_string(::getpid()) + "_" +
                  testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory_);
    ASSERT_TRUE(write_package(hopper_package(), directory_.string()).ok());
  }
  void TearDown() override { fs::remove_all(directory_); }

  void rewrite_launch(const std::function<void(nlohmann::ordered_json&)>& edit) {
    std::ifstream in(directory_ / "launch.json");
    nlohmann::ordered_json json = nlohmann::ordered_json::parse(in);
    edit(json);
    std::ofstream(directory_ / "launch.json") << json.dump(2);
  }
  std::string read_error() {
    auto read = read_package(directory_.string());
    EXPECT_FALSE(read.ok());
    return read.ok() ? std::string() : read.error().message;
  }

  fs::path directory_;
};

TEST_F(TensorMapPackageTest, WritesVersion2WithEveryField) {
  std::ifstream in(directory_ / "launch.json");
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(in);
  EXPECT_EQ(json["version"], 3);
  const auto& kernel = json["kernels"][0];
  EXPECT_EQ(kernel["cluster"], nlohmann::ordered_json({2, 1, 1}));
  const auto& map = kernel["arguments"][0]["tensor_map"];
  EXPECT_EQ(map.dump(),
            R"({"dims":[64,100],"strides":[128],"offset":0,"box":[64,32],"element_strides":[1,1],)"
            R"("interleave":"none","swizzle":"128B","l2_promotion":"128B","oob_fill":"nan_request_zero_fma"})");
  EXPECT_FALSE(kernel["arguments"][1].contains("tensor_map"));
  EXPECT_FALSE(json["buffers"][0].contains("tensor_map"));
}

TEST_F(TensorMapPackageTest, RoundTrip) {
  auto read = read_package(directory_.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->kernels, hopper_package().kernels);
  EXPECT_EQ(read->buffers, hopper_package().buffers);
}

// A persistent kernel's flag round-trips; its grid must be [tiles, 1, 1].
TEST_F(TensorMapPackageTest, PersistentKernelsRoundTripAndNeedAOneAxisGrid) {
  KernelPackage package = hopper_package();
  package.kernels[0].grid = {512, 1, 1};
  package.kernels[0].cluster.reset();
  package.kernels[0].persistent = true;
  ASSERT_TRUE(write_package(package, directory_.string()).ok());
  auto read = read_package(directory_.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_TRUE(read->kernels[0].persistent);
  EXPECT_EQ(read->kernels, package.kernels);
  rewrite_launch([](nlohmann::ordered_json& json) { json["kernels"][0]["grid"] = {16, 32, 1}; });
  EXPECT_NE(read_error().find("a persistent kernel's grid is [tiles, 1, 1]"), std::string::npos);
  rewrite_launch([](nlohmann::ordered_json& json) { json["kernels"][0]["persistent"] = "yes"; });
  EXPECT_NE(read_error().find("persistent is not true or false"), std::string::npos);
}

TEST_F(TensorMapPackageTest, OmittedFieldsTakeTheirDefaults) {
  rewrite_launch([](auto& json) {
    json["kernels"][0]["arguments"][0]["tensor_map"] = {{"box", {32, 16}}};
  });
  auto read = read_package(directory_.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(*read->kernels[0].arguments[0].tensor_map, row_major_tensor_map(kA, {32, 16}));
}

TEST_F(TensorMapPackageTest, Version1PackagesAreStillRead) {
  rewrite_launch([](auto& json) {
    json["version"] = 1;
    json["kernels"][0].erase("cluster");
    json["kernels"][0]["arguments"][0].erase("tensor_map");
  });
  auto read = read_package(directory_.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_FALSE(read->kernels[0].cluster.has_value());
  EXPECT_FALSE(read->kernels[0].arguments[0].tensor_map.has_value());
  EXPECT_EQ(read->kernels[0].arguments[0], kA);

  rewrite_launch([](auto& json) { json["kernels"][0]["cluster"] = {2, 1, 1}; });
  EXPECT_NE(read_error().find("kernels[0].cluster needs package version 2"), std::string::npos);
}

TEST_F(TensorMapPackageTest, MapsTmaCannotEncodeAreRefusedNamingTheArgument) {
  rewrite_launch([](auto& json) { json["kernels"][0]["arguments"][0]["tensor_map"]["box"] = {128, 32}; });
  EXPECT_EQ(read_error(),
            (directory_ / "launch.json").string() +
                ": kernels[0].arguments[0].tensor_map (A): TMA cannot encode it: box[0] is 128 bf16 "
                "= 256 bytes, more than the 128B swizzle span");

  ASSERT_TRUE(write_package(hopper_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["kernels"][0]["arguments"][0]["tensor_map"]["swizzle"] = "256B"; });
  EXPECT_NE(read_error().find("swizzle '256B' is not one of none, 32B, 64B, 128B"), std::string::npos);

  ASSERT_TRUE(write_package(hopper_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["kernels"][0]["arguments"][0]["tensor_map"]["interleave"] = "32B"; });
  EXPECT_NE(read_error().find("interleave \"32B\" is not supported"), std::string::npos);

  ASSERT_TRUE(write_package(hopper_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["kernels"][0]["arguments"][0]["tensor_map"]["strides"] = {136}; });
  EXPECT_NE(read_error().find("strides[0] = 136 bytes is not a positive multiple of 16"),
            std::string::npos);

  ASSERT_TRUE(write_package(hopper_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["buffers"][0]["tensor_map"] = {{"box", {64, 32}}}; });
  EXPECT_NE(read_error().find("only kernel arguments can be tensor maps"), std::string::npos);
}

TEST_F(TensorMapPackageTest, ClustersMustDivideTheGridAndStayPortable) {
  rewrite_launch([](auto& json) { json["kernels"][0]["cluster"] = {3, 1, 1}; });
  EXPECT_NE(read_error().find("kernels[0].cluster[0] = 3 does not divide grid[0] = 4"), std::string::npos);

  ASSERT_TRUE(write_package(hopper_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) {
    json["kernels"][0]["grid"] = {16, 1, 1};
    json["kernels"][0]["cluster"] = {16, 1, 1};
  });
  EXPECT_NE(read_error().find("16 CTAs, more than the portable 8"), std::string::npos);

  ASSERT_TRUE(write_package(hopper_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["kernels"][0]["cluster"] = {2, 0, 1}; });
  EXPECT_NE(read_error().find("kernels[0].cluster has an extent that is not a positive integer"),
            std::string::npos);
}

}  // namespace
}  // namespace nautilus::codegen
