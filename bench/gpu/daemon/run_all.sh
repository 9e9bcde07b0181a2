#!/usr/bin/env bash
# The daemon's GPU checks (issue 4), on a GPU machine, from the repository
# root, with build outputs carried over (bench/gpu/README.md):
#
#   OUT=/tmp/out bash bench/gpu/daemon/run_all.sh
#
# 1. set_share.py: `gpuslice set` shrinking a running PyTorch job's compute
#    share 70 -> 30 (and its neighbour's 30 -> 70), effect on throughput
#    within a second; `gpuslice top` captured meanwhile ($OUT/top.txt,
#    $OUT/top.jsonl); `gpuslice devices` on the real topology
#    ($OUT/devices.txt, $OUT/devices.json).
# 2. If bench/gpu/compute/run_compute.py is present: the compute-share
#    benchmark run with a daemon on its state directory (so its runs go
#    through the daemon), with `gpuslice top` captured every second into
#    $OUT/compute-top.txt.
# Exit status: 0 when every check passed. About 2 to 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export OUT=${OUT:-/tmp/gpuslice-daemon-gpu}
mkdir -p "$OUT"
GPUSLICE=${GPUSLICE_CMD:-${GPUSLICE_BIN:-build/bin/gpuslice}}
PYTHON=${PYTHON:-python3}
status=0

timeout 300 "$PYTHON" bench/gpu/daemon/set_share.py 2>&1 | tee "$OUT/set_share.log" || status=1

if [ -f bench/gpu/compute/run_compute.py ]; then
  state=$(mktemp -d /tmp/gsd-compute-XXXXXX)
  GPUSLICE_STATE_DIR="$state/state" $GPUSLICE daemon --metrics-address 127.0.0.1:0 >"$OUT/compute-daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do [ -S "$state/state/gpuslice.sock" ] && break; sleep 0.1; done
  GPUSLICE_STATE_DIR="$state/state" $GPUSLICE top --iterations 400 --interval-ms 1000 >"$OUT/compute-top.txt" 2>&1 &
  top=$!
  GPUSLICE_STATE_DIR="$state/state" OUT="$OUT/compute" timeout 400 "$PYTHON" bench/gpu/compute/run_compute.py \
    2>&1 | tee "$OUT/compute.log" || status=1
  kill "$top" 2>/dev/null
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
  rm -rf "$state"
fi
echo "daemon GPU checks: $([ $status -eq 0 ] && echo PASS || echo FAIL); results in $OUT"
exit $status
