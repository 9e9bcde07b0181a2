#!/usr/bin/env python3
"""The memory audit on a real GPU (docs/benchmarks.md, "Memory audit").

  allowance  what the driver holds per process beyond the ledger's charges
             (nvidia-smi's per-process used memory minus `gpuslice ls`'s
             charge), for a bare CUDA context, PyTorch ResNet-18 and
             transformer training, and CuPy: what audit.context_allowance
             must cover;
  escape     a command's child that unsets GPUSLICE_VGPU_DIR (and, the
             second time, drops LD_PRELOAD too) and takes 4 GiB under a
             1 GiB vGPU: caught by the run's audit, how long after its
             allocation the audit's line came and the child died (--audit
             kill); the same with --audit report (it lives, and is reported);
  vmm        NVIDIA's VMM idiom (create, map, release) 16 x 256 MiB under
             --memory 1GiB: 4 fit, the 5th is refused, and the GPU agrees;
  cost       ResNet-18 training steps with --audit kill against --audit off,
             alternated, median step time (the audit runs in the supervisor,
             so it should cost nothing visible).

Prints one JSON object per check and writes them all to $OUT/audit.json.
Run on a GPU machine: bash bench/gpu/with_bundle.sh python3 bench/gpu/audit/run_audit.py
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "foundation"))
import common  # noqa: E402

MiB, GiB = common.MiB, common.GiB
HERE = Path(__file__).resolve()
RESULTS = []


def record(check, **fields):
    r = {"check": check, **fields}
    RESULTS.append(r)
    print(json.dumps(r), flush=True)


def gpuslice_cmd():
    return os.environ.get("GPUSLICE_CMD", common.gpuslice_bin()).split()


def run_cmd(memory, cmd, name=None, audit="kill"):
    """`gpuslice run` of cmd in a vGPU of `memory` (through the bundle's loader path)."""
    args = [*gpuslice_cmd(), "run", "--memory", memory, "--audit", audit]
    if "BENCH_GPU" in os.environ:
        args += ["--gpu", common.GPU_INDEX]
    if name:
        args += ["--name", name]
    return args + ["--", *cmd]


# --- children ---------------------------------------------------------------

def child_work(kind):
    def work(held, go):
        if kind == "context":
            import ctypes
            cuda = ctypes.CDLL("libcuda.so.1")
            assert cuda.cuInit(0) == 0
            dev, ctx = ctypes.c_int(), ctypes.c_void_p()
            cuda.cuDeviceGet(ctypes.byref(dev), 0)
            assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
            held.append(ctx)
            return {}
        if kind == "cupy":
            import cupy
            a = cupy.random.random((4096, 4096), dtype=cupy.float32)
            for _ in range(10):
                a = a @ a
                a /= cupy.abs(a).max()
            cupy.cuda.Device().synchronize()
            held.append(a)
            return {}
        import torch
        if kind == "resnet18":
            import training
            training.train("resnet18", batch=128, steps=20, warmup=5)
        elif kind == "transformer":
            layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True).cuda()
            model = torch.nn.TransformerEncoder(layer, 6).cuda()
            opt = torch.optim.AdamW(model.parameters())
            x = torch.randn(32, 256, 512, device="cuda")
            for _ in range(20):
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
            torch.cuda.synchronize()
            held.extend([model, opt, x])
        return {"torch_reserved": torch.cuda.memory_reserved()}
    return work


def serve():
    args, rest = common.child_args()
    return common.serve_child(args.sync, args.tag, child_work(rest[0]))


# --- checks -----------------------------------------------------------------

def ls_used(name):
    r = subprocess.run([*gpuslice_cmd(), "ls", "--json", name], capture_output=True, text=True, timeout=60)
    v = json.loads(r.stdout)["vgpus"][0]
    return sum(d["memory_used_bytes"] for d in v["devices"])


def allowance():
    for kind in ("context", "resnet18", "transformer", "cupy"):
        sync = common.Sync(common.work_dir(f"audit-allow-{kind}"))
        name = f"allow-{kind}-{os.getpid()}"
        cmd = run_cmd("16GiB", common.child_cmd(HERE, sync.path, "a", kind), name=name, audit="report")
        held = {}

        def measure(payloads):
            held["charged"] = ls_used(name)
            return common.compute_apps().get(payloads["a"]["pid"])
        try:
            out = common.run_children([("a", cmd, None)], sync, while_holding=measure)
        except Exception as e:  # noqa: BLE001 - a missing framework is a result too
            record("allowance", workload=kind, error=f"{type(e).__name__}: {e}")
            continue
        payload = out["payloads"]["a"]
        if "error" in payload:
            record("allowance", workload=kind, error=payload["error"])
            continue
        used_mib = out["holding"]
        charged_mib = held["charged"] / MiB
        record("allowance", workload=kind, nvidia_smi_used_mib=used_mib, ledger_charged_mib=round(charged_mib, 1),
               beyond_ledger_mib=None if used_mib is None else round(used_mib - charged_mib, 1),
               torch_reserved_mib=round(payload.get("torch_reserved", 0) / MiB, 1))


