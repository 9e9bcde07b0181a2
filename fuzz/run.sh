#!/usr/bin/env bash
# Builds a real libFuzzer binary (clang, ASan + UBSan, every library compiled
# with coverage) and runs it on its corpus.
#
#   fuzz/run.sh TARGET [libFuzzer flags...]
#   fuzz/run.sh config_fuzz -runs=2000000
#   fuzz/run.sh metrics_fuzz -max_total_time=120 -jobs=2
#
# New inputs go to $BUILD/fuzz-corpus/TARGET, not into the repo; copy a crash
# reproducer (crash-*) into fuzz/corpus/TARGET/ once fixed, so that the
# fuzz.TARGET.replay ctest keeps checking it. Needs clang and
# libclang-rt-14-dev, which CI does not (it only replays the corpus with g++).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: fuzz/run.sh TARGET [libFuzzer flags...], e.g. fuzz/run.sh config_fuzz -runs=2000000}
shift
build=${GPUSLICE_FUZZ_BUILD_DIR:-build-fuzz}
corpus=${GPUSLICE_FUZZ_CORPUS:-fuzz/corpus/$target}
if ! command -v clang++ >/dev/null || [ ! -f "$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a)" ]; then
  echo "fuzz/run.sh: clang++ with libFuzzer not found; apt-get install clang libclang-rt-14-dev" >&2
  exit 2
fi
[ -d "$corpus" ] || { echo "fuzz/run.sh: no corpus $corpus; create it with a few seed inputs" >&2; exit 2; }

# The libraries under test need coverage too, hence project-wide flags.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DGPUSLICE_FUZZ=ON -DGPUSLICE_BUILD_TESTS=OFF -DGPUSLICE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" --target "${target}_fuzzer"

work="$build/fuzz-corpus/$target"
mkdir -p "$work"
args=("$work" "$corpus")
[ -f "fuzz/$target.dict" ] && args+=("-dict=fuzz/$target.dict")
exec "$build/bin/${target}_fuzzer" "${args[@]}" "$@"
