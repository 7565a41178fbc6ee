// nautilus-difftest: differential testing at scale (docs/difftest.md). Runs COUNT triples
// (random spec × random schedule × every interpreter stage against the float64 reference) in
// worker processes, and prints a summary and a reproducer for every failure.
//
// Workers are forked processes, not threads, so a crash or a hang in the compiler is itself a
// finding (kind "crash" / "timeout") instead of the end of the run: each worker writes the
// triple it is on to an in-flight file before running it, and the parent turns a dead worker's
// in-flight triple into a failure and starts a new worker after it.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/difftest/difftest.h"
#include "tools/difftest/spec_generator.h"

namespace fs = std::filesystem;
using nautilus::difftest::TripleOptions;
using nautilus::difftest::TripleResult;

namespace {

const char* kUsage = R"(usage: nautilus-difftest [--count N] [--seed S] [--jobs J] [--out DIR]
                         [--time-limit SECONDS] [--start I] [--category C]
                         [--triple-timeout SECONDS] [--search-share P] [--hopper-share P]
                         [--only I] [--quiet] [--strict-f32]

Differential testing: random valid specs x random schedules from the search's candidate space x
the scalar, vrtile and matile interpreters, each compared with the float64 reference.

  --count N            triples to run (default 200): indices START .. START+N-1
  --seed S             run seed (default 1); triple I of seed S is always the same triple
  --jobs J             worker processes (default 1)
  --out DIR            where results and reproducers go (default difftest-out); each failure
                       gets DIR/failures/<seed>-<index>/ with spec.nt, schedule.json, README.txt
  --time-limit SECONDS stop starting triples after this long (default: none)
  --start I            first triple index (default 0)
  --category C         only specs of category C (elementwise, reduction, softmax, attention,
                       gemm, norm, nested)
  --triple-timeout S   a triple running longer is a failure (kind timeout; default 120)
  --search-share P     share of triples scheduled by the search itself (default 0.06)
  --hopper-share P     share of triples lowered for sm_90a, their schedules drawn with the
                       search's sm_90a moves (warp_spec, persistent, tile_order; default 0.25)
  --only I             run triple I in this process and print everything about it
  --quiet              print failures only as one line each (the reproducers are in DIR)
  --strict-f32         keep f32 outputs of contractions of 16-bit inputs (by default they get a
                       16-bit dtype: the VR pipeline rounds computed dot operands to 16 bits)

Exit status: 0 no failure, 1 at least one failure, 2 bad usage.)";

struct Options {
  uint64_t count = 200;
  uint64_t seed = 1;
  int jobs = 1;
  std::string out = "difftest-out";
  double time_limit = 0;
  uint64_t start = 0;
  int triple_timeout = 120;
  std::optional<uint64_t> only;
  bool quiet = false;
  TripleOptions triple;
};

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--count") o.count = std::stoull(value());
    else if (arg == "--seed") o.seed = std::stoull(value());
    else if (arg == "--jobs") o.jobs = std::max(1, std::stoi(value()));
    else if (arg == "--out") o.out = value();
    else if (arg == "--time-limit") o.time_limit = std::stod(value());
    else if (arg == "--start") o.start = std::stoull(value());
    else if (arg == "--category") o.triple.category = value();
    else if (arg == "--triple-timeout") o.triple_timeout = std::stoi(value());
    else if (arg == "--search-share") o.triple.search_probability = std::stod(value());
    else if (arg == "--hopper-share") o.triple.hopper_probability = std::stod(value());
    else if (arg == "--only") o.only = std::stoull(value());
    else if (arg == "--quiet") o.quiet = true;
    else if (arg == "--strict-f32") o.triple.strict_f32 = true;
    else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage << "\n";
      std::exit(0);
    } else {
      throw std::runtime_error("unknown argument '" + arg + "'");
    }
  }
  const auto& categories = nautilus::difftest::spec_categories();
  if (!o.triple.category.empty() &&
      std::find(categories.begin(), categories.end(), o.triple.category) == categories.end()) {
    throw std::runtime_error("unknown category '" + o.triple.category + "'");
  }
  return o;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string reproducer_dir(const Options& o, const TripleResult& r) {
  return o.out + "/failures/" + std::to_string(r.seed) + "-" + std::to_string(r.index);
}

