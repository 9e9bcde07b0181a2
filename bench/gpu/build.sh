#!/usr/bin/env bash
# Builds the CUDA C++ benchmarks of bench/gpu into build/bench-gpu/.
# Run here (the build machine) before carrying build/ to the GPU machine; it
# needs nvcc (NVCC, else PATH, else /usr/local/cuda/bin) and no GPU.
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
out=build/bench-gpu
mkdir -p "$out"
# Host code only: the kernel is PTX loaded at run time, and the static CUDA
# runtime nvcc links is never called (so it never loads a libcuda of its own).
# No -lcuda: both driver paths are dlopen'ed by absolute path.
"$nvcc" -O2 -arch=sm_90 -std=c++20 -Xcompiler -Wall,-Wextra,-Werror \
  -o "$out/launch_overhead" bench/gpu/launch_overhead.cu -ldl
echo "built $out/launch_overhead"
