#include "profiler/runner_client.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "profiler/runner.h"

namespace nautilus::profiler {
namespace {

// The first line of `text`, at most 200 characters, for one-line messages.
std::string first_line(const std::string& text) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return "";
  std::string line = text.substr(start, text.find('\n', start) - start);
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}

// The last non-empty line of `text` (stderr's last words), at most 200 characters.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  std::string line = text.substr(start, end + 1 - start);
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}

std::optional<double> number_at(const nlohmann::json& json, const char* section, const char* key) {
  if (!json.contains(section) || !json[section].is_object()) return std::nullopt;
  const nlohmann::json& object = json[section];
  if (!object.contains(key) || !object[key].is_number()) return std::nullopt;
  return object[key].get<double>();
}

std::string format_seconds(double seconds) {
  std::ostringstream text;
  text << seconds;
  return text.str();
}

}  // namespace

const char* run_status_name(RunStatus status) {
  switch (status) {
    case RunStatus::Ok: return "ok";
    case RunStatus::NoGpu: return "no_gpu";
    case RunStatus::CompileError: return "compile_error";
    case RunStatus::LoadError: return "load_error";
    case RunStatus::IllegalMemoryAccess: return "illegal_memory_access";
    case RunStatus::LaunchError: return "launch_error";
    case RunStatus::Timeout: return "timeout";
    case RunStatus::WrongResults: return "wrong_results";
    case RunStatus::UsageError: return "usage_error";
    case RunStatus::RunnerCrashed: return "runner_crashed";
    case RunStatus::MalformedOutput: return "malformed_output";
    case RunStatus::SpawnFailed: return "spawn_failed";
  }
  return "unknown";
}

std::string default_runner_command() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    std::filesystem::path beside = self.parent_path() / "nautilus-runner";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return "nautilus-runner";
}

std::optional<std::vector<std::string>> split_command_template(const std::string& text,
                                                               std::string* error) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size() &&
                 (text[i + 1] == '"' || text[i + 1] == '\\')) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) {
    if (error != nullptr) *error = std::string("unterminated ") + quote + " in the runner command";
    return std::nullopt;
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) {
    if (error != nullptr) *error = "the runner command is empty";
    return std::nullopt;
  }
  return words;
}

std::vector<std::string> runner_arguments(const RunRequest& request) {
  std::vector<std::string> args = {request.package_dir};
  if (!request.reference_dir.empty()) args.insert(args.end(), {"--reference", request.reference_dir});
  if (!request.reference_dir.empty() && !request.reference_cache_dir.empty()) {
    args.insert(args.end(), {"--reference-cache", request.reference_cache_dir});
  }
  if (request.seed) args.insert(args.end(), {"--seed", std::to_string(*request.seed)});
  if (request.warmup) args.insert(args.end(), {"--warmup", std::to_string(*request.warmup)});
  if (request.repetitions) args.insert(args.end(), {"--reps", std::to_string(*request.repetitions)});
  if (request.device) args.insert(args.end(), {"--device", std::to_string(*request.device)});
  if (!request.flush_l2) args.push_back("--no-flush");
  if (request.gpu_timeout_seconds) {
    args.insert(args.end(), {"--timeout", format_seconds(*request.gpu_timeout_seconds)});
  }
  args.insert(args.end(), request.extra_arguments.begin(), request.extra_arguments.end());
  return args;
}

