#!/usr/bin/env bash
# Benchmark, step 1 (on the development machine): builds `nautilus` and `nautilus-runner` and
# compiles every benchmark configuration into a kernel package under bench/out/ (ignored by git),
# with a small validation package and its unscheduled reference per attention variant and GEMM.
# Step 2 (bench/measure.py) runs on the GPU machine, where the project itself cannot be built
# (no nlohmann-json there); binaries built on Debian 12 run there.
#
# Usage: bench/prepare.sh          then, on the GPU machine: python3 bench/measure.py
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${NAUTILUS_BUILD_DIR:-$root/build}"
out="$root/bench/out"

"$root/tools/install-deps.sh"
generator=()
[[ -f "$build_dir/CMakeCache.txt" ]] || generator=(-G Ninja)
cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" --target nautilus nautilus-runner -j "$(nproc)" >&2

rm -rf "$out"
mkdir -p "$out/packages"
cp "$build_dir/app/nautilus-runner" "$out/"
nautilus="$build_dir/app/nautilus"
cd "$root"

# compile NAME SPEC [ARGS...]: one package with cubins for sm_90a (the H100's) and sm_80.
compile() {
  local name=$1 spec=$2
  shift 2
  "$nautilus" compile "assets/specs/$spec.nt" --arch sm_90a -o "$out/packages/$name" "$@" >&2
  echo "$name" >>"$out/packages.txt"
}

# Timing: the attention rows of ANCHORS.md and GEMM 4096³ / 8192³, with the hand schedules.
while read -r B H S D causal; do
  spec=attention
  [[ $causal == yes ]] && spec=causal_attention
  compile "attention_B${B}_H${H}_S${S}_D${D}_${causal}" "$spec" \
    --schedule "assets/schedules/$spec.json" -D B="$B" -D H="$H" -D M="$S" -D N="$S" -D D="$D"
done <<'CONFIGS'
32 32 512 64 no
32 32 512 64 yes
8 32 2048 64 no
8 32 2048 64 yes
2 32 8192 64 no
2 32 8192 64 yes
1 32 16384 64 no
1 32 16384 64 yes
32 16 512 128 no
32 16 512 128 yes
8 16 2048 128 no
8 16 2048 128 yes
2 16 8192 128 no
2 16 8192 128 yes
1 16 16384 128 no
1 16 16384 128 yes
CONFIGS
for n in 4096 8192; do
  compile "gemm_${n}" gemm --schedule assets/schedules/gemm.json -D M=$n -D N=$n -D K=$n
done

# Validation: each kernel family at a size that is not a multiple of its tiles, against the
# unscheduled lowering of the same spec (the naive kernels are too slow at benchmark sizes).
for D in 64 128; do
  for spec in attention causal_attention; do
    args=(-D B=1 -D H=2 -D M=1000 -D N=1000 -D D=$D)
    compile "validate_${spec}_D${D}" "$spec" --schedule "assets/schedules/$spec.json" "${args[@]}"
    compile "reference_${spec}_D${D}" "$spec" "${args[@]}"
  done
done
compile validate_gemm gemm --schedule assets/schedules/gemm.json -D M=1000 -D N=1030 -D K=520
compile reference_gemm gemm -D M=1000 -D N=1030 -D K=520
echo "packages in $out" >&2
