#!/usr/bin/env bash
# Runs cpp_streams (bench/gpu/levels/cpp_streams.cu, built by build.sh and
# carried in the bundle) ROUNDS times (default 2) with the given modes (by
# default the four stream modes), and writes one JSON line per mode and
# round to $OUT/cpp_streams.jsonl.
#   bash bench/gpu/levels/run_cpp_streams.sh [SECONDS [MODE...]]
#   bash bench/gpu/levels/run_cpp_streams.sh 10 slo_off slo_on
set -euo pipefail
cd "$(dirname "$0")/../../.."
bundle=$PWD/.device/bundle
prog=${CPP_STREAMS:-$bundle/bench-levels/cpp_streams}
[ -x "$prog" ] || prog=build/bench-levels/cpp_streams
out=${OUT:-/tmp/cpp-streams}
mkdir -p "$out"
for round in $(seq "${ROUNDS:-2}"); do
  LD_LIBRARY_PATH=$bundle/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 300 "$prog" "${1:-5}" "${@:2}" |
    sed "s/^{/{\"round\": $round, /" | tee -a "$out/cpp_streams.jsonl"
done
