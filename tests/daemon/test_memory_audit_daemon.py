"""The daemon's memory audit (src/daemon/node_audit.h): the driver's
per-process memory (the fake NVML reads what each fake-driver process
publishes under FAKE_GPU_PROCESS_DIR) against every vGPU's ledger."""
import os
import subprocess

from conftest import CUDA_APP, poll, scrape


def config(dworld, body):
    path = dworld.path("config.yaml")
    with open(path, "w") as f:
        f.write("version: 1\n" + body)
    return path


def test_a_gpu_process_of_no_vgpu_is_killed_when_the_config_says_so(dworld):
    procs = dworld.path("gpu-processes")
    os.makedirs(procs)
    env = {"FAKE_GPU_PROCESS_DIR": procs}
    d = dworld.daemon(["--config", config(dworld, "audit:\n  unmanaged: kill\n  grace_ms: 200\n")], env=env)
    # A CUDA program started outside gpuslice: it holds GPU memory that no vGPU accounts.
    stray = subprocess.Popen([CUDA_APP, "--lookup=dlsym", "init", "alloc", "256M", "hold"],
                             env={**dworld.env, **env}, stdout=subprocess.PIPE, text=True)
    dworld.procs.append(stray)
    assert stray.wait(timeout=60) == -9
    poll(lambda: "belongs to no vGPU" in d.text(), 10, "the audit's log line")
    assert "action: kill" in d.text()
    poll(lambda: 'gpuslice_vgpu_violations_total{vgpu="",kind="unmanaged"} 1' in scrape(d.metrics_port), 10,
         "the violation counted")


def test_by_default_a_process_of_no_vgpu_is_only_reported_and_one_in_a_vgpu_is_left_alone(dworld):
    procs = dworld.path("gpu-processes")
    os.makedirs(procs)
    env = {"FAKE_GPU_PROCESS_DIR": procs}
    d = dworld.daemon(env=env)
    go = dworld.path("go")
    stray = subprocess.Popen([CUDA_APP, "--lookup=dlsym", "init", "alloc", "256M", "await", go],
                             env={**dworld.env, **env}, stdout=subprocess.PIPE, text=True)
    dworld.procs.append(stray)
    inside = dworld.start("run", "--name", "in", "--memory", "512MiB", "--", CUDA_APP, "--lookup=dlsym", "init",
                          "alloc", "256M", "await", go, env=env)
    poll(lambda: "belongs to no vGPU; action: report" in d.text(), 20, "the audit's report")
    open(go, "w").close()
    assert stray.wait(timeout=30) == 0, "reported, not killed"
    assert inside.wait(timeout=30) == 0
    audit_lines = [l for l in d.text().splitlines() if "memory audit" in l]
    assert audit_lines and all(f"process {stray.pid} " in l for l in audit_lines), audit_lines
