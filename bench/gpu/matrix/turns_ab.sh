#!/usr/bin/env bash
# Shares by slices against shares by turns (timeslices.best_effort.shares,
# docs/design.md "Shares: slices or turns"), in one device call: the share
# mixes alone and under stock, then their gpuslice cells under each mode in
# MODES, against the same alone and stock references. Each mode is the
# node's, written into a fresh state directory's `policy` file as a daemon
# stores it for standalone commands.
#   bash bench/gpu/with_bundle.sh env OUT=$OUT/turns bash bench/gpu/matrix/turns_ab.sh
# Knobs: MIXES (run_matrix.py's), MATRIX_SECONDS, MODES (turns,slices; the
# first also runs the alone and stock cells).
# Results: $OUT/<n>-<mode>/matrix.{json,md} and $OUT/summary.md.
# (Runs 17-18 in docs/benchmarks.md ran an earlier form of this script,
# whose second mode was an environment switch since removed.)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/gpuslice-turns-ab}
mkdir -p "$out"
export MATRIX_GROUPS=share BE_ALONE_END=
start=$(date +%s)
IFS=, read -ra modes <<< "${MODES:-turns,slices}"
i=0 prior="" cells=""
for mode in "${modes[@]}"; do
  i=$((i + 1))
  left=$((560 - ($(date +%s) - start)))
  [ "$left" -gt 60 ] || { echo "== $i $mode: skipped, $left s left"; continue; }
  state=$(mktemp -d /tmp/gpuslice-turns-ab-state-XXXXXX)
  echo "be_shares $mode" > "$state/policy"
  if [ -z "$prior" ]; then
    env OUT="$out/$i-$mode" GPUSLICE_STATE_DIR="$state" BENCH_BUDGET_S=$((left - 140)) \
      python3 bench/gpu/matrix/run_matrix.py || true
    prior=$out/$i-$mode/matrix.json
    cells=$(python3 -c "
import json, sys
print(','.join(n for n in json.load(open(sys.argv[1]))['cells'] if n.startswith('mix_') and n.endswith('_gpuslice')))" "$prior")
  else
    env OUT="$out/$i-$mode" GPUSLICE_STATE_DIR="$state" PRIOR="$prior" REUSE_ALONE=1 CELLS="$cells" \
      BENCH_BUDGET_S="$left" python3 bench/gpu/matrix/run_matrix.py || true
  fi
  rm -rf "$state"
done
for run in "$out"/[0-9]*-*; do
  echo "## $(basename "$run")"
  grep -A12 "^| mix" "$run/matrix.md" | grep "^|" || true
  echo
done | tee "$out/summary.md"
