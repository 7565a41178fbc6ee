// Running a program as a child process with a deadline, capturing what it prints.
//
// The child is started with posix_spawnp in a new process group, with stdin from /dev/null and
// stdout/stderr on pipes. The parent reads both pipes as they fill (so a chatty child cannot
// block on a full pipe) until the child has exited and the pipes are closed, or until the
// deadline: then the whole process group gets SIGKILL, which also ends anything the child started
// (the `sleep` of a shell script, an ssh client), and the child is reaped. Nothing the child does
// can crash or hang the parent; output beyond `max_output_bytes` per stream is dropped.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace nautilus::profiler {

struct ChildOptions {
  double timeout_seconds = 300.0;
  std::size_t max_output_bytes = std::size_t{64} << 20;
};

struct ChildResult {
  bool started = false;       // false: posix_spawnp failed (see spawn_error)
  std::string spawn_error;    // e.g. "cannot start 'nautilus-runner': No such file or directory"
  bool timed_out = false;     // the deadline passed; the process group was killed
  int exit_code = -1;         // when it exited normally
  int signal = 0;             // the signal that ended it (SIGKILL after a timeout)
  std::string stdout_text;
  std::string stderr_text;
  bool output_truncated = false;
  double wall_seconds = 0.0;

  bool exited() const { return started && signal == 0 && exit_code >= 0; }
};

// Runs argv[0] (searched on PATH when it has no slash) with the arguments argv[1..].
ChildResult run_child(const std::vector<std::string>& argv, const ChildOptions& options);

}  // namespace nautilus::profiler
