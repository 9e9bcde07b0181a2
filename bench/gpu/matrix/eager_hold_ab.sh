#!/usr/bin/env bash
# Is the automatic hold (interposer/lc_activity.h) still worth what it costs
# best-effort work? The eager LC beside each BE kind, with the LC's default
# hold and with GPUSLICE_LC_HOLD=off, interleaved twice in one device call
# against one measurement alone and under stock (the eager cells move more
# between calls than between builds: docs/benchmarks.md, runs 10 and 14).
#   bash bench/gpu/with_bundle.sh env OUT=$OUT/hold bash bench/gpu/matrix/eager_hold_ab.sh
# Knobs: BE_KINDS (gpu,launch), MATRIX_SECONDS (10).
# Results: $OUT/{auto,off}-{1,2}/matrix.{json,md}, $OUT/summary.txt and the
# hold's decisions from the LC's log, $OUT/hold-log.txt.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/gpuslice-eager-hold}
mkdir -p "$out"
export BE_KINDS=${BE_KINDS:-gpu,launch} LC_KINDS=eager MATRIX_GROUPS=lc LC_ALONE_END=0 BE_ALONE_END=
cells=$(python3 -c "import os; print(','.join(f'lcbe_{b}_gpuslice' for b in os.environ['BE_KINDS'].split(',')))")
env OUT="$out/auto-1" python3 bench/gpu/matrix/run_matrix.py
prior=$out/auto-1/matrix.json
env OUT="$out/off-1" PRIOR="$prior" REUSE_ALONE=1 CELLS="$cells" GPUSLICE_LC_HOLD=off python3 bench/gpu/matrix/run_matrix.py
env OUT="$out/auto-2" PRIOR="$prior" REUSE_ALONE=1 CELLS="$cells" python3 bench/gpu/matrix/run_matrix.py
env OUT="$out/off-2" PRIOR="$prior" REUSE_ALONE=1 CELLS="$cells" GPUSLICE_LC_HOLD=off python3 bench/gpu/matrix/run_matrix.py
for run in auto-1 off-1 auto-2 off-2; do
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
# holding, and its linger).
grep -rh "automatic hold" "$out"/*/logs 2>/dev/null | sed 's/^.*automatic hold/automatic hold/' | sort | uniq -c \
  | sort -rn | head -40 > "$out/hold-log.txt" || true
cat "$out/hold-log.txt"
