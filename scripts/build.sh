#!/usr/bin/env bash
# Configures and builds gpuslice with the default preset (build/).
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
