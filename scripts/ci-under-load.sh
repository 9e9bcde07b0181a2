#!/usr/bin/env bash
# ci-under-load.sh — runs the GPU-turn integration tests (or all of ctest) N
# times with CPU hogs running beside them, as on a busy CI machine or a
# CPU-throttled GPU node, and reports how many runs passed.
#
#   scripts/ci-under-load.sh [-n RUNS] [-H HOGS] [--ctest | --clean-clone] [-- PYTEST_ARGS...]
#
#   -n RUNS        runs (default 3)
#   -H HOGS        busy-loop processes beside the tests (default 2)
#   --ctest        run the whole ctest suite instead of tests/integration/test_pacing.py
#   --clean-clone  what CI runs: clone this checkout's HEAD afresh for each
#                  run and run its .ci/run (set-up, build, every test)
#   PYTEST_ARGS instead of test_pacing.py, to pytest in tests/integration
#               (e.g. test_pacing.py -k cap, or other test files)
#
# GPUSLICE_BUILD_DIR names the build (default: build/ of this checkout, built
# already). The hogs are killed on exit, whatever ends the script. Logs of
# failed runs are kept and named. Exit status: 0 when every run passed.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${GPUSLICE_BUILD_DIR:-$ROOT/build}
RUNS=3
HOGS=2
MODE=pacing
PYTEST_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) RUNS=$2; shift 2 ;;
    -H) HOGS=$2; shift 2 ;;
    --ctest) MODE=ctest; shift ;;
    --clean-clone) MODE=clone; shift ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "ci-under-load: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$RUNS$HOGS" in *[!0-9]*) echo "ci-under-load: -n and -H take numbers" >&2; exit 2 ;; esac
if [ "$MODE" != clone ] && [ ! -x "$BUILD/bin/cuda_app" ]; then
  echo "ci-under-load: no build at $BUILD (build first, or set GPUSLICE_BUILD_DIR)" >&2
  exit 2
fi

HOG_PIDS=()
stop_hogs() {
  local pid
  for pid in "${HOG_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${HOG_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  HOG_PIDS=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/ci-under-load.XXXXXX")
for _ in $(seq "$HOGS"); do
  ( while :; do :; done ) &
  HOG_PIDS+=($!)
done
echo "ci-under-load: $HOGS CPU hogs (pids ${HOG_PIDS[*]}) beside $RUNS run(s) of $MODE on $(nproc) CPUs; logs in $LOGS"

passed=0
for run in $(seq "$RUNS"); do
  log=$LOGS/run-$run.log
  start=$(date +%s)
  if [ "$MODE" = ctest ]; then
    ctest --test-dir "$BUILD" --output-on-failure >"$log" 2>&1
  elif [ "$MODE" = clone ]; then
    clone=$LOGS/clone-$run
    { git clone -q "$ROOT" "$clone" && git -C "$clone" log -1 --format='clone of %h %s' && "$clone/.ci/run"; } >"$log" 2>&1
  else
    (cd "$ROOT/tests/integration" && GPUSLICE_BUILD_DIR=$BUILD /usr/bin/python3 -m pytest -q -p no:cacheprovider \
      "${PYTEST_ARGS[@]:-test_pacing.py}") >"$log" 2>&1
  fi
  rc=$?
  took=$(( $(date +%s) - start ))
  # Each run clones HEAD as it is when the run starts: name what it tested.
  tested=""
  [ "$MODE" = clone ] && tested="; $(git -C "$clone" log -1 --format=%h 2>/dev/null || echo "no clone")"
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    echo "run $run/$RUNS: pass (${took} s; load $(cut -d' ' -f1 /proc/loadavg)$tested)"
    rm -f "$log"
    [ "$MODE" = clone ] && rm -rf "$clone"
  else
    echo "run $run/$RUNS: FAIL (exit $rc, ${took} s$tested; log $log):"
    grep -E '^(FAILED|E  |ERROR)|Failed|failed' "$log" | head -20 | sed 's/^/  /'
  fi
done
rmdir "$LOGS" 2>/dev/null  # kept only when it holds a failed run's log
echo "ci-under-load: $passed of $RUNS runs passed with $HOGS CPU hogs"
[ "$passed" -eq "$RUNS" ]
