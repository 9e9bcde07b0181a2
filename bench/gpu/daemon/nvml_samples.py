"""Records NVML's raw utilisation samples on one GPU, for checking how the
daemon's meter integrates them (issue 15): every per-process sample
(nvmlDeviceGetProcessUtilization: pid, timestamp, smUtil) and every device
sample (nvmlDeviceGetSamples, NVML_GPU_UTILIZATION_SAMPLES: timestamp,
percent), read every POLL_S s for DURATION_S s, each process named by the
vGPU directory in its environment (GPUSLICE_VGPU_DIR) where readable.

    python3 bench/gpu/daemon/nvml_samples.py OUT.json

Knobs: BENCH_GPU (0), DURATION_S (30), POLL_S (0.5). Needs only
libnvidia-ml.so.1 (ctypes), so it runs beside any benchmark.
"""
import ctypes
import json
import os
import sys
import time


class ProcessSample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class Sample(ctypes.Structure):
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("value", ctypes.c_ulonglong)]  # nvmlValue_t: 8 bytes


NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7


def vgpu_of(pid, cache={}):
    if pid not in cache:
        name = ""
        try:
            for entry in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                if entry.startswith(b"GPUSLICE_VGPU_DIR="):
                    name = os.path.basename(entry.split(b"=", 1)[1].decode().rstrip("/"))
        except OSError:
            pass
        cache[pid] = name
    return cache[pid]


def main():
    out = sys.argv[1]
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    assert nvml.nvmlInit_v2() == 0
    handle = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(int(os.environ.get("BENCH_GPU", "0")), ctypes.byref(handle)) == 0
    duration = float(os.environ.get("DURATION_S", "30"))
    poll = float(os.environ.get("POLL_S", "0.5"))
    seen_process = 0
    seen_device = 0
    processes, device = [], []
    end = time.time() + duration
    while time.time() < end:
        count = ctypes.c_uint(256)
        buf = (ProcessSample * 256)()
        r = nvml.nvmlDeviceGetProcessUtilization(handle, buf, ctypes.byref(count), ctypes.c_ulonglong(seen_process))
        if r == 0:
            for k in range(count.value):
                s = buf[k]
                processes.append({"pid": s.pid, "ts": s.timeStamp, "sm": s.smUtil, "vgpu": vgpu_of(s.pid)})
                seen_process = max(seen_process, s.timeStamp)
        elif r not in (NVML_ERROR_NOT_FOUND,):
            processes.append({"error": r, "at": time.time()})
        kind = ctypes.c_int()
        count = ctypes.c_uint(0)
        r = nvml.nvmlDeviceGetSamples(handle, NVML_GPU_UTILIZATION_SAMPLES, ctypes.c_ulonglong(seen_device),
                                      ctypes.byref(kind), ctypes.byref(count), None)
        if r == 0 and count.value > 0:
            buf = (Sample * count.value)()
            r = nvml.nvmlDeviceGetSamples(handle, NVML_GPU_UTILIZATION_SAMPLES, ctypes.c_ulonglong(seen_device),
                                          ctypes.byref(kind), ctypes.byref(count), buf)
            if r == 0:
                for k in range(count.value):
                    s = buf[k]
                    if s.timeStamp > seen_device:
                        device.append({"ts": s.timeStamp, "pct": s.value & 0xFFFFFFFF})
                seen_device = max([seen_device] + [d["ts"] for d in device])
        elif r not in (0, NVML_ERROR_NOT_FOUND):
            device.append({"error": r, "at": time.time()})
        time.sleep(poll)
    with open(out, "w") as f:
        json.dump({"value_type": kind.value, "processes": processes, "device": device}, f)
    print(f"nvml_samples: {len(processes)} process samples, {len(device)} device samples -> {out}")


if __name__ == "__main__":
    main()
