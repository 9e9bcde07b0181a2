#!/usr/bin/env python3
"""How close a --compute-cap 30 comes to 30% of the uncapped rate on the fake
driver, by kernel length: one `gpuslice run` of `cuda_app spin 3` without a
cap, one with, alternated three times. No GPU; CPU-bound on a small machine.

    bench/daemon/cap_granularity.py [FAKE_KERNEL_US=20] (run from the repo root, after the build)
"""
import sys, tempfile, pathlib, re
sys.path.insert(0, "tests/integration")
from conftest import World, CUDA_APP
def launches(flags, env=None, secs="3"):
    w = World(pathlib.Path(tempfile.mkdtemp()))
    p = w.start("run", "--name", "a", *flags, "--", CUDA_APP, "init", "spin", secs, w.path("runs"), env=env)
    out, err = p.communicate(timeout=60)
    return int(re.search(r"spin ok (\d+)", out).group(1))
env = {k: v for k, v in (a.split("=") for a in sys.argv[1:])}
for i in range(3):
    free = launches([], env)
    capped = launches(["--compute-cap", "30"], env)
    print(f"free {free}  capped {capped}  ratio {capped/free:.3f}")
