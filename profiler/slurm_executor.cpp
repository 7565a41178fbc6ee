#include "profiler/slurm_executor.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/tune/text_hash.h"
#include "profiler/child_process.h"
#include "profiler/local_executor.h"
#include "profiler/runner_client.h"

namespace nautilus::profiler {
namespace {

// sbatch, squeue and scancel answer at once unless the controller is unreachable; past this a
// call counts as failed (sbatch: the candidate is a recorded failure; squeue: no news this time).
constexpr double kSlurmCommandSeconds = 60.0;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

std::string trim(std::string text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// The last `count` non-empty lines of `text`, joined by " | " (a job log's tail in a message).
std::string last_lines(const std::string& text, int count) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(count) ? lines.size() - count : 0;
       i < lines.size(); ++i) {
    out += (out.empty() ? "" : " | ") + lines[i];
  }
  constexpr size_t kMaxChars = 400;
  if (out.size() > kMaxChars) out = "..." + out.substr(out.size() - kMaxChars);
  return out;
}

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

tune::CandidateOutcome failed_outcome(std::string status, std::string message) {
  tune::CandidateOutcome outcome;
  outcome.status = std::move(status);
  outcome.message = std::move(message);
  return outcome;
}

// "13.0" (format_driver_version) -> 13000; 0 when unknown.
int driver_version_code(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.get<int>();
  if (!value.is_string()) return 0;
  const std::string text = value.get<std::string>();
  const size_t dot = text.find('.');
  try {
    const int major = std::stoi(text.substr(0, dot));
    const int minor = dot == std::string::npos ? 0 : std::stoi(text.substr(dot + 1));
    return 1000 * major + 10 * minor;
  } catch (...) {
    return 0;
  }
}

}  // namespace

// One submitted job the executor waits for.
struct SlurmExecutor::Job {
  size_t index = 0;  // in the batch
  int64_t id = 0;
  SlurmJobFiles files;
  std::string code_hash;
  double submitted = 0.0;
  std::optional<double> ended_without_result;  // when squeue first said it ended (grace)
};

std::string default_slurm_directory() {
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache == '/') {
    return std::string(cache) + "/nautilus/slurm";
  }
  if (const char* home = std::getenv("HOME"); home && *home == '/') {
    return std::string(home) + "/.cache/nautilus/slurm";
  }
  return "/tmp/nautilus-slurm";
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

SlurmJobFiles slurm_job_files(const std::string& directory, const std::string& stem) {
  const std::string base = directory + "/" + stem;
  return {base + ".sh", base + ".log", base + ".report", base + ".stderr", base + ".status"};
}

std::string slurm_job_script(const std::vector<std::string>& argv, const SlurmJobFiles& files,
                             const std::string& comment) {
  std::ostringstream script;
  script << "#!/bin/sh\n"
         << "# " << comment << "\n"
         << "# Written by nautilus tune --executor slurm (profiler/slurm_executor.h); runs on the\n"
         << "# node Slurm allocates. The status file comes last and is renamed into place, so\n"
         << "# once it exists the report is complete.\n";
  for (size_t i = 0; i < argv.size(); ++i) script << (i ? " " : "") << shell_quote(argv[i]);
  script << " > " << shell_quote(files.report_path) << " 2> " << shell_quote(files.stderr_path)
         << "\n"
         << "status=$?\n"
         << "echo \"$status\" > " << shell_quote(files.status_path + ".tmp") << " && mv "
         << shell_quote(files.status_path + ".tmp") << " " << shell_quote(files.status_path)
         << "\n"
         // The runner's own failures are in its status; a failed job means the script itself
         // could not run or record it.
         << "exit 0\n";
  return script.str();
}

