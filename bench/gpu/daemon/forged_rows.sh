#!/usr/bin/env bash
# A tenant forging pacing-board rows, on a real GPU (issue 11, "Forged board
# entries"): a best-effort victim launches small kernels back to back
# (lc_be small); beside it, a process of another best-effort vGPU writes a
# fake latency-critical row and its own row as the highest LC level, holding
# everyone, every millisecond (cuda_app forge_lc). Victim kernels/s alone,
# beside the forger, and alone again; one JSON object per phase, and a
# summary line with the ratio.
#   bash bench/gpu/with_bundle.sh bash bench/gpu/daemon/forged_rows.sh
#   VARIANT=.device/variant-NAME bash bench/gpu/with_bundle.sh ... (another library)
set -uo pipefail
cd "$(dirname "$0")/../../.."
read -r -a G <<< "${GPUSLICE_CMD:-build/bin/gpuslice}"
APP=build/bin/cuda_app
LC_BE=${LC_BE:-build/bench-compute/lc_be}
OUT=${OUT:-/tmp/gpuslice-forged}
SECONDS_EACH=${SECONDS_EACH:-5}
# A fixed kernel (lc_be would calibrate it, and a held calibration makes
# another kernel), ~10 us on an H100.
export SMALL_ITERS=${SMALL_ITERS:-750}
mkdir -p "$OUT"
export GPUSLICE_STATE_DIR=$(mktemp -d)/state

victim() {  # victim PHASE
  "${G[@]}" run --name victim --priority be -- "$LC_BE" small "$SECONDS_EACH" "$OUT/$1.json" > "$OUT/$1.log" 2>&1
  printf '{"phase":"%s",%s\n' "$1" "$(tail -c +2 "$OUT/$1.json")"
}

victim alone
# The forger outlasts the victim's start-up and window, then is stopped.
"${G[@]}" run --name attacker --priority be -- "$APP" init forge_lc 120 > "$OUT/attacker.log" 2>&1 &
attacker=$!
sleep 2
victim forged
kill -TERM "$attacker"; wait "$attacker"
victim alone_end
python3 - "$OUT" <<'PY'
import json, sys
rate = {p: json.load(open(f"{sys.argv[1]}/{p}.json"))["kernels_per_s"] for p in ("alone", "forged", "alone_end")}
alone = (rate["alone"] + rate["alone_end"]) / 2
print(f"victim kernels/s: alone {rate['alone']:.0f} / {rate['alone_end']:.0f}, beside the forger {rate['forged']:.0f}"
      f" = {rate['forged'] / alone:.2f} of alone")
PY
