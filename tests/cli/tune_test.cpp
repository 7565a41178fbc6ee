// `nautilus tune`, `nautilus db` and `nautilus schedule`'s use of the tuning database, run as the
// real CLI against the runner's fake CUDA driver (it names the device: "Nautilus Fake GPU 0")
// and a stand-in runner script whose time is a deterministic function of the generated code
// (the fake driver cannot execute compiled kernels). So the best the tuner reports can be checked
// against every record, and the runner's call log shows what was (not) measured again.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/common/golden.h"
#include "tests/common/shell_run.h"
#include "tests/common/stand_in_runner.h"
#include "tests/common/temp_dir.h"

namespace {

using nautilus::testing::TempDir;

using CliRun = nautilus::testing::ShellRun;
CliRun run(const std::string& command) { return nautilus::testing::run_shell(command); }

// The stand-in runner (tests/common/stand_in_runner.h): a validated time of 10 + (cksum of
// kernel.cu mod 90) µs, every call logged to DIR/calls.txt.
std::string write_runner(const TempDir& dir, int wrong_every = 0, double sleep = 0) {
  return nautilus::testing::write_stand_in_runner(dir, wrong_every, sleep);
}

int calls(const TempDir& dir) {
  std::ifstream in(dir.file("calls.txt"));
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

const std::string kSizes = " -D M=12 -D N=10 -D K=24";

std::string gemm() { return nautilus::testing::source_path("assets/specs/gemm.nt"); }

std::string cli(const TempDir& dir, const std::string& args) {
  return std::string(NAUTILUS_CLI_PATH) + " " + args + " --db " + dir.file("tuning.db");
}

std::string tune(const TempDir& dir, const std::string& runner, const std::string& args) {
  return cli(dir, "tune " + gemm() + kSizes + " --driver " + NAUTILUS_FAKE_LIBCUDA +
                      " --runner " + runner + " " + args);
}

nlohmann::json export_json(const TempDir& dir) {
  const CliRun exported = run(cli(dir, "db export --format json") + " 2>/dev/null");
  return nlohmann::json::parse(exported.out, nullptr, false);
}

// The measured records among the exported ones (not the duplicates of one).
nlohmann::json measured(const nlohmann::json& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& record : records) {
    if (record["duplicate_of"].is_null()) out.push_back(record);
  }
  return out;
}

// The fastest validated median among the exported records.
double best_median(const nlohmann::json& records) {
  double best = 1e300;
  for (const auto& record : records) {
    if (record["validation"] == "passed" && record["median_us"].is_number()) {
      best = std::min(best, record["median_us"].get<double>());
    }
  }
  return best;
}

TEST(Tune, MeasuresTheBudgetRecordsEveryCandidateAndReportsTheFastest) {
  TempDir dir("tune-cli");
  const std::string runner = write_runner(dir);
  const CliRun tuned = run(tune(dir, runner, "--budget 10"));
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_NE(tuned.out.find("10 measured"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("tune: [10/10]"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("ETA"), std::string::npos) << tuned.out;
  EXPECT_EQ(calls(dir), 10);

  const nlohmann::json all = export_json(dir);
  ASSERT_TRUE(all.is_array());
  const nlohmann::json records = measured(all);
  ASSERT_EQ(records.size(), 10u);
  std::set<std::string> schedules;
  for (const auto& record : records) {
    schedules.insert(record["schedule"].get<std::string>());
    EXPECT_EQ(record["device_name"], "Nautilus Fake GPU 0");
    EXPECT_EQ(record["sizes"], "K=24,M=12,N=10");
    EXPECT_EQ(record["validation"], "passed");
    EXPECT_TRUE(record["estimate_us"].is_number()) << "the model's estimate is recorded";
    EXPECT_EQ(record["code_hash"].get<std::string>().size(), 16u);
    EXPECT_EQ(record["kernels"][0]["registers"], 64);
  }
  EXPECT_EQ(schedules.size(), 10u) << "no schedule is measured twice";

  // GEMM's space has schedules that lower to the same code (a launch decision that changes
  // nothing at these sizes): each code is measured once, the other schedules are recorded as
  // duplicates of its record, and the budget buys 10 distinct kernels.
  std::map<std::string, int> record_of_code;
  for (const auto& record : records) {
    EXPECT_TRUE(record_of_code.emplace(record["code_hash"], record["id"]).second)
        << "code measured twice: " << record["code_hash"];
  }
  ASSERT_GT(all.size(), records.size()) << "the space has duplicates\n" << tuned.out;
  for (const auto& record : all) {
    if (record["duplicate_of"].is_null()) continue;
    EXPECT_EQ(record["status"], "duplicate");
    EXPECT_EQ(record["duplicate_of"], record_of_code.at(record["code_hash"]))
        << record["schedule"];
  }
  const std::string summary = std::to_string(all.size() - records.size()) + " duplicates skipped";
  EXPECT_NE(tuned.out.find(summary), std::string::npos) << summary << "\n" << tuned.out;
  EXPECT_NE(tuned.out.find(", not measured"), std::string::npos) << "a progress line per duplicate";

  // The reported best is the fastest of all records, and db --best and schedule agree.
  const double best = best_median(records);
  char best_line[64];
  std::snprintf(best_line, sizeof best_line, "best: %.1f µs", best);
  EXPECT_NE(tuned.out.find(best_line), std::string::npos) << best_line << "\n" << tuned.out;
  const CliRun best_record = run(cli(dir, "db --best " + gemm() + kSizes + " --driver " +
                                           NAUTILUS_FAKE_LIBCUDA));
  ASSERT_EQ(best_record.status, 0) << best_record.out;
  std::snprintf(best_line, sizeof best_line, "median %.1f µs", best);
  EXPECT_NE(best_record.out.find(best_line), std::string::npos) << best_record.out;
}

TEST(Tune, ASecondRunMeasuresNothingTwiceAndResumeCountsEarlierRuns) {
  TempDir dir("tune-cli");
  const std::string runner = write_runner(dir);
  ASSERT_EQ(run(tune(dir, runner, "--budget 6")).status, 0);
  ASSERT_EQ(calls(dir), 6);
  // --resume with the same budget: the budget is spent already.
  const CliRun resumed = run(tune(dir, runner, "--budget 6 --resume"));
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_EQ(calls(dir), 6) << resumed.out;
  EXPECT_NE(resumed.out.find("0 measured"), std::string::npos) << resumed.out;
  // A plain second run skips what the database has and measures new candidates only.
  const CliRun second = run(tune(dir, runner, "--budget 4"));
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_EQ(calls(dir), 10);
  EXPECT_NE(second.out.find("already in the database"), std::string::npos);
  EXPECT_EQ(second.out.find(" 0 already in the database"), std::string::npos) << second.out;
  std::set<std::string> schedules;
  const nlohmann::json records = measured(export_json(dir));
  for (const auto& record : records) schedules.insert(record["schedule"].get<std::string>());
  EXPECT_EQ(records.size(), 10u);
  EXPECT_EQ(schedules.size(), 10u);
}

TEST(Tune, CandidatesThatFailValidationAreRecordedButNeverTheBest) {
  TempDir dir("tune-cli");
  const std::string runner = write_runner(dir, /*wrong_every=*/2);
  const CliRun tuned = run(tune(dir, runner, "--budget 8"));
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  const nlohmann::json records = measured(export_json(dir));
  ASSERT_EQ(records.size(), 8u);
  int failed = 0;
  for (const auto& record : records) {
    if (record["validation"] == "failed") {
      ++failed;
      EXPECT_EQ(record["status"], "wrong_results");
      EXPECT_TRUE(record["median_us"].is_null()) << "a wrong kernel is not timed";
    }
  }
  ASSERT_GT(failed, 0) << "the stand-in should fail some candidates";
  ASSERT_LT(failed, 8);
  char best_line[64];
  std::snprintf(best_line, sizeof best_line, "best: %.1f µs", best_median(records));
  EXPECT_NE(tuned.out.find(best_line), std::string::npos) << tuned.out;
}

TEST(Tune, SigintStopsAfterTheCandidateInFlightAndResumeFinishesTheBudget) {
  TempDir dir("tune-cli");
  const std::string runner = write_runner(dir, 0, /*sleep=*/0.4);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string command = tune(dir, runner, "--budget 20") + " > " + dir.file("out.txt") +
                                " 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Interrupt once two candidates have been handed to the runner.
  for (int i = 0; i < 600 && calls(dir) < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(calls(dir), 2);
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  std::ifstream out_file(dir.file("out.txt"));
  const std::string out((std::istreambuf_iterator<char>(out_file)), {});
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("interrupted"), std::string::npos) << out;
  const int runs = calls(dir);
  EXPECT_LT(runs, 20);
  // The candidates in flight were finished and recorded; none was left unrecorded.
  EXPECT_EQ(measured(export_json(dir)).size(), static_cast<size_t>(runs));

  const CliRun resumed = run(tune(dir, write_runner(dir), "--budget 20 --resume"));
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_EQ(calls(dir), 20) << resumed.out;
  EXPECT_EQ(measured(export_json(dir)).size(), 20u);
}

TEST(Tune, ScheduleUsesTheBestMeasuredScheduleAndSaysSo) {
  TempDir dir("tune-cli");
  ASSERT_EQ(run(tune(dir, write_runner(dir), "--budget 6")).status, 0);
  const std::string driver = std::string(" --driver ") + NAUTILUS_FAKE_LIBCUDA;
  const CliRun best = run(cli(dir, "db --best " + gemm() + kSizes + driver + " -o " +
                                    dir.file("best.json")));
  ASSERT_EQ(best.status, 0) << best.out;
  const CliRun scheduled = run(cli(dir, "schedule " + gemm() + kSizes + driver + " -o " +
                                         dir.file("scheduled.json")));
  ASSERT_EQ(scheduled.status, 0) << scheduled.out;
  EXPECT_NE(scheduled.out.find("best measured: tuning database record"), std::string::npos)
      << scheduled.out;
  std::ifstream a(dir.file("best.json")), b(dir.file("scheduled.json"));
  EXPECT_EQ(nlohmann::json::parse(a), nlohmann::json::parse(b));
  // --ignore-db searches; other sizes have no record and search too.
  const CliRun ignored = run(cli(dir, "schedule " + gemm() + kSizes + driver + " --ignore-db"));
  EXPECT_EQ(ignored.out.find("best measured"), std::string::npos) << ignored.out;
  EXPECT_NE(ignored.out.find("search:"), std::string::npos) << ignored.out;
  const CliRun other = run(cli(dir, "schedule " + gemm() + " -D M=16 -D N=10 -D K=24" + driver));
  EXPECT_EQ(other.out.find("best measured"), std::string::npos) << other.out;
}

// `db calibrate` works on what `nautilus tune` writes: the records of a device named as an H100
// (the fake driver takes any name) are compiled again from their spec paths, sizes and
// schedules and fitted (the stand-in runner's times are arbitrary, so only the path is checked,
// not the fit); tune then estimates with the calibration and says so, and --no-calibration not.
TEST(Tune, DbCalibrateReadsWhatTuneWroteAndTuneUsesTheCalibration) {
  TempDir dir("tune-cli");
  const std::string h100 = "NAUTILUS_FAKE_CUDA_DEVICE_NAME='NVIDIA H100 80GB HBM3' ";
  const std::string runner = write_runner(dir);
  const CliRun tuned = run(h100 + tune(dir, runner, "--budget 10"));
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_EQ(tuned.out.find("calibrated"), std::string::npos) << tuned.out;
  const CliRun calibrated = run(cli(dir, "db calibrate --hold-out none"));
  ASSERT_EQ(calibrated.status, 0) << calibrated.out;
  EXPECT_NE(calibrated.out.find("records: 10 validated, 10 used (10 fitted, 0 held out), "
                                "0 skipped"),
            std::string::npos)
      << calibrated.out;
  EXPECT_NE(calibrated.out.find("stored in"), std::string::npos) << calibrated.out;
  const CliRun again = run(h100 + tune(dir, runner, "--budget 2"));
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("tune: cost model: calibrated for NVIDIA H100 80GB HBM3"),
            std::string::npos)
      << again.out;
  const CliRun off = run(h100 + tune(dir, runner, "--budget 1 --no-calibration"));
  ASSERT_EQ(off.status, 0) << off.out;
  EXPECT_EQ(off.out.find("calibrated"), std::string::npos) << off.out;
  // Too few records to fit on: the minimum is named.
  const CliRun few = run(cli(dir, "db calibrate --hold-out gemm"));
  EXPECT_EQ(few.status, 1);
  EXPECT_NE(few.out.find("calibration needs at least 8"), std::string::npos) << few.out;
}

// The candidates are lowered for the arch the search estimated them for: on the default H100
// model a warp_spec schedule is timed as its TMA + wgmma kernel, not as the sm_80 lowering that
// ignores warp_spec (which ran at half the speed on the H100 and was recorded as the schedule's
// time). The stand-in runner logs how many wgmma the package's kernel.cu issues.
TEST(Tune, CandidatesAreLoweredForTheSearchsArch) {
  TempDir dir("tune-cli");
  const std::string runner = dir.file("wgmma_runner.sh");
  {
    std::ofstream script(runner);
    script << "#!/bin/sh\n"
           << "grep -c 'wgmma' \"$1/kernel.cu\" >> " << dir.file("wgmma.txt") << "\n"
           << "grep -o '\"arch\": *\"[a-z0-9_]*\"' \"$1/launch.json\" | head -1 >> "
           << dir.file("arch.txt") << "\n"
           << "echo '{\"format\": \"nautilus-runner-report\", \"version\": 1, \"status\": \"ok\", "
              "\"timing\": {\"kernels\": [{\"name\": \"gemm_C\", \"median_us\": 50, \"min_us\": 50, "
              "\"max_us\": 50}], \"total\": {\"median_us\": 50, \"min_us\": 50, \"max_us\": 50}}, "
              "\"validation\": {\"status\": \"passed\", \"passed\": true, \"max_relative_error\": "
              "0.001}, \"errors\": []}'\n";
  }
  std::filesystem::permissions(runner, std::filesystem::perms::owner_all);
  const CliRun tuned = run(cli(dir, "tune " + gemm() + " -D M=256 -D N=256 -D K=256 --driver " +
                                        NAUTILUS_FAKE_LIBCUDA + " --runner " + runner +
                                        " --budget 1 --pin 'tile(C_sum, m=128, n=128, k=64)'"
                                        " --pin 'warp_spec(C_sum, consumers=2, stages=2)'"));
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  std::ifstream wgmma(dir.file("wgmma.txt"));
  int count = 0;
  ASSERT_TRUE(wgmma >> count) << tuned.out;
  EXPECT_GT(count, 0) << "the timed kernel is the Hopper lowering of warp_spec";
  std::ifstream arch(dir.file("arch.txt"));
  std::string line;
  std::getline(arch, line);
  EXPECT_NE(line.find("sm_90a"), std::string::npos) << line;
}

// Several devices: NAUTILUS_FAKE_CUDA_DEVICES=2 gives the fake driver two devices, one model
// when NAUTILUS_FAKE_CUDA_DEVICE_NAME names it. The stand-in runner logs the --device it was
// given. With `wait_for_other`, the first run on each device, when the other device's first run
// has not ended, waits (up to 5 s) for that run to start and notes when it did: only runs on the
// two devices at once leave that note. On `fail_device` the runner dies from SIGSEGV after
// 0.3 s, as a runner whose GPU faults.
const std::string kTwoFakeGpus =
    "NAUTILUS_FAKE_CUDA_DEVICES=2 NAUTILUS_FAKE_CUDA_DEVICE_NAME='Nautilus Fake H100' ";

std::string write_device_runner(const TempDir& dir, int fail_device = -1,
                                bool wait_for_other = true) {
  const std::string path = dir.file("device_runner.sh");
  std::ofstream script(path);
  script << "#!/bin/sh\n"
         << "dev=0; prev=\n"
         << "for a in \"$@\"; do [ \"$prev\" = --device ] && dev=$a; prev=$a; done\n"
         << "sum=$(cksum < \"$1/kernel.cu\" | cut -d' ' -f1)\n"
         << "us=$(( 10 + sum % 90 ))\n"
         << "echo \"$dev $us $1\" >> " << dir.file("calls.txt") << "\n"
         << "started=" << dir.file("started-") << "; ended=" << dir.file("ended-")
         << "; other=$((1 - dev))\n"
         << "if " << (wait_for_other ? "true" : "false")
         << " && mkdir $started$dev 2>/dev/null; then\n"
         << "  if [ ! -d $ended$other ]; then\n"
         << "    i=0\n"
         << "    while [ $i -lt 100 ] && [ ! -d $started$other ]; do\n"
         << "      sleep 0.05; i=$((i + 1))\n"
         << "    done\n"
         << "    [ -d $started$other ] && echo $dev >> " << dir.file("overlap.txt") << "\n"
         << "  fi\n"
         << "  mkdir $ended$dev\n"
         << "fi\n"
         << "if [ \"$dev\" = " << fail_device << " ]; then sleep 0.3; kill -SEGV $$; fi\n"
         << "echo \"{\\\"format\\\": \\\"nautilus-runner-report\\\", \\\"version\\\": 1, "
            "\\\"status\\\": \\\"ok\\\", \\\"timing\\\": {\\\"kernels\\\": [{\\\"name\\\": "
            "\\\"gemm_C\\\", \\\"median_us\\\": $us, \\\"min_us\\\": $us, \\\"max_us\\\": $us}], "
            "\\\"total\\\": {\\\"median_us\\\": $us, \\\"min_us\\\": $us, \\\"max_us\\\": $us}}, "
            "\\\"validation\\\": {\\\"status\\\": \\\"passed\\\", \\\"passed\\\": true, "
            "\\\"max_relative_error\\\": 0.001}, \\\"errors\\\": []}\"\n";
  script.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// The device of every runner call, in order.
std::vector<int> devices_called(const TempDir& dir) {
  std::ifstream in(dir.file("calls.txt"));
  std::vector<int> devices;
  for (std::string line; std::getline(in, line);) devices.push_back(std::stoi(line));
  return devices;
}

TEST(TuneDevices, TwoDevicesMeasureEveryCandidateOnceBothAtOnce) {
  TempDir dir("tune-cli");
  const CliRun tuned =
      run(kTwoFakeGpus + tune(dir, write_device_runner(dir), "--budget 12 --devices 0,1"));
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_NE(tuned.out.find("12 measured"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("tune: measuring on CUDA devices 0,1"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("candidates per minute on 2 devices"), std::string::npos) << tuned.out;

  const std::vector<int> devices = devices_called(dir);
  ASSERT_EQ(devices.size(), 12u) << "one runner call per candidate";
  EXPECT_EQ(std::count(devices.begin(), devices.end(), 0) +
                std::count(devices.begin(), devices.end(), 1),
            12);
  EXPECT_GT(std::count(devices.begin(), devices.end(), 0), 0) << tuned.out;
  EXPECT_GT(std::count(devices.begin(), devices.end(), 1), 0) << tuned.out;
  EXPECT_TRUE(std::filesystem::exists(dir.file("overlap.txt")))
      << "the two devices' first runs should overlap\n" << tuned.out;

  const nlohmann::json records = measured(export_json(dir));
  ASSERT_EQ(records.size(), 12u);
  std::set<std::string> schedules;
  for (const auto& record : records) {
    schedules.insert(record["schedule"].get<std::string>());
    EXPECT_EQ(record["device_name"], "Nautilus Fake H100") << "the model's identity";
    EXPECT_EQ(record["validation"], "passed");
  }
  EXPECT_EQ(schedules.size(), 12u) << "every candidate is recorded once";
}

TEST(TuneDevices, ARunnerThatFailsOnOneDeviceIsRecordedAndTheOtherGoesOn) {
  TempDir dir("tune-cli");
  const CliRun tuned = run(kTwoFakeGpus + tune(dir, write_device_runner(dir, /*fail_device=*/1),
                                               "--budget 10 --devices 0,1"));
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_NE(tuned.out.find("10 measured"), std::string::npos) << tuned.out;
  const std::vector<int> devices = devices_called(dir);
  ASSERT_EQ(devices.size(), 10u);
  const nlohmann::json records = measured(export_json(dir));
  ASSERT_EQ(records.size(), 10u);
  int crashed = 0;
  int passed = 0;
  for (const auto& record : records) {
    if (record["status"] == "runner_crashed") {
      ++crashed;
      EXPECT_TRUE(record["median_us"].is_null());
    }
    passed += record["validation"] == "passed";
  }
  EXPECT_EQ(crashed, std::count(devices.begin(), devices.end(), 1)) << tuned.out;
  EXPECT_EQ(passed, std::count(devices.begin(), devices.end(), 0)) << tuned.out;
  EXPECT_GT(crashed, 0) << tuned.out;
  EXPECT_GT(passed, 0) << "device 0 went on\n" << tuned.out;
  char best_line[64];
  std::snprintf(best_line, sizeof best_line, "best: %.1f µs", best_median(records));
  EXPECT_NE(tuned.out.find(best_line), std::string::npos) << tuned.out;
}

TEST(TuneDevices, DevicesOfDifferentModelsAreRefusedByName) {
  TempDir dir("tune-cli");
  // Without a common name the fake devices are two models.
  const CliRun tuned = run("NAUTILUS_FAKE_CUDA_DEVICES=2 " +
                           tune(dir, write_device_runner(dir), "--budget 4 --devices 0,1"));
  EXPECT_EQ(tuned.status, 1) << tuned.out;
  EXPECT_NE(tuned.out.find("not all the same model"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("device 0 is Nautilus Fake GPU 0"), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("device 1 is Nautilus Fake GPU 1"), std::string::npos) << tuned.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("calls.txt"))) << "nothing was measured";
}

TEST(TuneDevices, DeviceListsAreCheckedAndGpuIndexIsOneDevice) {
  TempDir dir("tune-cli");
  const std::string runner = write_device_runner(dir, -1, /*wait_for_other=*/false);
  struct Case {
    std::string args;
    std::string message;
  };
  for (const Case& bad : {Case{"--devices 0,0", "--devices names device 0 twice"},
                          Case{"--devices 0,x", "--devices expects CUDA device ordinals"},
                          Case{"--devices 0,", "--devices expects CUDA device ordinals"},
                          Case{"--devices 0,2", "no CUDA device 2 (this machine has 2)"},
                          Case{"--devices 1 --gpu-index 1", "not both"},
                          Case{"--jobs 0", "--jobs expects an integer of at least 1"}}) {
    const CliRun tuned = run(kTwoFakeGpus + tune(dir, runner, "--budget 2 " + bad.args));
    EXPECT_EQ(tuned.status, 1) << bad.args << "\n" << tuned.out;
    EXPECT_NE(tuned.out.find(bad.message), std::string::npos) << bad.args << "\n" << tuned.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("calls.txt")));
  // --gpu-index N measures on device N alone, as before --devices.
  const CliRun tuned = run(kTwoFakeGpus + tune(dir, runner, "--budget 3 --gpu-index 1"));
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_EQ(devices_called(dir), std::vector<int>({1, 1, 1})) << tuned.out;
}

// Candidates compiled on several threads at once give the same kernels as one at a time: the
// lowering and NVRTC are safe to run concurrently, and nothing depends on the order.
TEST(TuneDevices, ParallelCompilationBuildsTheSameKernels) {
  TempDir serial_dir("tune-cli");
  TempDir parallel_dir("tune-cli");
  ASSERT_EQ(run(tune(serial_dir, write_runner(serial_dir), "--budget 8 --jobs 1")).status, 0);
  const CliRun parallel =
      run(tune(parallel_dir, write_runner(parallel_dir), "--budget 8 --jobs 4"));
  ASSERT_EQ(parallel.status, 0) << parallel.out;
  EXPECT_NE(parallel.out.find("compiling 4 candidates at once"), std::string::npos) << parallel.out;
  auto kernels = [](const nlohmann::json& records) {
    std::set<std::pair<std::string, std::string>> schedule_and_code;
    for (const auto& record : records) {
      schedule_and_code.insert(
          {record["schedule"].get<std::string>(), record["code_hash"].get<std::string>()});
    }
    return schedule_and_code;
  };
  EXPECT_EQ(kernels(measured(export_json(serial_dir))).size(), 8u);
  // The duplicates too: which schedule of a code is measured does not depend on build order.
  EXPECT_EQ(kernels(export_json(serial_dir)), kernels(export_json(parallel_dir)));
}

TEST(TuneDb, ListShowPruneAndCsvExport) {
  TempDir dir("tune-cli");
  ASSERT_EQ(run(tune(dir, write_runner(dir), "--budget 5")).status, 0);
  const CliRun list = run(cli(dir, "db list"));
  ASSERT_EQ(list.status, 0) << list.out;
  const nlohmann::json records = export_json(dir);
  const size_t total = records.size();
  ASSERT_EQ(measured(records).size(), 5u);
  EXPECT_NE(list.out.find(std::to_string(total) + " records in"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("Nautilus Fake GPU 0"), std::string::npos);
  // A duplicate says which record measured its code, in the list and in show.
  for (const auto& record : records) {
    if (record["duplicate_of"].is_null()) continue;
    const std::string original = std::to_string(record["duplicate_of"].get<int>());
    EXPECT_NE(list.out.find("dup of #" + original), std::string::npos) << list.out;
    const CliRun shown = run(cli(dir, "db show " + std::to_string(record["id"].get<int>())));
    EXPECT_NE(shown.out.find("duplicate:  of record " + original), std::string::npos)
        << shown.out;
    break;
  }
  const int id = records[0]["id"].get<int>();
  const CliRun show = run(cli(dir, "db show " + std::to_string(id)));
  ASSERT_EQ(show.status, 0) << show.out;
  EXPECT_NE(show.out.find("record " + std::to_string(id)), std::string::npos);
  EXPECT_NE(show.out.find(records[0]["code_hash"].get<std::string>()), std::string::npos);
  EXPECT_EQ(run(cli(dir, "db show 999999")).status, 1);

  const CliRun csv = run(cli(dir, "db export --format csv") + " 2>/dev/null");
  ASSERT_EQ(csv.status, 0);
  EXPECT_EQ(csv.out.rfind("id,created_unix,spec_name,", 0), 0u) << csv.out;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), static_cast<long>(total) + 1)
      << "header and a row per record";
  EXPECT_NE(csv.out.find("\"K=24,M=12,N=10\""), std::string::npos) << "commas are quoted";

  const CliRun refused = run(cli(dir, "db prune"));
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.out.find("never deletes everything unasked"), std::string::npos);
  const CliRun pruned = run(cli(dir, "db prune --keep-best 2"));
  ASSERT_EQ(pruned.status, 0) << pruned.out;
  EXPECT_NE(pruned.out.find("deleted " + std::to_string(total - 2) + " records"),
            std::string::npos)
      << pruned.out;
  const nlohmann::json left = export_json(dir);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_DOUBLE_EQ(best_median(left), best_median(records)) << "the best is kept";
  EXPECT_EQ(run(cli(dir, "db prune --spec " + gemm() + kSizes)).out.find("deleted 2"), 0u);
}

TEST(TuneDb, MissingAndCorruptDatabasesAreClearErrors) {
  TempDir dir("tune-cli");
  CliRun missing = run(cli(dir, "db list"));
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("no tuning database at"), std::string::npos) << missing.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("tuning.db"))) << "list creates nothing";

  std::ofstream(dir.file("tuning.db")) << "garbage that is not SQLite, long enough to matter....\n";
  const CliRun corrupt = run(cli(dir, "db list"));
  EXPECT_EQ(corrupt.status, 1);
  EXPECT_NE(corrupt.out.find("is not a usable tuning database"), std::string::npos) << corrupt.out;
  const CliRun tune_corrupt = run(tune(dir, write_runner(dir), "--budget 1"));
  EXPECT_EQ(tune_corrupt.status, 1);
  EXPECT_NE(tune_corrupt.out.find("is not a usable tuning database"), std::string::npos);
  EXPECT_EQ(calls(dir), 0) << "nothing is measured without a place to record it";

  const CliRun no_gpu = run(cli(dir, "tune " + gemm() + kSizes + " --driver /nonexistent/libcuda.so"));
  EXPECT_EQ(no_gpu.status, 1);

  EXPECT_EQ(run(cli(dir, "db frobnicate")).status, 1);
  EXPECT_EQ(run(tune(dir, "true", "--budget 2 --time 5")).status, 1);
  EXPECT_NE(run(tune(dir, "true", "--time soon")).out.find("--time expects a duration"),
            std::string::npos);
}

}  // namespace