std::vector<std::string> sbatch_arguments(const SlurmExecutorOptions& options,
                                          const SlurmJobFiles& files) {
  const std::string directory = std::filesystem::path(files.script_path).parent_path().string();
  std::vector<std::string> args = {"--parsable", "--job-name=" + options.job_name,
                                   "--output=" + files.log_path, "--chdir=" + directory,
                                   "--ntasks=1"};
  if (!options.partition.empty()) args.push_back("--partition=" + options.partition);
  if (!options.gres.empty()) args.push_back("--gres=" + options.gres);
  if (!options.time_limit.empty()) args.push_back("--time=" + options.time_limit);
  args.insert(args.end(), options.extra_arguments.begin(), options.extra_arguments.end());
  args.push_back(files.script_path);
  return args;
}

std::optional<int64_t> parse_sbatch_job_id(const std::string& text) {
  // --parsable prints "id" or "id;cluster"; some sites' sbatch wrappers print notices first, so
  // the last non-empty line counts.
  std::string line;
  std::istringstream in(text);
  for (std::string next; std::getline(in, next);) {
    if (!trim(next).empty()) line = trim(next);
  }
  line = line.substr(0, line.find(';'));
  if (line.empty() || line.size() > 18 ||
      !std::all_of(line.begin(), line.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(line);
}

std::map<int64_t, SlurmJobState> parse_squeue(const std::string& text) {
  std::map<int64_t, SlurmJobState> jobs;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    const size_t first = line.find('|');
    if (first == std::string::npos) continue;
    const size_t second = line.find('|', first + 1);
    const std::optional<int64_t> id = parse_sbatch_job_id(line.substr(0, first));
    if (!id) continue;
    SlurmJobState state;
    state.state = line.substr(first + 1, second == std::string::npos ? std::string::npos
                                                                      : second - first - 1);
    if (second != std::string::npos) state.reason = line.substr(second + 1);
    jobs[*id] = state;
  }
  return jobs;
}

bool slurm_state_is_final(const std::string& state) {
  static const std::set<std::string> kFinal = {
      "COMPLETED", "CANCELLED", "FAILED",   "TIMEOUT", "NODE_FAIL",    "PREEMPTED",
      "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"};
  // squeue may append a '+' (e.g. "CANCELLED+" when cancelled by another user).
  std::string bare = state;
  while (!bare.empty() && bare.back() == '+') bare.pop_back();
  return kFinal.count(bare) > 0;
}

tune::CandidateOutcome outcome_from_job_result(const std::string& status_text,
                                               const std::string& report_text,
                                               const std::string& stderr_text,
                                               const tune::MachineIdentity* expected) {
  const std::string status_word = trim(status_text);
  int status = -1;
  try {
    size_t used = 0;
    status = std::stoi(status_word, &used);
    if (used != status_word.size()) status = -1;
  } catch (...) {
    status = -1;
  }
  if (status < 0) {
    return failed_outcome("job_failed", "the job recorded no exit status ('" + status_word + "')");
  }
  // The node's shell could not start the runner: not the candidate's fault, but recorded so the
  // run does not retry it forever; the message says what to fix.
  if (status == 126 || status == 127) {
    return failed_outcome(run_status_name(RunStatus::SpawnFailed),
                          "the runner could not be started on the node (exit status " +
                              std::to_string(status) + "): " + last_lines(stderr_text, 2));
  }
  ChildResult process;
  process.started = true;
  // A shell reports death by signal N as 128 + N.
  if (status > 128 && status <= 128 + 64) {
    process.signal = status - 128;
  } else {
    process.exit_code = status;
  }
  process.stdout_text = report_text;
  process.stderr_text = stderr_text;
  const RunResult run = classify_runner_result(std::move(process), 0.0);

  tune::CandidateOutcome outcome;
  outcome.status = run_status_name(run.status);
  if (run.status != RunStatus::Ok) outcome.message = run.message;
  if (run.status == RunStatus::NoGpu) {
    outcome.no_gpu = true;
    return outcome;
  }
  read_runner_report(run, outcome);
  // The identity recorded must be the device that ran it.
  if (expected && run.report.is_object() && run.report.contains("device") &&
      run.report["device"].is_object() && run.report["device"].contains("name")) {
    const nlohmann::json& device = run.report["device"];
    const std::string name = device.value("name", std::string());
    const int sm_count = device.value("sm_count", 0);
    if (name != expected->device_name || (sm_count != 0 && sm_count != expected->sm_count)) {
      return failed_outcome(
          "wrong_device", "the job ran on " + name + " (" + std::to_string(sm_count) +
                              " SMs), not on the " + expected->device_name + " (" +
                              std::to_string(expected->sm_count) +
                              " SMs) this run measures; make the GPU request specific "
                              "(e.g. --slurm-gres gpu:h100:1 or --slurm-arg=--constraint=...)");
    }
  }
  return outcome;
}

std::optional<tune::MachineIdentity> identity_from_device_query(const std::string& text,
                                                                std::string* why_not) {
  const nlohmann::json query = nlohmann::json::parse(text, nullptr, false);
  if (query.is_discarded() || !query.is_object()) {
    *why_not = "the device query printed no JSON" +
               (trim(text).empty() ? std::string() : ": " + last_lines(text, 2));
    return std::nullopt;
  }
  if (query.contains("no_gpu") && query["no_gpu"].is_object()) {
    *why_not = "no GPU on the Slurm node: " + query["no_gpu"].value("message", std::string("?"));
    return std::nullopt;
  }
  if (!query.contains("devices") || !query["devices"].is_array() || query["devices"].empty() ||
      !query["devices"][0].is_object()) {
    *why_not = "the device query lists no device";
    return std::nullopt;
  }
  // Slurm hides the GPUs not allocated (CUDA_VISIBLE_DEVICES): device 0 is the job's.
  const nlohmann::json& device = query["devices"][0];
  tune::MachineIdentity identity;
  identity.device_name = device.value("name", std::string());
  identity.sm_count = device.value("sm_count", 0);
  identity.sm_clock_khz = device.value("sm_clock_khz", 0);
  identity.memory_clock_khz = device.value("memory_clock_khz", 0);
  identity.driver_version =
      driver_version_code(query.contains("driver_version") ? query["driver_version"] : nullptr);
  if (identity.device_name.empty()) {
    *why_not = "the device query names no device";
    return std::nullopt;
  }
  return identity;
}

SlurmExecutor::SlurmExecutor(search::SearchInput input, SlurmExecutorOptions options)
    : input_(std::move(input)), options_(std::move(options)) {
  if (options_.directory.empty()) options_.directory = default_slurm_directory();
  options_.max_jobs = std::max(1, options_.max_jobs);
}

SlurmExecutor::~SlurmExecutor() {
  if (!outstanding_.empty()) cancel(outstanding_);
  measurer_.reset();
  std::error_code ignored;
  if (!run_directory_.empty()) std::filesystem::remove_all(run_directory_, ignored);
}

int SlurmExecutor::parallelism() const { return options_.max_jobs; }

bool SlurmExecutor::ensure_run_directory(std::string* error) {
  if (!run_directory_.empty()) return true;
  std::error_code ec;
  std::filesystem::create_directories(options_.directory, ec);
  std::string pattern = options_.directory + "/run-XXXXXX";
  if (ec || !mkdtemp(pattern.data())) {
    *error = "cannot create a directory in '" + options_.directory +
             "' (--slurm-dir: a directory the nodes share)";
    return false;
  }
  run_directory_ = pattern;
  MeasureOptions measure;
  measure.directory = run_directory_;
  measure.validate = true;  // a candidate is never timed without being checked
  measure.lower_arch = options_.lower_arch;
  measurer_ = std::make_unique<ScheduleMeasurer>(measure);
  return true;
}

std::vector<std::string> SlurmExecutor::runner_argv(
    const std::vector<std::string>& runner_arguments, std::string* error) const {
  const std::string command =
      options_.runner_command.empty() ? default_runner_command() : options_.runner_command;
  std::optional<std::vector<std::string>> argv = split_command_template(command, error);
  if (!argv) return {};
  argv->insert(argv->end(), runner_arguments.begin(), runner_arguments.end());
  return *argv;
}

std::optional<int64_t> SlurmExecutor::submit(const std::vector<std::string>& argv,
                                             const SlurmJobFiles& files,
                                             const std::string& comment, std::string* error) {
  {
    std::ofstream script(files.script_path, std::ios::binary);
    script << slurm_job_script(argv, files, comment);
    if (!script) {
      *error = "cannot write the job script '" + files.script_path + "'";
      return std::nullopt;
    }
  }
  ::chmod(files.script_path.c_str(), 0755);
  std::vector<std::string> command = {options_.sbatch};
  const std::vector<std::string> args = sbatch_arguments(options_, files);
  command.insert(command.end(), args.begin(), args.end());
  ChildOptions child;
  child.timeout_seconds = kSlurmCommandSeconds;
  const ChildResult result = run_child(command, child);
  if (!result.started) {
    *error = result.spawn_error + " (is Slurm's client installed here?)";
    return std::nullopt;
  }
  if (result.timed_out) {
    *error = "sbatch did not answer within " + seconds_text(kSlurmCommandSeconds) + " s";
    return std::nullopt;
  }
  if (!result.exited() || result.exit_code != 0) {
    *error = "sbatch failed: " + last_lines(result.stderr_text + result.stdout_text, 2);
    return std::nullopt;
  }
  const std::optional<int64_t> id = parse_sbatch_job_id(result.stdout_text);
  if (!id) *error = "sbatch printed no job id: " + last_lines(result.stdout_text, 2);
  if (id) outstanding_.push_back(*id);
  return id;
}

void SlurmExecutor::cancel(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  std::vector<std::string> command = {options_.scancel};
  for (int64_t id : ids) command.push_back(std::to_string(id));
  ChildOptions child;
  child.timeout_seconds = kSlurmCommandSeconds;
  run_child(command, child);
  for (int64_t id : ids) {
    outstanding_.erase(std::remove(outstanding_.begin(), outstanding_.end(), id),
                       outstanding_.end());
  }
}

void SlurmExecutor::poll(std::vector<Job>& jobs,
                         const std::function<void(Job&, tune::CandidateOutcome)>& finished) {
  // The result files first: a status file is the runner's outcome, whatever squeue says.
  auto forget = [&](size_t i) {
    outstanding_.erase(std::remove(outstanding_.begin(), outstanding_.end(), jobs[i].id),
                       outstanding_.end());
    jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(i));
  };
  for (size_t i = 0; i < jobs.size();) {
    Job& job = jobs[i];
    if (!file_exists(job.files.status_path)) {
      ++i;
      continue;
    }
    Job done = job;
    forget(i);
    tune::CandidateOutcome outcome = outcome_from_job_result(
        read_file(done.files.status_path), read_file(done.files.report_path),
        read_file(done.files.stderr_path), identity_ ? &*identity_ : nullptr);
    finished(done, std::move(outcome));
  }
  if (jobs.empty()) return;

  const double now = now_seconds();
  bool squeue_answered = false;
  std::string squeue_error;
  if (now - last_squeue_ >= options_.squeue_seconds) {
    last_squeue_ = now;
    std::string ids;
    for (const Job& job : jobs) ids += (ids.empty() ? "" : ",") + std::to_string(job.id);
    ChildOptions child;
    child.timeout_seconds = kSlurmCommandSeconds;
    const ChildResult result = run_child(
        {options_.squeue, "--noheader", "--states=all", "--jobs=" + ids, "--format=%i|%T|%r"},
        child);
    if (result.exited() && result.exit_code == 0) {
      squeue_answered = true;
      last_states_ = parse_squeue(result.stdout_text);
    } else if (result.exited() && result.stderr_text.find("Invalid job id") != std::string::npos) {
      // Every job asked about is gone from the controller's memory (MinJobAge).
      squeue_answered = true;
      last_states_.clear();
    } else {
      squeue_error = result.started ? last_lines(result.stderr_text, 1) : result.spawn_error;
    }
  }

  for (size_t i = 0; i < jobs.size();) {
    Job& job = jobs[i];
    const auto known = last_states_.find(job.id);
    const bool gone = squeue_answered && known == last_states_.end();
    const std::string state = known != last_states_.end() ? known->second.state : "";
    if (squeue_answered && (gone || slurm_state_is_final(state))) {
      // It ended. A COMPLETED job (or one the controller forgot) ran the script to its end, so
      // its status file comes: give a shared file system time to show it.
      const bool may_have_result = gone || state == "COMPLETED";
      if (!job.ended_without_result) job.ended_without_result = now;
      if (!may_have_result || now - *job.ended_without_result >= options_.result_grace_seconds) {
        const std::string log = last_lines(read_file(job.files.log_path), 3);
        std::string message =
            "Slurm job " + std::to_string(job.id) +
            (gone ? " is no longer known to the controller" : " ended " + state) +
            (known != last_states_.end() && !known->second.reason.empty() &&
                     known->second.reason != "None"
                 ? " (" + known->second.reason + ")"
                 : "") +
            " without a result";
        if (!log.empty()) message += "; job log: " + log;
        const std::string stderr_tail = last_lines(read_file(job.files.stderr_path), 2);
        if (!stderr_tail.empty()) message += "; runner stderr: " + stderr_tail;
        const bool timed_out = state == "TIMEOUT" || state == "DEADLINE";
        Job done = job;
        forget(i);
        finished(done, failed_outcome(timed_out ? "timeout" : "job_failed", message));
        continue;
      }
    }
    if (now - job.submitted >= options_.wait_seconds) {
      Job done = job;
      const std::string last =
          known != last_states_.end()
              ? "last state " + known->second.state +
                    (known->second.reason.empty() || known->second.reason == "None"
                         ? ""
                         : ", reason " + known->second.reason)
              : "state unknown" + (squeue_error.empty() ? "" : ": " + squeue_error);
      forget(i);
      cancel({done.id});
      finished(done, failed_outcome("timeout", "Slurm job " + std::to_string(done.id) +
                                                   " gave no result within " +
                                                   seconds_text(options_.wait_seconds) +
                                                   " s of its submission (" + last +
                                                   "); cancelled (--slurm-wait)"));
      continue;
    }
    ++i;
  }
}

