#include "app/cli/tune_executor.h"

namespace nautilus::cli {

void add_executor_options(CommandSpec& command) {
  command.options.push_back({"executor", "KIND",
                             "local (the GPU of this machine, default) or slurm (one Slurm job "
                             "per candidate; docs/tuning.md)"});
  command.options.push_back({"slurm-partition", "P", "slurm: the partition (default: the "
                             "cluster's default)"});
  command.options.push_back({"slurm-gres", "GRES", "slurm: each job's generic resources (default "
                             "gpu:1; e.g. gpu:h100:1; none asks for none)"});
  command.options.push_back({"slurm-time", "T", "slurm: each job's time limit in Slurm's format "
                             "(default 10 minutes)"});
  command.options.push_back({"slurm-jobs", "N", "slurm: candidates queued at once (default 8)"});
  command.options.push_back({"slurm-wait", "T", "slurm: longest a candidate may take from "
                             "submission to result, queueing included, before it is cancelled "
                             "and recorded as a timeout (90s, 15m, 2h; default 1h)"});
  command.options.push_back({"slurm-dir", "DIR", "slurm: a directory the nodes share, for the "
                             "packages and results (default ~/.cache/nautilus/slurm)"});
  command.options.push_back({"slurm-arg", "ARG", "slurm: passed to sbatch as it is, e.g. "
                             "--slurm-arg=--account=proj; repeatable", true});
}

std::optional<ExecutorChoice> read_executor_choice(const ParsedOptions& options,
                                                   std::ostream& err) {
  ExecutorChoice choice;
  const std::string kind = options.get("executor", "local");
  if (kind != "local" && kind != "slurm") {
    err << "nautilus: error: unknown --executor '" << kind << "'; expected local or slurm\n";
    return std::nullopt;
  }
  choice.slurm = kind == "slurm";
  for (const char* name : {"slurm-partition", "slurm-gres", "slurm-time", "slurm-jobs",
                           "slurm-wait", "slurm-dir", "slurm-arg"}) {
    if (!choice.slurm && options.has(name)) {
      err << "nautilus: error: --" << name << " needs --executor slurm\n";
      return std::nullopt;
    }
  }
  if (!choice.slurm) return choice;
  for (const char* name : {"gpu-index", "devices"}) {
    if (options.has(name)) {
      err << "nautilus: error: --" << name << " is for --executor local; Slurm picks the GPU "
             "(--slurm-gres)\n";
      return std::nullopt;
    }
  }
  profiler::SlurmExecutorOptions& slurm = choice.slurm_options;
  slurm.partition = options.get("slurm-partition");
  if (options.has("slurm-gres")) {
    const std::string gres = options.get("slurm-gres");
    slurm.gres = gres == "none" ? "" : gres;
  }
  if (options.has("slurm-time")) slurm.time_limit = options.get("slurm-time");
  if (options.has("slurm-jobs")) {
    const std::optional<uint64_t> jobs = parse_non_negative(options.get("slurm-jobs"));
    if (!jobs || *jobs < 1 || *jobs > 10000) {
      err << "nautilus: error: --slurm-jobs expects an integer from 1 to 10000, got '"
          << options.get("slurm-jobs") << "'\n";
      return std::nullopt;
    }
    slurm.max_jobs = static_cast<int>(*jobs);
  }
  if (options.has("slurm-wait")) {
    const std::optional<double> wait = parse_duration(options.get("slurm-wait"));
    if (!wait) {
      err << "nautilus: error: --slurm-wait expects a duration such as 90, 90s, 15m or 2h, got '"
          << options.get("slurm-wait") << "'\n";
      return std::nullopt;
    }
    slurm.wait_seconds = *wait;
  }
  slurm.directory = options.get("slurm-dir");
  slurm.extra_arguments = options.all("slurm-arg");
  return choice;
}

}  // namespace nautilus::cli
