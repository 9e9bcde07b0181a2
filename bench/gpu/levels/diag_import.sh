#!/usr/bin/env bash
# Why `import gpuslice` before `import torch` aborted on the H100 machine
# ("free(): invalid pointer"), while the other order worked. Builds the
# extension as build_python.sh does (with its version script) and without
# it (every symbol global, as before the fix), and a minimal pybind11
# module, and tries each before torch. Prints which variants abort, the
# extension's STB_GNU_UNIQUE symbols (bound process-wide even under RTLD_LOCAL), and a
# backtrace where gdb is installed.
#   bash bench/gpu/levels/diag_import.sh [workdir]
set -uo pipefail
cd "$(dirname "$0")/../../.."
work=${1:-/tmp/diag-import}
py=${PYTHON:-python3}
rm -rf "$work"; mkdir -p "$work"
VERSION_SCRIPT= bash bench/gpu/levels/build_python.sh "$work/full" | tail -2
ext=$(ls "$work"/full/gpuslice/_gpuslice*.so)
echo "== GNU_UNIQUE symbols the extension exports"
nm -D --defined-only -C "$ext" | grep ' u ' || echo "(none)"

bash bench/gpu/levels/build_python.sh "$work/local" | tail -1
echo "== GNU_UNIQUE symbols with the version script"
nm -D --defined-only -C "$work"/local/gpuslice/_gpuslice*.so | grep ' u ' || echo "(none)"

# A minimal pybind11 module: is any extension enough?
inc=$($py -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suffix=$($py -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
pyb=$($py -c "import pybind11; print(pybind11.get_include())" 2>/dev/null || echo .device/bundle/include)
printf '#include <pybind11/pybind11.h>\n#include <string>\nPYBIND11_MODULE(tiny, m) { m.def("f", [](std::string s) { return s + "!"; }); }\n' > "$work/tiny.cc"
mkdir -p "$work/tiny"
g++ -O2 -std=c++20 -fPIC -shared -fvisibility=hidden -I"$inc" -I"$pyb" "$work/tiny.cc" -o "$work/tiny/tiny$suffix"

try() {  # name, PYTHONPATH, first import
  PYTHONPATH=$2 timeout 120 $py -X faulthandler -c "import $3; import torch; print('ok', torch.__version__)" > "$work/$1.log" 2>&1
  echo "== $1 ($3 then torch): rc=$?"; tail -25 "$work/$1.log"
}
try full "$work/full" gpuslice
try full_module_only "$work/full" gpuslice._gpuslice
try version_script "$work/local" gpuslice
try tiny_pybind11 "$work/tiny" tiny
try torch_first "$work/full" "torch; import gpuslice"
if command -v gdb >/dev/null; then
  echo "== gdb backtrace (full)"
  PYTHONPATH=$work/full timeout 180 gdb -q -batch -ex run -ex bt --args $py -c "import gpuslice, torch" 2>&1 | tail -40
fi
