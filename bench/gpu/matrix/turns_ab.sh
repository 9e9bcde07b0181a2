#!/usr/bin/env bash
# Shares by GPU turns against shares by the policy's slices alone, in one
# device call: the share mixes under stock and under gpuslice's backfill turns
# (GPUSLICE_TURNS=backfill, the default), then the same gpuslice cells with
# GPUSLICE_TURNS=slices (every uncapped best-effort vGPU keeps the policy's
# slice, its share of a 10 ms period, and turns order nothing), against the
# same alone and stock references.
#   bash bench/gpu/with_bundle.sh env OUT=$OUT/turns bash bench/gpu/matrix/turns_ab.sh
# Knobs: MIXES (run_matrix.py's), MATRIX_SECONDS, MODES (slices; more runs
# after the first, e.g. slices,backfill,slices).
# Results: $OUT/<n>-<mode>/matrix.{json,md} and $OUT/summary.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/gpuslice-turns-ab}
mkdir -p "$out"
export MATRIX_GROUPS=share BE_ALONE_END=
start=$(date +%s)
env OUT="$out/1-backfill" GPUSLICE_TURNS=backfill BENCH_BUDGET_S=420 python3 bench/gpu/matrix/run_matrix.py || true
prior=$out/1-backfill/matrix.json
cells=$(python3 -c "
import json, sys
print(','.join(n for n in json.load(open(sys.argv[1]))['cells'] if n.startswith('mix_') and n.endswith('_gpuslice')))" "$prior")
i=1
IFS=, read -ra modes <<< "${MODES:-slices}"
for mode in "${modes[@]}"; do
  i=$((i + 1))
  left=$((560 - ($(date +%s) - start)))
  [ "$left" -gt 60 ] || { echo "== $i $mode: skipped, $left s left"; continue; }
  env OUT="$out/$i-$mode" PRIOR="$prior" REUSE_ALONE=1 CELLS="$cells" GPUSLICE_TURNS="$mode" \
    BENCH_BUDGET_S="$left" python3 bench/gpu/matrix/run_matrix.py || true
done
for run in "$out"/[0-9]*-*; do
  echo "## $(basename "$run")"
  grep -A12 "^| mix" "$run/matrix.md" | grep "^|" || true
  echo
done | tee "$out/summary.md"
