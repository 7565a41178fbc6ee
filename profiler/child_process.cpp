#include "profiler/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace nautilus::profiler {
namespace {

using Clock = std::chrono::steady_clock;

// Closes a file descriptor once.
void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

// Reads what is available from `fd` into `out`; closes it at end of file or on error.
void drain(int& fd, std::string& out, std::size_t limit, bool& truncated) {
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      std::size_t room = limit > out.size() ? limit - out.size() : 0;
      std::size_t keep = std::min(room, static_cast<std::size_t>(n));
      out.append(buffer, keep);
      if (keep < static_cast<std::size_t>(n)) truncated = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_fd(fd);  // end of file, or an error we cannot recover from
    return;
  }
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, const ChildOptions& options) {
  ChildResult result;
  const auto started = Clock::now();
  if (argv.empty()) {
    result.spawn_error = "empty command";
    return result;
  }

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  // O_CLOEXEC: a child spawned concurrently by another thread must not inherit our pipe ends,
  // or our reads would never see end of file.
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.spawn_error = std::string("cannot create pipes: ") + std::strerror(errno);
    for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]}) close_fd(*fd);
    return result;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own process group (pgid = its pid), so a timeout can kill everything it started. The
  // default signal dispositions are restored in case the parent ignores SIGPIPE or SIGCHLD.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGCHLD);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                            POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  int spawned = ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close_fd(out_pipe[1]);
  close_fd(err_pipe[1]);
  if (spawned != 0) {
    result.spawn_error = "cannot start '" + argv[0] + "': " + std::strerror(spawned);
    close_fd(out_pipe[0]);
    close_fd(err_pipe[0]);
    return result;
  }
  result.started = true;
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);

  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.timeout_seconds));
  int status = 0;
  bool reaped = false;
  int& out_fd = out_pipe[0];
  int& err_fd = err_pipe[0];
  while (!reaped || out_fd >= 0 || err_fd >= 0) {
    if (!reaped) {
      pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) reaped = true;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      result.timed_out = true;
      break;
    }
    if (reaped && out_fd < 0 && err_fd < 0) break;
    // Wait for output, or at most 10 ms so exit and the deadline are noticed promptly. Once
    // the child has exited, its pipes may be held open by a process it left behind: the deadline
    // still applies, and that process is killed with the group below.
    pollfd fds[2];
    nfds_t count = 0;
    if (out_fd >= 0) fds[count++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) fds[count++] = {err_fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    const int wait_ms = static_cast<int>(std::min<long long>(10, std::max<long long>(left, 1)));
    if (count == 0) {
      ::poll(nullptr, 0, wait_ms);
      continue;
    }
    int ready = ::poll(fds, count, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (out_fd >= 0) drain(out_fd, result.stdout_text, options.max_output_bytes, result.output_truncated);
    if (err_fd >= 0) drain(err_fd, result.stderr_text, options.max_output_bytes, result.output_truncated);
  }

  // After a timeout the whole group goes: the child itself if it still runs, and whatever it
  // started that still holds the pipes. The group id is the child's pid: before the child is
  // reaped its zombie keeps the id reserved, and after it a live member does, so the signal
  // cannot reach an unrelated process. Without a timeout nothing is left to kill.
  if (result.timed_out) ::kill(-pid, SIGKILL);
  if (!reaped) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (out_fd >= 0) drain(out_fd, result.stdout_text, options.max_output_bytes, result.output_truncated);
  if (err_fd >= 0) drain(err_fd, result.stderr_text, options.max_output_bytes, result.output_truncated);
  close_fd(out_fd);
  close_fd(err_fd);

  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace nautilus::profiler
