// One reference per run (profiler/reference_cache.h): the runners a measurer starts share the
// reference's outputs through --reference-cache, so the reference kernels run once for a whole
// batch of candidates; a candidate that faults (first or in the middle) neither stops the others
// from being validated against the right outputs nor spoils the stored ones; a reference that
// fails, or a stored file that is damaged or of another seed, is computed again. The fake
// driver's launch log counts the reference's launches across the runner processes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/measure.h"
#include "profiler/reference_cache.h"
#include "profiler/runner.h"
#include "profiler/runner_client.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using testing::ScopedEnv;
using testing::TempDir;
using testing::copy_buffers;
using testing::fake_libcuda_path;
using testing::runner_path;
using testing::write_test_package;

// How many launches of `kernel` the fake driver logged in `log`.
int launches(const std::string& log, const std::string& kernel) {
  std::ifstream in(log);
  int count = 0;
  for (std::string line; std::getline(in, line);) count += line == kernel;
  return count;
}

MeasureOptions fake_measure_options(const std::string& directory) {
  MeasureOptions options;
  options.directory = directory;
  options.client.command_template =
      "'" + runner_path() + "' --driver '" + fake_libcuda_path() + "'";
  options.client.timeout_seconds = 60;
  options.run.warmup = 1;
  options.run.repetitions = 2;
  options.run.gpu_timeout_seconds = 5;
  return options;
}

// The runs of one measurer (as the local executor makes them, one runner process each) of
// hand-written packages validated against one reference.
struct BatchRun {
  std::vector<RunResult> results;
  int reference_launches = 0;
};

BatchRun run_batch(const TempDir& dir, const std::vector<std::string>& candidate_kernels,
                   bool share) {
  const std::string reference = dir.file("reference");
  write_test_package(reference, copy_buffers(DType::BF16),
                     {{"fake_reference_copy", {"X", "Y"}}});
  const std::string log = dir.file(share ? "launches-shared.log" : "launches-unshared.log");
  ScopedEnv launch_log("NAUTILUS_FAKE_CUDA_LAUNCH_LOG", log.c_str());
  MeasureOptions options = fake_measure_options(dir.file(share ? "shared" : "unshared"));
  options.share_reference_outputs = share;
  ScheduleMeasurer measurer(options);
  BatchRun batch;
  for (size_t i = 0; i < candidate_kernels.size(); ++i) {
    const std::string& kernel = candidate_kernels[i];
    Measurement measurement;
    measurement.package_dir = dir.file("candidate-" + std::to_string(i));
    measurement.reference_dir = reference;
    write_test_package(measurement.package_dir, copy_buffers(DType::BF16),
                       {{kernel, kernel == "fake_fault" ? std::vector<std::string>{"Y"}
                                                        : std::vector<std::string>{"X", "Y"}}});
    measurer.run(measurement);
    batch.results.push_back(measurement.run);
  }
  batch.reference_launches = launches(log, "fake_reference_copy");
  return batch;
}

TEST(ReferenceCache, TheReferenceRunsOnceForABatchAndAFaultDoesNotSpoilIt) {
  TempDir dir;
  // The first candidate faults, so does one in the middle; a wrong one must still be caught.
  const std::vector<std::string> kernels = {"fake_fault", "fake_copy", "fake_swap_halves",
                                            "fake_fault", "fake_copy", "fake_copy"};
  const BatchRun batch = run_batch(dir, kernels, /*share=*/true);
  ASSERT_EQ(batch.results.size(), kernels.size());
  EXPECT_EQ(batch.reference_launches, 1) << "one reference run for " << kernels.size()
                                         << " candidates";
  const RunStatus expected[] = {RunStatus::IllegalMemoryAccess, RunStatus::Ok,
                                RunStatus::WrongResults, RunStatus::IllegalMemoryAccess,
                                RunStatus::Ok, RunStatus::Ok};
  for (size_t i = 0; i < kernels.size(); ++i) {
    const RunResult& run = batch.results[i];
    EXPECT_EQ(run.status, expected[i]) << i << ": " << run.message << "\n"
                                       << run.process.stdout_text;
    ASSERT_TRUE(run.report.is_object()) << i;
    // The faulting first candidate's runner computed the reference before it ran the candidate.
    EXPECT_EQ(run.report["reference"]["outputs"], i == 0 ? "computed" : "cached") << i;
  }
  for (size_t i : {1, 4, 5}) {
    EXPECT_EQ(batch.results[i].validation_passed, true) << i;
    EXPECT_EQ(batch.results[i].max_relative_error.value_or(-1), 0.0) << i;
  }
  EXPECT_EQ(batch.results[2].validation_passed, false) << "validated against the right outputs";

  // Without sharing every runner that gets as far runs the reference itself.
  const BatchRun unshared = run_batch(dir, kernels, /*share=*/false);
  EXPECT_EQ(unshared.reference_launches, static_cast<int>(kernels.size()));
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_EQ(unshared.results[i].status, expected[i]) << i << ": " << unshared.results[i].message;
  }
}

