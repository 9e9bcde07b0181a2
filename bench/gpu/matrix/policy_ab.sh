#!/usr/bin/env bash
# Node policies side by side (docs/configuration.md, `timeslices:`), in one
# device call: the matrix's cells of MATRIX_GROUPS alone, under stock and
# under the first variant, then the gpuslice cells again under each other
# variant, against the same alone and stock references. Each variant is a
# node policy, written into a fresh state directory's `policy` file as a
# daemon stores it for standalone commands (src/node/policy_file.h).
#   bash bench/gpu/with_bundle.sh env OUT=$OUT/ab VARIANTS="default,short:be_slice_beside_lc_us=250" \
#     MATRIX_GROUPS=lc BE_KINDS=gpu,gpu*2 bash bench/gpu/matrix/policy_ab.sh
# VARIANTS: comma-separated NAME[:KEY=VALUE/KEY=VALUE...], KEY a policy file
# key (be_shares, be_period_us, be_slice_beside_lc_us, ...) or, in capitals,
# an environment variable for every process of the variant's cells (e.g.
# GPUSLICE_TURNS=exclusive); no settings = the defaults. Other knobs are run_matrix.py's (MATRIX_GROUPS, BE_KINDS,
# MIXES, MATRIX_SECONDS, ...).
# Results: $OUT/<n>-<name>/matrix.{json,md} and $OUT/summary.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/gpuslice-policy-ab}
mkdir -p "$out"
export BE_ALONE_END=${BE_ALONE_END-}
start=$(date +%s)
IFS=, read -ra variants <<< "${VARIANTS:?name the variants, e.g. VARIANTS=default,short:be_slice_beside_lc_us=250}"
i=0 prior="" cells=""
for variant in "${variants[@]}"; do
  i=$((i + 1))
  name=${variant%%:*}
  settings=""
  [ "$name" = "$variant" ] || settings=${variant#*:}
  left=$((560 - ($(date +%s) - start)))
  [ "$left" -gt 60 ] || { echo "== $i $name: skipped, $left s left"; continue; }
  state=$(mktemp -d /tmp/gpuslice-policy-ab-state-XXXXXX)
  : > "$state/policy"
  envs=()
  IFS=/ read -ra pairs <<< "$settings"
  for pair in "${pairs[@]}"; do
    case "${pair%%=*}" in
      "") ;;
      *[a-z]*) echo "${pair%%=*} ${pair#*=}" >> "$state/policy" ;;
      *) envs+=("$pair") ;;
    esac
  done
  echo "== $i $name: $(tr '\n' ' ' < "$state/policy")${envs[*]:+ env ${envs[*]}}"
  if [ -z "$prior" ]; then
    env "${envs[@]}" OUT="$out/$i-$name" GPUSLICE_STATE_DIR="$state" BENCH_BUDGET_S=$((left - 140)) \
      python3 bench/gpu/matrix/run_matrix.py || true
    prior=$out/$i-$name/matrix.json
    cells=$(python3 -c "
import json, sys
print(','.join(n for n in json.load(open(sys.argv[1]))['cells'] if n.endswith('_gpuslice')))" "$prior")
  else
    env "${envs[@]}" OUT="$out/$i-$name" GPUSLICE_STATE_DIR="$state" PRIOR="$prior" REUSE_ALONE=1 CELLS="$cells" \
      BENCH_BUDGET_S="$left" python3 bench/gpu/matrix/run_matrix.py || true
  fi
  rm -rf "$state"
done
for run in "$out"/[0-9]*-*; do
  echo "## $(basename "$run")"
  grep "^| " "$run/matrix.md" | grep -v "^|---\|^| LC \|^| mix \|^| BE " || true
  echo
done | tee "$out/summary.md"
