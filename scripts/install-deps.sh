#!/usr/bin/env bash
# Installs gpuslice's build and test dependencies from Debian 12 packages.
# Idempotent: packages already present are skipped by apt. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3 python3-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libcpp-httplib-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-pytest python3-matplotlib
  clang
  prometheus
  spin
  podman runc
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
echo "install-deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
