#!/usr/bin/env bash
# Builds Nautilus Studio and opens it on the attention example, or runs the `nautilus` command line.
#
# Usage: tools/run.sh [ARGS...]
#   no ARGS, with a display ($DISPLAY or $WAYLAND_DISPLAY set)
#             the main job: builds nautilus-studio and opens assets/specs/attention.nt with its
#             schedule (assets/schedules/attention.json), as Examples > attention does
#   no ARGS, without a display
#             the main job on the command line instead: the auto-scheduler's choice for the
#             attention example with its estimate (nautilus schedule assets/specs/attention.nt),
#             then every stage lowered with that schedule (nautilus lower ... --schedule
#             --stage all); says on stderr how to get a screenshot of the app
#             (nautilus-studio --screenshot under xvfb-run)
#   ARGS      passed to nautilus as they are (relative paths are relative to the current
#             directory), e.g. tools/run.sh check assets/specs/gemm.nt
#
# Missing Debian packages are installed first (tools/install-deps.sh). The build lives in build/
# (Ninja, RelWithDebInfo); set NAUTILUS_BUILD_DIR to use another directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${NAUTILUS_BUILD_DIR:-$root/build}"

"$root/tools/install-deps.sh"

open_app=0
if (($# == 0)) && [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  open_app=1
fi

# The generator can only be chosen when a build directory is first configured. Build progress
# goes to stderr so that stdout carries only what nautilus prints (tools/run.sh ... > out.txt).
configure=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
[[ -f "$build_dir/CMakeCache.txt" ]] || configure+=(-G Ninja)
# The app needs the GUI even where the build directory was configured without it.
target=nautilus
if ((open_app)); then
  configure+=(-DNAUTILUS_BUILD_STUDIO=ON)
  target=nautilus-studio
fi
cmake -S "$root" -B "$build_dir" "${configure[@]}" >/dev/null
cmake --build "$build_dir" --target "$target" -j "$(nproc)" >&2

if ((open_app)); then
  # From the source root, so the window shows the example's path as in the README.
  cd "$root"
  exec "$build_dir/app/nautilus-studio" assets/specs/attention.nt
fi
if (($# == 0)); then
  # Paths in the advice are relative to where the user is.
  shown() {
    case "$1" in
      "$PWD"/*) printf '%s' "${1#"$PWD/"}" ;;
      *) printf '%s' "$1" ;;
    esac
  }
  cat >&2 <<EOF
tools/run.sh: no display (\$DISPLAY and \$WAYLAND_DISPLAY are unset), so Nautilus Studio cannot open;
printing the auto-scheduled attention example with the nautilus command line instead.
For a screenshot of the app without a display:
  cmake --build $(shown "$build_dir") --target nautilus-studio
  xvfb-run -a -s "-screen 0 1920x1200x24" env QT_QPA_PLATFORM=xcb \\
      $(shown "$build_dir/app/nautilus-studio") --screenshot studio.png \\
      --show layouts --show pipeline $(shown "$root/assets/specs/attention.nt")
EOF
  # From the source root, so the spec's path in the output reads as in the README.
  cd "$root"
  chosen="$(mktemp --suffix=.json)"
  trap 'rm -f "$chosen"' EXIT
  "$build_dir/app/nautilus" schedule assets/specs/attention.nt -o "$chosen"
  echo
  "$build_dir/app/nautilus" lower assets/specs/attention.nt --schedule "$chosen" --stage all
  exit $?
fi
exec "$build_dir/app/nautilus" "$@"
