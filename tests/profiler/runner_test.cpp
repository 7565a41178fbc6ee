// nautilus-runner without a GPU: argument parsing, package and reference errors, the binary
// choice per compute capability, and whole runs on the fake driver (profiler/testing), where
// "kernels" copy bytes, swap halves (a wrong result), fault or hang. The runs check the report's
// typed errors and exit codes, that validation catches the wrong kernel, and that the real
// runner process reports no GPU, faults and hangs to the client without taking it down.
#include <gtest/gtest.h>

#include <fstream>

#include "profiler/kernel_binary.h"
#include "profiler/runner.h"
#include "profiler/runner_client.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using codegen::GpuArch;
using testing::PackageKernel;
using testing::ScopedEnv;
using testing::TempDir;
using testing::copy_buffers;
using testing::fake_libcuda_path;
using testing::runner_path;
using testing::write_test_package;

RunnerOptions fake_options(const std::string& package, const std::string& reference = {}) {
  RunnerOptions options;
  options.package_dir = package;
  options.reference_dir = reference;
  options.driver_library = fake_libcuda_path();
  options.warmup = 2;
  options.repetitions = 5;
  options.timeout_seconds = 5;
  return options;
}

const nlohmann::ordered_json& first_error(const RunnerOutcome& outcome) {
  return outcome.report["errors"][0];
}

// ---- arguments

TEST(RunnerArgs, ParsesEveryOption) {
  ParsedRunnerArgs parsed = parse_runner_args({"pkg", "--reference", "ref", "--seed=9", "--warmup",
                                               "0", "--reps", "7", "--device", "1", "--flush=write",
                                               "--timeout", "2.5", "--timer", "events", "--driver",
                                               "libfake.so"});
  ASSERT_TRUE(parsed.options.has_value()) << parsed.error;
  const RunnerOptions& o = *parsed.options;
  EXPECT_EQ(o.package_dir, "pkg");
  EXPECT_EQ(o.reference_dir, "ref");
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.repetitions, 7);
  EXPECT_EQ(o.device, 1);
  EXPECT_EQ(o.l2_flush, L2FlushMode::Write);
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 2.5);
  EXPECT_FALSE(o.use_cupti);
  EXPECT_EQ(o.driver_library, "libfake.so");
}

TEST(RunnerArgs, DefaultsFollowTheProtocol) {
  ParsedRunnerArgs parsed = parse_runner_args({"pkg"});
  ASSERT_TRUE(parsed.options.has_value());
  EXPECT_EQ(parsed.options->seed, 0u);
  EXPECT_EQ(parsed.options->warmup, 10);
  EXPECT_EQ(parsed.options->repetitions, 100);
  EXPECT_EQ(parsed.options->l2_flush, L2FlushMode::Read);
  EXPECT_EQ(parse_runner_args({"pkg", "--no-flush"}).options->l2_flush, L2FlushMode::None);
  EXPECT_TRUE(parsed.options->use_cupti);
  EXPECT_EQ(parsed.options->driver_library, "libcuda.so.1");
}

TEST(RunnerArgs, RejectsBadArgumentsWithAReason) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{}, "missing PACKAGE_DIR"},
      {{"a", "b"}, "more than one package directory"},
      {{"pkg", "--reps", "0"}, "--reps expects a positive integer"},
      {{"pkg", "--warmup", "-1"}, "--warmup expects a non-negative integer"},
      {{"pkg", "--seed", "x"}, "--seed expects a non-negative integer"},
      {{"pkg", "--timeout", "0"}, "--timeout expects a positive number"},
      {{"pkg", "--timer", "cupti-please"}, "--timer expects auto or events"},
      {{"pkg", "--reference"}, "--reference expects a value"},
      {{"pkg", "--fast"}, "unknown option --fast"},
      {{"pkg", "--no-flush=yes"}, "--no-flush expects no value"},
      {{"pkg", "--flush", "clean"}, "--flush expects read, write or none"},
  };
  for (const Case& c : cases) {
    ParsedRunnerArgs parsed = parse_runner_args(c.args);
    EXPECT_FALSE(parsed.options.has_value());
    EXPECT_NE(parsed.error.find(c.expected), std::string::npos) << parsed.error;
  }
  EXPECT_TRUE(parse_runner_args({"--help"}).help);
}