TEST(ReferenceCache, TheMeasurerPassesItsCacheDirectoryToEveryRunner) {
  TempDir dir;
  MeasureOptions options = fake_measure_options(dir.file("packages"));
  ScheduleMeasurer measurer(options);
  EXPECT_EQ(measurer.reference_cache_dir(), dir.file("packages") + "/reference-outputs");
  RunRequest request;
  request.package_dir = "pkg";
  request.reference_dir = "ref";
  request.reference_cache_dir = measurer.reference_cache_dir();
  const std::vector<std::string> args = runner_arguments(request);
  ASSERT_GE(args.size(), 5u);
  EXPECT_EQ(args[3], "--reference-cache");
  EXPECT_EQ(args[4], measurer.reference_cache_dir());
  request.reference_dir.clear();  // nothing to validate against: nothing to share
  EXPECT_EQ(runner_arguments(request), std::vector<std::string>{"pkg"});

  options.share_reference_outputs = false;
  EXPECT_EQ(ScheduleMeasurer(options).reference_cache_dir(), "");

  ParsedRunnerArgs parsed = parse_runner_args({"pkg", "--reference", "ref",
                                               "--reference-cache", "cache"});
  ASSERT_TRUE(parsed.options) << parsed.error;
  EXPECT_EQ(parsed.options->reference_cache_dir, "cache");
  EXPECT_NE(parse_runner_args({"pkg", "--reference-cache="}).error.find("expects a directory"),
            std::string::npos);
}

RunnerOptions cached_options(const std::string& package, const std::string& reference,
                             const std::string& cache) {
  RunnerOptions options;
  options.package_dir = package;
  options.reference_dir = reference;
  options.reference_cache_dir = cache;
  options.driver_library = fake_libcuda_path();
  options.warmup = 1;
  options.repetitions = 2;
  options.timeout_seconds = 5;
  return options;
}

TEST(ReferenceCache, DamagedFilesOtherSeedsAndFailedReferencesAreComputedAgain) {
  TempDir dir;
  const std::string package = dir.file("pkg"), reference = dir.file("ref"),
                    cache = dir.file("cache");
  write_test_package(package, copy_buffers(), {{"fake_copy", {"X", "Y"}}});
  write_test_package(reference, copy_buffers(), {{"fake_reference_copy", {"X", "Y"}}});

  RunnerOutcome first = run_runner(cached_options(package, reference, cache));
  ASSERT_EQ(first.report["status"], "ok") << first.report.dump(2);
  EXPECT_EQ(first.report["reference"]["outputs"], "computed");
  const std::string key = first.report["reference"]["cache_key"];
  const std::string stored = cache + "/" + key + ".outputs";
  ASSERT_TRUE(std::filesystem::exists(stored));
  EXPECT_EQ(run_runner(cached_options(package, reference, cache)).report["reference"]["outputs"],
            "cached");

  // A file cut short (a full disk, a copy interrupted) is not trusted.
  std::filesystem::resize_file(stored, std::filesystem::file_size(stored) - 8);
  RunnerOutcome truncated = run_runner(cached_options(package, reference, cache));
  EXPECT_EQ(truncated.report["status"], "ok") << truncated.report.dump(2);
  EXPECT_EQ(truncated.report["reference"]["outputs"], "computed");
  EXPECT_EQ(run_runner(cached_options(package, reference, cache)).report["reference"]["outputs"],
            "cached") << "the damaged file was replaced";

  // Other inputs are other outputs.
  RunnerOptions other_seed = cached_options(package, reference, cache);
  other_seed.seed = 7;
  RunnerOutcome seeded = run_runner(other_seed);
  EXPECT_EQ(seeded.report["reference"]["outputs"], "computed");
  EXPECT_NE(seeded.report["reference"]["cache_key"], key);

  // A reference that faults stores nothing: the next runner tries it again.
  const std::string faulting = dir.file("faulting-ref");
  write_test_package(faulting, copy_buffers(), {{"fake_fault", {"Y"}}});
  for (int attempt = 0; attempt < 2; ++attempt) {
    RunnerOutcome failed = run_runner(cached_options(package, faulting, cache));
    EXPECT_EQ(failed.report["status"], "launch_error") << failed.report.dump(2);
    EXPECT_EQ(failed.report["errors"][0]["phase"], "reference");
    EXPECT_FALSE(failed.report["reference"].contains("outputs"));
  }
  size_t stored_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache)) {
    stored_files += entry.path().extension() == ".outputs";
  }
  EXPECT_EQ(stored_files, 2u) << "the two seeds of the good reference only";
}

}  // namespace
}  // namespace nautilus::profiler
