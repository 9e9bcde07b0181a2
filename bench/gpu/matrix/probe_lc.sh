#!/usr/bin/env bash
# A quick probe of LC protection on a GPU: the synthetic tiny LC (lc_be lc,
# 50 µs kernel, 200 req/s) beside one BE, for each (BE, GPUSLICE_LC_HOLD)
# given, under gpuslice (--priority lc / be). Prints one line per case with
# the LC's p50/p99 and the slices each side set. Run through with_bundle.sh:
#   bash bench/gpu/with_bundle.sh bash bench/gpu/matrix/probe_lc.sh
# CASES: space-separated BE:HOLD[:lcfirst] items; BE is `be` (lc_be's
# back-to-back 20 ms kernels) or `train` (compute/train.py); HOLD is auto,
# off or µs; `lcfirst` starts an idle LC vGPU before the BE, so that the BE's
# slice beside LC is set when its channel group is made.
set -uo pipefail
cd "$(dirname "$0")/../../.."
CASES=${CASES:-"be:auto be:off train:auto train:off"}
LC_S=${LC_S:-5}
OUT=${OUT:-/tmp/probe}
mkdir -p "$OUT"
work=$(mktemp -d)
for c in $CASES; do
  IFS=: read -r be hold order <<<"$c"
  export GPUSLICE_STATE_DIR="$work/state-$be-$hold-$order" GPUSLICE_LOG=info
  ready="$work/$be-$hold.ready" stop="$work/$be-$hold.stop"
  rm -f "$ready" "$stop"
  if [ "$order" = lcfirst ]; then $GPUSLICE_CMD run --name early --priority lc -- sleep 60 & early=$!; sleep 1; fi
  if [ "$be" = train ]; then
    READY_FILE=$ready STOP_FILE=$stop $GPUSLICE_CMD run --name be --priority be -- \
      python3 bench/gpu/compute/train.py 120 "$work/$be-$hold-be.json" 2>"$OUT/$be-$hold-be.log" &
  else
    READY_FILE=$ready STOP_FILE=$stop $GPUSLICE_CMD run --name be --priority be -- "$LC_BE" be 120 \
      "$work/$be-$hold-be.json" 2>"$OUT/$be-$hold-be.log" &
  fi
  bg=$!
  for _ in $(seq 600); do [ -e "$ready" ] && break; sleep 0.1; done
  GPUSLICE_LC_HOLD=$hold $GPUSLICE_CMD run --name lc --priority lc -- "$LC_BE" lc "$LC_S" "$work/$be-$hold-lc.json" \
    2>"$OUT/$be-$hold-lc.log"
  touch "$stop"; wait "$bg" 2>/dev/null
  [ "$order" = lcfirst ] && kill "$early" 2>/dev/null
  lat=$(grep -o '"p50_us":[0-9.]*\|"p99_us":[0-9.]*' "$work/$be-$hold-lc.json" | tr '\n' ' ')
  slices=$(grep -ho 'set to [0-9]* us' "$OUT/$be-$hold-be.log" "$OUT/$be-$hold-lc.log" | tr '\n' ',')
  waits=$(grep -c 'waited' "$OUT/$be-$hold-be.log")
  echo "BE=$be HOLD=$hold $order: $lat slices: $slices be-slow-wait-lines: $waits"
done
