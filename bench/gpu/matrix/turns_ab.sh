#!/usr/bin/env bash
# Shares by slices against shares by turns (timeslices.best_effort.shares,
# docs/design.md "Shares: slices or turns"), in one device call: the share
# mixes alone and under stock, then their gpuslice cells under each mode in
# MODES (turns,slices), through policy_ab.sh.
#   bash bench/gpu/with_bundle.sh env OUT=$OUT/turns bash bench/gpu/matrix/turns_ab.sh
# (Runs 17-18 in docs/benchmarks.md ran an earlier form of this script,
# whose second mode was an environment switch since removed.)
set -euo pipefail
IFS=, read -ra modes <<< "${MODES:-turns,slices}"
variants=""
for mode in "${modes[@]}"; do variants+="${variants:+,}$mode:be_shares=$mode"; done
exec env MATRIX_GROUPS=share VARIANTS="$variants" OUT="${OUT:-/tmp/gpuslice-turns-ab}" \
  bash "$(dirname "$0")/policy_ab.sh"