std::optional<tune::MachineIdentity> SlurmExecutor::identity(std::string* why_not) {
  if (identity_) return identity_;
  if (!ensure_run_directory(why_not)) return std::nullopt;
  std::vector<std::string> arguments = {"--devices"};
  if (!options_.driver_library.empty()) {
    arguments.insert(arguments.end(), {"--driver", options_.driver_library});
  }
  std::string error;
  const std::vector<std::string> argv = runner_argv(arguments, &error);
  if (argv.empty()) {
    *why_not = "--runner: " + error;
    return std::nullopt;
  }
  Job job;
  job.files = slurm_job_files(run_directory_, "devices");
  job.submitted = now_seconds();
  const std::optional<int64_t> id =
      submit(argv, job.files, "nautilus tune: which GPU does the node have?", &error);
  if (!id) {
    *why_not = "cannot submit to Slurm: " + error;
    return std::nullopt;
  }
  job.id = *id;
  std::vector<Job> jobs = {job};
  std::optional<tune::MachineIdentity> identity;
  *why_not = "";
  while (!jobs.empty()) {
    if (options_.cancelled && options_.cancelled()) {
      cancel({job.id});
      *why_not = "interrupted while waiting for the device query (Slurm job " +
                 std::to_string(job.id) + ", cancelled)";
      return std::nullopt;
    }
    poll(jobs, [&](Job& done, const tune::CandidateOutcome& outcome) {
      // The device query's report is not a run report: read it directly.
      if (file_exists(done.files.status_path)) {
        identity = identity_from_device_query(read_file(done.files.report_path), why_not);
        if (!identity && why_not->find("no GPU") == std::string::npos) {
          const std::string err = last_lines(read_file(done.files.stderr_path), 2);
          if (!err.empty()) *why_not += " (stderr: " + err + ")";
        }
      } else {
        *why_not = "the device query job failed: " + outcome.message;
      }
    });
    if (!jobs.empty()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_seconds));
    }
  }
  if (!identity) {
    if (why_not->empty()) *why_not = "the device query job gave no answer";
    return std::nullopt;
  }
  identity->compiler_version = compiler_version();
  identity_ = identity;
  return identity_;
}

