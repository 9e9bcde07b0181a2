#!/usr/bin/env bash
# Builds the task API's Python package for the Python on this machine, from
# the source tree and the headers and libraries the bundle carries
# (scripts/bundle-for-gpu.sh): for a GPU machine whose Python is not the one
# the package was built for here. Writes $1 (default /tmp/gpuslice-python)/gpuslice.
#   bash bench/gpu/levels/build_python.sh /tmp/gpuslice-python
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-/tmp/gpuslice-python}
bundle=$PWD/.device/bundle
py=${PYTHON:-python3}
inc=$($py -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suffix=$($py -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
mkdir -p "$out/gpuslice"
cp python/gpuslice/__init__.py python/gpuslice/py.typed "$out/gpuslice/"
${CXX:-g++} -O2 -std=c++20 -fPIC -shared -fvisibility=hidden -I"$inc" -I"$bundle/include" -Iinclude -Isrc \
  python/src/gpuslice_module.cc src/task/{clock,dispatch_queue,level_stats,request,scheduler,scheduler_core,task_abi,task_levels}.cc \
  "$bundle/python-deps/libyaml-cpp.so.0.7" -Wl,-rpath,"$bundle/python-deps" -ldl -lpthread \
  -o "$out/gpuslice/_gpuslice$suffix"
echo "built $out/gpuslice/_gpuslice$suffix"
