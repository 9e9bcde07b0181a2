#!/usr/bin/env bash
# Builds the compute benchmark's CUDA program into $BUILD/bench-compute/
# (BUILD defaults to build). Runs on the build machine: needs nvcc, no GPU.
set -euo pipefail
cd "$(dirname "$0")/../../.."
build=${BUILD:-build}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$build/bench-compute"
"$nvcc" -O2 -arch=sm_90 -std=c++17 -o "$build/bench-compute/lc_be" bench/gpu/compute/lc_be.cu -ldl
echo "built $build/bench-compute/lc_be"