TEST(RunnerArgs, DevicesTakesOnlyTheDriver) {
  ParsedRunnerArgs parsed = parse_runner_args({"--devices", "--driver", "libfake.so"});
  EXPECT_TRUE(parsed.list_devices) << parsed.error;
  EXPECT_EQ(parsed.devices_driver, "libfake.so");
  EXPECT_EQ(parse_runner_args({"--devices"}).devices_driver, "libcuda.so.1");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--devices", "pkg"}, {"--devices", "--reps", "3"}}) {
    parsed = parse_runner_args(args);
    EXPECT_FALSE(parsed.list_devices);
    EXPECT_NE(parsed.error.find("--devices takes only --driver"), std::string::npos)
        << parsed.error;
  }
}

TEST(RunnerReport, ExitCodesPerErrorKind) {
  EXPECT_EQ(exit_code_for(std::nullopt), 0);
  EXPECT_EQ(exit_code_for(RunnerErrorKind::WrongResults), 1);
  EXPECT_EQ(exit_code_for(RunnerErrorKind::UsageError), 2);
  EXPECT_EQ(exit_code_for(RunnerErrorKind::NoGpu), 3);
  EXPECT_EQ(exit_code_for(RunnerErrorKind::LoadError), 4);
  EXPECT_EQ(exit_code_for(RunnerErrorKind::CompileError), 4);
  EXPECT_EQ(exit_code_for(RunnerErrorKind::LaunchError), 5);
  EXPECT_EQ(exit_code_for(RunnerErrorKind::Timeout), 6);
}

TEST(RunnerReport, SummariesUseTheMedian) {
  SampleSummary odd = summarize({5, 1, 3});
  EXPECT_EQ(odd.median, 3);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 5);
  EXPECT_EQ(odd.mean, 3);
  SampleSummary even = summarize({4, 1, 100, 2});
  EXPECT_EQ(even.median, 3);  // mean of the middle two: an outlier does not move it
  EXPECT_EQ(even.count, 4);
  EXPECT_EQ(summarize({}).count, 0);
}

// ---- binary choice

codegen::KernelPackage package_with(std::vector<GpuArch> cubins, bool ptx) {
  codegen::KernelPackage package;
  package.source = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n";
  for (GpuArch arch : cubins) package.cubins[arch] = {1, 2, 3};
  if (ptx) package.ptx[GpuArch::Sm80] = ".version 8.0\n.target sm_80\n";
  return package;
}

TEST(KernelBinary, HopperPrefersTheSm90aCubin) {
  BinaryResult result = kernel_binary_for_device(package_with({GpuArch::Sm80, GpuArch::Sm90a}, true), 9, 0);
  ASSERT_TRUE(result.binary.has_value());
  EXPECT_EQ(result.binary->source, KernelBinary::Source::Cubin);
  EXPECT_EQ(result.binary->arch, "sm_90a");
}

TEST(KernelBinary, AmpereAndAdaUseTheSm80Cubin) {
  for (int minor : {0, 6, 9}) {
    BinaryResult result = kernel_binary_for_device(package_with({GpuArch::Sm80, GpuArch::Sm90a}, true), 8, minor);
    ASSERT_TRUE(result.binary.has_value());
    EXPECT_EQ(result.binary->arch, "sm_80");
  }
}

TEST(KernelBinary, NoFittingCubinCompilesWithNvrtcForTheLocalArch) {
  // An sm_80 cubin does not run on Hopper or Blackwell: kernel.cu is compiled for the device.
  for (auto [major, minor, expected] : {std::tuple{9, 0, "sm_90a"}, std::tuple{10, 0, "sm_100"}}) {
    BinaryResult result = kernel_binary_for_device(package_with({GpuArch::Sm80}, true), major, minor);
    if (result.error && result.error->message.find("NVRTC not found") != std::string::npos) {
      GTEST_SKIP() << result.error->message;
    }
    ASSERT_TRUE(result.binary.has_value()) << result.error->message;
    EXPECT_EQ(result.binary->source, KernelBinary::Source::Nvrtc);
    EXPECT_EQ(result.binary->arch, expected);
    ASSERT_GE(result.binary->image.size(), 4u);
    EXPECT_EQ(result.binary->image[0], 0x7f);  // an ELF cubin
    EXPECT_EQ(result.binary->image[1], 'E');
  }
}

