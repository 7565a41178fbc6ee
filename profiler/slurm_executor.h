// The tuner's Slurm executor (core/tune/executor.h): candidates are compiled here, on the
// submitting host, into kernel packages in a directory the cluster's nodes share; each candidate
// then becomes one Slurm batch job that runs nautilus-runner (validate, then time) on whatever
// node the scheduler allocates with the GPU request, and leaves the runner's report in that
// directory, where the executor reads it back into the tuner's callback (so one database on the
// submitting host gets every result).
//
//   tuner batch of 3 ──> build c0 ─ sbatch ─┐  build c1 ─ sbatch ─┐  build c2 ─ sbatch ─┐
//                                           v                     v                     v
//   node (job 41)        runner c0 > DIR/job-1.report, echo $? > DIR/job-1.status
//   node (job 42)                              runner c1 > ...
//   poll: DIR/job-N.status appears -> the runner's result; else squeue's state: a job that ended
//   (FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...) without a status file, or that did not end
//   within `wait_seconds` of its submission (then scancel), is a recorded failed outcome.
//
// Why `sbatch` (without --wait) and polling, not `srun` or `sbatch --wait`: sbatch answers with
// the job id at once, so every outstanding job can be cancelled by id (Ctrl-C, the executor's
// destructor, a job past its wait) and a whole batch is queued at once without one client
// process per job held open on the login node; the result is a file, so a job that dies, a node
// that fails or a time limit shows up as the job's final state from squeue rather than as a
// broken pipe. One squeue call per poll covers every outstanding job.
//
// The machine identity (the database key's device) is the node's: the first job runs
// `nautilus-runner --devices`, and every report's device must match it (a job that lands on
// another GPU model is a recorded `wrong_device` failure: make the GPU request specific).
//
// Nothing here is linked into nautilus-runner, and core/ stays free of processes and Slurm.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/search/search.h"
#include "core/tune/executor.h"
#include "profiler/measure.h"

