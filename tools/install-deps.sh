#!/usr/bin/env bash
# Installs the Debian 12 packages Nautilus Studio needs to build, test and fuzz.
#
# Only packages that are missing are installed, so a second run does nothing and prints nothing
# (tools/run.sh and tools/test.sh call this every time). Everything comes from the distribution's
# own repositories through apt-get; nothing is downloaded from anywhere else.
#
# Usage: tools/install-deps.sh [--check]
#   --check   only report what is missing; exit 1 when something is.
set -euo pipefail

# Why each package is here (names checked with `apt-cache policy` on Debian 12):
#   build-essential cmake ninja-build pkg-config   the toolchain and build system
#   ccache                                          rebuilds, fresh clones and worktrees reuse objects
#   nlohmann-json3-dev                              JSON forms of every IR, CLI --json output
#   libgtest-dev                                    the GoogleTest suites
#   libz3-dev                                       the pipeline solver (core/pipeline, Z3 4.8)
#   libsqlite3-dev                                  the tuning database (core/tune; not the runner)
#   qt6-base-dev qt6-svg-dev                        the nautilus-studio GUI
#   libqt6opengl6-dev                               Qt6::OpenGL; only a Recommends of qt6-base-dev,
#                                                   so it must be named (see shared STACK.md)
#   libimgui-dev libgraphviz-dev                    ImGui panels and IR graph layout in views/
#   xvfb xauth                                      xvfb-run for OpenGL panel tests on CI
#   clang libclang-rt-14-dev                        the libFuzzer target (runtime in clang-rt)
#   slurmctld slurmd slurm-client munge             `nautilus tune --executor slurm`'s test: a
#                                                   single-node Slurm (slurm-wlm 22.05) the test
#                                                   starts in a temporary directory with its own
#                                                   munge key (tests/slurm/run_slurm_test.sh);
#                                                   the system's services are neither configured
#                                                   nor needed (where systemd runs, munge's own
#                                                   service may start; the test does not use it)
packages=(
  build-essential cmake ninja-build pkg-config ccache
  nlohmann-json3-dev libgtest-dev libz3-dev libsqlite3-dev
  qt6-base-dev libqt6opengl6-dev qt6-svg-dev
  libimgui-dev libgraphviz-dev
  xvfb xauth
  clang libclang-rt-14-dev
  slurmctld slurmd slurm-client munge
)

check_only=0
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install-deps.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps.sh: dpkg-query not found; this script supports Debian 12 only." >&2
  echo "  Install the equivalents of: ${packages[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
  # db:Status-Status is "installed" only for fully installed packages (not half-configured or
  # removed-with-config-left), which is what a build needs.
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if ((check_only)); then
  echo "install-deps.sh: missing packages: ${missing[*]}" >&2
  exit 1
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps.sh: these packages are missing and installing them needs root:" >&2
  echo "  ${missing[*]}" >&2
  echo "Run this script as root, install sudo, or run as root:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "install-deps.sh: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}"

# apt-get can succeed while leaving a package unconfigured (e.g. a failed trigger); check again so
# that a broken environment is reported here rather than as a confusing CMake error later.
still_missing=()
for pkg in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || still_missing+=("$pkg")
done
if ((${#still_missing[@]} > 0)); then
  echo "install-deps.sh: still not installed after apt-get: ${still_missing[*]}" >&2
  exit 1
fi
echo "install-deps.sh: done"
