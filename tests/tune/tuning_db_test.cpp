// The tuning database (core/tune/tuning_db.h): records round-trip, the best record, pruning,
// schema migration from a version-1 file, refusal of newer / corrupt / missing files, and the
// durability promises: a writer killed with SIGKILL leaves an intact file that lost at most the
// record in flight, and two writer processes at once lose nothing.
#include <gtest/gtest.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/tune/tuning_db.h"
#include "tests/common/temp_dir.h"

namespace nautilus::tune {
namespace {

using nautilus::testing::TempDir;

TuningRecord record(const std::string& schedule, std::optional<double> median_us,
                    Validation validation = Validation::Passed) {
  TuningRecord r;
  r.key.spec_hash = spec_text_hash("let M = 64\n");
  r.key.sizes = "M=64";
  r.key.schedule = schedule;
  r.key.device_name = "NVIDIA H100";
  r.key.sm_count = 132;
  r.key.sm_clock_khz = 1755000;
  r.key.driver_version = 13000;
  r.key.compiler_version = "nautilus test";
  r.spec_name = "gemm";
  r.status = median_us ? "ok" : "fault";
  r.validation = validation;
  r.median_us = median_us;
  if (median_us) {
    r.min_us = *median_us - 1;
    r.max_us = *median_us + 1;
  }
  r.kernels = {{"gemm_C", median_us, r.min_us, r.max_us, 128, 0}};
  r.registers = 128;
  r.spill_bytes = 0;
  r.estimate_us = 9.5;
  r.source = "test";
  return r;
}

std::unique_ptr<TuningDatabase> open_db(const std::string& path) {
  std::string error;
  auto db = TuningDatabase::open(path, true, &error);
  EXPECT_TRUE(db) << error;
  return db;
}

TEST(TuningDatabase, RecordsRoundTripAndTheBestIsTheFastestValidatedOne) {
  TempDir dir("tune-db");
  auto db = open_db(dir.file("sub/dir/tuning.db"));
  ASSERT_TRUE(db);
  EXPECT_EQ(db->schema_version(), TuningDatabase::kSchemaVersion);
  std::string error;
  const int64_t slow = db->insert(record("tile(C, m=64)", 20.0), &error);
  const int64_t fast = db->insert(record("tile(C, m=128)", 12.5), &error);
  // Faster, but its result was wrong: never the best.
  db->insert(record("tile(C, m=256)", 3.0, Validation::Failed), &error);
  db->insert(record("tile(C, m=32)", std::nullopt, Validation::NotRun), &error);
  ASSERT_GT(slow, 0) << error;
  ASSERT_GT(fast, slow);

  const std::optional<TuningRecord> read = db->get(fast);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->key.schedule, "tile(C, m=128)");
  EXPECT_EQ(read->key.sm_count, 132);
  EXPECT_EQ(read->key.sm_clock_khz, 1755000);
  EXPECT_EQ(read->validation, Validation::Passed);
  EXPECT_DOUBLE_EQ(read->median_us.value_or(0), 12.5);
  EXPECT_DOUBLE_EQ(read->min_us.value_or(0), 11.5);
  EXPECT_DOUBLE_EQ(read->estimate_us.value_or(0), 9.5);
  ASSERT_EQ(read->kernels.size(), 1u);
  EXPECT_EQ(read->kernels[0].name, "gemm_C");
  EXPECT_EQ(read->kernels[0].registers.value_or(0), 128);
  EXPECT_GT(read->created_unix, 0);

  const auto best = db->best(read->key.spec_hash, "M=64", "NVIDIA H100");
  ASSERT_TRUE(best);
  EXPECT_EQ(best->id, fast);
  EXPECT_FALSE(db->best(read->key.spec_hash, "M=128", "NVIDIA H100"));
  EXPECT_FALSE(db->best(read->key.spec_hash, "M=64", "NVIDIA A100"));