ESCAPE = r"""
import os, sys, time, torch
x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("allocated", time.monotonic(), flush=True)
time.sleep(float(sys.argv[1]))
print("survived", flush=True)
"""


def escape(action, hold_s, drop):
    """`drop`: "env" unsets GPUSLICE_VGPU_DIR only (the library still loads,
    pointed at no vGPU); "preload" also drops LD_PRELOAD (no library)."""
    unset = ["-u", "GPUSLICE_VGPU_DIR"] + (["-u", "LD_PRELOAD"] if drop == "preload" else [])
    cmd = run_cmd("1GiB", ["env", *unset, sys.executable, "-c", ESCAPE, str(hold_s)], audit=action)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The audit's lines as they arrive, timed: when it caught the child, not
    # only when the child died.
    err_lines = []

    def read_stderr():
        for line in p.stderr:
            err_lines.append((time.monotonic(), line.rstrip("\n")))
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    allocated_at = None
    for line in p.stdout:
        if line.startswith("allocated"):
            allocated_at = float(line.split()[1])
            break
    rc = p.wait(timeout=hold_s + 120)
    ended_at = time.monotonic()
    out = p.stdout.read()
    reader.join(timeout=10)
    audit = [(t, l) for t, l in err_lines if "memory audit" in l]

    def since_alloc(lines):
        return None if allocated_at is None or not lines else round(lines[0][0] - allocated_at, 3)
    record("escape", action=action, drop=drop, allocated=allocated_at is not None, exit_code=rc,
           survived="survived" in out,
           seconds_from_alloc_to_found=since_alloc([x for x in audit if "found:" in x[1]]),
           seconds_from_alloc_to_action=since_alloc([x for x in audit if "action:" in x[1]]),
           seconds_from_alloc_to_exit=None if allocated_at is None else round(ended_at - allocated_at, 2),
           audit_lines=[l for _, l in audit[:4]],
           stderr_tail=None if audit else "\n".join(l for _, l in err_lines)[-600:])


def vmm():
    app = str(Path(common.gpuslice_bin()).parent / "cuda_app")
    args = ["init"] + ["vmmmap", "256M"] * 6 + ["meminfo", "hold"]
    name = f"vmm-{os.getpid()}"
    cmd = run_cmd("1GiB", [app, "--lookup=dlsym", *args], name=name)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line.strip())
        if line.startswith("meminfo"):
            break
    apps = common.compute_apps()
    charged = ls_used(name)
    p.kill()
    p.wait()
    results = [l.split()[1] for l in lines if l.startswith("vmmmap")]
    record("vmm", results=results, meminfo=[l for l in lines if l.startswith("meminfo")],
           ledger_charged_mib=charged / MiB, nvidia_smi_used_mib=sorted(v for v in apps.values() if v)[-1:])


COST_CHILD = r"""
import sys, json
sys.path.insert(0, %r)
import training
r = training.train("resnet18", batch=128, steps=200, warmup=30)
s = sorted(r["step_s"]); print("STEPS", json.dumps({"median_ms": s[len(s) // 2] * 1e3}))
"""


def cost(rounds):
    if rounds <= 0:
        return
    times = {"kill": [], "off": []}
    for i in range(rounds):
        for action in (("kill", "off") if i % 2 == 0 else ("off", "kill")):
            cmd = run_cmd("8GiB", [sys.executable, "-c", COST_CHILD % str(HERE.parents[1] / "foundation")],
                          audit=action)
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            line = [l for l in r.stdout.splitlines() if l.startswith("STEPS")]
            if not line:
                record("cost", error=r.stderr[-500:])
                return
            times[action].append(json.loads(line[0].split(" ", 1)[1])["median_ms"])
    med = {a: common.median(v) for a, v in times.items()}
    record("cost", step_ms=times, median_ms=med, ratio_kill_over_off=round(med["kill"] / med["off"], 4))


def main():
    if "--child" in sys.argv:
        return serve()
    parts = os.environ.get("AUDIT_PARTS", "allowance,escape,vmm,cost").split(",")
    if "allowance" in parts:
        allowance()
    if "escape" in parts:
        for drop in ("env", "preload"):
            escape("kill", 60, drop)
            escape("report", 4, drop)
    if "vmm" in parts:
        vmm()
    if "cost" in parts:
        cost(int(os.environ.get("AUDIT_COST_ROUNDS", "3")))
    out = os.environ.get("OUT")
    if out:
        Path(out, f"audit-{'-'.join(parts)}.json").write_text(json.dumps(RESULTS, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
