#!/usr/bin/env bash
# Runs the foundation GPU checks (see bench/gpu/README.md) on a GPU machine,
# from a checkout whose build/ was built elsewhere and carried along:
#
#   OUT=/path/to/results bash bench/gpu/run_all.sh
#
# Writes $OUT/foundation.json (every check's result; rewritten after each check,
# so a run cut short still leaves what it got) and $OUT/foundation.log (all
# output). Stays within BENCH_BUDGET_S seconds (default 440): each check's limit
# is cut to what is left, and a check with under 20 s left is recorded as
# skipped. Exits 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
out=${OUT:-$root/build/bench-gpu/out}
mkdir -p "$out"
log=$out/foundation.log
json=$out/foundation.json
: >"$log"

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuslice-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl
export BENCH_WORK=$work GPUSLICE_STATE_DIR=$work/state PYTHONUNBUFFERED=1
export GPUSLICE_BIN=${GPUSLICE_BIN:-$root/build/bin/gpuslice}
mkdir -p "$GPUSLICE_STATE_DIR"
py=${PYTHON:-python3}
deadline=$((SECONDS + ${BENCH_BUDGET_S:-440}))

say() { echo "$*" | tee -a "$log"; }

# check ID LIMIT_S SCRIPT [ARGS...]: runs bench/gpu/foundation/SCRIPT as check
# ID under a time limit and records its result (or why there is none).
check() {
  local id=$1 limit=$2 script=$3
  shift 3
  local left=$((deadline - SECONDS))
  if ((left < 20)); then
    "$py" bench/gpu/collect.py skip "$results" "$id" "suite time budget spent"
    return
  fi
  ((limit > left)) && limit=$left
  say "=== $id (limit ${limit}s, $(date -u +%T))"
  local offset start=$SECONDS rc
  offset=$(stat -c %s "$log")
  BENCH_CHECK_ID=$id BENCH_RESULT_FILE=$work/results/$id.json \
    timeout -k 10 "$limit" "$py" "bench/gpu/foundation/$script" "$@" </dev/null >>"$log" 2>&1
  rc=$?
  "$py" bench/gpu/collect.py add "$results" "$id" "$rc" "$((SECONDS - start))" \
    "$work/results/$id.json" "$log" "$offset"
  "$py" bench/gpu/collect.py assemble "$results" "$json"
  "$py" bench/gpu/collect.py summary "$results" | tail -n 1 | tee -a "$log"
}

say "gpuslice foundation checks: gpuslice=$GPUSLICE_BIN state=$GPUSLICE_STATE_DIR out=$out"
# Most important first, so that a short budget drops the repeats.
check env 60 env.py
check context 90 context.py
check mem_get_info 90 mem_get_info.py --inject preload
check oom_torch 120 oom_torch.py --inject preload
check oom_torch_expandable 120 oom_torch.py --inject preload --expandable
check shared_vgpu 150 shared_vgpu.py --inject preload
check oom_cupy 120 oom_cupy.py --inject preload
check train_small 120 train_small.py --inject preload
check launch_overhead 150 launch_overhead.py
# LD_LIBRARY_PATH mode: the CUDA runtime reaches the driver through
# cuGetProcAddress; the library logs what it resolves.
GPUSLICE_LOG=info check mem_get_info.libpath 90 mem_get_info.py --inject libpath
GPUSLICE_LOG=info check oom_torch.libpath 120 oom_torch.py --inject libpath
check train_overhead 240 train_overhead.py --inject preload
GPUSLICE_LOG=info check oom_torch_expandable.libpath 120 oom_torch.py --inject libpath --expandable
GPUSLICE_LOG=info check shared_vgpu.libpath 150 shared_vgpu.py --inject libpath
GPUSLICE_LOG=info check oom_cupy.libpath 120 oom_cupy.py --inject libpath
GPUSLICE_LOG=info check train_small.libpath 120 train_small.py --inject libpath

"$py" bench/gpu/collect.py assemble "$results" "$json"
say "=== summary ($SECONDS s)"
"$py" bench/gpu/collect.py summary "$results" | tee -a "$log"
say "results: $json"
"$py" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["all_ok"] else 1)' "$json"
