#!/usr/bin/env bash
# Sealed shared state on a real GPU (issue 11): a daemon-made vGPU gets its
# ledger and board from the state keeper, holds its memory limit against the
# real driver, and a tenant's attempts to truncate what it was handed are
# refused while another vGPU's process on the same GPU keeps working.
#   bash bench/gpu/with_bundle.sh bash bench/gpu/daemon/sealed_state_smoke.sh
# Prints one line per check ("ok NAME" or "FAIL NAME: output"); exit 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/../../.."
read -r -a G <<< "${GPUSLICE_CMD:-build/bin/gpuslice}"
APP=build/bin/cuda_app
OUT=${OUT:-/tmp/gpuslice-sealed}
mkdir -p "$OUT"
export GPUSLICE_STATE_DIR=$(mktemp -d)/state
MiB=1048576
status=0
check() {  # check NAME REGEX OUTPUT
  if printf '%s' "$3" | tr '\n' ' ' | grep -Eq "$2"; then echo "ok $1"; else echo "FAIL $1: $3"; status=1; fi
}
# The daemon re-executes itself (/proc/self/exe) to start its state keeper,
# so it runs as its own binary, not through the loader prefix with_bundle.sh
# gives the CLI: its libraries by LD_LIBRARY_PATH, which only the keeper inherits.
if [ -n "${GPUSLICE_BIN:-}" ] && [ -d .device/bundle/deps ]; then
  LD_LIBRARY_PATH=$PWD/.device/bundle/deps "$GPUSLICE_BIN" daemon --metrics-address 127.0.0.1:0 > "$OUT/daemon.log" 2>&1 &
else
  "${G[@]}" daemon --metrics-address 127.0.0.1:0 > "$OUT/daemon.log" 2>&1 &
fi
daemon=$!
for _ in $(seq 100); do [ -S "$GPUSLICE_STATE_DIR/gpuslice.sock" ] && break; sleep 0.1; done

out=$("${G[@]}" run --name fill --memory 256MiB -- "$APP" init fill 1M meminfo 2>&1)
check fill_to_the_limit "fill $((256 * MiB)) meminfo 0 $((256 * MiB))" "$out"

# B: charges 64 MiB, waits (its compute thread heartbeats the board), then
# synchronises and charges again.
"${G[@]}" run --name b --memory 256MiB -- "$APP" init alloc 64M sleep 6000 ctxsync alloc 64M meminfo \
  > "$OUT/b.out" 2>&1 &
b=$!
sleep 2
listing=$(ls -a "$GPUSLICE_STATE_DIR/vgpus/b" 2>&1)
check no_ledger_file_only_a_socket "state.sock" "$listing"
if printf '%s' "$listing" | grep -qw ledger; then echo "FAIL a ledger file is there: $listing"; status=1; fi
out=$("${G[@]}" run --name t --memory 256MiB -- python3 tests/daemon/tenant_truncate.py 2>&1)
echo "$out" > "$OUT/tenant.out"
check tenant_tried "attempts" "$out"
if printf '%s' "$out" | grep -q '"truncated"'; then echo "FAIL tenant truncated something: $out"; status=1; fi
wait "$b"
check neighbour_ran_on_and_charged "meminfo $((128 * MiB)) $((256 * MiB))" "$(cat "$OUT/b.out")"
kill -0 "$daemon" 2>/dev/null && echo "ok daemon_alive" || { echo "FAIL daemon died"; status=1; }
kill -TERM "$daemon"; wait "$daemon" 2>/dev/null
echo "sealed state on a GPU: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
