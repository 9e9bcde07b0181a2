#!/usr/bin/env bash
# Installs the dependencies, builds, and shows `gpuslice run` holding two
# processes to one 4 GiB vGPU. On a machine without an NVIDIA GPU it runs
# against gpuslice's fake CUDA driver (tests/fake_driver) and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build=$PWD/build
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
export GPUSLICE_STATE_DIR=$state

if nvidia-smi -L >/dev/null 2>&1; then
  echo "== NVIDIA GPU found: running against the real driver"
else
  echo "== No NVIDIA GPU on this machine: running against gpuslice's FAKE CUDA driver (tests/fake_driver)."
  echo "   The limits, accounting and library are the real ones; the 80 GiB 'GPU' is a test double."
  export GPUSLICE_REAL_DRIVER=$build/fake_driver/libcuda.so.1
  export GPUSLICE_REAL_NVML=$build/fake_driver/libnvidia-ml.so.1
  export LD_LIBRARY_PATH=$build/fake_driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
app=$build/bin/cuda_app

echo
echo "== gpuslice run --name demo --memory 4GiB -- cuda_app: it sees a 4 GiB GPU (meminfo FREE TOTAL) and takes 3 GiB"
"$build/bin/gpuslice" run --name demo --memory 4GiB -- \
  "$app" --lookup=procaddress init meminfo alloc 3G ready "$state/first" await "$state/second" meminfo |
  sed -u 's/^/  [first]  /' &
first=$!
while [ ! -e "$state/first" ]; do sleep 0.05; done
echo
echo "== a second process joins the same vGPU while the first holds 3 GiB: allocating 256 MiB at a time, it gets the last 1 GiB and no more"
"$build/bin/gpuslice" run --name demo -- "$app" --lookup=procaddress init meminfo fill 256M meminfo | sed -u 's/^/  [second] /'
echo
echo "== the second has exited, so the first sees its 1 GiB free again:"
touch "$state/second"
wait "$first"
echo
echo "== bad input is refused with the fix:"
"$build/bin/gpuslice" run --memory 4XB -- true || true
