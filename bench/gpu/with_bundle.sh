#!/usr/bin/env bash
# Runs a bench/gpu command on a GPU machine from a bundle made here by
# scripts/bundle-for-gpu.sh (carried as .device/bundle): points build/bin,
# build/lib and build/bench-* at the bundle, and runs the CLI through the
# bundle's loader path so that its libraries stay out of the benchmarked
# applications' environment.
#   bash bench/gpu/with_bundle.sh python3 bench/gpu/compute/run_compute.py
set -euo pipefail
cd "$(dirname "$0")/../.."
#
# VARIANT=DIR (scripts/bundle-variant.sh): DIR's bin/gpuslice, if there, and
# lib/ stand in for the bundle's, with the bundle's libraries and benchmarks:
# another build of gpuslice compared within one device call.
bundle=$PWD/.device/bundle
variant=${VARIANT:+$PWD/$VARIANT}
bin=$bundle/bin lib=$bundle/lib
if [ -n "$variant" ]; then
  [ -d "$variant/lib" ] || { echo "with_bundle: $variant/lib is missing (scripts/bundle-variant.sh makes it)" >&2; exit 2; }
  lib=$variant/lib
  [ -x "$variant/bin/gpuslice" ] && bin=$variant/bin
fi
mkdir -p build
for d in bench-gpu bench-compute; do
  [ -e "$bundle/$d" ] && { rm -rf "build/$d"; ln -s "$bundle/$d" "build/$d"; }
done
rm -rf build/bin build/lib
ln -s "$bin" build/bin
ln -s "$lib" build/lib
export GPUSLICE_CMD="/lib64/ld-linux-x86-64.so.2 --library-path $bundle/deps $bin/gpuslice"
export GPUSLICE_BIN=$bin/gpuslice
export GPUSLICE_LIBRARY_DIR=$lib
export LC_BE=$bundle/bench-compute/lc_be
# The task API's Python package and its libraries (bench/gpu/levels/run_service.py).
export GPUSLICE_PYTHONPATH=$bundle/python GPUSLICE_PYTHON_DEPS=$bundle/python-deps
exec "$@"