RunResult classify_runner_result(ChildResult process, double client_timeout_seconds) {
  RunResult result;
  result.process = std::move(process);
  const ChildResult& child = result.process;
  auto finish = [&](RunStatus status, std::string message) {
    result.status = status;
    result.message = std::move(message);
    return result;
  };

  if (!child.started) return finish(RunStatus::SpawnFailed, child.spawn_error);
  if (child.timed_out) {
    return finish(RunStatus::Timeout, "the runner did not finish within " +
                                          format_seconds(client_timeout_seconds) +
                                          " s; its process group was killed");
  }
  if (child.signal != 0) {
    std::string message = "the runner was killed by signal " + std::to_string(child.signal) +
                          " (" + strsignal(child.signal) + ")";
    if (std::string words = last_line(child.stderr_text); !words.empty()) message += ": " + words;
    return finish(RunStatus::RunnerCrashed, message);
  }

  nlohmann::json report = nlohmann::json::parse(child.stdout_text, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded() || !report.is_object() ||
      report.value("format", std::string()) != kRunnerReportFormat ||
      !report.contains("status") || !report["status"].is_string()) {
    std::string message = "the runner printed no report (exit status " +
                          std::to_string(child.exit_code) + ")";
    if (std::string out = first_line(child.stdout_text); !out.empty()) {
      message += "; stdout: " + out;
    }
    if (std::string err = last_line(child.stderr_text); !err.empty()) message += "; stderr: " + err;
    return finish(RunStatus::MalformedOutput, message);
  }
  result.report = report;
  result.total_median_us = [&]() -> std::optional<double> {
    if (!report.contains("timing") || !report["timing"].is_object()) return std::nullopt;
    return number_at(report["timing"], "total", "median_us");
  }();
  result.max_relative_error = number_at(report, "validation", "max_relative_error");
  if (report.contains("validation") && report["validation"].is_object() &&
      report["validation"].contains("passed") && report["validation"]["passed"].is_boolean()) {
    result.validation_passed = report["validation"]["passed"].get<bool>();
  }

  const std::string status = report["status"].get<std::string>();
  if (status == "ok") {
    if (child.exit_code != 0) {
      return finish(RunStatus::MalformedOutput, "the runner reported ok but exited with status " +
                                                    std::to_string(child.exit_code));
    }
    std::string message = "ok";
    if (result.total_median_us) {
      std::ostringstream text;
      text << "ok: " << *result.total_median_us << " us median over all kernels";
      message = text.str();
    }
    if (result.validation_passed) message += ", validation passed";
    return finish(RunStatus::Ok, message);
  }
  if (child.exit_code == 0) {
    return finish(RunStatus::MalformedOutput,
                  "the runner exited with status 0 but reported " + status);
  }

  // The first error explains the status.
  std::string message = status;
  int cuda_error = 0;
  if (report.contains("errors") && report["errors"].is_array() && !report["errors"].empty() &&
      report["errors"][0].is_object()) {
    const nlohmann::json& first = report["errors"][0];
    if (first.contains("message") && first["message"].is_string()) {
      message = first["message"].get<std::string>();
    }
    if (first.contains("cuda_error") && first["cuda_error"].is_number_integer()) {
      cuda_error = first["cuda_error"].get<int>();
    }
  }
  if (status == "no_gpu") return finish(RunStatus::NoGpu, "no GPU: " + message);
  if (status == "compile_error") return finish(RunStatus::CompileError, message);
  if (status == "load_error") return finish(RunStatus::LoadError, message);
  if (status == "launch_error") {
    return finish(cuda_error == 700 ? RunStatus::IllegalMemoryAccess : RunStatus::LaunchError,
                  message);
  }
  if (status == "timeout") return finish(RunStatus::Timeout, message);
  if (status == "wrong_results") return finish(RunStatus::WrongResults, message);
  if (status == "usage_error") return finish(RunStatus::UsageError, message);
  if (status == "internal_error") {
    return finish(RunStatus::RunnerCrashed, "the runner failed internally: " + message);
  }
  return finish(RunStatus::MalformedOutput, "the runner reported an unknown status '" + status + "'");
}

RunResult run_package(const RunRequest& request, const ClientOptions& options) {
  const std::string text =
      options.command_template.empty() ? default_runner_command() : options.command_template;
  std::string error;
  std::optional<std::vector<std::string>> command = split_command_template(text, &error);
  if (!command) {
    RunResult result;
    result.status = RunStatus::SpawnFailed;
    result.message = error;
    return result;
  }
  std::vector<std::string> arguments = runner_arguments(request);
  command->insert(command->end(), arguments.begin(), arguments.end());
  ChildOptions child_options;
  child_options.timeout_seconds = options.timeout_seconds;
  RunResult result = classify_runner_result(run_child(*command, child_options), options.timeout_seconds);
  result.command = std::move(*command);
  return result;
}

}  // namespace nautilus::profiler
