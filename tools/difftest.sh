#!/usr/bin/env bash
# Differential testing (docs/difftest.md): random specs x random schedules x every interpreter
# stage against the float64 reference, with nautilus-difftest.
#
# Usage: tools/difftest.sh [--nightly] [--slice] [--strict-f32] [-- EXTRA nautilus-difftest ARGS]
#
#   --nightly     10^4 triples (seed: today's date, so each night tests new triples; override
#                 with DIFFTEST_SEED), all cores, reproducers in $DIFFTEST_OUT (default
#                 build-difftest/nightly-<seed>)
#   --slice       the bounded deterministic slice tools/test.sh runs (1500 triples, seed
#                 20261201, 5% of them lowered for sm_90a at tensor-core sizes; about 65 s on
#                 2 cores, cut at 80 s)
#   --strict-f32  also keep f32 outputs of contractions of 16-bit inputs (see docs/difftest.md)
#
# Builds nautilus-difftest in $NAUTILUS_DIFFTEST_BUILD_DIR (default build-difftest: Ninja,
# RelWithDebInfo, no Qt app) unless NAUTILUS_DIFFTEST=path/to/nautilus-difftest is given.
# Exits non-zero when any triple failed; each failure's reproducer is under OUT/failures/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${NAUTILUS_DIFFTEST_BUILD_DIR:-$root/build-difftest}"
mode=slice
extra=()
while (($# > 0)); do
  case "$1" in
    --nightly) mode=nightly ;;
    --slice) mode=slice ;;
    --strict-f32) extra+=(--strict-f32) ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "difftest.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

tool="${NAUTILUS_DIFFTEST:-}"
if [[ -z "$tool" ]]; then
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DNAUTILUS_BUILD_STUDIO=OFF -DNAUTILUS_BUILD_TESTS=OFF >/dev/null
  fi
  cmake --build "$build_dir" --target nautilus-difftest -j "$(nproc)" >/dev/null
  tool="$build_dir/tools/difftest/nautilus-difftest"
fi

jobs="$(nproc)"
case "$mode" in
  nightly)
    seed="${DIFFTEST_SEED:-$(date +%Y%m%d)}"
    out="${DIFFTEST_OUT:-$build_dir/nightly-$seed}"
    exec "$tool" --count 10000 --seed "$seed" --jobs "$jobs" --out "$out" --quiet "${extra[@]}"
    ;;
  slice)
    out="${DIFFTEST_OUT:-$build_dir/slice}"
    exec "$tool" --count 1500 --seed 20261201 --jobs "$jobs" --time-limit 80 --out "$out" --quiet \
      --hopper-share 0.05 "${extra[@]}"
    ;;
esac