TEST(KernelBinary, WithoutNvrtcThePtxIsJitCompiled) {
  BinaryResult result = kernel_binary_for_device(package_with({GpuArch::Sm80}, true), 9, 0, false);
  ASSERT_TRUE(result.binary.has_value());
  EXPECT_EQ(result.binary->source, KernelBinary::Source::PtxJit);
  EXPECT_EQ(result.binary->image.back(), '\0');  // the driver reads PTX as a C string

  result = kernel_binary_for_device(package_with({GpuArch::Sm80}, false), 9, 0, false);
  ASSERT_TRUE(result.error.has_value());
  EXPECT_EQ(result.error->kind, BinaryError::Kind::NoBinary);
}

TEST(KernelBinary, PreAmpereGpusAreRefused) {
  BinaryResult result = kernel_binary_for_device(package_with({GpuArch::Sm80}, true), 7, 5);
  ASSERT_TRUE(result.error.has_value());
  EXPECT_NE(result.error->message.find("sm_75"), std::string::npos) << result.error->message;
}

TEST(KernelBinary, SourceThatDoesNotCompileIsACompileError) {
  codegen::KernelPackage package = package_with({GpuArch::Sm80}, true);
  package.source = "extern \"C\" __global__ void k(float* x) { this is not CUDA }\n";
  BinaryResult result = kernel_binary_for_device(package, 12, 0);
  if (result.error && result.error->message.find("NVRTC not found") != std::string::npos) {
    GTEST_SKIP() << result.error->message;
  }
  ASSERT_TRUE(result.error.has_value());
  EXPECT_EQ(result.error->kind, BinaryError::Kind::Compile);
  EXPECT_NE(result.error->log.find("error"), std::string::npos);
}

// ---- whole runs on the fake driver (in process)

TEST(Runner, CorrectKernelPassesValidationAndIsTimed) {
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref");
  write_test_package(package, copy_buffers(), {{"fake_copy", {"X", "Y"}}},
                     {{"flops", 2.0e6}, {"bytes", 8584.0}});
  write_test_package(reference, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(package, reference));
  const auto& report = outcome.report;
  ASSERT_EQ(report["status"], "ok") << report.dump(2);
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_FALSE(outcome.abandon_gpu);
  EXPECT_TRUE(report["errors"].empty());
  EXPECT_EQ(report["format"], kRunnerReportFormat);

  EXPECT_EQ(report["device"]["name"], "Nautilus Fake GPU 0");
  EXPECT_EQ(report["device"]["driver_version"], "13.0");
  EXPECT_EQ(report["package"]["spec"], "test");
  EXPECT_EQ(report["package"]["sizes"]["M"], 37);
  EXPECT_EQ(report["package"]["binary"]["source"], "cubin");
  EXPECT_EQ(report["package"]["binary"]["arch"], "sm_90a");

  EXPECT_EQ(report["validation"]["status"], "passed");
  EXPECT_EQ(report["validation"]["max_relative_error"], 0.0);
  EXPECT_EQ(report["validation"]["tolerance"], tolerance(DType::F32));
  ASSERT_EQ(report["validation"]["outputs"].size(), 1u);
  EXPECT_EQ(report["validation"]["outputs"][0]["name"], "Y");

  const auto& timing = report["timing"];
  // Without a GPU behind it CUPTI cannot work (here: not even load a driver), so the runner says
  // why and times with events.
  EXPECT_EQ(timing["timer"], "events");
  EXPECT_FALSE(timing["cupti_unavailable"].get<std::string>().empty());
  EXPECT_EQ(timing["repetitions"], 5);
  EXPECT_EQ(timing["l2_flush"], "read");
  EXPECT_EQ(timing["l2_flush_bytes"], 100 << 20);  // twice the fake's 50 MiB L2
  ASSERT_EQ(timing["kernels"].size(), 1u);
  const auto& kernel = timing["kernels"][0];
  EXPECT_EQ(kernel["name"], "fake_copy");
  EXPECT_EQ(kernel["registers"], 32);
  EXPECT_LE(kernel["min_us"].get<double>(), kernel["median_us"].get<double>());
  EXPECT_LE(kernel["median_us"].get<double>(), kernel["max_us"].get<double>());
  EXPECT_EQ(timing["total"]["flops"], 2.0e6);
  if (timing["total"]["median_us"].get<double>() > 0) {
    EXPECT_TRUE(timing["total"].contains("tflops"));
    EXPECT_TRUE(timing["total"].contains("memory_bandwidth_fraction"));
  }
}