// ---- workers -------------------------------------------------------------------------------

std::string results_path(const Options& o, int worker) {
  return o.out + "/work/results-" + std::to_string(worker) + ".jsonl";
}
std::string inflight_path(const Options& o, int worker) {
  return o.out + "/work/inflight-" + std::to_string(worker) + ".json";
}

void write_inflight(const Options& o, int worker, const TripleResult& r) {
  std::ofstream file(inflight_path(o, worker), std::ios::trunc);
  file << nautilus::difftest::to_json(r).dump() << "\n";
}

[[noreturn]] void run_worker(const Options& o, int worker, uint64_t first, double deadline) {
  std::ofstream results(results_path(o, worker), std::ios::app);
  const uint64_t end = o.start + o.count;
  for (uint64_t index = first; index < end; index += static_cast<uint64_t>(o.jobs)) {
    if (o.time_limit > 0 && now_seconds() > deadline) break;
    TripleResult marker;
    marker.seed = o.seed;
    marker.index = index;
    write_inflight(o, worker, marker);
    TripleOptions options = o.triple;
    alarm(static_cast<unsigned>(o.triple_timeout));
    TripleResult r = nautilus::difftest::run_triple(o.seed, index, options);
    alarm(0);
    results << nautilus::difftest::to_json(r).dump() << "\n";
    results.flush();
    if (r.status == "failed") {
      if (o.quiet) {
        std::cerr << "FAILURE: triple " << index << ": " << r.failure_kind << " at "
                  << r.failure_stage << " (" << r.category << ")\n";
      } else {
        std::cerr << nautilus::difftest::describe_failure(r) << "\n";
      }
    }
  }
  results.close();
  std::fflush(nullptr);
  _exit(0);
}

// A dead worker's in-flight triple as a failure: the spec is regenerated from the pair
// (seed, index); the schedule is not known (replay with --only).
TripleResult crashed_triple(const Options& o, int worker, int status) {
  TripleResult r;
  std::ifstream file(inflight_path(o, worker));
  nlohmann::json json;
  try {
    file >> json;
    r = nautilus::difftest::triple_from_json(json);
  } catch (...) {
  }
  nautilus::difftest::Rng rng = nautilus::difftest::Rng::for_triple(r.seed, r.index);
  const auto spec = nautilus::difftest::generate_spec(
      rng, o.triple.category, nautilus::difftest::GeneratorOptions{o.triple.strict_f32});
  r.category = spec.category;
  r.spec_text = spec.text;
  r.eval_seed = rng.next() % 100000;
  r.status = "failed";
  r.failure_stage = "compile";
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    r.failure_kind = "timeout";
    r.detail = "the triple ran longer than " + std::to_string(o.triple_timeout) +
               " s (schedule not recorded: replay with --only " + std::to_string(r.index) + ")";
  } else {
    r.failure_kind = "crash";
    r.detail = (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                          strsignal(WTERMSIG(status)) + ")"
                                    : "exited with status " + std::to_string(WEXITSTATUS(status))) +
               " (schedule not recorded: replay with --only " + std::to_string(r.index) + ")";
  }
  return r;
}