void SlurmExecutor::measure(
    const std::vector<sched::Schedule>& batch,
    const std::function<void(size_t, const tune::CandidateOutcome&)>& on_result) {
  auto cancelled = [&] { return options_.cancelled && options_.cancelled(); };
  std::string error;
  if (!ensure_run_directory(&error)) {
    for (size_t i = 0; i < batch.size(); ++i) on_result(i, failed_outcome("build-error", error));
    return;
  }
  std::vector<Job> jobs;
  auto report = [&](Job& job, tune::CandidateOutcome outcome) {
    outcome.code_hash = job.code_hash;
    on_result(job.index, outcome);
  };
  // Build and submit one candidate after the other, so the first jobs run while the next
  // candidates compile; look for finished jobs in between. Once the tuner says stop (the time
  // limit, Ctrl-C, an error) no further job is submitted; the submitted ones finish, unless
  // `cancelled` (Ctrl-C) cancels them below.
  for (size_t i = 0; i < batch.size() && !cancelled() && !should_stop_starting(); ++i) {
    const Measurement built = measurer_->prepare(input_.file, input_.sizes, batch[i]);
    if (!built.built()) {
      on_result(i, failed_outcome("build-error", built.build_error));
      continue;
    }
    Job job;
    job.index = i;
    job.code_hash = tune::hash_text(read_file(built.package_dir + "/kernel.cu"));
    if (code_already_measured(job.code_hash)) {
      // The same kernel as a candidate measured already: no job for it.
      on_result(i, duplicate_outcome(job.code_hash));
      continue;
    }
    RunRequest request;
    request.package_dir = built.package_dir;
    request.reference_dir = built.reference_dir;
    // The run directory is shared with the nodes: the first job computes the reference's
    // outputs and the others read them.
    request.reference_cache_dir = measurer_->reference_cache_dir();
    if (!options_.driver_library.empty()) {
      request.extra_arguments = {"--driver", options_.driver_library};
    }
    const std::vector<std::string> argv = runner_argv(runner_arguments(request), &error);
    if (argv.empty()) {
      tune::CandidateOutcome outcome = failed_outcome("spawn_failed", "--runner: " + error);
      outcome.code_hash = job.code_hash;
      on_result(i, outcome);
      continue;
    }
    const std::string stem = "job-" + std::to_string(++jobs_submitted_);
    job.files = slurm_job_files(run_directory_, stem);
    job.submitted = now_seconds();
    const std::optional<int64_t> id =
        submit(argv, job.files, "nautilus tune: candidate " + built.package_dir, &error);
    if (!id) {
      tune::CandidateOutcome outcome = failed_outcome("job_failed", error);
      outcome.code_hash = job.code_hash;
      on_result(i, outcome);
      continue;
    }
    job.id = *id;
    jobs.push_back(job);
    poll(jobs, report);
  }
  while (!jobs.empty()) {
    if (cancelled()) {
      std::vector<int64_t> ids;
      for (const Job& job : jobs) ids.push_back(job.id);
      cancel(ids);
      return;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_seconds));
    poll(jobs, report);
  }
}

}  // namespace nautilus::profiler
