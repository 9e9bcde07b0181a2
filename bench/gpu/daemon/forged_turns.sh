#!/usr/bin/env bash
# A tenant forging GPU turns, on a real GPU (issue 11; core/turn_floor.h): a
# best-effort victim (--compute 50) launches small kernels back to back
# (lc_be small); beside it another best-effort vGPU (--compute 50) runs a
# GPU-bound job (lc_be be: 20 ms kernels), honestly, then with a process that
# keeps the GPU's turn for its vGPU (cuda_app forge_turns: its own virtual
# time 0 and the turn word rewritten to it in a loop; every 200 us in the
# 2026-11-25 run; since 2026-11-28 also a busy mark its drains cannot count
# down, the longest quantum, and the victim's last turn ended now). Victim
# kernels/s alone, beside the honest job and beside the forging one; one
# JSON object per phase and a summary line.
# SHARES (default turns) is the node's share mode, written into the state
# directory's policy file: under slices, the default since 2026-11-28, an
# uncapped vGPU's turns set no slice, so forging them gains nothing.
# TURNS (default backfill) is the node's turn mode (`be_turns`); under
# exclusive turns every best-effort launch waits at the gate for its turn.
# VICTIM_FLAGS adds `gpuslice run` flags to the victim (e.g. a cap: a
# capped vGPU waits at the gate for turns in every mode). The victim's
# waits for others' turns are bounded by its share (core/gate_wait_budget.h).
#   bash bench/gpu/with_bundle.sh bash bench/gpu/daemon/forged_turns.sh
#   VARIANT=.device/variant-NAME bash bench/gpu/with_bundle.sh ... (another library)
set -uo pipefail
cd "$(dirname "$0")/../../.."
read -r -a G <<< "${GPUSLICE_CMD:-build/bin/gpuslice}"
APP=$PWD/build/bin/cuda_app
LC_BE=$(realpath "${LC_BE:-build/bench-compute/lc_be}")
OUT=${OUT:-/tmp/gpuslice-forged-turns}
SECONDS_EACH=${SECONDS_EACH:-6}
export SMALL_ITERS=${SMALL_ITERS:-750}  # a fixed ~10 us kernel (no calibration beside the job)
mkdir -p "$OUT"
export GPUSLICE_STATE_DIR=$(mktemp -d)/state
mkdir -p "$GPUSLICE_STATE_DIR"
printf 'be_shares %s\nbe_turns %s\n' "${SHARES:-turns}" "${TURNS:-backfill}" > "$GPUSLICE_STATE_DIR/policy"
read -r -a VICTIM_FLAGS <<< "${VICTIM_FLAGS:-}"

victim() {  # victim PHASE: a window that has not ended after VICTIM_TIMEOUT s counts as not finished
  timeout "${VICTIM_TIMEOUT:-60}" "${G[@]}" run --name victim --compute 50 "${VICTIM_FLAGS[@]}" -- "$LC_BE" small \
    "$SECONDS_EACH" "$OUT/$1.json" > "$OUT/$1.log" 2>&1
  if [ -s "$OUT/$1.json" ]; then
    printf '{"phase":"%s",%s\n' "$1" "$(tail -c +2 "$OUT/$1.json")"
  else
    printf '{"phase":"%s","finished":false}\n' "$1"
  fi
}
beside() {  # beside PHASE FORGE(0|1): the victim beside the GPU-bound job
  local stop=$OUT/$1.stop forge=""
  [ "$2" = 1 ] && forge="$APP init forge_turns $((SECONDS_EACH + 30)) & "
  STOP_FILE=$stop "${G[@]}" run --name job --compute 50 -- bash -c \
    "$forge\"$LC_BE\" be $((SECONDS_EACH + 30)) $OUT/$1-job.json; wait" > "$OUT/$1-job.log" 2>&1 &
  local job=$!
  sleep 3
  victim "$1"
  touch "$stop"; pkill -f "forge_turns" 2>/dev/null; wait "$job"
}

victim alone
beside honest 0
beside forged 1
victim alone_end
python3 - "$OUT" <<'PY'
import json, os, sys
rate = {}
for p in ("alone", "honest", "forged", "alone_end"):
    path = f"{sys.argv[1]}/{p}.json"
    rate[p] = json.load(open(path))["kernels_per_s"] if os.path.exists(path) and os.path.getsize(path) else None
alone = (rate["alone"] + rate["alone_end"]) / 2 if rate["alone"] and rate["alone_end"] else None
of = lambda p: (f"{rate[p]:.0f} = {rate[p] / alone:.3f} of alone" if rate[p] is not None and alone
                else "window not finished" if rate[p] is None else f"{rate[p]:.0f}")
print(f"victim kernels/s: alone {of('alone')} / {of('alone_end')}; beside the GPU-bound job {of('honest')}; "
      f"beside it forging turns {of('forged')}")
PY
# What the victim said of the board in each phase: honest phases must say nothing.
for phase in alone honest forged alone_end; do
  printf '%s: %s\n' "$phase" "$(grep -h "forging the pacing board\|pacing board forged" "$OUT/$phase.log" | head -2)"
done
