#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test (unit, fake-driver,
# integration). This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --preset default -j "$(nproc)"
