#!/usr/bin/env bash
# Compares builds of gpuslice on the matrix's LC x BE cells within one device
# call: the card, its clocks and its neighbours drift between calls (stock's
# own figures moved 7.5 points between matrix runs 2 and 3), so builds are
# only compared side by side.
#
#   bash bench/gpu/matrix/compare_builds.sh NAME=DIR [NAME=DIR ...]
#
# The first build is the bundle itself (DIR ignored; carry .device/bundle):
# it runs the alone and stock cells and its gpuslice cells. Every later build
# is a variant directory made by scripts/bundle-variant.sh (carried too): its
# bin/gpuslice (if any) and lib/ replace the bundle's, and only its gpuslice
# cells run, against the first build's alone and stock references. DIR
# `bundle` names the bundle again: the same build run twice shows how far one
# build moves within the run.
# Results: $OUT/compare.md (one table) and $OUT/compare.tgz (each run's
# matrix.json and matrix.md, and the children's logs).
# Knobs: BE_KINDS (launch,gpu), LC_KINDS (tiny,graph,eager), MATRIX_SECONDS,
# COMPARE_BUDGET_S (570: the runs left when it is spent are skipped),
# COMPARE_GROUPS (lc: the groups the bundle runs; e.g. share,cap) and
# VARIANT_CELLS (the cells each variant runs; default its gpuslice LC x BE
# cells; e.g. cap30_gpu,cap30_launch,cap30_mem). compare.md covers LC x BE
# cells only; other cells are in each run's matrix.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ $# -ge 1 ] || { echo "usage: $0 NAME=DIR [NAME=DIR ...] (the first is the bundle)" >&2; exit 2; }
out=${OUT:-/tmp/gpuslice-compare}
scratch=${SCRATCH:-/tmp/gpuslice-compare-work}
rm -rf "$scratch" && mkdir -p "$scratch" "$out"
export BE_KINDS=${BE_KINDS:-launch,gpu} LC_KINDS=${LC_KINDS:-tiny,graph,eager}
export LC_ALONE_END=0 BE_ALONE_END=
groups=${COMPARE_GROUPS:-lc}
cells=${VARIANT_CELLS:-$(python3 -c "import os; print(','.join(f'lcbe_{b}_gpuslice' for b in os.environ['BE_KINDS'].split(',')))")}
start=$(date +%s)
budget=${COMPARE_BUDGET_S:-570}
base_json=""
i=0
for spec in "$@"; do
  name=${spec%%=*} dir=${spec#*=}
  i=$((i + 1))
  run_dir=$scratch/$i-$name
  left=$((budget - ($(date +%s) - start)))
  if [ -z "$base_json" ]; then
    echo "== $i $name: the bundle, alone + stock + gpuslice ($left s left)"
    env OUT="$run_dir" SCRATCH="$run_dir" MATRIX_GROUPS="$groups" BENCH_BUDGET_S="$left" \
      bash bench/gpu/with_bundle.sh python3 bench/gpu/matrix/run_matrix.py || true
    base_json=$run_dir/matrix.json
  else
    [ "$left" -gt 60 ] || { echo "== $i $name: skipped, $left s left"; continue; }
    [ "$dir" = bundle ] && dir=""
    echo "== $i $name: ${dir:-the bundle}, gpuslice cells ($left s left)"
    env VARIANT="$dir" OUT="$run_dir" SCRATCH="$run_dir" MATRIX_GROUPS="$groups" CELLS="$cells" \
      PRIOR="$base_json" REUSE_ALONE=1 BENCH_BUDGET_S="$left" \
      bash bench/gpu/with_bundle.sh python3 bench/gpu/matrix/run_matrix.py || true
  fi
done
python3 bench/gpu/matrix/compare_summary.py "$scratch" > "$out/compare.md" || true
cat "$out/compare.md"
tar -czf "$out/compare.tgz" -C "$scratch" .
