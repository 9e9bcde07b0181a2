#!/usr/bin/env python3
"""The image's runtime stage (deploy/k8s/Dockerfile) installs every shared
library the built `gpuslice` needs.

The image is not built in CI (its base images come from registries CI cannot
reach), so this checks what can drift without anyone noticing: a new shared
dependency of the executable (or one that stopped being linked in, as gRPC
did) against the Debian packages the runtime stage installs, with their
dependencies, and what debian:12-slim already has.

    tests/k8s/image_libraries_test.py BUILD_DIR
"""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# In debian:12-slim already (priority required, or essential's dependencies).
BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}


def runtime_packages(dockerfile):
    """The packages the last stage installs with apt-get."""
    stages = re.split(r"^FROM\s", open(dockerfile).read(), flags=re.M)
    last = stages[-1]
    m = re.search(r"apt-get install\s+(.*?)&&", last, re.S)
    assert m, f"{dockerfile}: no apt-get install in the runtime stage"
    words = m.group(1).replace("\\", " ").split()
    return {w for w in words if not w.startswith("-")}


def depends(package, depth=2):
    found = {package}
    frontier = {package}
    for _ in range(depth):
        out = subprocess.run(["apt-cache", "depends", "--no-recommends", "--no-suggests", *sorted(frontier)],
                             capture_output=True, text=True).stdout
        new = {l.split(":", 1)[1].strip() for l in out.splitlines() if l.strip().startswith("Depends:")}
        new = {p.strip("<>") for p in new} - found
        found |= new
        frontier = new
    return found


def package_of(library):
    out = subprocess.run(["dpkg", "-S", "*/" + os.path.basename(library)], capture_output=True, text=True).stdout
    packages = {l.split(":", 1)[0].split(":")[0] for l in out.splitlines() if ":" in l}
    return {p.split(":")[0] for p in packages}


def main():
    build = sys.argv[1]
    exe = os.path.join(build, "bin", "gpuslice")
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
    libraries = [l.split("=>")[1].split()[0] for l in ldd.splitlines() if "=> /" in l]
    assert libraries, f"ldd found no libraries in {exe}"
    installed = set(BASE)
    for p in runtime_packages(os.path.join(ROOT, "deploy", "k8s", "Dockerfile")):
        installed |= depends(p)
    missing = []
    for lib in libraries:
        owners = package_of(lib)
        if not owners:
            missing.append(f"{lib} (no Debian package owns it)")
        elif not owners & installed:
            missing.append(f"{lib} (package {' or '.join(sorted(owners))})")
    if missing:
        print("deploy/k8s/Dockerfile's runtime stage lacks what `gpuslice` links against:\n  " +
              "\n  ".join(missing) + "\nadd the packages to its apt-get install line", file=sys.stderr)
        return 1
    print(f"all {len(libraries)} shared libraries of {exe} are in the image's packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
