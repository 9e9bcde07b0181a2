"""GPU time and energy per vGPU (src/daemon/gpu_usage_meter.h): integrated
from every NVML utilisation sample, and the device's energy split into an
idle line and the vGPUs' shares, adding up to the device's. The fake NVML's
utilisation and energy are scripted through files."""
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
    # The energy counter climbs by 300 J for every scrape-visible step.
    mj = 1_000_000
    for _ in range(200):
        mj += 300_000
        with open(energy, "w") as f:
            f.write(f"0 {mj} 300000\n")
        text = scrape(d.metrics_port)
        seconds = series(text, "gpuslice_vgpu_gpu_seconds_total")
        if seconds.get('gpu="0",vgpu="busy"', 0) > 1.0:
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
