#!/usr/bin/env bash
# Builds the gpuslice image with deploy/k8s/build-image.sh and runs the
# kubelet-side conformance tests with the device plugin, then the DRA
# plugin, inside a container of it, against the fake kubelet through a
# mounted socket directory. Each runs a CUDA application (cuda_app on the
# fake driver) in a second container, set up only by the plugin's CDI spec.
#
#   tests/k8s/image_test.sh BUILD_DIR [gtest flags]
#
# Exits 77 (ctest: skipped) where podman or runc is missing or cannot run a
# container here, and says why.
set -euo pipefail
build=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)

skip() { echo "image_test: SKIPPED: $*"; exit 77; }
command -v podman >/dev/null || skip "podman is not installed (scripts/install-deps.sh installs it)"
command -v runc >/dev/null || skip "runc is not installed (scripts/install-deps.sh installs it)"
podman info >/dev/null 2>&1 || skip "podman cannot run here: $(podman info 2>&1 | tail -1)"

tag=localhost/gpuslice-test:$$
app_tag=localhost/gpuslice-test-app:$$
context=$(mktemp -d)
cleanup() {
  rm -rf "$context"
  podman rmi -f "$tag" "$app_tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$repo/deploy/k8s/build-image.sh" --build "$build" --tag "$tag" >/dev/null
echo "image_test: built $tag: $(podman image inspect --format '{{.Size}}' "$tag") bytes"

# The application's image: cuda_app and the fake driver where the plugin's
# spec says the driver is (--container-driver-path's default); nothing of
# gpuslice, which only the CDI spec brings in.
. "$repo/scripts/lib/rootfs.sh"
rootfs_skeleton "$context/rootfs"
rootfs_add_elf "$context/rootfs" "$build/bin/cuda_app" /usr/local/bin/cuda_app
rootfs_add_elf "$context/rootfs" "$build/fake_driver/libcuda.so.1" /usr/lib/x86_64-linux-gnu/libcuda.so.1
printf 'FROM scratch\nCOPY rootfs/ /\n' >"$context/Containerfile"
podman build --network none --quiet -t "$app_tag" "$context" >/dev/null

# The probe: a container must run before the test means anything.
out=$(podman --runtime runc run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
  "$tag" install-library --from /opt/gpuslice/lib --to /tmp/lib 2>&1) ||
  { echo "image_test: the image does not run: $out" >&2; exit 1; }

export GPUSLICE_TEST_IMAGE=$tag GPUSLICE_TEST_APP_IMAGE=$app_tag
"$build/bin/gpuslice_kubelet_conformance_test" "$@"
"$build/bin/gpuslice_dra_kubelet_conformance_test" "$@"
