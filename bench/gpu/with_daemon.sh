#!/usr/bin/env bash
# Runs a bench/gpu command with a `gpuslice daemon` on a fresh state
# directory: exports GPUSLICE_STATE_DIR so that the command's `gpuslice run`s
# go through the daemon (its socket is in that directory), and stops the
# daemon afterwards, its log in $OUT/daemon.log. Inside with_bundle.sh:
#   bash bench/gpu/with_bundle.sh bash bench/gpu/with_daemon.sh python3 bench/gpu/compute/run_compute.py
# DAEMON_ARGS: more daemon flags (e.g. "--log-level debug").
set -euo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
# The daemon as its own binary: it re-executes itself to start its state
# keeper, which GPUSLICE_CMD's loader prefix would break; with the bundle's
# libraries when there is one.
gs=("${GPUSLICE_BIN:-build/bin/gpuslice}")
deps=$(cd "$(dirname "$0")/../.." && pwd)/.device/bundle/deps
[ -n "${GPUSLICE_BIN:-}" ] && [ -d "$deps" ] && gs=(env "LD_LIBRARY_PATH=$deps" "$GPUSLICE_BIN")
state=$(mktemp -d /tmp/gpuslice-daemon-state-XXXXXX)
export GPUSLICE_STATE_DIR=$state/state
unset GPUSLICE_SOCKET
read -r -a extra <<< "${DAEMON_ARGS:-}"
"${gs[@]}" daemon --metrics-address 127.0.0.1:0 "${extra[@]}" > "$OUT/daemon.log" 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$state"' EXIT
for _ in $(seq 300); do
  [ -S "$GPUSLICE_STATE_DIR/gpuslice.sock" ] && break
  kill -0 "$daemon" 2>/dev/null || { echo "with_daemon: the daemon exited:" >&2; cat "$OUT/daemon.log" >&2; exit 1; }
  sleep 0.1
done
[ -S "$GPUSLICE_STATE_DIR/gpuslice.sock" ] || { echo "with_daemon: no daemon socket in 30 s" >&2; exit 1; }
"$@"