TEST(Runner, WrongKernelIsCaughtByValidation) {
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref");
  // Half of Y is X's other half: every element is a random value in the wrong place.
  write_test_package(package, copy_buffers(DType::BF16), {{"fake_swap_halves", {"X", "Y"}}});
  write_test_package(reference, copy_buffers(DType::BF16), {{"fake_copy", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(package, reference));
  EXPECT_EQ(outcome.report["status"], "wrong_results") << outcome.report.dump(2);
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.report["validation"]["status"], "failed");
  EXPECT_GT(outcome.report["validation"]["max_relative_error"].get<double>(), 0.1);
  EXPECT_EQ(outcome.report["validation"]["tolerance"], tolerance(DType::BF16));
  EXPECT_NE(first_error(outcome)["message"].get<std::string>().find("output Y"), std::string::npos);
  // The wrong kernel is still timed: the numbers help find out why it is wrong.
  EXPECT_EQ(outcome.report["timing"]["kernels"].size(), 1u);
}

TEST(Runner, UnwrittenOutputFailsValidation) {
  // The package's only kernel copies X into the scratch buffer T and never writes Y: Y keeps the
  // runner's NaN fill and must not pass.
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref");
  auto buffers = copy_buffers();
  buffers.push_back({"T", {37, 29}, DType::F32, "intermediate"});
  write_test_package(package, buffers, {{"fake_copy", {"X", "T"}}});
  write_test_package(reference, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(package, reference));
  EXPECT_EQ(outcome.report["status"], "wrong_results") << outcome.report.dump(2);
  EXPECT_EQ(outcome.report["validation"]["max_relative_error"], "inf");
  EXPECT_GT(outcome.report["validation"]["outputs"][0]["mismatched_nonfinite"].get<int>(), 0);
}

TEST(Runner, SeedsDecideTheInputs) {
  // Same seed: the same inputs reach package and reference, so a copy validates; the inputs of
  // two seeds differ, which the swapped-halves check would not notice if inputs were constant.
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref");
  write_test_package(package, copy_buffers(DType::F16), {{"fake_copy", {"X", "Y"}}});
  write_test_package(reference, copy_buffers(DType::F16), {{"fake_copy", {"X", "Y"}}});
  for (uint64_t seed : {0u, 1u, 12345u}) {
    RunnerOptions options = fake_options(package, reference);
    options.seed = seed;
    RunnerOutcome outcome = run_runner(options);
    EXPECT_EQ(outcome.report["status"], "ok") << outcome.report.dump(2);
    EXPECT_EQ(outcome.report["runner"]["seed"], seed);
  }
}

TEST(Runner, WithoutAReferenceValidationIsSkipped) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOptions options = fake_options(dir.path());
  options.l2_flush = L2FlushMode::None;
  options.use_cupti = false;
  RunnerOutcome outcome = run_runner(options);
  EXPECT_EQ(outcome.report["status"], "ok");
  EXPECT_EQ(outcome.report["validation"]["status"], "skipped");
  EXPECT_EQ(outcome.report["timing"]["cupti_unavailable"], "--timer events");
  EXPECT_EQ(outcome.report["timing"]["l2_flush_bytes"], 0);
}

