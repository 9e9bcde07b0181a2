#!/usr/bin/env bash
# Packs another build of gpuslice as a variant of .device/bundle, for
# comparing builds within one device call (bench/gpu/matrix/compare_builds.sh):
# the interposer library (and its shim), and with --cli the CLI too (needed
# when the builds' state layouts differ). The bundle's shared libraries serve
# both, so a variant is small enough to carry beside it.
#   scripts/bundle-variant.sh BUILD_DIR NAME [--cli]   -> .device/variant-NAME
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR NAME [--cli]" >&2; exit 2; }
build=$1 out=.device/variant-$2
rm -rf "$out" && mkdir -p "$out/lib/shim"
cp "$build/lib/libgpuslice-cuda.so" "$out/lib/"
cp "$build/lib/shim/libcuda.so.1" "$out/lib/shim/"
if [ "${3:-}" = "--cli" ]; then
  mkdir -p "$out/bin" && cp "$build/bin/gpuslice" "$out/bin/"
fi
strip --strip-debug "$out"/lib/*.so "$out"/lib/shim/* "$out"/bin/* 2>/dev/null || true
echo "variant: $(du -sh "$out" | cut -f1) in $out"
