#!/bin/bash
# Profiles kernel packages of a GPU pack with Nsight Compute, for reading stalls per SASS line.
#
# Usage (GPU machine): bench/ncu_packages.sh PACK DEST PACKAGE...
#   PACK     a folder made by `attention_rows.py pack` (bin/nautilus-runner and pk/PACKAGE/)
#   DEST     where the outputs go: per package its SASS (cuobjdump), the ncu report's details
#            page and its source page as CSV (one row per SASS instruction: executed counts and
#            warp stall samples by reason)
# Each package is launched once by nautilus-runner (events timer, so CUPTI stays free for ncu);
# ncu replays its first kernel launch with `--set full --import-source yes` (NCU_KERNEL=REGEX
# picks another kernel of a multi-kernel package by name).
# Summing the CSV's "Warp Stall Sampling (All Samples)" per opcode or per region of the SASS is
# how bench/NOTES.md reads it (e.g. the 2026-11-27 entry "one reciprocal per row").
set -u
if [ $# -lt 3 ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
pack=$(cd "$1" && pwd); dest=$2; shift 2
mkdir -p "$dest"
export LD_LIBRARY_PATH="$pack/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
runner="$pack/bin/nautilus-runner"
for name in "$@"; do
  package="$pack/pk/$name"
  if [ ! -d "$package" ]; then
    echo "$name: no package $package" >&2
    continue
  fi
  for cubin in "$package"/*.cubin; do cuobjdump -sass "$cubin" > "$dest/$name.sass"; done
  if ! timeout 300 ncu --set full --import-source yes ${NCU_KERNEL:+-k regex:$NCU_KERNEL} --launch-count 1 -f -o "$dest/$name" \
      "$runner" "$package" --reps 1 --warmup 0 --timer events > "$dest/$name.ncu.log" 2>&1; then
    echo "$name: ncu failed, see $dest/$name.ncu.log" >&2
    continue
  fi
  ncu --import "$dest/$name.ncu-rep" --page details > "$dest/$name.details.txt" 2>&1
  ncu --import "$dest/$name.ncu-rep" --page source --csv --print-source sass > "$dest/$name.source.csv" 2>&1
  grep -E "^\s+Duration|Executed Ipc Active|Registers Per Thread" "$dest/$name.details.txt" | sed "s/^/$name: /"
done