// The default flush reads a buffer of twice the L2 with a kernel before every timed repetition
// and warm-up (l2_flush.h); `write` fills the same buffer instead and launches nothing.
TEST(Runner, EveryRepetitionStartsWithTheFlushItAskedFor) {
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref");
  write_test_package(package, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  write_test_package(reference, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  for (L2FlushMode mode : {L2FlushMode::Read, L2FlushMode::Write, L2FlushMode::None}) {
    const std::string log = dir.file(std::string("launches-") + l2_flush_mode_name(mode) + ".log");
    ScopedEnv launch_log("NAUTILUS_FAKE_CUDA_LAUNCH_LOG", log.c_str());
    RunnerOptions options = fake_options(package, reference);
    options.l2_flush = mode;
    RunnerOutcome outcome = run_runner(options);
    ASSERT_EQ(outcome.report["status"], "ok") << outcome.report.dump(2);
    EXPECT_EQ(outcome.report["runner"]["l2_flush"], l2_flush_mode_name(mode));
    EXPECT_EQ(outcome.report["timing"]["l2_flush"], l2_flush_mode_name(mode));
    EXPECT_EQ(outcome.report["timing"]["l2_flush_bytes"], mode == L2FlushMode::None ? 0 : 100 << 20);
    std::ifstream lines(log);
    int flushes = 0, copies = 0;
    for (std::string line; std::getline(lines, line);) {
      flushes += line == kL2EvictKernel;
      copies += line == "fake_copy";
    }
    EXPECT_EQ(flushes, mode == L2FlushMode::Read ? options.warmup + options.repetitions : 0);
    EXPECT_EQ(copies, 2 + options.warmup + options.repetitions);  // validation, reference, timing
  }
}

TEST(Runner, MultiKernelPackagesLaunchInOrder) {
  // X -> T -> Y through an intermediate: only the right order produces Y = X.
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref");
  auto buffers = copy_buffers();
  buffers.push_back({"T", {37, 29}, DType::F32, "intermediate"});
  write_test_package(package, buffers, {{"fake_copy", {"X", "T"}}, {"fake_copy", {"T", "Y"}}});
  write_test_package(reference, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(package, reference));
  EXPECT_EQ(outcome.report["status"], "ok") << outcome.report.dump(2);
  EXPECT_EQ(outcome.report["timing"]["kernels"].size(), 2u);
}

// A kernel with the dynamic tile scheduler takes its tiles from a counter in a workspace, which
// must read zero at every launch: the runner zeroes it before each one (validation, warm-up and
// every timed repetition). The same counter declared an intermediate is not zeroed (the runner
// poisons intermediates), and the kernel faults on it.
TEST(Runner, WorkspacesAreZeroedBeforeEveryLaunch) {
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref"), stale = dir.file("stale");
  const std::string log = dir.file("launches.log");
  ScopedEnv launch_log("NAUTILUS_FAKE_CUDA_LAUNCH_LOG", log.c_str());
  auto buffers = copy_buffers();
  buffers.push_back({"tile_counter", {4}, DType::I8, "workspace"});
  write_test_package(package, buffers, {{"fake_tile_counter_copy", {"X", "Y", "tile_counter"}}});
  write_test_package(reference, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(package, reference));
  ASSERT_EQ(outcome.report["status"], "ok") << outcome.report.dump(2);
  EXPECT_EQ(outcome.report["validation"]["status"], "passed");
  std::ifstream lines(log);
  int counted = 0;
  for (std::string line; std::getline(lines, line);) counted += line == "fake_tile_counter_copy";
  EXPECT_GE(counted, 1 + 2 + 5);  // validation, warm-up, repetitions: each on a fresh counter

  buffers.back().role = "intermediate";
  write_test_package(stale, buffers, {{"fake_tile_counter_copy", {"X", "Y", "tile_counter"}}});
  RunnerOutcome failed = run_runner(fake_options(stale, reference));
  EXPECT_EQ(failed.report["status"], "launch_error") << failed.report.dump(2);
  EXPECT_EQ(first_error(failed)["cuda_error_name"], "CUDA_ERROR_ILLEGAL_ADDRESS");
}

TEST(Runner, MissingPackageIsALoadError) {
  RunnerOutcome outcome = run_runner(fake_options("/nonexistent/package"));
  EXPECT_EQ(outcome.report["status"], "load_error");
  EXPECT_EQ(outcome.exit_code, 4);
  EXPECT_NE(first_error(outcome)["message"].get<std::string>().find("launch.json"), std::string::npos);
  EXPECT_TRUE(outcome.report["device"].is_null());
}

TEST(Runner, MalformedLaunchJsonIsALoadErrorNamingTheField) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  std::ofstream(dir.file("launch.json")) << "{\"format\": \"nautilus-kernel-package\", \"version\": 1,"
                                            " \"arch\": \"sm_90a\", \"cubins\": {\"sm_90a\": \"kernel.sm_90a.cubin\"}}";
  RunnerOutcome outcome = run_runner(fake_options(dir.path()));
  EXPECT_EQ(outcome.report["status"], "load_error");
  EXPECT_NE(first_error(outcome)["message"].get<std::string>().find("buffers"), std::string::npos)
      << outcome.report.dump(2);

  std::ofstream(dir.file("launch.json")) << "not json";
  outcome = run_runner(fake_options(dir.path()));
  EXPECT_EQ(outcome.report["status"], "load_error");
}

TEST(Runner, ReferenceThatDoesNotMatchIsALoadError) {
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref");
  write_test_package(package, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  write_test_package(reference, {{"X", {37, 30}, DType::F32, "input"}, {"Y", {37, 30}, DType::F32, "output"}},
                     {{"fake_copy", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(package, reference));
  EXPECT_EQ(outcome.report["status"], "load_error");
  EXPECT_NE(first_error(outcome)["message"].get<std::string>().find("shape"), std::string::npos);

  outcome = run_runner(fake_options(package, dir.file("missing-ref")));
  EXPECT_EQ(outcome.report["status"], "load_error");
  EXPECT_NE(first_error(outcome)["message"].get<std::string>().find("reference package"),
            std::string::npos);
}

TEST(Runner, KernelMissingFromTheModuleIsALoadError) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"attention_O", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(dir.path()));
  EXPECT_EQ(outcome.report["status"], "load_error") << outcome.report.dump(2);
  EXPECT_EQ(first_error(outcome)["kernel"], "attention_O");
  EXPECT_EQ(first_error(outcome)["cuda_error_name"], "CUDA_ERROR_NOT_FOUND");
}

TEST(Runner, RejectedModuleImageIsALoadErrorWithTheJitLog) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  ScopedEnv env("NAUTILUS_FAKE_CUDA_MODULE_ERROR", "200");
  RunnerOutcome outcome = run_runner(fake_options(dir.path()));
  EXPECT_EQ(outcome.report["status"], "load_error");
  const std::string message = first_error(outcome)["message"];
  EXPECT_NE(message.find("device kernel image is invalid"), std::string::npos) << message;
  EXPECT_NE(message.find("fake JIT: the image was rejected"), std::string::npos) << message;
}

TEST(Runner, TooMuchSharedMemoryIsALoadError) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}, 300 << 10}});
  RunnerOutcome outcome = run_runner(fake_options(dir.path()));
  EXPECT_EQ(outcome.report["status"], "load_error");
  EXPECT_NE(first_error(outcome)["message"].get<std::string>().find("dynamic shared memory"),
            std::string::npos);
}

