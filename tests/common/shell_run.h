// Runs a shell command line for tests that drive the built `nautilus` binary as a child process
// (a real process: signals, exit statuses, files it leaves): its exit status and its stdout and
// stderr together.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace nautilus::testing {

struct ShellRun {
  int status = -1;
  std::string out;  // stdout and stderr together
};

inline ShellRun run_shell(const std::string& command) {
  ShellRun result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace nautilus::testing
