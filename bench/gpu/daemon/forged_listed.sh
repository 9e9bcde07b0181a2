#!/usr/bin/env bash
# A tenant impersonating a real latency-critical vGPU on a real GPU (issue
# 11, "Forged board entries"; core/hold_budget.h): a best-effort victim
# launches small kernels back to back (lc_be small); an LC vGPU on the same
# GPU sits idle; a process of another best-effort vGPU writes the LC row's
# hold fields every millisecond (cuda_app forge_listed_lc). The roster lists
# the LC vGPU, so the victim believes the holds; its hold budget bounds them.
# Victim kernels/s in five phases, one JSON object each, and a summary:
#   alone, lc_idle (the LC vGPU present, no forger), forged (the default
#   budget), forged_unbounded (GPUSLICE_HOLD_BUDGET=100 in the victim: as
#   before the budget; each launch waits out the gate's 2 s bound, so the
#   phase is cut at UNBOUNDED_LIMIT_S and reported as not finished),
#   alone_end.
#   bash bench/gpu/with_bundle.sh bash bench/gpu/daemon/forged_listed.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
read -r -a G <<< "${GPUSLICE_CMD:-build/bin/gpuslice}"
APP=build/bin/cuda_app
LC_BE=${LC_BE:-build/bench-compute/lc_be}
OUT=${OUT:-/tmp/gpuslice-forged-listed}
SECONDS_EACH=${SECONDS_EACH:-5}
UNBOUNDED_LIMIT_S=${UNBOUNDED_LIMIT_S:-40}
export SMALL_ITERS=${SMALL_ITERS:-750}  # a fixed ~10 us kernel (as forged_rows.sh)
mkdir -p "$OUT"
export GPUSLICE_STATE_DIR=$(mktemp -d)/state

victim() {  # victim PHASE LIMIT_S [ENV=VALUE...]
  local phase=$1 limit=$2; shift 2
  env "$@" timeout "$limit" "${G[@]}" run --name victim --priority be -- "$LC_BE" small "$SECONDS_EACH" \
    "$OUT/$phase.json" > "$OUT/$phase.log" 2>&1
  if [ -s "$OUT/$phase.json" ]; then
    printf '{"phase":"%s",%s\n' "$phase" "$(tail -c +2 "$OUT/$phase.json")"
  else
    printf '{"phase":"%s","finished":false,"limit_s":%s}\n' "$phase" "$limit"
  fi
}

victim alone 60
"${G[@]}" run --name lc --priority lc -- "$APP" init sleep 600000 > "$OUT/lc.log" 2>&1 &
lc=$!
sleep 3
victim lc_idle 60
"${G[@]}" run --name attacker --priority be -- "$APP" init forge_listed_lc 300 > "$OUT/attacker.log" 2>&1 &
attacker=$!
sleep 2
victim forged 60
victim forged_unbounded "$UNBOUNDED_LIMIT_S" GPUSLICE_HOLD_BUDGET=100
kill -TERM "$attacker" "$lc"; wait "$attacker" "$lc" 2>/dev/null
victim alone_end 60
python3 - "$OUT" <<'PY'
import json, sys
import os
phases = ("alone", "lc_idle", "forged", "forged_unbounded", "alone_end")
rate = {}
for p in phases:
    path = f"{sys.argv[1]}/{p}.json"
    finished = os.path.exists(path) and os.path.getsize(path) > 0
    rate[p] = json.load(open(path))["kernels_per_s"] if finished else None
alone = (rate["alone"] + rate["alone_end"]) / 2
print("victim kernels/s: " + ", ".join(
    f"{p} {rate[p]:.0f} ({rate[p] / alone:.3f} of alone)" if rate[p] is not None else f"{p}: window not finished"
    for p in phases))
PY
grep -h "hold budget\|forge_listed_lc" "$OUT"/*.log | sort | uniq -c | head