TEST(Runner, RefusedLaunchIsALaunchError) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_too_many_resources", {"X"}}});
  RunnerOutcome outcome = run_runner(fake_options(dir.path()));
  EXPECT_EQ(outcome.report["status"], "launch_error");
  EXPECT_EQ(outcome.exit_code, 5);
  EXPECT_EQ(first_error(outcome)["cuda_error"], 701);
  EXPECT_EQ(first_error(outcome)["kernel"], "fake_too_many_resources");
  EXPECT_EQ(first_error(outcome)["phase"], "validation");
}

TEST(Runner, FaultingKernelIsALaunchErrorAndTheDeviceRecovers) {
  TempDir dir;
  const std::string faulting = dir.file("fault"), good = dir.file("good");
  write_test_package(faulting, copy_buffers(), {{"fake_copy", {"X", "Y"}}, {"fake_fault", {"Y"}}});
  write_test_package(good, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOutcome outcome = run_runner(fake_options(faulting));
  EXPECT_EQ(outcome.report["status"], "launch_error") << outcome.report.dump(2);
  EXPECT_EQ(first_error(outcome)["cuda_error_name"], "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(first_error(outcome)["kernel"], "fake_fault");  // the wait after each kernel names it
  EXPECT_FALSE(outcome.abandon_gpu);
  EXPECT_FALSE(outcome.report.contains("timing"));
  // The faulted context was released, so the next run starts on a fresh one.
  EXPECT_EQ(run_runner(fake_options(good)).report["status"], "ok");
}

TEST(Runner, MissingDriverIsNoGpu) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOptions options = fake_options(dir.path());
  options.driver_library = "libnautilus-no-such-driver.so.1";
  RunnerOutcome outcome = run_runner(options);
  EXPECT_EQ(outcome.report["status"], "no_gpu");
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_EQ(first_error(outcome)["reason"], "library_not_found");
  EXPECT_EQ(outcome.report["package"]["spec"], "test");  // the package was read before the GPU
}

TEST(Runner, DriverWithoutDevicesIsNoGpu) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  ScopedEnv env("NAUTILUS_FAKE_CUDA_INIT_ERROR", "100");
  RunnerOutcome outcome = run_runner(fake_options(dir.path()));
  EXPECT_EQ(outcome.report["status"], "no_gpu");
  EXPECT_EQ(first_error(outcome)["reason"], "no_devices");
  EXPECT_EQ(outcome.report["device"]["driver_version"], "13.0");
}

