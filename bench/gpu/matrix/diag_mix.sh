#!/usr/bin/env bash
# One share mix under several builds or turn modes, with every pacing board
# dumped every 0.2 s: why a tenant falls below its share.
#
#   bash bench/gpu/matrix/diag_mix.sh PRIOR_JSON NAME=DIR[:TURNS[:MIX]] ...
#
# PRIOR_JSON: a matrix.json whose be_alone_* cells serve as the references
# (REUSE_ALONE). DIR: `bundle`, or a variant directory (scripts/bundle-variant.sh).
# TURNS: GPUSLICE_TURNS for the tenants (backfill, the default, or exclusive).
# MIX: the mix, in run_matrix.py's MIXES syntax (default $MIX, else
# gpu:30+mem:70). SHARED_STATE=1: every setting runs in one state directory,
# as the cells of one matrix run do (the boards keep the earlier settings'
# rows and clocks).
# Results: $OUT/diag-mix.md (the mix's row per setting) and $OUT/diag-mix.tgz
# (each setting's matrix.json, boards.log and the tenants' logs).
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ $# -ge 2 ] || { echo "usage: $0 PRIOR_JSON NAME=DIR[:TURNS] ..." >&2; exit 2; }
prior=$(realpath "$1"); shift
default_mix=${MIX:-gpu:30+mem:70}
out=${OUT:-/tmp/gpuslice-diag-mix}
scratch=/tmp/gpuslice-diag-mix-work
rm -rf "$scratch" && mkdir -p "$scratch" "$out"
summary=$out/diag-mix.md
echo "# Share mixes, with the boards dumped ($(date -u '+%Y-%m-%d %H:%M UTC'))" > "$summary"
for spec in "$@"; do
  name=${spec%%=*} rest=${spec#*=}
  IFS=: read -r dir turns mix <<< "$rest"
  turns=${turns:-backfill} mix=${mix:-$default_mix}
  [ "$dir" = bundle ] && dir=""
  cell=mix_$(echo "$mix" | sed 's/:\([0-9]*\)/\1/g; s/+/_/g')_gpuslice
  work=$scratch/$name state=$scratch/$name-state
  [ "${SHARED_STATE:-0}" = 1 ] && state=$scratch/state
  mkdir -p "$work" "$state/boards"
  python3 bench/gpu/matrix/board_dump.py "$state" 0.2 > "$work/boards.log" 2>&1 &
  dump=$!
  env VARIANT="$dir" GPUSLICE_STATE_DIR="$state" GPUSLICE_TURNS="$turns" OUT="$work" SCRATCH="$work" \
    MIXES="$mix" MATRIX_GROUPS=share CELLS="$cell" PRIOR="$prior" REUSE_ALONE=1 BENCH_BUDGET_S=120 \
    bash bench/gpu/with_bundle.sh python3 bench/gpu/matrix/run_matrix.py > "$work/run.log" 2>&1 || true
  kill "$dump" 2>/dev/null || true
  { echo; echo "## $name: $mix (${dir:-bundle}, turns $turns)"; grep -A2 "^| mix" "$work/matrix.md"; } >> "$summary" || true
done
cat "$summary"
tar -czf "$out/diag-mix.tgz" -C "$scratch" .
