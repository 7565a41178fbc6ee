#!/usr/bin/env bash
# Builds everything and runs every test: the CTest suites, a bounded slice of differential testing
# (tools/difftest.sh --slice, docs/difftest.md), then the spec fuzzer for a bounded time.
# Exits non-zero if any step fails, after a short summary of all steps.
#
# Usage: tools/test.sh [--no-fuzz] [--fuzz-seconds N] [--no-difftest]
#
# Missing Debian packages are installed first (tools/install-deps.sh). The main build is build/
# (Ninja, RelWithDebInfo, GCC, with tests and the Qt app); the fuzzer is built with clang in
# build/fuzz. Set NAUTILUS_BUILD_DIR to use another directory than build/. A crash found by the
# fuzzer is kept in build/fuzz/artifacts/ (reproduce: build/fuzz/tests/fuzz/spec_fuzzer FILE).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${NAUTILUS_BUILD_DIR:-$root/build}"
fuzz_dir="$build_dir/fuzz"
fuzz=1
fuzz_seconds=30
difftest=1
while (($# > 0)); do
  case "$1" in
    --no-fuzz) fuzz=0 ;;
    --no-difftest) difftest=0 ;;
    --fuzz-seconds) fuzz_seconds="${2:?--fuzz-seconds needs a number}"; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

summary=()
failed=0
note() { summary+=("$1"); }
finish() {
  echo
  echo "== summary =="
  printf '  %s\n' "${summary[@]}"
  if ((failed)); then
    echo "FAILED"
    exit 1
  fi
  echo "all passed"
  exit 0
}
# Runs a step, timing it; on failure records it and returns non-zero.
step() {
  local name="$1"
  shift
  local start=$SECONDS
  echo "== $name =="
  if "$@"; then
    note "$name: ok ($((SECONDS - start)) s)"
  else
    note "$name: FAILED ($((SECONDS - start)) s)"
    failed=1
    return 1
  fi
}

step "dependencies" "$root/tools/install-deps.sh" || finish

configure() {
  local dir="$1"
  shift
  local generator=()
  [[ -f "$dir/CMakeCache.txt" ]] || generator=(-G Ninja)
  cmake -S "$root" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
}

step "configure" configure "$build_dir" -DNAUTILUS_BUILD_TESTS=ON -DNAUTILUS_BUILD_STUDIO=ON \
  || finish
# Ninja keeps going after a failed target (-k 0) so one run reports every broken target.
build_all() {
  local keep_going=()
  if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build_dir/CMakeCache.txt"; then
    keep_going=(-- -k 0)
  fi
  cmake --build "$build_dir" -j "$(nproc)" "${keep_going[@]}"
}
step "build" build_all || finish

run_ctest() {
  local log="$build_dir/ctest.log"
  # --timeout bounds a hung test so that CI reports it instead of running out its budget.
  local status=0
  ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 300 2>&1 | tee "$log" ||
    status=$?
  local line
  line=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true)
  [[ -z "$line" ]] || note "tests: $line"
  return "$status"
}
step "ctest" run_ctest || true

# Random specs x random schedules x every interpreter stage against the float64 reference; a
# failure's reproducer is kept in build/difftest-slice/failures/.
if ((difftest)); then
  NAUTILUS_DIFFTEST="$build_dir/tools/difftest/nautilus-difftest" \
    DIFFTEST_OUT="$build_dir/difftest-slice" step "difftest" "$root/tools/difftest.sh" --slice || true
fi

run_fuzzer() {
  local corpus
  corpus=$(mktemp -d "${TMPDIR:-/tmp}/nautilus-fuzz-corpus.XXXXXX")
  local seed seeds=0
  for seed in "$root"/assets/specs/*.nt "$root"/assets/specs/errors/*.nt; do
    if [[ -f "$seed" ]]; then
      cp "$seed" "$corpus/"
      seeds=$((seeds + 1))
    fi
  done
  mkdir -p "$fuzz_dir/artifacts"
  local log="$fuzz_dir/fuzz.log"
  local status=0
  # -timeout: one input taking longer than 10 s is a hang (a bug); -rss_limit_mb bounds memory.
  # The corpus is a temporary copy because libFuzzer adds the inputs it finds to it.
  "$fuzz_dir/tests/fuzz/spec_fuzzer" "$corpus" -max_total_time="$fuzz_seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$fuzz_dir/artifacts/" \
    >"$log" 2>&1 || status=$?
  rm -rf "$corpus"
  local runs
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || true)
  if ((status != 0)); then
    tail -n 60 "$log"
    note "fuzz: spec_fuzzer failed (exit $status); log $log, inputs in $fuzz_dir/artifacts/"
    return "$status"
  fi
  note "fuzz: ${runs:-?} inputs in ${fuzz_seconds} s from $seeds seed specs, no failure"
}

if ((fuzz)); then
  CC=clang CXX=clang++ step "fuzz configure" configure "$fuzz_dir" -DNAUTILUS_LIBFUZZER=ON \
    -DNAUTILUS_BUILD_STUDIO=OFF -DNAUTILUS_BUILD_TESTS=ON &&
    step "fuzz build" cmake --build "$fuzz_dir" --target spec_fuzzer -j "$(nproc)" &&
    step "fuzz run" run_fuzzer || true
fi

finish