TEST(Runner, DeviceOrdinalOutOfRangeIsAUsageError) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunnerOptions options = fake_options(dir.path());
  options.device = 3;
  RunnerOutcome outcome = run_runner(options);
  EXPECT_EQ(outcome.report["status"], "usage_error");
  EXPECT_NE(first_error(outcome)["message"].get<std::string>().find("1 CUDA device"), std::string::npos);
}

TEST(Runner, AmpereDeviceGetsTheSm80BinaryAndOtherwiseNvrtc) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}}, nlohmann::json::object(),
                     GpuArch::Sm80, "fake cubin", "this is not CUDA\n");
  {
    ScopedEnv env("NAUTILUS_FAKE_CUDA_COMPUTE", "86");
    RunnerOutcome outcome = run_runner(fake_options(dir.path()));
    EXPECT_EQ(outcome.report["status"], "ok") << outcome.report.dump(2);
    EXPECT_EQ(outcome.report["package"]["binary"]["arch"], "sm_80");
  }
  {
    // An sm_90 device cannot run the sm_80 cubin; kernel.cu here is not CUDA, so NVRTC fails
    // and the run reports a compile error with NVRTC's log (or no binary without NVRTC).
    RunnerOutcome outcome = run_runner(fake_options(dir.path()));
    const std::string status = outcome.report["status"];
    EXPECT_TRUE(status == "compile_error" || status == "load_error") << outcome.report.dump(2);
    if (status == "compile_error") {
      EXPECT_TRUE(first_error(outcome).contains("log"));
      EXPECT_EQ(outcome.exit_code, 4);
    }
  }
}

// ---- the runner process, through the client

RunResult run_runner_process(const std::string& package, const std::string& reference,
                             bool fake_driver, double gpu_timeout = 5) {
  RunRequest request;
  request.package_dir = package;
  request.reference_dir = reference;
  request.warmup = 1;
  request.repetitions = 3;
  request.gpu_timeout_seconds = gpu_timeout;
  ClientOptions options;
  options.command_template = "'" + runner_path() + "'";
  if (fake_driver) options.command_template += " --driver '" + fake_libcuda_path() + "'";
  options.timeout_seconds = 60;
  return run_package(request, options);
}

// On this project's build machines and in CI there is no GPU: the real runner must say so in
// valid JSON and exit non-zero. On a GPU machine it runs a fake-free package and fails to load
// its fake cubin instead, which is also a clean typed failure.
TEST(RunnerProcess, SystemDriverWithoutGpuReportsNoGpu) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunResult result = run_runner_process(dir.path(), "", /*fake_driver=*/false);
  ASSERT_FALSE(result.report.is_null()) << result.message;
  EXPECT_NE(result.process.exit_code, 0);
  if (result.status != RunStatus::NoGpu) {
    EXPECT_EQ(result.status, RunStatus::LoadError) << result.message;
    GTEST_SKIP() << "this machine has a GPU: " << result.message;
  }
  EXPECT_EQ(result.process.exit_code, 3);
  EXPECT_EQ(result.report["errors"][0]["kind"], "no_gpu");
  EXPECT_FALSE(result.report["errors"][0]["message"].get<std::string>().empty());
}

