#!/usr/bin/env bash
# Is the automatic hold (interposer/lc_activity.h) worth what it costs
# best-effort work, and does its trial (core/hold_trial.h) find out? The
# eager LC beside each BE kind under each GPUSLICE_LC_HOLD setting of ARMS
# (default: auto, the trial; on, always; off), interleaved ROUNDS times in
# one device call against one measurement alone and under stock (the eager
# cells move more between calls than between builds: docs/benchmarks.md,
# runs 10 and 14).
#   bash bench/gpu/with_bundle.sh env OUT=$OUT/hold bash bench/gpu/matrix/eager_hold_ab.sh
# Knobs: BE_KINDS (gpu,launch), ARMS (auto,on,off), ROUNDS (2),
# MATRIX_SECONDS (10).
# Results: $OUT/<arm>-<round>/matrix.{json,md}, $OUT/summary.txt and the
# hold's decisions and verdicts from the LC's log, $OUT/hold-log.txt.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/gpuslice-eager-hold}
mkdir -p "$out"
export BE_KINDS=${BE_KINDS:-gpu,launch} LC_KINDS=eager MATRIX_GROUPS=lc LC_ALONE_END=0 BE_ALONE_END=
cells=$(python3 -c "import os; print(','.join(f'lcbe_{b}_gpuslice' for b in os.environ['BE_KINDS'].split(',')))")
arms=${ARMS:-auto,on,off}
rounds=${ROUNDS:-2}
runs=()
prior=
for round in $(seq 1 "$rounds"); do
  for arm in ${arms//,/ }; do
    run=$arm-$round
    if [ -z "$prior" ]; then
      env OUT="$out/$run" GPUSLICE_LC_HOLD="$arm" python3 bench/gpu/matrix/run_matrix.py
      prior=$out/$run/matrix.json
    else
      env OUT="$out/$run" PRIOR="$prior" REUSE_ALONE=1 CELLS="$cells" GPUSLICE_LC_HOLD="$arm" \
        python3 bench/gpu/matrix/run_matrix.py
    fi
    runs+=("$run")
  done
done
for run in "${runs[@]}"; do
  python3 - "$out/$run/matrix.json" "$run" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
for name, c in sorted(cells.items()):
    if name.startswith("lcbe_") and isinstance(c, dict) and "error" not in c and "skipped" not in c:
        e = c.get("lc", {}).get("eager", {})
        print(sys.argv[2], name, {k: e.get(k) for k in ("p50_us", "p99_us", "be_kept")})
PY
done | tee "$out/summary.txt"
# What the LC's automatic hold did (lc_activity.h logs when it starts and stops
# holding, its linger, and each trial's verdict), by run.
for run in "${runs[@]}"; do
  grep -rh "automatic hold tried" "$out/$run"/logs 2>/dev/null | sed "s/^.*automatic hold tried/$run: tried/" || true
done > "$out/hold-verdicts.txt"
cat "$out/hold-verdicts.txt"
grep -rh "automatic hold" "$out"/*/logs 2>/dev/null | sed 's/^.*automatic hold/automatic hold/' | sort | uniq -c \
  | sort -rn | head -40 > "$out/hold-log.txt" || true
cat "$out/hold-log.txt"
