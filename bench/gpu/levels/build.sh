#!/usr/bin/env bash
# Builds bench/gpu/levels' CUDA program (cpp_streams) into
# $BUILD/bench-levels/ (BUILD defaults to build), against the task API's
# library built there. Runs on the build machine: needs nvcc, no GPU. On the
# GPU machine it needs the bundle's deps/ (yaml-cpp) on its loader path.
set -euo pipefail
cd "$(dirname "$0")/../../.."
build=${BUILD:-build}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$build/bench-levels"
"$nvcc" -O2 -arch=sm_90 -std=c++20 -Iinclude -o "$build/bench-levels/cpp_streams" bench/gpu/levels/cpp_streams.cu \
  "$build/src/task/libgpuslice_task.a" -lyaml-cpp -ldl -lpthread
echo "built $build/bench-levels/cpp_streams"
