#!/usr/bin/env bash
# Runs the microbenchmarks once on the GPU host: the pipeline solver's latencies (latency.cu) and
# the DRAM bandwidth a tiled stream reaches by column-band width and SMs used (dram_runs.cu, the
# cost model's partial-wave reach).
set -u
cd "$(dirname "$0")"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
if ! timeout 60 ./latency > "${OUT:-.}/latency.txt" 2>&1; then
  echo "carried binary failed; rebuilding here"; cat "${OUT:-.}/latency.txt"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a latency.cu -o latency_here && timeout 60 ./latency_here > "${OUT:-.}/latency.txt" 2>&1
fi
cat "${OUT:-.}/latency.txt"
if nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a dram_runs.cu -o dram_runs_here; then
  timeout 300 ./dram_runs_here > "${OUT:-.}/dram_runs.txt" 2>&1
  cat "${OUT:-.}/dram_runs.txt"
fi
