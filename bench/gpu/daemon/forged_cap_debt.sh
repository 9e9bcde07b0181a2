#!/usr/bin/env bash
# A tenant writing a capped neighbour's cap tokens into debt, on a real GPU
# ("Forged board entries" in docs/design.md; core/gate_wait_budget.h): a
# best-effort victim capped at CAP_PCT launches small kernels back to back
# (lc_be small); a process of another best-effort vGPU writes the victim's
# row's cap_tokens_ns 11 days into debt every millisecond (cuda_app
# forge_cap_debt). The victim's waits for its own tokens are bounded by
# what its cap explains.
# Victim kernels/s in four phases, one JSON object each, and a summary:
#   uncapped (the victim without its cap), capped (its cap, alone), forged
#   (its cap, beside the forger), capped_end.
#   bash bench/gpu/with_bundle.sh bash bench/gpu/daemon/forged_cap_debt.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
read -r -a G <<< "${GPUSLICE_CMD:-build/bin/gpuslice}"
APP=build/bin/cuda_app
LC_BE=${LC_BE:-build/bench-compute/lc_be}
OUT=${OUT:-/tmp/gpuslice-forged-cap-debt}
SECONDS_EACH=${SECONDS_EACH:-8}
CAP_PCT=${CAP_PCT:-30}
export SMALL_ITERS=${SMALL_ITERS:-750}  # a fixed ~10 us kernel (as forged_rows.sh)
mkdir -p "$OUT"
export GPUSLICE_STATE_DIR=$(mktemp -d)/state

victim() {  # victim PHASE [gpuslice run flags...]
  local phase=$1; shift
  timeout 90 "${G[@]}" run --name victim --priority be "$@" -- "$LC_BE" small "$SECONDS_EACH" \
    "$OUT/$phase.json" > "$OUT/$phase.log" 2>&1
  if [ -s "$OUT/$phase.json" ]; then
    printf '{"phase":"%s",%s\n' "$phase" "$(tail -c +2 "$OUT/$phase.json")"
  else
    printf '{"phase":"%s","finished":false}\n' "$phase"
  fi
}

victim uncapped
victim capped --compute-cap "$CAP_PCT"
"${G[@]}" run --name attacker --priority be -- "$APP" init forge_cap_debt 300 > "$OUT/attacker.log" 2>&1 &
attacker=$!
sleep 2
victim forged --compute-cap "$CAP_PCT"
kill -TERM "$attacker"; wait "$attacker" 2>/dev/null
victim capped_end --compute-cap "$CAP_PCT"
python3 - "$OUT" <<'PY'
import json, os, sys
phases = ("uncapped", "capped", "forged", "capped_end")
rate = {}
for p in phases:
    path = f"{sys.argv[1]}/{p}.json"
    rate[p] = json.load(open(path))["kernels_per_s"] if os.path.exists(path) and os.path.getsize(path) else None
capped = [rate[p] for p in ("capped", "capped_end") if rate[p]]
ref = sum(capped) / len(capped) if capped else None
print("victim kernels/s: " + ", ".join(
    f"{p} {rate[p]:.0f}" + (f" ({rate[p] / ref:.3f} of capped alone)" if ref else "")
    if rate[p] is not None else f"{p}: window not finished" for p in phases))
PY
grep -h "cap explains\|forge_cap_debt" "$OUT"/*.log | sort | uniq -c | head
