#!/usr/bin/env bash
# Runs the pipeline solver's latency microbenchmark once on the GPU host (see latency.cu).
set -u
cd "$(dirname "$0")"
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
if ! timeout 60 ./latency > "${OUT:-.}/latency.txt" 2>&1; then
  echo "carried binary failed; rebuilding here"; cat "${OUT:-.}/latency.txt"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a latency.cu -o latency_here && timeout 60 ./latency_here > "${OUT:-.}/latency.txt" 2>&1
fi
cat "${OUT:-.}/latency.txt"