namespace nautilus::profiler {

struct SlurmExecutorOptions {
  // Slurm's job options (sbatch's --partition, --gres, --time); empty: not passed, the cluster's
  // default. `gres` "gpu:1" asks for one GPU per job.
  std::string partition;
  std::string gres = "gpu:1";
  std::string time_limit = "10";  // Slurm's format: minutes, MM:SS, HH:MM:SS, D-HH, ...
  std::vector<std::string> extra_arguments;  // passed to sbatch verbatim (--account=..., ...)
  // A directory every node sees at the same path (the packages, job scripts and results go into
  // a fresh subdirectory of it, removed with the executor). Empty: default_slurm_directory().
  std::string directory;
  int max_jobs = 8;                  // candidates queued at once (the tuner's batch)
  double wait_seconds = 3600.0;      // submission to result, queueing included, per job
  // The runner command on the node, a template as runner_client.h's (empty: nautilus-runner next
  // to this program, which suits an installation on a shared file system).
  std::string runner_command;
  std::string driver_library;        // passed to the runner as --driver (tests: the fake one)
  std::string lower_arch = "sm_80";  // the search's (search::lowering_arch): what is timed
  std::string job_name = "nautilus-tune";
  // The Slurm commands (a test may point them elsewhere).
  std::string sbatch = "sbatch";
  std::string squeue = "squeue";
  std::string scancel = "scancel";
  double poll_seconds = 0.2;         // how often result files are looked for
  double squeue_seconds = 1.0;       // how often squeue is asked (at most)
  // After a job is COMPLETED, how long its status file may take to appear (NFS caching).
  double result_grace_seconds = 30.0;
  // Asked while jobs are outstanding: true cancels them all (scancel) and returns; the cancelled
  // candidates are not reported (so a later --resume measures them).
  std::function<bool()> cancelled;
};

// $XDG_CACHE_HOME/nautilus/slurm, else ~/.cache/nautilus/slurm (home directories are usually
// shared with the nodes), else /tmp/nautilus-slurm.
std::string default_slurm_directory();

// What one job runs: `argv` with stdout to `report_path` and stderr to `stderr_path`, then its
// exit status to `status_path` (written to a temporary name and renamed, so a status file is
// always complete and the report before it is too).
struct SlurmJobFiles {
  std::string script_path;
  std::string log_path;  // Slurm's --output: what the job itself (not the runner) printed
  std::string report_path;
  std::string stderr_path;
  std::string status_path;
};
SlurmJobFiles slurm_job_files(const std::string& directory, const std::string& stem);
std::string slurm_job_script(const std::vector<std::string>& argv, const SlurmJobFiles& files,
                             const std::string& comment);
// sbatch's arguments, the script last.
std::vector<std::string> sbatch_arguments(const SlurmExecutorOptions& options,
                                          const SlurmJobFiles& files);
// POSIX shell quoting: 'text' with every ' as '\''.
std::string shell_quote(const std::string& text);

// The job id of `sbatch --parsable`'s output ("42" or "42;cluster"); nullopt otherwise.
std::optional<int64_t> parse_sbatch_job_id(const std::string& text);

// A job as squeue --format='%i|%T|%r' shows it.
struct SlurmJobState {
  std::string state;   // PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, ...
  std::string reason;  // why it is pending or ended ("None" when none)
};
std::map<int64_t, SlurmJobState> parse_squeue(const std::string& text);
// A final state: the job will not run (again) by itself.
bool slurm_state_is_final(const std::string& state);

// The outcome of a job that left a status file: the runner's exit status, report and stderr
// classified as runner_client.h does for a local runner, then read as the local executor does.
// A report from another device than `expected` is a `wrong_device` failure.
tune::CandidateOutcome outcome_from_job_result(const std::string& status_text,
                                               const std::string& report_text,
                                               const std::string& stderr_text,
                                               const tune::MachineIdentity* expected);

// The identity from `nautilus-runner --devices` output (device 0: the job's allocated GPU);
// nullopt with `why_not` for no GPU or output that is not a device query.
std::optional<tune::MachineIdentity> identity_from_device_query(const std::string& text,
                                                                std::string* why_not);

class SlurmExecutor : public tune::Executor {
 public:
  SlurmExecutor(search::SearchInput input, SlurmExecutorOptions options);
  // Cancels every job still outstanding and removes the run's directory.
  ~SlurmExecutor() override;
  SlurmExecutor(const SlurmExecutor&) = delete;
  SlurmExecutor& operator=(const SlurmExecutor&) = delete;

  // Runs the device query as the first job (once; the answer is kept).
  std::optional<tune::MachineIdentity> identity(std::string* why_not) override;
  int parallelism() const override;
  void measure(const std::vector<sched::Schedule>& batch,
               const std::function<void(size_t, const tune::CandidateOutcome&)>& on_result)
      override;

  // The run's directory under the shared one ("" before the first job).
  const std::string& run_directory() const { return run_directory_; }

 private:
  struct Job;
  // Creates the run directory; false with `error`.
  bool ensure_run_directory(std::string* error);
  // Writes the script and submits it; the job, or nullopt with `error`.
  std::optional<int64_t> submit(const std::vector<std::string>& argv, const SlurmJobFiles& files,
                                const std::string& comment, std::string* error);
  // Looks at every outstanding job once (result files, then squeue when due); calls `finished`
  // for each job that ended, with its outcome, and forgets it.
  void poll(std::vector<Job>& jobs, const std::function<void(Job&, tune::CandidateOutcome)>& finished);
  void cancel(const std::vector<int64_t>& ids);
  std::vector<std::string> runner_argv(const std::vector<std::string>& runner_arguments,
                                       std::string* error) const;

  search::SearchInput input_;
  SlurmExecutorOptions options_;
  std::string run_directory_;
  std::unique_ptr<ScheduleMeasurer> measurer_;  // builds into run_directory_
  std::optional<tune::MachineIdentity> identity_;
  int jobs_submitted_ = 0;
  double last_squeue_ = -1e300;
  std::map<int64_t, SlurmJobState> last_states_;
  std::vector<int64_t> outstanding_;  // every job submitted and not seen to end (destructor)
};

}  // namespace nautilus::profiler
