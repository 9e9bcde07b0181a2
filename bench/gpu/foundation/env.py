#!/usr/bin/env python3
"""Check 10: the environment the results were taken in. It passes when the GPU
answers nvidia-smi and gpuslice's binary and library are present."""

import datetime
import importlib
import os
import platform
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402


def command(*cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=common.REPO)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def version(module):
    try:
        return importlib.import_module(module).__version__
    except Exception as e:  # noqa: BLE001 - a missing package is a finding
        return f"unavailable: {type(e).__name__}: {e}"


def real_libcuda():
    """libcuda.so.1 as the dynamic loader's cache lists it."""
    for line in (command("ldconfig", "-p") or "").splitlines():
        if "libcuda.so.1 " in line and "=>" in line:
            return line.split("=>")[1].strip()
    return None


def body():
    name, driver, memory = common.smi("-i", common.GPU_INDEX,
                                      "--query-gpu=name,driver_version,memory.total")[0]
    import torch

    lib = common.REPO / "build/lib/libgpuslice-cuda.so"
    shim = common.REPO / "build/lib/shim/libcuda.so.1"
    fields = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": {"name": name, "driver_version": driver, "memory_total_mib": int(memory)},
        "host": platform.node(), "kernel": platform.release(), "python": platform.python_version(),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "torchvision": version("torchvision"), "cupy": version("cupy"),
        "nvcc": (command("nvcc", "--version") or "").splitlines()[-1:],
        "real_libcuda": real_libcuda(),
        "git_head": command("git", "rev-parse", "HEAD"),
        "gpuslice_bin": common.gpuslice_bin(), "gpuslice_lib": str(lib),
        "state_dir": os.environ.get("GPUSLICE_STATE_DIR"),
    }
    present = {"gpuslice_bin": os.access(common.gpuslice_bin(), os.X_OK),
               "gpuslice_lib": lib.is_file(), "shim_libcuda": shim.is_file()}
    fields["present"] = present
    return all(present.values()), fields


if __name__ == "__main__":
    sys.exit(common.run_check("env", body))