std::vector<TripleResult> run_all(const Options& o) {
  fs::create_directories(o.out + "/work");
  for (int w = 0; w < o.jobs; ++w) {
    fs::remove(results_path(o, w));
    fs::remove(inflight_path(o, w));
  }
  const double deadline = now_seconds() + o.time_limit;
  std::map<pid_t, int> workers;
  const auto spawn = [&](int worker, uint64_t first) {
    if (first >= o.start + o.count) return;
    if (o.time_limit > 0 && now_seconds() > deadline) return;
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("nautilus-difftest: fork");
      std::exit(2);
    }
    if (pid == 0) run_worker(o, worker, first, deadline);
    workers[pid] = worker;
  };
  for (int w = 0; w < o.jobs; ++w) spawn(w, o.start + static_cast<uint64_t>(w));
  std::vector<TripleResult> crashed;
  while (!workers.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) break;
    auto it = workers.find(pid);
    if (it == workers.end()) continue;
    const int worker = it->second;
    workers.erase(it);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    TripleResult r = crashed_triple(o, worker, status);
    std::cerr << nautilus::difftest::describe_failure(r) << "\n";
    crashed.push_back(r);
    spawn(worker, r.index + static_cast<uint64_t>(o.jobs));
  }
  std::vector<TripleResult> results = crashed;
  for (int w = 0; w < o.jobs; ++w) {
    std::ifstream file(results_path(o, w));
    std::string line;
    while (std::getline(file, line)) {
      if (line.empty()) continue;
      try {
        results.push_back(nautilus::difftest::triple_from_json(nlohmann::json::parse(line)));
      } catch (...) {
      }
    }
  }
  std::sort(results.begin(), results.end(),
            [](const TripleResult& a, const TripleResult& b) { return a.index < b.index; });
  return results;
}

// ---- summary -------------------------------------------------------------------------------

struct Counts {
  int total = 0, passed = 0, refused = 0, failed = 0;
  void add(const TripleResult& r) {
    ++total;
    if (r.status == "passed") ++passed;
    else if (r.status == "refused") ++refused;
    else ++failed;
  }
};

void print_row(const std::string& name, const Counts& c) {
  std::printf("    %-12s %7d %7d %7d %7d\n", name.c_str(), c.total, c.passed, c.refused, c.failed);
}

