#!/usr/bin/env bash
# The integration scenarios of tests/integration, against the REAL driver:
# the same cuda_app scripts, run under `gpuslice run`, on a GPU machine.
# Prints one JSON object per check: {"check", "ok", "output"}.
# Usage: bench/gpu/real_driver_checks.sh BUNDLE_DIR   (holds bin/ and lib/)
set -u
bundle=${1:?usage: real_driver_checks.sh BUNDLE_DIR}
gpuslice=$bundle/bin/gpuslice
app=$bundle/bin/cuda_app
export GPUSLICE_STATE_DIR=$(mktemp -d)
MiB=1048576

check() {  # check NAME EXPECTED_REGEX -- gpuslice-run-args... -- app-args...
  local name=$1 expect=$2; shift 2
  local out
  out=$("$@" 2>&1)
  local ok=false
  if printf '%s\n' "$out" | tr '\n' ' ' | grep -Eq "$expect"; then ok=true; fi
  python3 -c 'import json,sys; print(json.dumps({"check": sys.argv[1], "ok": sys.argv[2] == "true", "output": sys.argv[3]}))' \
    "$name" "$ok" "$out"
}

for lookup in dlsym procaddress ptds; do
  for inject in preload libpath; do
    check "fill_64MiB_${lookup}_${inject}" "fill $((64 * MiB)) meminfo 0 $((64 * MiB))" \
      "$gpuslice" run --memory 64MiB --inject "$inject" -- "$app" --lookup=$lookup init fill 1M meminfo
  done
done
check "meminfo_and_totalmem" "meminfo $((64 * MiB)) $((64 * MiB)) totalmem $((64 * MiB))" \
  "$gpuslice" run --memory 64MiB -- "$app" init meminfo totalmem
check "pitch_managed" "pitch ok managed ok alloc oom" \
  "$gpuslice" run --memory 64MiB -- "$app" init pitch 1000 16K managed 40M alloc 16M meminfo
check "vmm" "vmm ok vmm oom free ok vmm ok vmm oom" \
  "$gpuslice" run --memory 64MiB -- "$app" init vmm 32M vmm 34M free vmm 64M vmm 2M
check "arrays" "array ok array3d ok mipmap ok" \
  "$gpuslice" run --memory 256MiB -- "$app" init array 1024 1024 array3d 256 256 16 mipmap 512 512 4 meminfo
check "array_over_limit" "array ok array oom" \
  "$gpuslice" run --memory 17MiB -- "$app" init array 1024 1024 array 1024 1024
check "async_pool_reservation" "async ok meminfo" \
  "$gpuslice" run --memory 256MiB -- "$app" init async 1M meminfo async 1M meminfo free free sync meminfo trim meminfo
check "pool_growth_refused" "poolalloc ok poolalloc oom" \
  "$gpuslice" run --memory 64MiB -- "$app" init pool poolalloc 40M poolalloc 30M meminfo
check "nvml_view" "nvml $((64 * MiB)) $((16 * MiB))" \
  "$gpuslice" run --memory 64MiB -- "$app" init alloc 16M nvml
check "nvidia_smi_inside" "64 MiB|^.*64" \
  "$gpuslice" run --memory 64MiB -- nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader
rm -rf "$GPUSLICE_STATE_DIR"
