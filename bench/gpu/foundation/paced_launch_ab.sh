#!/usr/bin/env bash
# What a paced launch costs on two builds, in one device call:
# launch_overhead.py --paced --turns T (beside an idle vGPU: every launch
# passes the gate, marks its process, under exclusive turns looks at the
# turn, and records a marker) for T in TURNS (default "backfill exclusive"),
# under the bundle's library and under a variant's
# (scripts/bundle-variant.sh), alternated ROUNDS times (default 2), the
# bundle first in odd rounds.
# Prints one line per run: build, direct and gpuslice medians, added
# (difference of medians), paired (median of per-round differences) and
# noise (direct again - direct), ns per launch; writes each run's JSON to
# $OUT (or /tmp) as paced-T-ROUND-BUILD.json.
#   bash bench/gpu/foundation/paced_launch_ab.sh .device/variant-NAME
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ $# -eq 1 ] || { echo "usage: $0 VARIANT_DIR" >&2; exit 2; }
variant=$1 rounds=${ROUNDS:-2} out=${OUT:-/tmp}
for turns in ${TURNS:-backfill exclusive}; do
for r in $(seq "$rounds"); do
  order=("bundle" "$variant")
  [ $((r % 2)) -eq 0 ] && order=("$variant" "bundle")
  for build in "${order[@]}"; do
    name=$turns-$r-$(basename "$build")
    v=$([ "$build" = bundle ] || echo "$build")
    # Builds of different board versions each refuse the other's board, and
    # an older one does not replace it: start each run without one.
    rm -f "${GPUSLICE_STATE_DIR:-/run/gpuslice}"/boards/gpu-*
    VARIANT=$v bash bench/gpu/with_bundle.sh python3 bench/gpu/foundation/launch_overhead.py --paced --turns "$turns" \
      2>"$out/paced-$name.err" | grep '^{' | tail -1 >"$out/paced-$name.json" || true
    python3 - "$out/paced-$name.json" "$name" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    l = d["launch"]
    print(f"{sys.argv[2]:>30} ok {d['ok']} direct {l['direct']['median_ns']:.0f} gpuslice {l['gpuslice']['median_ns']:.0f} "
          f"paced {d.get('turns_on_logged')} added {l['added_ns']:.1f} paired {l['paired_added_ns']:.1f} noise {l['noise_ns']:.1f}", flush=True)
except Exception as e:  # noqa: BLE001 - one failed run is reported, the others go on
    print(f"{sys.argv[2]:>30} no result ({type(e).__name__}: {e})", flush=True)
EOF
  done
done
done
