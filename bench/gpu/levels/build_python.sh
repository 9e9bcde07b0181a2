#!/usr/bin/env bash
# Builds the task API's Python package for the Python on this machine, from
# the source tree and the headers and libraries the bundle carries
# (scripts/bundle-for-gpu.sh): for a GPU machine whose Python is not the one
# the package was built for here. Writes $1 (default /tmp/gpuslice-python)/gpuslice.
#   bash bench/gpu/levels/build_python.sh /tmp/gpuslice-python
#
# pybind11's headers come, in order, from $PYBIND11_INCLUDE, pip's
# pybind11, PyTorch's copy (torch/include/pybind11), and only then the
# bundle's Debian 12 copy (2.10, which predates Python 3.12 support). The
# link keeps every symbol but PyInit__gpuslice local, as the CMake build
# does (python/src/gpuslice_module.map); VERSION_SCRIPT= (empty) links
# without it, for bench/gpu/levels/diag_import.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-/tmp/gpuslice-python}
bundle=$PWD/.device/bundle
py=${PYTHON:-python3}
inc=$($py -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suffix=$($py -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
pyver=$($py -c "import sys; print(sys.version_info[:2] >= (3, 12))")

pybind_dir=${PYBIND11_INCLUDE:-}
if [ -z "$pybind_dir" ]; then
  pybind_dir=$($py -c "import pybind11; print(pybind11.get_include())" 2>/dev/null || true)
fi
if [ -z "$pybind_dir" ]; then
  # Only PyTorch's pybind11 directory, not all of torch/include (its other
  # headers must not shadow the bundle's).
  torch_inc=$($py -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'include'))" 2>/dev/null || true)
  if [ -n "$torch_inc" ] && [ -f "$torch_inc/pybind11/pybind11.h" ]; then
    pybind_dir=$(mktemp -d)
    ln -s "$torch_inc/pybind11" "$pybind_dir/pybind11"
  fi
fi
if [ -z "$pybind_dir" ]; then
  if [ "$pyver" = True ]; then
    echo "build_python.sh: no pybind11 >= 2.11 for $($py -V): pip install pybind11, or set PYBIND11_INCLUDE" >&2
    exit 1
  fi
  pybind_dir=$bundle/include
fi
version=$(sed -n 's/^#define PYBIND11_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
  "$pybind_dir/pybind11/detail/common.h" | paste -sd.)
echo "pybind11 $version from $pybind_dir"

version_script=${VERSION_SCRIPT-python/src/gpuslice_module.map}
mkdir -p "$out/gpuslice"
cp python/gpuslice/*.py python/gpuslice/py.typed "$out/gpuslice/"
${CXX:-g++} -O2 -std=c++20 -fPIC -shared -fvisibility=hidden -I"$inc" -I"$pybind_dir" -I"$bundle/include" -Iinclude -Isrc \
  python/src/gpuslice_module.cc src/task/{clock,dispatch_queue,level_stats,level_streams,request,scheduler,scheduler_core,task_abi,task_levels}.cc \
  "$bundle/python-deps/libyaml-cpp.so.0.7" -Wl,-rpath,"$bundle/python-deps" -ldl -lpthread \
  ${version_script:+-Wl,--version-script=$version_script} -o "$out/gpuslice/_gpuslice$suffix"
echo "built $out/gpuslice/_gpuslice$suffix"
