#!/usr/bin/env bash
# Builds the `nautilus` command line and runs it.
#
# Usage: tools/run.sh [ARGS...]
#   no ARGS   the main job: nautilus lower assets/specs/attention.nt --stage all
#   ARGS      passed to nautilus as they are (relative paths are relative to the current
#             directory), e.g. tools/run.sh check assets/specs/gemm.nt
#
# Missing Debian packages are installed first (tools/install-deps.sh). The build lives in build/
# (Ninja, RelWithDebInfo); set NAUTILUS_BUILD_DIR to use another directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${NAUTILUS_BUILD_DIR:-$root/build}"

"$root/tools/install-deps.sh"

# The generator can only be chosen when a build directory is first configured. Build progress
# goes to stderr so that stdout carries only what nautilus prints (tools/run.sh ... > out.txt).
generator=()
[[ -f "$build_dir/CMakeCache.txt" ]] || generator=(-G Ninja)
cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" --target nautilus -j "$(nproc)" >&2

if (($# == 0)); then
  # From the source root, so the spec's path in the output reads as in the README.
  cd "$root"
  exec "$build_dir/app/nautilus" lower assets/specs/attention.nt --stage all
fi
exec "$build_dir/app/nautilus" "$@"
