#!/usr/bin/env bash
# Packs what a GPU machine needs to run gpuslice built here ($BUILD, default
# build/) into .device/bundle:
#   bin/ lib/ (our binaries and libraries, stripped) and deps/ (every shared
#   library they need that is not part of glibc), because GPU machines cannot
#   install Debian packages. Use there with LD_LIBRARY_PATH=.device/bundle/deps
#   for the CLI and daemon only (the CUDA library needs nothing but libc).
# Carry it with the device tool: carry [".device/bundle"].
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}  # the build directory to pack
out=.device/bundle
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib/shim" "$out/deps"
for f in "$build"/bin/*; do
  [ -f "$f" ] && [ -x "$f" ] && case "$(basename "$f")" in *_test|*_tests|fake_*) ;; *) cp "$f" "$out/bin/";; esac
done
cp "$build"/lib/libgpuslice-cuda.so "$out/lib/"
cp "$build"/lib/shim/libcuda.so.1 "$out/lib/shim/"
for d in "$build"/bench-*; do [ -d "$d" ] && cp -r "$d" "$out/"; done
strip --strip-debug "$out"/bin/* "$out"/lib/*.so "$out"/lib/shim/* 2>/dev/null || true
# Non-glibc dependencies of our binaries.
ldd "$out"/bin/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    *) cp -L "$lib" "$out/deps/";;
  esac
done
# The Python package (task API), with its own non-glibc libraries kept apart,
# so that a Python application gets only those on its loader path.
if [ -d "$build/python/gpuslice" ]; then
  mkdir -p "$out/python" "$out/python-deps"
  cp -r "$build/python/gpuslice" "$out/python/"
  for so in "$out"/python/gpuslice/*.so; do
    [ -f "$so" ] || continue
    strip --strip-debug "$so" 2>/dev/null || true
    ldd "$so" | awk '/=> \//{print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
        *) cp -L "$lib" "$out/python-deps/";;
      esac
    done
  done
fi
# Headers for building the Python package on a GPU machine whose Python is
# not Debian's (bench/gpu/levels/build_python.sh).
mkdir -p "$out/include"
for h in pybind11 yaml-cpp; do [ -d "/usr/include/$h" ] && cp -r "/usr/include/$h" "$out/include/"; done
# The commit the bundle was built from (and whether the tree had changes), for
# results to name: the device's copy of the repository may hold an older HEAD.
{ git rev-parse --short HEAD; git diff --quiet HEAD -- || echo "+changes"; } 2>/dev/null | paste -sd' ' >"$out/GIT" || true
echo "bundle: $(du -sh "$out" | cut -f1) in $out"
