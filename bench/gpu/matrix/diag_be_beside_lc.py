#!/usr/bin/env python3
"""Where a best-effort training loses throughput beside a latency-critical
process: the same BE run under settings that add one mechanism at a time.

    bash bench/gpu/with_bundle.sh python3 bench/gpu/matrix/diag_be_beside_lc.py

Settings, in order (each: the BE starts, warms up, then SECONDS of window
with the LC beside it, if any):
  bare               the BE alone, no gpuslice
  gs_alone           the BE alone in a vGPU (--priority be): the library's cost
  gs_idle_lc         + an LC vGPU that launches once a second: the BE is paced
                     and sliced beside an LC, with no LC work to speak of
  gs_tiny            + the tiny LC (a ~50 µs kernel every 5 ms)
  gs_tiny_hold_off   the same, the LC's automatic hold off (GPUSLICE_LC_HOLD=off)
  gs_tiny_slice2048  the same, the BE's slice beside an LC 2048 µs instead of
                     the policy's default (the stored policy's
                     be_slice_beside_lc_us)
  stock_tiny         the BE and the tiny LC, no gpuslice
  bare_end           the BE alone again: how far alone drifted
Results: $OUT/diag.json and $OUT/diag.md (BE steps/s over the window and as a
fraction of bare; LC p50/p99). Knobs: BE_KIND (launch; gpu, mem), DIAG_SECONDS
(10), SETTINGS (a comma list of the names above).
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = Path(os.environ.get("OUT", "/tmp/gpuslice-diag"))
GPUSLICE = shlex.split(os.environ.get("GPUSLICE_CMD", str(ROOT / "build/bin/gpuslice")))
LC_BE = os.environ.get("LC_BE", str(ROOT / "build/bench-compute/lc_be"))
PYTHON = os.environ.get("PYTHON", sys.executable)
BE_KIND = os.environ.get("BE_KIND", "launch")
SECONDS = float(os.environ.get("DIAG_SECONDS", "10"))
POLICY_DEFAULTS = {"be_period_us": 10000, "be_min_slice_us": 1000, "be_slice_beside_lc_us": 50,
                   "be_period_with_lc_us": 2000, "be_min_slice_with_lc_us": 250, "lc_slice_us": 5000000,
                   "lc_shared_slice_us": 2048}  # policy/timeslice_policy.h
SETTINGS = {
    "bare": dict(gs=False, lc=None),
    "gs_alone": dict(gs=True, lc=None),
    "gs_idle_lc": dict(gs=True, lc="idle"),
    "gs_tiny": dict(gs=True, lc="tiny"),
    "gs_tiny_hold_off": dict(gs=True, lc="tiny", lc_env={"GPUSLICE_LC_HOLD": "off"}),
    "gs_tiny_slice2048": dict(gs=True, lc="tiny", policy={"be_slice_beside_lc_us": 2048}),
    "stock_tiny": dict(gs=False, lc="tiny"),
    "bare_end": dict(gs=False, lc=None),
}


def be_cmd(out):
    if BE_KIND == "gpu":
        return [PYTHON, str(ROOT / "bench/gpu/compute/train.py"), "600", out]
    return [PYTHON, str(HERE / "be_load.py"), BE_KIND, "600", out]


def wrapped(gs, name, priority, cmd):
    return GPUSLICE + ["run", "--name", name, "--priority", priority, "--"] + cmd if gs else cmd


def wait_file(path, proc, limit_s):
    end = time.monotonic() + limit_s
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError(f"exited {proc.returncode} before {path}")
        if time.monotonic() > end:
            raise RuntimeError(f"no {path} in {limit_s} s")
        time.sleep(0.05)


def run_setting(name, s, work):
    work.mkdir(parents=True)
    state = tempfile.mkdtemp(prefix="gpuslice-diag-state-")
    if s.get("policy"):
        policy = {**POLICY_DEFAULTS, **s["policy"]}
        Path(state, "policy").write_text("".join(f"{k} {v}\n" for k, v in policy.items()))
    env = dict(os.environ, GPUSLICE_STATE_DIR=state, GPUSLICE_LOG="info",
               READY_FILE=str(work / "ready"), STOP_FILE=str(work / "stop"))
    be_out = work / "be.json"
    with open(work / "be.log", "w") as log:
        be = subprocess.Popen(wrapped(s["gs"], "be", "be", be_cmd(str(be_out))), env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        wait_file(work / "ready", be, 120)
        lc = None
        t0 = time.monotonic()
        if s["lc"]:
            lc_env = dict(env, PERIOD_US="1000000" if s["lc"] == "idle" else "5000", **s.get("lc_env", {}))
            with open(work / "lc.log", "w") as log:
                lc = subprocess.Popen(wrapped(s["gs"], "lc", "lc", [LC_BE, "lc", f"{SECONDS:g}",
                                                                   str(work / "lc.json")]),
                                      env=lc_env, stdout=log, stderr=subprocess.STDOUT)
            lc.wait(timeout=SECONDS + 60)
        else:
            time.sleep(SECONDS + 1)
        t1 = time.monotonic()
    finally:
        (work / "stop").touch()
        try:
            be.wait(timeout=60)
        except subprocess.TimeoutExpired:
            be.kill()
    ends = json.loads(be_out.read_text())["step_ends"]
    # The LC's own start (its CUDA context) takes about a second: skip it.
    a, b = t0 + 1.5, t1
    n = sum(1 for t in ends if a <= t <= b)
    res = {"be_steps_per_s": round(n / (b - a), 3), "window_s": round(b - a, 2)}
    if s["lc"] and (work / "lc.json").exists():
        lcr = json.loads((work / "lc.json").read_text())
        res.update(lc_p50_us=lcr.get("p50_us"), lc_p99_us=lcr.get("p99_us"), lc_n=lcr.get("n"))
    return res


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    work_root = Path(tempfile.mkdtemp(prefix="gpuslice-diag-"))
    names = [n.strip() for n in os.environ.get("SETTINGS", ",".join(SETTINGS)).split(",") if n.strip()]
    results = {"meta": {"be": BE_KIND, "seconds": SECONDS, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                                time.gmtime())},
               "settings": {}}
    for name in names:
        try:
            results["settings"][name] = run_setting(name, SETTINGS[name], work_root / name)
        except Exception as e:  # a failed setting is reported, the rest still run
            results["settings"][name] = {"error": str(e)}
        print(name, results["settings"][name], flush=True)
        (OUT / "diag.json").write_text(json.dumps(results, indent=1))
    bare = results["settings"].get("bare", {}).get("be_steps_per_s")
    lines = [f"# BE ({BE_KIND}) beside an LC, one mechanism at a time", "",
             f"{results['meta']['date']}; window {SECONDS:g} s", "",
             "| setting | BE steps/s | % of bare | LC p50 / p99 µs |", "|---|---|---|---|"]
    for name, r in results["settings"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} | | |")
            continue
        pct = f"{100 * r['be_steps_per_s'] / bare:.1f}%" if bare else "—"
        lcs = f"{r['lc_p50_us']:.0f} / {r['lc_p99_us']:.0f}" if r.get("lc_p50_us") else "—"
        lines.append(f"| {name} | {r['be_steps_per_s']} | {pct} | {lcs} |")
    (OUT / "diag.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    subprocess.run(["tar", "-czf", str(OUT / "diag-logs.tgz"), "-C", str(work_root), "."], check=False)


if __name__ == "__main__":
    main()
