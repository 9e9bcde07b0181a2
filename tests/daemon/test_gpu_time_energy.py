"""GPU time and energy per vGPU (src/daemon/gpu_usage_meter.h): integrated
from every NVML utilisation sample, and the device's energy split into an
idle line and the vGPUs' shares, adding up to the device's. The fake NVML's
utilisation and energy are scripted through files."""
import os
import time

from conftest import poll, scrape, series


def test_gpu_seconds_and_energy_per_vgpu_add_up_to_the_devices(dworld):
    samples, energy = dworld.path("utilisation"), dworld.path("energy")
    open(samples, "w").close()
    with open(energy, "w") as f:
        f.write("0 1000000 70000\n")
    d = dworld.daemon(env={"FAKE_NVML_PROCESS_UTILIZATION_FILE": samples, "FAKE_NVML_ENERGY_FILE": energy})
    ready, go = dworld.path("ready"), dworld.path("go")
    app = dworld.start("run", "--name", "busy", "--", *dworld.app_cmd(["init", "alloc", "1M", "ready", ready,
                                                                       "await", go]))
    pid = int(dworld.wait_for_file(ready))
    with open(samples, "w") as f:
        f.write(f"{pid} 50\n999999 25\n")  # the second pid belongs to no vGPU
    # The energy counter climbs by 300 J for every scrape-visible step. Each
    # step is renamed into place: the daemon must never read a half-written
    # file (a loaded machine can stop this test between truncate and write).
    mj = 1_000_000
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        mj += 300_000
        with open(energy + ".new", "w") as f:
            f.write(f"0 {mj} 300000\n")
        os.replace(energy + ".new", energy)
        text = scrape(d.metrics_port)
        seconds = series(text, "gpuslice_vgpu_gpu_seconds_total")
        if seconds.get('gpu="0",vgpu="busy"', 0) > 1.0 and series(text, "gpuslice_gpu_idle_energy_joules_total"):
            break
        time.sleep(0.1)
    text = scrape(d.metrics_port)
    seconds = series(text, "gpuslice_vgpu_gpu_seconds_total")
    assert seconds['gpu="0",vgpu="busy"'] > 1.0
    assert seconds['gpu="0",vgpu=""'] > 0.0
    # busy ran at 50%, the stray at 25%: twice the GPU time.
    assert 1.6 < seconds['gpu="0",vgpu="busy"'] / seconds['gpu="0",vgpu=""'] < 2.4
    joules = series(text, "gpuslice_vgpu_energy_joules_total")
    idle = series(text, "gpuslice_gpu_idle_energy_joules_total")['gpu="0"']
    device = series(text, "gpuslice_gpu_energy_joules_total")['gpu="0"']
    assert device > 0
    assert sum(joules.values()) + idle == pytest_approx(device)
    open(go, "w").close()
    app.communicate(timeout=30)


def pytest_approx(x):
    import pytest
    return pytest.approx(x, rel=1e-6, abs=1e-6)


def test_vgpus_sharing_a_gpu_are_split_by_what_the_boards_saw_not_by_overlapping_samples(dworld):
    """Three paced vGPUs at 20/30/50 on one GPU. NVML's per-process samples
    overlap under time-slicing (each process 60% of a GPU that is 100% busy,
    as on an H100: docs/benchmarks.md, "NVML's raw samples"), so they would
    split it equally. The meter divides the GPU's busy time by what the
    boards saw running (daemon/board_sampler.h), which follows the turns."""
    samples, device = dworld.path("utilisation"), dworld.path("device")
    open(samples, "w").close()
    with open(device, "w") as f:
        f.write("0 100\n")
    d = dworld.daemon(env={"FAKE_NVML_PROCESS_UTILIZATION_FILE": samples,
                           "FAKE_NVML_DEVICE_UTILIZATION_FILE": device})
    go = dworld.path("go")
    apps, pids = [], []
    for name, share in (("a", "20"), ("b", "30"), ("c", "50")):
        ready = dworld.path(name + ".ready")
        apps.append(dworld.start("run", "--name", name, "--compute", share, "--",
                                 *dworld.app_cmd(["init", "ready", ready, "await", go, "spin", "60",
                                                  dworld.path(name + ".runs")]),
                                 env={"FAKE_KERNEL_US": "100"}))
        pids.append(int(dworld.wait_for_file(ready)))
    with open(samples, "w") as f:
        f.write("".join(f"{pid} 60\n" for pid in pids))
    open(go, "w").close()

    def gpu_seconds():
        s = series(scrape(d.metrics_port), "gpuslice_vgpu_gpu_seconds_total")
        return {n: s.get(f'gpu="0",vgpu="{n}"', 0.0) for n in ("a", "b", "c")}

    # The pass that spans the release mixes idle samples in: start after it.
    start = gpu_seconds()
    for _ in range(2):
        start = poll(lambda: (lambda now: now if now != start else None)(gpu_seconds()), timeout=30,
                     what="a sampler pass")
    grown = poll(lambda: (lambda now: {n: now[n] - start[n] for n in now}
                          if sum(now.values()) - sum(start.values()) > 2.5 else None)(gpu_seconds()),
                 timeout=45, what="2.5 GPU-seconds measured")
    assert grown["a"] > 0, grown
    # Equal samples would give 1.0; the turns give 50/20 = 2.5.
    assert grown["c"] / grown["a"] > 1.6, f"measured {grown}: split like the samples, not the turns"
    assert grown["a"] < grown["b"] < grown["c"], grown
    for app in apps:  # measured: the spins need not run their minute out
        app.terminate()
        app.communicate(timeout=60)
