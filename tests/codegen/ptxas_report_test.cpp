// The ptxas report parser on logs captured from NVRTC 13.0 (-Xptxas=-v), and its JSON form.
#include <gtest/gtest.h>

#include "core/codegen/nvrtc.h"

namespace nautilus::codegen {
namespace {

// Two entry functions for sm_80: one with a local array (stack, no spills), one with a barrier
// and static shared memory.
constexpr const char* kTwoKernelsSm80 = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'big' for 'sm_80'
ptxas info    : Function properties for big
ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 256 bytes cumulative stack size, 360 bytes cmem[0]
ptxas info    : Compile time = 12.424 ms
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 1 barriers, 1024 bytes smem, 372 bytes cmem[0]
ptxas info    : Compile time = 1.359 ms
)";

// An entry that spills (--maxrregcount=64), followed by the properties of a non-inlined device
// function, which must not overwrite the entry's numbers.
constexpr const char* kSpillsAndDeviceFunction = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spilly' for 'sm_80'
ptxas info    : Function properties for spilly
ptxas         .     944 bytes stack frame, 940 bytes spill stores, 1548 bytes spill loads
ptxas info    : Used 64 registers, used 0 barriers, 944 bytes cumulative stack size, 360 bytes cmem[0]
ptxas info    : Compile time = 159.385 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
)";

// sm_90a prints no cmem on the "Used" line.
constexpr const char* kSm90a = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\r\n"
                               "ptxas info    : Function properties for k\r\n"
                               "ptxas         .     0 bytes stack frame, 0 bytes spill stores, "
                               "0 bytes spill loads\r\n"
                               "ptxas info    : Used 18 registers, used 1 barriers, 1024 bytes "
                               "smem\r\n"
                               "ptxas warning : Registers are spilled to local memory in function "
                               "'k', 8 bytes spill stores, 8 bytes spill loads\r\n";

TEST(PtxasReport, ParsesEveryEntryFunctionInOrder) {
  PtxasReport report = parse_ptxas_report(kTwoKernelsSm80);
  ASSERT_EQ(report.kernels.size(), 2u);
  const KernelResources& big = report.kernels[0];
  EXPECT_EQ(big.name, "big");
  EXPECT_EQ(big.arch, "sm_80");
  EXPECT_EQ(big.registers, 32);
  EXPECT_EQ(big.barriers, 0);
  EXPECT_EQ(big.stack_frame_bytes, 256);
  EXPECT_EQ(big.shared_memory_bytes, 0);
  EXPECT_EQ(big.constant_memory_bytes, 360);
  EXPECT_FALSE(big.spills());
  const KernelResources* k = report.find("k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->registers, 16);
  EXPECT_EQ(k->barriers, 1);
  EXPECT_EQ(k->shared_memory_bytes, 1024);
  EXPECT_EQ(k->stack_frame_bytes, 0);
  EXPECT_FALSE(report.any_spills());
  EXPECT_EQ(report.find("missing"), nullptr);
}

TEST(PtxasReport, SpillsBelongToTheEntryNotToDeviceFunctions) {
  PtxasReport report = parse_ptxas_report(kSpillsAndDeviceFunction);
  ASSERT_EQ(report.kernels.size(), 1u);
  const KernelResources& spilly = report.kernels[0];
  EXPECT_EQ(spilly.registers, 64);
  EXPECT_EQ(spilly.stack_frame_bytes, 944);
  EXPECT_EQ(spilly.spill_store_bytes, 940);
  EXPECT_EQ(spilly.spill_load_bytes, 1548);
  EXPECT_TRUE(spilly.spills());
  EXPECT_TRUE(report.any_spills());
}

TEST(PtxasReport, CarriageReturnsAndWarnings) {
  PtxasReport report = parse_ptxas_report(kSm90a);
  ASSERT_EQ(report.kernels.size(), 1u);
  EXPECT_EQ(report.kernels[0].arch, "sm_90a");
  EXPECT_EQ(report.kernels[0].registers, 18);
  EXPECT_EQ(report.kernels[0].shared_memory_bytes, 1024);
  EXPECT_EQ(report.kernels[0].constant_memory_bytes, 0);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("Registers are spilled"), std::string::npos);
}

TEST(PtxasReport, ForeignOrEmptyLogsGiveAnEmptyReport) {
  EXPECT_TRUE(parse_ptxas_report("").kernels.empty());
  EXPECT_TRUE(parse_ptxas_report("kernel.cu(3): error: expected a \";\"\n").kernels.empty());
  // Truncated lines and absurd numbers do not crash and do not invent values.
  PtxasReport report = parse_ptxas_report(
      "ptxas info    : Compiling entry function 'x\n"
      "ptxas info    : Used registers, 99999999999999999999999 bytes smem\n");
  ASSERT_EQ(report.kernels.size(), 1u);
  EXPECT_EQ(report.kernels[0].registers, 0);
  EXPECT_EQ(report.kernels[0].shared_memory_bytes, 0);
}

TEST(PtxasReport, TableListsEveryKernel) {
  std::string table = ptxas_report_table(parse_ptxas_report(kTwoKernelsSm80));
  EXPECT_NE(table.find("registers"), std::string::npos);
  EXPECT_NE(table.find("big"), std::string::npos);
  EXPECT_NE(table.find("1024"), std::string::npos);
}

TEST(PtxasReport, JsonRoundTrip) {
  PtxasReport report = parse_ptxas_report(kSpillsAndDeviceFunction);
  report.warnings.push_back("ptxas warning : something");
  auto json = nlohmann::json::parse(ptxas_report_to_json(report).dump());
  Result<PtxasReport> back = ptxas_report_from_json(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->kernels, report.kernels);
  EXPECT_EQ(back->warnings, report.warnings);

  EXPECT_FALSE(ptxas_report_from_json(nlohmann::json::array()).ok());
  json["kernels"][0]["registers"] = "many";
  Result<PtxasReport> bad = ptxas_report_from_json(json);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("non-integer"), std::string::npos);
}

TEST(GpuArch, NamesRoundTrip) {
  for (GpuArch arch : all_archs()) EXPECT_EQ(parse_arch(arch_name(arch)), arch);
  EXPECT_FALSE(parse_arch("sm_90").has_value());  // wgmma needs sm_90a
  EXPECT_EQ(arch_names(), "sm_80, sm_90a");
}

}  // namespace
}  // namespace nautilus::codegen
