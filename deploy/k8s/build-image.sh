#!/usr/bin/env bash
# Builds the gpuslice image from a local build, with no base image and no
# network: podman build --network none of deploy/k8s/Containerfile.
#
#   deploy/k8s/build-image.sh [--build DIR] [--tag TAG]
#
#   --build DIR  a build directory (scripts/build.sh's, or a Release one);
#                default: build
#   --tag TAG    the image's name; default: localhost/gpuslice:<git revision>
#
# Image layout:
#   /opt/gpuslice/bin/gpuslice            the entry point
#   /opt/gpuslice/lib/libgpuslice-cuda.so the library (install-library's --from)
#   /opt/gpuslice/lib/shim/libcuda.so.1
#   /opt/gpuslice/deploy/k8s/             the manifests
#   /lib/..., /usr/lib/...                what gpuslice links against
# Then push it (podman push TAG REGISTRY/gpuslice:VERSION) and name it in
# deploy/k8s/kustomization.yaml (docs/kubernetes.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    *) echo "build-image: unknown argument $1 (use --build DIR, --tag TAG)" >&2; exit 2 ;;
  esac
done
[ -n "$tag" ] || tag="localhost/gpuslice:$(git rev-parse --short HEAD 2>/dev/null || echo dev)"
for f in bin/gpuslice lib/libgpuslice-cuda.so lib/shim/libcuda.so.1; do
  [ -f "$build/$f" ] || { echo "build-image: $build/$f is missing; run scripts/build.sh (or pass --build DIR)" >&2; exit 2; }
done
command -v podman >/dev/null || { echo "build-image: podman is not installed (apt-get install podman runc)" >&2; exit 2; }

. scripts/lib/rootfs.sh
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
root=$context/rootfs
rootfs_skeleton "$root"
rootfs_add_elf "$root" "$build/bin/gpuslice" /opt/gpuslice/bin/gpuslice
rootfs_add_elf "$root" "$build/lib/libgpuslice-cuda.so" /opt/gpuslice/lib/libgpuslice-cuda.so
rootfs_add_elf "$root" "$build/lib/shim/libcuda.so.1" /opt/gpuslice/lib/shim/libcuda.so.1
install -d "$root/opt/gpuslice/deploy"
cp -r deploy/k8s "$root/opt/gpuslice/deploy/"
cp deploy/k8s/Containerfile "$context/Containerfile"

podman build --network none --quiet \
  --label org.opencontainers.image.source=https://github.com/gpuslice/gpuslice \
  --label org.opencontainers.image.revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  -t "$tag" "$context" >/dev/null
echo "$tag"
