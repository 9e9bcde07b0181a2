#!/usr/bin/env bash
# Runs a bench/gpu command on a GPU machine from a bundle made here by
# scripts/bundle-for-gpu.sh (carried as .device/bundle): points build/bin,
# build/lib and build/bench-* at the bundle, and runs the CLI through the
# bundle's loader path so that its libraries stay out of the benchmarked
# applications' environment.
#   bash bench/gpu/with_bundle.sh python3 bench/gpu/compute/run_compute.py
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=$PWD/.device/bundle
mkdir -p build
for d in bin lib bench-gpu bench-compute; do
  [ -e "$bundle/$d" ] && { rm -rf "build/$d"; ln -s "$bundle/$d" "build/$d"; }
done
export GPUSLICE_CMD="/lib64/ld-linux-x86-64.so.2 --library-path $bundle/deps $bundle/bin/gpuslice"
export GPUSLICE_BIN=$bundle/bin/gpuslice
export GPUSLICE_LIBRARY_DIR=$bundle/lib
export LC_BE=$bundle/bench-compute/lc_be
# The task API's Python package and its libraries (bench/gpu/levels/run_service.py).
export GPUSLICE_PYTHONPATH=$bundle/python GPUSLICE_PYTHON_DEPS=$bundle/python-deps
exec "$@"