TEST(RunnerProcess, UsageErrorsAreJsonToo) {
  ChildResult child = run_child({runner_path(), "--reps", "0"}, {});
  EXPECT_EQ(child.exit_code, 2);
  nlohmann::json report = nlohmann::json::parse(child.stdout_text, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << child.stdout_text;
  EXPECT_EQ(report["status"], "usage_error");
  EXPECT_NE(child.stderr_text.find("--reps"), std::string::npos);

  child = run_child({runner_path(), "--help"}, {});
  EXPECT_EQ(child.exit_code, 0);
  EXPECT_NE(child.stdout_text.find("usage: nautilus-runner"), std::string::npos);
}

TEST(RunnerProcess, DevicesPrintsTheDeviceQuery) {
  ChildResult child = run_child({runner_path(), "--devices", "--driver", fake_libcuda_path()}, {});
  EXPECT_EQ(child.exit_code, 0) << child.stderr_text;
  nlohmann::json query = nlohmann::json::parse(child.stdout_text, nullptr, false);
  ASSERT_TRUE(query.is_object()) << child.stdout_text;
  EXPECT_EQ(query["devices"][0]["name"], "Nautilus Fake GPU 0");

  ScopedEnv no_device("NAUTILUS_FAKE_CUDA_INIT_ERROR", "100");
  child = run_child({runner_path(), "--devices", "--driver", fake_libcuda_path()}, {});
  EXPECT_EQ(child.exit_code, 3) << "no GPU";
  query = nlohmann::json::parse(child.stdout_text, nullptr, false);
  ASSERT_TRUE(query.is_object()) << child.stdout_text;
  EXPECT_TRUE(query.contains("no_gpu"));
}

TEST(RunnerProcess, PassingAndWrongPackagesThroughTheClient) {
  TempDir dir;
  const std::string good = dir.file("good"), wrong = dir.file("wrong"), reference = dir.file("ref");
  write_test_package(good, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  write_test_package(wrong, copy_buffers(), {{"fake_swap_halves", {"X", "Y"}}});
  write_test_package(reference, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  RunResult ok = run_runner_process(good, reference, true);
  EXPECT_EQ(ok.status, RunStatus::Ok) << ok.message << "\n" << ok.process.stdout_text;
  EXPECT_EQ(ok.validation_passed, true);
  EXPECT_TRUE(ok.total_median_us.has_value());
  RunResult bad = run_runner_process(wrong, reference, true);
  EXPECT_EQ(bad.status, RunStatus::WrongResults) << bad.message;
  EXPECT_EQ(bad.validation_passed, false);
}

TEST(RunnerProcess, FaultingKernelIsAnIllegalMemoryAccessAndTheParentSurvives) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_fault", {"Y"}}});
  RunResult result = run_runner_process(dir.path(), "", true);
  EXPECT_EQ(result.status, RunStatus::IllegalMemoryAccess) << result.message;
  EXPECT_EQ(result.process.exit_code, 5);
  EXPECT_NE(result.message.find("fake_fault"), std::string::npos) << result.message;
}

TEST(RunnerProcess, HangingKernelIsATimeoutReportedByTheRunner) {
  TempDir dir;
  write_test_package(dir.path(), copy_buffers(), {{"fake_hang", {"Y"}}});
  RunResult result = run_runner_process(dir.path(), "", true, /*gpu_timeout=*/0.3);
  EXPECT_EQ(result.status, RunStatus::Timeout) << result.message;
  EXPECT_EQ(result.process.exit_code, 6);  // the runner's own report, not the client's kill
  EXPECT_FALSE(result.process.timed_out);
  EXPECT_EQ(result.report["errors"][0]["kernel"], "fake_hang");
  EXPECT_NE(result.message.find("within 0.3 s"), std::string::npos) << result.message;
}

}  // namespace
}  // namespace nautilus::profiler