  EXPECT_TRUE(db->contains(record("tile(C, m=32)", std::nullopt).key));
  EXPECT_FALSE(db->contains(record("tile(C, m=16)", 1.0).key));
  EXPECT_EQ(db->list({}).size(), 4u);
  EXPECT_EQ(db->list({}).front().key.schedule, "tile(C, m=32)") << "newest first";
  EXPECT_EQ(db->integrity_check(), "ok");
}

TEST(TuningDatabase, PruneKeepsTheBestNOrDeletesByAge) {
  TempDir dir("tune-db");
  auto db = open_db(dir.file("tuning.db"));
  ASSERT_TRUE(db);
  std::string error;
  for (double us : {30.0, 10.0, 20.0, 40.0}) {
    db->insert(record("tile(C, m=" + std::to_string(static_cast<int>(us)) + ")", us), &error);
  }
  db->insert(record("broken", std::nullopt, Validation::NotRun), &error);
  PruneRequest keep_two;
  keep_two.keep_best = 2;
  EXPECT_EQ(db->prune(keep_two, &error), 3) << error;
  std::vector<double> left;
  for (const TuningRecord& r : db->list({})) left.push_back(r.median_us.value_or(-1));
  EXPECT_EQ(left, (std::vector<double>{20.0, 10.0}));

  PruneRequest old;
  old.filter.older_than_unix = 1;  // nothing was written before 1970
  EXPECT_EQ(db->prune(old, &error), 0);
  TuningRecord ancient = record("ancient", 5.0);
  ancient.created_unix = 100;
  db->insert(ancient, &error);
  old.filter.older_than_unix = 1000;
  EXPECT_EQ(db->prune(old, &error), 1);
  EXPECT_EQ(db->list({}).size(), 2u);
}

TEST(TuningDatabase, MigratesAVersionOneFileKeepingItsRecords) {
  TempDir dir("tune-db");
  const std::string path = dir.file("v1.db");
  {
    // A file as nautilus wrote it at schema version 1: the first migration only.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    const std::string v1 = TuningDatabase::migrations()[0] +
                           "UPDATE schema_version SET version = 1;"
                           "INSERT INTO measurements (created_unix, spec_hash, sizes, schedule, "
                           "device_name, status, validation, median_us) VALUES (5, 'abc', 'M=1', "
                           "'tile(C, m=64)', 'GPU', 'ok', 'passed', 7.0);";
    ASSERT_EQ(sqlite3_exec(raw, v1.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = open_db(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->schema_version(), TuningDatabase::kSchemaVersion);
  const auto best = db->best("abc", "M=1", "GPU");
  ASSERT_TRUE(best);
  EXPECT_DOUBLE_EQ(best->median_us.value_or(0), 7.0);
  EXPECT_FALSE(best->registers) << "columns added by the migration are empty for old rows";
  std::string error;
  TuningRecord fresh = record("tile(C, m=128)", 6.0);
  EXPECT_GT(db->insert(fresh, &error), 0) << error;
  EXPECT_EQ(db->get(db->list({}).front().id)->registers.value_or(0), 128);
}

TEST(TuningDatabase, MigratesAVersionTwoFileAddingTheCalibrationsTable) {
  TempDir dir("tune-db");
  const std::string path = dir.file("v2.db");
  {
    // A file as nautilus wrote it at schema version 2, with one record and no calibrations.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    const std::string v2 = TuningDatabase::migrations()[0] + TuningDatabase::migrations()[1] +
                           "UPDATE schema_version SET version = 2;"
                           "INSERT INTO measurements (created_unix, spec_hash, sizes, schedule, "
                           "device_name, status, validation, median_us, estimate_us) VALUES (5, "
                           "'abc', 'M=1', 'tile(C, m=64)', 'GPU', 'ok', 'passed', 7.0, 6.0);";
    ASSERT_EQ(sqlite3_exec(raw, v2.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = open_db(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->schema_version(), TuningDatabase::kSchemaVersion);
  EXPECT_DOUBLE_EQ(db->best("abc", "M=1", "GPU")->estimate_us.value_or(0), 6.0);
  EXPECT_TRUE(db->calibrations().empty());
  EXPECT_FALSE(db->calibration("GPU"));
  StoredCalibration calibration;
  calibration.device_name = "GPU";
  calibration.model = "analytical sm_90";
  calibration.factors = {{"dram_bandwidth", 0.75}, {"launch_overhead", 2.0}};
  calibration.fitted_records = 12;
  calibration.spearman_before = 0.5;
  calibration.spearman_after = 0.8;
  std::string error;
  ASSERT_TRUE(db->save_calibration(calibration, &error)) << error;
  db.reset();
  // Reopened (no migration runs twice): the calibration is there as written.
  db = open_db(path);
  ASSERT_TRUE(db);
  const auto read = db->calibration("GPU");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->factors, calibration.factors);
  EXPECT_EQ(read->fitted_records, 12);
  EXPECT_DOUBLE_EQ(read->spearman_after.value_or(0), 0.8);
  EXPECT_FALSE(read->held_out_spearman_after);
  EXPECT_GT(read->created_unix, 0);
  EXPECT_TRUE(db->remove_calibration("GPU", &error));
  EXPECT_FALSE(db->calibration("GPU"));
  EXPECT_EQ(db->integrity_check(), "ok");
}

TEST(TuningDatabase, MigratesAVersionThreeFileAndRecordsDuplicatesOfARecord) {
  TempDir dir("tune-db");
  const std::string path = dir.file("v3.db");
  {
    // A file as nautilus wrote it at schema version 3, with one measured record.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    const std::string v3 = TuningDatabase::migrations()[0] + TuningDatabase::migrations()[1] +
                           TuningDatabase::migrations()[2] +
                           "UPDATE schema_version SET version = 3;"
                           "INSERT INTO measurements (created_unix, spec_hash, sizes, schedule, "
                           "device_name, code_hash, status, validation, median_us) VALUES (5, "
                           "'abc', 'M=1', 'tile(C, m=64)', 'GPU', 'c0de', 'ok', 'passed', 7.0);";
    ASSERT_EQ(sqlite3_exec(raw, v3.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = open_db(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->schema_version(), 4);
  const auto original = db->best("abc", "M=1", "GPU");
  ASSERT_TRUE(original);
  EXPECT_FALSE(original->is_duplicate()) << "old records measured their own code";

  // The same code under another schedule: a record linking to the measured one.
  TuningRecord duplicate;
  duplicate.key = original->key;
  duplicate.key.schedule = "tile(C, m=64); split(C, k, 1)";
  duplicate.code_hash = "c0de";
  duplicate.status = "duplicate";
  duplicate.duplicate_of = original->id;
  std::string error;
  const int64_t id = db->insert(duplicate, &error);
  ASSERT_GT(id, 0) << error;
  db.reset();
  db = open_db(path);  // reopened: nothing migrates twice
  ASSERT_TRUE(db);
  const auto read = db->get(id);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->duplicate_of.value_or(0), original->id);
  EXPECT_FALSE(read->usable());
  EXPECT_TRUE(db->contains(duplicate.key)) << "a later run does not take the schedule again";
  EXPECT_EQ(db->best("abc", "M=1", "GPU")->id, original->id);
  EXPECT_EQ(db->integrity_check(), "ok");
}

TEST(TuningDatabase, RefusesMissingCorruptForeignAndNewerFilesWithAReason) {
  TempDir dir("tune-db");
  std::string error;
  EXPECT_FALSE(TuningDatabase::open(dir.file("none.db"), false, &error));
  EXPECT_NE(error.find("no tuning database at"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(dir.file("none.db")));

  std::ofstream(dir.file("junk.db")) << "this is not an SQLite file at all, just some text\n";
  EXPECT_FALSE(TuningDatabase::open(dir.file("junk.db"), false, &error));
  EXPECT_NE(error.find("not a usable tuning database"), std::string::npos) << error;

  {
    sqlite3* raw = nullptr;
    sqlite3_open(dir.file("foreign.db").c_str(), &raw);
    sqlite3_exec(raw, "CREATE TABLE photos (x);", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  EXPECT_FALSE(TuningDatabase::open(dir.file("foreign.db"), false, &error));
  EXPECT_NE(error.find("not written by nautilus"), std::string::npos) << error;

  {
    auto db = open_db(dir.file("newer.db"));
    ASSERT_TRUE(db);
  }
  {
    sqlite3* raw = nullptr;
    sqlite3_open(dir.file("newer.db").c_str(), &raw);
    sqlite3_exec(raw, "UPDATE schema_version SET version = 99;", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  EXPECT_FALSE(TuningDatabase::open(dir.file("newer.db"), false, &error));
  EXPECT_NE(error.find("schema version 99, written by a newer nautilus"), std::string::npos)
      << error;
}

TEST(TuningDatabase, DefaultPathFollowsXdgDataHome) {
  const char* saved_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved = saved_xdg ? saved_xdg : "";
  setenv("XDG_DATA_HOME", "/data/home", 1);
  EXPECT_EQ(default_database_path(), "/data/home/nautilus/tuning.db");
  unsetenv("XDG_DATA_HOME");
  const char* home = std::getenv("HOME");
  if (home) {
    EXPECT_EQ(default_database_path(), std::string(home) + "/.local/share/nautilus/tuning.db");
  }
  if (saved_xdg) setenv("XDG_DATA_HOME", saved.c_str(), 1);
}

TEST(TuningDatabase, SpecHashIgnoresCommentsAndLayoutButNotTokens) {
  const std::string a = spec_text_hash("# gemm\nlet M = 64\n\nC[m, n] = A[m, k] * B[k, n]\n");
  EXPECT_EQ(a, spec_text_hash("let M  =  64   # rows\nC[m, n] = A[m, k] * B[k, n]"));
  EXPECT_NE(a, spec_text_hash("let M = 65\nC[m, n] = A[m, k] * B[k, n]\n"));
  EXPECT_EQ(canonical_sizes({{"N", 2}, {"K", 3}, {"M", 1}}), "K=3,M=1,N=2");
}

// Writes records one by one, reporting each committed id on `report_fd`, until killed.
[[noreturn]] void write_forever(const std::string& path, int report_fd, const std::string& tag,
                                int count) {
  std::string error;
  auto db = TuningDatabase::open(path, true, &error);
  if (!db) {
    std::fprintf(stderr, "writer %s: %s\n", tag.c_str(), error.c_str());
    _exit(3);
  }
  for (int i = 0; count < 0 || i < count; ++i) {
    if (db->insert(record(tag + std::to_string(i), 1.0 + i), &error) <= 0) _exit(4);
    if (report_fd >= 0) {
      const int32_t done = i + 1;
      if (write(report_fd, &done, sizeof done) != sizeof done) _exit(5);
    }
  }
  db.reset();
  _exit(0);
}

TEST(TuningDatabase, AWriterKilledMidRunLeavesAnIntactFileLosingAtMostTheRecordInFlight) {
  TempDir dir("tune-db");
  const std::string path = dir.file("tuning.db");
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t writer = fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    close(pipe_fds[0]);
    write_forever(path, pipe_fds[1], "kill-", -1);
  }
  close(pipe_fds[1]);
  int32_t committed = 0;
  while (committed < 40) {
    ASSERT_EQ(read(pipe_fds[0], &committed, sizeof committed), (ssize_t)sizeof committed);
  }
  // The writer is between transactions or inside one: either way SIGKILL gives it no chance
  // to clean up.
  kill(writer, SIGKILL);
  int status = 0;
  waitpid(writer, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  // Records it committed after the last report we read are still in the pipe.
  for (int32_t more; read(pipe_fds[0], &more, sizeof more) == sizeof more;) committed = more;
  close(pipe_fds[0]);

  auto db = open_db(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->integrity_check(), "ok");
  const size_t rows = db->list({}).size();
  EXPECT_GE(rows, static_cast<size_t>(committed));
  EXPECT_LE(rows, static_cast<size_t>(committed) + 1) << "only the record in flight may differ";
  std::string error;
  EXPECT_GT(db->insert(record("after", 1.0), &error), 0) << error;
}

TEST(TuningDatabase, TwoWriterProcessesAtOnceLoseNoRecord) {
  TempDir dir("tune-db");
  const std::string path = dir.file("tuning.db");
  constexpr int kEach = 150;
  pid_t writers[2];
  for (int w = 0; w < 2; ++w) {
    writers[w] = fork();
    ASSERT_GE(writers[w], 0);
    if (writers[w] == 0) write_forever(path, -1, "writer" + std::to_string(w) + "-", kEach);
  }
  for (pid_t writer : writers) {
    int status = 0;
    waitpid(writer, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  auto db = open_db(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->list({}).size(), 2u * kEach);
  EXPECT_EQ(db->integrity_check(), "ok");
}

}  // namespace
}  // namespace nautilus::tune