int summarize(const Options& o, const std::vector<TripleResult>& results, double seconds) {
  Counts all;
  std::map<std::string, Counts> by_category, by_schedule, by_arch;
  std::map<std::string, std::map<std::string, int>> by_stage;  // stage -> status -> count
  std::map<std::string, int> failures_by_kind;
  double slowest = 0;
  uint64_t slowest_index = 0;
  for (const TripleResult& r : results) {
    all.add(r);
    by_category[r.category].add(r);
    by_schedule[r.schedule_kind.empty() ? "-" : r.schedule_kind].add(r);
    by_arch[r.arch].add(r);
    if (r.warp_roles) by_arch[r.arch + " roles"].add(r);
    for (const auto& s : r.stages) ++by_stage[s.stage][s.status];
    if (r.status == "failed") {
      ++failures_by_kind[r.failure_kind];
      if (r.failure_stage != "scalar" && r.failure_stage != "vrtile" &&
          r.failure_stage != "matile") {
        ++by_stage[r.failure_stage]["failed"];
      }
    }
    if (r.seconds > slowest) {
      slowest = r.seconds;
      slowest_index = r.index;
    }
  }
  nlohmann::json failures = nlohmann::json::array();
  for (const TripleResult& r : results) {
    if (r.status != "failed") continue;
    const std::string dir = reproducer_dir(o, r);
    const std::string error = nautilus::difftest::write_reproducer(r, dir);
    if (!error.empty()) std::cerr << "nautilus-difftest: " << error << "\n";
    failures.push_back({{"index", r.index}, {"kind", r.failure_kind}, {"stage", r.failure_stage},
                        {"category", r.category}, {"reproducer", dir}});
  }

  std::printf("\n== difftest: seed %llu, triples %llu..%llu, %d job(s), %.1f s ==\n",
              static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.start),
              static_cast<unsigned long long>(o.start + o.count - 1), o.jobs, seconds);
  std::printf("  triples run %d: passed %d, refused %d, failed %d", all.total, all.passed,
              all.refused, all.failed);
  if (static_cast<uint64_t>(all.total) < o.count) std::printf(" (time limit reached)");
  std::printf("\n  per stage:     %9s %7s %7s %7s\n", "evaluated", "passed", "failed", "skipped");
  for (const char* stage : {"spec", "compile", "scalar", "vrtile", "matile"}) {
    auto& s = by_stage[stage];
    const int evaluated = s["passed"] + s["failed"];
    std::printf("    %-12s %9d %7d %7d %7d\n", stage, evaluated, s["passed"], s["failed"],
                s["skipped"]);
  }
  std::printf("  per category:   triples  passed refused  failed\n");
  for (const auto& [name, c] : by_category) print_row(name, c);
  std::printf("  per schedule:   triples  passed refused  failed\n");
  for (const auto& [name, c] : by_schedule) print_row(name, c);
  std::printf("  per target:     triples  passed refused  failed   (roles: warp-specialized)\n");
  for (const auto& [name, c] : by_arch) print_row(name, c);
  if (!failures_by_kind.empty()) {
    std::printf("  failures by kind:");
    for (const auto& [kind, n] : failures_by_kind) std::printf(" %s %d", kind.c_str(), n);
    std::printf("\n  reproducers: %s/failures/\n", o.out.c_str());
  }
  std::printf("  slowest triple: %llu (%.2f s)\n", static_cast<unsigned long long>(slowest_index),
              slowest);

  nlohmann::json summary = {{"seed", o.seed},      {"start", o.start},        {"count", o.count},
                            {"run", all.total},    {"passed", all.passed},    {"refused", all.refused},
                            {"failed", all.failed}, {"seconds", seconds},      {"failures", failures}};
  nlohmann::json categories = nlohmann::json::object();
  for (const auto& [name, c] : by_category) {
    categories[name] = {{"run", c.total}, {"passed", c.passed}, {"refused", c.refused},
                        {"failed", c.failed}};
  }
  summary["categories"] = categories;
  nlohmann::json targets = nlohmann::json::object();
  for (const auto& [name, c] : by_arch) {
    targets[name] = {{"run", c.total}, {"passed", c.passed}, {"refused", c.refused},
                     {"failed", c.failed}};
  }
  summary["targets"] = targets;
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [stage, statuses] : by_stage) stages[stage] = statuses;
  summary["stages"] = stages;
  std::ofstream(o.out + "/summary.json") << summary.dump(2) << "\n";
  return all.failed > 0 ? 1 : 0;
}

int run_only(const Options& o) {
  const TripleResult r = nautilus::difftest::run_triple(o.seed, *o.only, o.triple);
  std::printf("triple %llu of seed %llu: %s (%s, schedule %s, %s%s, eval seed %llu, %.2f s)\n",
              static_cast<unsigned long long>(r.index), static_cast<unsigned long long>(r.seed),
              r.status.c_str(), r.category.c_str(), r.schedule_kind.c_str(), r.arch.c_str(),
              r.warp_roles ? " with warp roles" : "",
              static_cast<unsigned long long>(r.eval_seed), r.seconds);
  std::printf("--- spec.nt\n%s", r.spec_text.c_str());
  std::printf("--- schedule\n");
  for (const auto& d : r.schedule.decisions) std::printf("%s\n", nautilus::sched::print_decision(d).c_str());
  for (const auto& s : r.stages) {
    std::printf("--- %s: %s: %s\n", s.stage.c_str(), s.status.c_str(), s.detail.c_str());
  }
  if (!r.detail.empty()) std::printf("--- detail\n%s\n", r.detail.c_str());
  if (r.status == "failed") {
    const std::string dir = reproducer_dir(o, r);
    const std::string error = nautilus::difftest::write_reproducer(r, dir);
    std::printf("reproducer: %s\n", error.empty() ? dir.c_str() : error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = *parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "nautilus-difftest: " << e.what() << " (try --help)\n";
    return 2;
  }
  if (options.only) return run_only(options);
  const double start = now_seconds();
  const std::vector<TripleResult> results = run_all(options);
  return summarize(options, results, now_seconds() - start);
}
